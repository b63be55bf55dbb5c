"""The node's operator surface: a recorded value that behaves like its value.

Every operator, ndarray method and attribute of ``Node`` is the NumPy function it means,
handed to ``recording.apply`` (the surface it shares with ``vmap``'s batched values is
``tape.core.array_surface``); NumPy's protocols (``__array_ufunc__``,
``__array_function__``) bring plain ``np.*`` calls to the same place. Nothing here
decides anything about the tape: that is recording's business.
"""

from __future__ import annotations

import dis
import operator
import sys
from typing import Any, Callable

import numpy as np

from sensitivities import astype, registry
from sensitivities.counterparts import scipy_caller, sparse_operator
from sensitivities.registry import foreign_handler

from . import array_api
from .array_surface import ARITHMETIC, ArraySurface, _as_array
from .duck_arrays import is_duck_array
from .errors import (
    BUFFER,
    CANNOT_PICKLE,
    COMPILED_SWAP,
    MASKED_CONVERSION,
    TO_ARRAY,
    TO_NUMBER,
    NodeConversionError,
    converted_in_library,
    in_place,
    scipy_conversion,
    stores_into_array,
)
from .inplace import augmented, set_item
from .outputs import ufunc_out
from .recording import Record, apply, extension, plain, record_primitive

__all__ = ["Node"]


