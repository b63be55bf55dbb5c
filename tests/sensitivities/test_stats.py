"""Statistics helpers against central differences; the implementations also against
NumPy's own values."""

import numpy as np
from hypothesis import strategies as st

from tests.sensitivities.cases import Case, implementation_test, rule_test
from tests.strategies import arrays

sizes = st.integers(1, 5)


def convolve_draw(data):
    a = data.draw(arrays((data.draw(sizes),)))
    v = data.draw(arrays((data.draw(sizes),)))
    return a, v, data.draw(st.sampled_from(["full", "same", "valid"]))


def interp_draw(on_knots):
    """Points inside and outside the sample points ``xp``; ``on_knots``: some exactly on
    them (the values are linear in ``fp`` everywhere), else none within 0.01 of them
    (the interpolant has kinks there)."""

    def draw(data):
        n = data.draw(st.integers(1, 5))
        xp = np.cumsum(data.draw(arrays((n,), 0.3, 1.0))) - 1.0
        x = data.draw(arrays(data.draw(st.sampled_from([(), (4,), (2, 3)])), -2.0, 5.0))
        gap = x[..., None] - xp
        near = np.abs(gap).min(axis=-1) < 0.01
        nearest = xp[np.abs(gap).argmin(axis=-1)]
        x = np.where(near, nearest if on_knots else nearest + 0.05, x)
        fp = data.draw(arrays((n,)))
        left, right = data.draw(st.sampled_from([(None, None), (-3.0, None), (None, 4.0)]))
        return x, xp, fp, left, right

    return draw


CASES = [
    Case(np.convolve, convolve_draw, argnums=(0, 1)),
    Case(np.interp, interp_draw(True), argnums=(2,), name="interp-fp"),
    Case(np.interp, interp_draw(False), argnums=(0,), name="interp-x"),
    Case(np.interp, interp_draw(False), argnums=(1,), name="interp-xp"),
]

test_stats_rules = rule_test(CASES)


def cov_draw(data):
    n, k = data.draw(st.integers(2, 5)), data.draw(st.integers(1, 3))
    rowvar = data.draw(st.booleans())
    m = data.draw(arrays(data.draw(st.sampled_from([(n,), (k, n) if rowvar else (n, k)]))))
    y = data.draw(st.sampled_from([None, "y"]))
    if y:
        y = data.draw(arrays((n,)))
    fweights, aweights = np.arange(1, n + 1), np.linspace(0.5, 1.5, n)
    kwargs = data.draw(st.sampled_from([
        {}, {"bias": True}, {"ddof": 0}, {"fweights": fweights}, {"aweights": aweights},
        {"fweights": fweights, "aweights": aweights, "ddof": 1},
    ]))  # fmt: skip
    return m, y, rowvar, kwargs


def corrcoef_draw(data):
    n, k = data.draw(st.integers(3, 5)), data.draw(st.integers(2, 3))
    # rows with a spread, so that no variance is near zero
    m = (
        data.draw(arrays((k, n), -0.5, 0.5))
        + np.linspace(-2.0, 2.0, n) * np.arange(1, k + 1)[:, None] ** 0.5
    )
    m = m + np.cos(np.arange(n) * np.arange(1, k + 1)[:, None])
    return m, data.draw(st.booleans())


def trapezoid_draw(data):
    shape = data.draw(st.sampled_from([(4,), (3, 4), (2, 3, 2)]))
    y = data.draw(arrays(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(st.sampled_from([None, "1d", "nd"]))
    if x == "1d":
        x = data.draw(arrays((shape[axis],)))
    elif x == "nd":
        x = data.draw(arrays(shape))
    return y, x, data.draw(arrays((), 0.5, 2.0)), axis


def polyfit_draw(data):
    n = data.draw(st.integers(2, 6))
    x = np.linspace(-1.0, 1.0, n) + data.draw(arrays((n,), -0.05, 0.05))  # distinct points
    y = data.draw(arrays(data.draw(st.sampled_from([(n,), (n, 2)]))))
    w = data.draw(st.sampled_from([None, "w"]))
    if w:
        w = data.draw(arrays((n,), 0.5, 2.0))
    return x, y, data.draw(st.integers(0, n - 1)), w


# every float argument is differentiated (argnums None): None, strings and dicts pass through
IMPLEMENTED = [
    Case(
        np.cov,
        cov_draw,
        fn=lambda m, y, rowvar, kw: np.cov(m, y, rowvar, **kw),
        argnums=None,
        rtol=1e-4,
    ),
    Case(
        np.corrcoef,
        corrcoef_draw,
        fn=lambda m, rowvar: np.corrcoef(m if rowvar else m.T, rowvar=rowvar),
        argnums=None,
        rtol=1e-4,
    ),
    Case(
        np.polyval,
        lambda d: (d.draw(arrays((d.draw(sizes),))), d.draw(arrays((3,)))),
        argnums=None,
        rtol=1e-4,
    ),
    Case(
        np.polyval,
        lambda d: (d.draw(arrays((d.draw(sizes),))), d.draw(arrays(()))),
        argnums=None,
        rtol=1e-4,
    ),
    Case(
        np.trapezoid,
        trapezoid_draw,
        fn=lambda y, x, dx, axis: np.trapezoid(y, x, dx, axis),
        argnums=None,
        rtol=1e-4,
    ),
    Case(np.correlate, convolve_draw, argnums=None, rtol=1e-4),
    Case(
        np.polyfit,
        polyfit_draw,
        fn=lambda x, y, deg, w: np.polyfit(x, y, deg, w=w),
        argnums=None,
        rtol=1e-4,
    ),
]

test_stats_implementations = implementation_test(IMPLEMENTED, value_rtol=1e-12)


def test_complex_convolution_and_covariance_follow_the_convention():
    from tests.sensitivities.test_linalg import check_complex_grads

    rng = np.random.default_rng(9)
    a = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    v = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    m = rng.standard_normal((2, 4)) + 1j * rng.standard_normal((2, 4))
    check_complex_grads(np.convolve, a, v, argnums=(0, 1))
    check_complex_grads(lambda a, v: np.correlate(a, v, "full"), a, v, argnums=(0, 1))
    check_complex_grads(lambda v, a: np.correlate(v, a, "same"), v, a, argnums=(0, 1))
    check_complex_grads(np.cov, m)
