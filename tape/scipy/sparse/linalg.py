"""``scipy.sparse.linalg``, differentiable: ``spsolve(A, b)`` in ``b`` for a constant
SciPy sparse ``A``, and in the values of a ``tape.scipy.sparse`` array too (its gradient
shaped like the values). Every other name is SciPy's own.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy import sparse
>>> A = sparse.csr_array(np.array([[2.0, 0.0], [1.0, 4.0]]))  # a constant: SciPy's own
>>> grad(lambda b: np.sum(sparse.linalg.spsolve(A, b)))(np.array([1.0, 1.0]))
(array([0.375, 0.25 ]),)
"""

from __future__ import annotations

import importlib

from sensitivities.scipy.sparse import SparseArray, pattern_solve, sparse_solve

from .._forward import forward, listing

__all__ = ["spsolve"]


def _holds_node(x) -> bool:
    return hasattr(type(x), "__record_call__") and hasattr(x, "tape")


def spsolve(A, b, permc_spec=None, use_umfpack=True):
    """``scipy.sparse.linalg.spsolve``: ``x`` with ``A x = b``, differentiable in ``b``
    and, for a ``SparseArray`` ``A``, in its values."""
    if isinstance(A, SparseArray):
        return pattern_solve(A.data, A.pattern, b)
    if _holds_node(b):
        return sparse_solve(A, b)
    return importlib.import_module("scipy.sparse.linalg").spsolve(A, b, permc_spec, use_umfpack)


__getattr__ = forward("scipy.sparse.linalg")
__dir__ = listing("scipy.sparse.linalg", __all__)
