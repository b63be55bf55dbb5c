"""Sensitivities of elementwise functions: arithmetic, exponentials, trigonometry.

Rules return the adjoint at the broadcast shape; the engine sums it back to each
argument's shape. Every rule is NumPy over its inputs, so it is differentiable again.
"""

import numpy as np

from .registry import nondifferentiable, sensitivity


def _unit_step(a, b):
    """1 where a > b, 0.5 where a == b, else 0: ties share the adjoint equally, as in
    autograd and JAX. A plain array, whatever a and b are."""
    return np.greater(a, b) + 0.5 * np.equal(a, b)


# -- arithmetic -------------------------------------------------------------------------

sensitivity(np.add, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.add, 1)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.subtract, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.subtract, 1)(lambda y, ybar, a, b, **kw: -ybar)
sensitivity(np.multiply, 0)(lambda y, ybar, a, b, **kw: ybar * b)
sensitivity(np.multiply, 1)(lambda y, ybar, a, b, **kw: ybar * a)
sensitivity(np.true_divide, 0)(lambda y, ybar, a, b, **kw: ybar / b)
sensitivity(np.true_divide, 1)(lambda y, ybar, a, b, **kw: -ybar * y / b)
sensitivity(np.negative, 0)(lambda y, ybar, x, **kw: -ybar)
sensitivity(np.positive, 0)(lambda y, ybar, x, **kw: ybar)
sensitivity(np.absolute, 0)(lambda y, ybar, x, **kw: ybar * np.sign(x))
sensitivity(np.square, 0)(lambda y, ybar, x, **kw: ybar * 2 * x)
sensitivity(np.remainder, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.remainder, 1)(lambda y, ybar, a, b, **kw: -ybar * np.floor_divide(a, b))


@sensitivity(np.power, 0)
def _(y, ybar, x, p, **kw):
    # p == 0 must give 0 even at x == 0, where x ** (p - 1) is inf
    constant = np.equal(p, 0)
    return ybar * np.where(constant, 0.0, p * np.power(np.where(constant, 1.0, x), p - 1))


@sensitivity(np.power, 1)
def _(y, ybar, x, p, **kw):
    # d/dp x**p = x**p log x, taken as 0 at x == 0 (its limit from p > 0)
    zero = np.equal(x, 0)
    return ybar * np.where(zero, 0.0, y * np.log(np.where(zero, 1.0, x)))


@sensitivity(np.maximum, 0)
def _(y, ybar, a, b, **kw):
    return ybar * _unit_step(a, b)


@sensitivity(np.maximum, 1)
def _(y, ybar, a, b, **kw):
    return ybar * _unit_step(b, a)


@sensitivity(np.minimum, 0)
def _(y, ybar, a, b, **kw):
    return ybar * _unit_step(b, a)


@sensitivity(np.minimum, 1)
def _(y, ybar, a, b, **kw):
    return ybar * _unit_step(a, b)


# -- exponentials, logarithms, roots ----------------------------------------------------

sensitivity(np.exp, 0)(lambda y, ybar, x, **kw: ybar * y)
sensitivity(np.log, 0)(lambda y, ybar, x, **kw: ybar / x)
sensitivity(np.sqrt, 0)(lambda y, ybar, x, **kw: ybar / (2 * y))

# -- trigonometric and hyperbolic -------------------------------------------------------

sensitivity(np.sin, 0)(lambda y, ybar, x, **kw: ybar * np.cos(x))
sensitivity(np.cos, 0)(lambda y, ybar, x, **kw: -ybar * np.sin(x))
sensitivity(np.tanh, 0)(lambda y, ybar, x, **kw: ybar * (1 - y * y))

# -- selection --------------------------------------------------------------------------


@sensitivity(np.where, 1)
def _(y, ybar, condition, a, b):
    return np.where(condition, ybar, 0.0)


@sensitivity(np.where, 2)
def _(y, ybar, condition, a, b):
    return np.where(condition, 0.0, ybar)


def _clip_bounds(args, kwargs):
    lo = args[0] if len(args) > 0 else kwargs.get("a_min", kwargs.get("min"))
    hi = args[1] if len(args) > 1 else kwargs.get("a_max", kwargs.get("max"))
    return lo, hi


@sensitivity(np.clip, 0)
def _(y, ybar, a, *bounds, **kwargs):
    lo, hi = _clip_bounds(bounds, kwargs)
    inside = np.ones_like(a, dtype=bool)
    if lo is not None:
        inside = inside & np.greater_equal(a, lo)
    if hi is not None:
        inside = inside & np.less_equal(a, hi)
    return np.where(inside, ybar, 0.0)


@sensitivity(np.clip, 1)
def _(y, ybar, a, a_min, *rest, **kwargs):
    return np.where(np.less(a, a_min), ybar, 0.0)


@sensitivity(np.clip, 2)
def _(y, ybar, a, a_min, a_max, *rest, **kwargs):
    below = np.zeros_like(a, dtype=bool) if a_min is None else np.less(a, a_min)
    return np.where(np.greater(a, a_max) & ~below, ybar, 0.0)


# -- piecewise constant: plain results, no gradient -------------------------------------

nondifferentiable(
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
    np.isnan, np.isinf, np.isfinite, np.signbit,
    np.floor, np.ceil, np.trunc, np.rint, np.sign, np.floor_divide,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
    np.round, np.around, np.isclose, np.allclose, np.array_equal,
)  # fmt: skip
