"""Sensitivities of ``scipy.special`` ufuncs, registered when SciPy is installed.

SciPy's special functions are NumPy ufuncs, so nodes reach them through
``__array_ufunc__`` like ``np.sin``; only their rules live here.
"""

import numpy as np

try:
    from scipy import special
except ImportError:  # SciPy is optional: without it there is nothing to register
    special = None

from .registry import sensitivity

if special is not None:
    sensitivity(special.gammaln, 0)(lambda y, ybar, x, **kw: ybar * special.digamma(x))
    sensitivity(special.expit, 0)(lambda y, ybar, x, **kw: ybar * y * (1 - y))
    sensitivity(special.erf, 0)(
        lambda y, ybar, x, **kw: ybar * (2 / np.sqrt(np.pi)) * np.exp(-x * x)
    )
