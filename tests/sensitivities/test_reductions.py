"""Reduction and scan rules against central differences, over shapes, axes (None, int,
negative, tuple), ``keepdims``, ``where``, ``ddof`` and NaNs; implementations also against
NumPy's own values."""

import warnings

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sensitivities.reductions import shared
from tape import Leaf, Tape, grad, propagate, reverse_tape, value_and_grad
from tests.fd import numeric_grad
from tests.sensitivities.cases import Case, implementation_test, rule_test
from tests.strategies import SHAPES, arrays

NONEMPTY = SHAPES.filter(len)


def draw_axis(data, ndim, single=False, allow_none=True):
    """None, an int (possibly negative) or a tuple of distinct axes, valid for ``ndim``."""
    choices = [st.none()] if allow_none or ndim == 0 else []
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        if not single:
            choices.append(
                st.lists(
                    st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim, min_size=1
                ).map(tuple)
            )
    return data.draw(st.one_of(*choices))


def with_axis(low=-2.0, high=2.0, distinct=False, single=False, allow_none=True, nans=False,
              zeros=False, shapes=None, valid=1):  # fmt: skip
    """An array, an axis argument valid for it, and ``keepdims``. ``distinct``: no ties;
    ``nans``: some NaNs, leaving at least ``valid`` numbers in each reduced slice;
    ``zeros``: some exact zeros."""

    def draw(data):
        shape = data.draw(shapes if shapes is not None else SHAPES if allow_none else NONEMPTY)
        x = data.draw(arrays(shape, low, high))
        if distinct and x.size:  # no near ties, so that max, min and sort are smooth
            order = np.array(data.draw(st.permutations(range(x.size))), dtype=float)
            x = low + (x - low) * 0.05 + order.reshape(shape) * 0.37  # neighbours 0.17 apart
        axis = draw_axis(data, len(shape), single, allow_none)
        numbers = x.copy()
        if (nans or zeros) and x.size:
            flat = x.reshape(-1)
            for i in data.draw(st.lists(st.integers(0, x.size - 1), max_size=2)):
                flat[i] = np.nan if nans else 0.0
        if nans:  # a slice of NaNs alone has no value to differentiate
            short = np.sum(~np.isnan(x), axis=axis, keepdims=True) < valid
            x = np.where(np.isnan(x) & short, numbers, x)
        return x, axis, data.draw(st.booleans())

    return draw


def reduce(f, **kwargs):
    return lambda x, axis, keepdims: f(x, axis=axis, keepdims=keepdims, **kwargs)


def scan(f):
    return lambda x, axis, keepdims: f(x, axis=axis)


# std is not differentiable where a slice is constant, as a slice of one element is
SLICES_OF_TWO = hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4)


def ddof_draw(nans=False):
    def draw(data):
        x, axis, keepdims = with_axis(distinct=True, nans=nans, shapes=SLICES_OF_TWO, valid=2)(data)
        smallest = np.min(np.sum(~np.isnan(x), axis=axis)) if x.size else 0
        return x, axis, keepdims, data.draw(st.sampled_from([0, 1] if smallest > 1 else [0]))

    return draw


def variance(f):
    return lambda x, axis, keepdims, ddof: f(x, axis=axis, keepdims=keepdims, ddof=ddof)


def where_draw(data):
    """An array, an axis, and a mask that broadcasts against the array."""
    x, axis, keepdims = with_axis(0.5, 1.5, distinct=True)(data)
    mask_shape = data.draw(st.sampled_from([x.shape, x.shape[1:], (1,) * x.ndim]))
    mask = data.draw(
        st.lists(
            st.booleans(), min_size=int(np.prod(mask_shape)), max_size=int(np.prod(mask_shape))
        )
    )
    mask = np.array(mask, dtype=bool).reshape(mask_shape)
    full = np.broadcast_to(mask, x.shape)
    empty = ~np.any(full, axis=axis, keepdims=True)  # a mean of nothing is NaN
    return x, axis, keepdims, (full | empty) if np.any(empty) else mask


def masked(f, **kwargs):
    return lambda x, axis, keepdims, where: f(
        x, axis=axis, keepdims=keepdims, where=where, **kwargs
    )


