"""Sensitivities of elementwise functions: arithmetic, exponentials, trigonometry, complex
parts, selection, and the elementwise functions that carry no gradient.

Rules return the adjoint at the broadcast shape; the engine sums it back to each
argument's shape. Every rule is NumPy over its inputs, so it is differentiable again.

Complex numbers follow JAX's convention (see ``sensitivities.fft``): the adjoint ``zbar``
of a complex value ``z`` is the one for which a real loss changes by
``Re(zbar * dz)``. A holomorphic function's rule is then the real rule unchanged,
``ybar * f'(z)`` with no conjugate; only the functions that are not holomorphic
(``conjugate``, ``absolute``, ``real``, ``imag``, ``angle``) need rules of their own. The
adjoint of a real value that meets complex arithmetic may carry an imaginary part that
means nothing; it is dropped where a real value came from a complex one, and at the
inputs of ``grad``.

Constants are Python floats, never NumPy float64 scalars, so float32 data stays float32.
"""

import math

import numpy as np

from .reductions import expand_reduced
from .registry import (
    implementation,
    lookup,
    nondifferentiable,
    nondifferentiable_except,
    positional_form,
    sensitivity,
    value_of,
)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_DEG = math.pi / 180.0
_PI2_3 = math.pi**2 / 3.0
_PI4_30 = math.pi**4 / 30.0


def _share(ybar, a, b):
    """ybar where a > b, half of it where a == b, else 0: ties share the adjoint equally,
    as in autograd and JAX. Masks select, so that float32 stays float32."""
    return np.where(np.greater(a, b), ybar, np.where(np.equal(a, b), 0.5 * ybar, 0.0))


def _real(ybar):
    """The adjoint of a real result: only its real part means anything."""
    return np.real(ybar) if np.iscomplexobj(ybar) else ybar


def _div(a, b):
    """``a / b`` by NumPy's rules: a rule may be handed two Python floats (an input of
    ``grad`` and the seed 1.0), whose ``/`` raises ZeroDivisionError where NumPy gives an
    infinity or NaN with its warning. Anything else takes ``/``: a ufunc call costs a
    microsecond more on scalars, a third of a scalar's whole reverse step."""
    if type(b) in _PYTHON_NUMBERS and type(a) in _PYTHON_NUMBERS:
        return np.true_divide(a, b)
    return a / b


_PYTHON_NUMBERS = frozenset({float, int, complex})


def _safe(x, bad, value=1.0):
    """``x`` with ``value`` where ``bad``: keeps a formula finite at a point it excludes."""
    return np.where(bad, value, x)


# -- arithmetic -------------------------------------------------------------------------

sensitivity(np.add, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.add, 1)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.subtract, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.subtract, 1)(lambda y, ybar, a, b, **kw: -ybar)
sensitivity(np.multiply, 0)(lambda y, ybar, a, b, **kw: ybar * b)
sensitivity(np.multiply, 1)(lambda y, ybar, a, b, **kw: ybar * a)
sensitivity(np.true_divide, 0)(lambda y, ybar, a, b, **kw: _div(ybar, b))
sensitivity(np.true_divide, 1)(lambda y, ybar, a, b, **kw: -ybar * y / b)
sensitivity(np.negative, 0)(lambda y, ybar, x, **kw: -ybar)
sensitivity(np.positive, 0)(lambda y, ybar, x, **kw: ybar)
sensitivity(np.square, 0)(lambda y, ybar, x, **kw: ybar * 2 * x)
sensitivity(np.reciprocal, 0)(lambda y, ybar, x, **kw: -ybar * y * y)
sensitivity(np.remainder, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.remainder, 1)(lambda y, ybar, a, b, **kw: -ybar * np.floor_divide(a, b))
sensitivity(np.fmod, 0)(lambda y, ybar, a, b, **kw: ybar)
sensitivity(np.fmod, 1)(lambda y, ybar, a, b, **kw: -ybar * np.trunc(_div(a, b)))
# 2**e made from y keeps float32 data float32 (np.exp2 of integers gives float64)
sensitivity(np.ldexp, 0)(lambda y, ybar, x, e, **kw: ybar * np.ldexp(np.ones_like(y), e))
# nextafter(x, y) moves x by one unit in the last place: a shift that carries no gradient
sensitivity(np.nextafter, 0)(lambda y, ybar, x, to, **kw: ybar)
sensitivity(np.nextafter, 1)(lambda y, ybar, x, to, **kw: np.zeros_like(y))


