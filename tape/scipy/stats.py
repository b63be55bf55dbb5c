"""``scipy.stats``, differentiable: the distributions below are called exactly as SciPy's
(``stats.norm.logpdf(x, loc=0, scale=1)``, ``stats.gamma.cdf(x, a, loc=0, scale=1)``,
frozen as ``stats.t(df, loc, scale).logpdf(x)``), with SciPy's broadcasting and values.

- continuous: ``norm t cauchy laplace logistic expon gamma beta chi2 lognorm uniform``,
  methods ``logpdf pdf cdf logcdf sf logsf ppf``, differentiable in ``x``, ``loc``,
  ``scale`` and the shape parameters, except the distribution functions of ``t``,
  ``gamma``, ``beta`` and ``chi2`` in their shape parameters (a ``TypeError`` names them);
- discrete: ``poisson binom nbinom geom``, methods ``logpmf pmf cdf sf``, differentiable
  in their continuous parameters (``nbinom``'s ``cdf``/``sf`` not in ``n``);
- ``multivariate_normal.logpdf/pdf`` in ``x``, ``mean`` and ``cov``, and
  ``dirichlet.logpdf/pdf`` in ``x`` and ``alpha``.

Other methods (``rvs``, ``fit``, ``mean``, ``isf``, ...) and every other name are SciPy's
own, for plain values.

>>> import numpy as np
>>> from tape.scipy import stats
>>> from tape import grad
>>> grad(lambda s: stats.gamma.logpdf(2.0, 3.0, scale=s))(1.0)  # a / s - x / s**2 at s = 1
(-1.0,)
"""

from sensitivities.scipy.stats import (
    beta,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    geom,
    laplace,
    logistic,
    lognorm,
    multivariate_normal,
    nbinom,
    norm,
    poisson,
    t,
    uniform,
)

from ._forward import forward, listing

__all__ = [
    "norm", "t", "cauchy", "laplace", "logistic", "expon", "gamma", "beta", "chi2",
    "lognorm", "uniform", "poisson", "binom", "nbinom", "geom", "multivariate_normal",
    "dirichlet",
]  # fmt: skip

assert all(globals()[name] is not None for name in __all__)  # SciPy is installed
__getattr__ = forward("scipy.stats")
__dir__ = listing("scipy.stats", __all__)