def cumulative_draw(data):
    x, axis, _ = with_axis(0.5, 1.5, single=True, allow_none=False)(data)
    return x, axis, data.draw(st.booleans())


def cumulative(f):
    return lambda x, axis, include: f(x, axis=axis, include_initial=include)


def float32(draw):
    def draw32(data):
        x, *rest = draw(data)
        return (x.astype(np.float32), *rest)

    return draw32


def reduce_axis0(data):
    x, axis, keepdims = with_axis(single=True, allow_none=False)(data)
    return x, axis, keepdims


def _shared_draw(d):
    hits = d.draw(hnp.arrays(bool, (3, 4)))
    return hits, d.draw(arrays((1, 4))), (0,), np.dtype(np.float64)


CASES = [
    Case(shared, _shared_draw, argnums=(1,)),  # an extremum's adjoint, shared among ties
    Case(np.sum, with_axis(), fn=reduce(np.sum)),
    Case(np.sum, float32(with_axis()), fn=reduce(np.sum), rtol=1e-4, atol=1e-4, name="sum-float32"),
    Case(np.sum, where_draw, fn=masked(np.sum), name="sum-where"),
    Case(np.nansum, with_axis(nans=True), fn=reduce(np.nansum)),
    Case(np.mean, with_axis(), fn=reduce(np.mean)),
    Case(np.mean, where_draw, fn=masked(np.mean), name="mean-where"),
    Case(np.nanmean, with_axis(nans=True), fn=reduce(np.nanmean)),
    Case(np.max, with_axis(distinct=True), fn=reduce(np.max)),
    Case(np.max, where_draw, fn=masked(np.max, initial=-10.0), name="max-where-initial"),
    Case(np.amax, with_axis(distinct=True), fn=reduce(np.amax)),
    Case(np.min, with_axis(distinct=True), fn=reduce(np.min)),
    Case(
        np.amin,
        float32(with_axis(distinct=True)),
        fn=reduce(np.amin),
        rtol=1e-4,
        atol=1e-4,
        name="amin-float32",
    ),
    Case(np.nanmax, with_axis(distinct=True, nans=True), fn=reduce(np.nanmax)),
    Case(np.nanmin, with_axis(distinct=True, nans=True), fn=reduce(np.nanmin)),
    Case(np.prod, with_axis(0.5, 1.5), fn=reduce(np.prod)),
    # |x| <= 1: a product of many numbers near 2 is so large (2**45) that the truncation
    # error of central differences swamps the exact zero gradient of three zeros
    Case(np.prod, with_axis(-1.0, 1.0, single=True, zeros=True), fn=reduce(np.prod),
         name="prod-with-zeros"),  # fmt: skip
    Case(np.prod, where_draw, fn=masked(np.prod), name="prod-where"),
    Case(np.nanprod, with_axis(0.5, 1.5, nans=True), fn=reduce(np.nanprod)),
    Case(np.var, ddof_draw(), fn=variance(np.var)),
    Case(np.std, ddof_draw(), fn=variance(np.std)),
    Case(
        np.std, float32(ddof_draw()), fn=variance(np.std), rtol=1e-3, atol=1e-3, name="std-float32"
    ),
    Case(np.nanvar, ddof_draw(nans=True), fn=variance(np.nanvar)),
    Case(np.nanstd, ddof_draw(nans=True), fn=variance(np.nanstd)),
    Case(np.var, where_draw, fn=masked(np.var), name="var-where"),
    Case(np.cumsum, with_axis(single=True), fn=scan(np.cumsum)),
    Case(np.nancumsum, with_axis(single=True, nans=True), fn=scan(np.nancumsum)),
    Case(np.cumprod, with_axis(0.5, 1.5, single=True), fn=scan(np.cumprod)),
    Case(
        np.cumprod,
        with_axis(-1.0, 1.0, single=True, zeros=True),
        fn=scan(np.cumprod),
        name="cumprod-with-zeros",
    ),
    Case(np.nancumprod, with_axis(0.5, 1.5, single=True, nans=True), fn=scan(np.nancumprod)),
    Case(np.cumulative_sum, cumulative_draw, fn=cumulative(np.cumulative_sum)),
    Case(np.cumulative_prod, cumulative_draw, fn=cumulative(np.cumulative_prod)),
    Case(
        np.add.reduce,
        reduce_axis0,
        fn=lambda x, axis, keepdims: np.add.reduce(x, axis, keepdims=keepdims),
    ),
    Case(
        np.multiply.reduce, reduce_axis0, fn=lambda x, axis, keepdims: np.multiply.reduce(x, axis)
    ),
    Case(
        np.maximum.reduce,
        with_axis(distinct=True, single=True, allow_none=False),
        fn=lambda x, axis, keepdims: np.maximum.reduce(x, axis=axis, keepdims=keepdims),
    ),
    Case(
        np.minimum.reduce,
        with_axis(distinct=True, single=True, allow_none=False),
        fn=lambda x, axis, keepdims: np.minimum.reduce(x, axis=axis),
    ),
    Case(
        np.add.accumulate,
        with_axis(single=True, allow_none=False),
        fn=lambda x, axis, keepdims: np.add.accumulate(x, axis=axis),
    ),
    Case(
        np.multiply.accumulate,
        with_axis(single=True, allow_none=False, zeros=True),
        fn=lambda x, axis, keepdims: np.multiply.accumulate(x, axis=axis),
    ),
    Case(
        np.maximum.accumulate,
        with_axis(distinct=True, single=True, allow_none=False),
        fn=lambda x, axis, keepdims: np.maximum.accumulate(x, axis=axis),
    ),
    Case(
        np.minimum.accumulate,
        with_axis(distinct=True, single=True, allow_none=False),
        fn=lambda x, axis, keepdims: np.minimum.accumulate(x, axis=axis),
    ),
]