@sensitivity(np.absolute, 0)
def _(y, ybar, x, **kw):
    if np.iscomplexobj(x):
        # d|z| = Re(conj(z) / |z| dz); at z == 0, conj(z) == 0 gives the subgradient 0
        return _real(ybar) * np.conjugate(x) / _safe(y, np.equal(y, 0))
    return ybar * np.sign(x)


sensitivity(np.fabs, 0)(lambda y, ybar, x, **kw: ybar * np.sign(x))


@sensitivity(np.copysign, 0)
def _(y, ybar, a, b, **kw):
    # copysign(a, b) is a where the signs agree and -a where they differ
    return ybar * np.copysign(1.0, a) * np.copysign(1.0, b)


sensitivity(np.copysign, 1)(lambda y, ybar, a, b, **kw: np.zeros_like(y))


def _power_base(y, ybar, x, p, power):
    # p == 0 must give 0 even at x == 0, where x ** (p - 1) is inf; elsewhere p * x**(p-1)
    # stays a formula in p, so that d/dp of it (1/x at p == 0) survives to second order
    constant = np.equal(p, 0) & np.equal(x, 0)
    return ybar * np.where(constant, 0.0, p * power(_safe(x, constant), p - 1))


def _power_exponent(y, ybar, x, p):
    # d/dp x**p = x**p log x, taken as 0 at x == 0 (its limit from p > 0)
    zero = np.equal(x, 0)
    return ybar * np.where(zero, 0.0, y * np.log(_safe(x, zero)))


sensitivity(np.power, 0)(lambda y, ybar, x, p, **kw: _power_base(y, ybar, x, p, np.power))
sensitivity(np.power, 1)(lambda y, ybar, x, p, **kw: _power_exponent(y, ybar, x, p))
sensitivity(np.float_power, 0)(
    lambda y, ybar, x, p, **kw: _power_base(y, ybar, x, p, np.float_power)
)
sensitivity(np.float_power, 1)(lambda y, ybar, x, p, **kw: _power_exponent(y, ybar, x, p))


# -- extrema: ties share the adjoint; fmax and fmin pass it to the number beside a NaN ----

sensitivity(np.maximum, 0)(lambda y, ybar, a, b, **kw: _share(ybar, a, b))
sensitivity(np.maximum, 1)(lambda y, ybar, a, b, **kw: _share(ybar, b, a))
sensitivity(np.minimum, 0)(lambda y, ybar, a, b, **kw: _share(ybar, b, a))
sensitivity(np.minimum, 1)(lambda y, ybar, a, b, **kw: _share(ybar, a, b))


def _past_nan(g, ybar, mine, other):
    return np.where(np.isnan(other), ybar, np.where(np.isnan(mine), 0.0, g))


sensitivity(np.fmax, 0)(lambda y, ybar, a, b, **kw: _past_nan(_share(ybar, a, b), ybar, a, b))
sensitivity(np.fmax, 1)(lambda y, ybar, a, b, **kw: _past_nan(_share(ybar, b, a), ybar, b, a))
sensitivity(np.fmin, 0)(lambda y, ybar, a, b, **kw: _past_nan(_share(ybar, b, a), ybar, a, b))
sensitivity(np.fmin, 1)(lambda y, ybar, a, b, **kw: _past_nan(_share(ybar, a, b), ybar, b, a))

# -- exponentials, logarithms, roots ----------------------------------------------------

sensitivity(np.exp, 0)(lambda y, ybar, x, **kw: ybar * y)
sensitivity(np.exp2, 0)(lambda y, ybar, x, **kw: ybar * y * _LN2)
sensitivity(np.expm1, 0)(lambda y, ybar, x, **kw: ybar * (y + 1))
sensitivity(np.log, 0)(lambda y, ybar, x, **kw: _div(ybar, x))
sensitivity(np.log2, 0)(lambda y, ybar, x, **kw: _div(ybar, x * _LN2))
sensitivity(np.log10, 0)(lambda y, ybar, x, **kw: _div(ybar, x * _LN10))
sensitivity(np.log1p, 0)(lambda y, ybar, x, **kw: _div(ybar, x + 1))
sensitivity(np.sqrt, 0)(lambda y, ybar, x, **kw: ybar / (2 * y))
sensitivity(np.cbrt, 0)(lambda y, ybar, x, **kw: ybar / (3 * y * y))
# d/da log(e^a + e^b) = e^(a - y): bounded by 1, so it never overflows
sensitivity(np.logaddexp, 0)(lambda y, ybar, a, b, **kw: ybar * np.exp(a - y))
sensitivity(np.logaddexp, 1)(lambda y, ybar, a, b, **kw: ybar * np.exp(b - y))
sensitivity(np.logaddexp2, 0)(lambda y, ybar, a, b, **kw: ybar * np.exp2(a - y))
sensitivity(np.logaddexp2, 1)(lambda y, ybar, a, b, **kw: ybar * np.exp2(b - y))

