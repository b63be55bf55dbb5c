"""``vmap``: a function written for one example, run over a batch.

A batched value is a ``Batched``: an array whose leading axis is the batch, and which
shows the rest, one example's shape, to the code that uses it (``x.shape`` is one
example's shape). It speaks NumPy's protocols (``__array_ufunc__``,
``__array_function__``) and answers each call with NumPy's own vectorisation: ufuncs
broadcast over the batch, reductions and shape functions shift their axes by one,
``matmul``, ``einsum`` and ``linalg`` take the batch as a stack. A function without
such a rule is run once per example and the results stacked (the loop fallback, which
``vmap(..., report=True)`` and ``tape.debug()`` report).

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
import inspect
import math
import string
import sys
import warnings
import weakref
from contextvars import ContextVar
from typing import Any, Callable

import numpy as np

from sensitivities import batching_rule_of as _plain_batching_rule_of
from sensitivities import broadcast_to as _strided_broadcast
from sensitivities import primitive, sensitivity
from sensitivities.batching import advanced_axes_first, batched_form
from sensitivities.registry import function_name, lift, shifted_axis, value_of
from sensitivities.registry import pushforward as _engine_pushforward

from ..core.mutation import sealed
from ..core.node import Node
from ..core.observing import observing, rewrite, unobserve
from ..core.records import Branch, Tape
from ..core.reverse import SHAPED
from ..core.trees import tree_flatten, tree_unflatten
from ..core.versions import MEMORY, memory_of
from .forward import ForwardTape

__all__ = ["vmap", "Batched", "BatchedControlFlowError", "VmapFallbackWarning"]


class BatchedControlFlowError(TypeError):
    """Python control flow (``if``, ``while``, ``bool``, ``float``) met a batched value,
    which holds one value per example: there is no single answer.

    >>> import numpy as np
    >>> from tape import vmap
    >>> def relu(x):
    ...     return x if x > 0 else 0.0
    >>> vmap(relu)(np.array([1.0, -1.0]))
    Traceback (most recent call last):
    tape.transforms.vmap.BatchedControlFlowError: ...
    """


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


class Batched:
    """A batch of values: ``data`` holds them along its leading axis; ``shape``,
    ``ndim`` and ``size`` are one example's. Made by ``vmap``; see the module docstring.

    >>> import numpy as np
    >>> from tape.transforms.vmap import Batched
    >>> b = Batched(np.arange(6.0).reshape(3, 2), level=-1)
    >>> b.shape, np.sum(b).data
    ((2,), array([1., 5., 9.]))
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
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def batch_size(self) -> int:
        return self.data.shape[0]

    @property
    def T(self) -> Any:
        return np.transpose(self)

    @property
    def mT(self) -> Any:
        return np.swapaxes(self, -1, -2)

    @property
    def real(self) -> Any:
        return np.real(self)

    @property
    def imag(self) -> Any:
        return np.imag(self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a batched scalar")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

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

    def item(self, *args: Any) -> Any:
        self._no_single_value(".item()")

    def tolist(self) -> Any:
        self._no_single_value(".tolist()")

    # -- NumPy's protocols --------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs and ufunc.signature is None:
            result = _ufunc_call(ufunc, inputs)  # np.sin(x), x * y: the common call, first
            if result is not _SLOW:
                return result
        elif ufunc is np.matmul and method == "__call__" and not kwargs and len(inputs) == 2:
            level = _pair_level(*inputs)  # x @ W: the next most common
            if level is not None:
                return _matmul(ufunc, inputs, kwargs, level)
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
                raise TypeError(
                    f"vmap: np.{ufunc.__name__}(..., out=) at {_user_line()} writes batched "
                    f"values into {type(target).__name__}, which is the same for every "
                    "example (each would write its own value into it); build a new array "
                    f"instead (y = np.{ufunc.__name__}(...))"
                )
            if _scalars(target):
                raise TypeError("return arrays must be of ArrayType")  # NumPy's, for a scalar
            return _into(target, ufunc, inputs, kwargs)
        if method == "__call__":
            if ufunc.signature is not None:  # a generalised ufunc (matmul, vecdot)
                rule = _RULES.get(ufunc)
                if rule is not None:
                    return rule(ufunc, inputs, kwargs, level)
                return _loop(ufunc, inputs, kwargs, level)
            return _elementwise(ufunc, inputs, kwargs, level)
        if method == "at":  # in place, example by example (np.add.at into a fresh array)
            target, *rest = inputs
            if not isinstance(target, Batched):
                raise TypeError(
                    f"vmap: {ufunc.__name__}.at of batched values into "
                    f"{type(target).__name__}; build a new array instead"
                )
            _check_writable(target, "item assignment")
            for b in range(target.batch_size):
                ufunc.at(target.data[b, ...], *_example(rest, level, b))
            return None
        if method in ("reduce", "accumulate", "reduceat") and len(inputs) >= 1:
            if method != "reduceat":
                return _shifted_axis(getattr(ufunc, method), inputs, kwargs, level, default=0)
        return _loop(getattr(ufunc, method), inputs, kwargs, level)

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
        rule = _RULES.get(func)
        if rule is not None:
            return rule(func, args, kwargs, level)
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
        rule = _RULES.get(primitive)
        if rule is None:
            rule = _plain_rule(primitive)
        if rule is not None:
            return rule(primitive, args, kwargs, level)
        return _loop(primitive, args, kwargs, level)

    # -- operators: the ufuncs they mean ---------------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        return _getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = value`` in place, as NumPy does it to each example: every name
        bound to ``x`` and every view of it sees the write (``_set_item``)."""
        _set_item(self, index, value)

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return np.reshape(self, shape, **kwargs)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        data = self.data.astype(dtype, *args, **kwargs)
        if data is self.data:  # copy=False, nothing to convert: the array itself, as NumPy
            return self
        return _like_examples(self, data)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        return _like_examples(self, np.copy(self.data))

    def conj(self) -> Any:
        return np.conjugate(self)

    conjugate = conj

    def ravel(self, *args: Any, **kwargs: Any) -> Any:
        return np.ravel(self, *args, **kwargs)  # order= too, as ndarray's

    def flatten(self, *args: Any, **kwargs: Any) -> Any:
        return np.copy(np.ravel(self, *args, **kwargs))  # a copy, in the order asked

    def transpose(self, *axes: Any) -> Any:
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return np.transpose(self, axes or None)

    def swapaxes(self, a: int, b: int) -> Any:
        return np.swapaxes(self, a, b)

    def squeeze(self, axis: Any = None) -> Any:
        return np.squeeze(self, axis)

    def dot(self, other: Any) -> Any:
        return np.dot(self, other)

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
        self.data.sort(_one_axis(axis, self.ndim), kind, order)

    def partition(self, kth: Any, axis: int = -1, kind: str = "introselect", order=None) -> None:
        _check_writable(self, "item assignment")
        self.data.partition(kth, _one_axis(axis, self.ndim), kind, order)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        _check_writable(self, "item assignment")
        for b in range(self.batch_size):  # np.put comes here: a method, example by example
            index, value = _example((indices, values), self.level, b)
            self.data[b, ...].put(index, value, mode)


def _method(f: Callable, name: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return f(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("sum", "mean", "prod", "max", "min", "std", "var", "cumsum", "cumprod", "argmax",
              "argmin", "any", "all", "clip", "round", "trace", "diagonal", "repeat"):  # fmt: skip
    setattr(Batched, _name, _method(getattr(np, _name), _name))


def _binary(ufunc: np.ufunc, name: str, reflected: bool = False) -> Callable:
    def op(self: Any, other: Any) -> Any:
        if isinstance(other, Node):
            return NotImplemented  # the node's reflected operator records it
        inputs = (other, self) if reflected else (self, other)
        if ufunc.signature is None:  # what NumPy's dispatch would come back to, directly
            result = _ufunc_call(ufunc, inputs)
            if result is not _SLOW:
                return result
        return ufunc(*inputs)

    op.__name__ = name
    return op


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                      ("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal),
                      ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                      ("lshift", np.left_shift), ("rshift", np.right_shift)):  # fmt: skip
    setattr(Batched, f"__{_name}__", _binary(_ufunc, f"__{_name}__"))
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Batched, f"__r{_name}__", _binary(_ufunc, f"__r{_name}__", reflected=True))
Batched.__neg__ = lambda self: np.negative(self)  # type: ignore[method-assign]
Batched.__pos__ = lambda self: self  # type: ignore[method-assign]
Batched.__abs__ = lambda self: np.abs(self)  # type: ignore[method-assign]
Batched.__invert__ = lambda self: np.invert(self)  # type: ignore[method-assign]
Batched.__divmod__ = lambda self, other: (self // other, self % other)  # type: ignore[attr-defined]
Batched.__rdivmod__ = lambda self, other: (other // self, other % self)  # type: ignore[attr-defined]
Batched.__hash__ = object.__hash__  # type: ignore[method-assign]


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


def _viewed(x: Batched) -> Any:
    """The data a view of ``x`` is made from: a copy where each example is a NumPy scalar,
    of which NumPy makes a new array, not a view."""
    return x.data.copy() if _scalars(x) else x.data


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
            raise ValueError(
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
        raise TypeError(
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
        raise TypeError(
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
            product = _outer_product(da, db)
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


def _plain_rule(f: Callable) -> Callable | None:
    """The batching rule of ``f`` from ``sensitivities.batching`` (plain NumPy, batch
    first), adapted to batched values; None where there is none."""
    rule = _plain_batching_rule_of(f)
    if rule is None:
        return None

    def adapted(func, args, kwargs, level):
        batched = tuple(_at(a, level) for a in args)
        if _is_batched_anywhere(tuple(kwargs.values()), level) or any(
            not flag and _is_batched_anywhere(a, level) for a, flag in zip(args, batched)
        ):
            return _loop(func, args, kwargs, level)
        out = rule(
            tuple(a.data if flag else a for a, flag in zip(args, batched)), batched, **kwargs
        )
        if out is NotImplemented:
            return _loop(func, args, kwargs, level)
        return _wrap(out, level)

    return adapted


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
    return lift(a.data, rank + 1)


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


_axis = _one_axis = shifted_axis  # a logical axis (int, tuple or None: all) of the data


# -- batching rules -----------------------------------------------------------------------


def _elementwise(f: Callable, inputs: tuple, kwargs: dict, level: int) -> Any:
    """A broadcasting function: every batched argument's data padded to the same rank,
    the unbatched ones as they are (they broadcast from the right)."""
    values = list(inputs) + list(kwargs.values())
    rank = max((_logical_ndim(a, level) for a in values), default=0)
    args = [_padded(a, rank) if _at(a, level) else a for a in inputs]
    if f is np.multiply and not kwargs and len(args) == 2:
        product = _outer_product(args[0], args[1])
        if product is not None:
            return Batched(product, level)
    kw = {k: (_padded(v, rank) if _at(v, level) else v) for k, v in kwargs.items()}
    return _wrap(f(*args, **kw), level)


def _outer_product(a: Any, b: Any) -> Any:
    """``a * b`` by ``einsum`` where it is a large outer product (batched per-example
    gradients of a matmul: ``x[:, :, None] * ybar[:, None, :]``), which NumPy's
    broadcasting multiplies at a third of einsum's speed; None where it is not."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != b.ndim:
        return None
    if a.size * b.size < 1 << 15 or a.shape == b.shape:
        return None  # small, or not an outer product at all
    sa, sb = a.shape, b.shape
    size, outer = 1, False
    for n, m in zip(sa, sb):
        if n != m:
            if n != 1 and m != 1:
                return None  # NumPy's error, from NumPy
            outer = True
        size *= max(n, m)
    if not outer or size < 1 << 15 or a.ndim > 20:
        return None
    if a.dtype != b.dtype or a.dtype.kind not in "fc":
        return None
    ta, tb, out, shape_a, shape_b = [], [], [], [], []
    for k, (n, m) in enumerate(zip(sa, sb)):
        letter = string.ascii_letters[k]
        if n == m or m == 1:
            ta.append(letter)
            shape_a.append(n)
        if n == m or n == 1:
            tb.append(letter)
            shape_b.append(m)
        out.append(letter)
    spec = "".join(ta) + "," + "".join(tb) + "->" + "".join(out)
    result = np.einsum(spec, a.reshape(shape_a), b.reshape(shape_b))
    return result.reshape(tuple(max(n, m) for n, m in zip(sa, sb)))


def multiply_data(a: Any, b: Any) -> Any:
    """``a * b`` of two batches' data (or a batch's and a plain value), as a batched
    multiply computes it: a large outer product by ``einsum``."""
    product = _outer_product(a, b)
    return a * b if product is None else product


def _elementwise_function(func, args, kwargs, level):
    return _elementwise(func, args, kwargs, level)


_SIGNATURES: dict = {}


class _Bound:
    """A call's arguments by name, as ``inspect.Signature.bind`` gives them (``arguments``,
    ``signature``, ``args``, ``kwargs``), bound without ``bind``'s cost in the common case:
    the arguments named by position and keyword, all required ones given."""

    __slots__ = ("signature", "arguments", "positional")

    def __init__(self, signature: inspect.Signature, arguments: dict, positional: list) -> None:
        self.signature, self.arguments, self.positional = signature, arguments, positional

    @property
    def args(self) -> tuple:
        args = []
        for name in self.positional:  # by position up to the first one not given
            if name not in self.arguments:
                break
            args.append(self.arguments[name])
        return tuple(args)

    @property
    def kwargs(self) -> dict:
        given = self.positional[: len(self.args)]
        return {k: v for k, v in self.arguments.items() if k not in given}


def _bound(func: Callable, args: tuple, kwargs: dict) -> Any:
    info = _SIGNATURES.get(func)
    if info is None:
        sig = inspect.signature(func)
        kinds = inspect.Parameter
        params = sig.parameters.values()
        simple = all(p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD) for p in params)
        by_position = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        positional = [p.name for p in params if p.kind in by_position]
        keywords = {p.name for p in params if p.kind != kinds.POSITIONAL_ONLY}
        required = [p.name for p in params if p.default is kinds.empty]
        info = _SIGNATURES[func] = (sig, simple, positional, keywords, required)
    sig, simple, positional, keywords, required = info
    if simple and len(args) <= len(positional):
        arguments = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k not in keywords or k in arguments:
                break  # an error, which bind words
            arguments[k] = v
        else:
            if all(name in arguments for name in required):
                return _Bound(sig, arguments, positional)
    return sig.bind(*args, **kwargs)