test_reduction_rules = rule_test(CASES, max_examples=15)


# -- implementations: NumPy's value, and central differences ----------------------------


def quantile_draw(nan=False, scale=1.0):
    def draw(data):
        x, axis, keepdims = with_axis(distinct=True, nans=nan)(data)
        qs = [0.0, 0.3, 0.5, 1.0, [0.1, 0.75], [[0.2], [0.9]]]
        if nan and isinstance(axis, tuple):
            qs.pop()  # NumPy's nan forms lay out 2-d q with tuple axes differently from quantile
        q = data.draw(st.sampled_from(qs))
        method = data.draw(st.sampled_from(["linear", "lower", "higher", "midpoint", "nearest"]))
        return x, np.multiply(q, scale), axis, keepdims, method

    return draw


def quantile(f):
    return lambda x, q, axis, keepdims, method: f(x, q, axis=axis, keepdims=keepdims, method=method)


def average_draw(data):
    x, axis, keepdims = with_axis()(data)
    if axis is None or data.draw(st.booleans()):
        w = data.draw(arrays(x.shape, 0.5, 2.0))
    else:
        axes = axis if isinstance(axis, tuple) else (axis,)
        w = data.draw(arrays(tuple(x.shape[a] for a in axes), 0.5, 2.0))
    return x, w, axis, keepdims


def average(x, w, axis, keepdims):
    avg, scale = np.average(x, axis, w, True, keepdims=keepdims)
    return avg * scale  # the weights' sum, returned alongside, is differentiable too


IMPLEMENTED = [
    Case(np.ptp, with_axis(distinct=True), fn=reduce(np.ptp)),
    Case(np.median, with_axis(distinct=True), fn=reduce(np.median)),
    Case(np.nanmedian, with_axis(distinct=True, nans=True), fn=reduce(np.nanmedian)),
    Case(np.quantile, quantile_draw(), fn=quantile(np.quantile)),
    Case(np.nanquantile, quantile_draw(nan=True), fn=quantile(np.nanquantile)),
    Case(np.percentile, quantile_draw(scale=100.0), fn=quantile(np.percentile)),
    Case(np.nanpercentile, quantile_draw(nan=True, scale=100.0), fn=quantile(np.nanpercentile)),
    Case(np.average, average_draw, fn=average, argnums=(0, 1)),
    Case(
        np.average,
        with_axis(),
        fn=lambda x, axis, keepdims: np.average(x, axis, keepdims=keepdims),
        name="average-unweighted",
    ),
]

