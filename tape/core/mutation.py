"""Mutation checks: the reverse pass never reads an array that changed after it was recorded.

NumPy arrays have no version counter. Arrays the tape computes are made read-only when
recorded; each array it was handed (a Leaf's input, an ndarray constant among a Branch's
arguments, of any ndarray subclass: ``np.memmap``, a user's own) is fingerprinted when
recorded and checked when the reverse pass reaches the record. Scalars are immutable and
cost nothing. Small arrays keep a private copy of their bytes (exact); larger ones keep
the wrap-around sum of their bits (catches any single change exactly) and a sum of their
values weighted by position (catches rearrangements and sign flips): two passes over
memory, about 0.3 ms for 8 MB.

A program that reads the same constant at every step (a simulation's stencil indices)
pays for it once where it can: records that find an array as the previous record of
the tape did share that fingerprint (one copy of its bytes kept, not one per record), and
one reverse pass fingerprints each array once, however many records it checks. A
read-only array is fingerprinted all the same: an array frozen after a writeable view
or a ``memoryview`` of it was taken still changes through those.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import MutationError, describe, subclass_constant

__all__ = ["fingerprint", "sealed", "sealed_subclass", "verify"]

_SMALL = 128 * 1024  # bytes: up to this size a copy (memcpy) is cheaper than the checksum


def fingerprint(a: np.ndarray) -> Any:
    """A value that changes when ``a``'s contents change in place.

    >>> import numpy as np
    >>> from tape.core.mutation import fingerprint
    >>> a = np.arange(1000.0)
    >>> before = fingerprint(a)
    >>> a[[1, 2]] = a[[2, 1]]
    >>> fingerprint(a) == before
    False
    """
    if type(a) is not np.ndarray:
        a = a.view(np.ndarray)  # a subclass's data, without its own reshape or tobytes
    if a.nbytes <= _SMALL or a.dtype.kind not in "biufc":
        return a.tobytes()
    flat = np.ascontiguousarray(a).reshape(-1)
    bits = flat.view(np.uint64) if flat.nbytes % 8 == 0 else flat.view(np.uint8)
    total = int(np.add.reduce(bits, dtype=np.uint64))
    kind = flat.dtype.kind
    if kind == "c":
        flat = flat.view(f"f{flat.dtype.itemsize // 2}")
    elif kind != "f":
        flat = flat.astype(np.float64)
    # A sum weighted by position, as rows of _WIDTH elements: a dot product per row
    # (NumPy's vecdot, a vector of 4096 at a time: no BLAS matrix product, whose threads
    # make a product erratic on a busy machine), twice as fast as einsum's: 1.5 ms less of
    # the 1000² matmul chain's 180 (python benchmarks/run.py --workloads matmul).
    rows, rest = divmod(flat.size, _WIDTH)
    per_row = _per_row(flat[: rows * _WIDTH].reshape(rows, _WIDTH), _COLUMN_WEIGHTS)
    row_weights = 1.0 + (np.arange(rows + 1) * 0.41421356237309515) % 1.0
    weighted = np.einsum("i,i->", per_row, row_weights[:rows]) + row_weights[rows] * np.einsum(
        "i,i->", flat[rows * _WIDTH :], _COLUMN_WEIGHTS[:rest]
    )
    return total, weighted.tobytes()


_WIDTH = 4096
_per_row = getattr(np, "vecdot", None) or (lambda rows, w: np.einsum("ij,j->i", rows, w))
# distinct weights in [1, 2) (a Weyl sequence): any swap of two different values changes the sum
_COLUMN_WEIGHTS = 1.0 + (np.arange(_WIDTH) * 0.6180339887498949) % 1.0


def sealed(seal: list | None, key: Any, a: np.ndarray, tape: Any) -> list:
    """``seal`` (a record's list of fingerprints, or None) with ``a``'s added under ``key``:
    -1 for the record's own value, an argument's position, a keyword, or ``(i, j)`` for
    element ``j`` of a list argument ``i``. ``tape``, the record's, keeps the last
    fingerprint of each array it sealed, which the next record that finds the array
    unchanged shares."""
    prints = tape.prints
    last = prints.get(id(a))  # (an id that another array had: the comparison tells)
    print_ = fingerprint(a) if last is None else _fingerprint_against(a, last)
    if print_ is not last:
        prints[id(a)] = print_
    entry = (key, a, print_)
    if seal is None:
        return [entry]
    seal.append(entry)
    return seal


def _fingerprint_against(a: np.ndarray, last: Any) -> Any:
    """``fingerprint(a)``, which is ``last`` itself where it is equal: for a small array
    whose bytes are those of ``last``, found without copying them (a fresh copy costs
    the page faults of new memory, ten times the comparison)."""
    if (
        type(last) is bytes
        and type(a) is np.ndarray
        and a.nbytes == len(last)
        and a.nbytes % 8 == 0
        and a.dtype.kind in "biufc"
        and a.flags.c_contiguous
    ):
        bits = (a if a.ndim == 1 else a.reshape(-1)).view(np.uint64)
        if (bits == np.frombuffer(last, np.uint64)).all():
            return last
        return fingerprint(a)
    print_ = fingerprint(a)
    return last if print_ == last else print_


def sealed_subclass(seal: list | None, key: Any, a: np.ndarray, f: Any, tape: Any) -> list:
    """``sealed`` for an instance of an ndarray subclass among the arguments of ``f``:
    one that keeps ndarray's meaning (``np.memmap``, most of users' own) is sealed as an
    ndarray is; ``np.matrix`` and masked arrays, whose operators and reductions mean
    something else, are refused with a TypeError that says what to pass instead."""
    if isinstance(a, np.matrix) or isinstance(a, np.ma.MaskedArray):
        raise TypeError(subclass_constant(f, a))
    return sealed(seal, key, a, tape)


def verify(node: Any, now: dict | None = None) -> None:
    """Raise ``MutationError`` if an array ``node`` recorded has changed since. ``now``,
    kept by the caller over one reverse pass, holds the fingerprints taken during it, by
    the id of the array (each alive in a record's seal meanwhile): one per array."""
    for key, a, print_ in node.seal:
        if now is None:
            current = fingerprint(a)
        else:
            current = now.get(id(a))
            if current is None:
                current = now[id(a)] = fingerprint(a)
        if current != print_:
            raise MutationError(_message(node, key))


def _message(node: Any, key: Any) -> str:
    if key == -1:
        what = "the value of" if hasattr(node, "f") else "the input held by"
    elif isinstance(key, str):
        what = f"keyword argument {key!r} of"
    elif isinstance(key, tuple) and isinstance(key[0], str):
        what = f"element {key[1]} of keyword argument {key[0]!r} of"
    elif isinstance(key, tuple):
        what = f"element {key[1]} of argument {key[0]} of"
    else:
        what = f"argument {key} of"
    return (
        f"{what} {describe(node)} was changed in place after it was recorded\n"
        "The reverse pass needs it as it was, and would return a wrong gradient. Do not "
        "write into an array (a[i] = ..., +=, out=, sort()) between using it and taking "
        "the gradient: make a copy first (a = a.copy()), or update functionally with "
        "tape.at(a)[i].set(v)."
    )
