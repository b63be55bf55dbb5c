"""tape.scipy.interpolate against scipy.interpolate: SciPy's values on the node path,
gradients in the data against central differences, in the points against SciPy's own
derivative of the spline, second order and forward mode, vmap, and library code that
imports SciPy's names itself."""

import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

si = pytest.importorskip("scipy.interpolate")

from tape import Leaf, Tape, check_grad, grad, hessian, jacobian, jvp, vmap  # noqa: E402
from tape.scipy import interpolate  # noqa: E402
from tests.fd import numeric_grad  # noqa: E402

CLOSE = dict(rtol=1e-12, atol=1e-12)


def through_nodes(fn, *args):
    """``fn``'s value with its arguments as nodes of a tape: the differentiable path."""
    tape = Tape()
    out = fn(*[Leaf(tape, np.asarray(a, dtype=float)) for a in args])
    return out.value if hasattr(out, "tape") else out


@st.composite
def data(draw, min_points=4, max_points=9, columns=False):
    """Increasing positions with gaps of at least 0.2, values, and points to evaluate at,
    some beyond the ends."""
    n = draw(st.integers(min_points, max_points))
    gaps = draw(st.lists(st.floats(0.2, 1.5), min_size=n - 1, max_size=n - 1))
    x = np.concatenate([[0.0], np.cumsum(gaps)]) - draw(st.floats(-2.0, 2.0))
    shape = (n, draw(st.integers(1, 3))) if columns else (n,)
    y = draw(st.lists(st.floats(-3.0, 3.0), min_size=int(np.prod(shape)),
                      max_size=int(np.prod(shape)))).__iter__()  # fmt: skip
    y = np.array(list(y)).reshape(shape)
    points = np.array(draw(st.lists(st.floats(x[0] - 0.5, x[-1] + 0.5), min_size=1, max_size=5)))
    return x, y, points


