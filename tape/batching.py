"""``vmap``: a function written for one example, run over a batch.

A batched value is a ``Batched``: an array whose leading axis is the batch, and which
shows the rest, one example's shape, to the code that uses it (``x.shape`` is one
example's shape). It has a node's whole array surface (``tape.array_surface``), and
speaks NumPy's protocols (``__array_ufunc__``, ``__array_function__``,
``__record_call__``). This module is the interpreter: it answers ufuncs itself (they
broadcast over the batch, the batched operands padded after their batch axis), and
every other function by its batching rule (``sensitivities.batching``: plain NumPy on
the batches' data), unwrapping the batched values and wrapping the result. A function
without a rule runs NumPy's own Python code on the batched values, or once per example
with the results stacked (the loop fallback, which ``vmap(..., report=True)`` and
``tape.debug()`` report).

Fast paths, each in one place here, answer the calls that per-example gradients make
most without the general path's scan of the arguments: an elementwise ufunc of batches
and plain values (``_ufunc_call``, with large outer products by ``einsum``), ``x @ W``
(``_pair_level``), a reduction of one batch (``_reduce_call``), and the questions the
reverse pass asks of every adjoint (``_QUERIES``: ``np.shape(x)``).

The tape records ``Batched`` values as it records Dask or CuPy arrays, so a ``grad``
inside a ``vmap`` records batched values and its rules run batched: ``vmap(grad(f))``
gives per-example gradients in one pass. Nodes stay outside batched values (a node's
value may be batched; a batched value never holds a node): a node passed to ``vmap``
enters through a recorded primitive (``batch_in``), leaves through another
(``batch_out``), and a node of a tape made before the ``vmap`` that meets batched
values inside it (a closure) is broadcast over the batch by a recorded ``broadcast``,
whose sensitivity sums over the batch. Each ``vmap`` call takes a level from the same
counter as tapes; a call with batched values of several ``vmap``s is batched for the
innermost (``vmap(vmap(f))``).

Python control flow that depends on a batched value (``if x > 0``) has no single answer
for the batch: it raises ``BatchedControlFlowError`` naming the line; write it with
``np.where``.
"""

from __future__ import annotations

import functools
import operator
import sys
import warnings
import weakref
from contextvars import ContextVar
from typing import Any, Callable

import numpy as np

from sensitivities import primitive, sensitivity
from sensitivities.batching import (
    advanced_axes_first,
    along_axis,
    batching_entry,
    matmul_rule,
    outer_product,
)
from sensitivities.batching import shifted_axis as _axis
from sensitivities.registry import function_name, value_of
from sensitivities.registry import pushforward as _engine_pushforward

from .array_surface import ArraySurface
from .forward import ForwardTape
from .mutation import sealed
from .node import Node
from .observing import observing, rewrite, unobserve
from .records import Branch, Tape
from .reverse import SHAPED
from .trees import tree_flatten, tree_unflatten
from .versions import MEMORY, memory_of

__all__ = [
    "vmap",
    "Batched",
    "BatchedControlFlowError",
    "BatchingError",
    "VmapFallbackWarning",
]


class BatchingError(Exception):
    """A call that cannot run batched as written: Python control flow or a conversion
    that needs one value where a batch holds one per example, examples whose results
    differ in shape, a write that one batched write cannot follow. Code that can do the
    same thing another way (``jacobian``'s reverse mode, by forward mode) catches this
    and no other error."""


class BatchedControlFlowError(BatchingError, TypeError):
    """Python control flow (``if``, ``while``, ``bool``, ``float``) met a batched value,
    which holds one value per example: there is no single answer.

    >>> import numpy as np
    >>> from tape import vmap
    >>> def relu(x):
    ...     return x if x > 0 else 0.0
    >>> vmap(relu)(np.array([1.0, -1.0]))
    Traceback (most recent call last):
    tape.batching.BatchedControlFlowError: ...
    """


class _CannotWrite(BatchingError, TypeError):
    """A write that one batched value cannot take (each example would write its own)."""


class _NoBatch(BatchingError, ValueError):
    """Examples whose results no batch can hold, or a write no view of a batch follows."""


class VmapFallbackWarning(UserWarning):
    """A function with no batching rule ran once per example under ``vmap``."""


# -- the batched value ------------------------------------------------------------------

_reporting: ContextVar[bool] = ContextVar("tape_vmap_reporting", default=False)


