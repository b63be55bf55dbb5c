"""Elementwise rules against central differences, over shapes that broadcast; functions
without gradient give plain results; float32 stays float32; second derivatives."""

import numpy as np
import pytest
from hypothesis import strategies as st

from sensitivities import lookup
from tape import Node, grad
from tests.sensitivities.cases import Case, implementation_test, rule_test, second_order_test
from tests.strategies import SHAPES, arrays, broadcastable


def unary(low=-2.0, high=2.0, avoid=None):
    def draw(data):
        return (data.draw(SHAPES.flatmap(lambda s: arrays(s, low, high, avoid))),)

    return draw


def binary(low_a=-2.0, high_a=2.0, low_b=-2.0, high_b=2.0, avoid_b=None, avoid_a=None):
    def draw(data):
        sa, sb = data.draw(broadcastable(2))
        return (
            data.draw(arrays(sa, low_a, high_a, avoid_a)),
            data.draw(arrays(sb, low_b, high_b, avoid_b)),
        )

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


def booleans(data, shape):
    flat = data.draw(
        st.lists(st.booleans(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
    )
    return np.reshape(np.array(flat, dtype=bool), shape)


def where_draw(data):
    sc, sa, sb = data.draw(broadcastable(3))
    return booleans(data, sc), data.draw(arrays(sa)), data.draw(arrays(sb))


def select_draw(data):
    s1, s2, sa, sb, sd = data.draw(broadcastable(5))
    return (booleans(data, s1), booleans(data, s2), data.draw(arrays(sa)), data.draw(arrays(sb)),
            data.draw(arrays(sd)))  # fmt: skip


def ldexp_draw(data):
    sa, sb = data.draw(broadcastable(2))
    e = data.draw(
        st.lists(st.integers(-3, 3), min_size=int(np.prod(sb)), max_size=int(np.prod(sb)))
    )
    return data.draw(arrays(sa)), np.reshape(np.array(e, dtype=np.int64), sb)


def outer_draw(low_a=-2.0, high_a=2.0, low_b=-2.0, high_b=2.0):
    # a stays off 0 (hypot(0, 0) has no derivative, arctan2(0, b < 0) jumps) and off b's
    # values (maximum and minimum have kinks at ties)
    def draw(data):
        small = st.integers(0, 2).flatmap(lambda n: st.tuples(*[st.integers(1, 3)] * n))
        b = data.draw(small.flatmap(lambda s: arrays(s, low_b, high_b)))
        avoid = (0.0, *np.ravel(b))
        return data.draw(small.flatmap(lambda s: arrays(s, low_a, high_a, avoid=avoid))), b

    return draw


def along_axis(data, avoid=None):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    x = data.draw(arrays(shape, -3.0, 3.0, avoid=avoid))
    return x, data.draw(st.integers(-len(shape), len(shape) - 1))


def along_axis_off_zero(data):
    return along_axis(data, avoid=0.0)  # a norm has a kink where its slice is zero


def complex_parts(data):
    # real and imaginary parts, kept off zero so that angle and abs are smooth
    sa, sb = data.draw(broadcastable(2))
    return data.draw(arrays(sa, avoid=0.0)), data.draw(arrays(sb, avoid=0.0))


PHASE = 0.3 + 0.7j  # a fixed complex weight, so that a real part sees the imaginary one too


def nan_to_num_of_log(x):
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.log(x))  # negative x give NaN, made 0: no gradient there


CASES = [
    # arithmetic
    Case(np.add, binary(), argnums=(0, 1)),
    Case(np.subtract, binary(), argnums=(0, 1)),
    Case(np.multiply, binary(), argnums=(0, 1)),
    Case(np.true_divide, binary(avoid_b=0.0), argnums=(0, 1)),
    Case(np.negative, unary()),
    Case(np.positive, unary()),
    Case(np.square, unary()),
    Case(np.reciprocal, unary(avoid=0.0)),
    Case(np.remainder, remainder_draw, argnums=(0, 1)),
    Case(np.fmod, remainder_draw, argnums=(0, 1)),
    Case(np.ldexp, ldexp_draw),
    Case(np.nextafter, binary(), argnums=(0, 1)),
    Case(np.absolute, unary(avoid=0.0)),
    Case(np.fabs, unary(avoid=0.0)),
    Case(np.copysign, binary(avoid_a=0.0, avoid_b=0.0), argnums=(0, 1)),
    Case(np.power, binary(low_a=0.2, high_a=2.0), argnums=(0, 1)),
    Case(np.float_power, binary(low_a=0.2, high_a=2.0), argnums=(0, 1)),
    # extrema
    Case(np.maximum, distinct_pair, argnums=(0, 1)),
    Case(np.minimum, distinct_pair, argnums=(0, 1)),
    Case(np.fmax, distinct_pair, argnums=(0, 1)),
    Case(np.fmin, distinct_pair, argnums=(0, 1)),
    # exponentials and logarithms
    Case(np.exp, unary()),
    Case(np.exp2, unary()),
    Case(np.expm1, unary()),
    Case(np.log, unary(0.1, 3.0)),
    Case(np.log2, unary(0.1, 3.0)),
    Case(np.log10, unary(0.1, 3.0)),
    Case(np.log1p, unary(-0.8, 3.0)),
    Case(np.sqrt, unary(0.1, 3.0)),
    Case(np.cbrt, unary(avoid=0.0)),
    Case(np.logaddexp, binary(-20.0, 20.0, -20.0, 20.0), argnums=(0, 1)),
    Case(np.logaddexp2, binary(-20.0, 20.0, -20.0, 20.0), argnums=(0, 1)),
    # trigonometric and hyperbolic
    Case(np.sin, unary()),
    Case(np.cos, unary()),
    Case(np.tan, unary(-1.2, 1.2)),
    Case(np.arcsin, unary(-0.9, 0.9)),
    Case(np.arccos, unary(-0.9, 0.9)),
    Case(np.arctan, unary(-3.0, 3.0)),
    Case(np.sinh, unary()),
    Case(np.cosh, unary()),
    Case(np.tanh, unary()),
    Case(np.arcsinh, unary(-3.0, 3.0)),
    Case(np.arccosh, unary(1.1, 3.0)),
    Case(np.arctanh, unary(-0.9, 0.9)),
    Case(np.arctan2, binary(avoid_a=0.0), argnums=(0, 1)),
    Case(np.hypot, binary(avoid_a=0.0), argnums=(0, 1)),
    Case(np.deg2rad, unary()),
    Case(np.radians, unary()),
    Case(np.rad2deg, unary()),
    Case(np.degrees, unary()),
    Case(np.sinc, unary(-3.0, 3.0)),
    # complex parts, reached from real inputs through complex intermediates
    Case(
        np.conjugate,
        complex_parts,
        fn=lambda a, b: np.real(np.conjugate(a + 1j * b) * PHASE),
        argnums=(0, 1),
    ),
    Case(np.real, complex_parts, fn=lambda a, b: np.real((a + 1j * b) ** 2), argnums=(0, 1)),
    Case(np.imag, complex_parts, fn=lambda a, b: np.imag((a + 1j * b) ** 2), argnums=(0, 1)),
    Case(np.angle, complex_parts, fn=lambda a, b: np.angle(a + 1j * b), argnums=(0, 1)),
    Case(
        np.angle,
        complex_parts,
        fn=lambda a, b: np.angle(a + 1j * b, deg=True),
        argnums=(0, 1),
        name="angle_deg",
    ),
    Case(
        np.absolute,
        complex_parts,
        fn=lambda a, b: np.abs(a + 1j * b),
        argnums=(0, 1),
        name="absolute_complex",
    ),
    # selection
    Case(np.clip, clip_draw),
    Case(np.where, where_draw, argnums=(1, 2)),
    Case(
        np.select,
        select_draw,
        fn=lambda c1, c2, a, b, d: np.select([c1, c2], [a, b], d),
        argnums=(2, 3, 4),
    ),
    Case(np.nan_to_num, unary(avoid=0.0), fn=nan_to_num_of_log),
    # ufunc methods
    *[
        Case(f.outer, outer_draw(), argnums=(0, 1))
        for f in (
            np.add,
            np.subtract,
            np.multiply,
            np.maximum,
            np.minimum,
            np.logaddexp,
            np.hypot,
            np.arctan2,
        )
    ],
    Case(np.true_divide.outer, outer_draw(low_b=0.2), argnums=(0, 1)),
    Case(np.power.outer, outer_draw(low_a=0.2), argnums=(0, 1)),
    Case(np.logaddexp.reduce, along_axis, fn=lambda x, axis: np.logaddexp.reduce(x, axis=axis)),
    Case(
        np.logaddexp.accumulate,
        along_axis,
        fn=lambda x, axis: np.logaddexp.accumulate(x, axis=axis),
    ),  # fmt: skip
    Case(np.logaddexp2.reduce, along_axis, fn=lambda x, axis: np.logaddexp2.reduce(x, axis=axis)),
    Case(
        np.logaddexp2.accumulate,
        along_axis,
        fn=lambda x, axis: np.logaddexp2.accumulate(x, axis=axis),
    ),  # fmt: skip
    Case(np.hypot.reduce, along_axis_off_zero, fn=lambda x, axis: np.hypot.reduce(x, axis=axis)),
]

test_elementwise_rules = rule_test(CASES, max_examples=10)


# -- points that need a convention ---------------------------------------------------------


def test_power_at_zero_base_and_exponent():
    # d/dx x**0 is 0 everywhere, also at x == 0; d/dp x**p at x == 0 is taken as 0
    assert grad(lambda x: np.power(x, 0.0))(0.0) == (0.0,)
    assert grad(lambda p: np.power(0.0, p))(2.0) == (0.0,)
    assert grad(lambda x: x**2.0)(0.0) == (0.0,)


def test_maximum_ties_share_the_adjoint():
    assert grad(np.maximum)(1.0, 1.0) == (0.5, 0.5)
    assert grad(np.minimum)(1.0, 1.0) == (0.5, 0.5)
    assert grad(np.fmax)(1.0, 1.0) == (0.5, 0.5)


def test_fmax_and_fmin_send_the_adjoint_past_a_nan():
    x, y = np.array([np.nan, 1.0, 3.0]), np.array([2.0, np.nan, 1.0])
    gx, gy = grad(lambda x, y: np.sum(np.fmax(x, y)))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy, [1.0, 0.0, 0.0])
    gx, gy = grad(lambda x, y: np.sum(np.fmin(x, y)))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(gy, [1.0, 0.0, 1.0])


