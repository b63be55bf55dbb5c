"""SciPy's differentiable counterparts, laid out as SciPy is: change one import line.

>>> from tape.scipy import stats, linalg, special, signal
>>> import numpy as np
>>> from tape import grad
>>> grad(lambda mu: stats.norm.logpdf(1.0, mu, 2.0))(0.5)
(0.125,)

``stats``, ``linalg``, ``special`` and ``signal`` hold counterparts with SciPy's names,
arguments, defaults and return types (listed in each module's ``__all__``); every other
name of SciPy's module is SciPy's own, for plain values, so that code which imports
``tape.scipy.stats`` in place of ``scipy.stats`` keeps working. ``integrate``,
``optimize`` and ``sparse`` differentiate ODE solutions (adjoint method) and quadratures,
solutions of equations and minimisers (implicit function theorem) and sparse products
and solves; ``interpolate``'s splines are differentiable in their data and points.
The rules themselves are plain NumPy in ``sensitivities``; this package is only their
public face, and needs SciPy.
"""

import importlib
import importlib.util

__all__ = ["stats", "linalg", "special", "signal", "integrate", "interpolate", "optimize",
           "sparse", "spatial"]  # fmt: skip


def __getattr__(name):
    # ``import tape.scipy`` stays cheap: each submodule is imported when first used
    if name in __all__:
        if importlib.util.find_spec("scipy") is None:
            raise ImportError(
                f"tape.scipy.{name} needs SciPy, an optional extra: pip install 'tape-ad[scipy]'"
            )
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
