"""sensitivities.batching: each batching rule against a loop over the batch."""

import numpy as np
import pytest

from sensitivities import special
from sensitivities.batching import batching, batching_rule_of

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("f", [special.softmax, special.log_softmax])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_softmax_rules_equal_a_loop(f, axis):
    X = RNG.standard_normal((4, 2, 3))
    got = batching_rule_of(f)((X, axis), (True, False))
    np.testing.assert_allclose(got, np.stack([f(x, axis) for x in X]))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_rule_equals_a_loop(axis, keepdims):
    A = RNG.standard_normal((4, 2, 3))
    B = RNG.uniform(0.5, 2.0, (2, 3))
    rule = batching_rule_of(special._logsumexp)
    got = rule((A, axis, B, keepdims), (True, False, False, False))
    np.testing.assert_allclose(got, np.stack([special._logsumexp(a, axis, B, keepdims) for a in A]))
    assert rule((A, axis, B[0], keepdims), (True, False, False, False)) is NotImplemented


def test_polygamma_rule_broadcasts_like_one_example():
    x = RNG.uniform(0.5, 3.0, (4, 3))
    got = batching_rule_of(special.polygamma)((1, x), (False, True))
    np.testing.assert_allclose(got, np.stack([special.polygamma(1, v) for v in x]))
    n = np.array([0, 1, 2, 1])
    got = batching_rule_of(special.polygamma)((n, x), (True, True))
    np.testing.assert_allclose(got, np.stack([special.polygamma(k, v) for k, v in zip(n, x)]))


def test_registering_a_rule():
    def f(x):
        return x

    rule = batching(f)(lambda args, batched: args[0])
    assert batching_rule_of(f) is rule
    with pytest.raises(TypeError):
        batching(3)


# -- vmap's own primitives: in and out of the batch, broadcast and its sum -------------------
# (their sensitivities are checked here against finite differences with every other rule)


from tape import Tape, vmap  # noqa: E402
from tape.transforms.batching import batch_in, batch_out, batch_sum, broadcast  # noqa: E402
from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.strategies import arrays  # noqa: E402


def _round_trip(x):
    level = Tape().level  # a fresh level, innermost, as each vmap call takes
    b = batch_in(x, 1, level)  # the batch on axis 1 of x: 2 examples of shape (3,)
    y = np.sin(b) * b  # (an unbatched node meets batched ones only inside vmap)
    return batch_out(y, 0, level, 2) + np.exp(batch_sum(b, level))


def _broadcast_trip(x):
    level = Tape().level
    b = broadcast(x, level, 4)
    return batch_sum(np.cos(b) * b, level)


def _draw(data):
    return (data.draw(arrays((3, 2))),)


CASES = [
    Case(batch_in, _draw, fn=_round_trip),
    Case(batch_out, _draw, fn=_round_trip),
    Case(batch_sum, _draw, fn=_round_trip),
    Case(broadcast, _draw, fn=_broadcast_trip),
]

test_rules = rule_test(CASES, max_examples=5)


@pytest.mark.parametrize(
    "f, width",
    [
        (np.ravel, 6),
        (lambda x: np.concatenate([x, x], axis=None), 12),
        (lambda x: np.outer(x[0], x[1]), None),
        (lambda x: np.linalg.norm(x), None),
        (lambda x: np.sum(x, axis=None), None),
    ],
)
def test_a_batch_of_no_examples_has_the_shape_a_loop_gives(f, width):
    # what np.stack of no per-example results would be, with the example's own shape
    out = vmap(f)(np.zeros((0, 2, 3)))
    example = np.shape(f(np.zeros((2, 3))))
    assert out.shape == (0,) + example and (width is None or example == (width,))