def test_absolute_and_sinc_at_zero():
    assert grad(np.abs)(0.0) == (0.0,)  # the subgradient 0, as in autograd and JAX
    assert grad(np.abs)(0j) == (0j,)
    assert grad(np.sinc)(0.0) == (0.0,)


def test_hypot_at_the_origin_has_the_subgradient_zero_like_norm():
    a, b = np.array([0.0, 3.0]), np.array([0.0, -4.0])
    ga, gb = grad(lambda a, b: np.sum(np.hypot(a, b)))(a, b)
    np.testing.assert_array_equal(ga, [0.0, 0.6])  # a / hypot(a, b) away from the origin
    np.testing.assert_array_equal(gb, [0.0, -0.8])
    np.testing.assert_array_equal(grad(np.linalg.norm)(np.zeros(2))[0], [0.0, 0.0])


def test_select_takes_the_first_true_condition():
    a, b, d = np.ones(3), np.ones(3), np.ones(3)
    c1, c2 = np.array([True, False, False]), np.array([True, True, False])
    ga, gb, gd = grad(lambda a, b, d: np.sum(np.select([c1, c2], [a, b], d)))(a, b, d)
    np.testing.assert_array_equal(ga, [1, 0, 0])
    np.testing.assert_array_equal(gb, [0, 1, 0])
    np.testing.assert_array_equal(gd, [0, 0, 1])