def weights(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def projected(fn, shape):
    """A scalar of ``fn``'s output: every element of it checked."""
    w = weights(shape)
    return lambda *a: np.sum(fn(*a) * w)


# -- CubicSpline ---------------------------------------------------------------------------

BOUNDARIES = ["not-a-knot", "natural", "clamped", ((1, 0.5), (2, -1.0)), "periodic"]


def periodic(y):
    y = np.array(y, dtype=float)
    y[-1] = y[0]
    return y


def free_values(y, bc):
    """The values a spline's data can vary in, and the data made of them: periodic data
    repeats its first point (central differences must keep it so)."""
    if bc == "periodic" or (isinstance(bc, tuple) and "periodic" in bc):
        return y[:-1], lambda z: np.concatenate([z, z[:1]])
    return y, lambda z: z


@pytest.mark.parametrize("bc", BOUNDARIES, ids=str)
@settings(max_examples=15, deadline=None)
@given(drawn=data(), nu=st.integers(0, 3), extrapolate=st.sampled_from([None, True, False]))
def test_cubic_spline_values_and_gradients(bc, drawn, nu, extrapolate):
    x, y, points = drawn
    if bc == "periodic":
        y = periodic(y)

    z, data_of = free_values(y, bc)

    def spline(z, p):
        return interpolate.CubicSpline(x, data_of(z), bc_type=bc, extrapolate=extrapolate)(p, nu)

    theirs = si.CubicSpline(x, y, bc_type=bc, extrapolate=extrapolate)
    np.testing.assert_allclose(through_nodes(spline, z, points), theirs(points, nu), **CLOSE)
    inside = (points >= x[0]) & (points <= x[-1])
    if extrapolate is False:
        points = points[inside] if inside.any() else x[1:2] + 0.1
    loss = projected(spline, np.shape(points))
    gz, gp = grad(loss, argnums=(0, 1))(z, points)
    np.testing.assert_allclose(gz, numeric_grad(loss, (z, points), 0), rtol=1e-6, atol=1e-7)
    # in the points: SciPy's own derivative of the spline, one order up
    np.testing.assert_allclose(gp, weights(np.shape(points)) * theirs(points, nu + 1), **CLOSE)


@settings(max_examples=10, deadline=None)
@given(drawn=data(columns=True), axis=st.sampled_from([0, 1]))
def test_cubic_spline_of_several_columns_along_either_axis(drawn, axis):
    x, y, points = drawn
    y = np.moveaxis(y, 0, axis)
    pts = points.reshape(-1, 1)  # points of two dimensions: SciPy's layout of the output
    theirs = si.CubicSpline(x, y, axis=axis)(pts)

    def spline(y):
        return interpolate.CubicSpline(x, y, axis=axis)(pts)

    np.testing.assert_allclose(through_nodes(spline, y), theirs, **CLOSE)
    loss = projected(spline, theirs.shape)
    np.testing.assert_allclose(grad(loss)(y)[0], numeric_grad(loss, (y,), 0), rtol=1e-6,
                               atol=1e-7)  # fmt: skip


@pytest.mark.parametrize("bc", ["not-a-knot", "natural", "periodic"])
def test_cubic_spline_derivative_antiderivative_and_integral(bc):
    x = np.linspace(-1.0, 2.0, 8)
    y = np.cos(2 * x)
    if bc == "periodic":
        y = periodic(y)
    theirs = si.CubicSpline(x, y, bc_type=bc)
    points = np.array([-1.5, -0.3, 0.7, 2.6])
    for nu in (1, 2, -1, -2):

        def derivative(y, nu=nu):
            return interpolate.CubicSpline(x, y, bc_type=bc).derivative(nu)(points)

        np.testing.assert_allclose(through_nodes(derivative, y), theirs.derivative(nu)(points),
                                   **CLOSE)  # fmt: skip
    z, data_of = free_values(y, bc)
    for a, b in [(-0.5, 1.5), (1.5, -0.5), (-2.0, 3.0), (0.3, 7.1)]:

        def integral(z, a, b):
            return interpolate.CubicSpline(x, data_of(z), bc_type=bc).integrate(a, b)

        np.testing.assert_allclose(through_nodes(integral, z, a, b), theirs.integrate(a, b),
                                   rtol=1e-12, atol=1e-12)  # fmt: skip
        gz, ga, gb = grad(integral, argnums=(0, 1, 2))(z, a, b)
        np.testing.assert_allclose(gz, numeric_grad(integral, (z, a, b), 0), rtol=1e-6,
                                   atol=1e-8)  # fmt: skip
        # d/db of the integral is the integrand at b (periodic: at b's place in the period)
        np.testing.assert_allclose([ga, gb], [-theirs(a), theirs(b)], rtol=1e-10, atol=1e-12)


def test_cubic_spline_is_a_scipy_cubic_spline_and_plain_values_are_scipys():
    x, y = np.arange(5.0), np.array([0.0, 1.0, 0.0, 2.0, 1.0])
    ours = interpolate.CubicSpline(x, y)
    assert isinstance(ours, si.CubicSpline)
    np.testing.assert_array_equal(ours(np.linspace(-1, 5, 13)),
                                  si.CubicSpline(x, y)(np.linspace(-1, 5, 13)))  # fmt: skip
    np.testing.assert_array_equal(ours.c, si.CubicSpline(x, y).c)


def test_the_positions_of_the_data_are_refused_as_nodes():
    y = np.ones(4)
    with pytest.raises(TypeError, match="not in x"):
        grad(lambda x: interpolate.CubicSpline(x, y)(0.5))(np.arange(4.0))
    with pytest.raises(TypeError, match="not in x"):
        grad(lambda x: interpolate.interp1d(x, y)(0.5))(np.arange(4.0))
    with pytest.raises(TypeError, match="not in t"):
        grad(lambda t: interpolate.make_interp_spline(np.arange(4.0), y, k=1, t=t)(0.5))(
            np.array([0.0, 0.0, 1.0, 2.0, 3.0, 3.0]))  # fmt: skip


# -- PPoly and BSpline made from coefficients -----------------------------------------------


@pytest.mark.parametrize("extrapolate", [True, False, "periodic"])
@pytest.mark.parametrize("decreasing", [False, True])
def test_ppoly_in_coefficients_breakpoints_and_points(extrapolate, decreasing):
    rng = np.random.default_rng(1)
    breaks = np.array([0.0, 0.7, 1.5, 2.0, 3.1])
    if decreasing:
        breaks = breaks[::-1].copy()
    c = rng.standard_normal((4, 4, 2))
    at_breaks = np.array([-0.4, 0.0, 0.7, 1.5, 3.1, 3.5])  # values only: a jump there
    points = np.array([-0.4, 0.3, 0.8, 1.2, 2.9, 3.5])
    theirs = si.PPoly(c, breaks, extrapolate=extrapolate)
    if extrapolate is not True:
        points = points[(points > 0.05) & (points < 3.05)]
    for nu in (0, 1, 2, 4):

        def f(c, breaks, p, nu=nu):
            return interpolate.PPoly(c, breaks, extrapolate=extrapolate)(p, nu)

        np.testing.assert_allclose(through_nodes(f, c, breaks, at_breaks), theirs(at_breaks, nu),
                                   **CLOSE)  # fmt: skip
        loss = projected(f, theirs(points, nu).shape)
        got = grad(loss, argnums=(0, 1, 2))(c, breaks, points)
        for i in (0, 1):
            np.testing.assert_allclose(got[i], numeric_grad(loss, (c, breaks, points), i),
                                       rtol=1e-6, atol=1e-6)  # fmt: skip
        slopes = np.sum(weights(theirs(points).shape) * theirs(points, nu + 1), axis=-1)
        np.testing.assert_allclose(got[2], slopes, **CLOSE)
    for nu in (1, 2):

        def antiderivative(c, nu=nu):
            return interpolate.PPoly(c, breaks).antiderivative(nu)(points)

        np.testing.assert_allclose(through_nodes(antiderivative, c),
                                   si.PPoly(c, breaks).antiderivative(nu)(points), rtol=1e-11,
                                   atol=1e-11)  # fmt: skip
    if not (decreasing and extrapolate == "periodic"):  # which SciPy refuses
        np.testing.assert_allclose(
            through_nodes(lambda c: interpolate.PPoly(c, breaks, extrapolate).integrate(0.2, 2.5),
                          c), theirs.integrate(0.2, 2.5), rtol=1e-11, atol=1e-11)  # fmt: skip


def knots(k, interior, rng):
    inner = np.sort(rng.uniform(0.0, 3.0, interior))
    return np.concatenate([[0.0] * (k + 1), inner, [3.0] * (k + 1)])


@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("extrapolate", [True, False, "periodic"])
def test_bspline_in_coefficients_knots_and_points(k, extrapolate):
    rng = np.random.default_rng(k)
    t = knots(k, 4, rng)
    c = rng.standard_normal((len(t) - k - 1, 2))
    points = np.array([-0.5, 0.1, 1.3, 2.2, 2.9, 3.4])
    if extrapolate is False:
        points = points[1:-1]
    theirs = si.BSpline(t, c, k, extrapolate=extrapolate)
    inner = t[k + 1 : -k - 1]  # the knots central differences can move, keeping the order

    def with_inner(inner):
        return np.concatenate([t[: k + 1], inner, t[-k - 1 :]])

    for nu in range(0, k + 2):

        def f(c, inner, p, nu=nu):
            return interpolate.BSpline(with_inner(inner), c, k, extrapolate=extrapolate)(p, nu)

        np.testing.assert_allclose(through_nodes(f, c, inner, points), theirs(points, nu),
                                   rtol=1e-11, atol=1e-11)  # fmt: skip
        loss = projected(f, theirs(points).shape)
        got = grad(loss, argnums=(0, 1, 2))(c, inner, points)
        np.testing.assert_allclose(got[0], numeric_grad(loss, (c, inner, points), 0), rtol=1e-6,
                                   atol=1e-6)  # fmt: skip
        if nu < k:  # in the knots: where the value is continuous in them
            np.testing.assert_allclose(got[1], numeric_grad(loss, (c, inner, points), 1),
                                       rtol=1e-5, atol=1e-5)  # fmt: skip
        np.testing.assert_allclose(got[2], np.sum(weights(theirs(points).shape)
                                                  * theirs(points, nu + 1), axis=-1),
                                   rtol=1e-10, atol=1e-10)  # fmt: skip
    def ours(c):
        return interpolate.BSpline(t, c, k, extrapolate)

    for nu in (*range(-2, 0), *range(1, k + 1)):  # negative: antiderivatives
        got = through_nodes(lambda c, nu=nu: ours(c).derivative(nu)(points), c)
        np.testing.assert_allclose(got, theirs.derivative(nu)(points), rtol=1e-11, atol=1e-11)
    for a, b in [(0.4, 2.5), (2.5, -0.4), (-1.0, 7.5)]:
        np.testing.assert_allclose(through_nodes(lambda c, a=a, b=b: ours(c).integrate(a, b), c),
                                   theirs.integrate(a, b), rtol=1e-11, atol=1e-11)  # fmt: skip


# -- make_interp_spline and interp1d ---------------------------------------------------------


SPLINES = [
    (1, None), (2, None), (3, None), (5, None), (3, "natural"), (3, "clamped"),
    (3, "periodic"), (3, ([(1, 0.3)], [(2, -0.5)])),
]  # fmt: skip


@pytest.mark.parametrize("k, bc", SPLINES, ids=str)
@settings(max_examples=8, deadline=None)
@given(drawn=data(min_points=7))
def test_make_interp_spline(k, bc, drawn):
    x, y, points = drawn
    if bc == "periodic":
        y = periodic(y)
    theirs = si.make_interp_spline(x, y, k=k, bc_type=bc)
    z, data_of = free_values(y, bc)

    def spline(z, p):
        return interpolate.make_interp_spline(x, data_of(z), k=k, bc_type=bc)(p)

    np.testing.assert_allclose(through_nodes(spline, z, points), theirs(points), rtol=1e-11,
                               atol=1e-11)  # fmt: skip
    loss = projected(spline, points.shape)
    gz, gp = grad(loss, argnums=(0, 1))(z, points)
    np.testing.assert_allclose(gz, numeric_grad(loss, (z, points), 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gp, weights(points.shape) * theirs(points, 1), rtol=1e-10,
                               atol=1e-10)  # fmt: skip


KINDS = ["linear", "nearest", "nearest-up", "previous", "next", "zero", "slinear", "quadratic",
         "cubic"]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fill", ["nan", "scalar", "pair", "extrapolate"])
@settings(max_examples=5, deadline=None)
@given(drawn=data(min_points=5, columns=True))
def test_interp1d(kind, fill, drawn):
    x, y, points = drawn
    y = y.T  # interp1d interpolates along the last axis by default
    order = np.random.default_rng(len(x)).permutation(len(x))  # unsorted: interp1d sorts
    x, y = x[order], y[:, order]
    fill_value = {"nan": np.nan, "scalar": -7.0, "pair": (-7.0, 9.0), "extrapolate": "extrapolate"}
    kwargs = dict(kind=kind, fill_value=fill_value[fill], bounds_error=False)
    if fill == "extrapolate" and kind in ("zero", "slinear", "quadratic", "cubic"):
        kwargs["fill_value"] = np.nan  # SciPy's splines extrapolate only through fill_value
    theirs = si.interp1d(x, y, **kwargs)

    def f(y, p):
        return interpolate.interp1d(x, y, **kwargs)(p)

    np.testing.assert_allclose(through_nodes(f, y, points), theirs(points), rtol=1e-11,
                               atol=1e-11)  # fmt: skip
    loss = projected(lambda y, p: np.nan_to_num(f(y, p)), theirs(points).shape)
    gy, gp = grad(loss, argnums=(0, 1))(y, points)
    np.testing.assert_allclose(gy, numeric_grad(loss, (y, points), 0), rtol=1e-6, atol=1e-7)
    xs = np.sort(x)
    kinks = np.concatenate([xs, (xs[1:] + xs[:-1]) / 2])  # nearest's jumps are halfway
    away = np.min(np.abs(points[:, None] - kinks[None, :]), axis=1) > 1e-3
    np.testing.assert_allclose(gp[away], numeric_grad(loss, (y, points), 1)[away], rtol=1e-5,
                               atol=1e-6)  # fmt: skip


def test_interp1d_fill_values_and_bounds_error():
    x, y = np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 2.0])
    grad_fill = grad(lambda lo, hi: np.sum(interpolate.interp1d(
        x, y, bounds_error=False, fill_value=(lo, hi))(np.array([-1.0, 0.5, 3.0, 4.0]))),
        argnums=(0, 1))(0.0, 0.0)  # fmt: skip
    assert grad_fill == (1.0, 2.0)
    with pytest.raises(ValueError, match=r"A value \(3.0\) in x_new is above"):
        grad(lambda y: np.sum(interpolate.interp1d(x, y)(np.array([0.5, 3.0]))))(y)
    with pytest.raises(ValueError, match=r"A value \(-1.0\) in x_new is below"):
        grad(lambda y: np.sum(interpolate.interp1d(x, y)(np.array([-1.0]))))(y)


