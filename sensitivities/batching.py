"""Batching rules: how a function runs over a whole batch in one call, for ``vmap``.

A batching rule ``rule(args, batched, **kwargs) -> result`` gets the positional
arguments with the batch as the leading axis of each one flagged in ``batched`` (one
flag per positional argument; the others are the same for every example). A list or
tuple argument holding batched values comes as a list of the same kind, each batched
value its data, and its flag is a tuple of flags, one per element. Keyword arguments are
never batched (the engine runs a call with a batched keyword once per example). The rule
returns the result with the batch as its leading axis (each output, for a tuple of
outputs), or ``NotImplemented`` to hand the call to the loop over the batch. Plain NumPy,
like the sensitivities: the engine (``tape.transforms.batching``) unwraps and wraps the batched
values, and answers the ufuncs itself (they broadcast over the batch).

``batching(f, ..., arrays=True)`` says that ``f`` returns arrays, a view or a new one,
where one example's result is 0-d, not NumPy scalars (``np.reshape``, ``np.copy``): its
batches of 0-d results are written in place as arrays are, and a batch of NumPy scalars
goes in as a copy, of which a view is made as NumPy makes a new array of a scalar.

A function without a rule still works under ``vmap``: NumPy's own Python code for it
runs on the batched values, or it runs once per example and the results are stacked.

>>> import numpy as np
>>> from sensitivities.batching import batching_rule_of
>>> from sensitivities.special import softmax
>>> rule = batching_rule_of(softmax)
>>> rule((np.array([[0.0, 0.0], [0.0, np.log(3.0)]]),), (True,))  # two examples
array([[0.5 , 0.5 ],
       [0.25, 0.75]])
>>> batching_rule_of(np.sum)((np.arange(6.0).reshape(2, 3),), (True,), axis=0)
array([ 3., 12.])
"""

from __future__ import annotations

import inspect
import math
import string
from typing import Any, Callable

import numpy as np

from .reductions import broadcast_to as _strided_broadcast
from .reductions import shared
from .registry import lift, shifted_axis

__all__ = [
    "advanced_axes_first",
    "along_axis",
    "axes_rule",
    "elementwise",
    "matmul_rule",
    "batching",
    "batching_entry",
    "batching_rule_of",
    "outer_product",
]

_batching: dict[Any, tuple[Callable, bool]] = {}


def _rows(x):
    """``x`` as one row per example, ``(batch, example size)``: also for a batch of no
    examples, where ``-1`` cannot be solved for."""
    shape = np.shape(x)
    return np.reshape(x, (shape[0], math.prod(shape[1:])))


def batching(*fs: Any, arrays: bool = False) -> Callable[[Callable], Callable]:
    """Register the batching rule of each of ``fs`` (see the module docstring)."""
    for f in fs:
        if not callable(f):
            raise TypeError(f"batching(f) needs a function, got {f!r}")

    def register(rule: Callable) -> Callable:
        for f in fs:
            _batching[f] = (rule, arrays)
        return rule

    return register


def batching_rule_of(f: Any) -> Callable | None:
    """The batching rule registered for ``f``, or None."""
    entry = _batching.get(f)
    return None if entry is None else entry[0]


def batching_entry(f: Any) -> tuple[Callable, bool] | None:
    """``(rule, arrays)`` as registered for ``f`` (``batching``), or None."""
    return _batching.get(f)


# -- the batch axis ----------------------------------------------------------------------


