"""Sensitivities of shape changes and indexing.

Indexing scatters the adjoint back with ``np.add.at``, so repeated indices accumulate.
The scatter is itself a function with a sensitivity (a gather), which keeps indexing
differentiable to any order; ``take``, ``repeat`` with per-element counts, ``pad`` and
``diagonal`` send their adjoints back through it too.

``pad`` in the modes that copy elements (constant, edge, reflect, symmetric, wrap) is one
record whose adjoint gathers the adjoints of every copy; in the modes that pad with a
statistic or a ramp (maximum, minimum, mean, median, linear_ramp) it is entered as the
NumPy calls that compute them. Other modes raise in the forward pass.

Functions that return several arrays (``split`` and its kin, ``unstack``,
``broadcast_arrays``, ``meshgrid``, ``atleast_*d`` of several arrays) are
implementations: each piece is its own record (a slice, a reshape, a broadcast). So are
the functions NumPy writes as a join, a slice or a flip of others (``hstack``, ``block``,
``append``, ``diff``, ``fliplr``, ``trace``, ``resize``...), and ``insert`` and ``delete``,
which let NumPy itself move element numbers around and then gather by them.

``sort`` and ``partition`` send each adjoint to the element a stable sort puts in that
place, so tied elements do not share.
"""

import operator

import numpy as np

from .batching import batching
from .registry import implementation, nondifferentiable, primitive, sensitivity, value_of


def astype(x, dtype, **kwargs):
    """``x`` cast to ``dtype``, what ``x.astype(dtype)`` and ``np.astype`` do on a node.

    A cast to a float or complex dtype is recorded (``cast``) and carries the gradient. A
    cast to any other kind (integers, booleans) is piecewise constant: its derivative is
    zero, and its result a plain array (``discrete_cast``), which can index.

    >>> import numpy as np
    >>> from tape import grad
    >>> table = np.array([10.0, 20.0, 30.0])
    >>> grad(lambda x: np.sum(table[(2 * x).astype(int)] * x))(np.array([0.2, 0.6, 1.3]))
    (array([10., 20., 30.]),)
    """
    if kwargs:  # NumPy's own checks of casting=, copy=, order= on the plain value
        _cast_value(value_of(x), dtype, **kwargs)
    if np.dtype(dtype).kind in "fc":
        return cast(x, dtype)
    return discrete_cast(x, dtype)


def _cast_value(x, dtype, **kwargs):
    if hasattr(x, "astype"):
        return x.astype(dtype, **kwargs)
    return np.dtype(dtype).type(x)


@primitive
def cast(x, dtype):
    """``x`` cast to ``dtype`` (a float or complex one): the record of a differentiable
    cast, whose adjoint is cast back to ``x``'s dtype."""
    return _cast_value(x, dtype)


@primitive
def discrete_cast(x, dtype):
    """``x`` cast to an integer, boolean or other dtype that carries no gradient: on a
    node, a plain array."""
    return _cast_value(x, dtype)


nondifferentiable(discrete_cast)
implementation(astype)(astype)  # met by a node (x.astype(...)), it records one of the above


@sensitivity(cast, 0)
def _(y, ybar, x, dtype):
    target = np.result_type(x)
    if target.kind != "c" and np.iscomplexobj(ybar):
        ybar = np.real(ybar)
    return astype(ybar, target)


def _template(x, flat=False):
    """A plain array with ``x``'s shape (flattened if ``flat``) and dtype, to hand
    ``scatter_add`` as the shape of its result: ``x`` itself may be a node of an outer
    tape, where passing it would record work that carries no gradient."""
    like = np.empty_like(value_of(x))  # empty_like of a node would be a node
    return like.reshape(-1) if flat else like


# -- reshaping and transposing: the adjoint goes back through the inverse map ------------


def _order(order, a):
    """The index order ``order`` meant for ``a``: "A" and "K" follow its memory layout."""
    if order in ("A", "K"):
        flags = getattr(a, "flags", None)  # a node of an outer tape has none: read as "C"
        return "F" if flags is not None and flags.f_contiguous and not flags.c_contiguous else "C"
    return order


def _reshape(ybar, shape, order):
    # order="C" left out: Dask's reshape takes no order
    return np.reshape(ybar, shape) if order == "C" else np.reshape(ybar, shape, order=order)


@sensitivity(np.reshape, 0)
def _(y, ybar, a, shape=None, order="C", *, copy=None, newshape=None):
    return _reshape(ybar, np.shape(a), _order(order, a))


@sensitivity(np.ravel, 0)
def _(y, ybar, a, order="C"):
    return _reshape(ybar, np.shape(a), _order(order, a))


def _back_to_shape(y, ybar, x, *args, **kwargs):
    return np.reshape(ybar, np.shape(x))


for _f in (np.squeeze, np.expand_dims):
    sensitivity(_f, 0)(_back_to_shape)

# broadcast_to's adjoint is its input's adjoint summed over the broadcast axes, which the
# engine does for every rule.
sensitivity(np.broadcast_to, 0)(lambda y, ybar, x, *args, **kwargs: ybar)
sensitivity(np.copy, 0)(lambda y, ybar, a, *args, **kwargs: ybar)


@sensitivity(np.transpose, 0)
def _(y, ybar, x, axes=None):
    if axes is None:
        return np.transpose(ybar)
    return np.transpose(ybar, np.argsort([a % np.ndim(x) for a in axes]))


@sensitivity(np.matrix_transpose, 0)
def _(y, ybar, x):
    return np.swapaxes(ybar, -1, -2)


@sensitivity(np.swapaxes, 0)
def _(y, ybar, x, axis1, axis2):
    return np.swapaxes(ybar, axis1, axis2)


@sensitivity(np.moveaxis, 0)
def _(y, ybar, x, source, destination):
    return np.moveaxis(ybar, destination, source)


