"""Pushforwards (forward-mode rules) of the common functions that are not elementwise.

A pushforward ``rule(y, xdot, *args, **kwargs) -> ydot`` maps the tangent of one argument
to its contribution to the tangent of the result. Tangents carry a leading axis of
directions, so each rule here is the function itself applied to the tangent with its
axes shifted by one. Everything else is covered without a rule of its own: elementwise
ufuncs push forward through their sensitivities (a diagonal Jacobian is its own
transpose), and any other function through the pushforward that forward mode derives
from its sensitivity. So these rules are about speed, never about coverage.

Like sensitivities, they are plain NumPy over their inputs, so they are differentiable.
"""

import math
import operator

import numpy as np

from .batching import advanced_axes_first
from .linalg import tensordot_axes
from .registry import lift, lookup, pushforward, shifted_axis
from .shape import astype, cast, scatter_add

_NO_VALUE = np._NoValue


def _keep(keepdims):
    return {} if keepdims is _NO_VALUE else {"keepdims": keepdims}


# -- elementwise functions that are not ufuncs: the sensitivity is the pushforward -----------


def _diagonal(f, argnum):
    def rule(y, xdot, *args, **kwargs):
        return lookup(f).rule(argnum, args)(y, lift(xdot, 1 + np.ndim(y)), *args, **kwargs)

    return rule


_ELEMENTWISE = ((np.where, (1, 2)), (np.clip, (0, 1, 2)), (np.nan_to_num, (0,)), (np.sinc, (0,)))
for _f, _argnums in _ELEMENTWISE:
    for _i in _argnums:
        pushforward(_f, _i)(_diagonal(_f, _i))


# -- reductions and scans --------------------------------------------------------------------


@pushforward(np.sum, 0)
def _(y, xdot, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE, initial=_NO_VALUE,
      where=_NO_VALUE):  # fmt: skip
    if where is not _NO_VALUE and where is not True:
        xdot = np.where(where, xdot, 0.0)
    return np.sum(xdot, axis=shifted_axis(axis, np.ndim(x)), dtype=dtype, **_keep(keepdims))


@pushforward(np.add.reduce, 0)
def _(y, xdot, x, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE,
      where=True):  # fmt: skip
    return np.sum(np.where(where, xdot, 0.0) if where is not True else xdot,
                  axis=shifted_axis(axis, np.ndim(x)), dtype=dtype, keepdims=keepdims)  # fmt: skip


@pushforward(np.mean, 0)
def _(y, xdot, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE, *, where=_NO_VALUE):
    kwargs = _keep(keepdims)
    if where is not _NO_VALUE:
        kwargs["where"] = where
    return np.mean(xdot, axis=shifted_axis(axis, np.ndim(x)), dtype=dtype, **kwargs)


def _extremum(y, xdot, x, axis=None, out=None, keepdims=_NO_VALUE, initial=_NO_VALUE,
              where=_NO_VALUE):  # fmt: skip
    # ties share the tangent equally, as the sensitivity shares the adjoint
    from .reductions import expand_reduced, reduced_axes

    hits = np.equal(x, expand_reduced(y, x, axis, keepdims))
    if where is not _NO_VALUE and where is not True:
        hits = hits & where
    share = hits / np.sum(hits, axis=reduced_axes(axis, np.ndim(x)), keepdims=True)
    return np.sum(xdot * share, axis=shifted_axis(axis, np.ndim(x)), **_keep(keepdims))


for _f in (np.max, np.amax, np.min, np.amin):
    pushforward(_f, 0)(_extremum)


@pushforward(np.cumsum, 0)
def _(y, xdot, x, axis=None, dtype=None, out=None):
    if axis is None:
        return np.cumsum(np.reshape(xdot, (np.shape(xdot)[0], -1)), axis=1, dtype=dtype)
    return np.cumsum(xdot, axis=shifted_axis(axis, np.ndim(x)), dtype=dtype)


@pushforward(np.add.accumulate, 0)
def _(y, xdot, x, axis=0, dtype=None, out=None):
    return np.cumsum(xdot, axis=shifted_axis(axis, np.ndim(x)), dtype=dtype)


# -- products ------------------------------------------------------------------------------


def _as_matrices(a, b):
    """Operands of matmul with 1-D ones made 2-D, as matmul itself treats them."""
    return (a if np.ndim(a) > 1 else a[None, :]), (b if np.ndim(b) > 1 else b[:, None])


def _matmul_result(r, a, b):
    if np.ndim(b) == 1:
        r = r[..., 0]
    if np.ndim(a) == 1:
        r = r[..., 0, :] if np.ndim(b) > 1 else r[..., 0]
    return r


@pushforward(np.matmul, 0)
def _(y, adot, a, b, **kwargs):
    a2, b2 = _as_matrices(a, b)
    adot2 = adot if np.ndim(a) > 1 else adot[..., None, :]
    rank = 1 + max(np.ndim(a2), np.ndim(b2))
    return _matmul_result(np.matmul(lift(adot2, rank), b2), a, b)