def advanced_axes_first(index: Any) -> int:
    """How many axes NumPy puts first when it indexes with ``index`` (a tuple, or one
    part): those of its advanced indices, broadcast together, where a slice, None or an
    Ellipsis (even one that stands for no axis) parts them; else 0, their axes staying
    in place. Integers count as advanced beside an array. With a batch axis in front
    (``x[(slice(None),) + index]``), the batch comes after those axes.

    >>> advanced_axes_first((0, slice(None), [1, 2])), advanced_axes_first((slice(None), [1, 2]))
    (1, 0)
    """
    parts = index if isinstance(index, tuple) else (index,)
    basic = [p is None or p is Ellipsis or isinstance(p, slice) for p in parts]
    if all(b or (isinstance(p, (int, np.integer)) and not isinstance(p, bool))
           for b, p in zip(basic, parts)):  # fmt: skip
        return 0  # no array among them: integers are basic indices
    at = [k for k, b in enumerate(basic) if not b]
    if at[-1] - at[0] + 1 == len(at):
        return 0  # side by side: their axes stay where they are
    shapes = []
    for p, b in zip(parts, basic):
        if not b:
            p = np.asarray(p)
            shapes.append(np.shape(np.flatnonzero(p)) if p.dtype == bool else p.shape)
    return len(np.broadcast_shapes(*shapes))


_shift = shifted_axis  # a logical ``axis`` of one example (``ndim`` axes) as an axis of the batch


def _padded(x: Any, rank: int) -> Any:
    """A batched ``x`` with length-1 axes after the batch, up to ``rank`` axes of one
    example, so that it broadcasts against unbatched values as one example would."""
    return lift(x, rank + 1)


def _rank(x: Any, flag: Any) -> int:
    """One example's number of axes."""
    return np.ndim(x) - bool(flag)


def _size(args: Any, batched: Any) -> int:
    """The batch size: the leading axis of the first batched value."""
    for a, flag in zip(args, batched):
        if type(flag) is tuple:
            if any(flag):
                return _size(a, flag)
        elif flag:
            return np.shape(a)[0]
    raise ValueError("no batched argument")


def _repeated(a: Any, n: int) -> Any:
    """An unbatched ``a`` as a batch of ``n`` copies (a view)."""
    return np.broadcast_to(np.expand_dims(a, 0), (n,) + np.shape(a))


def outer_product(a: Any, b: Any) -> Any:
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


# -- arguments by name -------------------------------------------------------------------

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


def _bound(f: Callable, args: tuple, batched: tuple, kwargs: dict) -> tuple[Any, dict]:
    """``f``'s arguments bound by name, and the flags of the batched ones by name."""
    info = _SIGNATURES.get(f)
    if info is None:
        sig = inspect.signature(f)
        kinds = inspect.Parameter
        params = sig.parameters.values()
        simple = all(p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD) for p in params)
        by_position = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        positional = [p.name for p in params if p.kind in by_position]
        keywords = {p.name for p in params if p.kind != kinds.POSITIONAL_ONLY}
        required = [p.name for p in params if p.default is kinds.empty]
        info = _SIGNATURES[f] = (sig, simple, positional, keywords, required)
    sig, simple, positional, keywords, required = info
    flags = {name: flag for name, flag in zip(positional, batched) if flag}
    if simple and len(args) <= len(positional):
        arguments = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k not in keywords or k in arguments:
                break  # an error, which bind words
            arguments[k] = v
        else:
            if all(name in arguments for name in required):
                return _Bound(sig, arguments, positional), flags
    return sig.bind(*args, **kwargs), flags


def _a_alone(f: Callable) -> Callable:
    """Decorator: the batching rule of ``f`` (which returns arrays) where its array ``a``
    alone is batched, written as ``rule(arguments)`` over ``f``'s arguments by name; any
    other call goes to the loop."""

    def register(rule: Callable) -> Callable:
        def batched_rule(args: tuple, batched: tuple, **kwargs: Any) -> Any:
            bound, flags = _bound(f, args, batched, kwargs)
            return rule(bound.arguments) if list(flags) == ["a"] else NotImplemented

        batching(f, arrays=True)(batched_rule)
        return rule

    return register


def _call(f: Callable, bound: Any) -> Any:
    return f(*bound.args, **bound.kwargs)


# -- elementwise: broadcast against the batch --------------------------------------------