def _user_line() -> str:
    """``file:line`` of the innermost frame outside tape, sensitivities and numpy."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name.startswith(("tape.", "sensitivities", "numpy")) or name == "tape"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno} (in {frame.f_code.co_name})"
        frame = frame.f_back
    return "an unknown line"


class Batched(ArraySurface):
    """A batch of values: ``data`` holds them along its leading axis; ``shape``,
    ``ndim`` and ``size`` are one example's. Made by ``vmap``; see the module docstring.

    >>> import numpy as np
    >>> from tape.batching import Batched
    >>> b = Batched(np.arange(6.0).reshape(3, 2), level=-1)
    >>> b.shape, np.sum(b).data, b.argsort().data.tolist()
    ((2,), array([1., 5., 9.]), [[0, 1], [0, 1], [0, 1]])
    """

    # _zero_d: each example is a 0-d array (made by a view or a constructor), which is
    # written in place, not a NumPy scalar, which is immutable
    __slots__ = ("data", "level", "_zero_d")
    __array_priority__ = 500.0  # above ndarray's, below a node's

    def __init__(self, data: Any, level: int) -> None:
        self.data = data
        self.level = level
        self._zero_d = False

    # -- one example's view ----------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return tuple(self.data.shape[1:])

    @property
    def ndim(self) -> int:
        return self.data.ndim - 1

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def strides(self) -> tuple:
        return tuple(self.data.strides[1:])

    @property
    def batch_size(self) -> int:
        return self.data.shape[0]

    def __repr__(self) -> str:
        return (
            f"Batched(level={self.level}, batch={self.batch_size}, shape={self.shape}, "
            f"data={self.data!r})"
        )

    # -- no single value ----------------------------------------------------------------

    def _no_single_value(self, what: str):
        raise BatchedControlFlowError(
            f"{what} of a batched value at {_user_line()}: under vmap it holds one value "
            "per example, so Python control flow cannot depend on it; write it with "
            "np.where (or compute the condition outside vmap)"
        )

    def __bool__(self) -> bool:
        # one answer where every example gives the same one (each example's program takes
        # that branch, so the batch may too); where they disagree, there is none
        if self.size != 1:
            raise ValueError(
                "The truth value of an array with more than one element is ambiguous. "
                "Use a.any() or a.all()"
            )
        if bool(np.all(self.data)):
            return True
        if not bool(np.any(self.data)):
            return False
        self._no_single_value("bool() (with examples that disagree)")

    def __float__(self) -> float:
        self._no_single_value("float()")

    def __int__(self) -> int:
        self._no_single_value("int()")

    def __index__(self) -> int:
        self._no_single_value("an index")

    def __complex__(self) -> complex:
        self._no_single_value("complex()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise BatchedControlFlowError(
            f"a batched value was converted to an ndarray at {_user_line()} (np.asarray, "
            "np.array, or a compiled function): that would lose the batch. Under vmap, "
            "keep to NumPy functions (or register a batching rule)"
        )

    def __round__(self, ndigits: int | None = None) -> Any:
        if not _scalars(self):  # NumPy's error: only its scalars round
            raise TypeError("type numpy.ndarray doesn't define __round__ method")
        rounded = np.round(self, ndigits or 0)
        return rounded.astype(int) if ndigits is None else rounded  # round(2.6) is 3

    def item(self, *args: Any) -> Any:
        self._no_single_value(".item()")

    def tolist(self) -> Any:
        self._no_single_value(".tolist()")

    # -- NumPy's protocols --------------------------------------------------------------

    @staticmethod
    def _apply(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
        """A method or operator of the array surface: the ufunc's fast path, the index,
        or the NumPy function (which comes back through the protocols)."""
        if type(f) is np.ufunc and not kwargs and f.signature is None:
            result = _ufunc_call(f, args)  # x * y, -x: what NumPy's dispatch comes to
            if result is not _SLOW:
                return result
        elif f is operator.getitem:
            return _getitem(*args)
        elif type(f) is not np.ufunc and batching_entry(f) is None:
            # no rule: NumPy's own code for x.choose(c) would call the method back
            level = _scan(args + tuple(kwargs.values()) if kwargs else args)
            if level is not _NODE:
                return _loop(f, args, kwargs or {}, level)
        return f(*args, **kwargs) if kwargs else f(*args)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs and ufunc.signature is None:
            result = _ufunc_call(ufunc, inputs)  # np.sin(x), x * y: the common call, first
            if result is not _SLOW:
                return result
        elif ufunc is np.matmul and method == "__call__" and not kwargs and len(inputs) == 2:
            level = _pair_level(*inputs)  # x @ W: the next most common
            if level is not None:
                a, b = inputs
                fa, fb = type(a) is Batched, type(b) is Batched
                args = (a.data if fa else a, b.data if fb else b)
                return Batched(matmul_rule(args, (fa, fb)), level)
        elif method == "reduce" and len(inputs) == 1 and kwargs.keys() <= _REDUCE_KEYWORDS:
            result = _reduce_call(ufunc.reduce, self, kwargs)  # np.add.reduce(g, axis)
            if result is not None:
                return result
        level = _scan(inputs + tuple(kwargs.values()) if kwargs else inputs)
        if level is _NODE:
            return NotImplemented  # a node records the call; its value may be batched
        out = kwargs.pop("out", None)
        if out is not None:  # into a batched array, in place, as NumPy writes each example
            target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
            if not isinstance(target, Batched) or method != "__call__":
                raise _CannotWrite(
                    f"vmap: np.{ufunc.__name__}(..., out=) at {_user_line()} writes batched "
                    f"values into {type(target).__name__}, which is the same for every "
                    "example (each would write its own value into it); build a new array "
                    f"instead (y = np.{ufunc.__name__}(...))"
                )
            if _scalars(target):
                raise TypeError("return arrays must be of ArrayType")  # NumPy's, for a scalar
            return _into(target, ufunc, inputs, kwargs)
        if method == "__call__":
            if ufunc.signature is None:
                return _elementwise(ufunc, inputs, kwargs, level)
            entry = batching_entry(ufunc)  # a generalised ufunc (matmul, vecdot)
            if entry is not None:
                return _run(ufunc, entry, inputs, kwargs, level)
            return _loop(ufunc, inputs, kwargs, level)
        if method == "at":  # in place, example by example (np.add.at into a fresh array)
            target, *rest = inputs
            if not isinstance(target, Batched):
                raise _CannotWrite(
                    f"vmap: {ufunc.__name__}.at of batched values into "
                    f"{type(target).__name__}; build a new array instead"
                )
            _check_writable(target, "item assignment")
            for b in range(target.batch_size):
                ufunc.at(target.data[b, ...], *_example(rest, level, b))
            return None
        call = getattr(ufunc, method)
        if method in ("reduce", "accumulate"):
            return _run(call, (along_axis(call, default=0), False), inputs, kwargs, level)
        return _loop(call, inputs, kwargs, level)

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
        if len(args) == 1 and args[0] is self and func in _UFUNC_REDUCTIONS:
            reduce, keywords = _UFUNC_REDUCTIONS[func]  # np.sum(x), np.max(x, axis=-1)
            if kwargs.keys() <= keywords:
                result = _reduce_call(reduce, self, kwargs, None)
                if result is not None:
                    return result
        if len(types) == 1 and not kwargs and len(args) == 1 and args[0] is self:
            query = _QUERIES.get(func)  # np.shape(x), np.ndim(x): asked on every adjoint
            if query is not None:
                return query(self)
            level = self.level
        else:
            level = _scan(args + tuple(kwargs.values()) if kwargs else args)
            if level is _NODE:
                return NotImplemented  # a node records the call; its value may be batched
        entry = batching_entry(func)
        if entry is not None:
            return _run(func, entry, args, kwargs, level)
        if func in _OF_ONE_EXAMPLE:  # shapes and dtypes only: asked of one example
            return func(*_example(args, level, 0), **_example_kw(kwargs, level, 0))
        if func in _CREATED and not _is_batched_anywhere(args + tuple(kwargs.values()), level):
            return func(*args, **kwargs)  # np.asarray(c, like=x): the same for every example
        return _enter_or_loop(func, args, kwargs, level)

    @staticmethod
    def __record_call__(primitive: Callable, f: Callable, args: tuple, kwargs: dict) -> Any:
        """A primitive (``sensitivities.registry.primitive``) called on a batched value:
        a node among the arguments records it (its value may be batched); else its
        batching rule, or the loop."""
        node = _first_node(args)
        if node is None:
            node = _first_node(tuple(kwargs.values()))
        if node is not None:
            return type(node).__record_call__(primitive, f, args, kwargs)
        if primitive in _OWN:  # vmap's own way in and out of the batch
            return f(*args, **kwargs)
        level = _scan(args + tuple(kwargs.values()))  # no node among them: a level
        entry = batching_entry(primitive)
        if entry is not None:
            return _run(primitive, entry, args, kwargs, level)
        return _loop(primitive, args, kwargs, level)

    # -- writes, in place, as NumPy does them to each example -----------------------------

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = value`` in place, as NumPy does it to each example: every name
        bound to ``x`` and every view of it sees the write (``_set_item``)."""
        _set_item(self, index, value)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        data = self.data.astype(dtype, *args, **kwargs)
        if data is self.data:  # copy=False, nothing to convert: the array itself, as NumPy
            return self
        return _like_examples(self, data)

    def view(self, *args: Any, **kwargs: Any) -> Any:
        if _scalars(self):  # a NumPy scalar's view is an array of its own
            return Batched(self.data.copy(), self.level).view(*args, **kwargs)
        data = self.data.view(*args, **kwargs)
        if data.ndim == 0 or (data.shape[0] != self.batch_size):
            raise ValueError(
                f"vmap: x.view({', '.join(map(repr, args))}) changes the size of the last axis "
                "of a batched scalar; view a batched array of one axis or more"
            )
        return _zero_d_if(Batched(data, self.level))

    def fill(self, value: Any) -> None:
        self[...] = value

    def sort(self, axis: int = -1, kind: Any = None, order: Any = None) -> None:
        _check_writable(self, "item assignment")
        self.data.sort(_axis(axis, self.ndim), kind, order)

    def partition(self, kth: Any, axis: int = -1, kind: str = "introselect", order=None) -> None:
        _check_writable(self, "item assignment")
        self.data.partition(kth, _axis(axis, self.ndim), kind, order)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        _check_writable(self, "item assignment")
        for b in range(self.batch_size):  # np.put comes here: a method, example by example
            index, value = _example((indices, values), self.level, b)
            self.data[b, ...].put(index, value, mode)


