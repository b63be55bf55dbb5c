"""Versions of a node written in place, and the views between nodes (``tape.core.inplace``).

The bookkeeping only: which record holds a node's current value (``Alias.latest``),
the copy that keeps a written node's old record on the tape (``keep_record``), and which
nodes are NumPy views of which (``note_view``), with the positions each view covers in
the memory it shares (``positions``). Recording the calls is ``tape.core.recording``'s
business; this module records nothing.

One mechanism for views and versions: memory shared between nodes belongs to a *root*,
a node that is no view; every view, a view of a view included, names that root directly
and is registered on it once, in the order views were made. A write is a write to a
root; it gives the root a new version and touches none of its views: each takes its
value from the root's current one when read, at its offset and strides in the root's
memory (``_lazy_class``), never a recursion. A version record carries ``VERSION``, a
marker with nothing to assign into: nothing shared between programs is ever written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sensitivities import registry

__all__ = [
    "Alias", "Moved", "VERSION", "OUTDATED", "commit", "keep_record", "stale", "written",
    "note_view", "positions", "MEMORY", "memory_of",
]  # fmt: skip

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


class Alias:
    """What a node written in place, or sharing memory with other nodes, knows of it.

    ``latest``: the record of the node's current value once it has been written (None
    before; ``OUTDATED`` for a view whose root was written since it was last recorded);
    the node keeps its identity and its position, which stay those of the value it first
    had, while later calls are recorded on ``latest``. For a root: ``views``, the
    positions on its tape of every view of it (views of views too) in the order they
    were made (positions, not the nodes: a view refers to its root, and a reference back
    would make a cycle that outlives the tape). For a view: ``root``, the node whose
    memory it shares (never a view itself); ``made``, ``(parent, f, args, kwargs)``, the
    call that made it from the node it was made from; ``mapped``, once needed, the flat
    position in the root's value of each of its elements (an int array, read-only where
    NumPy's view is) or, where tape cannot map them, a sentence saying why; for a root,
    its own positions, ``np.arange`` in its shape, once a view needed them.
    """

    __slots__ = ("latest", "views", "root", "made", "mapped", "version", "layout")

    def __init__(self, root: Any = None, made: tuple | None = None) -> None:
        self.latest = None
        self.views: list = []
        self.root = root
        self.made = made
        self.mapped = None
        # a root's: the writes so far; a view's: the root's count its value reflects
        self.version = 0
        # a root's: its value's strides; a view's: (byte offset in the root's memory,
        # shape, strides, dtype, writeable), which give its value from the root's
        self.layout = None


class _Version:
    """The ``alias`` of a record that holds a written node's version: never written
    itself, never the base of a view. Immutable: it has nothing to assign into."""

    __slots__ = ()
    latest = root = made = mapped = None
    views = ()

    def __repr__(self) -> str:
        return "VERSION"


class _Outdated:
    """``alias.latest`` of a view whose root was written: its value is already the new
    one; its record is made again from the root's latest version when it is next used."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OUTDATED"


VERSION = _Version()
OUTDATED = _Outdated()


class Moved:
    """The ``alias`` of the copy that stands at a written node's position: the node. The
    copy itself is a record of the old value, never written and no base of views."""

    __slots__ = ("node",)
    latest = root = made = mapped = None
    views = ()

    def __init__(self, node: Any) -> None:
        self.node = node


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
    if alias.root is None:
        alias.version += 1  # its views take their values from the new one when read


def keep_record(x: Any) -> None:
    """Before ``x`` first takes another value: its place on the tape to a copy of it (the
    same class, the same slots, no alias)."""
    records = x.tape.records
    if records[x.pos] is x:
        old = object.__new__(_plain.get(type(x), type(x)))
        for cls in type(x).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if name != "__weakref__" and hasattr(x, name):
                    setattr(old, name, getattr(x, name))
        old.alias = Moved(x)  # a root finds the view through its position
        records[x.pos] = old


def stale(alias: Any) -> bool:
    """Whether a node with ``alias`` was written, or is a view whose root was since."""
    return alias.latest is not None or (
        alias.root is not None and alias.version != alias.root.alias.version
    )


