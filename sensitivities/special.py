"""Sensitivities of ``scipy.special``, registered when SciPy is installed.

Most of SciPy's special functions are NumPy ufuncs, so nodes reach them through
``__array_ufunc__`` like ``np.sin``: ``scipy.special.gammaln(x)`` is recorded as it is
written, and only its rules live here. Each rule is written with functions that have
rules themselves (``digamma``'s with ``polygamma``, ``erfinv``'s with ``exp`` of its
own result), so every one is differentiable again.

A few are plain Python functions instead, which NumPy's protocols never see:

- ``scipy.special.softplus`` is ``np.logaddexp(0, x)``: it runs on nodes as it is, and
  is recorded as that ``logaddexp``.
- ``logsumexp``, ``softmax``, ``log_softmax``, ``polygamma`` and ``multigammaln`` first turn their
  arguments into ndarrays (SciPy's array-API layer, or ``np.asarray``), which would cut
  a node off its tape, so calling SciPy's own on a node raises an error in the forward
  pass. SciPy's array-API dispatch could hand them a node's namespace, but only when
  the environment variable ``SCIPY_ARRAY_API=1`` is set before SciPy is imported, and
  then the node would have to be a complete array-API array. So this module gives
  drop-in counterparts with SciPy's names and signatures, each recorded as one step
  with its own rule (cheaper and more stable than the operations inside):

  >>> import numpy as np
  >>> from sensitivities.special import logsumexp, softmax
  >>> from tape import grad
  >>> grad(lambda x: logsumexp(x))(np.array([0.0, np.log(3.0)]))
  (array([0.25, 0.75]),)

  On plain arrays they are SciPy's functions.
"""

import math

import numpy as np

from .batching import _padded, _shift, batching
from .registry import (
    function_name,
    implementation,
    nondifferentiable,
    primitive,
    sensitivity,
    value_of,
)

try:
    import scipy.special
except ImportError:  # SciPy is optional: without it there is nothing to register
    scipy = None


class _Ufuncs:
    """``scipy.special``, each function as the ufunc that a node meets. With
    ``SCIPY_ARRAY_API=1`` SciPy wraps each ufunc in a Python function that calls it on
    the arrays' namespace (``__wrapped__``); on a node that call is the ufunc's."""

    def __getattr__(self, name):
        f = getattr(scipy.special, name)
        inner = getattr(f, "__wrapped__", None)
        return inner if isinstance(inner, np.ufunc) else f


special = _Ufuncs() if scipy is not None else None


__all__ = ["logsumexp", "softmax", "log_softmax", "polygamma", "multigammaln", "spherical_jn",
           "spherical_yn", "spherical_in", "spherical_kn"]  # fmt: skip

_2_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_DEG = math.pi / 180.0


# a / b by NumPy's rules: two Python floats (an input of grad and the seed 1.0) would
# raise ZeroDivisionError where NumPy gives an infinity or NaN with its warning
_div = np.true_divide


def _needs_scipy():
    if special is None:
        raise ImportError("this function needs SciPy: pip install scipy")


# -- SciPy's Python-level functions, as primitives ----------------------------------------


def _as_dtype_of(y, x):
    # SciPy computes some of these in float64; float32 data stays float32
    dtype = np.result_type(x)
    if dtype.kind == "f" and np.result_type(y) != dtype:
        y = np.asarray(y, dtype=dtype)
    return y[()] if np.ndim(y) == 0 else y


@primitive
def polygamma(n, x):
    """``scipy.special.polygamma(n, x)``, differentiable in ``x`` to any order."""
    _needs_scipy()
    return _as_dtype_of(special.polygamma(n, x), x)


@primitive
def softmax(x, axis=None):
    """``scipy.special.softmax(x, axis=None)``, recorded as one step."""
    _needs_scipy()
    return special.softmax(x, axis=axis)


@primitive
def log_softmax(x, axis=None):
    """``scipy.special.log_softmax(x, axis=None)``, recorded as one step."""
    _needs_scipy()
    return special.log_softmax(x, axis=axis)


@primitive
def _logsumexp(a, axis, b, keepdims):
    return special.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)[0]


_logsumexp.__name__ = _logsumexp.__qualname__ = "logsumexp"


@primitive
def _logsumexp_sign(a, axis, b, keepdims):
    a, b = value_of(a), value_of(b)  # the sign carries no gradient
    return special.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)[1]