def _call_bound(func: Callable, bound: Any) -> Any:
    return func(*bound.args, **bound.kwargs)


def _shifted_axis(func, args, kwargs, level, default=None, flattens=False, name="axis"):
    """A function of one array and an ``axis`` (a reduction, a scan, a sort): the data
    with the axis shifted past the batch. ``flattens``: ``axis=None`` means the flattened
    array (``cumsum``, ``argmax``), else all axes (``sum``)."""
    x = args[0]
    if len(args) == 1 and type(x) is Batched and x.level == level:
        axis = kwargs.get(name, default)  # np.sum(x, axis=1, keepdims=True): the common call
        kind = type(axis)
        if (kind is int or kind is tuple or (axis is None and not flattens)) and not (
            kwargs and _is_batched_anywhere(tuple(kwargs.values()), level)
        ):
            # the axes shifted past the batch; None: all of one example's (none of a scalar's)
            new_axis = _axis(axis, x.data.ndim - 1)
            return _wrap(func(x.data, **{**kwargs, name: new_axis}), level)
    rest = list(args[1:])
    kwargs = dict(kwargs)
    if not _at(x, level):
        return _loop(func, args, kwargs, level)
    if rest:
        axis = rest.pop(0)
        had_position = True
    else:
        axis = kwargs.pop(name, default)
        had_position = False
    if any(_at(a, level) for a in rest) or any(_at(v, level) for v in kwargs.values()):
        return _loop(func, args, kwargs if had_position else dict(kwargs, **{name: axis}), level)
    data = x.data
    ndim = np.ndim(data) - 1
    if axis is None and flattens:
        data = np.reshape(data, (np.shape(data)[0], -1))
        new_axis: Any = 1
    elif axis is None and ndim == 0:
        new_axis = None if not flattens else 1
        if new_axis is None:
            # a reduction over all axes of a scalar: over none of the data's
            new_axis = ()
    else:
        new_axis = _axis(axis, ndim)
    if had_position:
        result = func(data, new_axis, *rest, **kwargs)
    else:
        result = func(data, **{name: new_axis}, **kwargs)
    return _wrap(result, level)


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
REDUCTIONS = _UFUNC_REDUCTIONS  # compiled replay lowers the same calls the same way


