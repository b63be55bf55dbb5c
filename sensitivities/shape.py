"""Sensitivities of shape changes and indexing.

Indexing scatters the adjoint back with ``np.add.at``, so repeated indices accumulate.
The scatter is itself a function with a sensitivity (a gather), which keeps indexing
differentiable to any order.
"""

import operator

import numpy as np

from .registry import nondifferentiable, primitive, sensitivity


@primitive
def astype(x, dtype):
    """``x`` cast to ``dtype``; the function ``Node.astype`` records."""
    if hasattr(x, "astype"):
        return x.astype(dtype)
    return np.dtype(dtype).type(x)


@sensitivity(astype, 0)
def _(y, ybar, x, dtype):
    target = np.result_type(x)
    if target.kind != "c" and np.iscomplexobj(ybar):
        ybar = np.real(ybar)
    return astype(ybar, target)


def _back_to_shape(y, ybar, x, *args, **kwargs):
    return np.reshape(ybar, np.shape(x))


for _f in (np.reshape, np.ravel, np.squeeze, np.expand_dims):
    sensitivity(_f, 0)(_back_to_shape)

# broadcast_to's adjoint is its input's adjoint summed over the broadcast axes, which the
# engine does for every rule.
sensitivity(np.broadcast_to, 0)(lambda y, ybar, x, *args, **kwargs: ybar)


@sensitivity(np.transpose, 0)
def _(y, ybar, x, axes=None):
    if axes is None:
        return np.transpose(ybar)
    return np.transpose(ybar, np.argsort([a % np.ndim(x) for a in axes]))


@sensitivity(np.swapaxes, 0)
def _(y, ybar, x, axis1, axis2):
    return np.swapaxes(ybar, axis1, axis2)


@sensitivity(np.moveaxis, 0)
def _(y, ybar, x, source, destination):
    return np.moveaxis(ybar, destination, source)


@sensitivity(np.flip, 0)
def _(y, ybar, x, axis=None):
    return np.flip(ybar, axis)


@sensitivity(np.triu, 0)
def _(y, ybar, x, k=0):
    return np.triu(ybar, k)


@sensitivity(np.tril, 0)
def _(y, ybar, x, k=0):
    return np.tril(ybar, k)


# -- indexing ---------------------------------------------------------------------------


def _is_basic(index):
    """Whether ``index`` selects each element at most once (no integer arrays)."""
    parts = index if isinstance(index, tuple) else (index,)
    for part in parts:
        if isinstance(part, (list, np.ndarray)) and np.result_type(part) != np.bool_:
            return False
    return True


@primitive
def scatter_add(x, index, values):
    """An array shaped like ``x``, zero but for ``values`` added at ``index``."""
    out = np.zeros_like(x, dtype=np.result_type(x, values))
    if _is_basic(index):
        out[index] += values
    else:
        np.add.at(out, index, values)
    return out


@sensitivity(operator.getitem, 0)
def _(y, ybar, x, index):
    return scatter_add(x, index, ybar)


@sensitivity.update(operator.getitem, 0)
def _(xbar, y, ybar, x, index):
    if _is_basic(index):
        xbar[index] += ybar
    else:
        np.add.at(xbar, index, ybar)
    return xbar


# x only lends scatter_add its shape and dtype; values are gathered back.
sensitivity(scatter_add, 0)(lambda y, ybar, x, index, values: None)
sensitivity(scatter_add, 2)(lambda y, ybar, x, index, values: ybar[index])

nondifferentiable(
    np.shape, np.ndim, np.size, np.result_type, np.zeros_like, np.ones_like, np.empty_like,
    np.argmax, np.argmin, np.argsort, np.nonzero, np.flatnonzero, np.searchsorted,
    np.count_nonzero, np.any, np.all, np.iscomplexobj, np.isrealobj, np.iscomplex,
    np.isreal, np.can_cast,
)  # fmt: skip