def test_logaddexp_reductions_do_not_overflow():
    x = np.array([1000.0, 0.0, -1000.0])
    (g,) = grad(lambda x: np.logaddexp.reduce(x))(x)
    np.testing.assert_allclose(g, [1.0, 0.0, 0.0])
    (g,) = grad(lambda x: np.sum(np.logaddexp.accumulate(x)))(x)
    np.testing.assert_allclose(g, [3.0, 0.0, 0.0], atol=1e-300)


# -- float32 in, float32 out, rule by rule ------------------------------------------------

UNARY_FLOAT32 = [
    (np.negative, 1.5), (np.positive, 1.5), (np.square, 1.5), (np.reciprocal, 1.5),
    (np.absolute, -1.5), (np.fabs, -1.5), (np.exp, 0.5), (np.exp2, 0.5), (np.expm1, 0.5),
    (np.log, 1.5), (np.log2, 1.5), (np.log10, 1.5), (np.log1p, 0.5), (np.sqrt, 1.5),
    (np.cbrt, 1.5), (np.sin, 0.5), (np.cos, 0.5), (np.tan, 0.5), (np.arcsin, 0.5),
    (np.arccos, 0.5), (np.arctan, 0.5), (np.sinh, 0.5), (np.cosh, 0.5), (np.tanh, 0.5),
    (np.arcsinh, 0.5), (np.arccosh, 1.5), (np.arctanh, 0.5), (np.deg2rad, 0.5),
    (np.radians, 0.5), (np.rad2deg, 0.5), (np.degrees, 0.5), (np.sinc, 0.5),
    (np.conjugate, 0.5), (np.real, 0.5), (np.nan_to_num, 0.5),
]  # fmt: skip