def _in_place(name: str, instead: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        raise TypeError(in_place(name, instead))

    method.__name__ = name
    return method


_CLASS = object.__dict__["__class__"]  # the class slot itself, under the property below
# code that knows a node for what it is: the engine, NumPy's own (entered on nodes), the
# standard library's (pickle, copy, the type checks of functools), and the array libraries
# whose operators take an ndarray as data of their own (a Dask array would put a node in
# its graph as a chunk; tests/test_dask.py)
_OWN_CODE = frozenset(sys.stdlib_module_names) | {
    "tape", "sensitivities", "numpy", "dask", "distributed", "xarray", "pandas", "cupy",
    "cupyx", "sparse", "jax", "torch",
}  # fmt: skip
_ATTRIBUTE_READS = frozenset(
    dis.opmap[name] for name in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR") if name in dis.opmap
)


def _to_number(node: Any, convert: Callable) -> Any:
    """``float(node)`` and its kin: the number, for a node whose pass has ended (a
    constant now, as a logged loss is); else the error that says why, at the caller's line."""
    if not node.tape.records:
        return convert(registry.value_of(node))
    caller = sys._getframe(2)
    counterpart = scipy_caller(caller)  # a SciPy solver's float(fun(x)), say
    if counterpart:
        raise NodeConversionError(scipy_conversion(*counterpart))
    site = converted_in_library(caller, extension("is_converting")(), "a number")
    if site:
        raise NodeConversionError(site)
    raise NodeConversionError(BUFFER if stores_into_array(caller) else TO_NUMBER)


class Node(Record, ArraySurface):
    """A recorded value, the base of ``Leaf`` and ``Branch``. It behaves like the value:
    arithmetic, ``@``, indexing, ``.shape``, and every NumPy function, each recorded on
    the node's tape.
    Comparisons return plain results, so that Python control flow works.

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> x = Leaf(Tape(), np.array([1.0, -2.0]))
    >>> y = 2 * x[::-1] @ x.T
    >>> y
    Branch{float64} -8.0 f=matmul
    >>> bool(x[0] > 0)  # comparisons give plain results, for if and while
    True
    """

    __slots__ = ()
    __array_priority__ = 1000.0  # NumPy defers binary operators to us
    __hash__ = object.__hash__  # __eq__ is elementwise, identity still hashes

    @property
    def __class__(self) -> type:  # type: ignore[override]
        """To code outside the engine, ``np.ndarray`` where the value is one: library code
        that asks ``isinstance(x, np.ndarray)`` (galpy's potentials, SMT's checks) takes
        the branch it takes for the value, not its scalar branch. ``type(x)`` is the
        node's own class, and so is ``isinstance`` in the engine."""
        cls = _CLASS.__get__(self)
        if type(self.value) is np.ndarray:
            caller = sys._getframe(1)
            module = caller.f_globals.get("__name__", "")
            # isinstance asks from a call; x.__class__ written out (to call it, or read
            # its methods) is the node's own class
            if module.partition(".")[0] not in _OWN_CODE and caller.f_code.co_code[
                caller.f_lasti
            ] not in _ATTRIBUTE_READS:
                return np.ndarray
        return cls

    @__class__.setter
    def __class__(self, cls: type) -> None:
        _CLASS.__set__(self, cls)  # a view's lazy class (tape.core.versions)

    value: Any
    tape: Any
    pos: int
    seal: list | None  # fingerprints of the mutable arrays the reverse pass will read

    # -- NumPy's protocols -------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            return apply(ufunc, inputs)  # np.sin(x): the common call, first
        if kwargs.get("out") is not None and method != "at":
            call = ufunc if method == "__call__" else getattr(ufunc, method)
            return ufunc_out(call, inputs, kwargs, method == "__call__")
        if method == "__call__":
            return apply(ufunc, inputs, kwargs)
        if method == "at":
            raise TypeError(
                f"np.{ufunc.__name__}.at updates an array in place, which the tape cannot "
                "record; use the functional update tape.at(x)[index].add(v) (or .multiply, "
                ".set), or build a new array (np.where, np.concatenate, np.stack)"
            )
        bound = getattr(ufunc, method)
        rules = registry.lookup(ufunc)
        if registry.lookup(bound) is None and rules is not None and rules.nondiff:
            return plain(bound, inputs, kwargs)
        return apply(bound, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
        return apply(func, args, kwargs)

    # a primitive (sensitivities.registry.primitive) hands a call that meets a node here
    __record_call__ = staticmethod(record_primitive)
    # the shared array surface (tape.core.array_surface): every method and operator, recorded
    _apply = staticmethod(apply)

    def __array_namespace__(self, api_version: str | None = None) -> Any:
        """The array API namespace of nodes (``tape.core.array_api``): NumPy's, with an
        ``asarray`` that keeps a node a node."""
        return array_api

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if not self.tape.records:  # its pass has ended: a constant, which is its value
            value = np.asarray(registry.value_of(self), dtype=dtype)
            return value.copy() if copy else value
        caller = sys._getframe(1)
        if sparse_operator(caller):
            held = np.empty((), dtype=object)  # SciPy then returns NotImplemented, and
            held[()] = self  # Python calls this node's reflected operator
            return held
        counterpart = scipy_caller(caller)
        if counterpart:
            raise NodeConversionError(scipy_conversion(*counterpart))
        if caller.f_globals.get("__name__", "").startswith("numpy.ma"):
            raise NodeConversionError(MASKED_CONVERSION)  # masked * node: np.ma converts
        site = converted_in_library(caller, extension("is_converting")())
        if site:
            raise NodeConversionError(site)
        raise NodeConversionError(BUFFER if stores_into_array(caller) else TO_ARRAY)

    def __float__(self) -> float:
        return _to_number(self, float)

    def __int__(self) -> int:
        return _to_number(self, int)

    def __complex__(self) -> complex:
        return _to_number(self, complex)

    def __index__(self) -> int:
        return _to_number(self, operator.index)

    def __bool__(self) -> bool:
        return plain(bool, (self,))

    # -- copies: np.copy, recorded; a node never leaves its process ----------------------

    def __copy__(self) -> Any:
        """``copy.copy(x)`` is ``np.copy(x)``: a new node, with the gradient flowing back
        to ``x``, that later writes to either leave the other alone. A node holding a
        float or a NumPy scalar is immutable, and is its own copy."""
        if isinstance(registry.value_of(self), np.ndarray) or is_duck_array(self.value):
            return apply(np.copy, (self,))
        return self

    def __deepcopy__(self, memo: dict) -> Any:
        # copy.deepcopy keeps the memo: a node met twice in a structure is copied once
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(CANNOT_PICKLE)

    def __reduce__(self) -> Any:
        raise TypeError(CANNOT_PICKLE)

    def __getstate__(self) -> Any:  # copyreg's own reduction for protocols 0 and 1
        raise TypeError(CANNOT_PICKLE)

    # -- printing: the value, as NumPy shows it (repr shows the record) -------------------

    def __str__(self) -> str:
        return str(registry.value_of(self))

    def __format__(self, spec: str) -> str:
        return format(registry.value_of(self), spec)

    def __round__(self, ndigits: int | None = None) -> Any:
        # rounding is piecewise constant: a plain result, as a comparison is
        return plain(round, (self,)) if ndigits is None else plain(round, (self, ndigits))

    # -- operators: the shared surface's (tape.core.array_surface), and those that meet another
    # library's operands (a sparse matrix) as it asks

    def __mul__(self, other: Any) -> Any:
        if type(other) not in _KNOWN and (handler := _foreign(np.multiply, other)):
            return handler(self, other)
        return apply(np.multiply, (self, other))

    def __rmul__(self, other: Any) -> Any:
        if type(other) not in _KNOWN and (handler := _foreign(np.multiply, other)):
            return handler(other, self)
        return apply(np.multiply, (other, self))

    def __matmul__(self, other: Any) -> Any:
        if type(other) not in _KNOWN and (handler := _foreign(np.matmul, other)):
            return handler(self, other)
        return apply(np.matmul, (self, other))

    def __rmatmul__(self, other: Any) -> Any:
        if type(other) not in _KNOWN and (handler := _foreign(np.matmul, other)):
            return handler(other, self)  # SciPy's sparse S @ x arrives here
        return apply(np.matmul, (other, self))

    # -- writes and the array attributes -------------------------------------------------

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = v``, as NumPy does it: every name bound to ``x``, and every view
        of it, sees the new value; the gradient is that of the updated program, with
        respect to ``v`` and to the value ``x`` had before (see ``tape.core.inplace``). ``v``
        is cast to ``x``'s dtype and must broadcast to ``x[index]``, with NumPy's errors.
        A node holding a Python float or a NumPy scalar has no items, as in NumPy."""
        alias = getattr(value, "alias", None)
        if alias is not None and alias.root is not None and alias.root is _root(self):
            if _called_from_compiled_code(sys._getframe(1)):
                raise TypeError(COMPILED_SWAP)
        set_item(self, index, value)

    def __contains__(self, item: Any) -> bool:
        # NumPy's meaning, (x == item).any(): a plain answer, as comparisons give
        return bool(plain(operator.contains, (self, item)))

    @property
    def shape(self) -> tuple:
        return np.shape(self.value)

    @property
    def dtype(self) -> np.dtype:
        value = registry.value_of(self)
        return getattr(value, "dtype", None) or np.result_type(value)

    @shape.setter
    def shape(self, shape: Any) -> None:
        raise TypeError(
            "x.shape = ... reshapes an array in place, which a node cannot do (its shape is "
            "that of its record); write x = x.reshape(shape)"
        )

    @dtype.setter
    def dtype(self, dtype: Any) -> None:
        raise TypeError(
            "x.dtype = ... reinterprets an array's bytes in place, which has no gradient; "
            "use x.astype(dtype) to convert the values"
        )

    @property
    def real(self) -> Any:
        return apply(np.real, (self,))

    @property
    def imag(self) -> Any:
        return apply(np.imag, (self,))

    @real.setter
    def real(self, v: Any) -> None:
        raise TypeError(
            "x.real = v writes part of a complex array in place; write x = v + 1j * x.imag"
        )

    @imag.setter
    def imag(self, v: Any) -> None:
        raise TypeError(
            "x.imag = v writes part of a complex array in place; write x = x.real + 1j * v"
        )

    # -- the ndarray methods people call, recorded as the NumPy functions ---------------




    def astype(
        self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
        copy: bool = True,
    ) -> Any:  # fmt: skip
        """``x.astype(dtype, order, casting, subok, copy)``, as ndarray's: NumPy's errors for
        a cast ``casting`` forbids; ``x`` itself for ``copy=False`` where no cast or new
        layout is needed; the memory order ``order`` asks for."""
        value = registry.value_of(self)
        source = self.dtype
        # NumPy's own errors, for the casting rule, the order and the dtype
        np.empty(0, source).astype(dtype, order=order, casting=casting, subok=subok, copy=copy)
        target = np.dtype(dtype)
        layout = _layout(value, order)
        if not copy and target == source and (layout is None or _has_layout(value, layout)):
            return self
        result = apply(astype, (self, dtype))
        if layout is not None and not _has_layout(registry.value_of(result), layout):
            result = np.copy(result, order=layout)
        return result


    def view(self, *args: Any, **kwargs: Any) -> Any:
        """``x.view()``: a node that is a view of ``x`` (writes to either show in the
        other, as NumPy's); a view as another dtype reinterprets bytes and is refused."""
        dtype = kwargs.pop("dtype", args[0] if args else None)
        kind = kwargs.pop("type", args[1] if len(args) > 1 else None)
        if isinstance(dtype, type) and issubclass(dtype, np.ndarray):
            dtype, kind = None, dtype
        if isinstance(kind, type) and issubclass(kind, np.ma.MaskedArray):
            raise TypeError(MASKED_CONVERSION)  # np.ma.array(node) views it as masked
        if (
            (dtype is not None and np.dtype(dtype) != self.dtype)
            or kwargs
            or (kind is not None and kind is not np.ndarray)
        ):
            raise TypeError(
                "x.view(dtype) reinterprets an array's bytes, which has no gradient; use "
                "x.astype(dtype) to convert values, or node.value.view(...) for a constant"
            )
        return apply(operator.getitem, (self, ...))





    # ndarray methods that change the array in place: writes, as x[...] = v is
    # (tape.core.inplace): every name and view of x sees them, and the gradient flows

    def sort(self, axis: Any = -1, kind: Any = None, order: Any = None, **kwargs: Any) -> None:
        keywords = dict(axis=axis, kind=kind, order=order, **kwargs)
        _probe(self).sort(**keywords)  # NumPy's errors (ndarray.sort takes no axis=None)
        set_item(self, ..., apply(np.sort, (self,), keywords))

    def partition(
        self, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None
    ) -> None:
        keywords = dict(axis=axis, kind=kind, order=order)
        _probe(self).partition(kth, **keywords)
        set_item(self, ..., apply(np.partition, (self, kth), keywords))

    def fill(self, value: Any) -> None:
        probe = np.empty(1, self.dtype)
        probe.fill(registry.value_of(value))  # NumPy's errors: fill takes one scalar
        set_item(self, ..., value)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        """``x.put(indices, values, mode)``: ``x.flat[indices] = values``, ``values``
        repeated as needed, indices wrapped or clipped by ``mode``, as NumPy's."""
        size = self.size
        probe = np.zeros(size, self.dtype)
        probe.put(indices, np.zeros(1, self.dtype), mode=mode)  # NumPy's errors
        flat = np.asarray(indices, dtype=np.intp).reshape(-1)
        if mode == "wrap":
            flat = flat % size
        elif mode == "clip":
            flat = np.clip(flat, 0, size - 1)
        else:
            flat = np.where(flat < 0, flat + size, flat)
        if flat.size == 0:
            return
        values = _as_array(values)
        repeated = np.ravel(values)[np.arange(flat.size) % np.size(values)]
        set_item(self, np.unravel_index(flat, self.shape), repeated)

    resize = _in_place("resize", "x = np.resize(x, shape)")

    def item(self, *args: Any) -> Any:
        if not self.tape.records:  # its pass has ended: a constant
            return np.asarray(registry.value_of(self)).item(*args)
        counterpart = scipy_caller(sys._getframe(1))  # a SciPy solver's fun(x).item()
        if counterpart:
            raise NodeConversionError(scipy_conversion(*counterpart))
        raise NodeConversionError(
            "node.item() would return a plain number and lose the gradient; index the "
            "node instead (x[()] or x[i]), or take node.value for a constant"
        )

    def setflags(self, write: Any = None, align: Any = None, uic: Any = None) -> None:
        """Accepted, and changes nothing: a node's value is the tape's, never written in
        place (a write to the node records a new version), so it is read-only already
        (library code's ``x.setflags(write=False)`` before handing ``x`` on)."""

    def tolist(self) -> Any:
        if not self.tape.records:  # its pass has ended: a constant
            return np.asarray(registry.value_of(self)).tolist()
        raise NodeConversionError(
            "node.tolist() would return plain Python numbers and lose the gradient; iterate "
            "over the node (list(x), x[i]) to keep it, or take node.value.tolist() for constants"
        )

    def as_integer_ratio(self) -> Any:
        # what statistics and fractions ask of a number, to compute with it exactly
        raise NodeConversionError(
            "node.as_integer_ratio() (asked by statistics.mean, fractions.Fraction) would "
            "turn the node into exact plain numbers and lose the gradient; use NumPy's "
            "reductions instead (np.mean(x), np.median(x), np.var(x)), or node.value"
        )

    def tobytes(self, *args: Any, **kwargs: Any) -> Any:
        raise NodeConversionError(_LEAVES % "tobytes()")

    def tofile(self, *args: Any, **kwargs: Any) -> Any:
        raise NodeConversionError(_LEAVES % "tofile()")

    def dump(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(CANNOT_PICKLE)

    def dumps(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(CANNOT_PICKLE)

    @property
    def strides(self) -> tuple:
        """The strides of the value, for code that computes views with ``as_strided``."""
        return registry.value_of(self).strides


# the instructions of x[i] = v and (from Python 3.12) x[a:b] = v
_STORES = frozenset(
    dis.opmap[name] for name in ("STORE_SUBSCR", "STORE_SLICE") if name in dis.opmap
)


def _root(x: Any) -> Any:
    """The node whose memory ``x`` shares: ``x`` itself unless it is a view."""
    alias = x.alias
    return x if alias is None or alias.root is None else alias.root


def _called_from_compiled_code(frame: Any) -> bool:
    """Whether ``x[i] = v`` was called from NumPy's compiled shuffle (np.random.Generator.
    shuffle's loop over a sequence): the nearest Python frame is then not at ``x[i] = v``
    but in a call, on a line that names ``shuffle`` (read on this rare path only: a value
    that is a view of the node written)."""
    try:
        if frame.f_code.co_code[frame.f_lasti] in _STORES:
            return False
        line = frame.f_lineno
        return any(
            ins.argval == "shuffle"
            and ins.positions is not None
            and ins.positions.lineno == line
            and ins.opname.startswith("LOAD_")
            for ins in dis.get_instructions(frame.f_code)
        )
    except (AttributeError, IndexError):
        return False


_LEAVES = (
    "node.%s would turn the node's value into plain bytes and lose the gradient; take "
    "node.value for a constant, outside the differentiated code"
)

# ndarray's attributes that a node leaves out, as they are about memory and layout
# (not the protocols NumPy probes, __array_interface__ and the like: found on the class,
# they would cost every conversion attempt an exception)
_MEMORY_ATTRIBUTES = ("base", "byteswap", "ctypes", "data", "flags", "getfield", "setfield")


def _memory_attribute(name: str) -> property:
    """A property that says why a node has no ``name``: an attribute about an array's
    memory, which a recorded value does not expose. (A property each, not a
    ``__getattr__``: that would slow every attribute read of every node threefold, as
    Python then no longer specialises the reads of ``__slots__``.)"""

    def refuse(self: Node) -> Any:
        raise AttributeError(
            f"a node has no .{name}: ndarray.{name} is about an array's memory, which a "
            f"recorded value does not expose; node.value.{name} is the constant's "
            "(the gradient does not flow through it)"
        )

    return property(refuse)


for _name in _MEMORY_ATTRIBUTES:
    setattr(Node, _name, _memory_attribute(_name))
del _name


def _augmented(ufunc: np.ufunc, name: str) -> Any:
    def method(self: Node, other: Any) -> Any:
        return augmented(self, ufunc, other)

    method.__name__ = name
    return method


# augmented assignments write the node in place, as on an ndarray (tape.core.inplace); a
# node holding a float or a NumPy scalar is rebound, as those are immutable
for _name, _ufunc in ARITHMETIC:
    setattr(Node, f"__i{_name}__", _augmented(_ufunc, f"__i{_name}__"))
del _name, _ufunc


def _probe(node: Any) -> Any:
    """A plain copy of ``node``'s value, for NumPy to raise its own errors on: an in-place
    method of a node that NumPy would refuse raises before anything is recorded."""
    value = registry.value_of(node)
    return value.copy() if isinstance(value, np.ndarray) else np.asarray(value)


def _layout(value: Any, order: str) -> str | None:
    """The memory order, "C" or "F", that ``astype(order=order)`` gives ``value`` where it
    may differ from ``value``'s own (None: "K", the value's own, which the cast keeps)."""
    if order == "K" or np.ndim(value) < 2:
        return None
    if order == "A":
        flags = getattr(value, "flags", None)
        return "F" if flags is not None and flags.f_contiguous and not flags.c_contiguous else "C"
    return order


def _has_layout(value: Any, layout: str) -> bool:
    flags = getattr(value, "flags", None)
    if flags is None:
        return True  # another library's array: its layout is its own business
    return bool(flags.c_contiguous if layout == "C" else flags.f_contiguous)


# Operands a node's operators take as NumPy does, without asking the registry whether they
# belong to another library (sparse matrices): the common ones, skipped cheaply.
_KNOWN = frozenset((float, int, complex, bool, np.float64, np.float32, np.ndarray))


def _foreign(f: Any, other: Any) -> Any:
    """How ``f`` meets ``other`` where it belongs to a library NumPy cannot take (a
    sparse matrix), registered with ``sensitivities.registry.foreign_operands``; else None."""
    return None if isinstance(other, Record) else foreign_handler(f, other)
