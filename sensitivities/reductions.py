"""Sensitivities of reductions and scans: sum, mean, max, min, prod, cumsum, cumprod,
and the ``reduce``/``accumulate`` methods of add, multiply, maximum and minimum.

Ties in max and min share the adjoint equally among the tied elements, as in autograd
and JAX's ``jnp.max``.
"""

import numpy as np

from .registry import implementation, sensitivity

_NO_VALUE = np._NoValue


def reduced_axes(axis, ndim):
    """``axis`` (None, an int or a tuple, possibly negative) as a sorted tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def expand_reduced(ybar, x, axis, keepdims):
    """``ybar`` of a reduction over ``axis``, with the reduced axes put back as size 1."""
    if keepdims is True or np.ndim(x) == np.ndim(ybar):
        return ybar
    return np.reshape(ybar, _kept_shape(np.shape(x), reduced_axes(axis, np.ndim(x))))


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _masked(g, where):
    return g if where is _NO_VALUE or where is True else np.where(where, g, 0.0)


def _sum_rule(y, ybar, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE,
              initial=_NO_VALUE, where=_NO_VALUE):  # fmt: skip
    g = np.broadcast_to(expand_reduced(ybar, x, axis, keepdims), np.shape(x))
    return _masked(g, where)


def _mean_rule(y, ybar, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE, *,
               where=_NO_VALUE):  # fmt: skip
    shape = np.shape(x)
    count = 1
    for a in reduced_axes(axis, len(shape)):
        count *= shape[a]
    if where is not _NO_VALUE and where is not True:
        count = np.sum(np.broadcast_to(where, shape), axis=axis, keepdims=True)
    g = np.broadcast_to(expand_reduced(ybar, x, axis, keepdims) / count, shape)
    return _masked(g, where)


def _extremum_rule(y, ybar, x, axis=None, out=None, keepdims=_NO_VALUE,
                   initial=_NO_VALUE, where=_NO_VALUE):  # fmt: skip
    y = expand_reduced(y, x, axis, keepdims)
    hits = np.equal(x, y)
    if where is not _NO_VALUE and where is not True:
        hits = hits & where
    share = hits / np.sum(hits, axis=reduced_axes(axis, np.ndim(x)), keepdims=True)
    return expand_reduced(ybar, x, axis, keepdims) * share


def _prod_rule(y, ybar, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE,
               initial=_NO_VALUE, where=_NO_VALUE):  # fmt: skip
    axes = reduced_axes(axis, np.ndim(x))
    ybar = expand_reduced(ybar, x, axis, keepdims)
    zero = np.equal(x, 0)
    if not np.any(zero):
        return ybar * (expand_reduced(y, x, axis, keepdims) / x)
    # With zeros, d prod / d x_i is the product of the others: nonzero only where x_i is
    # the one zero of its slice, and then it is the product of the slice's nonzeros.
    zeros = np.sum(zero, axis=axes, keepdims=True)
    others = np.prod(np.where(zero, 1.0, x), axis=axes, keepdims=True)
    safe = np.where(zero, 1.0, x)
    return ybar * np.where(zero, np.where(zeros == 1, others, 0.0), others / safe * (zeros == 0))


sensitivity(np.sum, 0)(_sum_rule)
sensitivity(np.mean, 0)(_mean_rule)
for _f in (np.max, np.amax, np.min, np.amin):
    sensitivity(_f, 0)(_extremum_rule)
sensitivity(np.prod, 0)(_prod_rule)


# ufunc.reduce takes axis=0 by default; otherwise these are the rules above.
def _axis0(rule):
    def reduce_rule(y, ybar, x, axis=0, *args, **kwargs):
        return rule(y, ybar, x, axis, *args, **kwargs)

    return reduce_rule


sensitivity(np.add.reduce, 0)(_axis0(_sum_rule))
sensitivity(np.multiply.reduce, 0)(_axis0(_prod_rule))


@sensitivity(np.maximum.reduce, 0)
@sensitivity(np.minimum.reduce, 0)
def _(y, ybar, x, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    return _extremum_rule(y, ybar, x, axis, None, keepdims, initial, where)


# -- scans -----------------------------------------------------------------------------


def _scan_axis(x, axis):
    """Scans over ``axis=None`` run over the flattened array."""
    return (np.ravel(x), 0) if axis is None else (x, axis % np.ndim(x))


def reverse_cumsum(g, axis):
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def _cumsum_rule(y, ybar, x, axis=None, dtype=None, out=None):
    x_scanned, axis = _scan_axis(x, axis)
    return np.reshape(reverse_cumsum(ybar, axis), np.shape(x))


def _cumprod_rule(y, ybar, x, axis=None, dtype=None, out=None):
    x_scanned, axis = _scan_axis(x, axis)
    if not np.any(np.equal(x_scanned, 0)):
        return np.reshape(reverse_cumsum(ybar * y, axis) / x_scanned, np.shape(x))
    # d y_j / d x_i = prod_{k <= j, k != i} x_k: one row per i with x_i replaced by 1,
    # scanned, and kept for j >= i. Quadratic in the scan length, so only used with zeros.
    xs = np.moveaxis(x_scanned, axis, -1)
    rows = xs[..., None, :] * np.ones_like(xs[..., :, None])  # row i is a copy of x
    diagonal = np.triu(np.tril(np.ones_like(rows, dtype=bool)))
    rows = np.cumprod(np.where(diagonal, 1.0, rows), axis=-1)
    g = np.sum(np.triu(rows) * np.moveaxis(ybar, axis, -1)[..., None, :], axis=-1)
    return np.reshape(np.moveaxis(g, -1, axis), np.shape(x))


def _cumextremum_rule(y, ybar, x, axis=0, dtype=None, out=None):
    # ybar_j goes to the elements i <= j equal to the running extremum y_j, shared if tied
    xs, ys, gs = (np.moveaxis(v, axis, -1) for v in (x, y, ybar))
    hits = np.triu(np.equal(xs[..., :, None], ys[..., None, :]))
    share = hits / np.sum(hits, axis=-2, keepdims=True)
    return np.moveaxis(np.sum(share * gs[..., None, :], axis=-1), -1, axis)


sensitivity(np.cumsum, 0)(_cumsum_rule)
sensitivity(np.cumprod, 0)(_cumprod_rule)
sensitivity(np.add.accumulate, 0)(_axis0(_cumsum_rule))
sensitivity(np.multiply.accumulate, 0)(_axis0(_cumprod_rule))
sensitivity(np.maximum.accumulate, 0)(_cumextremum_rule)
sensitivity(np.minimum.accumulate, 0)(_cumextremum_rule)


# -- variance and standard deviation, entered as means of squares ------------------------


@implementation(np.var)
def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NO_VALUE,
         mean=_NO_VALUE, correction=_NO_VALUE):  # fmt: skip
    if where is not _NO_VALUE or mean is not _NO_VALUE:
        raise NotImplementedError("np.var with where= or mean= is not differentiable yet")
    if correction is not _NO_VALUE:
        ddof = correction
    shape = np.shape(a)
    count = 1
    for i in reduced_axes(axis, len(shape)):
        count *= shape[i]
    centred = a - np.mean(a, axis=axis, keepdims=True)
    return np.sum(centred * centred, axis=axis, keepdims=keepdims) / (count - ddof)


@implementation(np.std)
def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    return np.sqrt(_var(a, axis, dtype, out, ddof, keepdims, **kwargs))
