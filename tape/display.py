"""How values, records and tapes read in the REPL."""

from __future__ import annotations

import re

import numpy as np

_PREVIEW = dict(threshold=6, edgeitems=2, precision=4, separator=", ", max_line_width=10**6)


def dtype_name(value) -> str:
    """``float64`` for a float or ndarray, ``float64[3,4]`` with the shape of an array."""
    while _is_node(value):
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
    if _is_node(value):
        return f"<{type(value).__name__} of tape {value.tape.level} at [{value.pos}]>"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return str(value[()])
        return re.sub(r"\[ +", "[", " ".join(np.array2string(value, **_PREVIEW).split()))
    if isinstance(value, np.generic):
        return str(value)  # NumPy 2's repr would add np.float64(...) around it
    return repr(value)


def _is_node(value) -> bool:
    return hasattr(value, "tape") and hasattr(value, "pos")


def adjoints_text(adjoints: list) -> str:
    """A reverse tape's slots, one a line, as its ``repr`` shows them."""
    lines = [f"Reverse tape with {len(adjoints)} elements:"]
    for pos, adjoint in enumerate(adjoints):
        if adjoint is None:
            lines.append(f"  [{pos}]: unset")
        elif isinstance(adjoint, np.ndarray) and adjoint.ndim:
            lines.append(f"  [{pos}]: {dtype_name(adjoint)} {preview(adjoint)}")
        else:
            lines.append(f"  [{pos}]: {preview(adjoint)}")
    return "\n".join(lines)
