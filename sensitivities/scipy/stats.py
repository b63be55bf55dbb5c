"""Differentiable counterparts of ``scipy.stats`` distributions, in plain NumPy.

SciPy's distribution methods convert their arguments with ``np.asarray``, so a node
cannot reach them. The objects here have SciPy's names and are called as SciPy's are,
``norm.logpdf(x, loc=0, scale=1)``, ``gamma.cdf(x, a, loc=0, scale=1)``, shape
parameters first (by position or keyword), with SciPy's broadcasting, its values outside
the support (``-inf`` log densities, ``0`` densities, ``0``/``1`` distribution
functions) and its ``nan`` for invalid parameters. Each method is an *implementation*:
the standardised formula SciPy itself evaluates, written with NumPy and
``scipy.special`` ufuncs that have rules, so every method is differentiable to any order,
in both modes, with no rule of its own.

Arguments outside the support, or invalid parameters, are replaced by a point inside
before the formula runs (the "double where"), so that the branch not taken can neither
overflow nor spread ``nan`` into the gradient.

A few derivatives do not exist here because SciPy's special functions have none:
the distribution functions (``cdf``, ``sf``, ``ppf`` and their logarithms) of ``t``,
``gamma``, ``beta`` and ``chi2`` in their shape parameters (``stdtr``, ``gammainc`` and
``betainc`` are differentiated in ``x`` only), and ``nbinom.cdf`` in ``n``. A node there
raises a ``TypeError`` naming the parameter rather than giving a wrong gradient.
Discrete distributions are differentiable in their continuous parameters, not in ``k``.

>>> import numpy as np
>>> from sensitivities.scipy.stats import norm, gamma
>>> from tape import grad
>>> float(norm.logpdf(1.0, loc=0.5, scale=2.0))  # the same as scipy.stats.norm.logpdf
-1.643335713764618
>>> grad(lambda mu: norm.logpdf(1.0, mu, 2.0))(0.5)  # (x - mu) / scale**2
(0.125,)
>>> float(gamma.logpdf(0.0 - 1.0, 2.0))  # outside the support, as SciPy
-inf
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import is_node

try:
    from scipy import special as sc
except ImportError:  # SciPy is optional: the distributions are defined only with it
    sc = None

__all__ = [
    "norm", "t", "cauchy", "laplace", "logistic", "expon", "gamma", "beta", "chi2",
    "lognorm", "uniform", "poisson", "binom", "nbinom", "geom", "multivariate_normal",
    "dirichlet", "CONTINUOUS_METHODS", "DISCRETE_METHODS",
]  # fmt: skip

CONTINUOUS_METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf")
DISCRETE_METHODS = ("logpmf", "pmf", "cdf", "sf")

_LOG_2PI_2 = 0.5 * math.log(2.0 * math.pi)
_LOG_PI = math.log(math.pi)
_LOG_2 = math.log(2.0)


def _constant(v, what: str) -> None:
    """Refuse a node where no derivative exists, rather than drop its gradient."""
    if is_node(v):
        raise TypeError(
            f"{what} has no derivative here (SciPy's special function has none in that "
            "argument); pass a constant there (node.value) or differentiate another method"
        )


def _finish(out):
    """SciPy's return type: a NumPy scalar for 0-d results of plain arrays."""
    if isinstance(out, np.ndarray) and out.ndim == 0:
        return out[()]
    return out


def _bind(dist: str, method: str, names: tuple, defaults: tuple, args: tuple, kwargs: dict):
    """SciPy's ``method(x, *shapes, loc=0, scale=1)``: the parameters by name, in order."""
    if len(args) > len(names):
        raise TypeError(f"{dist}.{method}() takes at most {len(names) + 1} arguments")
    values = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"{dist}.{method}() got an unexpected keyword argument {key!r}")
        if key in values:
            raise TypeError(f"{dist}.{method}() got multiple values for argument {key!r}")
        values[key] = value
    out = []
    for name, default in zip(names, defaults):
        if name not in values:
            if default is _REQUIRED:
                raise TypeError(f"{dist}.{method}() missing required argument {name!r}")
            values[name] = default
        out.append(values[name])
    return out