# -- trigonometric and hyperbolic -------------------------------------------------------

sensitivity(np.sin, 0)(lambda y, ybar, x, **kw: ybar * np.cos(x))
sensitivity(np.cos, 0)(lambda y, ybar, x, **kw: -ybar * np.sin(x))
sensitivity(np.tan, 0)(lambda y, ybar, x, **kw: ybar * (1 + y * y))
sensitivity(np.arcsin, 0)(lambda y, ybar, x, **kw: ybar / np.sqrt(1 - x * x))
sensitivity(np.arccos, 0)(lambda y, ybar, x, **kw: -ybar / np.sqrt(1 - x * x))
sensitivity(np.arctan, 0)(lambda y, ybar, x, **kw: ybar / (1 + x * x))
sensitivity(np.sinh, 0)(lambda y, ybar, x, **kw: ybar * np.cosh(x))
sensitivity(np.cosh, 0)(lambda y, ybar, x, **kw: ybar * np.sinh(x))


@sensitivity(np.tanh, 0)
def _(y, ybar, x, **kw):
    if type(y) is np.ndarray and type(ybar) is np.ndarray and ybar.dtype == y.dtype:
        # the same arithmetic in one new array instead of three: the rule takes 1 ms
        # instead of 4.5 at 1000² (the matmul chain's, python benchmarks/run.py)
        d = np.multiply(y, y)
        np.subtract(1, d, out=d)
        return np.multiply(ybar, d, out=d) if ybar.shape == d.shape else ybar * d
    return ybar * (1 - y * y)


sensitivity(np.arcsinh, 0)(lambda y, ybar, x, **kw: ybar / np.sqrt(x * x + 1))
# sqrt(x - 1) sqrt(x + 1), not sqrt(x*x - 1): the same for real x > 1, and the right
# branch for complex x
sensitivity(np.arccosh, 0)(lambda y, ybar, x, **kw: ybar / (np.sqrt(x - 1) * np.sqrt(x + 1)))
sensitivity(np.arctanh, 0)(lambda y, ybar, x, **kw: _div(ybar, 1 - x * x))
sensitivity(np.arctan2, 0)(lambda y, ybar, a, b, **kw: _div(ybar * b, a * a + b * b))
sensitivity(np.arctan2, 1)(lambda y, ybar, a, b, **kw: _div(-ybar * a, a * a + b * b))
# at the origin the subgradient 0, as for np.linalg.norm (a / y would be 0 / 0)
sensitivity(np.hypot, 0)(lambda y, ybar, a, b, **kw: ybar * a / np.where(np.equal(y, 0), 1.0, y))
sensitivity(np.hypot, 1)(lambda y, ybar, a, b, **kw: ybar * b / np.where(np.equal(y, 0), 1.0, y))
for _f in (np.deg2rad, np.radians):
    sensitivity(_f, 0)(lambda y, ybar, x, **kw: ybar * _DEG)
for _f in (np.rad2deg, np.degrees):
    sensitivity(_f, 0)(lambda y, ybar, x, **kw: ybar / _DEG)


@sensitivity(np.sinc, 0)
def _(y, ybar, x):
    # d/dx sin(pi x) / (pi x) = (cos(pi x) - sinc(x)) / x, which cancels near 0: there its
    # Taylor series -pi^2 x / 3 + pi^4 x^3 / 30, also right for the second derivative
    small = np.less(np.abs(x), 1e-3)
    safe = _safe(x, small)
    x2 = x * x
    taylor = x * (x2 * _PI4_30 - _PI2_3)
    return ybar * np.where(small, taylor, (np.cos(np.pi * safe) - np.sinc(safe)) / safe)


# -- complex parts ----------------------------------------------------------------------