# -- higher order, forward mode, vmap -----------------------------------------------------------


def test_second_order_and_forward_mode():
    x = np.linspace(0.0, 2.0, 6)
    y, p = np.sin(x), np.array([0.35, 1.4])
    check_grad(lambda y, p: interpolate.CubicSpline(x, y)(p) ** 2, y, p, order=2, rtol=1e-4,
               atol=1e-6)  # fmt: skip
    check_grad(lambda y, p: interpolate.make_interp_spline(x, y, k=5)(p) ** 2, y, p, order=2,
               rtol=1e-4, atol=1e-6)  # fmt: skip
    check_grad(lambda y, p: interpolate.interp1d(x, y, kind="linear")(p) ** 2, y, p, order=2,
               rtol=1e-4, atol=1e-6)  # fmt: skip
    # the Hessian in the points is SciPy's second derivative; in y the spline is linear
    spline = si.CubicSpline(x, y)
    h = hessian(lambda p: np.sum(interpolate.CubicSpline(x, y)(p)))(p)
    np.testing.assert_allclose(h, np.diag(spline(p, 2)), rtol=1e-10, atol=1e-12)
    jac = jacobian(lambda y: interpolate.CubicSpline(x, y)(p), mode="fwd")(y)
    np.testing.assert_allclose(jac, si.CubicSpline(x, np.eye(6))(p), rtol=1e-10, atol=1e-12)
    _, tangent = jvp(lambda p: interpolate.CubicSpline(x, y)(p), (p,), (np.ones(2),))
    np.testing.assert_allclose(tangent, spline(p, 1), rtol=1e-10)