BINARY_FLOAT32 = [
    np.add, np.subtract, np.multiply, np.true_divide, np.power, np.remainder, np.fmod,
    np.maximum, np.minimum, np.fmax, np.fmin, np.logaddexp, np.logaddexp2, np.arctan2,
    np.hypot, np.copysign, np.nextafter,
]  # fmt: skip


def _rule_results(f, args):
    y = f(*args)
    ybar = np.ones_like(y)
    rules = lookup(f)
    return [rules.rule(i, args)(y, ybar, *args) for i in range(len(args)) if i in rules.argnums]


@pytest.mark.parametrize("f, x", UNARY_FLOAT32, ids=[f.__name__ for f, _ in UNARY_FLOAT32])
def test_unary_rules_keep_float32(f, x):
    for g in _rule_results(f, (np.full(3, x, dtype=np.float32),)):
        assert g.dtype == np.float32, (f.__name__, g.dtype)


@pytest.mark.parametrize("f", BINARY_FLOAT32, ids=[f.__name__ for f in BINARY_FLOAT32])
def test_binary_rules_keep_float32(f):
    a = np.array([1.5, 0.5, 2.0], dtype=np.float32)
    b = np.array([0.7, 1.25, 0.4], dtype=np.float32)
    for g in _rule_results(f, (a, b)):
        assert g.dtype == np.float32, (f.__name__, g.dtype)


def test_ldexp_and_grad_keep_float32():
    x = np.array([1.5, -0.5], dtype=np.float32)
    (g,) = _rule_results(np.ldexp, (x, np.array([1, 2])))
    assert g.dtype == np.float32
    (g,) = grad(lambda x: np.sum(np.sinc(x) * np.logaddexp(x, 1.0)))(x)
    assert g.dtype == np.float32