def elementwise(f: Callable) -> Callable:
    """The rule of a broadcasting function: every batched argument padded to the same
    rank after its batch axis, the unbatched ones as they are (they broadcast from the
    right)."""

    def rule(args, batched, **kwargs):
        if any(type(flag) is tuple for flag in batched):
            return NotImplemented
        rank = max((_rank(a, flag) for a, flag in zip(args, batched)), default=0)
        for v in kwargs.values():
            rank = max(rank, np.ndim(v))
        return f(*[_padded(a, rank) if flag else a for a, flag in zip(args, batched)], **kwargs)

    return rule


for _f in (np.clip, np.nan_to_num, np.sinc, np.i0, np.real, np.imag, np.angle,
           np.real_if_close, np.round, np.around, np.isclose):  # fmt: skip
    batching(_f)(elementwise(_f))


@batching(np.where)
def _where(args, batched, **kwargs):
    if len(args) + len(kwargs) != 3:  # np.where(c): the indices, of a shape per example
        return NotImplemented
    return elementwise(np.where)(args, batched, **kwargs)


# -- along an axis: reductions, scans, sorts ---------------------------------------------


def along_axis(f: Callable, default: Any = None, flattens: bool = False) -> Callable:
    """The rule of a function of one array and an ``axis`` (a reduction, a scan, a sort):
    the axis shifted past the batch. ``flattens``: ``axis=None`` means the flattened
    array (``cumsum``, ``argmax``), else all axes (``sum``)."""

    def rule(args, batched, **kwargs):
        x, *rest = args
        if not batched[0] or any(batched[1:]):
            return NotImplemented
        given = bool(rest)
        axis = rest.pop(0) if given else kwargs.pop("axis", default)
        ndim = np.ndim(x) - 1
        if axis is None and flattens:
            x, axis = _rows(x), 1
        else:
            axis = shifted_axis(axis, ndim)
        return f(x, axis, *rest, **kwargs) if given else f(x, axis=axis, **kwargs)

    return rule


for _f in (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.std, np.var,
           np.any, np.all, np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanprod, np.ptp,
           np.median, np.count_nonzero, np.flip):  # fmt: skip
    batching(_f)(along_axis(_f))
for _f in (np.cumsum, np.cumprod, np.argmax, np.argmin, np.nancumsum, np.nancumprod):
    batching(_f)(along_axis(_f, flattens=True))
for _f in (np.sort, np.argsort):
    batching(_f)(along_axis(_f, default=-1, flattens=True))


@batching(shared)
def _shared(args, batched, **kwargs):
    hits, ybar, axes, dtype = args
    if not batched[0] or any(batched[2:]) or kwargs:
        return NotImplemented
    ndim = np.ndim(hits) - 1
    ybar = lift(ybar, ndim + 1) if batched[1] else ybar  # its reduced axes: 1s, or none
    return shared(hits, ybar, shifted_axis(axes, ndim), dtype)


@batching(np.diff)
def _diff(args, batched, **kwargs):
    # np.diff(a, n, axis, ...): its second argument is n, not an axis
    kwargs = {**dict(zip(("n", "axis", "prepend", "append"), args[1:])), **kwargs}
    if any(batched[1:]) or "prepend" in kwargs or "append" in kwargs:
        return NotImplemented  # joined to each example: one at a time
    return along_axis(np.diff, default=-1)(args[:1], batched[:1], **kwargs)


# -- shapes: axes shifted past the batch -------------------------------------------------


@_a_alone(np.reshape)
def _reshape(arguments):
    a, shape = arguments["a"], arguments.get("shape")
    if shape is None:
        shape = arguments.get("newshape")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return np.reshape(a, (np.shape(a)[0],) + shape, order=arguments.get("order", "C"))


@_a_alone(np.transpose)
def _transpose(arguments):
    a, axes = arguments["a"], arguments.get("axes")
    ndim = np.ndim(a) - 1
    if axes is None:
        axes = tuple(range(ndim - 1, -1, -1))
    return np.transpose(a, (0,) + tuple(int(k) % max(ndim, 1) + 1 for k in axes))


@batching(np.matrix_transpose, arrays=True)
def _matrix_transpose(args, batched, **kwargs):
    if len(args) != 1 or kwargs or np.ndim(args[0]) < 3:
        return NotImplemented  # NumPy's error, from the loop
    return np.swapaxes(args[0], -1, -2)