def _reduction(default=None, flattens=False, name="axis"):
    def rule(func, args, kwargs, level):
        return _shifted_axis(func, args, kwargs, level, default, flattens, name)

    return rule


def _batched_all(args: tuple, level: int) -> tuple[list, int]:
    n = _size(args, level)
    return [a.data if _at(a, level) else _broadcast_data(a, n) for a in args], n


def _broadcast_data(a: Any, n: int) -> Any:
    return np.broadcast_to(np.expand_dims(a, 0), (n,) + np.shape(a))


def _reshape(func, args, kwargs, level):
    bound = _bound(func, args, kwargs)
    a = bound.arguments.pop("a")
    shape = bound.arguments.pop("shape", None)
    if shape is None:
        shape = bound.arguments.pop("newshape", None)
    if not _at(a, level) or _is_batched_anywhere(shape, level):
        return _loop(func, args, kwargs, level)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    order = bound.arguments.get("order", "C")
    data = np.reshape(_viewed(a), (a.batch_size,) + shape, order=order)
    return _zero_d_if(Batched(data, level))


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


def _transpose(func, args, kwargs, level):
    bound = _bound(func, args, kwargs)
    a = bound.arguments["a"]
    axes = bound.arguments.get("axes")
    ndim = np.ndim(a.data) - 1
    if axes is None:
        axes = tuple(range(ndim - 1, -1, -1))
    axes = (0,) + tuple(int(k) % max(ndim, 1) + 1 for k in axes)
    return _zero_d_if(Batched(np.transpose(_viewed(a), axes), level))


