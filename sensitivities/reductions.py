"""Sensitivities of reductions and scans: sums, means, products, extrema, variances,
cumulative sums and products, their NaN-ignoring forms, quantiles and averages, and the
``reduce``/``accumulate`` methods of add, multiply, maximum and minimum.

Conventions:

- Ties in ``max``, ``min``, ``nanmax``, ``nanmin`` and the running extrema share the
  adjoint equally among the tied elements, as in autograd and JAX's ``jnp.max``.
- ``prod`` and ``cumprod`` divide, ``y / x``, on plain arrays without zeros; with zeros,
  and when differentiated again, they take the products of the other factors without
  dividing, which is exact at zeros and keeps second derivatives right at small ``x``.
- NaN-ignoring reductions give NaN entries a zero gradient.
- ``median``, ``quantile`` and ``percentile`` (and their NaN forms) are implementations:
  a sort, a gather and a linear interpolation, so the gradient of a tied order statistic
  goes to the element a stable sort puts in that place.
- ``var`` and ``std`` have dedicated rules, ``2 (x - mean) / (n - ddof)`` and its
  quotient by ``2 std``: one record instead of the five of a mean of squares, and the
  same values. ``std`` of a constant slice of two or more elements has an infinite
  derivative; its gradient is NaN there, as in autograd and JAX. Where the variance is
  constant whatever ``x`` is (a slice of one element, a scalar, ``n <= ddof``), its
  gradient is 0.
"""

import numpy as np

from .registry import implementation, primitive, sensitivity

_NO_VALUE = np._NoValue


