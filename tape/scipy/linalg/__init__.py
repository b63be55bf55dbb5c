"""``scipy.linalg``, differentiable: the functions in ``__all__`` have SciPy's names,
arguments, defaults and return types; every other name is SciPy's own, for plain values.

Primitives with their own rules: ``sqrtm logm solve_sylvester solve_banded null_space
schur solve_triangular cho_factor cho_solve expm inv solve det cholesky lu_factor lu_solve``;
compositions of those and of NumPy's rules: ``expm_frechet solve_continuous_lyapunov lu
qr svd eigh pinv block_diag toeplitz circulant``. ``schur`` is differentiable for real,
distinct eigenvalues (a triangular ``T``). Not covered: the other eigenvalue problems of
general matrices (``eig``), ``polar``, ``funm``. ``linalg.blas`` holds the BLAS routines
library code calls (``dgemm``, ``dsyrk``, ...), as NumPy expressions with SciPy's meaning.

>>> import numpy as np
>>> from tape.scipy import linalg
>>> from tape import grad
>>> grad(lambda a: np.trace(linalg.expm(a)))(np.zeros((2, 2)))[0]  # d tr e^A = e^A'
array([[1., 0.],
       [0., 1.]])
"""

from sensitivities.scipy.linalg import (
    block_diag,
    cho_factor,
    cho_solve,
    cholesky,
    circulant,
    det,
    eigh,
    expm,
    expm_frechet,
    inv,
    logm,
    lu,
    lu_factor,
    lu_solve,
    null_space,
    pinv,
    qr,
    schur,
    solve,
    solve_banded,
    solve_continuous_lyapunov,
    solve_sylvester,
    solve_triangular,
    sqrtm,
    svd,
    toeplitz,
)

from .._forward import forward, listing
from . import blas  # noqa: F401  (ours, not SciPy's: the forwarding below would find SciPy's)

__all__ = [
    "sqrtm", "logm", "expm", "expm_frechet", "solve_sylvester", "solve_continuous_lyapunov",
    "solve_banded", "solve_triangular", "solve", "cho_factor", "cho_solve", "lu_factor",
    "lu_solve", "cholesky", "lu", "qr", "svd", "eigh", "det", "inv", "pinv", "null_space",
    "schur", "block_diag", "toeplitz", "circulant",
]  # fmt: skip

__getattr__ = forward("scipy.linalg")
__dir__ = listing("scipy.linalg", __all__)
