"""Sensitivities of statistics helpers: covariance, polynomials, integration, convolution
and interpolation.

``cov``, ``corrcoef``, ``polyval``, ``polyfit``, ``trapezoid`` and ``correlate`` are
implementations: NumPy's own arithmetic, written with functions that have rules (means and
products, Horner's scheme, least squares, slices, a flipped convolution), so they are
exact, differentiable again and give NumPy's values. ``convolve`` has a rule (its adjoints
are convolutions, one record instead of a loop), and so does ``interp``, which is linear in
the values ``fp`` and piecewise linear in ``x``; the sample points ``xp`` carry no gradient.
"""

import numpy as np

from .registry import implementation, sensitivity
from .shape import scatter_add


def _rows(a, rowvar):
    """``a`` as a 2-D array of variables (rows) by observations, as ``np.cov`` reads it."""
    a = np.reshape(a, (1, -1)) if np.ndim(a) < 2 else a
    return a if rowvar or np.shape(a)[0] == 1 else np.transpose(a)


@implementation(np.cov)
def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
         dtype=None):  # fmt: skip
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    x = _rows(m, rowvar)
    if y is not None:
        x = np.concatenate([x, _rows(y, rowvar)], axis=0)
    if dtype is not None:
        x = x.astype(dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = np.asarray(fweights, dtype=float)
    if aweights is not None:
        w = np.asarray(aweights, dtype=float) if w is None else w * aweights
    n = np.shape(x)[1]
    if w is None:
        average, fact = np.mean(x, axis=1, keepdims=True), n - ddof
    else:
        w_sum = np.sum(w)
        average = np.sum(x * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * np.sum(w * aweights) / w_sum
    centred = x - average
    weighted = centred if w is None else centred * w
    if np.iscomplexobj(weighted):
        weighted = np.conjugate(weighted)
    return np.squeeze(np.matmul(centred, np.transpose(weighted)) * (1.0 / fact))


@implementation(np.corrcoef)
def _corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = np.cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    d = np.einsum("ii->i", c)
    stddev = np.sqrt(np.real(d) if np.iscomplexobj(d) else d)
    c = c / stddev[:, None] / stddev[None, :]
    return np.clip(c, -1, 1) if not np.iscomplexobj(c) else c


@implementation(np.polyval)
def _polyval(p, x):
    y = np.zeros_like(x)  # a constant start: Horner's scheme, as NumPy runs it
    for i in range(len(p)):
        y = y * x + p[i]
    return y


@implementation(np.polyfit)
def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    # NumPy's algorithm: a scaled Vandermonde least-squares problem
    if full or cov:
        raise NotImplementedError("polyfit(..., full=True or cov=True) is not differentiable here")
    order = int(deg) + 1
    if rcond is None:
        rcond = len(x) * np.finfo(np.result_type(x, 0.0)).eps
    lhs = np.expand_dims(x, -1) ** np.arange(order - 1, -1, -1.0)
    rhs = y
    if w is not None:
        lhs = lhs * np.expand_dims(w, -1)
        rhs = rhs * (np.expand_dims(w, -1) if np.ndim(rhs) == 2 else w)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    c = np.linalg.lstsq(lhs / scale, rhs, rcond)[0]
    return c / (np.expand_dims(scale, -1) if np.ndim(c) == 2 else scale)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    nd = np.ndim(y)
    axis = axis % nd
    upper = (slice(None),) * axis + (slice(1, None),)
    lower = (slice(None),) * axis + (slice(None, -1),)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        d = x[1:] - x[:-1]
        d = np.reshape(d, tuple(-1 if i == axis else 1 for i in range(nd)))
    else:
        d = x[upper] - x[lower]
    return np.sum(d * (y[upper] + y[lower]) / 2.0, axis=axis)


for _name in ("trapezoid", "trapz"):
    if hasattr(np, _name):
        implementation(getattr(np, _name))(_trapezoid)


# -- convolution: the adjoint of each factor is a convolution with the other, flipped -----


def _full_adjoint(ybar, n, m, mode):
    """``ybar`` of ``np.convolve(a, v, mode)`` as the adjoint of the full convolution."""
    if mode == "full":
        return ybar
    start = (min(n, m) - 1) // 2 if mode == "same" else min(n, m) - 1
    template = np.zeros((n + m - 1,), dtype=np.result_type(ybar))
    return scatter_add(template, slice(start, start + np.shape(ybar)[0]), ybar)


@sensitivity(np.convolve, 0)
def _(y, ybar, a, v, mode="full"):
    full = _full_adjoint(ybar, np.shape(a)[0], np.shape(v)[0], mode)
    return np.convolve(full, v[::-1], "valid")


@sensitivity(np.convolve, 1)
def _(y, ybar, a, v, mode="full"):
    full = _full_adjoint(ybar, np.shape(a)[0], np.shape(v)[0], mode)
    return np.convolve(full, a[::-1], "valid")


@implementation(np.correlate)
def _correlate(a, v, mode="valid"):
    if np.iscomplexobj(v):
        v = np.conjugate(v)
    if np.shape(v)[0] > np.shape(a)[0]:  # NumPy correlates the longer with the shorter
        return np.convolve(v, a[::-1], mode)[::-1]
    return np.convolve(a, v[::-1], mode)


# -- interpolation ------------------------------------------------------------------------


def _points(p):
    """Sample points as NumPy reads them: a list becomes an array (indexed by arrays)."""
    return np.asarray(p) if isinstance(p, (list, tuple)) else p


def _interp_cell(x, xp):
    """For each ``x``: the index ``i`` of the interval ``[xp[i], xp[i + 1]]`` it falls in,
    clipped to the ends (a plain index; ``xp`` may be a node), and the points ``xp``."""
    xp = _points(xp)
    i = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, max(len(xp) - 2, 0))
    return i, xp


@sensitivity(np.interp, 2)
def _(y, ybar, x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise NotImplementedError("the sensitivity of interp(..., period=...) is not implemented")
    i, xp = _interp_cell(x, xp)
    ybar = ybar * np.ones_like(y)  # a scalar x gives a 0-d adjoint: index it like an array
    template = np.zeros(np.shape(fp), dtype=np.result_type(ybar))
    if len(xp) == 1:
        inside = ((x >= xp[0]) | (left is None)) & ((x <= xp[0]) | (right is None))
        return scatter_add(template, np.zeros_like(i), np.where(inside, ybar, 0.0))
    t = (x - xp[i]) / (xp[i + 1] - xp[i])
    t = np.where(x > xp[-1], 1.0, np.where(x < xp[0], 0.0, t))
    # beyond the ends, left= and right= replace fp[0] and fp[-1]
    replaced = ((x < xp[0]) & (left is not None)) | ((x > xp[-1]) & (right is not None))
    weight = ybar * np.where(replaced, 0.0, 1.0)
    return scatter_add(template, i, weight * (1.0 - t)) + scatter_add(template, i + 1, weight * t)


@sensitivity(np.interp, 1)
def _(y, ybar, x, xp, fp, left=None, right=None, period=None):
    # inside [xp[i], xp[i + 1]], y = fp[i] + slope (x - xp[i]): moving xp[i] moves y by
    # slope (t - 1) and xp[i + 1] by -slope t; beyond the points y does not depend on xp
    if period is not None:
        raise NotImplementedError("the sensitivity of interp(..., period=...) is not implemented")
    i, xp = _interp_cell(x, xp)
    ybar = ybar * np.ones_like(y)
    template = np.zeros(np.shape(xp), dtype=np.result_type(ybar, xp))
    if len(xp) == 1:
        return template
    fp = _points(fp)
    step = xp[i + 1] - xp[i]
    t = (x - xp[i]) / step
    inside = np.greater_equal(x, xp[0]) & np.less_equal(x, xp[-1])
    g = np.where(inside, ybar * (fp[i + 1] - fp[i]) / step, 0.0)
    return scatter_add(template, i, g * (t - 1.0)) + scatter_add(template, i + 1, -g * t)


# left= and right= are the values below the first point and above the last (NumPy
# ignores both under period=)
@sensitivity(np.interp, 3)
def _(y, ybar, x, xp, fp, left=None, right=None, period=None):
    return np.where(np.less(x, _points(xp)[0]) & (period is None), ybar, 0.0)


@sensitivity(np.interp, 4)
def _(y, ybar, x, xp, fp, left=None, right=None, period=None):
    return np.where(np.greater(x, _points(xp)[-1]) & (period is None), ybar, 0.0)


@sensitivity(np.interp, 0)
def _(y, ybar, x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise NotImplementedError("the sensitivity of interp(..., period=...) is not implemented")
    i, xp = _interp_cell(x, xp)
    if len(xp) == 1:
        return ybar * np.zeros_like(x)
    fp = _points(fp)
    slope = (fp[i + 1] - fp[i]) / (xp[i + 1] - xp[i])
    inside = np.greater_equal(x, xp[0]) & np.less_equal(x, xp[-1])
    return ybar * np.where(inside, slope, 0.0)
