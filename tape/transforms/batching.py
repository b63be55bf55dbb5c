"""The interpreter of ``vmap``: how a batched value (``Batched``) answers NumPy.

A ``Batched`` (its data, writes and refusals in ``tape.transforms.batched``) shows one example's
shape and speaks NumPy's protocols. Ufuncs are answered here: they broadcast over the
batch, the batched operands padded after their batch axis. Every other function is
answered by its batching rule (``sensitivities.batching``, plain NumPy on the batches'
data), the batched values unwrapped and the result wrapped; a function without one runs
NumPy's own Python code on the batched values, or once per example with the results
stacked (the loop fallback, which ``vmap(..., report=True)`` and ``tape.debug()`` report).

Fast paths, each in one place here, answer what per-example gradients call most without
the general path's scan for nodes: an elementwise ufunc of batches and plain values
(``_ufunc_call``, large outer products by ``einsum``), ``x @ W`` (``_pair_level``), a
reduction of one batch (``_reduce_call``), and what the reverse pass asks of every
adjoint (``_QUERIES``: ``np.shape(x)``).

The tape records ``Batched`` values as it records Dask or CuPy arrays, so a ``grad``
inside a ``vmap`` runs its rules batched. Nodes stay outside batched values (a node's
value may be batched; a batched value never holds a node): a node enters and leaves the
batch through recorded primitives (``batch_in``, ``batch_out``), and one of an outer
tape met inside is broadcast by a recorded ``broadcast`` (``tape.transforms.vmap``). Each
``vmap`` call takes a level from the same counter as tapes; a call with batched values
of several ``vmap``s is batched for the innermost.
"""

from __future__ import annotations

import operator
import warnings
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
from sensitivities.registry import canonical, first_argument, function_name, is_node, value_of
from sensitivities.registry import pushforward as _engine_pushforward
from sensitivities.registry import shifted_axis as _axis

from ..core.node import Node
from ..core.observing import observing
from ..core.reverse import SHAPED
from ..core.versions import MEMORY
from .batched import (
    PLAIN,
    BatchedBase,
    BatchedControlFlowError,
    BatchingError,
    NoBatchError,
    UnbatchableWrite,
    at_level,
    batch_memory,
    batched_anywhere,
    check_writable,
    detach,
    one_example,
    one_example_kw,
    owner_of,
    padded,
    scalars,
    user_line,
    write_into,
    zero_d_if,
)

__all__ = [
    "Batched",
    "BatchedControlFlowError",
    "BatchingError",
    "VmapFallbackWarning",
]


class VmapFallbackWarning(UserWarning):
    """A function with no batching rule ran once per example under ``vmap``."""


# -- the batched value ------------------------------------------------------------------

reporting: ContextVar[bool] = ContextVar("tape_vmap_reporting", default=False)