def _axes_rule(*names: str, extra: int = 0):
    """A function of one array whose arguments ``names`` are axes of it (``moveaxis``'s
    source and destination, ``swapaxes``, ``diagonal``'s axis1 and axis2); ``extra``
    for functions that add axes (``expand_dims``: the result's rank)."""

    def rule(func, args, kwargs, level):
        bound = _bound(func, args, kwargs)
        params = list(bound.signature.parameters)
        first = params[0]
        a = bound.arguments[first]
        if not _at(a, level) or any(
            _at(v, level) for k, v in bound.arguments.items() if k != first
        ):
            return _loop(func, args, kwargs, level)
        ndim = np.ndim(a.data) - 1
        rank = ndim + (extra(bound) if callable(extra) else extra)
        for name in names:
            value = bound.arguments.get(name, bound.signature.parameters[name].default)
            if value is None or value is inspect.Parameter.empty:
                return _loop(func, args, kwargs, level)  # None: the flattened array
            bound.arguments[name] = _axis(value, rank)
        bound.arguments[first] = _viewed(a)
        return _wrap(_call_bound(func, bound), level)

    return rule


def _expand_dims(func, args, kwargs, level):
    if len(args) == 2 and not kwargs and _at(args[0], level) and type(args[1]) is int:
        data = _viewed(args[0])  # one new axis: an index with None, a view as NumPy's is
        return Batched(data[(slice(None),) * _one_axis(args[1], data.ndim) + (None,)], level)
    return _expand_dims_bound(func, args, kwargs, level)


