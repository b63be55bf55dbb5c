"""Sparse matrices beside nodes: products and solves with a constant SciPy sparse matrix,
and sparse matrices whose stored values are differentiable, the pattern fixed.

A SciPy sparse matrix is a constant of the tape: ``sparse_matmul(S, x)`` is ``S @ x``
(adjoint ``S.T @ ybar``) and ``sparse_solve(S, b)`` is ``spsolve(S, b)`` (adjoint
``spsolve(S.T, ybar)``), both recorded again when the adjoint is a node, so they are
differentiable to any order. ``SparseArray`` holds values that may be nodes on a fixed
pattern of ``(row, col)`` positions (duplicates summed, as COO does); its product and
solve are ``pattern_matmul`` and ``pattern_solve``, whose adjoints with respect to the
values are gathered on the pattern, ``ybar[rows] * x[cols]`` and
``-lam[rows] * x[cols]``: shaped like the values, never a dense ``n x n`` array. Format
conversions (``tocsr``, ``tocsc``) are a fixed sparse 0/1 matrix applied to the values,
so they are differentiable too.

SciPy's own operators (``S @ x`` with ``x`` a node) convert ``x`` with
``np.asanyarray`` and cannot be recorded; these functions are what
``tape.scipy.sparse`` offers instead.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..registry import foreign_operands, preprocess, primitive, sensitivity, value_of

__all__ = ["sparse_matmul", "sparse_solve", "pattern_matmul", "pattern_solve", "Pattern",
           "SparseArray"]  # fmt: skip


def _sp():
    return importlib.import_module("scipy.sparse")


def _spla():
    return importlib.import_module("scipy.sparse.linalg")


def is_sparse(a: Any) -> bool:
    """Whether ``a`` is a SciPy sparse array or matrix (without importing SciPy)."""
    return type(a).__module__.startswith("scipy.sparse") and hasattr(a, "tocsr")


# -- a constant SciPy sparse matrix ----------------------------------------------------------


@primitive
def sparse_matmul(S: Any, x: Any) -> Any:
    """``S @ x`` for a constant SciPy sparse ``S`` and a dense ``x`` (1-D or 2-D)."""
    return np.asarray(S @ x)


sensitivity(sparse_matmul, 1)(lambda y, ybar, S, x: sparse_matmul(S.T, ybar))


@primitive
def sparse_solve(S: Any, b: Any) -> Any:
    """``scipy.sparse.linalg.spsolve(S, b)`` for a constant sparse ``S``."""
    return np.asarray(_spla().spsolve(S.tocsc(), b))


sensitivity(sparse_solve, 1)(lambda y, ybar, S, b: sparse_solve(S.T, ybar))


# -- values on a fixed pattern -------------------------------------------------------------


class Pattern:
    """The fixed positions of a sparse matrix: ``rows``, ``cols`` (one per stored value)
    and ``shape``."""

    __slots__ = ("rows", "cols", "shape", "_T")

    def __init__(self, rows: Any, cols: Any, shape: tuple) -> None:
        self.rows = np.asarray(rows, dtype=np.intp)
        self.cols = np.asarray(cols, dtype=np.intp)
        self.shape = (int(shape[0]), int(shape[1]))
        self._T = None

    @property
    def T(self) -> Pattern:
        if self._T is None:
            self._T = Pattern(self.cols, self.rows, self.shape[::-1])
            self._T._T = self
        return self._T

    def matrix(self, data: Any) -> Any:
        """The SciPy CSR array of plain ``data`` on this pattern."""
        return _sp().csr_array((data, (self.rows, self.cols)), shape=self.shape)

    def __repr__(self) -> str:
        return f"Pattern({len(self.rows)} values, shape={self.shape})"


def _gather(a: Any, b: Any, rows: Any, cols: Any) -> Any:
    """``a[rows] * b[cols]``, summed over a trailing axis of right-hand sides."""
    if np.ndim(b) == 1:
        return a[rows] * b[cols]
    return np.sum(a[rows] * b[cols], axis=-1)


@primitive
def pattern_matmul(data: Any, pattern: Pattern, x: Any) -> Any:
    """``A @ x`` where ``A`` holds ``data`` on ``pattern``."""
    return np.asarray(pattern.matrix(data) @ x)


sensitivity(pattern_matmul, 0)(lambda y, ybar, data, pattern, x:
                               _gather(ybar, x, pattern.rows, pattern.cols))  # fmt: skip
sensitivity(pattern_matmul, 2)(lambda y, ybar, data, pattern, x:
                               pattern_matmul(data, pattern.T, ybar))  # fmt: skip


@primitive
def pattern_solve(data: Any, pattern: Pattern, b: Any) -> Any:
    """``x`` with ``A x = b`` where ``A`` holds ``data`` on ``pattern`` (SciPy's
    ``spsolve``; a singular ``A`` warns and gives nan, as SciPy's)."""
    return np.asarray(_spla().spsolve(pattern.matrix(data).tocsc(), b))


@preprocess(pattern_solve)
def _(y, ybar, data, pattern, b):
    return pattern_solve(data, pattern.T, ybar)  # lam = A^-T ybar, shared by both rules


sensitivity(pattern_solve, 0)(lambda y, ybar, data, pattern, b, pre:
                              -_gather(pre, y, pattern.rows, pattern.cols))  # fmt: skip
sensitivity(pattern_solve, 2)(lambda y, ybar, data, pattern, b, pre: pre)


# -- the sparse array of differentiable values --------------------------------------------


def _canonical(pattern: Pattern, by_column: bool) -> tuple:
    """The CSR (or CSC) order of ``pattern``, duplicates summed: the new pattern and the
    0/1 matrix that maps the old values to the new."""
    sp = _sp()
    major, minor = (pattern.cols, pattern.rows) if by_column else (pattern.rows, pattern.cols)
    n_minor = pattern.shape[0] if by_column else pattern.shape[1]
    keys = major.astype(np.int64) * n_minor + minor
    unique, where = np.unique(keys, return_inverse=True)
    new_major, new_minor = np.divmod(unique, n_minor)
    rows, cols = (new_minor, new_major) if by_column else (new_major, new_minor)
    nnz = len(keys)
    gather = sp.csr_array((np.ones(nnz), (where.ravel(), np.arange(nnz))),
                          shape=(len(unique), nnz))  # fmt: skip
    return Pattern(rows, cols, pattern.shape), gather


class SparseArray:
    """A sparse matrix whose stored values (``.data``) may be nodes, on a fixed pattern:
    what ``tape.scipy.sparse.coo_array`` and friends give when their values are nodes.
    ``A @ x``, ``A.dot(x)``, ``x @ A`` (``x`` an array), ``A.T``, ``A.tocsr()``,
    ``A.tocsc()``, ``A.tocoo()``, ``A.multiply(x)``, ``A.sum()`` and
    ``tape.scipy.sparse.linalg.spsolve(A, b)`` are differentiable in the values."""

    __array_ufunc__ = None  # ndarray @ A hands over to A.__rmatmul__

    def __init__(self, data: Any, pattern: Pattern, format: str = "coo") -> None:
        self.data = data
        self.pattern = pattern
        self.format = format

    # -- what SciPy's sparse arrays have -------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self.pattern.shape

    ndim = 2

    @property
    def nnz(self) -> int:
        return len(self.pattern.rows)

    @property
    def dtype(self) -> Any:
        return np.result_type(value_of(self.data))

    @property
    def row(self) -> Any:
        return self.pattern.rows

    @property
    def col(self) -> Any:
        return self.pattern.cols

    @property
    def coords(self) -> tuple:
        return (self.pattern.rows, self.pattern.cols)

    @property
    def indices(self) -> Any:
        self._compressed("indices")
        return self.pattern.cols if self.format == "csr" else self.pattern.rows

    @property
    def indptr(self) -> Any:
        self._compressed("indptr")
        major, n = (self.pattern.rows, self.shape[0]) if self.format == "csr" else (
            self.pattern.cols, self.shape[1])  # fmt: skip
        return np.concatenate([[0], np.cumsum(np.bincount(major, minlength=n))])

    def _compressed(self, what: str) -> None:
        if self.format not in ("csr", "csc"):
            raise AttributeError(f"a {self.format} array has no {what}: use tocsr() or tocsc()")

    @property
    def T(self) -> SparseArray:
        flipped = {"csr": "csc", "csc": "csr"}.get(self.format, self.format)
        return SparseArray(self.data, self.pattern.T, flipped)

    def transpose(self) -> SparseArray:
        return self.T

    def tocoo(self) -> SparseArray:
        return SparseArray(self.data, self.pattern, "coo")

    def _convert(self, format: str) -> SparseArray:
        if self.format == format:
            return self
        pattern, gather = _canonical(self.pattern, by_column=format == "csc")
        return SparseArray(sparse_matmul(gather, self.data), pattern, format)

    def tocsr(self) -> SparseArray:
        return self._convert("csr")

    def tocsc(self) -> SparseArray:
        return self._convert("csc")

    def asformat(self, format: str) -> SparseArray:
        return {"coo": self.tocoo, "csr": self.tocsr, "csc": self.tocsc}[format]()

    def value(self) -> Any:
        """The SciPy sparse array of the plain values (a constant)."""
        sp = _sp()
        coo = sp.coo_array((value_of(self.data), (self.pattern.rows, self.pattern.cols)),
                           shape=self.shape)  # fmt: skip
        return coo if self.format == "coo" else coo.asformat(self.format)

    def toarray(self) -> Any:
        """The dense array, differentiable (for small matrices: it is ``A @ I``)."""
        eye = np.eye(self.shape[1], dtype=np.result_type(value_of(self.data), 0.0))
        return pattern_matmul(self.data, self.pattern, eye)

    todense = toarray

    def sum(self) -> Any:
        return np.sum(self.data)

    def multiply(self, other: Any) -> SparseArray:
        """The elementwise product with a scalar or a dense array (broadcast to the
        shape): sparse again, on the same pattern."""
        if np.ndim(other) == 0:
            return SparseArray(self.data * other, self.pattern, self.format)
        full = np.broadcast_to(other, self.shape) if np.shape(other) != self.shape else other
        return SparseArray(self.data * full[self.pattern.rows, self.pattern.cols], self.pattern,
                           self.format)  # fmt: skip

    __mul__ = __rmul__ = multiply

    def __neg__(self) -> SparseArray:
        return SparseArray(-self.data, self.pattern, self.format)

    def dot(self, x: Any) -> Any:
        return self @ x

    def __matmul__(self, x: Any) -> Any:
        if isinstance(x, SparseArray) or is_sparse(x):
            return NotImplemented
        if np.shape(x)[0] != self.shape[1]:
            raise ValueError(f"matmul: dimension mismatch: {self.shape} @ {np.shape(x)}")
        return pattern_matmul(self.data, self.pattern, x)

    def __rmatmul__(self, x: Any) -> Any:
        # x @ A = (A.T @ x.T).T
        return np.transpose(self.T @ np.transpose(x))

    def __repr__(self) -> str:
        return (f"<{self.format} SparseArray of shape {self.shape} with {self.nnz} "
                f"differentiable stored values>")  # fmt: skip


def from_scipy(S: Any, format: str) -> SparseArray:
    """SciPy's sparse ``S`` as a ``SparseArray`` of its values, in ``format``."""
    coo = S.tocoo()
    return SparseArray(coo.data, Pattern(coo.row, coo.col, coo.shape), "coo").asformat(format)


def _matmul(a: Any, b: Any) -> Any:
    # S @ x, and x @ S as (S' x')'
    if is_sparse(a):
        return sparse_matmul(a, b)
    return np.transpose(sparse_matmul(b.T, np.transpose(a)))


def _multiply(a: Any, b: Any) -> Any:
    # S * x: elementwise on the sparse operand's pattern for SciPy's sparse arrays, and a
    # matrix product for its *_matrix types, as for np.matrix
    S, x = (a, b) if is_sparse(a) else (b, a)
    if isinstance(S, _sp().spmatrix):
        return _matmul(a, b)
    return from_scipy(S, S.format if S.format in ("csr", "csc") else "coo").multiply(x)


# A node's operators meeting SciPy's sparse matrices (S @ x, x @ S, S * x): SciPy hands
# them over to the node (see sensitivities.counterparts.sparse_operator), which asks here
foreign_operands(is_sparse, {np.matmul: _matmul, np.multiply: _multiply})
