"""Central finite differences: the independent reference every gradient test uses."""

from __future__ import annotations

import numpy as np

from tape import grad


def numeric_grad(f, args, argnum, eps=1e-6):
    """d f / d args[argnum] by central differences, f real and scalar-valued, in double
    precision. For a complex argument, JAX's convention: df/dx - 1j df/dy."""
    args = list(args)
    x = args[argnum]
    scalar = np.ndim(x) == 0
    complex_input = np.iscomplexobj(x)
    x = np.array(x, dtype=np.complex128 if complex_input else np.float64)
    g = np.zeros_like(x)
    directions = (1.0, 1j) if complex_input else (1.0,)
    for i in np.ndindex(x.shape):
        h = eps * max(1.0, abs(x[i]))
        for unit in directions:
            up, down = x.copy(), x.copy()
            up[i] += unit * h
            down[i] -= unit * h
            args_up, args_down = list(args), list(args)
            args_up[argnum] = up[()] if scalar else up
            args_down[argnum] = down[()] if scalar else down
            d = (f(*args_up) - f(*args_down)) / (2 * h)
            g[i] += d if unit == 1.0 else -1j * d
    if scalar:
        return complex(g) if complex_input else float(g)
    return g


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
