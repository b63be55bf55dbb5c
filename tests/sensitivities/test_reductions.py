"""Reduction and scan rules against central differences, over shapes and axes."""

import numpy as np
from hypothesis import strategies as st

from tests.sensitivities.cases import Case, rule_test
from tests.strategies import SHAPES, arrays


def with_axis(low=-2.0, high=2.0, distinct=False, single_axis=False, allow_none=True):
    """An array and an axis argument (None, an int, or a tuple) valid for it; an array of
    at least one dimension where the axis must be an int."""

    def draw(data):
        shape = data.draw(SHAPES if allow_none else SHAPES.filter(len))
        x = data.draw(arrays(shape, low, high))
        if distinct and x.size:  # max/min: no ties, so the function is differentiable
            x = x + np.arange(x.size).reshape(shape) * 0.37
        ndim = len(shape)
        choices = [st.none()] if allow_none or ndim == 0 else []
        if ndim:
            choices.append(st.integers(-ndim, ndim - 1))
            if not single_axis:
                choices.append(st.lists(st.integers(0, ndim - 1), unique=True, min_size=1).map(tuple))
        axis = data.draw(st.one_of(*choices))
        return x, axis

    return draw


def keepdims(f):
    return lambda x, axis: f(x, axis=axis, keepdims=True)


def with_zeros(data, allow_none=True):
    x, axis = with_axis(single_axis=True, allow_none=allow_none)(data)
    if x.size:
        flat = x.reshape(-1)
        for i in data.draw(st.lists(st.integers(0, x.size - 1), max_size=2)):
            flat[i] = 0.0
    return x, axis


def scan_axis(data):
    x, axis = with_axis(single_axis=True, allow_none=False)(data)
    return x, 0 if axis is None else axis


CASES = [
    Case(np.sum, with_axis(), fn=lambda x, axis: np.sum(x, axis=axis)),
    Case(np.sum, with_axis(), fn=keepdims(np.sum), name="sum-keepdims"),
    Case(np.mean, with_axis(), fn=lambda x, axis: np.mean(x, axis=axis)),
    Case(np.mean, with_axis(), fn=keepdims(np.mean), name="mean-keepdims"),
    Case(np.max, with_axis(distinct=True), fn=lambda x, axis: np.max(x, axis=axis)),
    Case(np.amax, with_axis(distinct=True), fn=keepdims(np.amax)),
    Case(np.min, with_axis(distinct=True), fn=lambda x, axis: np.min(x, axis=axis)),
    Case(np.amin, with_axis(distinct=True), fn=keepdims(np.amin)),
    Case(np.prod, with_axis(0.5, 1.5), fn=lambda x, axis: np.prod(x, axis=axis)),
    Case(np.prod, with_zeros, fn=lambda x, axis: np.prod(x, axis=axis), name="prod-with-zeros"),
    Case(np.cumsum, with_axis(single_axis=True), fn=lambda x, axis: np.cumsum(x, axis=axis)),
    Case(np.cumprod, with_axis(0.5, 1.5, single_axis=True), fn=lambda x, axis: np.cumprod(x, axis=axis)),
    Case(np.cumprod, with_zeros, fn=lambda x, axis: np.cumprod(x, axis=axis), name="cumprod-with-zeros"),
    Case(np.add.reduce, scan_axis, fn=lambda x, axis: np.add.reduce(x, axis=axis)),
    Case(np.multiply.reduce, scan_axis, fn=lambda x, axis: np.multiply.reduce(x, axis)),
    Case(np.maximum.reduce, with_axis(distinct=True, single_axis=True, allow_none=False),
         fn=lambda x, axis: np.maximum.reduce(x, axis=axis)),
    Case(np.minimum.reduce, with_axis(distinct=True, single_axis=True, allow_none=False),
         fn=lambda x, axis: np.minimum.reduce(x, axis=axis)),
    Case(np.add.accumulate, scan_axis, fn=lambda x, axis: np.add.accumulate(x, axis=axis)),
    Case(np.multiply.accumulate, lambda data: with_zeros(data, allow_none=False),
         fn=lambda x, axis: np.multiply.accumulate(x, axis=axis)),
    Case(np.maximum.accumulate, with_axis(distinct=True, single_axis=True, allow_none=False),
         fn=lambda x, axis: np.maximum.accumulate(x, axis=axis)),
    Case(np.minimum.accumulate, with_axis(distinct=True, single_axis=True, allow_none=False),
         fn=lambda x, axis: np.minimum.accumulate(x, axis=axis)),
]

test_reduction_rules = rule_test(CASES)


def test_max_ties_share_the_adjoint_equally():
    from tape import grad

    (g,) = grad(lambda x: np.max(x))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5, 0.0])
    (g,) = grad(lambda x: np.sum(np.maximum.accumulate(x)))(np.array([2.0, 1.0, 2.0]))
    # y = [2, 2, 2]: y0 from x0; y1 from x0; y2 shared by x0 and x2
    np.testing.assert_allclose(g, [2.5, 0.0, 0.5])


def test_prod_with_two_zeros_has_zero_gradient():
    from tape import grad

    (g,) = grad(np.prod)(np.array([0.0, 2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 0.0])
    (g,) = grad(np.prod)(np.array([0.0, 2.0, 5.0, 3.0]))
    np.testing.assert_array_equal(g, [30.0, 0.0, 0.0, 0.0])


def test_var_and_std_with_ddof_are_entered_as_means_of_squares():
    from tests.fd import check_grads

    x = np.random.default_rng(3).standard_normal((3, 4))
    for ddof in (0, 1):
        check_grads(lambda x: np.var(x, ddof=ddof), x)
        check_grads(lambda x: x.std(axis=0, ddof=ddof), x)
        check_grads(lambda x: np.std(x, axis=1, keepdims=True), x)