def reduced_axes(axis, ndim):
    """``axis`` (None, an int or a tuple, possibly negative) as a sorted tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def expand_reduced(ybar, x, axis, keepdims):
    """``ybar`` of a reduction over ``axis``, with the reduced axes put back as size 1.
    (Over all axes, ``ybar`` is a scalar or all ones in shape, and broadcasts as it is.)"""
    if keepdims is True or axis is None or np.ndim(x) == np.ndim(ybar):
        return ybar
    return np.reshape(ybar, _kept_shape(np.shape(x), reduced_axes(axis, np.ndim(x))))


def broadcast_to(a, shape):
    """``np.broadcast_to(a, shape)``: a read-only view repeating ``a`` with zero strides,
    which later rules can recognise (see matmul's). Built from strides directly, as NumPy's
    own takes an iterator and 2.5 µs where this takes 1 (a sum's rule makes one per
    record); anything else (another library's array, a bad shape) goes to NumPy's."""
    if isinstance(a, (float, complex, np.number)):
        a = np.asarray(a)
    shape = tuple(shape)
    if type(a) is not np.ndarray or a.ndim > len(shape):
        return np.broadcast_to(a, shape)
    strides = [0] * (len(shape) - a.ndim)
    for n, m, stride in zip(a.shape, shape[len(strides) :], a.strides):
        if n != m and n != 1:
            return np.broadcast_to(a, shape)  # NumPy's error
        strides.append(stride if n == m else 0)
    try:
        view = np.ndarray(shape, a.dtype, a, 0, tuple(strides))
    except ValueError:  # not contiguous: no buffer to view
        return np.broadcast_to(a, shape)
    view.setflags(False)
    return view


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _real_dtype(x):
    dtype = np.result_type(x)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _given(where):
    return where is not _NO_VALUE and where is not True


def _mask(x, where, nan):
    """The elements a reduction takes part in: ``where``, less NaNs for the nan forms;
    None for all of them."""
    mask = np.broadcast_to(where, np.shape(x)) if _given(where) else None
    if nan:
        valid = ~np.isnan(x)
        mask = valid if mask is None else mask & valid
    return mask


def _masked(g, mask):
    return g if mask is None else np.where(mask, g, np.zeros_like(g))


def _count(x, axis, mask):
    """How many elements each reduced slice has, in ``x``'s float dtype (kept dims)."""
    if mask is None:
        shape = np.shape(x)
        count = 1
        for a in reduced_axes(axis, len(shape)):
            count *= shape[a]
        return count
    return np.sum(mask, axis=reduced_axes(axis, np.ndim(x)), keepdims=True, dtype=_real_dtype(x))


# -- sums and means ----------------------------------------------------------------------


def _sum_rule(nan=False):
    def rule(y, ybar, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE,
             initial=_NO_VALUE, where=_NO_VALUE):  # fmt: skip
        shape = x.shape if type(x) is np.ndarray else np.shape(x)  # (no dispatch: 0.3 µs)
        g = broadcast_to(expand_reduced(ybar, x, axis, keepdims), shape)
        return _masked(g, _mask(x, where, nan)) if nan or _given(where) else g

    return rule


def _mean_rule(nan=False):
    def rule(y, ybar, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE, *, where=_NO_VALUE):
        if 0 in np.shape(x):  # NumPy's mean of nothing is NaN; its gradient is empty
            return np.zeros_like(x)
        mask = _mask(x, where, nan)
        g = expand_reduced(ybar, x, axis, keepdims) / _count(x, axis, mask)
        return _masked(broadcast_to(g, np.shape(x)), mask)

    return rule


sensitivity(np.sum, 0)(_sum_rule())
sensitivity(np.nansum, 0)(_sum_rule(nan=True))
sensitivity(np.mean, 0)(_mean_rule())
sensitivity(np.nanmean, 0)(_mean_rule(nan=True))


# -- extrema: ties share ---------------------------------------------------------------


def _extremum_rule(nan=False):
    def rule(
        y, ybar, x, axis=None, out=None, keepdims=_NO_VALUE, initial=_NO_VALUE, where=_NO_VALUE
    ):
        hits = np.equal(x, expand_reduced(y, x, axis, keepdims))  # NaNs never hit
        ybar = expand_reduced(ybar, x, axis, keepdims)
        if initial is _NO_VALUE and not _given(where) and type(hits) is np.ndarray:
            # Ties are rare: as many hits as slices, and no NaN slice (which has no hit),
            # means one hit per slice, and nothing to share.
            size = y.size if type(y) is np.ndarray else np.size(y)  # (no dispatch: 0.3 µs)
            if np.count_nonzero(hits) == size and not np.count_nonzero(np.isnan(y)):
                return hits * ybar
        if _given(where):
            hits = hits & where
        # a slice whose extremum is `initial` (or all NaN) has no hits and no gradient
        return shared(hits, ybar, reduced_axes(axis, np.ndim(x)), _real_dtype(x))

    return rule


@primitive
def shared(hits, ybar, axes, dtype):
    """``ybar`` shared among the ``hits`` of each slice over ``axes`` (an extremum's ties
    share its adjoint); a slice without hits gets nothing. A primitive, so that a batch of
    them runs as one (``sensitivities.batching``)."""
    count = np.sum(hits, axis=axes, keepdims=True, dtype=dtype)
    # the share is worked out per slice, on the small reduced array, then spread once
    return hits * (ybar / np.maximum(count, 1))


@sensitivity(shared, 1)
def _(y, g, hits, ybar, axes, dtype):
    count = np.sum(hits, axis=axes, keepdims=True, dtype=dtype)
    return np.sum(g * hits, axis=axes, keepdims=True) / np.maximum(count, 1)


for _f in (np.max, np.amax, np.min, np.amin):
    sensitivity(_f, 0)(_extremum_rule())
for _f in (np.nanmax, np.nanmin):
    sensitivity(_f, 0)(_extremum_rule(nan=True))


@implementation(np.ptp)
def _ptp(a, axis=None, out=None, keepdims=_NO_VALUE):
    keep = {} if keepdims is _NO_VALUE else {"keepdims": keepdims}
    return np.max(a, axis=axis, **keep) - np.min(a, axis=axis, **keep)


# -- products ---------------------------------------------------------------------------


def _prod_rule(nan=False):
    def rule(y, ybar, x, axis=None, dtype=None, out=None, keepdims=_NO_VALUE,
             initial=_NO_VALUE, where=_NO_VALUE):  # fmt: skip
        mask = _mask(x, where, nan)
        if mask is not None:
            x = np.where(mask, x, np.ones_like(x))  # excluded elements are factors of 1
        g = _prod_gradient(
            x, expand_reduced(y, x, axis, keepdims), reduced_axes(axis, np.ndim(x)), initial
        )
        return _masked(expand_reduced(ybar, x, axis, keepdims) * g, mask)

    return rule


def _divides(x):
    """Whether to take the products of the other factors as ``y / x``: fast, and exact to
    first order where no ``x`` is zero, but its own derivative (terms in ``y / x**2`` that
    cancel) loses every digit at small ``x``. So only plain arrays without zeros divide;
    anything else (a node of an outer tape, differentiating again) takes the products."""
    plain = isinstance(x, (np.ndarray, np.generic, float, int, complex))
    return plain and not np.any(np.equal(x, 0))


def _prod_gradient(x, y, axes, initial=_NO_VALUE):
    """d prod(x) / d x over ``axes``, with ``y`` the product (kept dims)."""
    if _divides(x):
        return y / x
    # Otherwise d prod / d x_i is the product of the others, taken without dividing: the
    # products of the elements before and after each (the reduced axes moved last and
    # flattened). Its own derivative is then right too.
    kept = [i for i in range(np.ndim(x)) if i not in axes]
    order = kept + list(axes)
    moved = x if order == sorted(order) else np.transpose(x, order)
    flat = np.reshape(moved, [np.shape(x)[i] for i in kept] + [-1])
    ones = np.ones_like(flat[..., :1])
    before = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1), axis=-1)
    g = np.reshape(before * np.flip(after, -1), np.shape(moved))
    if initial is not _NO_VALUE:
        g = g * initial
    return g if moved is x else np.transpose(g, np.argsort(order))