_REQUIRED = object()


def _scipy_object(name):
    from scipy import stats

    return getattr(stats, name)


class _Frozen:
    """``dist(*shapes, loc, scale)``: a distribution with its parameters fixed, as
    SciPy's frozen distributions. Methods without a counterpart (``rvs``, ``mean``, ...)
    are SciPy's own, on plain values."""

    def __init__(self, dist, args, kwargs):
        self.dist, self.args, self.kwargs = dist, args, kwargs

    def __getattr__(self, method):
        if method.startswith("__") or method in ("dist", "args", "kwargs"):
            raise AttributeError(method)
        if method not in self.dist.methods:
            return getattr(_scipy_object(self.dist.name)(*self.args, **self.kwargs), method)
        f = getattr(self.dist, method)
        return lambda x: f(x, *self.args, **self.kwargs)

    def __repr__(self):
        return f"<frozen {self.dist.name}{self.args}>"


class _Distribution:
    """A distribution of ``scipy.stats``: its methods take the point, then the shape
    parameters, then ``loc`` (and ``scale`` for a continuous one)."""

    kind = ""
    methods: tuple = ()

    def __init__(self, name, shapes, argcheck, inner, nondiff=None, **formulas):
        self.name = name
        self.shapes = tuple(shapes)
        self._argcheck = argcheck
        self._inner = inner  # a point inside the support, standardised
        self._nondiff = nondiff or {}  # method -> shape parameters with no derivative
        self._f = formulas
        for method in self.methods:
            setattr(self, method, self._method(method))

    def __call__(self, *args, **kwargs):
        return _Frozen(self, args, kwargs)

    def __getattr__(self, attr):
        # what has no counterpart (rvs, fit, mean, isf, ...) is SciPy's own, for plain values
        if attr.startswith("__") or attr in ("name", "shapes", "methods"):
            raise AttributeError(attr)
        return getattr(_scipy_object(self.name), attr)

    def __repr__(self):
        return f"<differentiable scipy.stats.{self.name}>"

    def _method(self, method):
        def call(x, *args, **kwargs):
            return self._evaluate(method, x, args, kwargs)

        params = ", ".join(self.shapes + self._loc_scale_names())
        call.__name__ = call.__qualname__ = method
        call.__doc__ = (
            f"``scipy.stats.{self.name}.{method}(x, {params})``, differentiable"
            + self._doc_note(method)
            + "."
        )
        return call

    def _doc_note(self, method):
        fixed = self._nondiff.get(method, ())
        return f" (not in {', '.join(fixed)})" if fixed else ""

    def _shape_values(self, method, values):
        shapes = values[: len(self.shapes)]
        for name, value in zip(self.shapes, shapes):
            if name in self._nondiff.get(method, ()):
                _constant(value, f"scipy.stats.{self.name}.{method} in its parameter {name}")
        valid = self._argcheck(*shapes) if self.shapes else True
        safe = [np.where(valid, s, 1.0) for s in shapes]
        return shapes, safe, valid


