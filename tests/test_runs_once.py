"""Each transform runs the function it differentiates as often as it needs and no more:
once per call for grad, value_and_grad, vjp, jvp, jacobian (every mode), hessian, hvp
and vmap. A run of its own before the recorded one (to size the output, say) would
warm a cache keyed by input value, whose plain result the recorded run then gets back
(a zero derivative), and would hand a stateful function's recorded run another state.

Every derivative is checked against central differences of the uncached function, or
against the analytic derivative of the run whose value the transform returned."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import (
    Node,
    check_grad,
    grad,
    hessian,
    hvp,
    jacobian,
    jvp,
    value_and_grad,
    vjp,
    vmap,
)
from tests.strategies import arrays

STEP = 1e-6  # central differences: truncation ~STEP**2, rounding ~1e-16 / STEP
RTOL, ATOL = 1e-6, 1e-8


def central_jacobian(f, x, step=STEP):
    """d f / d x by central differences, of shape ``f(x).shape + x.shape``."""
    x = np.asarray(x, dtype=float)
    columns = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = step
        columns.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * step))
    return np.moveaxis(np.array(columns), 0, -1).reshape(np.shape(f(x)) + x.shape)


def assert_close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def _plain(x):
    """``x`` with every node, of every tape, replaced by its value."""
    while isinstance(x, Node):
        x = x.value
    return x


class Cached:
    """``fn`` behind a cache of plain results keyed by the input's bytes, as a compiled
    library keeps one (or astropy's ``Voigt1D`` its last value): on a hit it hands back
    the stored array, which carries no derivative. ``calls`` counts the runs of ``fn``."""

    def __init__(self, fn):
        self.fn, self.store, self.calls = fn, {}, 0

    def __call__(self, x):
        key = np.asarray(_plain(x)).tobytes()
        if key in self.store:
            return self.store[key]
        self.calls += 1
        out = self.fn(x)
        self.store[key] = np.copy(_plain(out))
        return out


WEIGHTS = np.array([1.0, -2.0, 0.5])


def vector_fn(x):
    """More outputs than inputs: ``jacobian``'s "auto" mode takes forward mode."""
    return np.outer(np.sin(x), WEIGHTS) + x[:, None] ** 2


def scalar_fn(x):
    """One output: ``jacobian``'s "auto" mode takes reverse mode."""
    return np.sum(np.sin(x) * np.cos(2 * x)) + np.sum(x**3)


def scalar_gradient(x):
    """``scalar_fn``'s gradient by hand, whose central differences give its Hessian
    (differences of differences would lose half the digits)."""
    return np.cos(x) * np.cos(2 * x) - 2 * np.sin(x) * np.sin(2 * x) + 3 * x**2


X = np.array([0.3, -0.8, 1.1])
ELSEWHERE = X + 0.5  # where the caller last evaluated the function (its previous iterate)


def _jacobian_of(fn, mode):
    return lambda x: jacobian(fn, mode=mode)(x)


def _grad_of(fn):
    return lambda x: grad(fn, argnums=0)(x)


def _value_and_grad_of(fn):
    return lambda x: value_and_grad(fn, argnums=0)(x)[1]


def _jvp_columns(fn):
    # the whole Jacobian as one jvp of n directions; its last axis is the input's
    return lambda x: np.moveaxis(jvp(fn, (x,), (np.eye(x.size),))[1], 0, -1)


def _vjp_rows(fn):
    def rows(x):
        y, pullback = vjp(fn, x)
        eye = np.eye(y.size).reshape((y.size,) + y.shape)
        return np.stack([pullback(e)[0] for e in eye]).reshape(y.shape + x.shape)

    return rows


V = np.array([0.5, -1.0, 2.0])


def _hvp_along_v(fn):
    return lambda x: hvp(fn)(x, V)


def _differences(fn):
    return lambda x: central_jacobian(fn, x)


# (name, the derivative as a function of the function, the function, the reference: a
# function of x from central differences)
DERIVATIVES = [
    ("jacobian auto", lambda fn: _jacobian_of(fn, "auto"), vector_fn, _differences(vector_fn)),
    ("jacobian auto, rev", lambda fn: _jacobian_of(fn, "auto"), scalar_fn, _differences(scalar_fn)),
    ("jacobian fwd", lambda fn: _jacobian_of(fn, "fwd"), vector_fn, _differences(vector_fn)),
    ("jacobian rev", lambda fn: _jacobian_of(fn, "rev"), vector_fn, _differences(vector_fn)),
    ("grad", _grad_of, scalar_fn, _differences(scalar_fn)),
    ("value_and_grad", _value_and_grad_of, scalar_fn, _differences(scalar_fn)),
    ("jvp", _jvp_columns, vector_fn, _differences(vector_fn)),
    ("vjp", _vjp_rows, vector_fn, _differences(vector_fn)),
    ("hessian", hessian, scalar_fn, _differences(scalar_gradient)),
    ("hvp", _hvp_along_v, scalar_fn, lambda x: central_jacobian(scalar_gradient, x) @ V),
]


@pytest.mark.parametrize(
    "derivative, fn, reference",
    [d[1:] for d in DERIVATIVES],
    ids=[d[0] for d in DERIVATIVES],
)
def test_a_function_that_caches_by_input_value_gets_its_true_derivative(derivative, fn, reference):
    cached = Cached(fn)
    # the caller's own call, at another point: a cache that holds X itself is hit by any
    # recorded run, whatever the transform (docs/guide/grad.md says so)
    cached(ELSEWHERE)
    assert_close(derivative(cached)(X), reference(X))
    assert cached.calls == 2  # the caller's run and the transform's one


# -- how often f runs -------------------------------------------------------------------


class Counted:
    """``fn``, counting its runs."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def _vjp_pulled_twice(f):
    _, pullback = vjp(f, X)
    return pullback(np.ones((3, 3))), pullback(np.ones((3, 3)))


# (name, one call of the transform on a counted function, the runs of f it takes)
RUNS = [
    ("grad", lambda f: grad(f)(X), scalar_fn, 1),
    ("value_and_grad", lambda f: value_and_grad(f)(X), scalar_fn, 1),
    ("vjp and two pullbacks", _vjp_pulled_twice, vector_fn, 1),
    ("jvp", lambda f: jvp(f, (X,), (np.ones(3),)), vector_fn, 1),
    ("jacobian auto, fwd", lambda f: jacobian(f)(X), vector_fn, 1),
    ("jacobian auto, rev", lambda f: jacobian(f)(X), scalar_fn, 1),
    ("jacobian fwd", lambda f: jacobian(f, mode="fwd")(X), vector_fn, 1),
    ("jacobian rev", lambda f: jacobian(f, mode="rev")(X), vector_fn, 1),
    ("hessian", lambda f: hessian(f)(X), scalar_fn, 1),
    ("hvp", lambda f: hvp(f)(X, np.ones(3)), scalar_fn, 1),
    ("vmap", lambda f: vmap(f)(np.ones((4, 3))), vector_fn, 1),
    ("vmap of jacobian", lambda f: vmap(jacobian(f))(np.ones((4, 3))), vector_fn, 1),
    ("jacobian of jacobian", lambda f: jacobian(jacobian(f))(X), vector_fn, 1),
    # four runs for 5-point differences, one per mode, one for the pass whose adjoints
    # start pre-filled (reverse mode)
    ("check_grad", lambda f: check_grad(f, X), vector_fn, 4 + 2 + 1),
    ("check_grad rev", lambda f: check_grad(f, X, modes=("rev",)), vector_fn, 4 + 1 + 1),
    ("check_grad fwd", lambda f: check_grad(f, X, modes=("fwd",)), vector_fn, 4 + 1),
]


@pytest.mark.parametrize("transform, fn, runs", [r[1:] for r in RUNS], ids=[r[0] for r in RUNS])
def test_each_transform_runs_f_as_often_as_it_needs(transform, fn, runs):
    counted = Counted(fn)
    transform(counted)
    assert counted.calls == runs


@settings(max_examples=25, deadline=None)
@given(
    n_in=st.integers(1, 4),
    n_out=st.integers(1, 4),
    mode=st.sampled_from(["auto", "fwd", "rev"]),
    data=st.data(),
)
def test_jacobian_runs_f_once_whichever_side_is_larger(n_in, n_out, mode, data):
    x = data.draw(arrays((n_in,)))
    w = data.draw(arrays((n_out,), low=0.5, high=1.5))
    counted = Counted(lambda x: np.sin(np.outer(w, x)) @ np.ones(n_in))
    J = jacobian(counted, mode=mode)(x)
    assert counted.calls == 1
    # d/dx_j sum_k sin(w_i x_k) = w_i cos(w_i x_j)
    assert_close(J, w[:, None] * np.cos(np.outer(w, x)))


# -- a stateful function -------------------------------------------------------------------


def scaled_by_call(power=2):
    """``scale * x ** power``, ``scale`` the number of the run (1, 2, ...): each run is
    another function, and a derivative must be that of the run it reports on."""
    count = itertools.count(1)

    def f(x):
        return next(count) * x**power

    return f


def test_jacobian_is_the_derivative_of_the_first_run_of_a_stateful_function():
    for mode in ("auto", "fwd", "rev"):
        J = jacobian(scaled_by_call(), mode=mode)(X)
        assert_close(J, np.diag(1 * 2 * X))  # the first run: 1 * x**2


def test_jacobian_of_a_stateful_function_with_more_outputs_than_inputs():
    count = itertools.count(1)

    def f(x):
        return next(count) * np.outer(x, x)

    J = jacobian(f)(X)  # "auto": forward mode
    # d (x_i x_j) / d x_k = delta_ik x_j + x_i delta_jk, at scale 1
    eye = np.eye(X.size)
    expected = eye[:, None, :] * X[None, :, None] + X[:, None, None] * eye[None, :, :]
    assert_close(J, expected)


@settings(max_examples=15, deadline=None)
@given(data=st.data(), n=st.integers(1, 4))
def test_a_value_and_its_derivative_come_from_the_same_run(data, n):
    x = data.draw(arrays((n,), low=0.5, high=2.0))

    f = scaled_by_call()
    f(x)  # the caller's call: the transforms below see scale 2, 3, ...
    value, (g,) = value_and_grad(lambda x: np.sum(f(x)))(x)
    scale = value / np.sum(x**2)
    assert_close(g, 2 * scale * x)

    y, pullback = vjp(f, x)
    scale = y[0] / x[0] ** 2
    assert_close(pullback(np.ones(n))[0], 2 * scale * x)
    assert_close(pullback(np.ones(n))[0], 2 * scale * x)  # the same run, applied again

    y, ydot = jvp(f, (x,), (np.ones(n),))
    scale = y[0] / x[0] ** 2
    assert_close(ydot, 2 * scale * x)


def test_hessian_is_that_of_the_first_run_of_a_stateful_function():
    f = scaled_by_call(power=3)
    H = hessian(lambda x: np.sum(f(x)))(X)
    assert_close(H, np.diag(1 * 6 * X))  # the first run: d2/dx2 of 1 * x**3
