"""The record ``checkpoint`` makes, against central differences like every other rule."""

import numpy as np

from sensitivities.checkpoint import checkpointed
from tape import checkpoint
from tests.sensitivities.cases import Case, rule_test
from tests.strategies import SHAPES, arrays


def block(x, w):
    return np.tanh(x * w) + np.sin(x) * w[..., :1]


def draw(data):
    shape = data.draw(SHAPES.filter(len))
    return data.draw(arrays(shape)), data.draw(arrays(shape[-1:]))


CASES = [Case(checkpointed, draw, fn=checkpoint(block), argnums=(0, 1))]

test_checkpoint_rule = rule_test(CASES)