class _Continuous(_Distribution):
    kind = "continuous"
    methods = CONTINUOUS_METHODS

    def __init__(self, name, shapes, argcheck, inner, support=(-np.inf, np.inf), **kwargs):
        super().__init__(name, shapes, argcheck, inner, **kwargs)
        self.support = support

    def _loc_scale_names(self):
        return ("loc=0", "scale=1")

    def _evaluate(self, method, x, args, kwargs):
        names = self.shapes + ("loc", "scale")
        defaults = (_REQUIRED,) * len(self.shapes) + (0.0, 1.0)
        values = _bind(self.name, method, names, defaults, args, kwargs)
        loc, scale = values[-2:]
        shapes, safe, valid = self._shape_values(method, values)
        good = valid & np.greater(scale, 0)  # SciPy's cond0
        scale_ = np.where(good, scale, 1.0)
        if method == "ppf":
            return _finish(self._ppf(x, loc, scale_, safe, good))
        z = (x - loc) / scale_
        lo, hi = self.support
        bad = ~good | np.isnan(z)
        if method in ("logpdf", "pdf"):
            inside = good & np.greater_equal(z, lo) & np.less_equal(z, hi)
            zs = np.where(inside, z, self._inner)
            logp = self._f["logpdf"](zs, *safe) - np.log(scale_)
            if method == "logpdf":
                out = np.where(inside, logp, np.where(bad, np.nan, -np.inf))
            else:
                out = np.where(inside, np.exp(logp), np.where(bad, np.nan, 0.0))
            return _finish(out)
        # distribution functions: SciPy evaluates them on the open support only
        inside = good & np.greater(z, lo) & np.less(z, hi)
        zs = np.where(inside, z, self._inner)
        lower_end = np.less_equal(z, lo)  # cdf 0, sf 1
        value = self._distribution_function(method, zs, safe)
        zero, one = (-np.inf, 0.0) if method.startswith("log") else (0.0, 1.0)
        below, above = (zero, one) if method in ("cdf", "logcdf") else (one, zero)
        outside = np.where(lower_end, below, above)
        return _finish(np.where(inside, value, np.where(bad, np.nan, outside)))

    def _distribution_function(self, method, z, s):
        f = self._f
        cdf = f["cdf"]
        sf = f.get("sf") or (lambda z, *s: 1.0 - cdf(z, *s))
        if method in ("cdf", "sf"):
            return (cdf if method == "cdf" else sf)(z, *s)
        if method in f:
            return f[method](z, *s)
        # SciPy's default: the logarithm of the smaller of cdf and sf, log1p of the other
        # side's complement beyond the median, where the smaller one would round to 1
        median = f["ppf"](0.5, *[_plain(v) for v in s])
        if method == "logcdf":
            return np.where(np.less(z, median), np.log(cdf(z, *s)), np.log1p(-sf(z, *s)))
        return np.where(np.greater(z, median), np.log(sf(z, *s)), np.log1p(-cdf(z, *s)))

    def _ppf(self, q, loc, scale, safe, good):
        good = good & np.equal(loc, loc)
        inside = good & np.greater(q, 0) & np.less(q, 1)
        qs = np.where(inside, q, 0.5)
        lo, hi = self.support
        value = self._f["ppf"](qs, *safe) * scale + loc
        # an infinite end stays infinite (and inf * scale would spread nan into the gradient)
        lo = lo if np.isinf(lo) else lo * scale + loc
        hi = hi if np.isinf(hi) else hi * scale + loc
        ends = np.where(np.equal(q, 0) & good, lo, np.where(np.equal(q, 1) & good, hi, np.nan))
        return np.where(inside, value, ends)