def axes_rule(f: Callable, *names: str, extra: Any = 0) -> Callable:
    """The rule of a function of one array whose arguments ``names`` are axes of it
    (``moveaxis``'s source and destination, ``swapaxes``, ``diagonal``'s axis1 and
    axis2); ``extra`` for functions that add axes (``expand_dims``: how many)."""

    def rule(args, batched, **kwargs):
        bound, flags = _bound(f, args, batched, kwargs)
        first = next(iter(bound.signature.parameters))
        if list(flags) != [first]:
            return NotImplemented
        rank = np.ndim(bound.arguments[first]) - 1 + (extra(bound) if callable(extra) else extra)
        for name in names:
            value = bound.arguments.get(name, bound.signature.parameters[name].default)
            if value is None or value is inspect.Parameter.empty:
                return NotImplemented  # None: the flattened array
            bound.arguments[name] = shifted_axis(value, rank)
        return _call(f, bound)

    return rule


def _added_axes(bound: Any) -> int:
    axis = bound.arguments["axis"]
    return len(axis) if isinstance(axis, (tuple, list)) else 1


_expand_dims = axes_rule(np.expand_dims, "axis", extra=_added_axes)


@batching(np.expand_dims, arrays=True)
def _(args, batched, **kwargs):
    if len(args) == 2 and not kwargs and batched == (True, False) and type(args[1]) is int:
        data = args[0]  # one new axis: an index with None, a view as NumPy's is
        return data[(slice(None),) * shifted_axis(args[1], np.ndim(data)) + (None,)]
    return _expand_dims(args, batched, **kwargs)


batching(np.moveaxis, arrays=True)(axes_rule(np.moveaxis, "source", "destination"))
batching(np.swapaxes, arrays=True)(axes_rule(np.swapaxes, "axis1", "axis2"))
batching(np.diagonal, arrays=True)(axes_rule(np.diagonal, "axis1", "axis2"))
batching(np.trace)(axes_rule(np.trace, "axis1", "axis2"))
for _f in (np.take, np.roll, np.repeat):
    batching(_f)(axes_rule(_f, "axis"))


@_a_alone(np.squeeze)
def _squeeze(arguments):
    a, axis = arguments["a"], arguments.get("axis")
    shape = np.shape(a)[1:]
    if axis is None:
        axis = tuple(k for k, n in enumerate(shape) if n == 1)
    return np.squeeze(a, shifted_axis(axis, len(shape)))


@batching(np.ravel, arrays=True)
def _ravel(args, batched, **kwargs):
    a = args[0]
    order = args[1] if len(args) > 1 else kwargs.get("order", "C")
    if order not in ("C", "A", "K") or len(args) + len(kwargs) > 2 or type(a) is not np.ndarray:
        return NotImplemented
    data = _rows(a)
    if data.base is not None and len(a):  # a view: where NumPy copies each example, a copy
        example = a[0]
        if not example.flags.c_contiguous and not np.may_share_memory(
            np.ravel(example, order), example
        ):
            data = data.copy()
    return data


@batching(np.broadcast_to, arrays=True)
def _broadcast_to(args, batched, **kwargs):
    if len(args) == 2 and not kwargs:  # the common call
        a, shape = args
    else:
        bound, _ = _bound(np.broadcast_to, args, batched, kwargs)
        a, shape = bound.arguments["array"], bound.arguments["shape"]
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return _strided_broadcast(_padded(a, len(shape)), (np.shape(a)[0],) + shape)