# -- second derivatives: rules are differentiable again -----------------------------------

SECOND_ORDER = [
    (np.sin, (-2.0, 2.0)), (np.tan, (-1.0, 1.0)), (np.arcsin, (-0.8, 0.8)),
    (np.arccosh, (1.2, 3.0)), (np.cbrt, (0.3, 2.0)), (np.expm1, (-2.0, 2.0)),
    (np.log1p, (-0.5, 2.0)), (np.sinc, (-2.0, 2.0)), (np.reciprocal, (0.3, 2.0)),
    (np.absolute, (0.3, 2.0)), (lambda x: np.logaddexp(x, 0.5), (-3.0, 3.0)),
    (lambda x: np.hypot(x, 0.7), (-2.0, 2.0)), (lambda x: np.arctan2(x, 0.7), (-2.0, 2.0)),
    (lambda x: np.float_power(x, 2.5), (0.3, 2.0)), (lambda x: np.power(1.5, x), (-2.0, 2.0)),
    (lambda x: np.logaddexp.reduce(x), (-2.0, 2.0)),
    (lambda x: np.logaddexp.accumulate(x), (-2.0, 2.0)),
    (lambda x: np.multiply.outer(x, x), (-2.0, 2.0)),
    (lambda x: np.abs(x + 1j * np.flip(x)), (0.3, 2.0)),
    (np.i0, (-10.0, 10.0)),
]  # fmt: skip


test_second_derivatives_match_finite_differences = second_order_test(SECOND_ORDER)


# -- functions without gradient: plain results, zero gradient, never an error --------------

NONDIFFERENTIABLE = {
    "equal": lambda x: np.equal(x, 0.5), "not_equal": lambda x: np.not_equal(x, 0.5),
    "less": lambda x: x < 0.5, "less_equal": lambda x: x <= 0.5, "greater": lambda x: x > 0.5,
    "greater_equal": lambda x: x >= 0.5, "isclose": lambda x: np.isclose(x, 0.5),
    "allclose": lambda x: np.allclose(x, x), "array_equal": lambda x: np.array_equal(x, x),
    "array_equiv": lambda x: np.array_equiv(x, x), "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "isposinf": np.isposinf, "isneginf": np.isneginf,
    "signbit": np.signbit, "isin": lambda x: np.isin(x, [0.5]),
    "logical_and": lambda x: np.logical_and(x, x > 0), "logical_or": lambda x: np.logical_or(x, x),
    "logical_xor": lambda x: np.logical_xor(x, x > 0), "logical_not": np.logical_not,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "fix": np.fix,
    "round": lambda x: np.round(x, 1), "around": lambda x: np.around(x, 1), "sign": np.sign,
    "floor_divide": lambda x: x // 0.3, "heaviside": lambda x: np.heaviside(x, 0.5),
    "spacing": np.spacing, "argmax": np.argmax, "argmin": np.argmin, "argsort": np.argsort,
    "nonzero": np.nonzero, "flatnonzero": np.flatnonzero, "argwhere": np.argwhere,
    "nanargmax": np.nanargmax, "nanargmin": np.nanargmin,
    "argpartition": lambda x: np.argpartition(x, 1), "lexsort": lambda x: np.lexsort((x, x)),
    "searchsorted": lambda x: np.searchsorted(np.sort(x.value if isinstance(x, Node) else x), 0.5),
    "digitize": lambda x: np.digitize(x, [-1.0, 0.0, 1.0]),
    "histogram": lambda x: np.histogram(x, bins=3, range=(-3, 3)),
    "histogram2d": lambda x: np.histogram2d(x, x, bins=2),
    "histogramdd": lambda x: np.histogramdd(x[:, None], bins=2),
    "histogram_bin_edges": lambda x: np.histogram_bin_edges(x, bins=3),
    "count_nonzero": np.count_nonzero, "any": lambda x: np.any(x > 0),
    "all": lambda x: np.all(x > 0),
}  # fmt: skip