@pushforward(np.matmul, 1)
def _(y, bdot, a, b, **kwargs):
    a2, b2 = _as_matrices(a, b)
    bdot2 = bdot if np.ndim(b) > 1 else bdot[..., :, None]
    rank = 1 + max(np.ndim(a2), np.ndim(b2))
    return _matmul_result(np.matmul(a2, lift(bdot2, rank)), a, b)


def _tensordot_first(adot, b, axes_a, axes_b):
    # (k, *a_free) x b -> (k, *a_free, *b_free): the directions stay in front
    return np.tensordot(adot, b, axes=([i + 1 for i in axes_a], axes_b))


def _tensordot_second(a, bdot, axes_a, axes_b):
    # a x (k, *b) -> (*a_free, k, *b_free): move the directions to the front
    r = np.tensordot(a, bdot, axes=(axes_a, [j + 1 for j in axes_b]))
    return np.moveaxis(r, np.ndim(a) - len(axes_a), 0)


@pushforward(np.tensordot, 0)
def _(y, adot, a, b, axes=2):
    return _tensordot_first(adot, b, *tensordot_axes(a, b, axes))


@pushforward(np.tensordot, 1)
def _(y, bdot, a, b, axes=2):
    return _tensordot_second(a, bdot, *tensordot_axes(a, b, axes))


def _dot_axes(a, b):
    return [np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]