def _augmented(ufunc: np.ufunc, name: str) -> Callable:
    def op(self: Any, other: Any) -> Any:
        return _augment(self, ufunc, other)

    op.__name__ = name
    return op


# x += v writes x in place, as NumPy does to each example (every name bound to x and
# every view of it sees the write); a batch of NumPy scalars is rebound, as they are
for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                      ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                      ("lshift", np.left_shift), ("rshift", np.right_shift)):  # fmt: skip
    setattr(Batched, f"__i{_name}__", _augmented(_ufunc, f"__i{_name}__"))


# -- writes: NumPy's aliasing, example by example -----------------------------------------
# A batch's data holds each example's array; a view of a batch is a view of its data, made
# as NumPy makes the view of each example. So a write into the data (+=, x[i] = v, out=)
# is seen by every view and every name of it, as each example's is under NumPy.


def _scalars(x: Batched) -> bool:
    """Whether each example of ``x`` is a NumPy scalar (immutable: ``+=`` rebinds it, and
    it has no items to assign), as the 0-d results of ufuncs, reductions and integer
    indices are; a 0-d array (``y[...]``, ``y.reshape(())``) is not."""
    return x.ndim == 0 and not x._zero_d


def _zero_d_if(x: Batched) -> Batched:
    """``x``, marked as a batch of 0-d arrays where it is 0-d: a view or a new array."""
    if x.ndim == 0:
        x._zero_d = True
    return x


def _memory(x: Batched) -> Any:
    """The ndarray that holds a batch's elements (``versions.memory_of``): None for a
    batch of NumPy scalars, which is never written in place."""
    data = x.data
    if type(data) is np.ndarray:  # asked of every batched value the tape records
        return data if data.ndim > 1 or x._zero_d else None
    return None if _scalars(x) else memory_of(data)


def _like_examples(x: Batched, data: Any) -> Batched:
    """``data`` (a copy of ``x``'s, or a cast) as a batch of what ``x``'s examples are."""
    out = Batched(data, x.level)
    if x._zero_d:
        out._zero_d = True
    return out


# Batches computed as copies (by the loop) where each example is a view of an argument in a
# way no single view of the batch can follow: id of the data's owner -> (a weak reference
# to it, the function). Their data is read-only; a write names the function.
_DETACHED: dict = {}


def _owner(a: Any) -> Any:
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def _detach(data: np.ndarray, func: Callable) -> np.ndarray:
    data.flags.writeable = False
    key = id(data)
    _DETACHED[key] = (weakref.ref(data, lambda _, key=key: _DETACHED.pop(key, None)), func)
    return data


def _check_writable(x: Batched, what: str) -> None:
    """NumPy's error for a write into a NumPy scalar, and vmap's for a write into a batch
    that the loop computed as a copy where each example is a view of an argument."""
    if _scalars(x):
        raise TypeError(f"'{x.dtype.type.__name__}' object does not support {what}")
    data = x.data
    if type(data) is np.ndarray and not data.flags.writeable and _DETACHED:
        owner = _owner(data)
        entry = _DETACHED.get(id(owner))
        if entry is not None and entry[0]() is owner:
            raise _NoBatch(
                f"vmap: a write at {_user_line()} into the result of "
                f"{function_name(entry[1])}, which is a view of its argument in each example "
                "but has no batching rule, so vmap computed it as a copy, which the write "
                "would not reach through; write into the argument itself, or make the "
                "independent copy explicit (np.copy) and write into that"
            )


def _example_shape(a: Any, level: int) -> tuple | None:
    """One example's shape of an operand of a write, where a single batched call can
    write it: None for a batch of another ``vmap``, a list holding batches, a foreign array."""
    kind = type(a)
    if kind is Batched:
        return a.shape if a.level == level else None
    if kind is np.ndarray:
        return a.shape
    if kind in _PLAIN or isinstance(a, (np.generic, int, float, complex)):
        return ()
    if kind is list or kind is tuple:
        return None if _scan(a) is not None else np.shape(a)
    return None


def _into(target: Batched, ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Batched:
    """``ufunc(*inputs, out=target)``, each example as NumPy computes it: one call on the
    batch's data where the operands broadcast to ``target``'s shape, else example by
    example (with NumPy's own errors)."""
    _check_writable(target, "item assignment")
    level = target.level
    if ufunc.signature is None and ufunc.nout == 1 and type(target.data) is np.ndarray:
        shapes = [_example_shape(a, level) for a in inputs]
        kw_plain = not kwargs or not _is_batched_anywhere(tuple(kwargs.values()), level)
        if kw_plain and None not in shapes:
            try:
                fits = np.broadcast_shapes(target.shape, *shapes) == target.shape
            except ValueError:
                fits = False
            if fits:
                rank = target.ndim
                args = [_padded(a, rank) if type(a) is Batched else a for a in inputs]
                ufunc(*args, out=target.data, **kwargs)
                return target
    data = target.data
    for b in range(target.batch_size):
        ufunc(
            *_example(inputs, level, b),
            out=data[b, ...],
            **_example_kw(kwargs, level, b),
        )
    return target


def _augment(x: Batched, ufunc: np.ufunc, v: Any) -> Any:
    """``x op= v``: ``x`` written in place (NumPy's ``ufunc(x, v, out=x)``), or
    NotImplemented where each example is a NumPy scalar, which Python then rebinds."""
    if _scalars(x):
        return NotImplemented
    if isinstance(v, Node):
        raise _CannotWrite(
            f"vmap: x {_OPERATORS.get(ufunc, ufunc.__name__)}= node at {_user_line()} writes "
            "a node into a batched array that is no node: the tape cannot record it; write "
            "x = x op node (a new node) instead"
        )
    return _into(x, ufunc, (x, v), {})


_OPERATORS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
              np.floor_divide: "//", np.remainder: "%", np.power: "**", np.matmul: "@",
              np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^",
              np.left_shift: "<<", np.right_shift: ">>"}  # fmt: skip


