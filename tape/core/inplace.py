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

Views: a node whose value shares memory with another node's, whatever made it (basic
indexing, ``reshape``, ``np.split``, ``np.atleast_2d``, ``sliding_window_view``...), was
registered as a view when recorded (``versions.note_view``), on its *root*: the node that
is no view, never an intermediate view. A function that hands back its argument's own
array (``np.squeeze(a) is a`` where there is nothing to squeeze) makes a view of all of it.

- A write to a view is a write to its root, at the flat positions the view covers
  (``versions.positions``: from the view's offset and strides in the root's memory, or
  the calls that made it repeated once on ``np.arange`` down the chain, and kept).
- A write to a root counts a new version of it (``alias.version``) and touches no view:
  a view takes its value from the root's current one when next read (its ``value`` is a
  property, for views only), the same memory at the same offset and strides, and is
  recorded again, from the root's latest version at its positions, only when next used.
  A write costs one update of the root whatever the number of views and the depth of
  the view written.

A write of a value that carries no gradient (``x //= c``, whose floor has a zero
derivative) is recorded as ``at(x)[...].set(value)``: the old value gets no gradient.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from sensitivities import astype, at, set_at
from sensitivities.registry import value_of

from .duck_arrays import is_duck_array
from .recording import Record, apply
from .versions import MEMORY, commit, memory_of, positions

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
    if alias is None or alias.root is None:
        return
    mapped = positions(x)
    if type(mapped) is str:
        raise TypeError(
            f"cannot write into {x!r} in place: it is a view of {alias.root!r} {mapped}; "
            "compute the new base with tape.at(base)[index].set(v) instead"
        )
    if not mapped.flags.writeable:
        raise ValueError(read_only)  # as NumPy says it


def _cast(new: Any, value: np.ndarray) -> Any:
    """``new`` in the dtype of ``value``, which an in-place update keeps."""
    if value_of(new).dtype != value.dtype:
        new = apply(astype, (new, value.dtype))
    return new


def _write(x: Any, new: Any) -> None:
    """Make ``new`` (a record, or a plain value that carries no gradient) the value of
    node ``x``: through its root for a view, at the positions the view covers."""
    if not isinstance(new, Record):
        new = at(x)[...].set(new)  # a constant (x //= c): the old value gets no gradient
    if new.tape is not x.tape:
        raise TypeError(
            f"cannot write into {x!r} in place: the new value belongs to an inner "
            "derivative's tape (a node of an inner grad written into a node of an outer "
            "one); write y = x + v (or tape.at(x)[i].set(v)) and use y instead"
        )
    alias = x.alias
    if alias is not None and alias.root is not None:
        root = alias.root
        shape = np.shape(value_of(root))
        if shape == ():  # a view of a 0-d root holds its one element: write the whole root
            new, index = apply(np.reshape, (new, ())), ()
        else:
            index = np.unravel_index(positions(x), shape)
        # the positions of a view that can be written select each element once: no
        # rounds for repeated indices to look for
        new, x = _cast(set_at(root, index, new), value_of(root)), root
    commit(x, new)  # its views take their values from the new one when next read
