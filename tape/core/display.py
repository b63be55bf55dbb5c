"""How values, records and tapes read in the REPL."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from sensitivities.registry import is_node

_PREVIEW = dict(threshold=6, edgeitems=2, precision=4, separator=", ", max_line_width=10**6)


def dtype_name(value) -> str:
    """``float64`` for a float or ndarray, ``float64[3,4]`` with the shape of an array."""
    while is_node(value):
        value = value.value
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.result_type(value)
    shape = getattr(value, "shape", ())
    if isinstance(value, np.ndarray):
        return f"{dtype}[{','.join(map(str, shape))}]"
    return str(dtype)


def preview(value) -> str:
    """The value itself for a scalar, a one-line preview for an array."""
    if is_node(value):
        return f"<{type(value).__name__} of tape {value.tape.level} at [{value.pos}]>"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return str(value[()])
        return re.sub(r"\[ +", "[", " ".join(np.array2string(value, **_PREVIEW).split()))
    if isinstance(value, np.generic):
        return str(value)  # NumPy 2's repr would add np.float64(...) around it
    return repr(value)


# A tape longer than SUMMARY_THRESHOLD records shows its first and last EDGE_ITEMS, as
# NumPy summarises a large array; ``.text(full=True)`` lists every record.
SUMMARY_THRESHOLD = 40
EDGE_ITEMS = 10


def listing(what: str, entries: list, line: Any, full: bool, name: str) -> str:
    """``what`` with its count, then ``line(pos, entry)`` for each entry, or for the
    first and last ``EDGE_ITEMS`` of a long list, with ``...`` between."""
    count = len(entries)
    if full or count <= SUMMARY_THRESHOLD:
        head = f"{what} with {count} elements" + (":" if entries else "")
        return "\n".join([head] + [line(pos, e) for pos, e in enumerate(entries)])
    tail = range(count - EDGE_ITEMS, count)
    return "\n".join(
        [f"{what} with {count} elements (the first and last {EDGE_ITEMS}; "
         f"{name}.text(full=True) lists them all):"]
        + [line(pos, entries[pos]) for pos in range(EDGE_ITEMS)]
        + ["  ..."]
        + [line(pos, entries[pos]) for pos in tail]
    )  # fmt: skip


def adjoints_text(adjoints: list, full: bool = False) -> str:
    """A reverse tape's slots, one a line, as its ``repr`` shows them."""
    return listing("Reverse tape", adjoints, _adjoint_line, full, "rtape")


def _adjoint_line(pos: int, adjoint: Any) -> str:
    if adjoint is None:
        return f"  [{pos}]: unset"
    if isinstance(adjoint, np.ndarray) and adjoint.ndim:
        return f"  [{pos}]: {dtype_name(adjoint)} {preview(adjoint)}"
    return f"  [{pos}]: {preview(adjoint)}"


def tape_text(records: list, full: bool = False) -> str:
    """A tape's records, one a line, as its ``repr`` shows them."""
    return listing("Tape", records, lambda pos, node: f"  [{pos}]: {node!r}", full, "tape")