def _set_item(x: Batched, index: Any, value: Any) -> None:
    """``x[index] = value``, in place, as NumPy does it to each example."""
    if isinstance(value, Node):
        raise _CannotWrite(
            f"vmap: a node assigned into a batched value at {_user_line()}; use the "
            "functional update tape.at(x)[index].set(value), or np.where"
        )
    _check_writable(x, "item assignment")
    level = x.level
    index = index if isinstance(index, tuple) else (index,)
    data = x.data
    if not (
        type(data) is not np.ndarray
        or _is_batched_anywhere(index, level)
        or any(isinstance(i, Node) for i in index)
        or advanced_axes_first(index)  # NumPy would put the batch behind their axes
    ):
        shape = _example_shape(value, level)
        if shape is not None:
            region = data[(slice(None),) + index]
            selected = region.shape[1:]
            try:  # NumPy drops a value's leading 1s, then broadcasts it to the selection
                fits = np.broadcast_shapes(selected, _lstrip_ones(shape)) == selected
            except ValueError:
                fits = False
            if fits:
                data[(slice(None),) + index] = (
                    _padded(value, region.ndim - 1) if type(value) is Batched else value
                )
                return
    for b in range(x.batch_size):  # example by example, with NumPy's own errors
        data[b, ...][tuple(_example(index, level, b))] = _example((value,), level, b)[0]


def _lstrip_ones(shape: tuple) -> tuple:
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return shape[k:]


# -- helpers ------------------------------------------------------------------------------

_SLOW = object()  # what a fast path answers where the general one must decide
# operands an elementwise call takes as they are: one value for every example
_PLAIN = frozenset((np.ndarray, float, int, complex, bool, np.float64, np.float32, np.int64,
                    np.complex128, np.bool_))  # fmt: skip


def _ufunc_call(ufunc: np.ufunc, inputs: tuple) -> Any:
    """An elementwise ufunc called on batched values and plain arrays or numbers, with no
    keywords: the batched data, padded to a common rank, through the ufunc. ``_SLOW``
    for anything else (a node, a list, values of several ``vmap``s, another library's
    array), which the general path takes."""
    if len(inputs) == 1:  # np.tanh(x), -x
        a = inputs[0]
        if type(a) is not Batched:
            return _SLOW
        return _batched_result(ufunc(a.data), a.level)
    if len(inputs) == 2:  # x * y, x + w
        a, b = inputs
        if type(a) is Batched and type(b) is Batched:
            if b.level != a.level:
                return _SLOW
            level, da, db = a.level, a.data, b.data
            if da.ndim != db.ndim:  # the lower rank padded after the batch
                da, db = (
                    (_padded(a, db.ndim - 1), db)
                    if da.ndim < db.ndim
                    else (da, _padded(b, da.ndim - 1))
                )
        elif type(a) is Batched:
            pair = _beside_plain(a, b)
            if pair is None:
                return _SLOW
            level, (da, db) = a.level, pair
        elif type(b) is Batched:
            pair = _beside_plain(b, a)
            if pair is None:
                return _SLOW
            level, (db, da) = b.level, pair
        else:
            return _SLOW
        if ufunc is np.multiply and type(da) is np.ndarray and type(db) is np.ndarray:
            product = outer_product(da, db)
            if product is not None:
                return Batched(product, level)
        return _batched_result(ufunc(da, db), level)
    level = None
    rank = 0  # the largest rank of one example among the operands
    for a in inputs:
        kind = type(a)
        if kind is Batched:
            if level is None:
                level = a.level
            elif a.level != level:
                return _SLOW
            n = a.data.ndim - 1
            rank = max(rank, n)
        elif kind is np.ndarray:
            rank = max(rank, a.ndim)
        elif kind not in _PLAIN:
            return _SLOW
    if level is None:
        return _SLOW
    args = [(_padded(a, rank) if type(a) is Batched else a) for a in inputs]
    return _batched_result(ufunc(*args), level)


def _beside_plain(batch: Batched, other: Any) -> tuple | None:
    """A batch's data and a plain operand (an ndarray or a number), the data padded
    after its batch axis up to the operand's rank; None for an operand of another kind."""
    if type(other) is np.ndarray:
        return (_padded(batch, other.ndim) if other.ndim >= batch.data.ndim else batch.data), other
    if type(other) in _PLAIN:
        return batch.data, other
    return None


def _batched_result(result: Any, level: int) -> Any:
    if type(result) is tuple:  # np.modf, np.frexp: one batched value per output
        return tuple(Batched(_batch_major(r), level) for r in result)
    if type(result) is np.ndarray and result.base is None and not result.flags.c_contiguous:
        result = _batch_major(result)
    return Batched(result, level)


def _batch_major(data: Any) -> Any:
    """A new batch's data with the batch axis outermost in memory, and each example laid
    out as NumPy lays out one example's result: a ufunc or a reduction of a batch whose
    examples are strided (a batch on another axis, an F-ordered batch) interleaves the
    batch axis in memory, and then reshape and ravel would copy where NumPy, on one
    example, makes a view (or the other way round), and writes would go astray."""
    if type(data) is not np.ndarray or data.base is not None or data.ndim < 2:
        return data
    strides = [abs(k) for k in data.strides]
    if strides[0] >= max(strides[1:]) or data.flags.c_contiguous:
        return data
    ndim = data.ndim - 1
    order = sorted(range(ndim), key=lambda k: -strides[1 + k])  # outermost first
    out = np.empty((data.shape[0],) + tuple(data.shape[1 + k] for k in order), data.dtype)
    out = out.transpose((0,) + tuple(1 + order.index(k) for k in range(ndim)))
    np.copyto(out, data)
    return out


def _pair_level(a: Any, b: Any) -> int | None:
    """The level of a batch and an ndarray, or of two batches of one ``vmap``: a call the
    batching rule takes at once, without scanning for nodes; None for the general path."""
    ta, tb = type(a), type(b)
    if ta is Batched and (tb is np.ndarray or (tb is Batched and b.level == a.level)):
        return a.level
    if tb is Batched and ta is np.ndarray:
        return b.level
    return None


_REDUCE_KEYWORDS = frozenset(("axis", "keepdims", "dtype"))


