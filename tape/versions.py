"""Versions of a node written in place, and the views between nodes (``tape.inplace``).

The bookkeeping only: which record holds a node's current value (``Alias.latest``),
the copy that keeps a written node's old record on the tape (``keep_record``), and which
nodes are NumPy views of which (``note_view``). Recording the calls is
``tape.recording``'s business; this module records nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sensitivities import registry

__all__ = ["Alias", "Moved", "VERSION", "OUTDATED", "commit", "keep_record", "written", "note_view",
           "MEMORY", "memory_of"]  # fmt: skip

# Value types besides ndarray whose elements live in an ndarray that their views share, and
# which are written in place as NumPy writes (vmap's batches): type -> the function that
# gives that ndarray, or None for a value that is immutable (a batch of NumPy scalars).
MEMORY: dict = {}


def memory_of(value: Any) -> Any:
    """The ndarray that holds ``value``'s elements: ``value`` itself for an ndarray, None
    for a value that is not written in place (a float, a NumPy scalar, a Dask array)."""
    if type(value) is np.ndarray:
        return value
    of = MEMORY.get(type(value))
    return None if of is None else of(value)


def _is_node(a: Any) -> bool:
    return hasattr(type(a), "__record_call__") and hasattr(a, "tape")


class Alias:
    """What a node written in place, or with views, knows of its versions (``tape.inplace``).

    ``latest``: the record of the node's current value once it has been written (None
    before); the node keeps its identity and its position, which stay those of the value
    it first had, while later calls are recorded on ``latest``. ``views``: the positions
    on its tape of the nodes that are NumPy views of it (positions, not the nodes: a view
    refers to its base, and a reference back would make a cycle that outlives the tape).
    ``view_of``: for a view, ``(base,
    f, args, kwargs)``, its base node and the call that made it from the base.
    """

    __slots__ = ("latest", "views", "view_of")

    def __init__(self, view_of: tuple | None = None) -> None:
        self.latest = None
        self.views: list = []
        self.view_of = view_of


class Moved:
    """The ``alias`` of the copy that stands at a written node's position: the node. The
    copy itself is a record of the old value, never written and no base of views."""

    __slots__ = ("node",)
    latest = view_of = None

    def __init__(self, node: Any) -> None:
        self.node = node


# The alias of the records that hold a written node's versions: never written themselves,
# never the base of a view (a view is registered on the node the user holds).
VERSION = Alias()
# ``alias.latest`` of a view whose base was written: its value is already the new one, and
# its record is made again from the base's latest version when it is next used.
OUTDATED = Alias()


def commit(x: Any, new: Any) -> None:
    """Make record ``new`` the latest version of node ``x``, which takes its value. The
    first time, ``x``'s record on the tape is replaced by a copy of itself, which the
    records made before still reach by position: the reverse pass sees the old value."""
    alias = x.alias
    if alias is None:
        alias = x.alias = Alias()
    keep_record(x)
    new.alias = VERSION
    x.value = new.value
    alias.latest = new


def keep_record(x: Any) -> None:
    """Before ``x`` first takes another value: its place on the tape to a copy of it (the
    same class, the same slots, no alias)."""
    records = x.tape.records
    if records[x.pos] is x:
        old = object.__new__(type(x))
        for cls in type(x).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if name != "__weakref__" and hasattr(x, name):
                    setattr(old, name, getattr(x, name))
        old.alias = Moved(x)  # a view's base finds the node through its position
        records[x.pos] = old


def written(args: Any) -> bool:
    """Whether ``args`` (or a list or tuple there) holds a node written in place."""
    for a in args:
        if _is_node(a):
            if a.alias is not None and a.alias.latest is not None:
                return True
        elif (type(a) is list or type(a) is tuple) and written(a):
            return True
    return False


def _owner(a: Any) -> Any:
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def note_view(record: Any, args: tuple) -> Any:
    """Register ``record`` as a view of the node among ``args`` (at its node positions)
    whose value it shares memory with, as NumPy would: a write to either side is then
    seen by the other (``tape.inplace``). Returns ``record``."""
    value = memory_of(registry.value_of(record.value))
    if value is None or value.base is None:
        return record
    owner = _owner(value)
    for i in record.node_args:
        a = args[i]
        if not _is_node(a) or a.alias is VERSION or type(a.alias) is Moved:
            continue
        held = memory_of(registry.value_of(a.value))
        if held is not None and _owner(held) is owner and np.may_share_memory(value, held):
            if a.alias is None:
                a.alias = Alias()
            a.alias.views.append(record.pos)
            record.alias = Alias((a, record.f, args, record.kwargs))
            return record
    return record