def _joined(f: Callable, stacking: bool) -> Callable:
    def rule(args, batched, **kwargs):
        bound, flags = _bound(f, args, batched, kwargs)
        of_arrays = flags.get("arrays")
        if list(flags) != ["arrays"] or type(of_arrays) is not tuple:
            return NotImplemented  # a batch of arrays, or a batched keyword
        arrays = list(bound.arguments["arrays"])
        n = _size(arrays, of_arrays)
        axis = bound.arguments.get("axis", 0)
        if axis is None and not stacking:
            arrays = [_rows(a) if flag else np.ravel(a)
                      for a, flag in zip(arrays, of_arrays)]  # fmt: skip
            axis = 0
        ndim = max(_rank(a, flag) for a, flag in zip(arrays, of_arrays))
        bound.arguments["arrays"] = [
            a if flag else _repeated(a, n) for a, flag in zip(arrays, of_arrays)
        ]
        bound.arguments["axis"] = shifted_axis(axis, ndim + 1 if stacking else ndim)
        return _call(f, bound)

    return rule


batching(np.concatenate)(_joined(np.concatenate, stacking=False))
batching(np.stack)(_joined(np.stack, stacking=True))


# -- new arrays like a batched one --------------------------------------------------------


def _like(f: Callable) -> Callable:
    def rule(args, batched, **kwargs):
        if not batched[0] or any(batched[1:]):
            return NotImplemented
        if len(args) > 1 or kwargs:
            bound, _ = _bound(f, args, batched, kwargs)
            if bound.arguments.get("shape") is not None:
                return NotImplemented
        return f(*args, **kwargs)  # the data's shape: the batch's

    return rule


for _f in (np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.copy):
    batching(_f, arrays=True)(_like(_f))


# -- products and linear algebra: the batch as a stack -----------------------------------


def _matmul_operands(a: Any, b: Any, fa: bool, fb: bool) -> tuple[Any, Any, bool, bool]:
    """The operands of a batched matmul: 1-d ones made matrices (to be squeezed after),
    batched ones padded to a common rank so that the batch axes line up."""
    a_vec, b_vec = _rank(a, fa) == 1, _rank(b, fb) == 1
    if a_vec:
        a = np.expand_dims(a, -2)
    if b_vec:
        b = np.expand_dims(b, -1)
    ra, rb = _rank(a, fa), _rank(b, fb)
    rank = max(ra, rb)
    if fa and ra < rank:
        a = _padded(a, rank)
    if fb and rb < rank:
        b = _padded(b, rank)
    return a, b, a_vec, b_vec


@batching(np.matmul)
def matmul_rule(args, batched, **kwargs):
    """A batched ``matmul``; with one matrix the same for every example, one matrix
    product over all the examples' rows (a stack of vector-matrix products, which NumPy
    runs one by one, is several times slower)."""
    if len(args) != 2 or kwargs:
        return NotImplemented
    (a, b), (fa, fb) = args, batched
    na, nb = _rank(a, fa), _rank(b, fb)
    if na == 0 or nb == 0:
        raise ValueError("matmul: input operand does not have enough dimensions")
    if fa and not fb and type(b) is np.ndarray and nb == 2 and type(a) is np.ndarray:
        if na == 1:  # x @ W, x one vector per example
            return np.matmul(a, b)
        rows = math.prod(a.shape[:-1])  # every example's rows, stacked
        return np.matmul(a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[1:])
    if fb and not fa and type(a) is np.ndarray and na == 2 and type(b) is np.ndarray:
        if nb == 1:  # W @ v, v one vector per example: (V W^T), one row per example
            return np.matmul(b, a.T)
        if nb == 2 and b.shape[-1] == 1:  # W @ v[:, None]
            return np.matmul(b[..., 0], a.T)[..., None]
    if fa and fb and na == nb and na >= 2:
        return np.matmul(a, b)  # a stack of products, batch first in both
    da, db, a_vec, b_vec = _matmul_operands(a, b, fa, fb)
    out = np.matmul(da, db)
    if b_vec:
        out = out[..., 0]
    if a_vec:
        out = out[..., 0, :] if not b_vec else out[..., 0]
    return out


@batching(np.dot)
def _dot(args, batched, **kwargs):
    if len(args) != 2 or kwargs:
        return NotImplemented
    na, nb = (_rank(a, flag) for a, flag in zip(args, batched))
    if na == 0 or nb == 0:
        return elementwise(np.multiply)(args, batched)
    if nb <= 2:
        return matmul_rule(args, batched)
    return NotImplemented


