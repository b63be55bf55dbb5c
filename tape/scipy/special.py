"""``scipy.special``, differentiable: SciPy's special functions that have rules (most are
ufuncs, recorded as they are: the very same objects as SciPy's), and counterparts of
the Python-level ones that convert their arguments (``logsumexp``, ``softmax``,
``log_softmax``, ``polygamma``, ``multigammaln``). ``__all__`` lists them; every other
name is SciPy's own (a ufunc without a rule raises a clear error on a node).

>>> import numpy as np
>>> from tape.scipy import special
>>> from tape import grad
>>> grad(lambda a: special.multigammaln(a, 1))(2.0)[0] == special.digamma(2.0)
np.True_
"""

import scipy.special as _special

from sensitivities import lookup
from sensitivities.special import (
    log_softmax,
    logsumexp,
    multigammaln,
    polygamma,
    softmax,
    spherical_in,
    spherical_jn,
    spherical_kn,
    spherical_yn,
)

from ._forward import forward, listing

_COUNTERPARTS = {"logsumexp": logsumexp, "softmax": softmax, "log_softmax": log_softmax,
                 "polygamma": polygamma, "multigammaln": multigammaln,
                 "spherical_jn": spherical_jn, "spherical_yn": spherical_yn,
                 "spherical_in": spherical_in, "spherical_kn": spherical_kn}  # fmt: skip


def _differentiable() -> dict:
    """SciPy's special functions with a sensitivity (the ufuncs among them), and
    ``softplus``, which is NumPy's ``logaddexp`` inside."""
    out = {}
    for name in dir(_special):
        f = getattr(_special, name)
        rules = lookup(f) if callable(f) and not name.startswith("_") else None
        if rules is not None and rules.argnums:
            out[name] = f
    if hasattr(_special, "softplus"):
        out["softplus"] = _special.softplus
    return out


globals().update(_differentiable())
globals().update(_COUNTERPARTS)
__all__ = sorted(set(_differentiable()) | set(_COUNTERPARTS))

__getattr__ = forward("scipy.special")
__dir__ = listing("scipy.special", __all__)
