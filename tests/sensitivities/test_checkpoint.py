"""The record ``checkpoint`` makes, against central differences like every other rule."""

import numpy as np

from sensitivities.checkpoint import checkpointed
from tape import checkpoint
from tests.sensitivities.cases import Case, rule_test
from tests.strategies import SHAPES, arrays


def block(x, w):
    return np.tanh(x * w) + np.sin(x) * w[..., :1]


def scaled_in_place(h, w):
    h *= w  # a write into its argument, which the caller sees
    return {"y": np.tanh(h), "norm": np.sum(h**2)}


def through_a_container(x, w):
    h = x * 1.0
    out = checkpoint(scaled_in_place)(h, w)
    return out["y"] * out["norm"] + h


def draw(data):
    shape = data.draw(SHAPES.filter(len))
    return data.draw(arrays(shape)), data.draw(arrays(shape[-1:]))


CASES = [
    Case(checkpointed, draw, fn=checkpoint(block), argnums=(0, 1)),
    Case(checkpointed, draw, fn=through_a_container, argnums=(0, 1), name="checkpoint_writes"),
]

test_checkpoint_rule = rule_test(CASES)
