"""``at``: functional index updates, the differentiable form of ``x[i] = v``.

``at(x)[index].set(v)`` returns a copy of ``x`` with ``x[index]`` replaced by ``v``;
``.add(v)`` and ``.multiply(v)`` add into and scale those elements. ``x`` is never
written, so the update is recorded like any other call and differentiable with respect
to both ``x`` and ``v``; on plain arrays it is plain NumPy. ``index`` is anything NumPy
indexing takes: integers, slices, boolean masks, integer arrays, ``None``, ``...``.

Repeated indices behave as a loop over them would: ``.add`` accumulates every
occurrence, ``.multiply`` multiplies by all of them, and ``.set`` keeps the last.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .registry import primitive, sensitivity

__all__ = ["at"]


def at(x: Any) -> _At:
    """The functional update of ``x``: ``at(x)[index].set(v)``, ``.add(v)``, ``.multiply(v)``.

    >>> import numpy as np
    >>> from tape import at, grad
    >>> x = np.zeros(4)
    >>> at(x)[1:3].set(5.0)
    array([0., 5., 5., 0.])
    >>> at(x)[[0, 0, 2]].add(1.0)  # repeated indices accumulate
    array([2., 0., 1., 0.])
    >>> x  # never written
    array([0., 0., 0., 0.])
    >>> grad(lambda x, v: np.sum(at(x)[1].set(v) ** 2))(np.ones(3), 3.0)
    (array([2., 0., 2.]), 6.0)
    """
    return _At(x)


class _At:
    __slots__ = ("x",)

    def __init__(self, x: Any) -> None:
        self.x = x

    def __getitem__(self, index: Any) -> _Update:
        return _Update(self.x, index)

    def __repr__(self) -> str:
        return f"at({self.x!r})"


class _Update:
    """``x`` and an index, waiting for ``.set``, ``.add`` or ``.multiply``."""

    __slots__ = ("x", "index")

    def __init__(self, x: Any, index: Any) -> None:
        self.x = x
        self.index = _plain_index(index)

    def set(self, v: Any) -> Any:
        """A copy of ``x`` with ``x[index] = v``; with repeated indices, the last wins."""
        return _in_rounds(set_at, self.x, self.index, _written(v))

    def add(self, v: Any) -> Any:
        """A copy of ``x`` with ``v`` added at ``index``; repeated indices accumulate."""
        return add_at(self.x, self.index, _written(v))

    def multiply(self, v: Any) -> Any:
        """A copy of ``x`` with ``x[index]`` multiplied by ``v``; repeated indices multiply."""
        return _in_rounds(multiply_at, self.x, self.index, _written(v))


def _plain_index(index: Any) -> Any:
    if hasattr(index, "tape") and hasattr(index, "pos"):
        raise TypeError("an index cannot be a node: index with integers, slices or masks")
    if isinstance(index, list):
        return _list_index(index)
    if isinstance(index, tuple):
        return tuple(_list_index(i) if isinstance(i, list) else i for i in index)
    return index


def _list_index(index: list) -> np.ndarray:
    """A list index as NumPy reads it: ``[]`` selects nothing (an empty integer array)."""
    index = np.asarray(index)
    return index.astype(np.intp) if index.size == 0 else index


def _written(v: Any) -> Any:
    """``v`` as NumPy reads a value to write: a list or tuple, nested or not, becomes one
    array, stacked so that the nodes among its elements stay on the tape."""
    if type(v) is not list and type(v) is not tuple:
        return v
    if not v:
        return np.asarray(v)
    return np.stack([_written(element) for element in v])


def _may_repeat(index: Any) -> bool:
    """Whether ``index`` may select an element twice: only integer arrays can."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, np.ndarray) and p.dtype.kind in "iu" and p.size > 1 for p in parts)


def _in_rounds(update: Any, x: Any, index: Any, v: Any) -> Any:
    """``update`` with ``index``, split into rounds that each select an element once.

    Round r takes the r-th occurrence of every repeated element, in order, so a chain of
    rounds is exactly the loop ``for each occurrence: x[i] = v`` (or ``*=``), and each
    round is a plain update whose rules need no care for repeats.
    """
    if not _may_repeat(index):
        return update(x, index, v)
    shape = np.shape(x)
    where = np.arange(int(np.prod(shape))).reshape(shape)[index]  # flat positions chosen
    flat = where.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    first = np.r_[0, np.flatnonzero(np.diff(ranked)) + 1]
    starts = np.repeat(first, np.diff(np.r_[first, flat.size]))
    rank = np.empty_like(flat)
    rank[order] = np.arange(flat.size) - starts
    if rank.max(initial=0) == 0:
        return update(x, index, v)
    if np.ndim(v):
        v = np.broadcast_to(v, where.shape)
    for r in range(int(rank.max()) + 1):
        chosen = np.flatnonzero(rank == r)
        part = np.unravel_index(chosen, where.shape)
        x = update(x, np.unravel_index(flat[chosen], shape), v[part] if np.ndim(v) else v)
    return x


def _copy(x: Any, v: Any) -> np.ndarray:
    dtype = np.result_type(x, v)
    if not isinstance(x, np.ndarray) and hasattr(x, "astype") and hasattr(x, "__array_function__"):
        return x.astype(dtype, copy=True)  # an array of another library, or a batched one
    return np.array(x, dtype=dtype, copy=True)


@primitive
def set_at(x, index, v):
    """A copy of ``x`` with ``x[index] = v``, ``index`` selecting each element once."""
    out = _copy(x, v)
    out[index] = v
    return out


@primitive
def add_at(x, index, v):
    """A copy of ``x`` with ``v`` added at ``index``; repeated indices accumulate."""
    out = _copy(x, v)
    if _may_repeat(index):
        np.add.at(out, index, v)
    else:
        out[index] += v
    return out


@primitive
def multiply_at(x, index, v):
    """A copy of ``x`` with ``x[index] *= v``, ``index`` selecting each element once."""
    out = _copy(x, v)
    out[index] *= v
    return out


def _gather(ybar: Any, index: Any) -> Any:
    """``ybar[index]``, also where the adjoint of a 0-d array is a Python number."""
    if isinstance(ybar, (int, float, complex)):
        ybar = np.asarray(ybar)
    return ybar[index]


# The adjoints are the same updates and gathers again, so they differentiate in turn.
sensitivity(set_at, 0)(lambda y, ybar, x, index, v: set_at(ybar, index, 0.0))
sensitivity(set_at, 2)(lambda y, ybar, x, index, v: _gather(ybar, index))
sensitivity(add_at, 0)(lambda y, ybar, x, index, v: ybar)
sensitivity(add_at, 2)(lambda y, ybar, x, index, v: _gather(ybar, index))
sensitivity(multiply_at, 0)(lambda y, ybar, x, index, v: multiply_at(ybar, index, v))
sensitivity(multiply_at, 2)(lambda y, ybar, x, index, v: _gather(ybar, index) * x[index])