INTEGER_NONDIFFERENTIABLE = {
    "bitwise_and": lambda i: np.bitwise_and(i, 3), "bitwise_or": lambda i: np.bitwise_or(i, 3),
    "bitwise_xor": lambda i: np.bitwise_xor(i, 3), "invert": np.invert,
    "left_shift": lambda i: np.left_shift(i, 1), "right_shift": lambda i: np.right_shift(i, 1),
    "bitwise_count": np.bitwise_count, "gcd": lambda i: np.gcd(i, 6), "lcm": lambda i: np.lcm(i, 6),
    "bincount": np.bincount,
}  # fmt: skip


def _holds_node(result):
    if isinstance(result, Node):
        return True
    if isinstance(result, (tuple, list)):
        return any(_holds_node(r) for r in result)
    return False


def _equal(a, b):
    if isinstance(a, tuple):
        return all(_equal(u, v) for u, v in zip(a, b))
    return np.array_equal(a, b)


@pytest.mark.parametrize("name", sorted(NONDIFFERENTIABLE))
def test_functions_without_gradient_give_constants_and_zero_gradient(name):
    call = NONDIFFERENTIABLE[name]
    x = np.array([-1.7, 0.5, 2.25, 0.5, -0.2])
    seen = []

    def f(x):
        result = call(x)
        seen.append(result)
        # the result is a constant: only the explicit term carries gradient
        return np.sum(x * 0.0) + 1.0

    (g,) = grad(f)(x)
    assert not _holds_node(seen[0]), f"{name} returned a node"
    assert _equal(seen[0], call(x))
    np.testing.assert_array_equal(g, np.zeros_like(x))


@pytest.mark.parametrize("name", sorted(INTEGER_NONDIFFERENTIABLE))
def test_integer_functions_compute_on_plain_values(name):
    # reached through nodes of integer values that an inner computation produced
    call = INTEGER_NONDIFFERENTIABLE[name]
    i = np.array([1, 2, 5, 0])
    seen = []

    def f(x):
        result = call((x * 0.0).astype(np.int64) + i)
        seen.append(result)
        return np.sum(x)

    (g,) = grad(f)(np.ones(4))
    assert not _holds_node(seen[0])
    assert _equal(seen[0], call(i))
    np.testing.assert_array_equal(g, np.ones(4))


def test_ufuncs_with_two_results_are_entered_as_differentiable_pieces():
    from tape import Leaf, Tape
    from tests.fd import check_grads

    x = np.array([1.7, -2.3, 0.4, 8.2])
    check_grads(lambda v: np.modf(v)[0] * 2 + np.modf(v)[1], x)
    check_grads(lambda v: np.frexp(v)[0], x)
    check_grads(lambda a, b: np.divmod(a, b)[1], x, np.array(0.7))
    node = Leaf(Tape(), x)
    for f in (np.modf, np.frexp, lambda v: np.divmod(v, 0.7)):
        for got, expected in zip(f(node), f(x)):
            np.testing.assert_array_equal(getattr(got, "value", got), expected)


# -- implementations ------------------------------------------------------------------------

IMPLEMENTED = [
    # both of NumPy's Chebyshev pieces (|x| <= 8 and above), and negative x
    Case(np.i0, lambda d: (d.draw(arrays((5,), -12.0, 12.0)),), rtol=1e-6),
    # two results each; off the integers, where the pieces jump
    Case(np.modf, lambda d: (d.draw(arrays((4,), -2.9, 2.9, avoid=[-2, -1, 0, 1, 2])),),
         fn=lambda x: np.sum(np.modf(x)[0] * np.arange(1.0, 5.0))),
    Case(np.frexp, lambda d: (d.draw(arrays((4,), 0.3, 2.9, avoid=[0.5, 1.0, 2.0])),),
         fn=lambda x: np.sum(np.frexp(x)[0] * np.arange(1.0, 5.0))),
    Case(np.divmod, lambda d: (d.draw(arrays((4,), 0.2, 2.7, avoid=[0.7, 1.4, 2.1])),),
         fn=lambda x: np.sum(np.divmod(x, 0.7)[1] * np.arange(1.0, 5.0))),
]  # fmt: skip