test_reduction_implementations = implementation_test(IMPLEMENTED)


def test_every_reduction_implementation_has_a_case():
    import sensitivities.reductions as family
    from sensitivities.registry import _implementations

    mine = {f for f, impl in _implementations.items() if impl.__module__ == family.__name__}
    assert mine <= {c.registered for c in IMPLEMENTED}


# -- conventions, by hand ---------------------------------------------------------------


def test_max_ties_share_the_adjoint_equally():
    (g,) = grad(lambda x: np.max(x))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5, 0.0])
    (g,) = grad(lambda x: np.sum(np.maximum.accumulate(x)))(np.array([2.0, 1.0, 2.0]))
    # y = [2, 2, 2]: y0 from x0; y1 from x0; y2 shared by x0 and x2
    np.testing.assert_allclose(g, [2.5, 0.0, 0.5])
    (g,) = grad(lambda x: np.nanmin(x))(np.array([np.nan, 1.0, 1.0, 1.0]))
    np.testing.assert_allclose(g, [0.0, 1 / 3, 1 / 3, 1 / 3])


def test_extremum_that_is_the_initial_value_has_no_gradient():
    (g,) = grad(lambda x: np.sum(np.max(x, axis=1, initial=5.0)))(
        np.array([[1.0, 2.0], [7.0, 3.0]])
    )
    np.testing.assert_array_equal(g, [[0.0, 0.0], [1.0, 0.0]])