sensitivity(np.prod, 0)(_prod_rule())
sensitivity(np.nanprod, 0)(_prod_rule(nan=True))


# ufunc.reduce takes axis=0 by default; otherwise these are the rules above.
def _axis0(rule):
    def reduce_rule(y, ybar, x, axis=0, *args, **kwargs):
        return rule(y, ybar, x, axis, *args, **kwargs)

    return reduce_rule


sensitivity(np.add.reduce, 0)(_axis0(_sum_rule()))
sensitivity(np.multiply.reduce, 0)(_axis0(_prod_rule()))


@sensitivity(np.maximum.reduce, 0)
@sensitivity(np.minimum.reduce, 0)
def _(y, ybar, x, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    return _extremum_rule()(y, ybar, x, axis, None, keepdims, initial, where)


# -- variance and standard deviation -----------------------------------------------------


def _centred(x, axis, ddof, mask, mean=_NO_VALUE):
    """``(x - mean) / (n - ddof)`` over ``axis``, zero where ``mask`` excludes, and the
    slices where the variance is constant: None if there are none, True if all are, else a
    mask (kept dims). A slice of one element (or of ``n <= ddof``, where NumPy divides by
    zero) has a variance that is the same, 0, NaN or inf, whatever ``x`` is: its gradient
    is 0, not the NaN of 0 / 0."""
    count = _count(x, axis, mask)
    axes = reduced_axes(axis, np.ndim(x))
    if mean is not _NO_VALUE:
        m = mean
    elif mask is None:
        m = np.mean(x, axis=axes, keepdims=True)
    else:
        m = np.sum(np.where(mask, x, np.zeros_like(x)), axis=axes, keepdims=True) / count
    if mask is None:  # count is a Python int: one answer for every slice
        if count <= 1 or count <= ddof:
            return np.zeros_like(x), True
        return (x - m) / (count - ddof), None
    constant = (count <= 1) | (count <= ddof)
    if not np.any(constant):
        return _masked((x - m) / (count - ddof), mask), None
    g = (x - m) / np.where(constant, np.ones_like(count), count - ddof)
    return _masked(g, mask & ~constant), constant


def _var_rule(nan=False, std=False):
    def rule(y, ybar, x, axis=None, dtype=None, out=None, ddof=0, keepdims=_NO_VALUE, *,
             where=_NO_VALUE, mean=_NO_VALUE, correction=_NO_VALUE):  # fmt: skip
        if correction is not _NO_VALUE:
            ddof = correction
        g, constant = _centred(x, axis, ddof, _mask(x, where, nan), mean)
        if constant is True:
            return g
        ybar = expand_reduced(ybar, x, axis, keepdims)
        if np.iscomplexobj(g):
            # d|z|^2 = 2 Re(conj(z) dz), as in the rule of absolute. The result is real, so
            # only the real part of its adjoint means anything: differentiated again, an
            # adjoint that met complex arithmetic may carry an imaginary part here
            g = np.conjugate(g)
            ybar = np.real(ybar) if np.iscomplexobj(ybar) else ybar
        if std:
            y = expand_reduced(y, x, axis, keepdims)
            if constant is not None:  # 0 / 0 where the slice is constant: g is 0 there
                y = np.where(constant, np.ones_like(y), y)
            return ybar * g / y
        return ybar * 2 * g

    return rule


sensitivity(np.var, 0)(_var_rule())
sensitivity(np.std, 0)(_var_rule(std=True))
sensitivity(np.nanvar, 0)(_var_rule(nan=True))
sensitivity(np.nanstd, 0)(_var_rule(nan=True, std=True))


# -- scans -----------------------------------------------------------------------------


def _scan_axis(x, axis):
    """Scans over ``axis=None`` run over the flattened array."""
    return (np.ravel(x), 0) if axis is None else (x, axis % np.ndim(x))


def reverse_cumsum(g, axis):
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def _cumsum_rule(nan=False):
    def rule(y, ybar, x, axis=None, dtype=None, out=None):
        # over axis=None, y and ybar are already flat
        g = reverse_cumsum(ybar, 0 if axis is None else axis)
        return _masked(np.reshape(g, np.shape(x)), _mask(x, _NO_VALUE, nan))

    return rule


def _cumprod_rule(nan=False):
    def rule(y, ybar, x, axis=None, dtype=None, out=None):
        mask = _mask(x, _NO_VALUE, nan)
        if mask is not None:
            x = np.where(mask, x, np.ones_like(x))
        x_scanned, axis = _scan_axis(x, axis)
        return _masked(np.reshape(_cumprod_gradient(x_scanned, y, ybar, axis), np.shape(x)), mask)

    return rule


def _cumprod_gradient(x, y, ybar, axis):
    if _divides(x):
        return reverse_cumsum(ybar * y, axis) / x
    # d y_j / d x_i = prod_{k <= j, k != i} x_k: one row per i with x_i replaced by 1,
    # scanned, and kept for j >= i. Quadratic in the scan length, so only used where
    # dividing will not do.
    xs = np.moveaxis(x, axis, -1)
    rows = xs[..., None, :] * np.ones_like(xs[..., :, None])  # row i is a copy of x
    diagonal = np.triu(np.tril(np.ones_like(rows, dtype=bool)))
    rows = np.cumprod(np.where(diagonal, np.ones_like(rows), rows), axis=-1)
    g = np.sum(np.triu(rows) * np.moveaxis(ybar, axis, -1)[..., None, :], axis=-1)
    return np.moveaxis(g, -1, axis)


def _cumextremum_rule(y, ybar, x, axis=0, dtype=None, out=None):
    # ybar_j goes to the elements i <= j equal to the running extremum y_j, shared if tied
    xs, ys, gs = (np.moveaxis(v, axis, -1) for v in (x, y, ybar))
    hits = np.triu(np.equal(xs[..., :, None], ys[..., None, :]))
    share = hits / np.sum(hits, axis=-2, keepdims=True, dtype=_real_dtype(x))
    return np.moveaxis(np.sum(share * gs[..., None, :], axis=-1), -1, axis)


sensitivity(np.cumsum, 0)(_cumsum_rule())
sensitivity(np.nancumsum, 0)(_cumsum_rule(nan=True))
sensitivity(np.cumprod, 0)(_cumprod_rule())
sensitivity(np.nancumprod, 0)(_cumprod_rule(nan=True))
sensitivity(np.add.accumulate, 0)(_axis0(_cumsum_rule()))
sensitivity(np.multiply.accumulate, 0)(_axis0(_cumprod_rule()))
sensitivity(np.maximum.accumulate, 0)(_cumextremum_rule)
sensitivity(np.minimum.accumulate, 0)(_cumextremum_rule)


def _without_initial(v, axis, include_initial):
    """A ``cumulative_*`` result (or its adjoint) less the leading initial value."""
    if not include_initial:
        return v
    return v[(slice(None),) * axis + (slice(1, None),)]


@sensitivity(np.cumulative_sum, 0)
def _(y, ybar, x, *, axis=None, dtype=None, out=None, include_initial=False):
    axis = 0 if axis is None else axis % np.ndim(x)
    return reverse_cumsum(_without_initial(ybar, axis, include_initial), axis)


@sensitivity(np.cumulative_prod, 0)
def _(y, ybar, x, *, axis=None, dtype=None, out=None, include_initial=False):
    axis = 0 if axis is None else axis % np.ndim(x)
    y, ybar = (_without_initial(v, axis, include_initial) for v in (y, ybar))
    return _cumprod_gradient(x, y, ybar, axis)


# -- order statistics: implementations over a sort ---------------------------------------

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(a, q, axis, method, keepdims, nan):
    """The ``method`` quantiles ``q`` (in [0, 1]) of ``a`` over ``axis``: the reduced axes
    moved last and flattened, sorted (NaNs last), and two order statistics interpolated."""
    if method not in _QUANTILE_METHODS:
        raise NotImplementedError(
            f"quantiles of nodes support method in {_QUANTILE_METHODS}, got {method!r}"
        )
    q = np.asarray(q)
    if np.any((q < 0) | (q > 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    shape, ndim = np.shape(a), np.ndim(a)
    axes = reduced_axes(axis, ndim)
    kept = [i for i in range(ndim) if i not in axes]
    order = kept + list(axes)
    moved = a if order == sorted(order) else np.transpose(a, order)
    flat = np.reshape(moved, [shape[i] for i in kept] + [_size(shape, axes)])
    s = np.sort(flat, axis=-1)
    count = np.sum(~np.isnan(flat), axis=-1) if nan else np.shape(s)[-1]
    pos = np.reshape(q, np.shape(q) + (1,) * len(kept)) * (np.asarray(count) - 1)
    lo = np.floor(pos)
    frac = pos - lo
    if method == "lower":
        frac = np.zeros_like(frac)
    elif method == "higher":
        frac = np.ceil(frac)
    elif method == "nearest":
        frac = np.around(pos) - lo
    elif method == "midpoint":
        frac = np.where(frac > 0, 0.5, 0.0)
    last = max(np.shape(s)[-1] - 1, 0)
    lo = np.clip(lo, 0, last).astype(np.intp)
    hi = np.clip(lo + (frac > 0), 0, last)
    s = np.reshape(s, (1,) * np.ndim(q) + np.shape(s))
    at_lo = np.take_along_axis(s, lo[..., None], axis=-1)[..., 0]
    at_hi = np.take_along_axis(s, hi[..., None], axis=-1)[..., 0]
    frac = frac.astype(_real_dtype(a))
    out = at_lo + (at_hi - at_lo) * frac if np.any(frac) else at_lo
    if keepdims:
        out = np.reshape(out, np.shape(q) + _kept_shape(shape, axes))
    return out


def _size(shape, axes):
    """How many elements a slice over ``axes`` has (not -1 in a reshape: it may be 0)."""
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _no_out(name, out, weights=None):
    if out is not None:
        raise TypeError(f"np.{name}(..., out=...) cannot be recorded; use the returned value")
    if weights is not None:
        raise NotImplementedError(f"np.{name} with weights is not differentiable yet")


def _quantile_impl(name, nan, scale):
    def impl(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
             *, weights=None):  # fmt: skip
        _no_out(name, out, weights)
        return _quantile(a, np.true_divide(q, scale), axis, method, keepdims, nan)

    impl.__name__ = name
    return impl


def _median_impl(name, nan):
    def impl(a, axis=None, out=None, overwrite_input=False, keepdims=False):
        _no_out(name, out)
        if not _size(np.shape(a), reduced_axes(axis, np.ndim(a))):
            # NumPy's median of an empty slice is its mean, NaN with a warning
            return np.mean(a, axis=axis, keepdims=keepdims)
        return _quantile(a, 0.5, axis, "linear", keepdims, nan)

    impl.__name__ = name
    return impl


for _name, _nan in (("quantile", False), ("nanquantile", True)):
    implementation(getattr(np, _name))(_quantile_impl(_name, _nan, 1))
for _name, _nan in (("percentile", False), ("nanpercentile", True)):
    implementation(getattr(np, _name))(_quantile_impl(_name, _nan, 100))
implementation(np.median)(_median_impl("median", False))
implementation(np.nanmedian)(_median_impl("nanmedian", True))


# -- weighted average: an implementation, so that the weights are differentiable too ------


@implementation(np.average)
def _average(a, axis=None, weights=None, returned=False, *, keepdims=_NO_VALUE):
    keep = keepdims is True
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keep)
        # as NumPy: a ZeroDivisionError where the result is empty too
        scale = np.asarray(np.size(a) / np.size(avg), dtype=_real_dtype(a))
    else:
        w = _weights_like(weights, a, axis)
        w = np.broadcast_to(w, np.shape(a))
        scale = np.sum(w, axis=axis, keepdims=keep)
        avg = np.sum(a * w, axis=axis, keepdims=keep) / scale
    if returned:
        return avg, np.broadcast_to(scale, np.shape(avg))
    return avg


def _weights_like(w, a, axis):
    """Weights laid out to broadcast against ``a``: NumPy accepts ``a``'s shape, or the
    shape of the reduced axes in the order ``axis`` names them."""
    if np.shape(w) == np.shape(a):
        return w
    if axis is None:
        raise TypeError("np.average: axis must be specified when shapes of a and weights differ")
    axis = axis if isinstance(axis, tuple) else (axis,)
    axis = tuple(ax % np.ndim(a) for ax in axis)
    if np.shape(w) != tuple(np.shape(a)[ax] for ax in axis):
        raise ValueError(
            "np.average: shape of weights must be consistent with shape of a along axis"
        )
    w = np.transpose(w, np.argsort(axis)) if len(axis) > 1 else w
    return np.reshape(w, tuple(n if i in axis else 1 for i, n in enumerate(np.shape(a))))