def _reduce_call(reduce: Callable, x: Batched, kwargs: dict, default: Any = 0) -> Any:
    """``reduce(x, axis=..., keepdims=..., dtype=...)`` (a ufunc's reduce) of one batch:
    the axes shifted past the batch; None for the general path. ``default``: the axis
    when none is given (0 for a ufunc's reduce, None for ``np.sum``)."""
    axis = kwargs.get("axis", default)
    if type(x.data) is not np.ndarray or not (
        type(axis) is int or type(axis) is tuple or axis is None
    ):
        return None
    if type(kwargs.get("dtype")) is Batched or type(kwargs.get("keepdims")) is Batched:
        return None
    data = reduce(x.data, **{**kwargs, "axis": _axis(axis, x.data.ndim - 1)})
    return Batched(_batch_major(data), x.level)


_NODE = object()  # what _scan answers where a node is among the values


def _scan(values: Any) -> Any:
    """The innermost level among the batched values in ``values`` (and in the lists and
    tuples there), None where there is none; ``_NODE`` where a node is among them: one
    pass for what ``_holds_node`` and ``_top_level`` ask."""
    level = None
    for a in values:
        kind = type(a)
        if kind is Batched:
            if level is None or a.level > level:
                level = a.level
        elif kind is list or kind is tuple:
            inner = _scan(a)
            if inner is _NODE:
                return _NODE
            if inner is not None and (level is None or inner > level):
                level = inner
        elif kind not in _PLAIN and isinstance(a, Node):
            return _NODE
    return level


def _first_node(args: tuple) -> Any:
    for a in args:
        if isinstance(a, Node):
            return a
        if type(a) is list or type(a) is tuple:
            found = _first_node(a)
            if found is not None:
                return found
    return None


def _at(a: Any, level: int) -> bool:
    return isinstance(a, Batched) and a.level == level


def _size(args: Any, level: int) -> int:
    for a in args:
        if _at(a, level):
            return a.batch_size
        if type(a) is list or type(a) is tuple:
            n = _size(a, level)
            if n is not None:
                return n
    return None


def _logical_ndim(a: Any, level: int) -> int:
    return np.ndim(a.data) - 1 if _at(a, level) else np.ndim(a)


def _padded(a: Any, rank: int) -> Any:
    """The data of a batched ``a`` with length-1 axes after the batch, up to ``rank``
    axes of one example: so that it broadcasts as ``a`` would, batch first."""
    data = a.data
    missing = rank - (data.ndim - 1)
    if missing <= 0:
        return data
    shape = data.shape
    return data.reshape(shape[:1] + (1,) * missing + shape[1:])


def _wrap(result: Any, level: int) -> Any:
    if isinstance(result, tuple):
        return (
            type(result)(*(_wrap(r, level) for r in result))
            if hasattr(result, "_fields")
            else tuple(_wrap(r, level) for r in result)
        )
    if isinstance(result, list):
        return [_wrap(r, level) for r in result]
    return Batched(_batch_major(result), level)



def _elementwise(ufunc: np.ufunc, inputs: tuple, kwargs: dict, level: int) -> Any:
    """An elementwise ufunc with keywords, or operands the fast path leaves (values of
    several ``vmap``s, lists): every batched operand's data padded to the same rank, the
    unbatched ones as they are (they broadcast from the right)."""
    values = list(inputs) + list(kwargs.values())
    rank = max((_logical_ndim(a, level) for a in values), default=0)
    args = [_padded(a, rank) if _at(a, level) else a for a in inputs]
    kw = {k: (_padded(v, rank) if _at(v, level) else v) for k, v in kwargs.items()}
    if ufunc is np.multiply and not kwargs and len(args) == 2:
        return Batched(multiply_data(*args), level)
    return _wrap(ufunc(*args, **kw), level)


def multiply_data(a: Any, b: Any) -> Any:
    """``a * b`` of two batches' data (or a batch's and a plain value), as a batched
    multiply computes it: a large outer product by ``einsum``."""
    product = outer_product(a, b)
    return a * b if product is None else product


shifted_axis = _axis  # a logical axis of one example as an axis of its batch's data


# The reductions that are a ufunc's reduce on an ndarray, and the keywords they share:
# called as such on a batch's data, without NumPy's own Python wrapper around them.
_UFUNC_REDUCTIONS = {
    np.sum: (np.add.reduce, {"axis", "dtype", "keepdims"}),
    np.prod: (np.multiply.reduce, {"axis", "dtype", "keepdims"}),
    np.max: (np.maximum.reduce, {"axis", "keepdims"}),
    np.amax: (np.maximum.reduce, {"axis", "keepdims"}),
    np.min: (np.minimum.reduce, {"axis", "keepdims"}),
    np.amin: (np.minimum.reduce, {"axis", "keepdims"}),
}


def _broadcast_data(a: Any, n: int) -> Any:
    return np.broadcast_to(np.expand_dims(a, 0), (n,) + np.shape(a))


def _is_batched_anywhere(x: Any, level: int) -> bool:
    kind = type(x)
    if kind in _PLAIN:  # an axis, a flag: asked of every keyword of a reduction
        return False
    if kind is tuple or kind is list:
        for v in x:
            if type(v) not in _PLAIN and _is_batched_anywhere(v, level):
                return True
        return False
    if _at(x, level):
        return True
    if isinstance(x, (tuple, list)):
        return any(_is_batched_anywhere(v, level) for v in x)
    return False


def _run(func: Callable, entry: tuple, args: tuple, kwargs: dict, level: int) -> Any:
    """``func`` by its batching rule (``sensitivities.batching``): the batched values at
    ``level`` unwrapped to their data and flagged, the result wrapped; the loop where
    the rule answers NotImplemented or a keyword is batched."""
    rule, arrays = entry
    if kwargs and _is_batched_anywhere(tuple(kwargs.values()), level):
        return _loop(func, args, kwargs, level)
    datas, flags = [], []
    for a in args:
        kind = type(a)
        if kind is Batched and a.level == level:
            datas.append(a.data.copy() if arrays and _scalars(a) else a.data)
            flags.append(True)
        elif (kind is list or kind is tuple) and _is_batched_anywhere(a, level):
            inner = tuple(_at(b, level) for b in a)
            if any(not flag and _is_batched_anywhere(b, level) for b, flag in zip(a, inner)):
                return _loop(func, args, kwargs, level)  # deeper than one list
            datas.append(kind(b.data if flag else b for b, flag in zip(a, inner)))
            flags.append(inner)
        else:
            datas.append(a)
            flags.append(False)
    out = rule(tuple(datas), tuple(flags), **kwargs)
    if out is NotImplemented:
        return _loop(func, args, kwargs, level)
    out = _wrap(out, level)
    return _zero_d_if(out) if arrays and type(out) is Batched else out


# Functions of shapes and dtypes only, answered by one example; and those the reverse
# pass asks of every batched adjoint, answered before anything else (``np.shape(x)``).
_OF_ONE_EXAMPLE = frozenset((np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj,
                             np.result_type, np.can_cast, np.min_scalar_type))  # fmt: skip
_CREATED = frozenset((np.asarray, np.array, np.asanyarray, np.ascontiguousarray, np.eye,
                      np.zeros, np.ones, np.full, np.empty, np.arange, np.identity))  # fmt: skip