class _Discrete(_Distribution):
    kind = "discrete"
    methods = DISCRETE_METHODS

    def __init__(self, name, shapes, argcheck, inner, support, **kwargs):
        super().__init__(name, shapes, argcheck, inner, **kwargs)
        self._support = support  # shapes -> (lowest, highest) value of k

    def _loc_scale_names(self):
        return ("loc=0",)

    def _evaluate(self, method, k, args, kwargs):
        names = self.shapes + ("loc",)
        defaults = (_REQUIRED,) * len(self.shapes) + (0,)
        values = _bind(self.name, method, names, defaults, args, kwargs)
        loc = values[-1]
        _constant(k, f"scipy.stats.{self.name}.{method} in k (a count)")
        _constant(loc, f"scipy.stats.{self.name}.{method} in loc (a shift of the count)")
        shapes, safe, valid = self._shape_values(method, values)
        good = valid & np.equal(loc, loc)
        k = np.subtract(k, loc)
        lo, hi = self._support(*safe)
        bad = ~good | np.isnan(k)
        if method in ("logpmf", "pmf"):
            inside = good & np.greater_equal(k, lo) & np.less_equal(k, hi)
            inside = inside & np.equal(np.floor(k), k)
            ks = np.where(inside, k, self._inner)
            logp = self._f["logpmf"](ks, *safe)
            if method == "logpmf":
                return _finish(np.where(inside, logp, np.where(bad, np.nan, -np.inf)))
            return _finish(np.where(inside, np.exp(logp), np.where(bad, np.nan, 0.0)))
        k = np.floor(k)
        inside = good & np.greater_equal(k, lo) & np.less(k, hi)
        ks = np.where(inside, k, self._inner)
        value = self._f[method](ks, *safe)
        above = np.greater_equal(k, hi)
        outside = np.where(above, 1.0, 0.0) if method == "cdf" else np.where(above, 0.0, 1.0)
        return _finish(np.where(inside, value, np.where(bad, np.nan, outside)))


# -- the distributions ----------------------------------------------------------------------


def _positive(*shapes):
    out = True
    for s in shapes:
        out = out & np.greater(s, 0)
    return out


def _t_logpdf(z, df):
    return (np.log(sc.poch(0.5 * df, 0.5)) - 0.5 * (np.log(df) + _LOG_PI)
            - (df + 1) / 2 * np.log1p(z * z / df))  # fmt: skip


def _cauchy_logpdf(z):
    # SciPy's two forms: log1p(z^2) for |z| < 1, and one that cannot overflow beyond
    a = np.abs(z)
    small = np.less(a, 1)
    big = np.where(small, 1.0, a)
    return np.where(small, -_LOG_PI - np.log1p(a * a),
                    -_LOG_PI - (2 * np.log(big) + np.log1p((1 / big) ** 2)))  # fmt: skip


def _cauchy_ppf(q):
    # tan(pi (q - 1/2)) in the middle, and as -cot(pi q) or cot(pi (1 - q)) in the tails,
    # where q - 1/2 would lose q's digits
    tails = np.where(np.less(q, 0.5), -1.0 / np.tan(math.pi * q), 1.0 / np.tan(math.pi * (1.0 - q)))
    return np.where(np.less(np.abs(q - 0.5), 0.25), np.tan(math.pi * (q - 0.5)), tails)


def _laplace_cdf(z):
    half = 0.5 * np.exp(-np.abs(z))  # never overflows, in either branch
    return np.where(np.greater(z, 0), 1.0 - half, half)


def _laplace_logcdf(z):
    return np.where(np.greater(z, 0), np.log1p(-0.5 * np.exp(-np.abs(z))), -_LOG_2 - np.abs(z))


def _laplace_ppf(q):
    upper = np.greater(q, 0.5)
    return np.where(upper, -np.log(2 * (1 - q)), np.log(2 * q))


def _logistic_logpdf(z):
    y = -np.abs(z)
    return y - 2.0 * np.log1p(np.exp(y))


def _lognorm_logpdf(z, s):
    zero = np.equal(z, 0)
    z = np.where(zero, 1.0, z)
    log_z = np.log(z)
    logp = -(log_z**2) / (2 * s**2) - np.log(s * z * math.sqrt(2 * math.pi))
    return np.where(zero, -np.inf, logp)


def _beta_sf(z, a, b):
    return sc.betaincc(a, b, z) if hasattr(sc, "betaincc") else 1.0 - sc.betainc(a, b, z)


def _binom_support(n, p):
    return 0, n


def _half_line(*shapes):
    return 0, np.inf


