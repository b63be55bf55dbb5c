"""The batched value of ``vmap``: one example's view of a batch, the conversions that
have no single value, and writes in place as NumPy makes them to each example.

A batch's data holds each example's array along its leading axis; a view of a batch is
a view of its data, made as NumPy makes the view of each example. So a write into the
data (``+=``, ``x[i] = v``, ``out=``) is seen by every view and every name of it, as each
example's is under NumPy. How NumPy's functions run on a batch is the interpreter's
business (``tape.transforms.batching``, whose ``Batched`` this is the base of).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Callable

import numpy as np

from sensitivities.batching import advanced_axes_first
from sensitivities.registry import function_name, lift
from sensitivities.registry import shifted_axis as _axis

from ..core.array_surface import ARITHMETIC, ArraySurface
from ..core.node import Node
from ..core.versions import memory_of

__all__ = ["BatchedBase", "BatchingError", "BatchedControlFlowError"]


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
    tape.transforms.batched.BatchedControlFlowError: ...
    """


class UnbatchableWrite(BatchingError, TypeError):
    """A write that one batched value cannot take (each example would write its own)."""


class NoBatchError(BatchingError, ValueError):
    """Examples whose results no batch can hold, or a write no view of a batch follows."""


def user_line() -> str:
    """``file:line`` of the innermost frame outside tape, sensitivities and numpy."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name.startswith(("tape.", "sensitivities", "numpy")) or name == "tape"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno} (in {frame.f_code.co_name})"
        frame = frame.f_back
    return "an unknown line"


class BatchedBase(ArraySurface):
    """A batch of values: ``data`` holds them along its leading axis; ``shape``,
    ``ndim`` and ``size`` are one example's. The interpreter's ``Batched`` adds NumPy's
    protocols; see ``tape.transforms.batching``."""

    # _zero_d: each example is a 0-d array (made by a view or a constructor), which is
    # written in place, not a NumPy scalar, which is immutable
    __slots__ = ("data", "level", "_zero_d")
    __array_priority__ = 500.0  # above ndarray's, below a node's

    def __init__(self, data: Any, level: int) -> None:
        self.data = data
        self.level = level
        self._zero_d = False

    def setflags(self, write: Any = None, align: Any = None, uic: Any = None) -> None:
        """Accepted, and changes nothing, as a node's ``setflags`` (``tape.core.node``)."""

    def read_only_view(self) -> Any:
        """The batch on a read-only view of its data (``tape.core.reverse.read_only``)."""
        data = self.data
        if isinstance(data, np.ndarray) and data.flags.writeable:
            data = data.view()
            data.flags.writeable = False
        batch = type(self)(data, self.level)
        batch._zero_d = self._zero_d
        return batch

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

    def _no_single_value(self, what: str):
        raise BatchedControlFlowError(
            f"{what} of a batched value at {user_line()}: under vmap it holds one value "
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
            f"a batched value was converted to an ndarray at {user_line()} (np.asarray, "
            "np.array, or a compiled function): that would lose the batch. Under vmap, "
            "keep to NumPy functions (or register a batching rule)"
        )

    def __round__(self, ndigits: int | None = None) -> Any:
        if not scalars(self):  # NumPy's error: only its scalars round
            raise TypeError("type numpy.ndarray doesn't define __round__ method")
        rounded = np.round(self, ndigits or 0)
        return rounded.astype(int) if ndigits is None else rounded  # round(2.6) is 3

    def item(self, *args: Any) -> Any:
        self._no_single_value(".item()")

    def tolist(self) -> Any:
        self._no_single_value(".tolist()")

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
        if scalars(self):  # a NumPy scalar's view is an array of its own
            return type(self)(self.data.copy(), self.level).view(*args, **kwargs)
        data = self.data.view(*args, **kwargs)
        if data.ndim == 0 or (data.shape[0] != self.batch_size):
            raise ValueError(
                f"vmap: x.view({', '.join(map(repr, args))}) changes the size of the last axis "
                "of a batched scalar; view a batched array of one axis or more"
            )
        return zero_d_if(type(self)(data, self.level))

    def fill(self, value: Any) -> None:
        self[...] = value

    def sort(self, axis: int = -1, kind: Any = None, order: Any = None) -> None:
        check_writable(self, "item assignment")
        self.data.sort(_axis(axis, self.ndim), kind, order)

    def partition(self, kth: Any, axis: int = -1, kind: str = "introselect", order=None) -> None:
        check_writable(self, "item assignment")
        self.data.partition(kth, _axis(axis, self.ndim), kind, order)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        check_writable(self, "item assignment")
        for b in range(self.batch_size):  # np.put comes here: a method, example by example
            index, value = one_example((indices, values), self.level, b)
            self.data[b, ...].put(index, value, mode)