test_elementwise_implementations = implementation_test(IMPLEMENTED)


def test_i0_derivative_is_i1():
    i1 = pytest.importorskip("scipy.special").i1

    x = np.array([-9.5, -2.0, 0.0, 0.7, 8.0, 15.0])
    (g,) = grad(lambda x: np.sum(np.i0(x)))(x)
    np.testing.assert_allclose(g, i1(x), rtol=1e-12, atol=1e-15)


# -- rules handed Python floats: NumPy's infinities and warnings, never ZeroDivisionError ----

_SINGULAR_POINTS = [
    (np.log, 0.0), (np.log2, 0.0), (np.log10, 0.0), (np.log1p, -1.0),
    (np.arctanh, 1.0), (np.arctanh, -1.0), (np.arcsin, 1.0), (np.arccos, -1.0),
    (np.sqrt, 0.0), (np.cbrt, 0.0), (np.reciprocal, 0.0), (np.arccosh, 1.0),
    (lambda x: x**-2.0, 0.0), (lambda x: x**-1, 0.0), (lambda x: np.float_power(x, -3.0), 0.0),
    (lambda x: 1.0 / x, 0.0), (lambda x: x / 0.0, 1.0), (lambda x: np.arctan2(x, 0.0), 0.0),
    (lambda x: np.fmod(1.0, x), 0.0),
]  # fmt: skip


@pytest.mark.parametrize("f, x", _SINGULAR_POINTS)
def test_a_python_float_at_a_singular_point_gives_numpys_value_and_warning(f, x):
    # NumPy's float64 at the same point is the reference: its infinities, NaNs and warnings
    with np.errstate(all="ignore"):
        (expected,) = grad(f)(np.float64(x))
    with pytest.warns(RuntimeWarning):
        (got,) = grad(f)(x)
    assert type(got) is float
    np.testing.assert_equal(got, expected)
    assert not np.isfinite(got)


def test_a_quotient_of_python_floats_by_zero_has_numpys_gradient():
    with pytest.warns(RuntimeWarning):
        gx, gy = grad(lambda x, y: x / y, argnums=(0, 1))(1.0, 0.0)
    assert (gx, gy) == (np.inf, -np.inf)
    with pytest.warns(RuntimeWarning):
        gx, gy = grad(lambda x, y: x / y, argnums=(0, 1))(0.0, 0.0)
    assert gx == np.inf and np.isnan(gy)


def test_no_ufunc_rule_raises_on_python_floats():
    # every rule of every ufunc (NumPy's, and SciPy's where installed), handed Python floats
    # and the seed 1.0 at the points where derivatives divide by zero
    import itertools
    import warnings

    from sensitivities import registry

    pytest.importorskip("scipy.special")
    registry.load_deferred()
    points = (0.0, 1.0, -1.0)
    for f, rules in list(registry._registry.items()):
        if not isinstance(f, np.ufunc) or f.nin > 3:
            continue
        for argnum, rule in rules.plain.items():
            for args in itertools.product(points, repeat=f.nin):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        y = f(*args)
                    except (TypeError, ValueError, ZeroDivisionError):
                        continue  # no loop for these inputs: nothing to differentiate
                    if isinstance(y, tuple):
                        continue
                    try:
                        rule(y, 1.0, *args)
                    except (ZeroDivisionError, OverflowError) as error:
                        raise AssertionError(f"{f.__name__} argument {argnum} at {args}") from error
                    except (TypeError, ValueError):
                        pass  # a rule that needs keywords or arrays: not this test's concern