def _define():
    global norm, t, cauchy, laplace, logistic, expon, gamma, beta, chi2, lognorm, uniform
    global poisson, binom, nbinom, geom
    shapeless = lambda: True  # noqa: E731
    distribution_functions = ("cdf", "logcdf", "sf", "logsf", "ppf")

    def fixed(*names):
        return {m: names for m in distribution_functions}

    norm = _Continuous(
        "norm", (), shapeless, 0.0,
        logpdf=lambda z: -z * z / 2.0 - _LOG_2PI_2,
        cdf=sc.ndtr, sf=lambda z: sc.ndtr(-z), logcdf=sc.log_ndtr,
        logsf=lambda z: sc.log_ndtr(-z), ppf=sc.ndtri,
    )  # fmt: skip
    t = _Continuous(
        "t", ("df",), _positive, 0.0, nondiff=fixed("df"),
        logpdf=_t_logpdf, cdf=lambda z, df: sc.stdtr(df, z),
        sf=lambda z, df: sc.stdtr(df, -z), ppf=lambda q, df: sc.stdtrit(df, q),
    )  # fmt: skip
    cauchy = _Continuous(
        "cauchy", (), shapeless, 0.0,
        logpdf=_cauchy_logpdf, cdf=lambda z: 0.5 + np.arctan(z) / math.pi,
        sf=lambda z: np.arctan2(1.0, z) / math.pi,
        ppf=_cauchy_ppf,
    )  # fmt: skip
    laplace = _Continuous(
        "laplace", (), shapeless, 0.0,
        logpdf=lambda z: -_LOG_2 - np.abs(z), cdf=_laplace_cdf,
        sf=lambda z: _laplace_cdf(-z), logcdf=_laplace_logcdf,
        logsf=lambda z: _laplace_logcdf(-z), ppf=_laplace_ppf,
    )  # fmt: skip
    logistic = _Continuous(
        "logistic", (), shapeless, 0.0,
        logpdf=_logistic_logpdf, cdf=sc.expit, sf=lambda z: sc.expit(-z),
        logcdf=sc.log_expit, logsf=lambda z: sc.log_expit(-z), ppf=sc.logit,
    )  # fmt: skip
    expon = _Continuous(
        "expon", (), shapeless, 1.0, support=(0.0, np.inf),
        logpdf=lambda z: -z, cdf=lambda z: -np.expm1(-z), sf=lambda z: np.exp(-z),
        logsf=lambda z: -z,
        ppf=lambda q: -np.log1p(-q),
    )  # fmt: skip
    gamma = _Continuous(
        "gamma", ("a",), _positive, 1.0, support=(0.0, np.inf), nondiff=fixed("a"),
        logpdf=lambda z, a: sc.xlogy(a - 1.0, z) - z - sc.gammaln(a),
        cdf=lambda z, a: sc.gammainc(a, z), sf=lambda z, a: sc.gammaincc(a, z),
        ppf=lambda q, a: sc.gammaincinv(a, q),
    )  # fmt: skip
    beta = _Continuous(
        "beta", ("a", "b"), _positive, 0.5, support=(0.0, 1.0), nondiff=fixed("a", "b"),
        logpdf=lambda z, a, b: sc.xlog1py(b - 1.0, -z) + sc.xlogy(a - 1.0, z) - sc.betaln(a, b),
        cdf=lambda z, a, b: sc.betainc(a, b, z), sf=_beta_sf,
        ppf=lambda q, a, b: sc.betaincinv(a, b, q),
    )  # fmt: skip
    chi2 = _Continuous(
        "chi2", ("df",), _positive, 1.0, support=(0.0, np.inf), nondiff=fixed("df"),
        logpdf=lambda z, df: (sc.xlogy(df / 2.0 - 1, z) - z / 2.0 - sc.gammaln(df / 2.0)
                              - (_LOG_2 * df) / 2.0),
        cdf=lambda z, df: sc.chdtr(df, z), sf=lambda z, df: sc.chdtrc(df, z),
        ppf=lambda q, df: 2 * sc.gammaincinv(df / 2, q),
    )  # fmt: skip
    lognorm = _Continuous(
        "lognorm", ("s",), _positive, 1.0, support=(0.0, np.inf),
        logpdf=_lognorm_logpdf, cdf=lambda z, s: sc.ndtr(np.log(z) / s),
        sf=lambda z, s: sc.ndtr(-np.log(z) / s),
        logcdf=lambda z, s: sc.log_ndtr(np.log(z) / s),
        logsf=lambda z, s: sc.log_ndtr(-np.log(z) / s),
        ppf=lambda q, s: np.exp(s * sc.ndtri(q)),
    )  # fmt: skip
    uniform = _Continuous(
        "uniform", (), shapeless, 0.5, support=(0.0, 1.0),
        logpdf=lambda z: 0.0 * z, cdf=lambda z: z, sf=lambda z: 1.0 - z,
        ppf=lambda q: q,
    )  # fmt: skip

    # discrete: differentiable in their continuous parameters
    poisson = _Discrete(
        "poisson", ("mu",), lambda mu: np.greater_equal(mu, 0), 0.0, _half_line,
        logpmf=lambda k, mu: sc.xlogy(k, mu) - sc.gammaln(k + 1) - mu,
        cdf=lambda k, mu: sc.gammaincc(k + 1, mu), sf=lambda k, mu: sc.gammainc(k + 1, mu),
    )  # fmt: skip

    def binom_check(n, p):
        return (np.greater_equal(n, 0) & np.equal(np.floor(n), n) & np.greater_equal(p, 0)
                & np.less_equal(p, 1))  # fmt: skip

    def binom_logpmf(k, n, p):
        combiln = sc.gammaln(n + 1) - (sc.gammaln(k + 1) + sc.gammaln(n - k + 1))
        return combiln + sc.xlogy(k, p) + sc.xlog1py(n - k, -p)

    binom = _Discrete(
        "binom", ("n", "p"), binom_check, 0.0, _binom_support,
        nondiff={m: ("n",) for m in DISCRETE_METHODS},
        logpmf=binom_logpmf,
        cdf=lambda k, n, p: sc.betainc(n - k, k + 1, 1.0 - p),
        sf=lambda k, n, p: sc.betainc(k + 1, n - k, p),
    )  # fmt: skip

    def nbinom_logpmf(k, n, p):
        coeff = sc.gammaln(n + k) - sc.gammaln(k + 1) - sc.gammaln(n)
        return coeff + n * np.log(p) + sc.xlog1py(k, -p)

    nbinom = _Discrete(
        "nbinom", ("n", "p"),
        lambda n, p: np.greater(n, 0) & np.greater(p, 0) & np.less_equal(p, 1),
        0.0, _half_line, nondiff={"cdf": ("n",), "sf": ("n",)},
        logpmf=nbinom_logpmf,
        cdf=lambda k, n, p: sc.betainc(n, k + 1, p),
        sf=lambda k, n, p: sc.betainc(k + 1, n, 1.0 - p),
    )  # fmt: skip
    geom = _Discrete(
        "geom", ("p",), lambda p: np.greater(p, 0) & np.less_equal(p, 1), 1.0,
        lambda p: (1, np.inf),
        logpmf=lambda k, p: sc.xlog1py(k - 1, -p) + np.log(p),
        cdf=lambda k, p: -np.expm1(np.log1p(-p) * k),
        sf=lambda k, p: np.exp(np.log1p(-p) * k),
    )  # fmt: skip