def _augmented(ufunc: np.ufunc, name: str) -> Callable:
    def op(self: Any, other: Any) -> Any:
        return _augment(self, ufunc, other)

    op.__name__ = name
    return op


# x += v writes x in place, as NumPy does to each example (every name bound to x and
# every view of it sees the write); a batch of NumPy scalars is rebound, as they are
for _name, _ufunc in ARITHMETIC:
    setattr(BatchedBase, f"__i{_name}__", _augmented(_ufunc, f"__i{_name}__"))


# -- writes: NumPy's aliasing, example by example -----------------------------------------


def scalars(x: BatchedBase) -> bool:
    """Whether each example of ``x`` is a NumPy scalar (immutable: ``+=`` rebinds it, and
    it has no items to assign), as the 0-d results of ufuncs, reductions and integer
    indices are; a 0-d array (``y[...]``, ``y.reshape(())``) is not."""
    return x.ndim == 0 and not x._zero_d


def zero_d_if(x: BatchedBase) -> BatchedBase:
    """``x``, marked as a batch of 0-d arrays where it is 0-d: a view or a new array."""
    if x.ndim == 0:
        x._zero_d = True
    return x


def batch_memory(x: BatchedBase) -> Any:
    """The ndarray that holds a batch's elements (``versions.memory_of``): None for a
    batch of NumPy scalars, which is never written in place."""
    data = x.data
    if type(data) is np.ndarray:  # asked of every batched value the tape records
        return data if data.ndim > 1 or x._zero_d else None
    return None if scalars(x) else memory_of(data)


def _like_examples(x: BatchedBase, data: Any) -> BatchedBase:
    """``data`` (a copy of ``x``'s, or a cast) as a batch of what ``x``'s examples are."""
    out = type(x)(data, x.level)
    if x._zero_d:
        out._zero_d = True
    return out


# Batches computed as copies (by the loop) where each example is a view of an argument in a
# way no single view of the batch can follow: id of the data's owner -> (a weak reference
# to it, the function). Their data is read-only; a write names the function.
_DETACHED: dict = {}


def owner_of(a: Any) -> Any:
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def detach(data: np.ndarray, func: Callable) -> np.ndarray:
    data.flags.writeable = False
    key = id(data)
    _DETACHED[key] = (weakref.ref(data, lambda _, key=key: _DETACHED.pop(key, None)), func)
    return data


def check_writable(x: BatchedBase, what: str) -> None:
    """NumPy's error for a write into a NumPy scalar, and vmap's for a write into a batch
    that the loop computed as a copy where each example is a view of an argument."""
    if scalars(x):
        raise TypeError(f"'{x.dtype.type.__name__}' object does not support {what}")
    data = x.data
    if type(data) is np.ndarray and not data.flags.writeable and _DETACHED:
        owner = owner_of(data)
        entry = _DETACHED.get(id(owner))
        if entry is not None and entry[0]() is owner:
            raise NoBatchError(
                f"vmap: a write at {user_line()} into the result of "
                f"{function_name(entry[1])}, which is a view of its argument in each example "
                "but has no batching rule, so vmap computed it as a copy, which the write "
                "would not reach through; write into the argument itself, or make the "
                "independent copy explicit (np.copy) and write into that"
            )


def _example_shape(a: Any, level: int) -> tuple | None:
    """One example's shape of an operand of a write, where a single batched call can
    write it: None for a batch of another ``vmap``, a list holding batches, a foreign array."""
    kind = type(a)
    if kind is np.ndarray:
        return a.shape
    if isinstance(a, BatchedBase):
        return a.shape if a.level == level else None
    if kind in PLAIN or isinstance(a, (np.generic, int, float, complex)):
        return ()
    if kind is list or kind is tuple:
        return None if _holds_batch(a) else np.shape(a)
    return None


