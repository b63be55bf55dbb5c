"""Mutation checks: the reverse pass never reads an array that changed after it was recorded.

NumPy arrays have no version counter. Arrays the tape computes are made read-only when
recorded; each array it was handed (a Leaf's input, an ndarray constant among a Branch's
arguments) is fingerprinted when recorded and checked when the reverse pass reaches the
record. Scalars are immutable and cost nothing. Small arrays keep a private copy of their
bytes (exact); larger ones keep the wrap-around sum of their bits (catches any single
change exactly) and a sum of their values weighted by position (catches rearrangements
and sign flips): two passes over memory, about 0.5 ms for 8 MB.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import MutationError, describe

__all__ = ["fingerprint", "sealed", "verify"]

_SMALL = 128 * 1024  # bytes: up to this size a copy (memcpy) is cheaper than the checksum


def fingerprint(a: np.ndarray) -> Any:
    """A value that changes when ``a``'s contents change in place.

    >>> import numpy as np
    >>> from tape.mutation import fingerprint
    >>> a = np.arange(1000.0)
    >>> before = fingerprint(a)
    >>> a[[1, 2]] = a[[2, 1]]
    >>> fingerprint(a) == before
    False
    """
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
    # A sum weighted by position, as rows of _WIDTH elements: einsum, not BLAS, whose
    # threads make a product erratic on a busy machine.
    rows, rest = divmod(flat.size, _WIDTH)
    per_row = np.einsum("ij,j->i", flat[: rows * _WIDTH].reshape(rows, _WIDTH), _COLUMN_WEIGHTS)
    row_weights = 1.0 + (np.arange(rows + 1) * 0.41421356237309515) % 1.0
    weighted = np.einsum("i,i->", per_row, row_weights[:rows]) + row_weights[rows] * np.einsum(
        "i,i->", flat[rows * _WIDTH :], _COLUMN_WEIGHTS[:rest]
    )
    return total, weighted.tobytes()


_WIDTH = 4096
# distinct weights in [1, 2) (a Weyl sequence): any swap of two different values changes the sum
_COLUMN_WEIGHTS = 1.0 + (np.arange(_WIDTH) * 0.6180339887498949) % 1.0


def sealed(seal: list | None, key: Any, a: np.ndarray) -> list:
    """``seal`` (a record's list of fingerprints, or None) with ``a``'s added under ``key``:
    -1 for the record's own value, an argument's position, a keyword, or ``(i, j)`` for
    element ``j`` of a list argument ``i``."""
    entry = (key, a, fingerprint(a))
    if seal is None:
        return [entry]
    seal.append(entry)
    return seal


def verify(node: Any) -> None:
    """Raise ``MutationError`` if an array ``node`` recorded has changed since."""
    for key, a, print_ in node.seal:
        if fingerprint(a) != print_:
            raise MutationError(_message(node, key))


def _message(node: Any, key: Any) -> str:
    if key == -1:
        what = "the value of" if hasattr(node, "f") else "the input held by"
    elif isinstance(key, str):
        what = f"keyword argument {key!r} of"
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