nondifferentiable(_logsumexp_sign)  # a primitive, so that vmap can batch it


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``scipy.special.logsumexp``, recorded as one step, differentiable in ``a`` and ``b``.

    With ``return_sign=True`` it returns ``(log|sum|, sign)``; the sign is a constant.
    """
    _needs_scipy()
    # arguments go positionally: a primitive's nodes must not come as keywords
    out = _logsumexp(a, axis, b, keepdims)
    if return_sign:
        return out, _logsumexp_sign(a, axis, b, keepdims)
    if b is not None:
        # as in SciPy, a negative sum has no logarithm: NaN
        negative = np.less(_logsumexp_sign(a, axis, b, keepdims), 0)
        if np.any(negative):
            out = np.where(negative, np.nan, out)
    return out


def _lse_rule(argnum):
    def rule(y, ybar, a, axis, b, keepdims):
        if not keepdims:  # put the reduced axes back, to broadcast against a and b
            ndim = np.ndim(a) if b is None else max(np.ndim(a), np.ndim(b))
            axes = tuple(range(ndim)) if axis is None else axis
            y, ybar = np.expand_dims(y, axes), np.expand_dims(ybar, axes)
        e = np.exp(a - y)  # at most 1 where b is 1: the softmax weights
        if b is None:
            return ybar * e
        # d log|S| = dS / S, and S e^-y is the sign of S: sum(b e^(a - y)) is +1 or -1
        sign = np.sum(b * e, axis=axis, keepdims=True)
        return ybar * (b * e if argnum == 0 else e) / sign

    return rule


sensitivity(_logsumexp, 0)(_lse_rule(0))
sensitivity(_logsumexp, 2)(_lse_rule(2))


@sensitivity(softmax, 0)
def _(y, ybar, x, axis=None):
    return y * (ybar - np.sum(ybar * y, axis=axis, keepdims=True))


@sensitivity(log_softmax, 0)
def _(y, ybar, x, axis=None):
    return ybar - np.exp(y) * np.sum(ybar, axis=axis, keepdims=True)


@sensitivity(polygamma, 1)
def _(y, ybar, n, x):
    return ybar * polygamma(np.add(n, 1), x)


def multigammaln(a, d):
    """``scipy.special.multigammaln(a, d)``, the log of the multivariate gamma function,
    differentiable in ``a``: a sum of ``gammaln``, as SciPy computes it."""
    _needs_scipy()
    if not np.isscalar(d) or (np.floor(d) != d):
        raise ValueError("d should be a positive integer (dimension)")
    if np.any(np.less_equal(value_of(a), 0.5 * (d - 1))):
        raise ValueError(f"condition a ({np.min(value_of(a))}) > 0.5 * (d-1) ({0.5 * (d - 1)}) "
                         "not met")  # fmt: skip
    terms = [special.gammaln(a - (j - 1.0) / 2) for j in range(1, int(d) + 1)]
    out = (d * (d - 1) * 0.25) * np.log(np.pi) + np.sum(np.stack(terms), axis=0)
    return out[()] if isinstance(out, np.ndarray) and out.ndim == 0 else out


# -- helpers for the rules below ------------------------------------------------------------


def _over_x(v, x, series):
    """``v / x``, taken from its Taylor ``series(x)`` near ``x == 0``, where the division
    cancels (and would spoil second derivatives)."""
    small = np.less(np.abs(x), 1e-3)
    return np.where(small, series(x), v / np.where(small, 1.0, x))


def _safe_value(x, bad):
    return np.where(bad, 1.0, x)


def _ratio_or_zero(a, b):
    """``a / b``, and 0 where both are 0: ``x log y`` is 0 wherever ``x`` is."""
    both = np.equal(a, 0) & np.equal(b, 0)
    return a / np.where(both, 1.0, b)


def _i1_over_x(x):
    return 0.5 + x * x / 16


def _i1e_over_x(x):
    return np.exp(-np.abs(x)) * (0.5 + x * x / 16)


def _j1_over_x(x):
    return 0.5 - x * x / 16


def _exprel_slope(x):
    return 0.5 + x * (1 / 3 + x / 8)


def _gaussian(x):
    return np.exp(-0.5 * x * x) / _SQRT_2PI


# -- the ufuncs -----------------------------------------------------------------------------


def _register():
    s = special

    def unary(f, rule):
        sensitivity(f, 0)(lambda y, ybar, x, **kw: rule(y, ybar, x))

    def binary(f, rule0, rule1):
        if rule0 is not None:
            sensitivity(f, 0)(lambda y, ybar, a, b, **kw: rule0(y, ybar, a, b))
        if rule1 is not None:
            sensitivity(f, 1)(lambda y, ybar, a, b, **kw: rule1(y, ybar, a, b))

    # gamma and beta functions
    unary(s.gammaln, lambda y, g, x: g * s.digamma(x))
    unary(s.loggamma, lambda y, g, x: g * s.digamma(x))
    unary(s.gamma, lambda y, g, x: g * y * s.digamma(x))
    unary(s.rgamma, lambda y, g, x: -g * y * s.digamma(x))
    unary(s.digamma, lambda y, g, x: g * polygamma(1, x))  # also s.psi, the same ufunc
    binary(s.beta,
           lambda y, g, a, b: g * y * (s.digamma(a) - s.digamma(a + b)),
           lambda y, g, a, b: g * y * (s.digamma(b) - s.digamma(a + b)))  # fmt: skip
    binary(s.betaln,
           lambda y, g, a, b: g * (s.digamma(a) - s.digamma(a + b)),
           lambda y, g, a, b: g * (s.digamma(b) - s.digamma(a + b)))  # fmt: skip

    # error functions and the normal distribution
    unary(s.erf, lambda y, g, x: g * _2_SQRT_PI * np.exp(-x * x))
    unary(s.erfc, lambda y, g, x: -g * _2_SQRT_PI * np.exp(-x * x))
    unary(s.erfinv, lambda y, g, x: g * _SQRT_PI_2 * np.exp(y * y))
    unary(s.erfcinv, lambda y, g, x: -g * _SQRT_PI_2 * np.exp(y * y))
    unary(s.erfcx, lambda y, g, x: g * (2 * x * y - _2_SQRT_PI))
    unary(s.erfi, lambda y, g, x: g * _2_SQRT_PI * np.exp(x * x))
    unary(s.dawsn, lambda y, g, x: g * (1 - 2 * x * y))
    unary(s.wofz, lambda y, g, z: g * (_2_SQRT_PI * 1j - 2 * z * y))  # holomorphic
    unary(s.ndtr, lambda y, g, x: g * _gaussian(x))
    # pdf / cdf as one exponential: finite far into the left tail
    unary(s.log_ndtr, lambda y, g, x: g * np.exp(-0.5 * x * x - y) / _SQRT_2PI)
    unary(s.ndtri, lambda y, g, x: g * _SQRT_2PI * np.exp(0.5 * y * y))
    unary(s.ndtri_exp, lambda y, g, x: g * _SQRT_2PI * np.exp(x + 0.5 * y * y))

    # the logistic function
    unary(s.expit, lambda y, g, x: g * y * (1 - y))
    unary(s.logit, lambda y, g, x: _div(g, x * (1 - x)))
    unary(s.log_expit, lambda y, g, x: g * s.expit(-x))

    # x log y and relative entropies; x == 0 makes them 0 whatever y is, so also their
    # derivatives in y
    binary(s.xlogy,
           lambda y, g, a, b: g * np.log(b),
           lambda y, g, a, b: g * _ratio_or_zero(a, b))  # fmt: skip
    binary(s.xlog1py,
           lambda y, g, a, b: g * np.log1p(b),
           lambda y, g, a, b: g * _ratio_or_zero(a, 1 + b))  # fmt: skip
    unary(s.entr, lambda y, g, x: -g * (np.log(x) + 1))
    binary(s.rel_entr,
           lambda y, g, a, b: g * (np.log(_div(a, b)) + 1),
           lambda y, g, a, b: _div(-g * a, b))  # fmt: skip
    binary(s.kl_div,
           lambda y, g, a, b: g * np.log(_div(a, b)),
           lambda y, g, a, b: g * (1 - _div(a, b)))  # fmt: skip

    def inside(d, r):
        return np.less_equal(np.abs(r), d)

    binary(s.huber,
           lambda y, g, d, r: g * np.where(inside(d, r), 0.0, np.abs(r) - d),
           lambda y, g, d, r: g * np.where(inside(d, r), r, d * np.sign(r)))  # fmt: skip

    def pseudo_huber_root(d, r):
        return np.sqrt(1 + _div(r, d) ** 2)

    binary(s.pseudo_huber,
           lambda y, g, d, r: g * (2 * y - r * r / pseudo_huber_root(d, r)) / d,
           lambda y, g, d, r: g * r / pseudo_huber_root(d, r))  # fmt: skip

    # Box-Cox transforms, in the data argument
    binary(s.boxcox, lambda y, g, x, lam: g * np.power(x, lam - 1), None)
    binary(s.boxcox1p, lambda y, g, x, lam: g * np.power(1 + x, lam - 1), None)
    binary(s.inv_boxcox, lambda y, g, x, lam: g * np.power(y, 1 - lam), None)
    binary(s.inv_boxcox1p, lambda y, g, x, lam: g * np.power(1 + y, 1 - lam), None)

    # Bessel functions; d/dx I1(x) = I0(x) - I1(x)/x, whose limit at 0 is 1/2
    unary(s.i0, lambda y, g, x: g * s.i1(x))
    unary(s.i1, lambda y, g, x: g * (s.i0(x) - _over_x(y, x, _i1_over_x)))
    unary(s.i0e, lambda y, g, x: g * (s.i1e(x) - np.sign(x) * y))
    unary(s.i1e, lambda y, g, x: g * (s.i0e(x) - _over_x(y, x, _i1e_over_x) - np.sign(x) * y))
    unary(s.k0, lambda y, g, x: -g * s.k1(x))
    unary(s.k1, lambda y, g, x: -g * (s.k0(x) + y / x))
    unary(s.k0e, lambda y, g, x: g * (y - s.k1e(x)))
    unary(s.k1e, lambda y, g, x: g * (y - s.k0e(x) - y / x))
    unary(s.j0, lambda y, g, x: -g * s.j1(x))
    unary(s.j1, lambda y, g, x: g * (s.j0(x) - _over_x(y, x, _j1_over_x)))
    unary(s.y0, lambda y, g, x: -g * s.y1(x))
    unary(s.y1, lambda y, g, x: g * (s.y0(x) - y / x))
    # of real order v, in x only
    binary(s.jv, None, lambda y, g, v, x: g * 0.5 * (s.jv(v - 1, x) - s.jv(v + 1, x)))
    binary(s.yv, None, lambda y, g, v, x: g * 0.5 * (s.yv(v - 1, x) - s.yv(v + 1, x)))
    binary(s.iv, None, lambda y, g, v, x: g * 0.5 * (s.iv(v - 1, x) + s.iv(v + 1, x)))
    binary(s.kv, None, lambda y, g, v, x: -g * 0.5 * (s.kv(v - 1, x) + s.kv(v + 1, x)))
    binary(s.ive, None,
           lambda y, g, v, x: g * (0.5 * (s.ive(v - 1, x) + s.ive(v + 1, x))
                                   - np.sign(x) * y))  # fmt: skip
    binary(s.kve, None, lambda y, g, v, x: g * (y - 0.5 * (s.kve(v - 1, x) + s.kve(v + 1, x))))

    # incomplete gamma and beta functions and distribution functions, in x
    binary(s.gammainc, None,
           lambda y, g, a, x: g * np.exp((a - 1) * np.log(x) - x - s.gammaln(a)))  # fmt: skip
    binary(s.gammaincc, None,
           lambda y, g, a, x: -g * np.exp((a - 1) * np.log(x) - x - s.gammaln(a)))  # fmt: skip

    @sensitivity(s.betainc, 2)
    def _(y, g, a, b, x, **kw):
        return g * np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - s.betaln(a, b))

    binary(s.stdtr, None,
           lambda y, g, df, t: g * np.exp(s.gammaln((df + 1) / 2) - s.gammaln(df / 2)
                                          - 0.5 * np.log(df * math.pi)
                                          - (df + 1) / 2 * np.log1p(_div(t * t, df))))  # fmt: skip
    binary(s.chdtr, None,
           lambda y, g, v, x: g * np.exp((v / 2 - 1) * np.log(x) - x / 2 - v / 2 * _LN2
                                         - s.gammaln(v / 2)))  # fmt: skip
    binary(s.owens_t,
           lambda y, g, h, a: -g * 0.5 * _gaussian(h) * s.erf(a * h / math.sqrt(2.0)),
           lambda y, g, h, a: g * np.exp(-0.5 * h * h * (1 + a * a))
                              / (2 * math.pi * (1 + a * a)))  # fmt: skip

    # exponential integrals, dilogarithm, complete elliptic integrals
    unary(s.exp1, lambda y, g, x: -g * np.exp(-x) / x)
    unary(s.expi, lambda y, g, x: g * np.exp(x) / x)

    # spence(z) = int_1^z log t / (1 - t) dt, whose integrand is -1 + u/2 - u^2/3 ... at
    # t = 1 + u: the series near 1, also right for the second derivative
    def spence_rule(y, g, x):
        u = x - 1
        near = np.less(np.abs(u), 1e-4)
        safe = _safe_value(u, near)
        return g * np.where(near, u * (0.5 - u / 3) - 1, np.log1p(safe) / -safe)

    unary(s.spence, spence_rule)
    unary(s.ellipk, lambda y, g, m: g * (s.ellipe(m) - (1 - m) * y) / (2 * m * (1 - m)))
    unary(s.ellipe, lambda y, g, m: g * (y - s.ellipk(m)) / (2 * m))

    # SciPy's own elementary functions and trigonometry in degrees
    unary(s.expm1, lambda y, g, x: g * (y + 1))
    unary(s.log1p, lambda y, g, x: _div(g, x + 1))
    unary(s.cbrt, lambda y, g, x: g / (3 * y * y))
    unary(s.exp2, lambda y, g, x: g * y * _LN2)
    unary(s.exp10, lambda y, g, x: g * y * _LN10)
    unary(s.cosm1, lambda y, g, x: -g * np.sin(x))
    unary(s.sindg, lambda y, g, x: g * _DEG * s.cosdg(x))
    unary(s.cosdg, lambda y, g, x: -g * _DEG * s.sindg(x))
    unary(s.tandg, lambda y, g, x: g * _DEG * (1 + y * y))
    unary(s.cotdg, lambda y, g, x: -g * _DEG * (1 + y * y))

    # more gamma-type functions
    binary(s.poch,
           lambda y, g, z, m: g * y * (s.digamma(z + m) - s.digamma(z)),
           lambda y, g, z, m: g * y * s.digamma(z + m))  # fmt: skip
    binary(s.binom,
           lambda y, g, n, k: g * y * (s.digamma(n + 1) - s.digamma(n - k + 1)),
           lambda y, g, n, k: g * y * (s.digamma(n - k + 1) - s.digamma(k + 1)))  # fmt: skip
    binary(s.powm1,
           lambda y, g, x, p: g * p * np.power(x, p - 1),
           lambda y, g, x, p: g * (y + 1) * np.log(x))  # fmt: skip
    unary(s.exprel, lambda y, g, x: g * _over_x(np.exp(x) - y, x, _exprel_slope))
    # E_n' = -E_(n-1), and E_0(x) = e^-x / x; the order index stays >= 0
    binary(s.expn, None,
           lambda y, g, n, x: g * np.where(np.equal(n, 0), -np.exp(-x) * (1 + x) / (x * x),
                                           -s.expn(np.maximum(n - 1, 0), x)))  # fmt: skip
    # W' = W / (z (1 + W)) = 1 / (e^W (1 + W)), finite at 0; lambertw calls this ufunc
    lambertw = getattr(getattr(s, "_ufuncs", None), "_lambertw", None)
    if lambertw is not None:
        sensitivity(lambertw, 0)(lambda y, g, z, k, tol: g / (np.exp(y) * (1 + y)))
    unary(s.wrightomega, lambda y, g, z: g * y / (1 + y))

    # inverses of distribution functions: 1 / the density at the result
    def gamma_pdf(a, x):
        return np.exp((a - 1) * np.log(x) - x - s.gammaln(a))

    def beta_pdf(a, b, x):
        return np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - s.betaln(a, b))

    binary(s.gammaincinv, None, lambda y, g, a, q: g / gamma_pdf(a, y))
    binary(s.gammainccinv, None, lambda y, g, a, q: -g / gamma_pdf(a, y))

    @sensitivity(s.betaincinv, 2)
    def _(y, g, a, b, q, **kw):
        return g / beta_pdf(a, b, y)

    if hasattr(s, "betaincc"):  # SciPy >= 1.11

        @sensitivity(s.betaincc, 2)
        def _(y, g, a, b, x, **kw):
            return -g * beta_pdf(a, b, x)

        @sensitivity(s.betainccinv, 2)
        def _(y, g, a, b, q, **kw):
            return -g / beta_pdf(a, b, y)

    def t_pdf(df, t):
        return np.exp(s.gammaln((df + 1) / 2) - s.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
                      - (df + 1) / 2 * np.log1p(t * t / df))  # fmt: skip

    def chi2_pdf(v, x):
        return np.exp((v / 2 - 1) * np.log(x) - x / 2 - v / 2 * _LN2 - s.gammaln(v / 2))

    binary(s.stdtrit, None, lambda y, g, df, p: g / t_pdf(df, y))
    binary(s.chdtrc, None, lambda y, g, v, x: -g * chi2_pdf(v, x))
    binary(s.chdtri, None, lambda y, g, v, q: -g / chi2_pdf(v, y))

    @sensitivity(s.gdtr, 2)
    def _(y, g, a, b, x, **kw):
        return g * a * gamma_pdf(b, a * x)

    @sensitivity(s.gdtrc, 2)
    def _(y, g, a, b, x, **kw):
        return -g * a * gamma_pdf(b, a * x)

    # Bessel functions of integer order, and scaled ones of real argument
    binary(s.kn, None, lambda y, g, n, x: -g * 0.5 * (s.kv(n - 1, x) + s.kv(n + 1, x)))
    binary(s.yn, None, lambda y, g, n, x: g * 0.5 * (s.yv(n - 1, x) - s.yv(n + 1, x)))
    binary(s.jve, None, lambda y, g, v, x: g * 0.5 * (s.jve(v - 1, x) - s.jve(v + 1, x)))
    binary(s.yve, None, lambda y, g, v, x: g * 0.5 * (s.yve(v - 1, x) - s.yve(v + 1, x)))

    # Struve functions: H_v' = (H_(v-1) - H_(v+1)) / 2 + (x/2)^v / (2 sqrt(pi) Gamma(v + 3/2))
    def struve_term(v, x):
        return np.exp(v * np.log(x / 2) - s.gammaln(v + 1.5)) / (2 * math.sqrt(math.pi))

    binary(s.struve, None,
           lambda y, g, v, x: g * (0.5 * (s.struve(v - 1, x) - s.struve(v + 1, x))
                                   + struve_term(v, x)))  # fmt: skip
    binary(s.modstruve, None,
           lambda y, g, v, x: g * (0.5 * (s.modstruve(v - 1, x) + s.modstruve(v + 1, x))
                                   + struve_term(v, x)))  # fmt: skip

    # hypergeometric functions, in their argument
    @sensitivity(s.hyp2f1, 3)
    def _(y, g, a, b, c, z, **kw):
        return _div(g * a * b, c) * s.hyp2f1(a + 1, b + 1, c + 1, z)

    @sensitivity(s.hyp1f1, 2)
    def _(y, g, a, b, x, **kw):
        return _div(g * a, b) * s.hyp1f1(a + 1, b + 1, x)

    @sensitivity(s.hyperu, 2)
    def _(y, g, a, b, x, **kw):
        return -g * a * s.hyperu(a + 1, b + 1, x)

    binary(s.hyp0f1, None, lambda y, g, v, z: g * s.hyp0f1(v + 1, z) / v)

    # elliptic integrals: K(1 - p), and the incomplete ones in the amplitude
    unary(s.ellipkm1, lambda y, g, p: -g * (s.ellipe(1 - p) - p * y) / (2 * p * (1 - p)))
    # and in the parameter m (DLMF 19.4.2, 19.4.4)
    binary(s.ellipkinc, lambda y, g, phi, m: g / np.sqrt(1 - m * np.sin(phi) ** 2),
           lambda y, g, phi, m: g * ((s.ellipeinc(phi, m) - (1 - m) * y) / (2 * m * (1 - m))
                                     - np.sin(2 * phi)
                                     / (4 * (1 - m) * np.sqrt(1 - m * np.sin(phi) ** 2))))
    binary(s.ellipeinc, lambda y, g, phi, m: g * np.sqrt(1 - m * np.sin(phi) ** 2),
           lambda y, g, phi, m: g * (y - s.ellipkinc(phi, m)) / (2 * m))  # fmt: skip

    # orthogonal polynomials, in x: each derivative is a polynomial of degree n - 1
    binary(s.eval_legendre, None,
           lambda y, g, n, x: g * (n + 1) / 2 * s.eval_jacobi(n - 1, 1, 1, x))  # fmt: skip
    binary(s.eval_chebyt, None, lambda y, g, n, x: g * n * s.eval_chebyu(n - 1, x))
    binary(s.eval_chebyu, None, lambda y, g, n, x: g * 2 * s.eval_gegenbauer(n - 1, 2, x))
    binary(s.eval_laguerre, None, lambda y, g, n, x: -g * s.eval_genlaguerre(n - 1, 1, x))
    # H_(-1) is NaN in SciPy: the index stays >= 0, where the factor n is 0 anyway
    binary(s.eval_hermite, None,
           lambda y, g, n, x: g * 2 * n * s.eval_hermite(np.maximum(n - 1, 0), x))  # fmt: skip
    binary(s.eval_hermitenorm, None,
           lambda y, g, n, x: g * n * s.eval_hermitenorm(np.maximum(n - 1, 0), x))  # fmt: skip

    @sensitivity(s.eval_jacobi, 3)
    def _(y, g, n, alpha, beta, x, **kw):
        return g * (n + alpha + beta + 1) / 2 * s.eval_jacobi(n - 1, alpha + 1, beta + 1, x)

    @sensitivity(s.eval_gegenbauer, 2)
    def _(y, g, n, alpha, x, **kw):
        return g * 2 * alpha * s.eval_gegenbauer(n - 1, alpha + 1, x)

    @sensitivity(s.eval_genlaguerre, 2)
    def _(y, g, n, alpha, x, **kw):
        return -g * s.eval_genlaguerre(n - 1, alpha + 1, x)

    nondifferentiable(s.round, s.gammasgn)


# -- ufuncs with several results: one primitive per result ------------------------------


RESULTS: dict = {}  # ufunc of several results -> its results' primitives


def several_results(ufunc, derivatives):
    """Make the ufunc ``ufunc`` of several results differentiable: entered, each result is
    its own primitive (``airy_0``, ``airy_1``, ...) whose rules are ``derivatives``,
    ``{(result, argument): d(*args) -> the elementwise derivative}``, written with the
    results themselves, so that they differentiate again. An argument without an entry
    (an integer order, a parameter with no known derivative) raises if it is a node."""
    results = []
    for k in range(ufunc.nout):

        def result(*args, _k=k, **kwargs):
            return ufunc(*args, **kwargs)[_k]

        result.__name__ = result.__qualname__ = f"{ufunc.__name__}_{k}"
        results.append(primitive(result))

    def entered(*args, **kwargs):
        return tuple(r(*args, **kwargs) for r in results)

    implementation(ufunc)(entered)
    RESULTS[ufunc] = results
    known = derivatives(*results)
    for (k, argnum), d in known.items():
        sensitivity(results[k], argnum)(
            lambda y, ybar, *args, _d=d, **kwargs: ybar * _d(*args)
        )
    return results


def _sqrt_positive(x):
    return np.sqrt(np.where(x > 0, x, 0.0))


def _register_several():
    s = special
    deg = np.pi / 180  # SciPy's Mathieu functions take x in degrees, their derivative in radians

    several_results(s.airy, lambda ai, aip, bi, bip: {
        (0, 0): aip, (1, 0): lambda z: z * ai(z), (2, 0): bip, (3, 0): lambda z: z * bi(z)})
    several_results(s.airye, lambda ai, aip, bi, bip: {
        (0, 0): lambda z: aip(z) + np.sqrt(z) * ai(z),
        (1, 0): lambda z: z * ai(z) + np.sqrt(z) * aip(z),
        (2, 0): lambda z: bip(z) - _sqrt_positive(z) * bi(z),
        (3, 0): lambda z: z * bi(z) - _sqrt_positive(z) * bip(z)})
    several_results(s.fresnel, lambda S, C: {
        (0, 0): lambda z: np.sin(np.pi / 2 * z * z), (1, 0): lambda z: np.cos(np.pi / 2 * z * z)})
    several_results(s.sici, lambda si, ci: {
        (0, 0): lambda x: np.sinc(x / np.pi), (1, 0): lambda x: np.cos(x) / x})
    several_results(s.shichi, lambda shi, chi: {
        (0, 0): lambda x: _ratio_or_one(np.sinh(x), x), (1, 0): lambda x: np.cosh(x) / x})
    several_results(s.itairy, lambda *_: {
        (0, 0): lambda x: s.airy(x)[0], (1, 0): lambda x: s.airy(x)[2],
        (2, 0): lambda x: s.airy(-x)[0], (3, 0): lambda x: s.airy(-x)[2]})
    several_results(s.iti0k0, lambda *_: {(0, 0): s.i0, (1, 0): s.k0})
    several_results(s.it2i0k0, lambda *_: {
        (0, 0): lambda x: (s.i0(x) - 1) / x, (1, 0): lambda x: -s.k0(x) / x})
    several_results(s.itj0y0, lambda *_: {(0, 0): s.j0, (1, 0): s.y0})
    several_results(s.it2j0y0, lambda *_: {
        (0, 0): lambda x: (1 - s.j0(x)) / x, (1, 0): lambda x: -s.y0(x) / x})
    # parabolic cylinder functions: y'' = (x^2/4 - v - 1/2) y for D and V, (a - x^2/4) y for W
    for f in (s.pbdv, s.pbvv):
        several_results(f, lambda y, yp: {
            (0, 1): lambda v, x, _yp=yp: _yp(v, x),
            (1, 1): lambda v, x, _y=y: (x * x / 4 - v - 0.5) * _y(v, x)})
    several_results(s.pbwa, lambda y, yp: {
        (0, 1): yp, (1, 1): lambda a, x: (a - x * x / 4) * y(a, x)})
    several_results(s.ellipj, lambda sn, cn, dn, ph: {
        (0, 0): lambda u, m: cn(u, m) * dn(u, m),
        (1, 0): lambda u, m: -sn(u, m) * dn(u, m),
        (2, 0): lambda u, m: -m * sn(u, m) * cn(u, m),
        (3, 0): dn,
        (0, 1): lambda u, m: cn(u, m) * _am_m(u, m, sn, cn, dn, ph),
        (1, 1): lambda u, m: -sn(u, m) * _am_m(u, m, sn, cn, dn, ph),
        (2, 1): lambda u, m: -(sn(u, m) ** 2 + 2 * m * sn(u, m) * cn(u, m)
                               * _am_m(u, m, sn, cn, dn, ph)) / (2 * dn(u, m)),
        (3, 1): lambda u, m: _am_m(u, m, sn, cn, dn, ph)})  # fmt: skip
    # Mathieu functions: y'' = -(a - 2q cos 2x) y, x in degrees; modified ones
    # y'' = (a - 2q cosh 2x) y in x itself; a the characteristic value
    for f, value in ((s.mathieu_cem, s.mathieu_a), (s.mathieu_sem, s.mathieu_b)):
        several_results(f, lambda y, yp, _value=value: {
            (0, 2): lambda m, q, x, _yp=yp: deg * _yp(m, q, x),
            (1, 2): lambda m, q, x, _y=y: -deg * (_value(m, q) - 2 * q * np.cos(2 * deg * x))
            * _y(m, q, x)})
    for f, value in ((s.mathieu_modcem1, s.mathieu_a), (s.mathieu_modcem2, s.mathieu_a),
                     (s.mathieu_modsem1, s.mathieu_b), (s.mathieu_modsem2, s.mathieu_b)):
        several_results(f, lambda y, yp, _value=value: {
            (0, 2): yp,
            (1, 2): lambda m, q, x, _y=y: (_value(m, q) - 2 * q * np.cosh(2 * x)) * _y(m, q, x)})
    # spheroidal wave functions: the second result is the derivative of the first in x,
    # and (1 - x^2) y'' = 2x y' - (cv - s c^2 x^2 - m^2 / (1 - x^2)) y, s = 1 prolate and
    # -1 oblate, cv the characteristic value. The oblate radial functions (another
    # equation) and SciPy's pro_rad2 (whose derivative disagrees with its differences
    # beyond the first order) are left without rules, as are the complex-valued results
    # of a real argument (kelvin, modfresnelm, modfresnelp): a node there raises
    for f, sign, cv in ((s.pro_ang1, 1.0, s.pro_cv), (s.obl_ang1, -1.0, s.obl_cv),
                        (s.pro_rad1, 1.0, s.pro_cv)):  # fmt: skip
        several_results(f, lambda y, yp, _s=sign, _cv=cv: {
            (0, 3): yp,
            (1, 3): lambda m, n, c, x, _y=y, _yp=yp: _spheroidal_second(
                _y(m, n, c, x), _yp(m, n, c, x), m, c, x, _cv(m, n, c), _s)})
    for f, sign in ((s.pro_ang1_cv, 1.0), (s.obl_ang1_cv, -1.0), (s.pro_rad1_cv, 1.0)):
        several_results(f, lambda y, yp, _s=sign: {
            (0, 4): yp,
            (1, 4): lambda m, n, c, cv, x, _y=y, _yp=yp: _spheroidal_second(
                _y(m, n, c, cv, x), _yp(m, n, c, cv, x), m, c, x, cv, _s)})

    # spherical Bessel functions: SciPy's Python functions call these ufuncs on z.
    # y'' = -(2/z) y' - (1 - n(n+1)/z^2) y for j and y; -(2/z) y' + (1 + n(n+1)/z^2) y
    # for the modified i and k
    from scipy.special import _spherical_bessel as b

    for f, f_d, sign in ((b._spherical_jn, b._spherical_jn_d, -1.0),
                         (b._spherical_yn, b._spherical_yn_d, -1.0),
                         (b._spherical_in, b._spherical_in_d, 1.0),
                         (b._spherical_kn, b._spherical_kn_d, 1.0)):  # fmt: skip
        sensitivity(f, 1)(lambda y, g, n, z, _d=f_d, **kw: g * _d(n, z))
        sensitivity(f_d, 1)(
            lambda y, g, n, z, _f=f, _sign=sign, **kw: g
            * (-2 / z * y + (_sign + n * (n + 1) / (z * z)) * _f(n, z))
        )


def _spherical(name, sign_n_even):
    """SciPy's ``spherical_*n(n, z, derivative=False)`` as the ufuncs it calls, with its
    reflection of a negative real ``z``, so that a node's calls are recorded (SciPy's own
    writes the two halves into an ndarray)."""

    def spherical(n, z, derivative=False):
        from scipy.special import _spherical_bessel as b

        f = getattr(b, f"_spherical_{name}_d" if derivative else f"_spherical_{name}")
        n = np.asarray(value_of(n), dtype=np.dtype("long"))
        if np.iscomplexobj(z) or not np.any(value_of(z) < 0):
            return f(n, z)
        negative = value_of(z) < 0
        positive_z = np.where(negative, 1.0, z)
        reflected_z = np.where(negative, -z, 1.0)
        if sign_n_even is None:  # k: SciPy takes the real part of the complex value
            reflected = np.real(f(n, np.where(negative, z, -1.0) + 0j))
        else:
            sign = np.where(n % 2 == 0, sign_n_even, -sign_n_even)
            reflected = f(n, reflected_z) * (-sign if derivative else sign)
        return np.where(negative, reflected, f(n, positive_z))

    spherical.__name__ = spherical.__qualname__ = f"spherical_{name}"
    spherical.__doc__ = f"``scipy.special.spherical_{name}``, recorded on a node."
    return spherical


spherical_jn = _spherical("jn", 1.0)
spherical_yn = _spherical("yn", -1.0)
spherical_in = _spherical("in", 1.0)
spherical_kn = _spherical("kn", None)


def _spheroidal_second(y, yp, m, c, x, cv, sign):
    return (2 * x * yp - (cv - sign * c * c * x * x - m * m / (1 - x * x)) * y) / (1 - x * x)


def _ratio_or_one(a, x):
    return np.where(x == 0, 1.0, a / np.where(x == 0, 1.0, x))


def _am_m(u, m, sn, cn, dn, ph):
    """d am(u|m) / dm: from u = F(am|m) held fixed, -dn * dF/dm at am."""
    phi, d = ph(u, m), dn(u, m)
    e = special.ellipeinc(phi, m)
    dF = (e - (1 - m) * u) / (2 * m * (1 - m)) - np.sin(2 * phi) / (4 * (1 - m) * d)
    return -dF * d


if special is not None:
    _register()
    _register_several()


# -- batching rules of the primitives above, for tape.vmap ---------------------------------

def _softmax_like(f):
    def rule(args, batched, axis=None):
        x = args[0]
        if len(args) > 1:
            axis = args[1]
        if not batched[0] or (len(batched) > 1 and batched[1]):
            return NotImplemented
        if np.ndim(x) == 1:  # one scalar per example: a softmax over nothing
            return f(x[:, None], axis=1)[:, 0]
        return f(x, axis=_shift(axis, np.ndim(x) - 1))

    rule.__name__ = f"batch_{function_name(f)}"
    return rule


batching(softmax)(_softmax_like(softmax))
batching(log_softmax)(_softmax_like(log_softmax))


@batching(_logsumexp)
def _(args, batched, **kwargs):
    a, axis, b, keepdims = args
    if batched[1] or batched[3] or kwargs:
        return NotImplemented
    n = np.shape(a if batched[0] else b)[0]
    rank_a = np.ndim(a) - batched[0]
    rank_b = 0 if b is None else np.ndim(b) - batched[2]
    if b is not None and rank_a != rank_b:
        return NotImplemented
    if not batched[0]:
        a = np.broadcast_to(a, (n,) + np.shape(a))
    if b is not None and not batched[2]:
        b = np.broadcast_to(b, (n,) + np.shape(b))
    if rank_a == 0:
        return NotImplemented
    return _logsumexp(a, _shift(axis, rank_a), b, keepdims)


@batching(polygamma)
def _(args, batched, **kwargs):
    if kwargs:
        return NotImplemented
    rank = max(np.ndim(a) - flag for a, flag in zip(args, batched))
    return polygamma(*[_padded(a, rank) if flag else a for a, flag in zip(args, batched)])