# -- multivariate distributions -------------------------------------------------------------


def _mvn_dimension(mean, cov):
    if mean is not None:
        return int(np.size(mean)) if np.ndim(mean) <= 1 else np.shape(mean)[-1]
    if np.ndim(cov) >= 1:
        return np.shape(cov)[-1]
    return 1


def _mvn_parts(x, mean, cov):
    """SciPy's reading of the arguments: points ``(..., d)``, the mean, a ``(d, d)``
    covariance (from a scalar, a diagonal or a matrix)."""
    d = _mvn_dimension(mean, cov)
    if np.ndim(cov) == 0:
        cov = cov * np.eye(d)
    elif np.ndim(cov) == 1:
        cov = cov * np.eye(d)  # the diagonal, through a product that has a rule
    if np.ndim(x) == 0:
        x = np.reshape(x, (1,))
    if np.ndim(x) == 1:
        x = np.reshape(x, (-1, 1) if d == 1 else (1, -1))
    if mean is not None:
        x = x - np.reshape(mean, (d,))
    return x, cov, d


def _squeeze(out):
    out = np.squeeze(out)
    return _finish(out)


class _MultivariateNormal:
    """``scipy.stats.multivariate_normal``: ``logpdf(x, mean=None, cov=1,
    allow_singular=False)`` and ``pdf``, differentiable in ``x``, ``mean`` and ``cov``.

    A positive definite covariance goes through its Cholesky factor. With
    ``allow_singular=True`` a singular one (rank ``r``, by SciPy's cutoff on its
    eigenvalues) is the density on its range, as SciPy's: the pseudo-determinant and the
    pseudo-inverse, and ``-inf`` off the support. Both are written through ``K = C Q`` and
    ``W = Q' C Q``, with ``Q`` a fixed basis of the range: ``C = K W^-1 K'`` holds for every
    ``C`` of rank ``r`` near it, so ``pdet C = det(K'K) / det W`` and
    ``C^+ = K (K'K)^-1 W (K'K)^-1 K'`` are differentiable, to any order, along the
    covariances of that rank (which are all a density may move through). The gradient in
    ``cov`` is the symmetric one, as for ``np.linalg.cholesky``.
    """

    name = "multivariate_normal"
    methods = ("logpdf", "pdf")

    def __call__(self, mean=None, cov=1, allow_singular=False):
        return _FrozenMultivariate(self, (), {"mean": mean, "cov": cov,
                                              "allow_singular": allow_singular})  # fmt: skip

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        """``scipy.stats.multivariate_normal.logpdf``, differentiable in ``x``, ``mean``
        and ``cov``."""
        from ..linalg import solve_triangular

        dev, cov, d = _mvn_parts(x, mean, cov)
        if allow_singular:
            range_basis, null_basis, cutoff = _psd_split(cov)
            if np.shape(null_basis)[1]:
                return _squeeze(_singular_logpdf(dev, cov, range_basis, null_basis, cutoff))
        factor = np.linalg.cholesky(cov)
        # whitened deviations: solve L w = dev' for every point at once
        w = solve_triangular(factor, np.transpose(np.reshape(dev, (-1, d))), lower=True)
        maha = np.reshape(np.sum(w * w, axis=0), np.shape(dev)[:-1])
        log_det = 2.0 * np.sum(np.log(np.diagonal(factor)))
        return _squeeze(-0.5 * (d * math.log(2 * math.pi) + log_det + maha))

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        """``scipy.stats.multivariate_normal.pdf``, differentiable in ``x``, ``mean`` and
        ``cov``."""
        return _finish(np.exp(self.logpdf(x, mean, cov, allow_singular)))

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(_scipy_object(self.name), attr)

    def __repr__(self):
        return "<differentiable scipy.stats.multivariate_normal>"