_QUERIES: dict[Any, Callable] = {
    np.shape: lambda x: x.shape,
    np.ndim: lambda x: x.ndim,
    np.size: lambda x: x.size,
    np.iscomplexobj: lambda x: np.iscomplexobj(x.data),
    np.isrealobj: lambda x: np.isrealobj(x.data),
    np.result_type: lambda x: np.result_type(x.data),
}


def _example(args: Any, level: int, b: int) -> Any:
    out = []
    for a in args:
        if _at(a, level):
            out.append(a.data[b])
        elif type(a) is list or type(a) is tuple:
            out.append(type(a)(_example(a, level, b)))
        else:
            out.append(a)
    return out


def _example_kw(kwargs: dict, level: int, b: int) -> dict:
    return {k: _example((v,), level, b)[0] for k, v in kwargs.items()}


# -- indexing ----------------------------------------------------------------------------


_BASIC = frozenset((int, slice, type(None), type(Ellipsis)))  # what basic indexing takes


def _getitem(x: Batched, index: Any) -> Any:
    level = x.level
    index = index if isinstance(index, tuple) else (index,)
    for i in index:
        if type(i) not in _BASIC:
            break
    else:  # x[..., 0], x[:, None]: a view, batch first
        out = Batched(x.data[(slice(None),) + index], level)
        if x.data.ndim == 1 or out.data.ndim == 1:  # a scalar or a 0-d array, in or out
            return _basic_index_of_0d(x, index, out)
        return out
    if _is_batched_anywhere(index, level) or any(isinstance(i, Node) for i in index):
        return _loop(_index, (x, index), {}, level)
    out = x.data[(slice(None),) + index]
    ahead = advanced_axes_first(index)
    if ahead:  # advanced indices apart: NumPy puts their axes first, before the batch
        out = np.moveaxis(out, ahead, 0)
    return Batched(out, level)


def _basic_index_of_0d(x: Batched, index: tuple, out: Batched) -> Batched:
    """``x[index]`` (a basic index) where ``x`` or the result is 0-d per example: NumPy
    makes a new array of a scalar (``s[...]``, ``s[None]``), a 0-d view where the index
    has an Ellipsis (``y[0, ...]``), and a scalar otherwise (``y[0]``)."""
    if _scalars(x) and index != ():
        out = Batched(x.data.copy()[(slice(None),) + index], x.level)
    if out.ndim == 0 and Ellipsis in index:  # basic indices: == of those is identity
        out._zero_d = True
    return out


def _index(x: Any, index: Any) -> Any:
    return x[index]


# -- the loop fallback -------------------------------------------------------------------


def _enter_or_loop(func: Callable, args: tuple, kwargs: dict, level: int) -> Any:
    """A function with no batching rule: NumPy's own Python code run on the batched
    values, its inner calls batched in turn; where that cannot work, the loop."""
    inner = getattr(func, "_implementation", None)
    if inner is not None and not isinstance(func, np.ufunc):
        try:
            return inner(*args, **kwargs)
        except (BatchedControlFlowError, TypeError, ValueError, AttributeError):
            pass  # an ndarray's attribute that a batch has not (x.flat), or a conversion
    return _loop(func, args, kwargs, level)


def _loop(func: Callable, args: tuple, kwargs: dict, level: int) -> Any:
    """``func`` once per example, the results stacked: right for every function, at the
    price of a Python loop over the batch. Reported under ``report=True`` or
    ``tape.debug()``."""
    n = _size(tuple(args) + tuple(kwargs.values()), level)
    if _reporting.get() or _debugging():
        warnings.warn(
            f"vmap: {function_name(func)} has no batching rule, so it ran once per example "
            f"({n} times) at {_user_line()}",
            VmapFallbackWarning,
            stacklevel=2,
        )
    results, inputs = [], []
    for b in range(n):
        example = _example(args, level, b)
        results.append(func(*example, **_example_kw(kwargs, level, b)))
        inputs.append(example)
    return _stacked(results, level, _batched_inputs(args, level, inputs), func)


def _batched_inputs(args: tuple, level: int, examples: list) -> list:
    """``(batch, its examples)`` for each argument of ``args`` batched at ``level``."""
    return [
        (a, [example[k] for example in examples])
        for k, a in enumerate(args)
        if _at(a, level) and type(a.data) is np.ndarray
    ]


def _debugging() -> bool:
    return observing.get() is not None


def _stacked(results: list, level: int, inputs: list = (), func: Any = None) -> Any:
    """The examples' ``results`` as one batch. Where each example's result is a view of a
    batched argument's example (``np.asarray(x)``, ``np.atleast_1d(x)``, a piece of
    ``np.split``), the batch is that view of the argument's data, as NumPy's aliasing
    asks; where no one view of the batch can follow the examples', a read-only copy whose
    writes are refused (``_check_writable``)."""
    first = results[0]
    if isinstance(first, (tuple, list)):
        parts = [_stacked([r[k] for r in results], level, inputs, func) for k in range(len(first))]
        if hasattr(first, "_fields"):
            return type(first)(*parts)
        return type(first)(parts)
    if type(first) is np.ndarray and first.base is not None:
        for batch, examples in inputs:
            if np.may_share_memory(first, examples[0]):
                view = _view_of(batch, examples, results)
                if view is not None:
                    return view
                return Batched(_detach(_stack_examples(results, func), func), level)
    out = Batched(_stack_examples(results, func), level)
    if type(first) is np.ndarray and first.ndim == 0:
        out._zero_d = True
    return out


def _stack_examples(results: list, func: Any) -> Any:
    shapes = {np.shape(r) for r in results}
    if len(shapes) > 1:
        name = "x[index]" if func is _index else function_name(func) if func else "a function"
        raise _NoBatch(
            f"vmap: {name} at "
            f"{_user_line()} gives the examples results of different shapes "
            f"({', '.join(map(str, sorted(shapes)))}), which no batch can hold: a boolean "
            "mask that differs between examples (x[mask], x[mask] = v), np.nonzero, "
            "np.unique; write it with shapes that are the same for every example "
            "(np.where(mask, v, x), a sum with where=mask)"
        )
    return np.stack(results)


def _view_of(batch: Batched, examples: list, results: list) -> Any:
    """The batch whose examples are ``results``, each the same view of the example of
    ``batch`` at its position; None where they are not all the same view."""
    if all(r is e for r, e in zip(results, examples)):
        return batch  # the argument itself (np.asarray(x) is x)
    first = results[0]
    offset = _address(first) - _address(examples[0])
    for r, e in zip(results, examples):
        if (
            type(r) is not np.ndarray
            or r.shape != first.shape
            or r.strides != first.strides
            or r.dtype != first.dtype
            or _address(r) - _address(e) != offset
        ):
            return None
    shape, strides = (len(results),) + first.shape, (batch.data.strides[0],) + first.strides
    owner = _owner(first)
    try:  # on the owner's buffer, so that the data's base is the owner, as a view's is
        data = np.ndarray(shape, first.dtype, owner, _address(first) - _address(owner), strides)
        data.flags.writeable = first.flags.writeable
    except (TypeError, ValueError, BufferError):
        data = np.lib.stride_tricks.as_strided(
            first, shape, strides, writeable=first.flags.writeable
        )
    return _zero_d_if(Batched(data, batch.level))


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