class Batched(BatchedBase):
    """A batch of values: ``data`` holds them along its leading axis; ``shape``,
    ``ndim`` and ``size`` are one example's. Made by ``vmap``; see the module docstring.

    >>> import numpy as np
    >>> from tape.transforms.batching import Batched
    >>> b = Batched(np.arange(6.0).reshape(3, 2), level=-1)
    >>> b.shape, np.sum(b).data, b.argsort().data.tolist()
    ((2,), array([1., 5., 9.]), [[0, 1], [0, 1], [0, 1]])
    """

    __slots__ = ()

    @staticmethod
    def _apply(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
        """A method or operator of the array surface: the ufunc's fast path, the index,
        or the NumPy function (which comes back through the protocols)."""
        if type(f) is np.ufunc:
            if not kwargs and f.signature is None:
                result = _ufunc_call(f, args)  # x * y, -x: what NumPy's dispatch comes to
                if result is not _SLOW:
                    return result
            node = _first_node(args)
            if node is not None:  # x @ w, w a node: it records the call, as NumPy would ask
                return node._apply(f, args, kwargs)
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
                raise UnbatchableWrite(
                    f"vmap: np.{ufunc.__name__}(..., out=) at {user_line()} writes batched "
                    f"values into {type(target).__name__}, which is the same for every "
                    "example (each would write its own value into it); build a new array "
                    f"instead (y = np.{ufunc.__name__}(...))"
                )
            if scalars(target):
                raise TypeError("return arrays must be of ArrayType")  # NumPy's, for a scalar
            return write_into(target, ufunc, inputs, kwargs)
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
                raise UnbatchableWrite(
                    f"vmap: {ufunc.__name__}.at of batched values into "
                    f"{type(target).__name__}; build a new array instead"
                )
            check_writable(target, "item assignment")
            for b in range(target.batch_size):
                ufunc.at(target.data[b, ...], *one_example(rest, level, b))
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
        if canonical(func) is not func:  # like= hands the runtime's wrapper of NumPy's
            return self.__array_function__(canonical(func), types, args, kwargs)
        if func in _OF_ONE_EXAMPLE:  # shapes and dtypes only: asked of one example
            return func(*one_example(args, level, 0), **one_example_kw(kwargs, level, 0))
        if func in _CREATED and not batched_anywhere(args + tuple(kwargs.values()), level):
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
        if primitive in OWN_PRIMITIVES:  # vmap's own way in and out of the batch
            return f(*args, **kwargs)
        level = _scan(args + tuple(kwargs.values()))  # no node among them: a level
        entry = batching_entry(primitive)
        if entry is not None:
            return _run(primitive, entry, args, kwargs, level)
        return _loop(primitive, args, kwargs, level)








# -- writes: NumPy's aliasing, example by example -----------------------------------------
# A batch's data holds each example's array; a view of a batch is a view of its data, made
# as NumPy makes the view of each example. So a write into the data (+=, x[i] = v, out=)
# is seen by every view and every name of it, as each example's is under NumPy.






























# -- helpers ------------------------------------------------------------------------------

_SLOW = object()  # what a fast path answers where the general one must decide


def _ufunc_call(ufunc: np.ufunc, inputs: tuple) -> Any:
    """An elementwise ufunc called on batched values and plain arrays or numbers, with no
    keywords: the batched data, padded to a common rank, through the ufunc. ``_SLOW``
    for anything else (a node, a list, values of several ``vmap``s, another library's
    array), which the general path takes."""
    if len(inputs) == 1:  # np.tanh(x), -x
        a = inputs[0]
        if type(a) is not Batched:
            return _SLOW
        return _ufunc_result(ufunc(a.data), a.level)
    if len(inputs) == 2:  # x * y, x + w
        a, b = inputs
        if type(a) is Batched and type(b) is Batched:
            if b.level != a.level:
                return _SLOW
            level, da, db = a.level, a.data, b.data
            if da.ndim != db.ndim:  # the lower rank padded after the batch
                da, db = (
                    (padded(a, db.ndim - 1), db)
                    if da.ndim < db.ndim
                    else (da, padded(b, da.ndim - 1))
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
        return _ufunc_result(ufunc(da, db), level)
    return _SLOW  # three operands or more: the general path


def _ufunc_result(result: Any, level: int) -> Any:
    """A ufunc's result on batches' data as a batch: ``_wrap``, its common case inline."""
    if type(result) is np.ndarray:
        if result.base is None and not result.flags.c_contiguous:
            result = _batch_major(result)
        return Batched(result, level)
    return _wrap(result, level)


def _beside_plain(batch: Batched, other: Any) -> tuple | None:
    """A batch's data and a plain operand (an ndarray or a number), the data padded
    after its batch axis up to the operand's rank; None for an operand of another kind."""
    if type(other) is np.ndarray:
        return (padded(batch, other.ndim) if other.ndim >= batch.data.ndim else batch.data), other
    if type(other) in PLAIN:
        return batch.data, other
    return None


def _batch_major(data: Any) -> Any:
    """A new batch's data with the batch axis outermost in memory, and each example laid
    out as NumPy lays out one example's result: a ufunc or a reduction of a batch whose
    examples are strided (a batch on another axis, an F-ordered batch) interleaves the
    batch axis in memory, and then reshape and ravel would copy where NumPy, on one
    example, makes a view (or the other way round), and writes would go astray."""
    if type(data) is not np.ndarray or data.base is not None or data.flags.c_contiguous:
        return data  # (the common case, first)
    strides = [abs(k) for k in data.strides]
    if data.ndim < 2 or strides[0] >= max(strides[1:]):
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
        elif kind not in PLAIN and isinstance(a, Node):
            return _NODE
    return level


def _first_node(args: tuple) -> Any:
    return first_argument(args, is_node)




def _size(args: Any, level: int) -> int:
    for a in args:
        if at_level(a, level):
            return a.batch_size
        if type(a) is list or type(a) is tuple:
            n = _size(a, level)
            if n is not None:
                return n
    return None


def _logical_ndim(a: Any, level: int) -> int:
    return np.ndim(a.data) - 1 if at_level(a, level) else np.ndim(a)




def _wrap(result: Any, level: int) -> Any:
    """A result computed on batches' data (each output, of a tuple or list) as batches."""
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
    args = [padded(a, rank) if at_level(a, level) else a for a in inputs]
    kw = {k: (padded(v, rank) if at_level(v, level) else v) for k, v in kwargs.items()}
    if ufunc is np.multiply and not kwargs and len(args) == 2:
        return Batched(multiply_data(*args), level)
    return _wrap(ufunc(*args, **kw), level)


def multiply_data(a: Any, b: Any) -> Any:
    """``a * b`` of two batches' data (or a batch's and a plain value), as a batched
    multiply computes it: a large outer product by ``einsum``."""
    product = outer_product(a, b)
    return a * b if product is None else product




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


def _broadcast_data(a: Any, n: int) -> Any:
    return np.broadcast_to(np.expand_dims(a, 0), (n,) + np.shape(a))




def _run(func: Callable, entry: tuple, args: tuple, kwargs: dict, level: int) -> Any:
    """``func`` by its batching rule (``sensitivities.batching``): the batched values at
    ``level`` unwrapped to their data and flagged, the result wrapped; the loop where
    the rule answers NotImplemented or a keyword is batched."""
    rule, arrays = entry
    if kwargs and batched_anywhere(tuple(kwargs.values()), level):
        return _loop(func, args, kwargs, level)
    datas, flags = [], []
    for a in args:
        kind = type(a)
        if kind is Batched and a.level == level:
            datas.append(a.data.copy() if arrays and scalars(a) else a.data)
            flags.append(True)
        elif (kind is list or kind is tuple) and batched_anywhere(a, level):
            inner = tuple(at_level(b, level) for b in a)
            if any(not flag and batched_anywhere(b, level) for b, flag in zip(a, inner)):
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
    return zero_d_if(out) if arrays and type(out) is Batched else out


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
    if batched_anywhere(index, level) or any(isinstance(i, Node) for i in index):
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
    if scalars(x) and index != ():
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
    if reporting.get() or _debugging():
        warnings.warn(
            f"vmap: {function_name(func)} has no batching rule, so it ran once per example "
            f"({n} times) at {user_line()}",
            VmapFallbackWarning,
            stacklevel=2,
        )
    if not n:  # no example to run, and so no shape for the results
        raise NoBatchError(
            f"vmap: {function_name(func)} at {user_line()} has no batching rule, and a batch "
            "of no examples gives no example to run it on for the shape of its result"
        )
    results, inputs = [], []
    for b in range(n):
        example = one_example(args, level, b)
        results.append(func(*example, **one_example_kw(kwargs, level, b)))
        inputs.append(example)
    return _stacked(results, level, _batched_inputs(args, level, inputs), func)


def _batched_inputs(args: tuple, level: int, examples: list) -> list:
    """``(batch, its examples)`` for each argument of ``args`` batched at ``level``."""
    return [
        (a, [example[k] for example in examples])
        for k, a in enumerate(args)
        if at_level(a, level) and type(a.data) is np.ndarray
    ]


def _debugging() -> bool:
    return observing.get() is not None


def _stacked(results: list, level: int, inputs: list = (), func: Any = None) -> Any:
    """The examples' ``results`` as one batch. Where each example's result is a view of a
    batched argument's example (``np.asarray(x)``, ``np.atleast_1d(x)``, a piece of
    ``np.split``), the batch is that view of the argument's data, as NumPy's aliasing
    asks; where no one view of the batch can follow the examples', a read-only copy whose
    writes are refused (``check_writable``)."""
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
                return Batched(detach(_stack_examples(results, func), func), level)
    out = Batched(_stack_examples(results, func), level)
    if type(first) is np.ndarray and first.ndim == 0:
        out._zero_d = True
    return out


def _stack_examples(results: list, func: Any) -> Any:
    shapes = {np.shape(r) for r in results}
    if len(shapes) > 1:
        name = "x[index]" if func is _index else function_name(func) if func else "a function"
        raise NoBatchError(
            f"vmap: {name} at "
            f"{user_line()} gives the examples results of different shapes "
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
    owner = owner_of(first)
    try:  # on the owner's buffer, so that the data's base is the owner, as a view's is
        data = np.ndarray(shape, first.dtype, owner, _address(first) - _address(owner), strides)
        data.flags.writeable = first.flags.writeable
    except (TypeError, ValueError, BufferError):
        data = np.lib.stride_tricks.as_strided(
            first, shape, strides, writeable=first.flags.writeable
        )
    return zero_d_if(Batched(data, batch.level))


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
    data = y.data if at_level(y, level) else _broadcast_data(y, size)
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
    if at_level(y, level):
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
    if not at_level(value_of(ybar), level):
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
    if not at_level(value_of(xdot), level):
        return xdot * value_of(x).batch_size
    return batch_sum(xdot, level)


OWN_PRIMITIVES = (batch_in, batch_out, broadcast, batch_sum)
SHAPED.add(Batched)  # its .shape is one example's, as np.shape(x) answers
# a node holding a batch is written in place and has views, as one holding an ndarray
MEMORY[Batched] = batch_memory




# -- closures over nodes of outer tapes ------------------------------------------------------






# -- vmap --------------------------------------------------------------------------------






