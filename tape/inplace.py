"""In-place updates of nodes, with NumPy's meaning: ``x += v``, ``x[i] = v``, and views.

A node is both the user's handle and a record that later records name in their
``args``, so a write cannot replace it: the node keeps its identity and its position,
and takes a new value. The write is computed functionally, by recorded calls
(``np.add(x, v)``, ``at(x)[i].set(v)``), and then committed:

- the first time a node is written, its record on the tape is replaced by a copy of
  itself (same value, same call), which the records made before the write still reach
  by position: the reverse pass sees the old value there;
- the node takes the new value, so every Python name bound to it sees it, and its
  ``alias.latest`` becomes the record of the new value, on which later calls are
  recorded (``recording.apply`` swaps it in; ``recording.current`` is the one way).

The node's position stays that of the value it first had: ``rt[x]`` and ``grad``'s
input gradients are the adjoints of the values passed in, and the user's arrays are
never written.

Views: a node whose value is a NumPy view of another node's value was registered as its
view when recorded (``recording._note_view``). A write to a view is a write to its base,
at the positions the view covers (found by making the view of ``np.arange`` in place of
the base's value); every live view of a written base is then recorded again from the
base's new value, so that both sides see every write, as in NumPy: at once for the value,
and for the record when the view is next used (a view the program never uses again
costs one NumPy call per write).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from sensitivities import astype, at
from sensitivities.registry import function_name, value_of

from .duck_arrays import is_duck_array
from .recording import Record, apply
from .versions import MEMORY, OUTDATED, Moved, commit, keep_record, memory_of

__all__ = ["augmented", "set_item"]


def augmented(x: Any, f: Callable, v: Any) -> Any:
    """``x op= v`` on node ``x`` (``f`` the ufunc of ``op``): ``x`` itself, written, or
    NotImplemented where NumPy would rebind the name (a scalar value, as Python floats
    and NumPy scalars are immutable; a Dask or CuPy array)."""
    value = value_of(x)
    if memory_of(value) is None:
        return NotImplemented
    _check_view(x, "output array is read-only")
    probe = value.copy()  # NumPy's own errors for shape and casting, from NumPy
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(probe, value_of(v), out=probe)
    _write(x, _cast(apply(f, (x, v)), value))
    return x


def set_item(x: Any, index: Any, v: Any) -> None:
    """``x[index] = v`` on node ``x``."""
    value = value_of(x)
    if memory_of(value) is None:
        if is_duck_array(value) and type(value) not in MEMORY:
            raise TypeError(
                f"x[i] = v on a node holding a {type(value).__module__}.{type(value).__name__} "
                "cannot be recorded; write x = tape.at(x)[i].set(v) instead"
            )
        kind = value.dtype.type if type(value) in MEMORY else type(value)  # a batch: its scalars'
        raise TypeError(f"'{kind.__name__}' object does not support item assignment")
    _check_view(x, "assignment destination is read-only")
    probe = value.copy()
    probe[index] = value_of(v)  # NumPy's own errors: shape, casting, bounds
    _write(x, _cast(at(x)[index].set(v), value))


def _check_view(x: Any, read_only: str) -> None:
    """For a view, NumPy's error where it is read-only, and tape's where it cannot
    follow it; nothing for a node that is no view."""
    alias = x.alias
    if alias is not None and alias.view_of is not None:
        _positions(x, read_only)


def _cast(new: Any, value: np.ndarray) -> Any:
    """``new`` in the dtype of ``value``, which an in-place update keeps."""
    if value_of(new).dtype != value.dtype:
        new = apply(astype, (new, value.dtype))
    return new


def _write(x: Any, new: Any) -> None:
    """Make ``new`` (a record) the value of node ``x``: through its base for a view."""
    if not (isinstance(new, Record) and new.tape is x.tape):
        raise TypeError(
            f"cannot write into {x!r} in place: the new value belongs to an inner "
            "derivative's tape (a node of an inner grad written into a node of an outer "
            "one); write y = x + v (or tape.at(x)[i].set(v)) and use y instead"
        )
    alias = x.alias
    if alias is not None and alias.view_of is not None:
        base = alias.view_of[0]
        shape = np.shape(value_of(base))
        index = np.unravel_index(_positions(x), shape)
        _write(base, _cast(at(base)[index].set(new), value_of(base)))
        return
    commit(x, new)
    _refresh(x)


def _positions(view: Any, read_only: str = "assignment destination is read-only") -> np.ndarray:
    """The flat positions in its base of each element of ``view``."""
    base, f, args, kwargs = view.alias.view_of
    held, seen = value_of(base), value_of(view)
    ids = np.arange(held.size).reshape(held.shape)
    try:
        mapped = f(*(ids if a is base else value_of(a) for a in args), **kwargs)
    except Exception:
        mapped = None
    if (
        type(mapped) is not np.ndarray
        or mapped.shape != seen.shape
        or held.dtype != seen.dtype
        or not np.shares_memory(mapped, ids)
    ):
        raise TypeError(
            f"cannot write into {view!r} in place: it is a view of {base!r} made by "
            f"{function_name(f)}, whose elements tape cannot map onto the base's (a view "
            "of another dtype, such as .real or .imag of a complex array, or a view made "
            "by a function it cannot repeat); compute the new base with tape.at(base)"
            "[index].set(v) instead"
        )
    if not mapped.flags.writeable:
        raise ValueError(read_only)  # as NumPy says it
    return mapped


def _refresh(base: Any) -> None:
    """Give every live view of ``base`` (and theirs) its value from the base's new one, at
    NumPy's cost (no record); each is recorded again only when next used (``OUTDATED``)."""
    records = base.tape.records
    for pos in dict.fromkeys(base.alias.views):  # once each
        if pos >= len(records):
            continue
        view = records[pos]
        if type(view.alias) is Moved:
            view = view.alias.node
        alias = view.alias
        if alias is None or alias.view_of is None or alias.view_of[0] is not base:
            continue  # a position that a failed call gave back, now another record's
        _, f, args, kwargs = alias.view_of
        if alias.latest is None:
            keep_record(view)
        vals = [a.value if isinstance(a, Record) and a.tape is view.tape else a for a in args]
        view.value = f(*vals, **kwargs) if kwargs else f(*vals)
        alias.latest = OUTDATED
        if alias.views:
            _refresh(view)