def _atleast_shape(shape, n):
    """The shape ``np.atleast_{n}d`` gives an array of ``shape``."""
    if len(shape) >= n:
        return shape
    if n == 3 and len(shape) == 2:
        return shape + (1,)
    if n == 3:
        return (1,) + (shape or (1,)) + (1,)
    return (1,) * (n - len(shape)) + shape


def _at_least(a, n):
    return a if np.ndim(a) >= n else np.reshape(a, _atleast_shape(np.shape(a), n))


def _atleast(n):
    def impl(*arys):
        out = tuple(_at_least(a, n) for a in arys)
        return out[0] if len(out) == 1 else out

    return impl


for _n, _f in ((1, np.atleast_1d), (2, np.atleast_2d), (3, np.atleast_3d)):
    implementation(_f)(_atleast(_n))


@implementation(np.broadcast_arrays)
def _(*args, subok=False):
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return tuple(np.broadcast_to(a, shape) for a in args)


@implementation(np.meshgrid)
def _(*xi, copy=True, sparse=False, indexing="xy"):
    n = len(xi)
    grids = []
    for i, x in enumerate(xi):
        shape = [1] * n
        shape[i] = -1
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        grids.append(np.reshape(x, shape))
    return tuple(grids) if sparse else np.broadcast_arrays(*grids)


# -- joining: the adjoint of each piece is its slice of the result's ----------------------


def _slices(ybar, axis, sizes):
    lead = (slice(None),) * axis
    bounds = np.cumsum([0, *sizes])
    return [ybar[lead + (slice(int(a), int(b)),)] for a, b in zip(bounds[:-1], bounds[1:])]