def test_vmap_of_grad_over_data_and_over_points():
    x = np.linspace(0.0, 2.0, 6)
    ys = np.stack([np.sin(x), np.cos(x), x**2])
    ps = np.array([[0.3, 1.2], [1.9, 0.1], [0.7, 0.7]])

    def f(y, p):
        return np.sum(interpolate.CubicSpline(x, y)(p) ** 2)

    over_data = vmap(grad(f), in_axes=(0, None))(ys, ps[0])[0]
    over_points = vmap(grad(f, argnums=(1,)), in_axes=(None, 0))(ys[0], ps)[0]
    for i in range(3):
        np.testing.assert_allclose(over_data[i], grad(f)(ys[i], ps[0])[0], rtol=1e-12)
        np.testing.assert_allclose(over_points[i], grad(f, argnums=(1,))(ys[0], ps[i])[0],
                                   rtol=1e-12)  # fmt: skip
    spline = interpolate.CubicSpline(x, ys[0])  # a plain spline, vmapped over its points
    np.testing.assert_allclose(vmap(spline)(ps), spline(ps), rtol=1e-12)


# -- library code: SciPy's own names, redirected while a pass records ----------------------


def library(source):
    """A module of library code, imported as library code is (in sys.modules)."""
    module = types.ModuleType("interpolating_library")
    sys.modules[module.__name__] = module
    exec(source, module.__dict__)
    return module