# -- in and out of the batch, recorded where the values are nodes -------------------------


@primitive
def batch_in(x: Any, axis: int, level: int) -> Any:
    """``x`` batched along ``axis`` at ``level``; on a node, a recorded call."""
    if isinstance(x, Node):
        return batch_in(x, axis, level)
    if axis or not isinstance(x, (np.ndarray, Batched)):
        x = np.moveaxis(x, axis, 0)
    return Batched(x, level)


@primitive
def batch_out(y: Any, axis: int, level: int, size: int) -> Any:
    """The batch of ``y`` at ``level`` as axis ``axis`` of a plain value (an unbatched
    ``y`` is broadcast ``size`` times)."""
    if isinstance(y, Node):
        return batch_out(y, axis, level, size)
    data = y.data if _at(y, level) else _broadcast_data(y, size)
    return np.moveaxis(data, 0, axis) if axis else data


@primitive
def broadcast(x: Any, level: int, size: int) -> Any:
    """An unbatched ``x`` as a batch of ``size`` copies at ``level``."""
    if isinstance(x, Node):
        return broadcast(x, level, size)
    return Batched(_broadcast_data(x, size), level)


@primitive
def batch_sum(y: Any, level: int) -> Any:
    """The sum over the batch at ``level``: the transpose of ``broadcast``."""
    if isinstance(y, Node):
        return batch_sum(y, level)
    if _at(y, level):
        return np.sum(y.data, axis=0)
    raise TypeError("batch_sum of a value that is not batched at its level")


@sensitivity(batch_in, 0)
def _(y, ybar, x, axis, level):
    return batch_out(ybar, axis, level, np.shape(value_of(x))[axis])


@sensitivity(batch_out, 0)
def _(y, ybar, x, axis, level, size):
    return batch_in(ybar, axis, level)


@sensitivity(broadcast, 0)
def _(y, ybar, x, level, size):
    if not _at(value_of(ybar), level):
        return ybar * size
    return batch_sum(ybar, level)


@sensitivity(batch_sum, 0)
def _(y, ybar, x, level):
    return broadcast(ybar, level, value_of(x).batch_size)


# Forward rules, in the engine's form (a leading axis of directions): all four are linear,
# so each pushes a tangent as it pushes a value, the directions one axis further in.
_engine_pushforward(batch_in, 0)(lambda y, xdot, x, axis, level: batch_in(xdot, axis + 1, level))
_engine_pushforward(batch_out, 0)(
    lambda y, xdot, x, axis, level, size: batch_out(xdot, axis + 1, level, size)
)
_engine_pushforward(broadcast, 0)(lambda y, xdot, x, level, size: broadcast(xdot, level, size))


@_engine_pushforward(batch_sum, 0)
def _(y, xdot, x, level):
    if not _at(value_of(xdot), level):
        return xdot * value_of(x).batch_size
    return batch_sum(xdot, level)


_OWN = (batch_in, batch_out, broadcast, batch_sum)
SHAPED.add(Batched)  # its .shape is one example's, as np.shape(x) answers
# a node holding a batch is written in place and has views, as one holding an ndarray
MEMORY[Batched] = _memory




# -- closures over nodes of outer tapes ------------------------------------------------------


def _batched_at(v: Any, level: int) -> bool:
    """Whether ``v``'s plain value holds the batch of ``level`` (at any depth)."""
    v = value_of(v)
    while isinstance(v, Batched):
        if v.level == level:
            return True
        if v.level < level:
            return False
        v = v.data
    return False


class _Broadcaster:
    """A rewriter of the context (``tape.observing``) during a ``vmap`` call: a Branch of
    a tape made before the call, whose value is batched at this level, with an argument
    that is not (a node the function closed over) gets that argument through a recorded
    ``broadcast``, so that the reverse pass sums its adjoint over the batch."""

    __slots__ = ("level", "size")

    def __init__(self, level: int, size: int) -> None:
        self.level, self.size = level, size

    def recorded(self, record: Any) -> None:
        tape = record.tape
        if isinstance(record, Branch):
            self._seal_batches(record)
        if (
            isinstance(record, Branch)
            and tape.level < self.level
            and not isinstance(tape, ForwardTape)
            and record.f not in _OWN
            and _batched_at(record.value, self.level)
        ):
            self._broadcast_arguments(record, tape)

    def _seal_batches(self, record: Any) -> None:
        # a batch handed to a recorded call as a constant is fingerprinted, as an ndarray
        # is, so that a write into it before the reverse pass is a MutationError
        for key, a in enumerate(record.args):
            if type(a) is Batched and a.level == self.level and type(a.data) is np.ndarray:
                record.seal = sealed(record.seal, key, a.data, record.tape)
        if record.kwargs:
            for key, a in record.kwargs.items():
                if type(a) is Batched and a.level == self.level and type(a.data) is np.ndarray:
                    record.seal = sealed(record.seal, key, a.data, record.tape)

    def _broadcast_arguments(self, record: Any, tape: Any) -> None:
        args = list(record.args)
        changed = False
        for i in record.node_args:
            a = args[i]
            if isinstance(a, Node):
                if a.tape is tape and not _batched_at(a, self.level):
                    args[i] = self._broadcast(record, tape, a)
                    changed = True
            else:
                elements = list(a)
                for j, b in enumerate(elements):
                    if isinstance(b, Node) and b.tape is tape and not _batched_at(b, self.level):
                        elements[j] = self._broadcast(record, tape, b)
                        changed = True
                args[i] = type(a)(elements)
        if changed:
            record.args = tuple(args)

    def _broadcast(self, record: Any, tape: Any, node: Any) -> Any:
        # the broadcast goes before the record that uses it, so that the reverse pass
        # (backwards) meets the record first; no rewriter rewrites a broadcast (_OWN)
        assert tape.records[-1] is record
        tape.records.pop()
        b = broadcast(node, self.level, self.size)
        record.pos = len(tape.records)
        tape.records.append(record)
        return b


# -- vmap --------------------------------------------------------------------------------