def _expand_rank(bound) -> int:
    axis = bound.arguments["axis"]
    return len(axis) if isinstance(axis, (tuple, list)) else 1


def _squeeze(func, args, kwargs, level):
    bound = _bound(func, args, kwargs)
    a = bound.arguments["a"]
    axis = bound.arguments.get("axis")
    shape = a.shape
    if axis is None:
        axis = tuple(k for k, n in enumerate(shape) if n == 1)
    return _zero_d_if(Batched(np.squeeze(_viewed(a), _axis(axis, len(shape))), level))


def _ravel(func, args, kwargs, level):
    a = args[0]
    order = args[1] if len(args) > 1 else kwargs.get("order", "C")
    if (
        order not in ("C", "A", "K")
        or len(args) + len(kwargs) > 2
        or type(a.data) is not np.ndarray
    ):
        return _loop(func, args, kwargs, level)
    data = np.reshape(_viewed(a), (a.batch_size, -1))
    if data.base is not None:  # a view of the batch: where NumPy copies each example, a copy
        example = a.data[0]
        if not example.flags.c_contiguous and not np.may_share_memory(
            np.ravel(example, order), example
        ):
            data = data.copy()
    return Batched(data, level)


def _broadcast_to(func, args, kwargs, level):
    if len(args) == 2 and not kwargs and type(args[1]) is tuple:  # the common call
        a, shape = args
    else:
        bound = _bound(func, args, kwargs)
        a, shape = bound.arguments["array"], bound.arguments["shape"]
    if _is_batched_anywhere(shape, level):
        return _loop(func, args, kwargs, level)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    data = _padded(a, len(shape))
    return Batched(_strided_broadcast(data, (a.batch_size,) + shape), level)


def _joined(func, args, kwargs, level, stacking: bool):
    bound = _bound(func, args, kwargs)
    arrays = list(bound.arguments["arrays"])
    axis = bound.arguments.get("axis", 0)
    n = _size(arrays, level)
    if any(_is_batched_anywhere(v, level) for k, v in bound.arguments.items() if k != "arrays"):
        return _loop(func, args, kwargs, level)
    if axis is None and not stacking:
        arrays = [np.ravel(a) for a in arrays]
        axis = 0
    ndim = max(_logical_ndim(a, level) for a in arrays)
    datas = [a.data if _at(a, level) else _broadcast_data(a, n) for a in arrays]
    bound.arguments["arrays"] = datas
    bound.arguments["axis"] = _one_axis(axis, ndim + 1 if stacking else ndim)
    return Batched(_call_bound(func, bound), level)


def _concatenate(func, args, kwargs, level):
    return _joined(func, args, kwargs, level, stacking=False)


def _stack(func, args, kwargs, level):
    return _joined(func, args, kwargs, level, stacking=True)


def _where(func, args, kwargs, level):
    if len(args) + len(kwargs) != 3:
        return _loop(func, args, kwargs, level)
    return _elementwise(func, args, kwargs, level)


def _like(func, args, kwargs, level):
    if len(args) == 1 and not kwargs and func is not np.full_like:  # np.ones_like(x)
        return _zero_d_if(Batched(func(args[0].data), level))
    bound = _bound(func, args, kwargs)
    a = bound.arguments.pop("a" if "a" in bound.arguments else "prototype")
    if bound.arguments.get("shape") is not None:
        return _loop(func, args, kwargs, level)
    if any(_at(v, level) for v in bound.arguments.values()):
        return _loop(func, args, kwargs, level)
    return _zero_d_if(Batched(func(a.data, *bound.args[1:], **bound.kwargs), level))


def _copy(func, args, kwargs, level):
    return _zero_d_if(Batched(np.copy(args[0].data), level))


def _matmul_operands(a: Any, b: Any, level: int) -> tuple[Any, Any, bool, bool, int]:
    """The operands of a batched matmul: 1-d ones made matrices (to be squeezed after),
    batched ones padded to a common rank so that the batch axes line up."""
    a_vec = _logical_ndim(a, level) == 1
    b_vec = _logical_ndim(b, level) == 1
    da = a.data if _at(a, level) else a
    db = b.data if _at(b, level) else b
    if a_vec:
        da = np.expand_dims(da, -2)
    if b_vec:
        db = np.expand_dims(db, -1)
    ra = _logical_ndim(a, level) + a_vec
    rb = _logical_ndim(b, level) + b_vec
    rank = max(ra, rb)
    if _at(a, level) and ra < rank:
        s = np.shape(da)
        da = np.reshape(da, s[:1] + (1,) * (rank - ra) + s[1:])
    if _at(b, level) and rb < rank:
        s = np.shape(db)
        db = np.reshape(db, s[:1] + (1,) * (rank - rb) + s[1:])
    return da, db, a_vec, b_vec, rank