def test_prod_with_zeros_is_the_product_of_the_others():
    (g,) = grad(np.prod)(np.array([0.0, 2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 0.0])
    (g,) = grad(np.prod)(np.array([0.0, 2.0, 5.0, 3.0]))
    np.testing.assert_array_equal(g, [30.0, 0.0, 0.0, 0.0])
    (g,) = grad(lambda x: np.prod(x, initial=2.0))(np.array([0.0, 2.0, 5.0]))
    np.testing.assert_array_equal(g, [20.0, 0.0, 0.0])
    (g,) = grad(lambda x: np.sum(np.cumprod(x)))(np.array([2.0, 0.0, 3.0]))
    # y = [x0, x0 x1, x0 x1 x2]: d/dx1 = x0 + x0 x2 = 8
    np.testing.assert_array_equal(g, [1.0, 8.0, 0.0])


def test_nan_entries_get_zero_gradient():
    x = np.array([[1.0, np.nan, 2.0], [np.nan, 4.0, 3.0]])
    for f in (np.nansum, np.nanmean, np.nanprod, np.nanvar, np.nanstd, np.nanmedian):
        (g,) = grad(lambda x, f=f: np.sum(f(x, axis=1)))(x)
        assert np.all(g[np.isnan(x)] == 0) and np.all(np.isfinite(g)), f.__name__
    (g,) = grad(lambda x: np.nanmean(x))(x)
    np.testing.assert_allclose(g, np.where(np.isnan(x), 0.0, 0.25))


def test_median_of_an_even_count_averages_the_middle_two():
    (g,) = grad(np.median)(np.array([4.0, 1.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.5, 0.5])


def test_std_of_a_constant_slice_is_nan_not_an_error():
    with np.errstate(divide="ignore", invalid="ignore"):
        (g,) = grad(lambda x: np.sum(np.std(x, axis=1)))(np.array([[1.0, 1.0], [1.0, 2.0]]))
    assert np.all(np.isnan(g[0])) and np.allclose(g[1], [-0.5, 0.5])


@pytest.mark.parametrize("f", [np.std, np.var, np.nanstd, np.nanvar])
@pytest.mark.filterwarnings("ignore:Degrees of freedom <= 0:RuntimeWarning")  # ddof >= n
def test_variance_of_one_element_is_constant_and_has_gradient_zero(f):
    from tape import jvp

    # the function is 0 whatever x is (NaN or inf with ddof >= n): its derivative is 0
    assert grad(f)(3.5) == (0.0,)
    assert jvp(f, (3.5,), (1.0,)) == (0.0, 0.0)
    (g,) = grad(lambda x: np.sum(f(x, axis=0)))(np.ones((1, 3)))
    np.testing.assert_array_equal(g, np.zeros((1, 3)))
    x = np.array([[1.0, 2.0, 4.0], [3.0, 5.0, 0.0]])
    with np.errstate(divide="ignore", invalid="ignore"):
        for ddof in (1, 2, 3):  # slices of one element, or of n <= ddof: NumPy's value kept
            for axis in (0, 1):

                def loss(x, axis=axis, ddof=ddof):
                    return np.sum(f(x, axis=axis, ddof=ddof) * 0.5)

                value, (g,) = value_and_grad(loss)(x)
                np.testing.assert_array_equal(value, loss(x))
                n = x.shape[axis]
                if n <= ddof:
                    np.testing.assert_array_equal(g, np.zeros_like(x))
                else:  # the slices that vary still have their gradient
                    expected = numeric_grad(loss, (x,), 0)
                    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)


def test_nan_variance_with_slices_of_one_number():
    x = np.array([[1.0, np.nan, np.nan], [3.0, 5.0, 0.5]])
    for f in (np.nanstd, np.nanvar):
        (g,) = grad(lambda x, f=f: np.sum(f(x, axis=1) * np.array([1.0, 2.0])))(x)
        expected = numeric_grad(lambda x, f=f: np.sum(f(x[1:], axis=1)) * 2.0, (x,), 0)
        np.testing.assert_allclose(g, np.where(np.isnan(x), 0.0, expected), atol=1e-8)


EMPTY_AND_SINGLE = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "var": np.var, "std": np.std, "std_ddof": lambda x, **k: np.std(x, ddof=1, **k),
    "median": np.median, "nanmedian": np.nanmedian, "average": np.average, "ptp": np.ptp,
    "quantile": lambda x, **k: np.quantile(x, [0.3], **k), "nansum": np.nansum,
    "nanmean": np.nanmean, "nanvar": np.nanvar, "nanstd": np.nanstd, "nanprod": np.nanprod,
    "nanmax": np.nanmax, "cumsum": np.cumsum, "cumprod": np.cumprod, "nancumsum": np.nancumsum,
    "norm": np.linalg.norm, "norm_1": lambda x, **k: np.linalg.norm(x, 1, **k),
    "vector_norm": np.linalg.vector_norm, "add.reduce": np.add.reduce,
    "logaddexp.reduce": np.logaddexp.reduce, "maximum.accumulate": np.maximum.accumulate,
    "cumulative_sum": np.cumulative_sum, "cumulative_prod": np.cumulative_prod,
}  # fmt: skip
# an empty array, an empty axis, an axis of length 1, one element, a scalar
EMPTY_AND_SINGLE_INPUTS = [
    (np.array([]), {}), (np.ones((0, 3)), {"axis": 0}), (np.ones((0, 3)), {"axis": 1}),
    (np.array([2.0]), {}), (np.array([[1.0, 2.0, 3.0]]), {"axis": 0}), (np.float64(3.5), {}),
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(EMPTY_AND_SINGLE))
def test_reductions_of_empty_and_length_one_axes(name):
    """NumPy's value (or NumPy's error), a gradient of the input's shape, and no error in
    the reverse pass; over a length-1 axis, the gradient matches central differences."""
    f = EMPTY_AND_SINGLE[name]
    for x, kwargs in EMPTY_AND_SINGLE_INPUTS:
        if np.ndim(x) == 0 and name.startswith(("cum", "maximum.acc")):
            continue  # scans need an array, as in NumPy
        loss = lambda x, kwargs=kwargs: np.sum(f(x, **kwargs))  # noqa: E731
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                expected = loss(x)
            except (ValueError, IndexError, ZeroDivisionError) as error:
                with pytest.raises(type(error)):
                    value_and_grad(loss)(x)
                continue
            value, (g,) = value_and_grad(loss)(x)
        np.testing.assert_array_equal(value, expected)
        assert np.shape(g) == np.shape(x), (x, kwargs)
        if np.size(x):  # where the value is NaN whatever x is, the gradient is 0
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                expected = numeric_grad(loss, (x,), 0)
            np.testing.assert_allclose(g, np.where(np.isnan(expected), 0.0, expected), atol=1e-8)