def _axes_tree(spec: Any, tree: Any, what: str, treedef: Any = None, count: int = -1) -> list:
    """``spec`` (an int, None, or a tree matching ``tree``'s structure, or a prefix of
    it) as one axis per leaf of ``tree``; ``treedef`` and ``count``, where given, are
    ``tree``'s structure and number of leaves (else it is flattened here)."""
    if count < 0:
        leaves, treedef = tree_flatten(tree)
        count = len(leaves)
    if spec is None or isinstance(spec, (int, np.integer)):
        return [spec] * count
    if treedef is None:
        raise ValueError(f"vmap: {what} {spec!r} does not match a single array")
    (kind, info), defs = treedef
    if kind == "dict":
        if not isinstance(spec, dict) or set(spec) != set(info[1]):
            raise ValueError(f"vmap: {what} {spec!r} does not match the structure of {tree!r}")
        children = [spec[k] for k in info[1]]
        subtrees = [tree[k] for k in info[1]]
    else:
        if not isinstance(spec, (tuple, list)) or len(spec) != len(defs):
            raise ValueError(
                f"vmap: {what} {spec!r} does not match the structure of the value "
                f"({len(defs)} entries)"
            )
        children = list(spec)
        subtrees = list(tree)
    out: list = []
    for s, t, (n, d) in zip(children, subtrees, defs):
        out += _axes_tree(s, t, what, d, n)
    return out


def _of_an_argument(data: np.ndarray, leaves: list) -> bool:
    """Whether ``data`` is an ndarray argument's memory (the argument, or a view of it)."""
    owner = data if data.base is None else _owner(data)
    return any(type(a) is np.ndarray and (a is owner or _owner(a) is owner) for a in leaves)


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, *, report: bool = False) -> Callable:
    """``f``, written for one example, run over a batch: ``vmap(f)(X)`` is
    ``np.stack([f(x) for x in X])``, computed with NumPy's own vectorisation.

    ``in_axes`` says where each argument's batch axis is, as in JAX: an int for all
    arguments, ``None`` for an argument that is the same for every example, or a tuple
    (one entry per positional argument, each an int, None, or a container matching
    that argument's structure). ``out_axes`` says where the batch goes in the outputs,
    likewise (``None`` for an output that does not depend on the batch). Arguments and
    outputs may be tuples, lists, dicts and namedtuples of arrays; a ``None`` leaf in
    either is passed through as ``None``, whatever its axis.

    It composes with the other transforms both ways round: ``vmap(grad(f))`` gives
    per-example gradients, ``grad`` of a function that calls ``vmap`` differentiates
    through the batch, and ``vmap(vmap(f))``, ``vmap(jvp(...))``, ``jacobian(vmap(f))``,
    ``checkpoint``, ``stop_gradient`` and ``at`` work inside. Python control flow that
    depends on a batched value raises ``BatchedControlFlowError`` naming the line.

    A NumPy function with no batching rule runs once per example (the loop fallback);
    ``report=True`` (or running under ``tape.debug()``) warns where that happens.

    For speed, map a compiled gradient, ``vmap(compile_grad(f, *one_example))``: its
    program is recorded once on the batch and replayed for every later batch of the same
    shapes, without the tape's per-operation cost (docs/guide/vmap.md, "Speed").

    >>> import numpy as np
    >>> from tape import vmap, grad
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> vmap(lambda x: x @ x)(X)
    array([ 5., 25., 61.])
    >>> w = np.array([0.5, -1.0])
    >>> loss = lambda w, x: np.tanh(x @ w) ** 2
    >>> per_example = vmap(grad(loss, argnums=0), in_axes=(None, 0))(w, X)
    >>> per_example.shape
    (3, 2)
    >>> np.allclose(per_example[1], grad(loss, argnums=0)(w, X[1]))
    True
    """

    @functools.wraps(f)
    def batched(*args: Any, **kwargs: Any) -> Any:
        spec = in_axes
        if isinstance(spec, list):
            spec = tuple(spec)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(
                f"vmap: in_axes has {len(spec)} entries but {getattr(f, '__name__', 'f')} "
                f"was called with {len(args)} positional arguments"
            )
        if isinstance(spec, dict):
            raise TypeError(
                "vmap: in_axes is an int, None, or a tuple with one entry per positional "
                "argument (a dict goes inside that tuple, for a dict argument)"
            )
        leaves, treedef = tree_flatten(args)
        axes = _axes_tree(spec, args, "in_axes", treedef, len(leaves)) if args else []
        sizes = set()
        for leaf, axis in zip(leaves, axes):
            if axis is None or leaf is None:  # a None leaf is an empty part: passed through
                continue
            shape = leaf.shape if type(leaf) is np.ndarray else np.shape(value_of(leaf))
            if not -len(shape) <= axis < len(shape):
                raise ValueError(
                    f"vmap: in_axes {axis} is out of range for an argument of shape {shape}"
                )
            sizes.add(shape[axis])
        if not sizes:
            raise ValueError("vmap: no argument is batched (in_axes is None for all of them)")
        if len(sizes) > 1:
            raise ValueError(
                f"vmap: the batched arguments disagree on the batch size: {sorted(sizes)}"
            )
        size = sizes.pop()
        level = Tape().level
        ins = []
        for leaf, axis in zip(leaves, axes):
            if axis is None and type(leaf) is np.ndarray and leaf.flags.writeable:
                # the same array for every example: each example's program would write it
                # in turn, which one batched write cannot follow, so writes are refused
                shared = leaf.view()
                shared.flags.writeable = False
                ins.append(shared)
            elif axis is None or leaf is None:
                ins.append(leaf)
            elif type(leaf) is np.ndarray and axis % leaf.ndim == 0:
                ins.append(Batched(leaf, level))  # what batch_in does with it, directly
            else:
                ins.append(batch_in(leaf, axis % np.ndim(value_of(leaf)), level))
        token = rewrite(_Broadcaster(level, size))
        report_token = _reporting.set(report or _reporting.get())
        try:
            out = f(*tree_unflatten(treedef, ins), **kwargs)
        finally:
            _reporting.reset(report_token)
            unobserve(token)
        outs, out_def = tree_flatten(out)
        oaxes = _axes_tree(out_axes, out, "out_axes", out_def, len(outs))
        results = []
        for o, axis in zip(outs, oaxes):
            if type(o) is Batched and o.level == level and axis in (0, -1 - o.ndim):
                data = o.data  # what batch_out does with it, directly
                if type(data) is np.ndarray and _of_an_argument(data, leaves):
                    data = data.copy()  # a new array, as np.stack makes, not the argument's
                results.append(data)
                continue
            if axis is None:
                if _batched_at(o, level):
                    raise ValueError(
                        "vmap: out_axes is None for an output that depends on the batch"
                    )
                results.append(o)
                continue
            if o is None:
                results.append(None)
                continue
            if not _batched_at(o, level) and not isinstance(o, (np.ndarray, Node)):
                o = np.asarray(o, dtype=np.result_type(o))
            ndim = np.ndim(value_of(o)) if not _batched_at(o, level) else value_of(o).ndim
            results.append(batch_out(o, axis % (ndim + 1), level, size))
        return tree_unflatten(out_def, results)

    return batched