def _matmul(func, args, kwargs, level):
    if len(args) != 2 or kwargs:
        return _loop(func, args, kwargs, level)
    a, b = args
    na, nb = _logical_ndim(a, level), _logical_ndim(b, level)
    if na == 0 or nb == 0:
        raise ValueError("matmul: input operand does not have enough dimensions")
    product = _one_product(a, b, na, nb, level)
    if product is not None:
        return Batched(product, level)
    da, db, a_vec, b_vec, _ = _matmul_operands(a, b, level)
    out = np.matmul(da, db)
    if b_vec:
        out = out[..., 0]
    if a_vec:
        out = out[..., 0, :] if not b_vec else out[..., 0]
    return Batched(out, level)


def _one_product(a: Any, b: Any, na: int, nb: int, level: int) -> Any:
    """A batched matmul with one matrix the same for every example, as one matrix
    product over all the examples' rows (a stack of vector-matrix products, which NumPy
    runs one by one, is several times slower); None where it is not that."""
    if _at(a, level) and type(b) is np.ndarray and nb == 2:
        da = a.data
        if type(da) is not np.ndarray:
            return None
        if na == 1:  # x @ W, x one vector per example
            return np.matmul(da, b)
        rows = math.prod(da.shape[:-1])  # every example's rows, stacked
        return np.matmul(da.reshape(rows, da.shape[-1]), b).reshape(da.shape[:-1] + b.shape[1:])
    if _at(b, level) and type(a) is np.ndarray and na == 2:
        db = b.data
        if type(db) is not np.ndarray:
            return None
        if nb == 1:  # W @ v, v one vector per example: (V W^T), one row per example
            return np.matmul(db, a.T)
        if nb == 2 and db.shape[-1] == 1:  # W @ v[:, None]
            return np.matmul(db[..., 0], a.T)[..., None]
    if _at(a, level) and _at(b, level) and na == nb and na >= 2:
        return np.matmul(a.data, b.data)  # a stack of products, batch first in both
    return None


def _dot(func, args, kwargs, level):
    if len(args) != 2 or kwargs:
        return _loop(func, args, kwargs, level)
    a, b = args
    na, nb = _logical_ndim(a, level), _logical_ndim(b, level)
    if na == 0 or nb == 0:
        return _elementwise(np.multiply, (a, b), {}, level)
    if nb <= 2:
        return _matmul(np.matmul, (a, b), {}, level)
    return _loop(func, args, kwargs, level)


def _inner(func, args, kwargs, level):
    a, b = args
    if _logical_ndim(a, level) == 1 and _logical_ndim(b, level) == 1:
        return _matmul(np.matmul, (a, b), {}, level)
    return _loop(func, args, kwargs, level)


def _outer(func, args, kwargs, level):
    a, b = args
    da = np.reshape(a.data, (a.batch_size, -1, 1)) if _at(a, level) else np.reshape(a, (-1, 1))
    db = np.reshape(b.data, (b.batch_size, 1, -1)) if _at(b, level) else np.reshape(b, (1, -1))
    return Batched(da * db, level)