@pushforward(np.dot, 0)
def _(y, adot, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return lift(adot, 1 + np.ndim(y)) * b
    return _tensordot_first(adot, b, *_dot_axes(a, b))


@pushforward(np.dot, 1)
def _(y, bdot, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * lift(bdot, 1 + np.ndim(y))
    return _tensordot_second(a, bdot, *_dot_axes(a, b))


def _einsum_tangent(argnum):
    """Operand ``argnum - 1``'s tangent takes its place, with one more index for the
    directions, which the output keeps in front."""

    def rule(y, xdot, subscripts, *operands, **kwargs):
        if not isinstance(subscripts, str):
            return NotImplemented  # the interleaved form goes to the derived rule
        spec = subscripts.replace(" ", "")
        inputs, _, output = spec.partition("->")
        terms = inputs.split(",")
        if "->" not in spec:  # implicit output: the indices used once, in order
            letters = [c for c in inputs if c.isalpha()]
            output = ("..." if "..." in inputs else "") + "".join(
                sorted(c for c in set(letters) if letters.count(c) == 1)
            )
        d = next(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in spec)
        terms[argnum - 1] = d + terms[argnum - 1]
        args = list(operands)
        args[argnum - 1] = xdot
        return np.einsum(",".join(terms) + "->" + d + output, *args, **kwargs)

    return rule


for _i in range(1, 27):
    pushforward(np.einsum, _i)(_einsum_tangent(_i))


# -- inverses and solves ----------------------------------------------------------------------


@pushforward(np.linalg.inv, 0)
def _(y, adot, a):
    # d inv(a) = -inv(a) da inv(a); the directions are one more batch axis
    return -np.matmul(y, np.matmul(adot, y))


@pushforward(np.linalg.solve, 0)
def _(y, adot, a, b):
    # d solve(a, b) = solve(a, db - da y)
    if np.ndim(b) == 1:  # NumPy 2: b is a vector only when it is 1-D
        rhs = np.matmul(lift(adot, 1 + np.ndim(y) + 1), y[..., None])
        return -np.linalg.solve(a, rhs)[..., 0]
    return -np.linalg.solve(a, np.matmul(lift(adot, 1 + np.ndim(y)), y))


@pushforward(np.linalg.solve, 1)
def _(y, bdot, a, b):
    if np.ndim(b) == 1:
        return np.linalg.solve(a, lift(bdot[..., None], 1 + np.ndim(y) + 1))[..., 0]
    return np.linalg.solve(a, lift(bdot, 1 + np.ndim(y)))


# -- shapes and indexing -----------------------------------------------------------------------


def _reshaped(y, xdot):
    return np.reshape(xdot, np.shape(xdot)[:1] + np.shape(y))


# Element order is kept (order "C"): the tangent is reshaped the same way. Fortran order
# would interleave the directions, so it goes to the derived rule.
@pushforward(np.reshape, 0)
def _(y, xdot, x, shape=None, order="C", **kwargs):
    return _reshaped(y, xdot) if order == "C" else NotImplemented


@pushforward(np.ravel, 0)
def _(y, xdot, x, order="C"):
    return _reshaped(y, xdot) if order == "C" else NotImplemented


pushforward(np.squeeze, 0)(lambda y, xdot, x, *args, **kwargs: _reshaped(y, xdot))
pushforward(np.expand_dims, 0)(lambda y, xdot, x, *args, **kwargs: _reshaped(y, xdot))


@pushforward(np.roll, 0)
def _(y, xdot, a, shift, axis=None):
    if axis is None:  # rolls the flattened array
        flat = np.reshape(xdot, (np.shape(xdot)[0], -1))
        return np.reshape(np.roll(flat, shift, 1), np.shape(xdot))
    return np.roll(xdot, shift, shifted_axis(axis, np.ndim(a)))


@pushforward(np.diagonal, 0)
def _(y, xdot, a, offset=0, axis1=0, axis2=1):
    n = np.ndim(a)
    return np.diagonal(xdot, offset, shifted_axis(axis1, n), shifted_axis(axis2, n))


pushforward(np.copy, 0)(lambda y, xdot, x, *args, **kwargs: xdot)
pushforward(np.matrix_transpose, 0)(lambda y, xdot, x: np.swapaxes(xdot, -1, -2))


@pushforward(np.broadcast_to, 0)
def _(y, xdot, x, *args, **kwargs):
    return np.broadcast_to(lift(xdot, 1 + np.ndim(y)), np.shape(xdot)[:1] + np.shape(y))


@pushforward(np.transpose, 0)
def _(y, xdot, x, axes=None):
    n = np.ndim(x)
    order = tuple(range(n, 0, -1)) if axes is None else shifted_axis(tuple(axes), n)
    return np.transpose(xdot, (0,) + order)


@pushforward(np.swapaxes, 0)
def _(y, xdot, x, axis1, axis2):
    return np.swapaxes(xdot, shifted_axis(axis1, np.ndim(x)), shifted_axis(axis2, np.ndim(x)))


@pushforward(np.moveaxis, 0)
def _(y, xdot, x, source, destination):
    n = np.ndim(x)
    return np.moveaxis(xdot, shifted_axis(source, n), shifted_axis(destination, n))


@pushforward(np.flip, 0)
def _(y, xdot, x, axis=None):
    return np.flip(xdot, shifted_axis(axis, np.ndim(x)))


@pushforward(np.triu, 0)
def _(y, xdot, x, k=0):
    return np.triu(xdot, k) if np.ndim(x) >= 2 else NotImplemented


@pushforward(np.tril, 0)
def _(y, xdot, x, k=0):
    return np.tril(xdot, k) if np.ndim(x) >= 2 else NotImplemented


@pushforward(cast, 0)
def _(y, xdot, x, dtype):
    if not np.iscomplexobj(y) and np.iscomplexobj(xdot):
        xdot = np.real(xdot)
    return astype(xdot, np.result_type(y))


# The directions stay first while indexing, behind one more slice: the index then means
# what it meant for x, an Ellipsis included (spelt out, one that stands for no axis would
# no longer part the advanced indices around it). Advanced indices apart put their axes
# first, ahead of the directions too: those are moved behind them.
@pushforward(operator.getitem, 0)
def _(y, xdot, x, index):
    parts = index if isinstance(index, tuple) else (index,)
    picked = xdot[(slice(None),) + parts]
    ahead = advanced_axes_first(parts)
    return np.moveaxis(picked, ahead, 0) if ahead else picked


pushforward(scatter_add, 0)(lambda y, xdot, x, index, values: None)


@pushforward(scatter_add, 2)
def _(y, vdot, x, index, values):
    # as getitem's: the directions first, behind one more slice, and the values' tangents
    # laid out as that index selects (their axes padded to the selection's, then the
    # directions moved behind advanced axes that NumPy puts first)
    parts = index if isinstance(index, tuple) else (index,)
    k = np.shape(vdot)[0]
    selected = np.ndim(np.empty(np.shape(x), dtype=bool)[parts])
    missing = selected - (np.ndim(vdot) - 1)
    v = np.reshape(vdot, (k,) + (1,) * missing + np.shape(vdot)[1:]) if missing > 0 else vdot
    ahead = advanced_axes_first(parts)
    if ahead:
        v = np.moveaxis(v, 0, ahead)
    template = np.zeros_like(vdot, shape=(k,) + np.shape(x))
    return scatter_add(template, (slice(None),) + parts, v)


# -- joining ----------------------------------------------------------------------------------


def _filled(y, xdots, arrays):
    """Tangents of a list argument with zeros for the constant elements."""
    k = next(np.shape(t)[0] for t in xdots if t is not None)
    return [
        np.zeros_like(y, shape=(k,) + np.shape(a)) if t is None else t
        for t, a in zip(xdots, arrays)
    ]


@pushforward(np.concatenate, 0)
def _(y, xdots, arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    parts = _filled(y, xdots, arrays)
    if axis is None:
        # each tangent flattened after its direction axis (the size spelled out: NumPy
        # cannot work out -1 for an empty array)
        flat = [np.reshape(p, (np.shape(p)[0], math.prod(np.shape(p)[1:]))) for p in parts]
        return np.concatenate(flat, axis=1)
    return np.concatenate(parts, axis=axis % np.ndim(arrays[0]) + 1)


@pushforward(np.stack, 0)
def _(y, xdots, arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return np.stack(_filled(y, xdots, arrays), axis=axis % np.ndim(y) + 1)
