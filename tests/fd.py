"""Central finite differences: the independent reference every gradient test uses."""

from __future__ import annotations

import numpy as np

from tape import grad


def numeric_grad(f, args, argnum, eps=1e-6):
    """d f / d args[argnum] by central differences, f scalar-valued, in float64."""
    args = list(args)
    x = args[argnum]
    scalar = np.ndim(x) == 0
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        h = eps * max(1.0, abs(x[i]))
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        args_up, args_down = list(args), list(args)
        args_up[argnum] = float(up) if scalar else up
        args_down[argnum] = float(down) if scalar else down
        g[i] = (f(*args_up) - f(*args_down)) / (2 * h)
    return float(g) if scalar else g


def projected(f, *args, seed=0):
    """A scalar function: f's output against a fixed random cotangent, so that every
    element of a non-scalar output is checked."""
    out = f(*args)
    if np.ndim(out) == 0:
        return f
    w = np.random.default_rng(seed).standard_normal(np.shape(out))
    return lambda *a: np.sum(f(*a) * w)


def check_grads(f, *args, argnums=None, rtol=1e-5, atol=1e-6, eps=1e-6):
    """Assert that ``grad`` of ``f`` (projected to a scalar) matches central differences."""
    scalar_f = projected(f, *args)
    if argnums is None:
        argnums = tuple(i for i, a in enumerate(args) if np.result_type(a).kind == "f")
    got = grad(scalar_f, argnums=tuple(argnums))(*args)
    for g, i in zip(got, argnums):
        expected = numeric_grad(scalar_f, args, i, eps)
        assert np.shape(g) == np.shape(args[i]), (np.shape(g), np.shape(args[i]))
        np.testing.assert_allclose(g, expected, rtol=rtol, atol=atol, err_msg=f"argument {i}")
