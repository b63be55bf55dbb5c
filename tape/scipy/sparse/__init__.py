"""``scipy.sparse``, differentiable: ``coo_array``, ``csr_array``, ``csc_array`` and the
``*_matrix`` types give a ``SparseArray`` when their stored values are a node (the
pattern fixed: a gradient with respect to the values has their shape, never a dense
``n x n`` array), and SciPy's own otherwise; ``tape.scipy.sparse.linalg.spsolve`` solves
with either. Every other name is SciPy's own.

A constant SciPy sparse ``S`` meets a node through SciPy's own operators (``S @ x``,
``x @ S``, ``S.T @ x``, ``S.dot(x)``, ``S * x``); the method ``S.multiply(x)`` has no way
back to the node, so write ``S * x`` or ``sparse.multiply(S, x)``. ``sparse.matmul`` and
``sparse.linalg.spsolve(S, b)`` take it too; or wrap it once, ``A = sparse.csr_array(S)``
with differentiable values, and use ``A @ x``.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy import sparse
>>> rows, cols = np.array([0, 1, 1]), np.array([0, 0, 1])
>>> x = np.array([1.0, 2.0])
>>> def f(values):
...     A = sparse.coo_array((values, (rows, cols)), shape=(2, 2))
...     return np.sum(A.tocsr() @ x)
>>> grad(f)(np.array([3.0, 4.0, 5.0]))  # shaped like the values: d/dv_k = x[cols[k]]
(array([1., 1., 2.]),)
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from sensitivities.registry import holds_node
from sensitivities.scipy.sparse import Pattern, SparseArray, from_scipy, is_sparse, sparse_matmul

from .._forward import forward, listing

__all__ = ["coo_array", "csr_array", "csc_array", "coo_matrix", "csr_matrix", "csc_matrix",
           "linalg"]  # fmt: skip


def _sp():
    return importlib.import_module("scipy.sparse")



def _make(format: str, arg1: Any, shape: Any, dtype: Any, copy: bool, scipy_type: str):
    if not holds_node(arg1):
        return getattr(_sp(), scipy_type)(arg1, shape=shape, dtype=dtype, copy=copy)
    if not isinstance(arg1, tuple) or len(arg1) not in (2, 3):
        raise TypeError(
            f"{scipy_type}: differentiable values come as (data, (row, col)) or, for "
            "csr/csc, (data, indices, indptr); a dense node is better kept dense"
        )
    data = arg1[0]
    if dtype is not None:
        data = data.astype(dtype)
    if holds_node(arg1[1:]):
        raise TypeError(f"{scipy_type}: the pattern (indices) has no derivative; pass it plain")
    if len(arg1) == 2:
        rows, cols = (np.asarray(i) for i in arg1[1])
        if shape is None:
            shape = (int(rows.max()) + 1, int(cols.max()) + 1)
        return SparseArray(data, Pattern(rows, cols, shape), "coo").asformat(format)
    if format == "coo":
        raise TypeError("coo_array takes (data, (row, col))")
    indices, indptr = np.asarray(arg1[1]), np.asarray(arg1[2])
    major = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    if shape is None:
        n_minor = int(indices.max()) + 1 if len(indices) else 0
        shape = (len(indptr) - 1, n_minor) if format == "csr" else (n_minor, len(indptr) - 1)
    rows, cols = (major, indices) if format == "csr" else (indices, major)
    # already in the format's order: no conversion of the values
    return SparseArray(data, Pattern(rows, cols, shape), format)


def coo_array(arg1, shape=None, dtype=None, copy=False):
    """``scipy.sparse.coo_array``; with node values, ``(values, (row, col))`` gives a
    ``SparseArray`` differentiable in ``values``."""
    return _make("coo", arg1, shape, dtype, copy, "coo_array")


def csr_array(arg1, shape=None, dtype=None, copy=False):
    """``scipy.sparse.csr_array``; with node values, ``(data, indices, indptr)`` or
    ``(data, (row, col))`` gives a ``SparseArray`` differentiable in ``data``."""
    return _make("csr", arg1, shape, dtype, copy, "csr_array")


def csc_array(arg1, shape=None, dtype=None, copy=False):
    """``scipy.sparse.csc_array``; with node values, ``(data, indices, indptr)`` or
    ``(data, (row, col))`` gives a ``SparseArray`` differentiable in ``data``."""
    return _make("csc", arg1, shape, dtype, copy, "csc_array")


def coo_matrix(arg1, shape=None, dtype=None, copy=False):
    """``scipy.sparse.coo_matrix``; with node values as ``coo_array``."""
    return _make("coo", arg1, shape, dtype, copy, "coo_matrix")


def csr_matrix(arg1, shape=None, dtype=None, copy=False):
    """``scipy.sparse.csr_matrix``; with node values as ``csr_array``."""
    return _make("csr", arg1, shape, dtype, copy, "csr_matrix")


def csc_matrix(arg1, shape=None, dtype=None, copy=False):
    """``scipy.sparse.csc_matrix``; with node values as ``csc_array``."""
    return _make("csc", arg1, shape, dtype, copy, "csc_matrix")


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` where one of them is sparse (SciPy's or a ``SparseArray``) and the other
    a dense array or node: what ``S @ x`` and ``x @ S`` mean, recorded."""
    if is_sparse(a):
        return sparse_matmul(a, b) if holds_node(b) else a @ b
    if is_sparse(b):
        if not holds_node(a):
            return a @ b
        return np.transpose(sparse_matmul(b.T, np.transpose(a)))
    if isinstance(a, SparseArray):
        return a @ b
    if isinstance(b, SparseArray):
        return np.transpose(b.T @ np.transpose(a))
    raise TypeError("sparse.matmul wants one sparse operand")


dot = matmul


def multiply(S: Any, x: Any) -> Any:
    """``S.multiply(x)``, elementwise, sparse on ``S``'s pattern: a ``SparseArray`` whose
    values are ``S``'s times the matching entries of ``x``."""
    if isinstance(S, SparseArray):
        return S.multiply(x)
    if not holds_node(x):
        return S.multiply(x)
    format = S.format if S.format in ("csr", "csc") else "coo"
    return from_scipy(S, format).multiply(x)


def __getattr__(name):
    if name == "linalg":
        return importlib.import_module(f"{__name__}.linalg")
    return forward("scipy.sparse")(name)



__dir__ = listing("scipy.sparse", __all__)