def _einsum(func, args, kwargs, level):
    if not args or not isinstance(args[0], str) or kwargs.get("out") is not None:
        return _loop(func, args, kwargs, level)
    subscripts = args[0].replace(" ", "")
    operands = list(args[1:])
    if "->" in subscripts:
        inputs, output = subscripts.split("->")
    else:
        inputs = subscripts
        letters = inputs.replace(",", "").replace(".", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        if "..." in inputs:
            output = "..." + output
    terms = inputs.split(",")
    free = [c for c in string.ascii_letters if c not in subscripts]
    if len(terms) != len(operands) or not free:
        return _loop(func, args, kwargs, level)
    letter = free[0]
    datas = []
    for k, op in enumerate(operands):
        if _at(op, level):
            datas.append(op.data)
            terms[k] = letter + terms[k]
        else:
            datas.append(op)
    spec = ",".join(terms) + "->" + letter + output
    return Batched(np.einsum(spec, *datas, **kwargs), level)


def _core_matrix(func, args, kwargs, level):
    """A ``linalg`` function of stacks of matrices, batched over the stack."""
    a = args[0]
    if not _at(a, level) or any(_at(v, level) for v in args[1:] + tuple(kwargs.values())):
        return _loop(func, args, kwargs, level)
    return _wrap(func(a.data, *args[1:], **kwargs), level)


def _solve(func, args, kwargs, level):
    a, b = args[0], args[1]
    if kwargs or len(args) != 2:
        return _loop(func, args, kwargs, level)
    vector = _logical_ndim(b, level) == 1
    da = a.data if _at(a, level) else a
    db = b.data if _at(b, level) else b
    n = _size(args, level)
    if not _at(a, level):
        da = _broadcast_data(da, n)
    if not _at(b, level):
        db = _broadcast_data(db, n)
    if vector:
        db = db[..., None]
    # the stacks of one example broadcast from the right: line them up after the batch
    while np.ndim(db) < np.ndim(da):
        db = np.expand_dims(db, 1)
    while np.ndim(da) < np.ndim(db):
        da = np.expand_dims(da, 1)
    out = np.linalg.solve(da, db)
    return Batched(out[..., 0] if vector else out, level)


def _norm(func, args, kwargs, level):
    bound = _bound(func, args, kwargs)
    x = bound.arguments.pop("x")
    ord = bound.arguments.get("ord")
    axis = bound.arguments.get("axis")
    keepdims = bound.arguments.get("keepdims", False)
    if not _at(x, level) or _at(ord, level):
        return _loop(func, args, kwargs, level)
    ndim = np.ndim(x.data) - 1
    data = x.data
    if axis is None:
        if ord is None:
            if keepdims:
                return _loop(func, args, kwargs, level)
            data = np.reshape(data, (x.batch_size, -1))
            return Batched(np.linalg.norm(data, axis=1), level)
        axis = tuple(range(ndim))
    return Batched(np.linalg.norm(data, ord=ord, axis=_axis(axis, ndim), keepdims=keepdims), level)


def _query(func, args, kwargs, level):
    """A function of shapes and dtypes only (``np.shape``, ``np.result_type``): asked of
    one example."""
    return func(*_example(args, level, 0), **_example_kw(kwargs, level, 0))


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


def _shape_query(func, args, kwargs, level):
    a = args[0]
    if func is np.shape:
        return a.shape
    if func is np.ndim:
        return a.ndim
    if func is np.size:
        axis = args[1] if len(args) > 1 else kwargs.get("axis")
        return a.size if axis is None else a.shape[axis]
    return _query(func, args, kwargs, level)


def _created(func, args, kwargs, level):
    """``np.asarray(c, like=x)`` and the like: a constant, the same for every example."""
    kwargs = {k: v for k, v in kwargs.items() if k != "like"}
    if _is_batched_anywhere(tuple(args) + tuple(kwargs.values()), level):
        return _loop(func, args, kwargs, level)
    return func(*args, **kwargs)


_RULES: dict[Any, Callable] = {}


def _register(rule: Callable, *funcs: Any) -> None:
    for f in funcs:
        _RULES[f] = rule


_register(_reduction(), np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.std,
          np.var, np.any, np.all, np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanprod,
          np.ptp, np.median, np.count_nonzero)  # fmt: skip
_register(_reduction(flattens=True), np.cumsum, np.cumprod, np.argmax, np.argmin,
          np.nancumsum, np.nancumprod)  # fmt: skip
_register(_reduction(default=-1, flattens=True), np.sort, np.argsort)
_register(_reduction(), np.flip)  # axis=None: every axis of one example


def _diff(func, args, kwargs, level):
    # np.diff(a, n, axis, ...): its second argument is n, not an axis
    kwargs = {**dict(zip(("n", "axis", "prepend", "append"), args[1:])), **kwargs}
    if "prepend" in kwargs or "append" in kwargs:  # joined to each example: one at a time
        return _loop(func, args[:1], kwargs, level)
    return _shifted_axis(func, args[:1], kwargs, level, default=-1)


_register(_diff, np.diff)
_register(_reshape, np.reshape)
_register(_transpose, np.transpose)
_register(_axes_rule("source", "destination"), np.moveaxis)
_register(_axes_rule("axis1", "axis2"), np.swapaxes)
_register(_axes_rule("axis1", "axis2"), np.diagonal, np.trace)
_expand_dims_bound = _axes_rule("axis", extra=_expand_rank)
_register(_expand_dims, np.expand_dims)
_register(_axes_rule("axis"), np.take, np.roll, np.repeat)
_register(_squeeze, np.squeeze)
_register(_ravel, np.ravel)
_register(_broadcast_to, np.broadcast_to)
_register(_concatenate, np.concatenate)
_register(_stack, np.stack)
_register(_where, np.where)
_register(_elementwise_function, np.clip, np.nan_to_num, np.sinc, np.i0, np.real, np.imag,
          np.angle, np.real_if_close, np.round, np.around, np.isclose)  # fmt: skip
_register(_like, np.zeros_like, np.ones_like, np.empty_like, np.full_like)
_register(_copy, np.copy)
_register(_created, np.asarray, np.array, np.asanyarray, np.ascontiguousarray, np.eye,
          np.zeros, np.ones, np.full, np.empty, np.arange, np.identity)  # fmt: skip
_register(_matmul, np.matmul)
_register(_dot, np.dot)
_register(_inner, np.inner, np.vdot)
_register(_outer, np.outer)
_register(_einsum, np.einsum)
_register(_core_matrix, np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
          np.linalg.eigh, np.linalg.eigvalsh, np.linalg.svd, np.linalg.qr, np.linalg.pinv,
          np.linalg.matrix_power, np.linalg.eig, np.linalg.eigvals)  # fmt: skip
_register(_solve, np.linalg.solve)
_register(_norm, np.linalg.norm)
_register(_shape_query, np.shape, np.ndim, np.size)
_register(_query, np.iscomplexobj, np.isrealobj, np.result_type, np.can_cast, np.min_scalar_type)

# tril/triu act on the last two axes only: correct as elementwise only where the example
# is at least a matrix; the elementwise rule pads lower ranks, so guard them
_RULES[np.tril] = _RULES[np.triu] = lambda func, args, kwargs, level: (
    _wrap(func(args[0].data, *args[1:], **kwargs), level)
    if _at(args[0], level) and args[0].ndim >= 2
    else _loop(func, args, kwargs, level)
)
_RULES[np.isclose] = _elementwise_function

# Questions about one example that the reverse pass asks of every batched adjoint,
# answered before anything else (``np.shape(x)`` with ``x`` the only argument).
_QUERIES: dict[Any, Callable] = {
    np.shape: lambda x: x.shape,
    np.ndim: lambda x: x.ndim,
    np.size: lambda x: x.size,
    np.iscomplexobj: lambda x: np.iscomplexobj(x.data),
    np.isrealobj: lambda x: np.isrealobj(x.data),
    np.result_type: lambda x: np.result_type(x.data),
}


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
        raise ValueError(
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


# -- batched forms of the commonest rules ------------------------------------------------
# Under vmap(grad(f)) a rule runs on batched values, and each NumPy call inside it is
# answered through Batched's protocols, a few microseconds each. The rules that per-example
# gradients of small models run most (sums, extrema, vector-matrix products) hand a batch
# of adjoints to these forms (sensitivities.batching.batched_form), which compute on the
# batch's data at once; where a call is not their case (keywords, values of several vmaps,
# stacks of matrices), they answer NotImplemented and the rule runs as written.


def _reduced(x: Any, ybar: Any, axis: Any, out: Any, initial: Any, where: Any) -> Any:
    """``(data, kept, axes)`` of a reduction of ``x`` over ``axis``: the batch's data,
    its shape with the reduced axes as 1s, and those axes of the data; where ``x`` and
    ``ybar`` are ndarray batches of one level, reduced without ``out``, ``initial`` or
    ``where``. None otherwise."""
    if (
        type(x) is not Batched
        or type(ybar) is not Batched
        or x.level != ybar.level
        or type(x.data) is not np.ndarray
        or type(ybar.data) is not np.ndarray
        or out is not None
        or initial is not np._NoValue
        or where is not np._NoValue
        or not (type(axis) is int or type(axis) is tuple or axis is None)
    ):
        return None
    data = x.data
    axes = _axis(axis, data.ndim - 1)
    axes = axes if type(axes) is tuple else (axes,)
    return data, tuple(1 if k in axes else n for k, n in enumerate(data.shape)), axes


@batched_form("sum")
def _sum_form(y, ybar, x, axis, out, keepdims, initial, where):
    reduced = _reduced(x, ybar, axis, out, initial, where)
    if reduced is None:
        return NotImplemented
    data, kept, _ = reduced  # ybar put back in the reduced axes, repeated along them
    return Batched(_strided_broadcast(ybar.data.reshape(kept), data.shape), x.level)


@batched_form("extremum")
def _extremum_form(y, ybar, x, axis, out, keepdims, initial, where):
    reduced = _reduced(x, ybar, axis, out, initial, where)
    if reduced is None or type(y) is not Batched or y.level != x.level:
        return NotImplemented
    data, kept, axes = reduced
    hits = np.equal(data, y.data.reshape(kept))  # NaNs never hit
    g = ybar.data.reshape(kept)
    # the rule's test, over the whole batch: as many hits as slices and no NaN slice
    if np.count_nonzero(hits) == y.data.size and not np.isnan(y.data).any():
        return Batched(hits * g, x.level)
    dtype = data.dtype if data.dtype.kind in "fc" else np.dtype(np.float64)
    count = np.add.reduce(hits, axis=axes, keepdims=True, dtype=dtype)  # ties share
    return Batched(hits * (g / np.maximum(count, 1)), x.level)


@batched_form("matmul")
def _matmul_form(argnum, ybar, a, b):
    """A vector per example times one matrix, or one matrix times a vector per example:
    a product of the batch's rows, and an outer product per example."""
    if type(ybar) is not Batched or type(ybar.data) is not np.ndarray:
        return NotImplemented
    level = ybar.level
    if type(b) is np.ndarray and b.ndim == 2 and _vectors(a, level):  # x @ W
        if argnum == 0:
            return Batched(np.matmul(ybar.data, b.T), level)
        return Batched(_outer(a.data, ybar.data), level)
    if type(a) is np.ndarray and a.ndim == 2 and _vectors(b, level):  # W @ x
        if argnum == 0:
            return Batched(_outer(ybar.data, b.data), level)
        return Batched(np.matmul(ybar.data, a), level)
    return NotImplemented


def _vectors(v: Any, level: int) -> bool:
    return type(v) is Batched and v.level == level and type(v.data) is np.ndarray and v.ndim == 1


def _outer(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each example's outer product of two batches of vectors."""
    left, right = u[:, :, None], v[:, None, :]
    product = _outer_product(left, right)
    return left * right if product is None else product


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
    """A rewriter of the context (``tape.core.observing``) during a ``vmap`` call: a Branch of
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
                    if tape.owns(b) and not _batched_at(b, self.level):
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