def written(args: Any) -> bool:
    """Whether ``args`` (or a list or tuple there) holds a node written in place."""
    for a in args:
        if registry.is_node(a):
            if a.alias is not None and stale(a.alias):
                return True
        elif (type(a) is list or type(a) is tuple) and written(a):
            return True
    return False


def _owner(a: Any) -> Any:
    # np.lib.stride_tricks makes its views through an object that keeps the base as .base
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def note_view(record: Any, args: tuple) -> Any:
    """Register ``record`` as a view of the node among ``args`` (at its node positions)
    whose value it shares memory with, as NumPy would: a write to either side is then
    seen by the other (``tape.core.inplace``). It is registered on that node's root, once.
    Returns ``record``."""
    value = memory_of(registry.value_of(record.value))
    if value is None:
        return record
    owner = _owner(value)
    for i in record.node_args:
        a = args[i]
        if not record.tape.owns(a):
            continue
        alias = a.alias
        if alias is not None and type(alias) is not Alias:
            continue  # a version, or the copy of a written node: no base of views
        held = memory_of(registry.value_of(a.value))
        if held is value or (
            held is not None and _owner(held) is owner and np.may_share_memory(value, held)
        ):
            if alias is None:
                root = a
                alias = a.alias = Alias()
            elif alias.root is None:
                root = a
            else:
                root = alias.root
                alias = root.alias
            alias.views.append(record.pos)
            view = record.alias = Alias(root, (a, record.f, args, record.kwargs))
            root_value = registry.value_of(root.value)
            if type(root_value) is np.ndarray and type(root.value) is np.ndarray:
                if alias.layout is None:
                    alias.layout = root_value.strides
                if root_value.strides == alias.layout and type(record.value) is np.ndarray:
                    offset = _address(value) - _address(root_value)
                    # writeable as NumPy's view is only where the root's value is
                    writeable = value.flags.writeable if root_value.flags.writeable else None
                    view.layout = (offset, value.shape, value.strides, value.dtype, writeable)
            view.version = alias.version
            record.__class__ = _lazy_class(type(record))
            return record
    return record


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _Based:
    """What ``np.asarray`` takes to make an array of given geometry in the memory of
    ``base``, which it keeps alive (as ``np.lib.stride_tricks.as_strided`` does)."""

    def __init__(self, interface: dict, base: np.ndarray) -> None:
        self.__array_interface__ = interface
        self.base = base


def _value_of_view(view: Any, alias: Alias) -> Any:
    """``view``'s value for its root's current one: the same memory at the same offset
    and strides (NumPy's layout, so that a later reshape or ravel copies or views as
    NumPy does) in O(1); else, where the root's value was laid out anew, the call that
    made it on its parent's value."""
    root_value = alias.root.value
    if alias.layout is not None and root_value.strides == alias.root.alias.layout:
        offset, shape, strides, dtype, writeable = alias.layout
        interface = {
            "version": 3,
            "shape": shape,
            "strides": strides,
            "typestr": dtype.str,
            "descr": dtype.descr,
            "data": (_address(root_value) + offset, writeable is not True),
        }
        value = np.asarray(_Based(interface, root_value))
        return value if value.dtype == dtype else value.view(dtype)
    _, f, args, kwargs = alias.made
    stale_parents = []  # each takes its value first, its own parent done: no recursion
    parent = alias.made[0]
    while (
        type(parent.alias) is Alias
        and parent.alias.root is not None
        and parent.alias.version != parent.alias.root.alias.version
    ):
        stale_parents.append(parent)
        parent = parent.alias.made[0]
    for parent in reversed(stale_parents):
        _ = parent.value
    vals = [a.value if view.tape.owns(a) else a for a in args]
    return f(*vals, **kwargs) if kwargs else f(*vals)


_slot = None
_lazy: dict = {}
_plain: dict = {}