sensitivity(np.conjugate, 0)(lambda y, ybar, x, **kw: np.conjugate(ybar))


@sensitivity(np.real, 0)
def _(y, ybar, x):
    # Re(ybar * d Re z) == Re(ybar * dz) for real ybar. The adjoint of a complex z is
    # complex, also where ybar is real: under an outer derivative (a pullback differentiated
    # again) a real-typed one would make the outer derivative real too
    g = _real(ybar)
    if np.iscomplexobj(x) and not np.iscomplexobj(g):
        g = g + np.zeros_like(x)
    return g


# for d Im z, ybar * -1j does it
sensitivity(np.imag, 0)(lambda y, ybar, x: -1j * _real(ybar))


@sensitivity(np.angle, 0)
def _(y, ybar, z, deg=False):
    # d arg z = Im(dz / z) = Re(-1j / z * dz); zero for real z, whose angle is constant
    zero = np.equal(z, 0)
    g = np.where(zero, 0.0, -1j / _safe(z, zero)) * _real(ybar)
    return g / _DEG if deg else g


# -- selection --------------------------------------------------------------------------


@sensitivity(np.where, 1)
def _(y, ybar, condition, a, b):
    return np.where(condition, ybar, 0.0)


@sensitivity(np.where, 2)
def _(y, ybar, condition, a, b):
    return np.where(condition, 0.0, ybar)


@positional_form(np.clip)
def _(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=None, max=None, **kwargs):
    # NumPy 2's keyword-only spelling np.clip(x, min=..., max=...), either one optional:
    # the rules are keyed by position, as a_min and a_max
    if a_min is np._NoValue and a_max is np._NoValue:
        a_min, a_max = min, max
    if out is not None:
        kwargs["out"] = out
    return (a, a_min, a_max), kwargs


def _clip_bounds(args, kwargs):
    lo = args[0] if len(args) > 0 else kwargs.get("a_min", kwargs.get("min"))
    hi = args[1] if len(args) > 1 else kwargs.get("a_max", kwargs.get("max"))
    return _given_bound(lo), _given_bound(hi)


def _given_bound(bound):
    return None if bound is np._NoValue else bound  # np.clip's default: no bound


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
    a_min = _given_bound(a_min)
    below = np.zeros_like(a, dtype=bool) if a_min is None else np.less(a, a_min)
    return np.where(np.greater(a, a_max) & ~below, ybar, 0.0)


def _chosen(condlist):
    """For each condition, where it is the first true one; and where none is."""
    taken = np.zeros_like(condlist[0], dtype=bool)
    masks = []
    for condition in condlist:
        masks.append(condition & ~taken)
        taken = taken | condition
    return masks, ~taken


@sensitivity(np.select, 1)
def _(y, ybar, condlist, choicelist, default=0):
    masks, _ = _chosen(condlist)
    return [np.where(mask, ybar, 0.0) for mask in masks]


@sensitivity(np.select, 2)
def _(y, ybar, condlist, choicelist, default=0):
    return np.where(_chosen(condlist)[1], ybar, 0.0)


@sensitivity(np.nan_to_num, 0)
def _(y, ybar, x, copy=True, nan=0.0, posinf=None, neginf=None):
    # NaN and infinities become constants; finite values pass through
    return np.where(np.isfinite(x), ybar, 0.0)


# -- ufunc methods ------------------------------------------------------------------------


def _outer_rule(ufunc, argnum):
    """The rule of ``ufunc.outer`` for one argument, from the elementwise rule: ``a``
    gets trailing axes of length 1, so that the outer product is plain broadcasting."""

    def rule(y, ybar, a, b, **kwargs):
        a_wide = np.reshape(a, np.shape(a) + (1,) * np.ndim(b))
        g = lookup(ufunc).rule(argnum, (a_wide, b))(y, ybar, a_wide, b)
        g = np.broadcast_to(g, np.shape(y))
        if argnum == 0:
            return np.sum(g, axis=tuple(range(np.ndim(a), np.ndim(y))))
        return g  # b's axes trail: the engine sums the leading ones

    return rule


for _f in (np.add, np.subtract, np.multiply, np.true_divide, np.power, np.maximum,
           np.minimum, np.logaddexp, np.hypot, np.arctan2):  # fmt: skip
    sensitivity(_f.outer, 0)(_outer_rule(_f, 0))
    sensitivity(_f.outer, 1)(_outer_rule(_f, 1))


