"""tape.core.observing: debug modes and vmap's closures both watch the records of the context,
and neither takes the other's place, whichever is opened inside the other."""

import inspect

import numpy as np
import pytest

import tape
from tape import (
    AnomalyError,
    Leaf,
    Tape,
    debug,
    detect_anomaly,
    grad,
    propagate,
    recorded_at,
    reverse_tape,
    vmap,
)
from tape.core.observing import observing
from tape.transforms.vmap import VmapFallbackWarning, broadcast
from tests.fd import numeric_grad

X = np.array([[0.5, 1.0], [1.5, -2.0], [2.5, 0.25]])
W = np.array([0.3, -0.7])


def _expected(w):  # d/dw sum_b sum(sin(w * x_b))
    return sum(np.cos(w * x) * x for x in X)


def test_debug_inside_vmap_keeps_the_broadcast_of_a_closure():
    t = Tape()
    w = Leaf(t, W)
    seen = {}

    def one(x):
        with debug():
            y, seen["line"] = np.sin(w * x), inspect.currentframe().f_lineno
            seen["y"] = y
            return np.sum(y)

    total = np.sum(vmap(one)(X))
    assert any(getattr(r, "f", None) is broadcast for r in t)  # the closure was broadcast
    np.testing.assert_allclose(propagate(t, reverse_tape(total))[w], _expected(W))
    assert recorded_at(seen["y"]) == (__file__, seen["line"], "one")
    assert observing.get() is None


def test_grad_of_a_vmap_with_debug_inside_matches_finite_differences():
    def f(w):
        def one(x):
            with debug():
                return np.sum(np.sin(w * x))

        return np.sum(vmap(one)(X))

    (g,) = grad(f)(W)
    assert type(g) is np.ndarray
    np.testing.assert_allclose(g, numeric_grad(f, [W], 0), rtol=1e-6)
    np.testing.assert_allclose(g, _expected(W))


def test_detect_anomaly_inside_vmap_still_fires():
    def f(w):
        def one(x):
            with detect_anomaly():
                return np.sum(np.log(w * x * x))  # log(0) in every example

        return np.sum(vmap(one)(X))

    with np.errstate(all="ignore"), pytest.raises(AnomalyError, match="log returned -inf"):
        grad(f)(np.array([0.0, 1.0]))

    def one_bad(x):
        with detect_anomaly():
            return np.log(x)  # NaN in one example only: still found

    with np.errstate(all="ignore"), pytest.raises(AnomalyError, match="log returned NaN"):
        grad(lambda X: np.sum(vmap(one_bad)(X)))(X)

    def per_example(x):
        with detect_anomaly():  # sqrt's derivative at 0: infinite in every example
            return grad(lambda x: np.sum(np.sqrt(x * x[0])))(x)[0]

    with np.errstate(all="ignore"), pytest.raises(AnomalyError, match="sensitivity of sqrt"):
        vmap(per_example)(np.array([[0.0, 1.0], [0.0, 2.0]]))


def test_debug_around_vmap_keeps_both():
    def f(w):
        return np.sum(vmap(lambda x: np.sum(np.sin(w * x)))(X))

    with debug():
        (g,) = grad(f)(W)
        with pytest.warns(VmapFallbackWarning):  # debug reports vmap's loop fallback
            vmap(lambda x: np.convolve(x, [1.0, 2.0]))(X)
    np.testing.assert_allclose(g, _expected(W))

    def g_sqrt(w):
        return np.sum(vmap(lambda x: np.sum(np.sqrt(w * x * x)))(X))

    with np.errstate(all="ignore"), detect_anomaly():
        with pytest.raises(AnomalyError, match="sensitivity of sqrt"):
            grad(g_sqrt)(np.array([0.0, 1.0]))


def test_a_debug_mode_opened_inside_vmap_reports_the_loop_fallback():
    def one(x):
        with debug():
            return np.convolve(x, [1.0, 2.0])

    with pytest.warns(VmapFallbackWarning, match="ran once per example"):
        got = vmap(one)(X)
    np.testing.assert_allclose(got, [np.convolve(x, [1.0, 2.0]) for x in X])
    assert tape.core.observing.observing.get() is None