def write_into(target: BatchedBase, ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> BatchedBase:
    """``ufunc(*inputs, out=target)``, each example as NumPy computes it: one call on the
    batch's data where the operands broadcast to ``target``'s shape, else example by
    example (with NumPy's own errors)."""
    check_writable(target, "item assignment")
    level = target.level
    if ufunc.signature is None and ufunc.nout == 1 and type(target.data) is np.ndarray:
        shapes = [_example_shape(a, level) for a in inputs]
        kw_plain = not kwargs or not batched_anywhere(tuple(kwargs.values()), level)
        if kw_plain and None not in shapes:
            try:
                fits = np.broadcast_shapes(target.shape, *shapes) == target.shape
            except ValueError:
                fits = False
            if fits:
                rank = target.ndim
                args = [padded(a, rank) if isinstance(a, BatchedBase) else a for a in inputs]
                ufunc(*args, out=target.data, **kwargs)
                return target
    data = target.data
    for b in range(target.batch_size):
        ufunc(
            *one_example(inputs, level, b),
            out=data[b, ...],
            **one_example_kw(kwargs, level, b),
        )
    return target


def _augment(x: BatchedBase, ufunc: np.ufunc, v: Any) -> Any:
    """``x op= v``: ``x`` written in place (NumPy's ``ufunc(x, v, out=x)``), or
    NotImplemented where each example is a NumPy scalar, which Python then rebinds."""
    if scalars(x):
        return NotImplemented
    if isinstance(v, Node):
        raise UnbatchableWrite(
            f"vmap: x {_OPERATORS.get(ufunc, ufunc.__name__)}= node at {user_line()} writes "
            "a node into a batched array that is no node: the tape cannot record it; write "
            "x = x op node (a new node) instead"
        )
    return write_into(x, ufunc, (x, v), {})


_OPERATORS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
              np.floor_divide: "//", np.remainder: "%", np.power: "**", np.matmul: "@",
              np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^",
              np.left_shift: "<<", np.right_shift: ">>"}  # fmt: skip


def _set_item(x: BatchedBase, index: Any, value: Any) -> None:
    """``x[index] = value``, in place, as NumPy does it to each example."""
    if isinstance(value, Node):
        raise UnbatchableWrite(
            f"vmap: a node assigned into a batched value at {user_line()}; use the "
            "functional update tape.at(x)[index].set(value), or np.where"
        )
    check_writable(x, "item assignment")
    level = x.level
    index = index if isinstance(index, tuple) else (index,)
    data = x.data
    if not (
        type(data) is not np.ndarray
        or batched_anywhere(index, level)
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
                    padded(value, region.ndim - 1) if isinstance(value, BatchedBase) else value
                )
                return
    for b in range(x.batch_size):  # example by example, with NumPy's own errors
        data[b, ...][tuple(one_example(index, level, b))] = one_example((value,), level, b)[0]


def _lstrip_ones(shape: tuple) -> tuple:
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return shape[k:]


# -- one example of a batch ---------------------------------------------------------------

# operands an elementwise call takes as they are: one value for every example
PLAIN = frozenset((np.ndarray, float, int, complex, bool, np.float64, np.float32, np.int64,
                    np.complex128, np.bool_))  # fmt: skip


def at_level(a: Any, level: int) -> bool:
    return isinstance(a, BatchedBase) and a.level == level


def _holds_batch(values: Any) -> bool:
    """Whether a list or tuple holds a batch of any ``vmap`` (at any depth)."""
    return any(
        isinstance(v, BatchedBase) or (type(v) in (list, tuple) and _holds_batch(v))
        for v in values
    )


def padded(a: Any, rank: int) -> Any:
    """The data of a batched ``a`` with length-1 axes after the batch, up to ``rank``
    axes of one example: so that it broadcasts as ``a`` would, batch first."""
    return lift(a.data, rank + 1)


def batched_anywhere(x: Any, level: int) -> bool:
    kind = type(x)
    if kind in PLAIN:  # an axis, a flag: asked of every keyword of a reduction
        return False
    if kind is tuple or kind is list:
        for v in x:
            if type(v) not in PLAIN and batched_anywhere(v, level):
                return True
        return False
    if at_level(x, level):
        return True
    if isinstance(x, (tuple, list)):
        return any(batched_anywhere(v, level) for v in x)
    return False


def one_example(args: Any, level: int, b: int) -> Any:
    out = []
    for a in args:
        if at_level(a, level):
            out.append(a.data[b])
        elif type(a) is list or type(a) is tuple:
            out.append(type(a)(one_example(a, level, b)))
        else:
            out.append(a)
    return out


def one_example_kw(kwargs: dict, level: int, b: int) -> dict:
    return {k: one_example((v,), level, b)[0] for k, v in kwargs.items()}

