"""Sensitivities of products: matmul, dot, tensordot."""

import numpy as np

from .registry import sensitivity


def _mT(a):
    return np.swapaxes(a, -1, -2)


@sensitivity(np.matmul, 0)
def _(y, ybar, a, b, **kwargs):
    if np.ndim(b) == 1:
        return ybar * b if np.ndim(a) == 1 else np.expand_dims(ybar, -1) * b
    if np.ndim(a) == 1:
        return np.matmul(b, np.expand_dims(ybar, -1))[..., 0]
    return np.matmul(ybar, _mT(b))


@sensitivity(np.matmul, 1)
def _(y, ybar, a, b, **kwargs):
    if np.ndim(b) == 1:
        return ybar * a if np.ndim(a) == 1 else np.matmul(np.expand_dims(ybar, -2), a)[..., 0, :]
    if np.ndim(a) == 1:
        return np.expand_dims(a, -1) * np.expand_dims(ybar, -2)
    return np.matmul(_mT(a), ybar)


def _tensordot_axes(a, b, axes):
    """``axes`` of ``np.tensordot`` as two lists of non-negative axes."""
    if isinstance(axes, int):
        return list(range(np.ndim(a) - axes, np.ndim(a))), list(range(axes))
    axes_a, axes_b = axes
    axes_a = [axes_a] if isinstance(axes_a, int) else list(axes_a)
    axes_b = [axes_b] if isinstance(axes_b, int) else list(axes_b)
    return [i % np.ndim(a) for i in axes_a], [i % np.ndim(b) for i in axes_b]


def _tensordot_adjoint(ybar, other, own_axes, other_axes, own_ndim, other_ndim, first):
    """The adjoint of one factor of a tensordot, in that factor's own axis order."""
    own_free = [i for i in range(own_ndim) if i not in own_axes]
    other_free = [i for i in range(other_ndim) if i not in other_axes]
    n_own_free = len(own_free)
    if first:  # y = own_free + other_free
        y_other = list(range(n_own_free, n_own_free + len(other_free)))
        g = np.tensordot(ybar, other, axes=(y_other, other_free))
        order = own_free + [own_axes[other_axes.index(j)] for j in sorted(other_axes)]
    else:  # y = other_free + own_free
        y_other = list(range(len(other_free)))
        g = np.tensordot(other, ybar, axes=(other_free, y_other))
        order = [own_axes[other_axes.index(j)] for j in sorted(other_axes)] + own_free
    return np.transpose(g, np.argsort(order))


@sensitivity(np.tensordot, 0)
def _(y, ybar, a, b, axes=2):
    axes_a, axes_b = _tensordot_axes(a, b, axes)
    return _tensordot_adjoint(ybar, b, axes_a, axes_b, np.ndim(a), np.ndim(b), True)


@sensitivity(np.tensordot, 1)
def _(y, ybar, a, b, axes=2):
    axes_a, axes_b = _tensordot_axes(a, b, axes)
    return _tensordot_adjoint(ybar, a, axes_b, axes_a, np.ndim(b), np.ndim(a), False)


def _dot_axes(a, b):
    return [np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]


@sensitivity(np.dot, 0)
def _(y, ybar, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return ybar * b
    axes_a, axes_b = _dot_axes(a, b)
    return _tensordot_adjoint(ybar, b, axes_a, axes_b, np.ndim(a), np.ndim(b), True)


@sensitivity(np.dot, 1)
def _(y, ybar, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return ybar * a
    axes_a, axes_b = _dot_axes(a, b)
    return _tensordot_adjoint(ybar, a, axes_b, axes_a, np.ndim(b), np.ndim(a), False)