def _logaddexp_reduce_rule(exp):
    def rule(y, ybar, x, axis=0, dtype=None, out=None, keepdims=False, **kwargs):
        # the softmax weights of the reduced axis, each at most 1
        y, ybar = (expand_reduced(v, x, axis, keepdims) for v in (y, ybar))
        return ybar * exp(x - y)

    return rule


def _logaddexp_accumulate_rule(exp):
    def rule(y, ybar, x, axis=0, dtype=None, out=None):
        # y_j = log sum_{i <= j} e^{x_i}: x_i gets sum_{j >= i} ybar_j e^{x_i - y_j}, each
        # weight at most 1 because y increases. Quadratic in the scan length; no overflow.
        xs, ys, gs = (np.moveaxis(v, axis, -1) for v in (x, y, ybar))
        n = np.shape(xs)[-1]
        later = np.triu(np.ones((n, n), dtype=bool))  # a mask: no gradient flows through it
        weights = exp(np.where(later, xs[..., :, None] - ys[..., None, :], -np.inf))
        return np.moveaxis(np.sum(weights * gs[..., None, :], axis=-1), -1, axis)

    return rule


for _f, _exp in ((np.logaddexp, np.exp), (np.logaddexp2, np.exp2)):
    sensitivity(_f.reduce, 0)(_logaddexp_reduce_rule(_exp))
    sensitivity(_f.accumulate, 0)(_logaddexp_accumulate_rule(_exp))


@sensitivity(np.hypot.reduce, 0)
def _(y, ybar, x, axis=0, dtype=None, out=None, keepdims=False, **kwargs):
    # the Euclidean norm along the axis: x / y, and 0 for an all-zero slice
    y, ybar = (expand_reduced(v, x, axis, keepdims) for v in (y, ybar))
    zero = np.equal(y, 0)
    return ybar * np.where(zero, 0.0, x / _safe(y, zero))


# -- piecewise constant: plain results, no gradient -------------------------------------

nondifferentiable(
    # comparisons and tests
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.isclose, np.allclose, np.array_equal, np.array_equiv,
    np.isnan, np.isinf, np.isfinite, np.isposinf, np.isneginf, np.isnat, np.signbit,
    np.isin,
    # logical and bitwise
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
    np.bitwise_count, np.gcd, np.lcm,
    # rounding and steps
    np.floor, np.ceil, np.trunc, np.rint, np.fix, np.round, np.around, np.sign,
    np.floor_divide, np.heaviside, np.spacing,
    # positions, counts and bins
    np.argwhere, np.nanargmax, np.nanargmin, np.argpartition, np.lexsort,
    np.digitize, np.histogram_bin_edges,
)  # fmt: skip
# weighted counts carry the weights' gradient: no rule yet, so a node there is an error
nondifferentiable_except(np.histogram, "weights", 4)
nondifferentiable_except(np.histogram2d, "weights", 5)
nondifferentiable_except(np.histogramdd, "weights", 4)


# -- ufuncs with two results, entered as differentiable pieces ---------------------------


@implementation(np.modf)
def _modf(x, **kwargs):
    whole = np.trunc(x)  # piecewise constant
    return x - whole, whole


@implementation(np.frexp)
def _frexp(x, **kwargs):
    _, exponent = np.frexp(value_of(x))  # piecewise constant
    return np.ldexp(x, -exponent), exponent


@implementation(np.divmod)
def _divmod(a, b, **kwargs):
    return np.floor_divide(a, b), np.remainder(a, b)


# np.i0 is NumPy's Chebyshev series in |x| (one for |x| <= 8, one above), whose pieces are
# plain arithmetic: entered through them, its derivative i1 and every higher one come free.
try:
    from numpy.lib._function_base_impl import _i0_1, _i0_2
except ImportError:  # a NumPy that moved them: NumPy's own i0 is then entered as it is
    _i0_1 = _i0_2 = None

if _i0_1 is not None:

    @implementation(np.i0)
    def _i0(x):
        if np.iscomplexobj(x):
            raise TypeError("i0 not supported for complex values")
        # |x| by selection, not np.abs: at 0 the derivative of |x| is then 1, not abs's
        # subgradient 0, so that i0''(0) = 1/2 survives (i0 is even: either side will do)
        x = np.where(x < 0, -x, x)
        return np.piecewise(x, [x <= 8.0], [_i0_1, _i0_2])
