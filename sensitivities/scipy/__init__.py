"""Rules and implementations for SciPy functions that are not ufuncs, laid out as SciPy
is: ``stats`` (distributions), ``linalg`` (matrix functions, factorisations, equation
solvers), ``blas`` (``scipy.linalg.blas`` as NumPy expressions), ``signal`` (convolution
and filtering) and ``interpolate`` (splines, compositions with no rule of their own).
``tape.scipy`` is their public face.

SciPy's special functions are mostly ufuncs, recorded as they are; their rules live in
``sensitivities.special``, and the older ``scipy.linalg`` counterparts in
``sensitivities.linalg``.
"""

from . import integrate, linalg, optimize, signal, sparse  # noqa: F401  (registers their rules; stats registers none)