def _psd_split(cov):
    """SciPy's reading of a covariance that may be singular (``scipy.stats._PSD``): the
    eigenvectors of its lower triangle whose eigenvalues pass SciPy's cutoff (the range),
    the others (the null space), and the tolerance of its support test. Plain values:
    which eigenvalues vanish is constant along the covariances of one rank."""
    plain = np.asarray(_plain(cov), dtype=float)
    lower = np.tril(plain) + np.tril(plain, -1).T
    s, u = np.linalg.eigh(lower)
    eps = 1e6 * np.finfo(float).eps * np.max(np.abs(s))
    if np.min(s) < -eps:
        raise ValueError("The input matrix must be symmetric positive semidefinite.")
    return u[:, s > eps], u[:, s <= eps], 1e3 * eps


def _singular_logpdf(dev, cov, range_basis, null_basis, cutoff):
    """The log density on the range of a singular covariance (see the class)."""
    sym = (cov + np.swapaxes(cov, -1, -2)) / 2
    plain = np.asarray(_plain(cov), dtype=float)
    lower = np.tril(plain) + np.tril(plain, -1).T
    sym = sym + (lower - _plain(sym))  # SciPy reads the lower triangle: its values
    K = sym @ range_basis
    W = range_basis.T @ K
    G = K.T @ K
    points = np.reshape(dev, (-1, np.shape(dev)[-1]))
    coefficients = np.linalg.solve(G, K.T @ points.T)  # dev = K v on the range
    maha = np.sum(coefficients * (W @ coefficients), axis=0)
    log_pdet = 2.0 * (np.sum(np.log(np.diagonal(np.linalg.cholesky(G))))
                      - np.sum(np.log(np.diagonal(np.linalg.cholesky(W)))))  # fmt: skip
    rank = np.shape(range_basis)[1]
    out = -0.5 * (rank * math.log(2 * math.pi) + log_pdet + maha)
    off = np.linalg.norm(np.asarray(_plain(points)) @ null_basis, axis=-1) >= cutoff
    out = np.where(off, -np.inf, out)  # off the support, as SciPy
    return np.reshape(out, np.shape(dev)[:-1])