def _lazy_class(cls: type) -> type:
    """``cls`` with a ``value`` that a view takes from its root when the root was written
    since it was read: a write costs nothing per view, a read O(1) per view read."""
    lazy = _lazy.get(cls)
    if lazy is not None or cls in _plain:
        return lazy or cls
    global _slot
    # the slot ``value`` of Record, the base of every record class
    slot = _slot = next(k.__dict__["value"] for k in cls.__mro__ if "value" in vars(k))

    def get(self: Any) -> Any:
        alias = self.alias
        if type(alias) is Alias and alias.root is not None:
            root = alias.root.alias
            if alias.version != root.version:
                alias.version = root.version  # first: the copy kept takes the old value
                if alias.latest is None:
                    keep_record(self)
                slot.__set__(self, _value_of_view(self, alias))
                alias.latest = OUTDATED
        return slot.__get__(self, cls)

    lazy = type(cls.__name__, (cls,), {"__slots__": (), "value": property(get, slot.__set__)})
    lazy.__module__ = cls.__module__
    lazy.__qualname__ = cls.__qualname__
    _lazy[cls] = lazy
    _plain[lazy] = cls
    return lazy


def positions(view: Any) -> Any:
    """The flat position in its root's value of each element of ``view`` (an int array
    of the view's shape, read-only where NumPy's view is), or a sentence saying why tape
    cannot map them. Found once per view, by repeating the call that made it on its
    parent's positions (a root's are ``np.arange``): a loop up the views' parents to the
    first whose positions are known, then one call per view on the way down."""
    if view.alias.mapped is None and view.alias.layout is not None:
        mapped = _positions_from_layout(view.alias)
        if mapped is not None:
            view.alias.mapped = mapped
    chain = []
    node = view
    while node.alias is not None and node.alias.root is not None:
        if node.alias.mapped is not None:
            break
        chain.append(node)
        node = node.alias.made[0]
    mapped = node.alias.mapped  # a root's are kept too, once a view needed them
    if mapped is None:
        held = registry.value_of(node.value)
        mapped = node.alias.mapped = np.arange(held.size).reshape(held.shape)
    for node in reversed(chain):
        if type(mapped) is not str:
            mapped = _map(node, mapped)
        node.alias.mapped = mapped
    return mapped


def _positions_from_layout(alias: Alias) -> Any:
    """A view's positions from its geometry in its root's memory, in O(1) whatever the
    chain of views that made it; None where that geometry does not give them (another
    dtype, a root whose value is not laid out in C order)."""
    root = alias.root
    held = root.value
    offset, shape, strides, dtype, writeable = alias.layout
    size = dtype.itemsize
    if writeable is None or dtype != held.dtype or offset % size or any(s % size for s in strides):
        return None
    c_strides, step = [], size
    for n in reversed(held.shape):
        c_strides.append(step)
        step *= n
    if root.alias.layout != tuple(reversed(c_strides)):
        return None
    base = root.alias.mapped
    if base is None:
        base = root.alias.mapped = np.arange(held.size).reshape(held.shape)
    unit = base.itemsize
    interface = {
        "version": 3,
        "shape": shape,
        "strides": tuple(s // size * unit for s in strides),
        "typestr": base.dtype.str,
        "data": (_address(base) + offset // size * unit, not writeable),
    }
    return np.asarray(_Based(interface, base))


def _map(view: Any, parent_positions: np.ndarray) -> Any:
    """``view``'s positions from its parent's: its call, repeated on them."""
    parent, f, args, kwargs = view.alias.made
    seen = registry.value_of(view.value)
    try:
        vals = [parent_positions if a is parent else registry.value_of(a) for a in args]
        mapped = f(*vals, **kwargs) if kwargs else f(*vals)
    except Exception:
        mapped = None
    if (
        type(mapped) is np.ndarray
        and mapped.shape == seen.shape
        and registry.value_of(parent.value).dtype == seen.dtype
        and np.may_share_memory(mapped, parent_positions)
    ):
        return mapped
    return (
        f"made by {registry.function_name(f)}, whose elements tape cannot map onto the "
        "base's (a view of another dtype, such as .real or .imag of a complex array, or "
        "a view made by a function it cannot repeat)"
    )
