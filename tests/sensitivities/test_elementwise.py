"""Elementwise rules against central differences, over shapes that broadcast."""

import numpy as np
from hypothesis import strategies as st

from tests.sensitivities.cases import Case, rule_test
from tests.strategies import SHAPES, arrays, broadcastable


def unary(low=-2.0, high=2.0, avoid=None):
    def draw(data):
        return (data.draw(SHAPES.flatmap(lambda s: arrays(s, low, high, avoid))),)

    return draw


def binary(low_a=-2.0, high_a=2.0, low_b=-2.0, high_b=2.0, avoid_b=None, avoid_a=None):
    def draw(data):
        sa, sb = data.draw(broadcastable(2))
        return (data.draw(arrays(sa, low_a, high_a, avoid_a)), data.draw(arrays(sb, low_b, high_b, avoid_b)))

    return draw


def distinct_pair(data):
    # maximum/minimum are not differentiable at ties: keep the two inputs apart
    sa, sb = data.draw(broadcastable(2))
    b = data.draw(arrays(sb))
    a = data.draw(arrays(np.broadcast_shapes(sa, sb)))
    return np.where(np.abs(a - b) < 0.1, b + 0.5, a), b


def remainder_draw(data):
    # a = b * (k + f) with f away from 0 and 1 keeps a away from remainder's jumps
    sa, sb = data.draw(broadcastable(2))
    full = np.broadcast_shapes(sa, sb)
    b = data.draw(arrays(sb, 0.5, 2.0))
    q = data.draw(arrays(full, -3, 3)).round() + data.draw(arrays(full, 0.1, 0.9))
    return q * b, b


def clip_draw(data):
    x = data.draw(SHAPES.flatmap(lambda s: arrays(s, -2, 2, avoid=(-1.0, 1.0))))
    return x, -1.0, 1.0


def where_draw(data):
    sc, sa, sb = data.draw(broadcastable(3))
    cond = data.draw(st.lists(st.booleans(), min_size=int(np.prod(sc)), max_size=int(np.prod(sc))))
    return np.reshape(np.array(cond, dtype=bool), sc), data.draw(arrays(sa)), data.draw(arrays(sb))


CASES = [
    Case(np.add, binary(), argnums=(0, 1)),
    Case(np.subtract, binary(), argnums=(0, 1)),
    Case(np.multiply, binary(), argnums=(0, 1)),
    Case(np.true_divide, binary(avoid_b=0.0), argnums=(0, 1)),
    Case(np.remainder, remainder_draw, argnums=(0, 1)),
    Case(np.power, binary(low_a=0.2, high_a=2.0), argnums=(0, 1)),
    Case(np.maximum, distinct_pair, argnums=(0, 1)),
    Case(np.minimum, distinct_pair, argnums=(0, 1)),
    Case(np.negative, unary()),
    Case(np.positive, unary()),
    Case(np.absolute, unary(avoid=0.0)),
    Case(np.square, unary()),
    Case(np.exp, unary()),
    Case(np.log, unary(0.1, 3.0)),
    Case(np.sqrt, unary(0.1, 3.0)),
    Case(np.sin, unary()),
    Case(np.cos, unary()),
    Case(np.tanh, unary()),
    Case(np.clip, clip_draw),
    Case(np.where, where_draw, argnums=(1, 2)),
]

test_elementwise_rules = rule_test(CASES)


def test_power_at_zero_base_and_exponent():
    from tape import grad

    # d/dx x**0 is 0 everywhere, also at x == 0; d/dp x**p at x == 0 is taken as 0
    assert grad(lambda x: np.power(x, 0.0))(0.0) == (0.0,)
    assert grad(lambda p: np.power(0.0, p))(2.0) == (0.0,)
    assert grad(lambda x: x ** 2.0)(0.0) == (0.0,)


def test_maximum_ties_share_the_adjoint():
    from tape import grad

    assert grad(np.maximum)(1.0, 1.0) == (0.5, 0.5)
    assert grad(np.minimum)(1.0, 1.0) == (0.5, 0.5)