class _Dirichlet:
    """``scipy.stats.dirichlet``: ``logpdf(x, alpha)`` and ``pdf``, differentiable in
    ``x`` and ``alpha``. As SciPy, the components run along the first axis of ``x``, and
    ``x`` may leave out the last one (it is ``1 - sum``)."""

    name = "dirichlet"
    methods = ("logpdf", "pdf")

    def __call__(self, alpha):
        return _FrozenMultivariate(self, (alpha,), {})

    def logpdf(self, x, alpha):
        """``scipy.stats.dirichlet.logpdf``, differentiable in ``x`` and ``alpha``."""
        if np.ndim(alpha) != 1:
            raise ValueError("Parameter vector 'a' must be one dimensional, but a.shape = "
                             f"{np.shape(alpha)}.")  # fmt: skip
        if np.shape(x)[0] + 1 == np.shape(alpha)[0]:
            rest = 1.0 - np.sum(x, axis=0, keepdims=True)
            x = np.concatenate([x, rest], axis=0)
        elif np.shape(x)[0] != np.shape(alpha)[0]:
            raise ValueError("Vector 'x' must have either the same number of entries as, or "
                             "one entry fewer than, parameter vector 'a'")  # fmt: skip
        x_plain, a_plain = _plain(x), _plain(alpha)
        if np.any(a_plain <= 0):
            raise ValueError("All parameters must be greater than 0")
        if np.any(x_plain < 0) or np.any(x_plain > 1):
            raise ValueError("Each entry in 'x' must be in [0, 1]")
        log_b = np.sum(sc.gammaln(alpha)) - sc.gammaln(np.sum(alpha))
        a = np.reshape(alpha, (-1,) + (1,) * (np.ndim(x) - 1))
        return _finish(-log_b + np.sum(sc.xlogy(a - 1, x), axis=0))

    def pdf(self, x, alpha):
        """``scipy.stats.dirichlet.pdf``, differentiable in ``x`` and ``alpha``."""
        return _finish(np.exp(self.logpdf(x, alpha)))

    __getattr__ = _MultivariateNormal.__getattr__

    def __repr__(self):
        return "<differentiable scipy.stats.dirichlet>"


class _FrozenMultivariate(_Frozen):
    pass


def _plain(v):
    while is_node(v):
        v = v.value
    return np.asarray(v)


multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()

norm = t = cauchy = laplace = logistic = expon = gamma = beta = chi2 = lognorm = uniform = None
poisson = binom = nbinom = geom = None
if sc is not None:
    _define()