def test_mean_of_nothing_is_nan_with_an_empty_gradient():
    with pytest.warns(RuntimeWarning):
        value, (g,) = value_and_grad(np.mean)(np.array([]))
    assert np.isnan(value) and g.shape == (0,)


def test_var_and_std_are_one_record():
    t = Tape()
    x = Leaf(t, np.random.default_rng(0).standard_normal((3, 4)))
    np.std(x, axis=0, ddof=1)
    assert [getattr(r, "f", None) for r in t][1:] == [np.std]


# -- dtype and second order --------------------------------------------------------------

FLOAT32_REDUCTIONS = [
    np.sum,
    np.mean,
    np.max,
    np.nanmax,
    np.prod,
    np.nanprod,
    np.var,
    np.std,
    np.nanstd,
    np.nansum,
    np.nanmean,
    np.cumsum,
    np.cumprod,
    np.nancumsum,
    np.median,
    np.ptp,
    lambda x, axis: np.quantile(x, [0.3], axis=axis),
    lambda x, axis: np.average(x, axis, x * x),
]


@pytest.mark.parametrize("f", FLOAT32_REDUCTIONS)
def test_rules_keep_float32(f):
    t = Tape()
    x = Leaf(t, np.random.default_rng(1).uniform(0.5, 1.5, (3, 4)).astype(np.float32))
    y = np.sum(f(x, axis=1))
    rt = propagate(t, reverse_tape(y, np.float32(1.0)))
    assert rt[x].dtype == np.float32


def _second_order(f, x):
    w = np.random.default_rng(2).standard_normal(np.shape(x))

    def first(x):
        return np.sum(grad(f)(x)[0] * w)

    (got,) = grad(first)(x)
    expected = numeric_grad(lambda x: np.sum(grad(f)(x)[0] * w), (x,), 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


SECOND_ORDER = [
    lambda x: np.sum(np.var(x, axis=0, ddof=1) ** 2),
    lambda x: np.sum(np.std(x, axis=1)),
    lambda x: np.sum(np.prod(x, axis=1)),
    lambda x: np.sum(np.nanvar(x, axis=1) * x[:, 0]),
    lambda x: np.sum(np.max(x, axis=0) ** 3),
    lambda x: np.sum(np.cumprod(x, axis=1) ** 2),
    lambda x: np.sum(np.cumsum(x, axis=0) ** 3),
    lambda x: np.sum(np.median(x, axis=1) ** 3),
    lambda x: np.sum(np.quantile(x, 0.3, axis=0) ** 2),
    lambda x: np.average(x**2, weights=None) * np.mean(x),
    lambda x: np.sum(np.cumulative_prod(x, axis=1, include_initial=True) ** 2),
]


@pytest.mark.parametrize("f", SECOND_ORDER, ids=range(len(SECOND_ORDER)))
def test_second_order(f):
    x = np.random.default_rng(4).uniform(0.5, 1.5, (3, 4))
    _second_order(f, x)


ZEROS = np.array([[0.0, 2.0, 1.5], [0.0, 0.0, 3.0], [1.5, 3.0, 0.5]])  # one zero, two zeros


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_second_order_of_prod_with_zeros(axis):
    _second_order(lambda x: np.sum(np.prod(x, axis=axis, initial=2.0)), ZEROS)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_second_order_of_cumprod_with_zeros(axis):
    _second_order(lambda x: np.sum(np.cumprod(x, axis=axis) ** 2), ZEROS)


def test_second_order_of_products_at_tiny_numbers():
    # y / x would differentiate to terms near 1e200 that cancel
    x = np.array([[1e-200, 2.0, 1.5], [3.0, 1e-30, 0.5], [1.0, 2.0, 3.0]])
    _second_order(lambda x: np.sum(np.prod(x, axis=1) * np.arange(3.0)), x)
    _second_order(lambda x: np.sum(np.cumprod(x, axis=1) ** 2), x)