def _inner(conjugates: bool) -> Callable:
    def rule(args, batched, **kwargs):
        if len(args) != 2 or kwargs or any(_rank(a, f) != 1 for a, f in zip(args, batched)):
            return NotImplemented
        a, b = args
        return matmul_rule((np.conj(a) if conjugates else a, b), batched)

    return rule


batching(np.inner)(_inner(conjugates=False))
batching(np.vdot)(_inner(conjugates=True))


@batching(np.outer)
def _outer(args, batched, **kwargs):
    if len(args) != 2 or kwargs:
        return NotImplemented
    (a, b), (fa, fb) = args, batched
    a = _rows(a)[:, :, None] if fa else np.reshape(a, (-1, 1))
    b = _rows(b)[:, None, :] if fb else np.reshape(b, (1, -1))
    if np.ndim(a) != np.ndim(b):
        a, b = (a[None], b) if np.ndim(a) < np.ndim(b) else (a, b[None])
    product = outer_product(a, b)  # per-example gradients of x @ W: by einsum
    return a * b if product is None else product


@batching(np.einsum)
def _einsum(args, batched, **kwargs):
    if not args or not isinstance(args[0], str) or kwargs.get("out") is not None:
        return NotImplemented
    subscripts = args[0].replace(" ", "")
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
    operands, flags = args[1:], batched[1:]
    if len(terms) != len(operands) or not free or any(type(f) is tuple for f in flags):
        return NotImplemented
    letter = free[0]
    terms = [letter + t if flag else t for t, flag in zip(terms, flags)]
    return np.einsum(",".join(terms) + "->" + letter + output, *operands, **kwargs)


def _on_data(f: Callable, min_ndim: int = 0) -> Callable:
    """The rule of a function of stacks (a ``linalg`` function of stacks of matrices,
    ``tril`` and ``triu`` of their last two axes): the batch is one more stack, where
    each example has ``min_ndim`` axes at least."""

    def rule(args, batched, **kwargs):
        if not batched[0] or any(batched[1:]) or np.ndim(args[0]) <= min_ndim:
            return NotImplemented
        return f(*args, **kwargs)

    return rule


for _f in (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
           np.linalg.eigh, np.linalg.eigvalsh, np.linalg.svd, np.linalg.qr, np.linalg.pinv,
           np.linalg.matrix_power, np.linalg.eig, np.linalg.eigvals):  # fmt: skip
    batching(_f)(_on_data(_f))
for _f in (np.tril, np.triu):  # of the last two axes: each example a matrix at least
    batching(_f)(_on_data(_f, min_ndim=2))


@batching(np.linalg.solve)
def _solve(args, batched, **kwargs):
    if kwargs or len(args) != 2:
        return NotImplemented
    (a, b), (fa, fb) = args, batched
    vector = _rank(b, fb) == 1
    n = _size(args, batched)
    a = a if fa else _repeated(a, n)
    b = b if fb else _repeated(b, n)
    if vector:
        b = b[..., None]
    # the stacks of one example broadcast from the right: line them up after the batch
    while np.ndim(b) < np.ndim(a):
        b = np.expand_dims(b, 1)
    while np.ndim(a) < np.ndim(b):
        a = np.expand_dims(a, 1)
    out = np.linalg.solve(a, b)
    return out[..., 0] if vector else out


@batching(np.linalg.norm)
def _norm(args, batched, **kwargs):
    bound, flags = _bound(np.linalg.norm, args, batched, kwargs)
    if list(flags) != ["x"]:
        return NotImplemented
    x = bound.arguments["x"]
    ord, axis = bound.arguments.get("ord"), bound.arguments.get("axis")
    keepdims = bound.arguments.get("keepdims", False)
    ndim = np.ndim(x) - 1
    if axis is None:
        if ord is None:
            if keepdims:
                return NotImplemented
            return np.linalg.norm(_rows(x), axis=1)
        axis = tuple(range(ndim))
    return np.linalg.norm(x, ord=ord, axis=shifted_axis(axis, ndim), keepdims=keepdims)