LIBRARY = '''
import numpy as np
from scipy.interpolate import CubicSpline, interp1d, make_interp_spline
import scipy.interpolate

GRID = np.linspace(0.0, 2.0, 7)

def smoothed(y, p):
    spline = CubicSpline(GRID, y, bc_type="natural")
    return (np.sum(spline(p)) + spline.integrate(0.2, 1.7) + np.sum(spline.derivative()(p))
            + np.sum(interp1d(GRID, y, kind="cubic")(p))
            + np.sum(make_interp_spline(GRID, y, k=2)(p))
            + np.sum(piecewise_linear(y)(p)))


def piecewise_linear(y):
    slopes = np.diff(y) / np.diff(GRID)
    return scipy.interpolate.PPoly(np.stack([slopes, y[:-1]]), GRID)

def at(p):
    return np.sum(CubicSpline(GRID, np.cos(GRID))(p) ** 2)
'''


def test_library_code_that_imports_scipys_splines_is_differentiated():
    lib = library(LIBRARY)
    y, p = np.sin(lib.GRID), np.array([0.3, 1.15])
    gy, gp = grad(lib.smoothed, argnums=(0, 1))(y, p)
    np.testing.assert_allclose(gy, numeric_grad(lib.smoothed, (y, p), 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gp, numeric_grad(lib.smoothed, (y, p), 1), rtol=1e-6, atol=1e-7)
    spline = si.CubicSpline(lib.GRID, np.cos(lib.GRID))  # a plain spline met by node points
    np.testing.assert_allclose(grad(lib.at)(p)[0], 2 * spline(p) * spline(p, 1), rtol=1e-12)
    # SciPy's classes are still SciPy's, and plain values get SciPy's results
    assert isinstance(lib.CubicSpline(lib.GRID, y), si.CubicSpline)
    assert lib.CubicSpline is si.CubicSpline
    np.testing.assert_allclose(lib.smoothed(y, p), float(lib.smoothed(y, p)))