@sensitivity(np.concatenate, 0)
def _(y, ybar, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if axis is None:
        pieces = _slices(np.ravel(ybar), 0, [np.size(a) for a in arrays])
        return [np.reshape(p, np.shape(a)) for p, a in zip(pieces, arrays)]
    axis %= np.ndim(ybar)
    return _slices(ybar, axis, [np.shape(a)[axis] for a in arrays])


@sensitivity(np.stack, 0)
def _(y, ybar, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    lead = (slice(None),) * (axis % np.ndim(ybar))
    return [ybar[lead + (i,)] for i in range(len(arrays))]


def _concatenated(n, axis):
    def impl(tup, *, dtype=None, casting="same_kind"):
        arrays = [_at_least(a, n) for a in tup]
        ax = 0 if n == 1 and np.ndim(arrays[0]) == 1 else axis  # hstack joins 1-d along 0
        return np.concatenate(arrays, axis=ax, dtype=dtype, casting=casting)

    return impl


implementation(np.hstack)(_concatenated(1, 1))
implementation(np.vstack)(_concatenated(2, 0))
implementation(np.dstack)(lambda tup: _concatenated(3, 2)(tup))


@implementation(np.column_stack)
def _(tup):
    columns = [np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in tup]
    return np.concatenate(columns, axis=1)


@implementation(np.append)
def _(arr, values, axis=None):
    if axis is None:
        return np.concatenate([np.ravel(arr), np.ravel(values)])
    return np.concatenate([arr, values], axis=axis)


@implementation(np.block)
def _(arrays):
    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else int(isinstance(x, list))

    def leaves(x):
        return [b for a in x for b in leaves(a)] if isinstance(x, list) else [x]

    levels = depth(arrays)
    ndim = max([levels] + [np.ndim(a) for a in leaves(arrays)])

    def build(x, level):
        if isinstance(x, list):
            return np.concatenate([build(a, level + 1) for a in x], axis=level - 1 - levels)
        return x if np.ndim(x) == ndim else np.reshape(x, (1,) * (ndim - np.ndim(x)) + np.shape(x))

    return build(arrays, 1) if levels else np.copy(arrays)


# -- splitting: implementations by slicing, each piece its own getitem record --------------


def _split(ary, indices_or_sections, axis=0, equal=False):
    n = np.shape(ary)[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        if equal and n % sections:
            raise ValueError("array split does not result in an equal division")
        each, extra = divmod(n, sections)
        bounds = np.cumsum([0] + [each + 1] * extra + [each] * (sections - extra))
    else:
        bounds = [0, *indices_or_sections, n]
    lead = (slice(None),) * (axis % np.ndim(ary))
    return [ary[lead + (slice(int(a), int(b)),)] for a, b in zip(bounds[:-1], bounds[1:])]


implementation(np.array_split)(_split)
implementation(np.split)(
    lambda ary, indices_or_sections, axis=0: _split(ary, indices_or_sections, axis, True)
)


def _split_along(axis, least):
    def impl(ary, indices_or_sections):
        if np.ndim(ary) < least:
            raise ValueError(f"this split only works on arrays of {least} or more dimensions")
        return _split(ary, indices_or_sections, axis if np.ndim(ary) > 1 else 0, True)

    return impl


implementation(np.hsplit)(_split_along(1, 1))
implementation(np.vsplit)(_split_along(0, 2))
implementation(np.dsplit)(_split_along(2, 3))


@implementation(np.unstack)
def _(x, /, *, axis=0):
    lead = (slice(None),) * (axis % np.ndim(x))
    return tuple(x[lead + (i,)] for i in range(np.shape(x)[axis]))


@implementation(np.trim_zeros)
def _(filt, trim="fb", axis=None):
    shape = np.shape(filt)
    axes = range(len(shape)) if axis is None else np.atleast_1d(axis) % len(shape)
    found = np.nonzero(filt)  # plain indices: no gradient flows through where zeros are
    index = [slice(None)] * len(shape)
    for ax in axes:
        if found[ax].size == 0:
            index[ax] = slice(0, 0)
            continue
        start = found[ax].min() if "f" in trim.lower() else 0
        stop = found[ax].max() + 1 if "b" in trim.lower() else shape[ax]
        index[ax] = slice(int(start), int(stop))
    return filt[tuple(index)]


@implementation(np.apply_along_axis)
def _(func1d, axis, arr, *args, **kwargs):
    axis %= np.ndim(arr)
    moved = np.moveaxis(arr, axis, -1)
    outer = np.shape(moved)[:-1]
    results = [func1d(moved[i], *args, **kwargs) for i in np.ndindex(outer)]
    inner = np.ndim(results[0])
    out = np.reshape(np.stack(results), outer + np.shape(results[0]))
    return np.moveaxis(out, range(len(outer), len(outer) + inner), range(axis, axis + inner))


# -- repetition: the adjoint sums the copies -----------------------------------------------


@sensitivity(np.tile, 0)
def _(y, ybar, A, reps):
    reps = tuple(reps) if np.iterable(reps) else (reps,)
    shape = np.shape(A)
    d = max(len(reps), len(shape))
    reps, shape = (1,) * (d - len(reps)) + reps, (1,) * (d - len(shape)) + shape
    g = np.reshape(ybar, [n for pair in zip(reps, shape) for n in pair])
    return np.reshape(np.sum(g, axis=tuple(range(0, 2 * d, 2))), np.shape(A))


@sensitivity(np.repeat, 0)
def _(y, ybar, a, repeats, axis=None):
    like = _template(a, flat=axis is None)
    axis = 0 if axis is None else axis % np.ndim(a)
    shape = np.shape(like)
    if np.ndim(repeats) == 0 or np.size(repeats) == 1:
        r = int(np.ravel(repeats)[0]) if np.ndim(repeats) else int(repeats)
        g = np.sum(
            np.reshape(ybar, shape[:axis] + (shape[axis], r) + shape[axis + 1 :]), axis=axis + 1
        )
    else:  # per-element counts: scatter each copy back onto its source
        source = np.repeat(np.arange(shape[axis]), repeats)
        g = scatter_add(like, (slice(None),) * axis + (source,), ybar)
    return np.reshape(g, np.shape(a))


@implementation(np.resize)
def _(a, new_shape):
    new_shape = tuple(new_shape) if np.iterable(new_shape) else (new_shape,)
    flat = np.ravel(a)
    n = int(np.prod(new_shape))
    if n == 0 or np.size(flat) == 0:
        return np.zeros_like(flat, shape=new_shape)
    return np.reshape(np.tile(flat, -(-n // np.size(flat)))[:n], new_shape)


# -- arrays filled from a few values: linspace, full_like ----------------------------------


@implementation(np.linspace)
def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
              device=None):  # fmt: skip
    # NumPy's own steps: start + i * (stop - start) / div, the last point exactly stop
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = num - 1 if endpoint else num
    delta = stop - start
    inexact = np.result_type(start, stop, 1.0)
    steps = np.reshape(np.arange(num, dtype=inexact), (-1,) + (1,) * np.ndim(delta))
    step = delta / div if div > 0 else np.nan * delta
    y = (steps * step if div > 0 else steps * delta) + start
    if endpoint and num > 1:
        last = np.broadcast_to(stop, np.shape(y)[1:])
        y = np.concatenate([y[:-1], np.expand_dims(last, 0)])
    y = np.moveaxis(y, 0, axis)
    if dtype is not None and np.dtype(dtype).kind in "iu":
        y = np.floor(y)  # as NumPy rounds to an integer dtype
    if dtype is not None:
        y = y.astype(dtype)
    return (y, step) if retstep else y


@implementation(np.full_like)
def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    # a lends its shape and dtype only; the values are fill_value's, broadcast. The result
    # is made from zeros_like(a), so that for a node a it is a node that can be written
    # in place (out = np.full_like(x, c); out[i] = ...), as NumPy's is an array.
    shape = np.shape(a) if shape is None else shape
    dtype = np.result_type(a) if dtype is None else dtype
    return np.zeros_like(a, dtype=dtype, shape=shape) + np.broadcast_to(fill_value, shape).astype(
        dtype
    )


@primitive
def filled_like(a, like, dtype=None, shape=None):
    """``like(a, dtype=dtype, shape=shape)``, ``like`` one of ``np.zeros_like``,
    ``np.ones_like``, ``np.empty_like``: recorded on a node, so that the result is a
    node the program may fill in place (``out = np.zeros_like(x); out[i] = ...``)."""
    return like(a, dtype=dtype, shape=shape)


# a lends its shape and dtype only
sensitivity(filled_like, 0)(lambda y, ybar, a, like, dtype=None, shape=None: np.zeros_like(a))


def _filled_like(like):
    def implementation_(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        # A floating-point buffer made from a node is a node, as NumPy's is an array of
        # its own that the program may write; a mask or an index array stays plain.
        target = np.result_type(a) if dtype is None else np.dtype(dtype)
        if target.kind not in "fc" or order not in ("K", "C", "A"):
            return like(value_of(a), dtype=dtype, order=order, shape=shape)
        return filled_like(a, like, dtype, shape)

    implementation_.__name__ = f"_{like.__name__}"
    return implementation_


for _like in (np.zeros_like, np.ones_like, np.empty_like):
    implementation(_like)(_filled_like(_like))


# -- reordering ------------------------------------------------------------------------


@sensitivity(np.flip, 0)
def _(y, ybar, x, axis=None):
    return np.flip(ybar, axis)


implementation(np.fliplr)(lambda m: np.flip(m, axis=1))
implementation(np.flipud)(lambda m: np.flip(m, axis=0))


@sensitivity(np.roll, 0)
def _(y, ybar, a, shift, axis=None):
    back = tuple(-s for s in shift) if np.iterable(shift) else -shift
    return np.roll(ybar, back, axis)


@sensitivity(np.rot90, 0)
def _(y, ybar, m, k=1, axes=(0, 1)):
    return np.rot90(ybar, -k, axes)


def _unpermute(y, ybar, x, axis):
    """``ybar`` of a permutation ``y`` of ``x`` along ``axis`` (None: flattened), sent back
    to the elements of ``x``: a stable sort of each pairs equal values in order."""
    if axis is None:
        x, axis = np.ravel(x), -1
    to_sorted = np.take_along_axis(ybar, np.argsort(y, axis=axis, kind="stable"), axis=axis)
    order = np.argsort(x, axis=axis, kind="stable")
    rank = np.empty_like(order)  # the inverse permutation, in linear time
    count = np.shape(order)[axis]
    places = np.reshape(
        np.arange(count, like=order), (count,) + (1,) * (np.ndim(order) - 1 - axis % np.ndim(order))
    )
    np.put_along_axis(rank, order, np.broadcast_to(places, np.shape(order)), axis=axis)
    return np.take_along_axis(to_sorted, rank, axis=axis)


@sensitivity(np.sort, 0)
def _(y, ybar, a, axis=-1, kind=None, order=None, *, stable=None):
    return np.reshape(_unpermute(y, ybar, a, axis), np.shape(a))


@sensitivity(np.partition, 0)
def _(y, ybar, a, kth, axis=-1, kind="introselect", order=None):
    return np.reshape(_unpermute(y, ybar, a, axis), np.shape(a))


# -- differences: implementations by slicing, so prepend and append may be nodes too ------


@implementation(np.diff)
def _(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    if np.ndim(a) == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis %= np.ndim(a)
    edge = np.shape(a)[:axis] + (1,) + np.shape(a)[axis + 1 :]
    pieces = [
        p if np.ndim(p) else np.broadcast_to(p, edge)
        for p in (prepend, a, append)
        if p is not np._NoValue
    ]
    if len(pieces) > 1:
        a = np.concatenate(pieces, axis=axis)
    lead = (slice(None),) * axis
    for _ in range(n):
        a = a[lead + (slice(1, None),)] - a[lead + (slice(None, -1),)]
    return a


@implementation(np.ediff1d)
def _(ary, to_end=None, to_begin=None):
    flat = np.ravel(ary)
    pieces = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        pieces.insert(0, np.ravel(to_begin))
    if to_end is not None:
        pieces.append(np.ravel(to_end))
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0]


# -- padding -------------------------------------------------------------------------------

_COPY_MODES = ("constant", "empty", "edge", "reflect", "symmetric", "wrap")
_STATISTICS = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}


@primitive
def pad_copies(array, pad_width, mode, **kwargs):
    """``np.pad`` in a mode whose padding copies elements (or a constant): one record."""
    return np.pad(array, pad_width, mode, **kwargs)


@sensitivity(pad_copies, 0)
def _(y, ybar, array, pad_width, mode, **kwargs):
    shape = np.shape(array)
    if mode in ("constant", "empty"):
        return ybar[tuple(slice(b, b + n) for (b, _), n in zip(pad_width, shape))]
    # pad the element numbers: each padded place names the element it copies, and the
    # adjoint of every element gathers the adjoints of its copies
    source = np.pad(np.arange(np.size(array)).reshape(shape), pad_width, mode, **kwargs)
    return np.reshape(scatter_add(_template(array, True), np.ravel(source), np.ravel(ybar)), shape)


@implementation(np.pad)
def _(array, pad_width, mode="constant", **kwargs):
    ndim = np.ndim(array)
    widths = tuple(
        map(tuple, np.broadcast_to(np.asarray(pad_width, dtype=int), (ndim, 2)).tolist())
    )
    if mode in _COPY_MODES and kwargs.get("reflect_type", "even") == "even":
        return pad_copies(array, widths, mode, **kwargs)
    if mode in _STATISTICS:
        lengths = kwargs.get("stat_length")
        whole = [(n, n) for n in np.shape(array)]
        lengths = whole if lengths is None else np.broadcast_to(lengths, (ndim, 2))
        return _pad_by_axis(array, widths, _statistic_blocks(array, _STATISTICS[mode], lengths))
    if mode == "linear_ramp":
        ends = np.asarray(kwargs.get("end_values", 0), dtype=np.result_type(array))
        ends = np.broadcast_to(ends, (ndim, 2))
        return _pad_by_axis(array, widths, _ramp_blocks(array, ends))
    raise NotImplementedError(
        f"np.pad of a node supports modes {', '.join(_COPY_MODES)} (even reflection), "
        f"{', '.join(_STATISTICS)} and linear_ramp; got mode={mode!r} {kwargs or ''}"
    )


def _pad_by_axis(array, widths, blocks):
    """Pad one axis after another, as NumPy does, so that corners come from the axes padded
    first: ``blocks(out, axis, before, after)`` makes the two pads of ``axis``."""
    out = array
    for axis, (before, after) in enumerate(widths):
        if before or after:
            out = np.concatenate([*blocks(out, axis, before, after)], axis=axis)
    return out


def _widened(block, out, axis, width):
    shape = list(np.shape(out))
    shape[axis] = width
    return np.broadcast_to(block, shape)


def _statistic_blocks(array, statistic, lengths):
    def blocks(out, axis, before, after):
        n = np.shape(array)[axis]
        lead = (slice(None),) * axis
        first, last = (min(int(k), n) for k in lengths[axis])
        left = statistic(out[lead + (slice(0, first),)], axis=axis, keepdims=True)
        right = statistic(out[lead + (slice(n - last, n),)], axis=axis, keepdims=True)
        return _widened(left, out, axis, before), out, _widened(right, out, axis, after)

    return blocks


def _ramp_blocks(array, ends):
    dtype = np.result_type(array)

    def blocks(out, axis, before, after):
        n = np.shape(array)[axis]
        lead = (slice(None),) * axis
        along = (1,) * axis + (-1,) + (1,) * (np.ndim(array) - axis - 1)
        # linear from the end value (outermost) towards the edge value, which it never reaches
        up = np.reshape(np.arange(before) / max(before, 1), along).astype(dtype)
        down = np.reshape(np.arange(after)[::-1] / max(after, 1), along).astype(dtype)
        start, stop = ends[axis]
        first, last = out[lead + (slice(0, 1),)], out[lead + (slice(n - 1, n),)]
        return start + (first - start) * up, out, stop + (last - stop) * down

    return blocks


# -- diagonals and triangles ----------------------------------------------------------------


@sensitivity(np.triu, 0)
def _(y, ybar, x, k=0):
    return np.triu(ybar, k)


@sensitivity(np.tril, 0)
def _(y, ybar, x, k=0):
    return np.tril(ybar, k)


def _onto_diagonal(x, ybar, offset, axis1, axis2):
    """An array shaped like ``x``, zero but for ``ybar`` (diagonal last) on the diagonal."""
    axis1, axis2 = axis1 % np.ndim(x), axis2 % np.ndim(x)
    like = np.moveaxis(_template(x), (axis1, axis2), (-2, -1))
    n = np.shape(ybar)[-1]
    rows, cols = np.arange(n) + max(-offset, 0), np.arange(n) + max(offset, 0)
    return np.moveaxis(scatter_add(like, (Ellipsis, rows, cols), ybar), (-2, -1), (axis1, axis2))


@sensitivity(np.diagonal, 0)
def _(y, ybar, a, offset=0, axis1=0, axis2=1):
    return _onto_diagonal(a, ybar, offset, axis1, axis2)


@sensitivity(np.diag, 0)
def _(y, ybar, v, k=0):
    if np.ndim(v) == 1:
        return np.diagonal(ybar, k)
    return _onto_diagonal(v, ybar, k, 0, 1)


implementation(np.diagflat)(lambda v, k=0: np.diag(np.ravel(v), k))


@implementation(np.trace)
def _(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise TypeError("np.trace(..., out=...) cannot be recorded; use the returned value")
    return np.sum(np.diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# -- gathers: take, compress, extract, choose, insert, delete ------------------------------


@sensitivity(np.take, 0)
def _(y, ybar, a, indices, axis=None, out=None, mode="raise"):
    like = _template(a, flat=axis is None)
    axis = 0 if axis is None else axis % np.ndim(a)
    n = np.shape(like)[axis]
    indices = np.asarray(indices)
    if mode == "wrap":
        indices = indices % n
    elif mode == "clip":
        indices = np.clip(indices, 0, n - 1)
    return np.reshape(scatter_add(like, (slice(None),) * axis + (indices,), ybar), np.shape(a))


@implementation(np.compress)
def _(condition, a, axis=None, out=None):
    if out is not None:
        raise TypeError("np.compress(..., out=...) cannot be recorded; use the returned value")
    return np.take(a, np.flatnonzero(condition), axis=axis)


implementation(np.extract)(lambda condition, arr: np.take(np.ravel(arr), np.flatnonzero(condition)))


@sensitivity(np.choose, 1)
def _(y, ybar, a, choices, out=None, mode="raise"):
    n = len(choices)
    a = np.asarray(a)
    a = a % n if mode == "wrap" else np.clip(a, 0, n - 1) if mode == "clip" else a
    pieces = [np.where(np.equal(a, i), ybar, np.zeros_like(ybar)) for i in range(n)]
    return pieces if isinstance(choices, (list, tuple)) else np.stack(pieces)


def _tags(shape):
    """Element numbers of an array of ``shape``: NumPy's own moves of them tell where each
    element of the result comes from."""
    return np.arange(int(np.prod(shape)), dtype=np.intp).reshape(shape)


@implementation(np.delete)
def _(arr, obj, axis=None):
    kept = np.delete(_tags(np.shape(arr)), obj, axis)
    return np.reshape(np.ravel(arr)[np.ravel(kept)], np.shape(kept))


@implementation(np.insert)
def _(arr, obj, values, axis=None):
    # arr's elements are tagged 0, 1, ...; values' elements -1, -2, ...
    values = astype(values, np.result_type(arr))
    arr_tags = _tags(np.shape(arr))
    value_tags = -1 - _tags(np.shape(values))
    tags = np.insert(arr_tags, obj, value_tags, axis)
    taken = np.ravel(arr)[np.ravel(np.maximum(tags, 0))]
    inserted = np.ravel(values)[np.ravel(np.maximum(-1 - tags, 0))]
    out = np.where(np.ravel(tags) >= 0, taken, inserted)
    return np.reshape(out, np.shape(tags))


@implementation(np.real_if_close)
def _(a, tol=100):
    if not np.iscomplexobj(a):
        return a
    eps = np.finfo(np.result_type(a)).eps
    tol = tol * eps if tol > 1 else tol
    return np.real(a) if np.all(np.abs(np.imag(a)) < tol) else a


# -- indexing ---------------------------------------------------------------------------


def _is_basic(index):
    """Whether ``index`` selects each element at most once (no integer arrays)."""
    parts = index if isinstance(index, tuple) else (index,)
    for part in parts:
        if isinstance(part, list):
            if np.asarray(part).dtype != np.bool_:
                return False
        elif hasattr(part, "dtype") and np.ndim(part) > 0 and part.dtype != np.bool_:
            return False  # an integer array, of NumPy or of another library (Dask, CuPy)
    return True


@primitive
def scatter_add(x, index, values):
    """An array shaped like ``x``, zero but for ``values`` added at ``index``."""
    out = np.zeros_like(x, dtype=np.result_type(x, values))
    if _is_basic(index):
        out[index] += values
    elif type(out) is np.ndarray:
        np.add.at(out, index, values)
    else:
        out = _scatter_add_by_counting(out, index, values)
    return out


def _scatter_add_by_counting(out, index, values):
    """``scatter_add`` for arrays of libraries without ``np.add.at`` (Dask): number the
    elements of ``out``, index the numbers, and add ``values`` up by number with
    ``np.bincount``. Every call dispatches to ``out``'s library, so a lazy array stays
    lazy; the result is one chunk of ``out``'s size."""
    shape, size = out.shape, out.size
    tags = _element_numbers(shape, index)
    if tags is None:  # the index holds arrays of out's library: number in that library
        tags = np.reshape(np.arange(size, like=out), shape)[index]
    else:
        tags = np.asarray(tags, like=out)
    values = np.broadcast_to(np.asarray(values, like=out), tags.shape)
    tags, values = np.ravel(tags), np.ravel(values)
    if hasattr(tags, "rechunk"):  # Dask counts chunk by chunk: the two must be cut alike
        values = values.rechunk(tags.chunks)
    if np.iscomplexobj(values):
        real = np.bincount(tags, weights=np.real(values), minlength=size)
        imag = np.bincount(tags, weights=np.imag(values), minlength=size)
        flat = real + 1j * imag
    else:
        flat = np.bincount(tags, weights=values, minlength=size)
    return np.reshape(flat, shape).astype(out.dtype)


def _element_numbers(shape, index):
    """The flat element numbers that NumPy ``index`` picks from an array of ``shape``,
    in NumPy, costing memory for the result only (each axis's coordinates are a
    broadcast view); None when ``index`` holds arrays of another library."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(
        not isinstance(p, (np.ndarray, list)) and hasattr(p, "__array_function__") for p in parts
    ):
        return None
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]
    numbers = 0
    for k, n in enumerate(shape):
        axis = np.arange(n, dtype=np.intp).reshape((n,) + (1,) * (len(shape) - k - 1))
        numbers = numbers + np.broadcast_to(axis, shape)[index] * int(strides[k])
    return np.asarray(numbers, dtype=np.intp)


@sensitivity(operator.getitem, 0)
def _(y, ybar, x, index):
    return scatter_add(_template(x), index, ybar)


@sensitivity.update(operator.getitem, 0)
def _(xbar, y, ybar, x, index):
    if _is_basic(index):
        xbar[index] += ybar
    else:
        np.add.at(xbar, index, ybar)
    return xbar


# x only lends scatter_add its shape and dtype; values are gathered back.
sensitivity(scatter_add, 0)(lambda y, ybar, x, index, values: np.zeros_like(x))
sensitivity(scatter_add, 2)(lambda y, ybar, x, index, values: ybar[index])

nondifferentiable(
    np.shape, np.ndim, np.size, np.result_type,
    np.argmax, np.argmin, np.argsort, np.nonzero, np.flatnonzero, np.searchsorted,
    np.count_nonzero, np.any, np.all, np.iscomplexobj, np.isrealobj, np.iscomplex,
    np.isreal, np.can_cast, np.tril_indices_from, np.triu_indices_from, np.diag_indices_from,
    np.shares_memory, np.may_share_memory,
)  # fmt: skip


# -- unique values and weighted counts: their values are elements of the input ----------


@implementation(np.unique)
def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
            *, equal_nan=True, sorted=True):  # fmt: skip
    if axis is not None:
        raise NotImplementedError("np.unique(..., axis=...) on a node is not differentiable yet")
    flat = np.ravel(ar)
    order = np.argsort(flat, kind="stable")  # plain: the first of equal values comes first
    ordered = flat[order]
    first = np.concatenate([np.ones_like(order[:1], dtype=bool), ordered[1:] != ordered[:-1]])
    values = ordered[first]  # each unique value's adjoint goes to its first occurrence
    extras = []
    if return_index:
        extras.append(order[first])
    if return_inverse:
        inverse = np.empty_like(order)
        inverse[order] = np.cumsum(first) - 1
        extras.append(np.reshape(inverse, np.shape(ar)))
    if return_counts:
        extras.append(np.diff(np.append(np.flatnonzero(first), np.size(flat))))
    return (values, *extras) if extras else values


@implementation(np.unique_values)
def _unique_values(x):
    return _unique(x)


@implementation(np.unique_counts)
def _unique_counts(x):
    return _UniqueCounts(*_unique(x, return_counts=True))


@implementation(np.unique_inverse)
def _unique_inverse(x):
    return _UniqueInverse(*_unique(x, return_inverse=True))


@implementation(np.unique_all)
def _unique_all(x):
    return _UniqueAll(*_unique(x, return_index=True, return_inverse=True, return_counts=True))


_UniqueCounts = type(np.unique_counts(np.zeros(1)))
_UniqueInverse = type(np.unique_inverse(np.zeros(1)))
_UniqueAll = type(np.unique_all(np.zeros(1)))


@implementation(np.bincount)
def _bincount(x, weights=None, minlength=0):
    # x holds integers, which carry no gradient: trunc (non-differentiable) gives them plain
    x = np.trunc(x).astype(np.intp)
    if weights is None:
        return np.bincount(x, minlength=minlength)
    bins = max(int(np.max(x)) + 1 if np.size(x) else 0, minlength)
    return scatter_add(np.zeros_like(weights, shape=(bins,)), x, weights)


# -- NumPy 2's function form of astype -------------------------------------------------------


@implementation(np.astype)
def _(x, dtype, /, *, copy=True, device=None):
    # NumPy's own refuses anything but an ndarray; the method's record is the same cast
    if device not in (None, "cpu"):
        raise ValueError(f"Unsupported device {device!r}")
    return astype(x, dtype)


# -- np.gradient: central differences inside, one-sided at the edges, by slicing -------------


def _spacings(f, varargs, axes):
    """One spacing per axis, as NumPy reads them: none (1), one scalar for every axis, or
    one per axis, each a scalar or the coordinates along it (an array of its length)."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return list(varargs) * len(axes)
    if len(varargs) != len(axes):
        raise TypeError("invalid number of arguments")
    for h, ax in zip(varargs, axes):
        if np.ndim(h) not in (0, 1):
            raise ValueError("distances must be either scalars or 1d")
        if np.ndim(h) == 1 and len(h) != np.shape(f)[ax]:
            raise ValueError(
                "when 1d, distances must match the length of the corresponding dimension"
            )
    return list(varargs)


def _gradient_along(f, h, axis, edge_order):
    n = np.shape(f)[axis]
    if n < edge_order + 1:
        raise ValueError(
            "Shape of array too small to calculate a numerical gradient, "
            "at least (edge_order + 1) elements are required."
        )
    lead = (slice(None),) * axis

    def at(start, stop=None):
        return f[lead + (slice(start, stop),)]

    if np.ndim(h) == 0:  # uniform spacing: the same formulas NumPy uses
        interior = (at(2, None) - at(None, -2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (at(1, 2) - at(0, 1)) / h, (at(-1) - at(-2, -1)) / h
        else:
            first = (-1.5 * at(0, 1) + 2.0 * at(1, 2) - 0.5 * at(2, 3)) / h
            last = (0.5 * at(-3, -2) - 2.0 * at(-2, -1) + 1.5 * at(-1)) / h
    else:  # coordinates: second-order differences on an uneven grid
        dx = np.diff(h)
        along = (1,) * axis + (-1,) + (1,) * (np.ndim(f) - axis - 1)

        def col(v):
            return np.reshape(v, along)

        d1, d2 = dx[:-1], dx[1:]
        a, b, c = -d2 / (d1 * (d1 + d2)), (d2 - d1) / (d1 * d2), d1 / (d2 * (d1 + d2))
        interior = col(a) * at(None, -2) + col(b) * at(1, -1) + col(c) * at(2, None)
        if edge_order == 1:
            first, last = (at(1, 2) - at(0, 1)) / dx[0], (at(-1) - at(-2, -1)) / dx[-1]
        else:
            d1, d2 = dx[0], dx[1]
            first = (
                -(2.0 * d1 + d2) / (d1 * (d1 + d2)) * at(0, 1)
                + (d1 + d2) / (d1 * d2) * at(1, 2)
                - d1 / (d2 * (d1 + d2)) * at(2, 3)
            )
            d1, d2 = dx[-2], dx[-1]
            last = (
                d2 / (d1 * (d1 + d2)) * at(-3, -2)
                - (d2 + d1) / (d1 * d2) * at(-2, -1)
                + (2.0 * d2 + d1) / (d2 * (d1 + d2)) * at(-1)
            )
    return np.concatenate([first, interior, last], axis=axis)


@implementation(np.gradient)
def _gradient(f, *varargs, axis=None, edge_order=1):
    # NumPy's own writes into a preallocated array; this is the same stencils, by slicing
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    ndim = np.ndim(f)
    single = isinstance(axis, int)
    axes = tuple(range(ndim)) if axis is None else (axis,) if single else tuple(axis)
    axes = tuple(a % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    if np.result_type(f).kind not in "fc":
        f = f.astype(np.float64)
    spacings = _spacings(f, varargs, axes)
    out = [_gradient_along(f, h, ax, edge_order) for h, ax in zip(spacings, axes)]
    return out[0] if len(out) == 1 else tuple(out)


# -- sliding windows: NumPy's own read-only view, whose adjoint adds the windows back -------


@implementation(np.lib.stride_tricks.sliding_window_view)
def _sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    if writeable:
        raise NotImplementedError(
            "sliding_window_view(..., writeable=True) of a node: windows share memory with x, "
            "and a write into one cannot be recorded"
        )
    return sliding_windows(x, window_shape, axis)


@primitive
def sliding_windows(x, window_shape, axis=None):
    """NumPy's read-only ``sliding_window_view(x, window_shape, axis)``: a view of ``x``, so
    that a write into ``x`` shows in the windows, as in NumPy."""
    return np.lib.stride_tricks.sliding_window_view(x, window_shape, axis)


@sensitivity(sliding_windows, 0)
def _(y, ybar, x, window_shape, axis=None):
    numbers = np.reshape(np.arange(np.size(x)), np.shape(x))
    numbers = np.lib.stride_tricks.sliding_window_view(numbers, window_shape, axis)
    flat = scatter_add(np.ravel(np.zeros_like(x)), np.ravel(numbers), np.ravel(ybar))
    return np.reshape(flat, np.shape(x))


@batching(sliding_windows)
def _(args, batched, **kwargs):
    x, window_shape, *axis = args
    axis = axis[0] if axis else kwargs.get("axis")
    if any(batched[1:]):
        return NotImplemented
    ndim = np.ndim(x) - 1
    axes = range(ndim) if axis is None else axis if np.iterable(axis) else (axis,)
    return sliding_windows(x, window_shape, tuple(a % ndim + 1 for a in axes))


# -- piecewise: each function on its slice, put in place with scatter_add --------------------


@implementation(np.piecewise)
def _piecewise(x, condlist, funclist, *args, **kw):
    # NumPy's own fills y[cond] in place; here each piece is scattered into an array of
    # zeros and selected with where (a later condition wins, as a later write does)
    if np.ndim(x) == 0:
        x = np.reshape(x, ())  # a 0-d array, which a 0-d mask indexes (a float is not)
    n2 = len(funclist)
    if np.isscalar(condlist) or (
        not isinstance(condlist[0], (list, np.ndarray)) and np.ndim(x) != 0
    ):
        condlist = [condlist]
    condlist = np.asarray(condlist, dtype=bool)
    n = len(condlist)
    if n == n2 - 1:  # the "otherwise" condition
        condlist = np.concatenate([condlist, ~np.any(condlist, axis=0, keepdims=True)], axis=0)
        n += 1
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros_like(x)
    for cond, func in zip(condlist, funclist):
        cond = np.broadcast_to(cond, np.shape(x))
        if not callable(func):
            y = np.where(cond, func, y)
        elif np.any(cond):
            vals = func(x[cond], *args, **kw)
            y = np.where(cond, scatter_add(_template(x), cond, vals), y)
    return y


@implementation(np.sort_complex)
def _sort_complex(a):
    # NumPy's sorts a complex copy: the same order as sort (real part, then imaginary)
    b = np.sort(a)
    if np.iscomplexobj(b):
        return b
    return b + 0j if np.result_type(b) != np.float32 else astype(b, np.complex64)


@implementation(np.unwrap)
def _unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    # the jumps to correct are read from the values (piecewise constant); the result is p
    # plus their running sum, so its derivative is that of p (1) almost everywhere
    dd = np.diff(p, axis=axis)
    discont = period / 2 if discont is None else discont
    plain = _values(dd)
    high = period / 2
    ddmod = np.mod(plain + high, period) - high
    ddmod = np.where((ddmod == -high) & (plain > 0), high, ddmod)
    correct = np.where(np.abs(plain) < discont, 0.0, ddmod - plain)
    axis %= np.ndim(p)
    first = (slice(None),) * axis + (slice(0, 1),)
    steps = np.cumsum(correct, axis=axis)
    steps = np.concatenate([np.zeros_like(correct[first]), steps], axis=axis)
    return p + steps


@primitive
def _values(x):
    """``x`` itself; marked non-differentiable, so on a node it gives the plain values."""
    return x


nondifferentiable(_values)


@implementation(np.apply_over_axes)
def _apply_over_axes(func, a, axes):
    # NumPy's own, without its np.asarray: func is applied axis by axis, keeping dims
    val, ndim = a, np.ndim(a)
    for axis in np.atleast_1d(axes):
        axis = int(axis) % ndim
        res = func(val, axis)
        if np.ndim(res) != np.ndim(val):
            res = np.expand_dims(res, axis)
            if np.ndim(res) != np.ndim(val):
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val


# Functions of integer sizes, indices, bits and dates: their results are constants
nondifferentiable(
    np.arange, np.empty, np.ones, np.zeros, np.eye, np.identity, np.tri, np.indices,
    np.diag_indices, np.tril_indices, np.triu_indices, np.mask_indices, np.ix_,
    np.ravel_multi_index, np.unravel_index, np.packbits, np.unpackbits, np.bartlett,
    np.blackman, np.hamming, np.hanning, np.einsum_path, np.is_busday, np.busday_count,
    np.busday_offset, np.datetime_as_string,
)  # fmt: skip


# -- writes and views that library code makes: copyto, as_strided ------------------------


@implementation(np.copyto)
def _copyto(dst, src, casting="same_kind", where=True):
    # NumPy's errors (shape, casting) from NumPy on plain copies; then the write itself,
    # dst[...] = src, in place on a node dst
    np.copyto(np.array(value_of(dst)), value_of(src), casting=casting, where=value_of(where))
    if not hasattr(type(dst), "__record_call__"):
        raise TypeError(
            "np.copyto(dst, src) writes a node into the ndarray dst, which can hold numbers "
            "only (its gradient would be lost). Make dst a node (dst = np.zeros_like(x) with "
            "x a node), or build the result with np.where(where, src, dst)"
        )
    dst[...] = src if where is True else np.where(where, src, dst)


def strided_positions(x, shape, strides):
    """For each element of ``as_strided(x, shape, strides)``, the flat (C order) position
    in ``x`` of the element it reads; a ValueError where it reads memory that is no
    element of ``x`` (as_strided allows it, and it has no adjoint)."""
    x = np.asarray(value_of(x))

    def offsets(shape, strides):
        total = np.zeros(shape, dtype=np.int64)
        for axis, (n, s) in enumerate(zip(shape, strides)):
            total = total + np.arange(n, dtype=np.int64).reshape(
                (-1,) + (1,) * (len(shape) - axis - 1)
            ) * s
        return total

    own = offsets(x.shape, x.strides).ravel()
    wanted = offsets(tuple(shape), tuple(strides))
    order = np.argsort(own, kind="stable")
    ranked = own[order]
    place = np.minimum(np.searchsorted(ranked, wanted), max(own.size - 1, 0))
    if wanted.size and (own.size == 0 or np.any(ranked[place] != wanted)):
        raise ValueError(
            "as_strided of a node reads memory outside the node's elements (shape "
            f"{tuple(shape)}, strides {tuple(strides)} over an array of shape {x.shape} and "
            f"strides {x.strides}), which has no gradient; keep the windows inside the array"
        )
    return order[place]


@primitive
def strided_view(x, shape, strides):
    """``np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)``, what
    ``as_strided`` of a node records: a read-only view, whose adjoint adds each element's
    adjoint into the element of ``x`` it reads (elements may be read many times)."""
    strided_positions(x, shape, strides)
    root = x
    while isinstance(root, np.ndarray) and isinstance(root.base, np.ndarray):
        root = root.base
    if type(root) is np.ndarray and root.flags.contiguous | root.flags.f_contiguous:
        # made on the array that owns the memory, so that it is known as x's view (a
        # write to x shows in it), where as_strided's own result hides x behind a wrapper
        start = x.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        view = np.ndarray(shape, x.dtype, buffer=root, offset=start, strides=strides)
        view.flags.writeable = False
        return view
    return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


@sensitivity(strided_view, 0)
def _(y, ybar, x, shape, strides):
    positions = strided_positions(x, shape, strides)
    flat = scatter_add(_template(x, True), positions.reshape(-1), np.reshape(ybar, -1))
    return np.reshape(flat, np.shape(x))


nondifferentiable(strided_positions)


def full_like_node(a, fill_value, *args, **kwargs):
    """``np.full_like(a, fill_value)`` with ``fill_value`` a node: what library code's
    ``np.full_like`` records inside ``grad`` (``tape.runtime.conversions``)."""
    return _full_like(a, fill_value, *args, **kwargs)
