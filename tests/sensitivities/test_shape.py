"""Shape and indexing rules against central differences; implementations also against
NumPy's own values."""

import operator
import warnings

import numpy as np
import pytest
from hypothesis import strategies as st

from sensitivities.shape import (
    astype,
    cast,
    filled_like,
    pad_copies,
    scatter_add,
    sliding_windows,
    strided_view,
)
from tape import Leaf, Tape, grad, propagate, reverse_tape
from tests.fd import numeric_grad
from tests.sensitivities.cases import Case, implementation_test, rule_test
from tests.strategies import SHAPES, arrays

# bound by name at import, as library code does: tape reaches this name too
from numpy.lib.stride_tricks import as_strided  # noqa: E402  isort: skip

NONEMPTY = SHAPES.filter(len)
MATRICES = SHAPES.filter(lambda s: len(s) >= 2)


def array(data, shapes=SHAPES):
    return data.draw(shapes.flatmap(arrays))


def distinct(data, shapes=SHAPES):
    """An array without ties, in a random order: sorting is differentiable there."""
    x = array(data, shapes)
    order = np.array(data.draw(st.permutations(range(x.size))), dtype=float).reshape(x.shape)
    # neighbours at least 0.17 apart, beyond any step of FD; the square roots keep sums of
    # pairs apart too, so that statistics of them (pad's medians of medians) do not tie
    return x * 0.05 + order * 0.37 + np.sqrt(order + 2) * 0.01


def an_axis(data, ndim):
    return data.draw(st.integers(-ndim, ndim - 1))


def reshape_draw(data):
    x = array(data)
    shape = data.draw(st.sampled_from([(x.size,), (1, x.size), (x.size, 1), (-1,)]))
    return x, shape, data.draw(st.sampled_from(["C", "F"]))


def transpose_draw(data):
    x = array(data)
    axes = st.permutations(range(x.ndim)).map(lambda p: tuple(a - x.ndim * (a % 2) for a in p))
    return x, data.draw(axes | st.none())


def two_axes(data):
    x = array(data, NONEMPTY)
    return x, an_axis(data, x.ndim), an_axis(data, x.ndim)


def expand_draw(data):
    x = array(data)
    return x, data.draw(st.integers(-x.ndim - 1, x.ndim))


def squeeze_draw(data):
    x = array(data)
    ones = data.draw(st.lists(st.integers(0, x.ndim), max_size=2))
    shape = list(x.shape)
    for i in sorted(ones, reverse=True):
        shape.insert(i, 1)
    return (x.reshape(shape),)


def broadcast_draw(data):
    x = array(data)
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    target = tuple(lead) + tuple(n if n != 1 else data.draw(st.integers(1, 3)) for n in x.shape)
    return x, target


def flip_draw(data):
    x = array(data, NONEMPTY)
    return x, data.draw(
        st.none() | st.integers(-x.ndim, x.ndim - 1) | st.just(tuple(range(x.ndim)))
    )


def matrix_draw(data):
    x = array(data, MATRICES)
    return x, data.draw(st.integers(-2, 2))


def joined_draw(stacking=False):
    """Three arrays to join along an axis (None: flattened, for concatenate)."""

    def draw(data):
        base = list(data.draw(NONEMPTY))
        axis = an_axis(data, len(base))
        shapes = []
        for _ in range(3):
            shape = list(base)
            if not stacking:
                shape[axis] = data.draw(st.integers(0, 3))
            shapes.append(tuple(shape))
        xs = [data.draw(arrays(s)) for s in shapes]
        if stacking:
            axis = an_axis(data, len(base) + 1)
        elif data.draw(st.booleans()):
            axis = None
        return (*xs, axis)

    return draw


def joined(f):
    return lambda a, b, c, axis: f([a, b, c], axis=axis)


def tile_draw(data):
    x = array(data)
    return x, data.draw(
        st.integers(1, 3) | st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple)
    )


def repeat_draw(data):
    x = array(data)
    axis = None if x.ndim == 0 or data.draw(st.booleans()) else an_axis(data, x.ndim)
    n = x.size if axis is None else x.shape[axis]
    counts = st.lists(st.integers(0, 3), min_size=n, max_size=n)
    return x, data.draw(st.integers(0, 3) | counts), axis


def roll_draw(data):
    x = array(data, NONEMPTY)
    if data.draw(st.booleans()):
        return (
            x,
            data.draw(st.integers(-5, 5)),
            data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1)),
        )
    axes = data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=2))
    return x, tuple(data.draw(st.integers(-5, 5)) for _ in axes), tuple(axes)


def rot90_draw(data):
    x = array(data, MATRICES)
    axes = data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=2, max_size=2, unique=True))
    return x, data.draw(st.integers(-3, 5)), tuple(axes)


def sort_draw(data):
    x = distinct(data, NONEMPTY)
    return x, data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))


def partition_draw(data):
    x = distinct(data, NONEMPTY)
    axis = an_axis(data, x.ndim)
    return x, data.draw(st.integers(-x.shape[axis], x.shape[axis] - 1)), axis


def pad_draw(data, modes=("constant", "edge", "reflect", "symmetric", "wrap")):
    x = distinct(data, NONEMPTY)
    mode = data.draw(st.sampled_from(modes))
    most = 4 if mode in ("constant", "edge", "wrap", "symmetric") else 5
    width = data.draw(
        st.one_of(
            st.integers(0, 3),
            st.tuples(st.integers(0, 3), st.integers(0, 3)),
            st.lists(
                st.tuples(st.integers(0, most), st.integers(0, most)),
                min_size=x.ndim,
                max_size=x.ndim,
            ).map(tuple),
        )
    )
    return x, width, mode


def pad_any_draw(data):
    """Every mode NumPy has but a callable, with its options."""
    modes = ["constant", "edge", "reflect", "symmetric", "wrap", "maximum", "minimum", "mean"]
    x, width, mode = pad_draw(data, modes + ["median", "linear_ramp"])
    options = {}
    if mode == "constant" and data.draw(st.booleans()):
        options["constant_values"] = data.draw(st.floats(-2, 2))
    elif mode in ("reflect", "symmetric"):
        options["reflect_type"] = "even"
    elif mode in ("maximum", "minimum", "mean", "median") and data.draw(st.booleans()):
        options["stat_length"] = data.draw(
            st.integers(1, 3) | st.tuples(st.integers(1, 3), st.integers(1, 3))
        )
    elif mode == "linear_ramp" and data.draw(st.booleans()):
        options["end_values"] = data.draw(st.tuples(st.floats(-2, 2), st.floats(-2, 2)))
    return x, width, mode, options


def diagonal_draw(data):
    x = array(data, MATRICES)
    axes = data.draw(
        st.lists(
            st.integers(-x.ndim, x.ndim - 1), min_size=2, max_size=2, unique_by=lambda a: a % x.ndim
        )
    )
    return x, data.draw(st.integers(-3, 3)), *axes


def diag_draw(data):
    x = array(data, st.sampled_from([(1,), (3,), (2, 3), (4, 2), (3, 3)]))
    return x, data.draw(st.integers(-2, 2))


def take_draw(data):
    x = array(data, NONEMPTY)
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    n = x.size if axis is None else x.shape[axis]
    mode = data.draw(st.sampled_from(["raise", "wrap", "clip"]))
    index = st.integers(-n, n - 1) if mode == "raise" else st.integers(-2 * n, 2 * n)
    indices = data.draw(index | st.lists(index, min_size=1, max_size=5).map(np.array))
    return x, indices, axis, mode


def choose_draw(data):
    shape = data.draw(SHAPES)
    n = data.draw(st.integers(1, 3))
    a = np.array(
        data.draw(
            st.lists(
                st.integers(0, n - 1), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))
            )
        )
    ).reshape(shape)
    choices = [data.draw(arrays(shape)) for _ in range(n)]
    return a, *choices, *(None,) * (3 - n)


def chosen(a, x, y, z):
    return np.choose(a, [c for c in (x, y, z) if c is not None])


# -- indexing: every kind, and mixtures ----------------------------------------------------


def index_draw(data):
    """An array and an index tuple: integers, slices (negative steps too), None, an
    Ellipsis, integer arrays with repeats (broadcasting together) or a boolean mask, in
    any mixture, advanced parts separated by slices or not."""
    x = array(data, NONEMPTY)
    advanced = data.draw(st.sampled_from(["array", "mask"]))
    size = data.draw(st.integers(1, 4))
    kinds = data.draw(
        st.lists(
            st.sampled_from(["int", "slice", "none", "advanced"]), min_size=1, max_size=x.ndim + 1
        )
    )
    while sum(k != "none" for k in kinds) > x.ndim:
        kinds.pop()
    # parts before an Ellipsis index the first dimensions, parts after it the last ones
    split = data.draw(st.none() | st.integers(0, len(kinds)))
    after = 0 if split is None else sum(k != "none" for k in kinds[split:])
    parts, dim, masked = [], 0, False
    for i, kind in enumerate(kinds):
        if i == split:
            parts.append(Ellipsis)
            dim = x.ndim - after
        if kind == "none":
            parts.append(None)
            continue
        n = x.shape[dim]
        if kind == "int":
            parts.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 1, n + 1)
            parts.append(
                slice(
                    data.draw(bound),
                    data.draw(bound),
                    data.draw(st.sampled_from([None, 1, 2, -1, -2])),
                )
            )
        elif advanced == "array":
            ints = st.lists(st.integers(-n, n - 1), min_size=size, max_size=size)
            parts.append(np.array(data.draw(ints)))
        elif not masked:
            mask = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
            parts.append(np.array(mask, dtype=bool))
            masked = True
        else:
            parts.append(slice(None))
        dim += 1
    if split == len(kinds):
        parts.append(Ellipsis)
    return x, tuple(parts)


def scatter_draw(data):
    x, index = index_draw(data)
    values = data.draw(arrays(np.shape(x[index])))
    return x, index, values


CASES = [
    Case(np.reshape, reshape_draw, fn=lambda x, shape, order: np.reshape(x, shape, order=order)),
    Case(np.ravel, lambda d: (array(d), d.draw(st.sampled_from(["C", "F"])))),
    Case(np.squeeze, squeeze_draw),
    Case(np.expand_dims, expand_draw),
    Case(np.broadcast_to, broadcast_draw),
    Case(np.copy, lambda d: (array(d),)),
    Case(np.transpose, transpose_draw),
    Case(np.matrix_transpose, lambda d: (array(d, MATRICES),)),
    Case(np.swapaxes, two_axes),
    Case(np.moveaxis, two_axes),
    Case(np.concatenate, joined_draw(), fn=joined(np.concatenate), argnums=(0, 1, 2)),
    Case(np.stack, joined_draw(stacking=True), fn=joined(np.stack), argnums=(0, 1, 2)),
    Case(np.tile, tile_draw),
    Case(np.repeat, repeat_draw),
    Case(np.flip, flip_draw),
    Case(np.roll, roll_draw),
    Case(np.rot90, rot90_draw),
    Case(np.sort, sort_draw),
    Case(np.partition, partition_draw),
    Case(pad_copies, pad_draw, fn=lambda x, width, mode: np.pad(x, width, mode)),
    Case(np.triu, matrix_draw),
    Case(np.tril, matrix_draw),
    Case(np.diagonal, diagonal_draw),
    Case(np.diag, diag_draw),
    Case(np.take, take_draw, fn=lambda x, i, axis, mode: np.take(x, i, axis=axis, mode=mode)),
    Case(np.choose, choose_draw, fn=chosen, argnums=(1,)),
    Case(cast, lambda d: (array(d), np.float64)),
    Case(operator.getitem, index_draw),
    Case(scatter_add, scatter_draw, argnums=(2,)),
]

test_shape_rules = rule_test(CASES, max_examples=15)


# -- implementations ------------------------------------------------------------------------


def joined_pieces(pieces):
    """The pieces of a split as one array, so that central differences see them all."""
    return np.concatenate([np.ravel(p) for p in pieces])


def split_draw(data, least=1, axis=None):
    x = array(data, SHAPES.filter(lambda s: len(s) >= least))
    axis = an_axis(data, x.ndim) if axis is None else axis if x.ndim > 1 else 0
    n = x.shape[axis]
    sections = st.sampled_from([k for k in range(1, 5) if n % k == 0])
    cuts = st.lists(st.integers(0, n), max_size=3).map(sorted)
    return x, data.draw(sections | cuts), axis


def stackable(least):
    def draw(data):
        shape = data.draw(st.sampled_from([(), (3,), (2, 3), (2, 3, 2)][:4]))
        shape = shape if len(shape) >= least or data.draw(st.booleans()) else shape
        return data.draw(arrays(shape)), data.draw(arrays(shape))

    return draw


def pair(f):
    return lambda a, b: f([a, b])


def block_draw(data):
    n, m = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    return tuple(data.draw(arrays(s)) for s in [(n, m), (n, 2), (1, m), (1, 2)])


def insert_draw(data):
    x = array(data, NONEMPTY)
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    n = x.size if axis is None else x.shape[axis]
    obj = data.draw(st.integers(0, n) | st.lists(st.integers(0, n), min_size=1, max_size=3))
    count = 1 if np.ndim(obj) == 0 else len(obj)
    if axis is None:
        values = data.draw(arrays((count,)))
    else:
        shape = list(x.shape)
        shape[axis] = count
        values = data.draw(arrays(tuple(shape))) if np.ndim(obj) else data.draw(arrays(()))
    return x, obj, values, axis


def delete_draw(data):
    x = array(data, NONEMPTY)
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    n = x.size if axis is None else x.shape[axis]
    obj = data.draw(
        st.integers(-n, n - 1)
        | st.lists(st.integers(0, n - 1), max_size=3)
        | st.just(slice(None, None, 2))
    )
    return x, obj, axis


def diff_draw(data):
    x = array(data, NONEMPTY)
    axis = an_axis(data, x.ndim)
    edge = x.shape[: axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1 :]
    prepend = data.draw(st.none() | arrays(edge) | st.floats(-1, 1))
    return x, data.draw(st.integers(1, 3)), axis, prepend


def diff(x, n, axis, prepend):
    if prepend is None:
        return np.diff(x, n, axis)
    return np.diff(x, n, axis, prepend)


def compress_draw(data):
    x = array(data, NONEMPTY)
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    n = x.size if axis is None else x.shape[axis]
    return data.draw(st.lists(st.booleans(), max_size=n)), x, axis


def meshgrid_draw(data):
    xs = [data.draw(arrays((data.draw(st.integers(1, 3)),))) for _ in range(3)]
    return (*xs, data.draw(st.sampled_from(["xy", "ij"])), data.draw(st.booleans()))


def meshgrid(a, b, c, indexing, sparse):
    return joined_pieces(
        np.broadcast_arrays(*np.meshgrid(a, b, c, indexing=indexing, sparse=sparse))
    )


def atleast(f):
    return lambda a, b: joined_pieces([f(a), *f(a, b)])


def trim_draw(data):
    """Nonzero numbers and a mask of where zeros go: the zeros stay zeros under central
    differences, so that the trimmed shape does not change."""
    x = data.draw(NONEMPTY.flatmap(lambda s: arrays(s, avoid=0.0)))
    keep = data.draw(arrays(x.shape)) > 0.5
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    return x, keep, data.draw(st.sampled_from(["fb", "f", "b", "B"])), axis


def along_axis_draw(data):
    x = array(data, NONEMPTY)
    return x, an_axis(data, x.ndim), data.draw(st.sampled_from([0, 1, 2]))


def along_axis(x, axis, kind):
    funcs = [lambda r: np.sum(r**2), lambda r: np.cumsum(r) * r, lambda r: np.outer(r, r)]
    return np.apply_along_axis(funcs[kind], axis, x)


def distinct_values(data):
    """An array whose values are at least 0.37 apart: each drawn value moved up by 0.37
    times its rank (an offset by position could make two draws meet)."""
    x = array(data, NONEMPTY)
    ranks = np.argsort(np.argsort(x, axis=None, kind="stable")).reshape(x.shape)
    return x + ranks * 0.37


def bincount_draw(data):
    n = data.draw(st.integers(1, 6))
    index = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    return index, data.draw(arrays((n,)))


def linspace_draw(data):
    shape = data.draw(st.sampled_from([(), (2,), (2, 3)]))
    start, stop = data.draw(arrays(shape)), data.draw(arrays(shape))
    return start, stop, data.draw(st.integers(0, 6)), data.draw(st.booleans()), data.draw(
        st.sampled_from([0, -1])
    )


def full_like_draw(data):
    x = array(data)
    return x, data.draw(st.sampled_from([(), np.shape(x)[-1:]]).flatmap(arrays))


IMPLEMENTED = [
    Case(
        np.linspace,
        linspace_draw,
        fn=lambda a, b, num, endpoint, axis: np.linspace(a, b, num, endpoint, axis=axis),
        argnums=(0, 1),
    ),
    Case(np.full_like, full_like_draw, argnums=(0, 1)),
    Case(np.atleast_1d, stackable(0), fn=atleast(np.atleast_1d), argnums=(0, 1)),
    Case(np.atleast_2d, stackable(0), fn=atleast(np.atleast_2d), argnums=(0, 1)),
    Case(np.atleast_3d, stackable(0), fn=atleast(np.atleast_3d), argnums=(0, 1)),
    Case(
        np.broadcast_arrays,
        lambda d: d.draw(
            st.sampled_from([((3,), (2, 1)), ((), (2,)), ((2, 1, 3), (4, 1))]).flatmap(
                lambda s: st.tuples(arrays(s[0]), arrays(s[1]))
            )
        ),
        fn=lambda a, b: joined_pieces(np.broadcast_arrays(a, b)),
        argnums=(0, 1),
    ),
    Case(np.meshgrid, meshgrid_draw, fn=meshgrid, argnums=(0, 1, 2)),
    Case(np.hstack, stackable(1), fn=pair(np.hstack), argnums=(0, 1)),
    Case(np.vstack, stackable(1), fn=pair(np.vstack), argnums=(0, 1)),
    Case(np.dstack, stackable(1), fn=pair(np.dstack), argnums=(0, 1)),
    Case(np.column_stack, stackable(1), fn=pair(np.column_stack), argnums=(0, 1)),
    Case(np.append, lambda d: (array(d), array(d)), fn=np.append, argnums=(0, 1)),
    Case(
        np.block, block_draw, fn=lambda a, b, c, d: np.block([[a, b], [c, d]]), argnums=(0, 1, 2, 3)
    ),
    Case(np.split, split_draw, fn=lambda x, s, axis: joined_pieces(np.split(x, s, axis))),
    Case(
        np.array_split,
        lambda d: (array(d, NONEMPTY), d.draw(st.integers(1, 5))),
        fn=lambda x, s: joined_pieces(np.array_split(x, s, axis=-1)),
    ),
    Case(
        np.hsplit,
        lambda d: split_draw(d, 1, 1)[:2],
        fn=lambda x, s: joined_pieces(np.hsplit(x, s)),
        name="hsplit",
    ),
    Case(
        np.vsplit,
        lambda d: split_draw(d, 2, 0)[:2],
        fn=lambda x, s: joined_pieces(np.vsplit(x, s)),
        name="vsplit",
    ),
    Case(
        np.dsplit,
        lambda d: split_draw(d, 3, 2)[:2],
        fn=lambda x, s: joined_pieces(np.dsplit(x, s)),
        name="dsplit",
    ),
    Case(
        np.unstack,
        lambda d: (array(d, NONEMPTY),),
        fn=lambda x: joined_pieces(np.unstack(x, axis=-1)),
    ),
    Case(
        np.resize, lambda d: (array(d, NONEMPTY), d.draw(st.sampled_from([(7,), (2, 5), 3, (0,)])))
    ),
    Case(np.fliplr, lambda d: (array(d, MATRICES),)),
    Case(np.flipud, lambda d: (array(d, NONEMPTY),)),
    Case(np.diff, diff_draw, fn=diff, argnums=(0,)),
    Case(
        np.ediff1d,
        lambda d: (array(d), array(d, NONEMPTY)),
        fn=lambda x, e: np.ediff1d(x, e, e[:1]),
        argnums=(0, 1),
    ),
    Case(np.diagflat, lambda d: (array(d), d.draw(st.integers(-2, 2)))),
    Case(np.trace, diagonal_draw),
    Case(np.compress, compress_draw, argnums=(1,)),
    Case(np.extract, lambda d: (lambda x: (x > 0, x))(array(d)), argnums=(1,)),
    Case(np.delete, delete_draw),
    Case(np.insert, insert_draw, argnums=(0, 2)),
    Case(np.real_if_close, lambda d: (array(d),)),
    Case(
        np.pad, pad_any_draw, fn=lambda x, width, mode, options: np.pad(x, width, mode, **options)
    ),
    Case(
        np.trim_zeros, trim_draw, fn=lambda x, keep, trim, axis: np.trim_zeros(x * keep, trim, axis)
    ),
    Case(np.apply_along_axis, along_axis_draw, fn=along_axis),
    # unique values are their first occurrences; distinct draws keep their number fixed
    Case(np.unique, lambda d: (distinct_values(d),)),
    Case(np.unique_values, lambda d: (distinct_values(d),)),
    Case(
        np.unique_counts, lambda d: (distinct_values(d),), fn=lambda x: np.unique_counts(x).values
    ),
    Case(
        np.unique_inverse, lambda d: (distinct_values(d),), fn=lambda x: np.unique_inverse(x).values
    ),
    Case(np.unique_all, lambda d: (distinct_values(d),), fn=lambda x: np.unique_all(x).values),
    Case(np.bincount, bincount_draw, fn=lambda i, w: np.bincount(i, w, 2), argnums=(1,)),
]



# -- np.gradient, sliding windows, piecewise, astype --------------------------------------------

GRADIENT_SHAPES = st.lists(st.integers(3, 5), min_size=1, max_size=3).map(tuple)


def gradient_draw(data):
    """An array, spacings in every form NumPy takes (none, one scalar, a scalar or the
    coordinates per axis), axis (None, an int or a tuple) and edge_order."""
    f = array(data, GRADIENT_SHAPES)
    axis = data.draw(st.sampled_from([None, -1, 0, tuple(range(f.ndim))[::-1]]))
    axes = range(f.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    form = data.draw(st.sampled_from(["none", "scalar", "each"]))
    if form == "none":
        spacing = ()
    elif form == "scalar":
        spacing = (data.draw(st.floats(0.3, 2.0)),)
    else:  # a scalar or increasing coordinates per axis, uneven
        spacing = tuple(
            data.draw(st.floats(0.3, 2.0))
            if data.draw(st.booleans())
            else np.cumsum(data.draw(arrays((f.shape[a],), 0.3, 1.5)))
            for a in axes
        )
    return f, spacing, axis, data.draw(st.sampled_from([1, 2]))


def gradient(f, spacing, axis, edge_order):
    out = np.gradient(f, *spacing, axis=axis, edge_order=edge_order)
    return out if isinstance(out, tuple) else (out,)


def gradient_loss(f, spacing, axis, edge_order):
    return sum(np.sum(g * np.cos(np.arange(g.size).reshape(g.shape))) for g in
               gradient(f, spacing, axis, edge_order))  # fmt: skip


def gradient_of_coordinates(c, f):
    # differentiable in the coordinates too
    return gradient_loss(f, (np.cumsum(c),), 0, 2)


def windows_draw(data):
    x = array(data, st.lists(st.integers(2, 5), min_size=1, max_size=3).map(tuple))
    if data.draw(st.booleans()):
        axis = None
        window = tuple(data.draw(st.integers(1, n)) for n in x.shape)
    else:  # some axes, possibly one twice (windows of windows)
        axis = tuple(data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=2)))
        left = dict(enumerate(x.shape))  # what each axis has left after windows along it
        window = []
        for a in axis:
            n = data.draw(st.integers(1, min(2, left[a % x.ndim])))
            left[a % x.ndim] -= n - 1
            window.append(n)
        window = tuple(window)
    return x, window, axis


def windows(x, window, axis):
    # a convolution written as NumPy users write it
    view = np.lib.stride_tricks.sliding_window_view(x, window, axis)
    return np.sum(view * np.linspace(0.5, 1.5, view.size).reshape(view.shape))


# the windows are NumPy's own read-only view, one primitive with a rule
WINDOW_CASES = [Case(sliding_windows, windows_draw, fn=windows)]

test_sliding_windows_rule = rule_test(WINDOW_CASES)


def piecewise_draw(data):
    x = data.draw(SHAPES.flatmap(lambda s: arrays(s, avoid=[-1.0, 0.5])))  # off the breaks
    return x, data.draw(arrays((), 0.5, 2.0))


def piecewise(x, c):
    # branch functions that close over a differentiated value, and a constant piece
    return np.piecewise(x, [x < -1.0, x > 0.5], [lambda v: c * v**2, 0.25, lambda v: np.sin(v) * c])


def piecewise_scalar(x, c):
    return np.piecewise(x, x > 0, [lambda v: v * c, lambda v: -(v**3)])


IMPLEMENTED += [
    Case(np.gradient, gradient_draw, fn=gradient_loss, argnums=(0,)),
    Case(
        np.gradient,
        lambda d: (d.draw(arrays((4,), 0.3, 1.0)), d.draw(arrays((4, 3)))),
        fn=gradient_of_coordinates,
        argnums=(0, 1),
        name="gradient-coordinates",
    ),
    Case(np.lib.stride_tricks.sliding_window_view, windows_draw, fn=windows),
    Case(np.piecewise, piecewise_draw, fn=piecewise, argnums=(0, 1)),
    Case(
        np.piecewise,
        lambda d: (float(d.draw(arrays((), 0.2, 2.0))) * d.draw(st.sampled_from([-1, 1])),
                   float(d.draw(arrays((), 0.5, 2.0)))),
        fn=piecewise_scalar,
        argnums=(0, 1),
        name="piecewise-scalar",
    ),  # fmt: skip
    Case(np.astype, lambda d: (array(d),), fn=lambda x: np.real(np.astype(x, np.complex128)) * 2),
    Case(astype, lambda d: (array(d),), fn=lambda x: np.real(astype(x, np.complex128)) * 2),
]

IMPLEMENTED += [
    Case(np.sort_complex, lambda d: (distinct(d, st.just((4,))),),
         fn=lambda a: weighted(np.sort_complex(a))),
    # phases with jumps of more than pi, which unwrap corrects by multiples of 2 pi
    Case(np.unwrap, lambda d: (np.cumsum(d.draw(arrays((2, 5), 0.5, 2.5)), axis=-1)
                               + np.round(d.draw(arrays((2, 5), -2.0, 2.0))) * 2 * np.pi,),
         fn=lambda p: weighted(np.unwrap(p))),
    Case(np.apply_over_axes, lambda d: (array(d, st.just((2, 3, 2))),),
         fn=lambda a: weighted(np.apply_over_axes(np.sum, a**2, [0, 2]))),
]  # fmt: skip



def filled(like):
    """A buffer made from ``x`` and filled in place, the idiom the node it gives allows."""

    def fill(x):
        out = like(x)
        out[...] = x**2
        out *= 2.0
        return out

    return fill


IMPLEMENTED += [
    Case(like, lambda d: (array(d),), fn=filled(like), name=like.__name__)
    for like in (np.zeros_like, np.ones_like, np.empty_like)
]
FILLED_LIKE_CASES = [
    Case(filled_like, lambda d: (array(d),), fn=lambda x: np.ones_like(x) * x**2),
]
test_filled_like_rule = rule_test(FILLED_LIKE_CASES)

test_shape_implementations = implementation_test(IMPLEMENTED)


def test_gradient_and_windows_in_forward_mode_and_to_second_order():
    from tape import jvp

    rng = np.random.default_rng(7)
    x, dx = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    coordinates = np.array([0.0, 0.4, 1.1, 1.5, 2.6])
    for f in (
        lambda x: np.gradient(x**3, coordinates, 0.5, edge_order=2)[0],
        lambda x: np.gradient(np.sin(x), axis=1),
        lambda x: np.lib.stride_tricks.sliding_window_view(x**2, (2, 3), axis=(0, 1)),
        lambda x: np.piecewise(x, [x < 0], [lambda v: v**3, lambda v: np.exp(v)]),
    ):
        _, tangent = jvp(f, (x,), (dx,))
        h = 1e-6
        np.testing.assert_allclose(tangent, (f(x + h * dx) - f(x - h * dx)) / (2 * h), atol=1e-6)
        w = rng.standard_normal(np.shape(f(x)))
        first = lambda x, f=f, w=w: np.sum(grad(lambda x: np.sum(f(x) * w))(x)[0] * dx)  # noqa: E731
        np.testing.assert_allclose(grad(first)(x)[0], numeric_grad(first, (x,), 0), atol=1e-5)


def test_astype_function_form_casts_as_the_method():
    x = np.array([0.1, 2.7])
    t = Tape()
    y = np.astype(Leaf(t, x), np.float32)
    assert y.value.dtype == np.float32 and np.array_equal(y.value, np.astype(x, np.float32))
    (g,) = grad(lambda x: np.sum(np.astype(x, np.float32) * 3))(x)
    assert g.dtype == np.float64 and np.array_equal(g, [3.0, 3.0])


def test_gradient_refuses_what_numpy_refuses():
    x = Leaf(Tape(), np.ones(2))
    with pytest.raises(ValueError, match="too small"):
        np.gradient(x, edge_order=2)
    with pytest.raises(TypeError):
        np.gradient(x, 1.0, 2.0)


def test_sliding_window_view_is_a_convolution():
    x, k = np.arange(6.0), np.array([1.0, -2.0, 0.5])
    conv = lambda x, k: np.lib.stride_tricks.sliding_window_view(x, 3) @ k  # noqa: E731
    np.testing.assert_array_equal(
        conv(Leaf(Tape(), x), k).value, np.convolve(x, k[::-1], "valid")
    )
    gx, gk = grad(lambda x, k: np.sum(conv(x, k) ** 2), argnums=(0, 1))(x, k)
    y = np.convolve(x, k[::-1], "valid")
    np.testing.assert_allclose(gk, 2 * np.lib.stride_tricks.sliding_window_view(x, 3).T @ y)
    np.testing.assert_allclose(gx, 2 * np.convolve(y, k, "full"))  # the transposed convolution

# Functions whose NumPy code runs on nodes as it is, entered with no rule of their own
ENTERED = [
    Case(np.rollaxis, two_axes, fn=lambda x, a, b: np.rollaxis(x, a, b % x.ndim)),
    Case(
        np.take_along_axis,
        lambda d: (lambda x, axis: (x, np.argsort(x, axis=axis), axis))(array(d, NONEMPTY), 0),
        fn=lambda x, i, axis: np.take_along_axis(x, i, axis),
    ),
]

W = np.linspace(-1.0, 1.0, 24)  # a fixed weight: every element of a result is seen


def weighted(y):
    y = np.real(y)
    return np.sum(y * W[: np.size(y)].reshape(np.shape(y)))


def positive(d):
    return d.draw(arrays((), 0.3, 2.0))


def row_stack_quietly(arrays):
    """np.row_stack without its deprecation warning, once per drawn example (its own
    test, test_row_stack_is_vstack, checks that it warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return np.row_stack(arrays)  # noqa: NPY201


def _diagonal_filled(a, v):
    a = a * 1.0  # NumPy writes into its argument: a copy of it on ndarrays and on nodes
    np.fill_diagonal(a, v)
    return weighted(a)


ENTERED += [
    Case(np.fill_diagonal, lambda d: (array(d, st.just((3, 4))), array(d, st.just((2,)))),
         fn=_diagonal_filled, argnums=(0, 1)),
    Case(np.logspace, lambda d: (positive(d), positive(d)), fn=lambda a, b: weighted(
        np.logspace(a, b, 4)), argnums=(0, 1)),
    Case(np.polyadd, lambda d: (array(d, st.just((3,))), array(d, st.just((2,)))),
         fn=lambda a, b: weighted(np.polyadd(a, b)), argnums=(0, 1)),
    Case(np.polysub, lambda d: (array(d, st.just((2,))), array(d, st.just((3,)))),
         fn=lambda a, b: weighted(np.polysub(a, b)), argnums=(0, 1)),
    Case(np.row_stack, lambda d: (array(d, st.just((3,))),),  # noqa: NPY201
         fn=lambda a: weighted(row_stack_quietly([a, a * a]))),
    Case(np.union1d, lambda d: (distinct(d, st.just((4,))),),
         fn=lambda a: weighted(np.union1d(a, np.array([-9.0])))),
    Case(np.fromfunction, lambda d: (positive(d),),
         fn=lambda s: weighted(np.fromfunction(lambda i, j: i * s + j * s**2, (2, 3)))),
    Case(np.linalg.diagonal, lambda d: (array(d, st.just((2, 3, 3))),),
         fn=lambda a: weighted(np.linalg.diagonal(a, offset=1))),
    Case(np.linalg.matmul, lambda d: (array(d, st.just((2, 3))), array(d, st.just((3, 2)))),
         fn=lambda a, b: weighted(np.linalg.matmul(a, b)), argnums=(0, 1)),
    Case(np.linalg.matrix_transpose, lambda d: (array(d, st.just((2, 3))),),
         fn=lambda a: weighted(np.linalg.matrix_transpose(a))),
    Case(np.linalg.tensordot, lambda d: (array(d, st.just((2, 3))), array(d, st.just((3, 2)))),
         fn=lambda a, b: weighted(np.linalg.tensordot(a, b, axes=1)), argnums=(0, 1)),
    Case(np.linalg.trace, lambda d: (array(d, st.just((2, 3, 3))),),
         fn=lambda a: weighted(np.linalg.trace(a))),
    Case(np.linalg.vecdot, lambda d: (array(d, st.just((2, 3))), array(d, st.just((3,)))),
         fn=lambda a, b: weighted(np.linalg.vecdot(a, b)), argnums=(0, 1)),
    Case(np.fft.fftfreq, lambda d: (positive(d),), fn=lambda s: weighted(np.fft.fftfreq(5, s))),
    Case(np.fft.rfftfreq, lambda d: (positive(d),), fn=lambda s: weighted(np.fft.rfftfreq(5, s))),
]  # fmt: skip

test_entered_functions = implementation_test(ENTERED, implemented=False)


def test_every_shape_implementation_has_a_case():
    import sensitivities.shape as family
    from sensitivities.registry import _implementations

    mine = {f for f, impl in _implementations.items() if impl.__module__ == family.__name__}
    assert mine <= {c.registered for c in IMPLEMENTED + COPYTO_IMPLEMENTED}


# -- by hand --------------------------------------------------------------------------------


def test_repeated_indices_accumulate():
    (g,) = grad(lambda x: np.sum(x[np.array([0, 0, 2, 0])] * np.array([1.0, 2.0, 3.0, 4.0])))(
        np.zeros(3)
    )
    np.testing.assert_array_equal(g, [7.0, 0.0, 3.0])
    (g,) = grad(lambda x: np.sum(np.take(x, [1, 1, 1])))(np.zeros(3))
    np.testing.assert_array_equal(g, [0.0, 3.0, 0.0])


def test_indexing_with_a_mask_and_a_slice():
    x = np.arange(6.0).reshape(2, 3)
    (g,) = grad(lambda x: np.sum(x[x > 2] ** 2) + np.sum(x[:, 1:]))(x)
    np.testing.assert_array_equal(g, [[0.0, 1.0, 1.0], [6.0, 9.0, 11.0]])


def test_advanced_indices_separated_by_a_slice():
    x = np.arange(24.0).reshape(2, 3, 4)
    (g,) = grad(lambda x: np.sum(x[[0, 1, 1], :, [3, 0, 0]] * 2.0))(x)
    expected = np.zeros_like(x)
    expected[0, :, 3] = 2.0
    expected[1, :, 0] = 4.0
    np.testing.assert_array_equal(g, expected)


def test_sort_sends_each_adjoint_to_its_element():
    (g,) = grad(lambda x: np.sort(x)[0] * 1.0 + np.sort(x)[2] * 3.0)(np.array([5.0, 1.0, 3.0]))
    np.testing.assert_array_equal(g, [3.0, 1.0, 0.0])


def test_pad_modes_gather_copies():
    (g,) = grad(lambda x: np.sum(np.pad(x, 2, mode="wrap")))(np.zeros(3))
    np.testing.assert_array_equal(g, [2.0, 3.0, 2.0])
    (g,) = grad(lambda x: np.sum(np.pad(x, (1, 2), mode="edge")))(np.zeros(3))
    np.testing.assert_array_equal(g, [2.0, 1.0, 3.0])


def test_pad_modes_without_a_rule_say_so_in_the_forward_pass():
    t = Tape()
    with pytest.raises(NotImplementedError, match="linear_ramp"):
        np.pad(Leaf(t, np.ones(3)), 1, mode="reflect", reflect_type="odd")
    with pytest.raises(NotImplementedError, match="function"):
        np.pad(Leaf(t, np.ones(3)), 1, mode=lambda vector, width, axis, options: None)


def test_row_stack_is_vstack():
    # a deprecated alias that warns, then calls np.vstack
    with pytest.warns(DeprecationWarning):
        (g,) = grad(lambda x: np.sum(np.row_stack([x, 2 * x])))(np.ones(3))  # noqa: NPY201
    np.testing.assert_array_equal(g, [3.0, 3.0, 3.0])


def test_reshape_in_memory_order_follows_the_layout():
    x = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    w = np.arange(6.0) + 1
    for order in ("A", "K"):
        (g,) = grad(lambda x, order=order: np.sum(np.ravel(x, order) * w))(x)
        np.testing.assert_array_equal(g, np.reshape(w, (2, 3), order="F"))


def test_choose_from_an_array_of_choices():
    choices = np.arange(6.0).reshape(3, 2)
    (g,) = grad(lambda c: np.sum(np.choose([0, 2], c) * np.array([1.0, 2.0])))(choices)
    np.testing.assert_array_equal(g, [[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    (g,) = grad(lambda c: np.sum(np.choose([4, -1], c, mode="wrap")))(choices)
    np.testing.assert_array_equal(g, [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])


def test_split_pieces_are_separate_records():
    t = Tape()
    x = Leaf(t, np.arange(6.0))
    pieces = np.split(x, 3)
    assert len(pieces) == 3 and all(p.f is operator.getitem for p in pieces)


# -- dtype and second order -----------------------------------------------------------------

FLOAT32 = [
    lambda x: np.reshape(x, (-1,), order="F"),
    np.ravel,
    np.copy,
    np.transpose,
    np.sort,
    lambda x: np.concatenate([x, x], axis=None),
    lambda x: np.stack([x, x]),
    lambda x: np.tile(x, 2),
    lambda x: np.repeat(x, [1, 0, 2, 1], axis=1),
    lambda x: np.repeat(x, 2),
    lambda x: np.roll(x, 1),
    np.rot90,
    np.diagonal,
    np.trace,
    lambda x: np.pad(x, 1, mode="reflect"),
    lambda x: np.pad(x, 1, mode="linear_ramp", end_values=0.5),
    lambda x: np.pad(x, (1, 2), mode="mean"),
    lambda x: np.take(x, [0, 0, 1]),
    lambda x: x[[0, 0], ::-1],
    lambda x: x[x > 0.7],
    lambda x: np.diff(x, 2),
    lambda x: np.insert(x, 1, 2.0),
    lambda x: np.partition(x, 1),
]


@pytest.mark.parametrize("f", FLOAT32, ids=range(len(FLOAT32)))
def test_rules_keep_float32(f):
    t = Tape()
    x = Leaf(t, np.random.default_rng(1).uniform(0.5, 1.5, (3, 4)).astype(np.float32))
    y = np.sum(f(x) ** 2)
    rt = propagate(t, reverse_tape(y, np.float32(1.0)))
    assert rt[x].dtype == np.float32


SECOND_ORDER = [
    lambda x: np.sum(np.sort(x, axis=0)[0] ** 3),
    lambda x: np.sum(x[[0, 0, 2], 1:] ** 3),
    lambda x: np.sum(x[x > 1.0] ** 3),
    lambda x: np.sum(np.take(x, [3, 3, 0], axis=1) ** 3),
    lambda x: np.sum(np.repeat(x, [2, 0, 1], axis=0) ** 3),
    lambda x: np.sum(np.pad(x, 2, mode="reflect") ** 3),
    lambda x: np.sum(np.pad(x, 2, mode="median") ** 3),
    lambda x: np.sum(np.diagonal(x, 1) ** 3),
    lambda x: np.sum(np.concatenate([x, x**2], axis=1) ** 2),
    lambda x: np.sum(np.tile(x, (2, 1)) ** 3),
    lambda x: np.sum(np.diff(x, 2) ** 3),
    lambda x: np.sum(np.partition(x, 1, axis=0) ** 3 * np.arange(4.0)),
]


@pytest.mark.parametrize("f", SECOND_ORDER, ids=range(len(SECOND_ORDER)))
def test_second_order(f):
    x = np.random.default_rng(4).uniform(0.5, 1.5, (3, 4))
    w = np.random.default_rng(2).standard_normal(x.shape)

    def first(x):
        return np.sum(grad(f)(x)[0] * w)

    (got,) = grad(first)(x)
    np.testing.assert_allclose(got, numeric_grad(first, (x,), 0), rtol=1e-5, atol=1e-6)


NONDIFFERENTIABLE = [
    np.shape,
    np.ndim,
    np.size,
    np.argmax,
    np.argsort,
    np.nonzero,
    np.flatnonzero,
    np.count_nonzero,
    np.argwhere,
    np.nanargmax,
    np.nanargmin,
    np.tril_indices_from,
    np.triu_indices_from,
    np.diag_indices_from,
    lambda x: np.argpartition(x, 1, axis=None),
    lambda x: np.isin(x, x[0]),
    lambda x: np.digitize(x, [0.0, 1.0]),
    lambda x: np.array_equiv(x, x),
    lambda x: np.lexsort(x),
]


@pytest.mark.parametrize("f", NONDIFFERENTIABLE, ids=range(len(NONDIFFERENTIABLE)))
def test_nondifferentiable_functions_give_plain_results(f):
    x = np.random.default_rng(5).uniform(-1, 2, (3, 3))
    t = Tape()
    got = f(Leaf(t, x))
    expected = f(x)
    for g, e in zip(
        *(np.atleast_1d(v) if not isinstance(v, tuple) else v for v in (got, expected))
    ):
        assert not hasattr(g, "tape")
        np.testing.assert_array_equal(g, e)
    (g,) = grad(lambda x: np.sum(x) * 0.0 + np.sum(f(x)))(x)
    np.testing.assert_array_equal(g, np.zeros_like(x))


def test_unique_values_carry_the_gradient_of_their_first_occurrence():
    from tape import Leaf, Tape, grad
    from tests.fd import check_grads

    check_grads(lambda v: np.unique(v) ** 2, np.array([3.0, 1.0, 2.5, 2.0]))
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0])
    (g,) = grad(lambda v: np.sum(np.unique(v) * np.array([1.0, 2.0, 3.0])))(x)
    np.testing.assert_array_equal(g, [3.0, 1.0, 0.0, 2.0, 0.0])
    recorded = np.unique_all(Leaf(Tape(), x))
    for got, expected in zip(recorded, np.unique_all(x)):
        np.testing.assert_array_equal(getattr(got, "value", got), expected)


def test_bincount_is_differentiable_in_its_weights():
    from tests.fd import check_grads

    w = np.array([0.5, 1.0, 2.0])
    check_grads(lambda w: np.bincount(np.array([0, 2, 2]), w, 4), w)
    check_grads(lambda w: np.bincount(np.array([1, 1, 0]), weights=w), w)


def test_histogram_weights_are_refused_rather_than_given_zero_gradient():
    import pytest

    from tape import MissingRuleError, grad

    with pytest.raises(MissingRuleError, match="weights"):
        grad(lambda w: np.sum(np.histogram(np.arange(3.0), weights=w)[0]))(np.ones(3))
    (g,) = grad(lambda x: np.sum(np.histogram(x, bins=2)[0] * 1.0) + np.sum(x))(np.arange(3.0))
    np.testing.assert_array_equal(g, np.ones(3))


# -- linspace and full_like: values made from a few -------------------------------------

LINSPACE = [
    ((0.3, 2.7), {}),
    ((0.3, 2.7), {"num": 7, "endpoint": False}),
    ((0.3, 2.7), {"num": 1}),
    ((0.3, 2.7), {"num": 0}),
    ((np.array([0.0, 1.0]), np.array([2.0, 5.0])), {"num": 4, "axis": 1}),
    ((np.array([0.0, 1.0]), 3.0), {"num": 5, "axis": -1}),
    ((1.0, 11.0), {"num": 5, "dtype": int}),
    ((np.float32(0.5), np.float32(2.0)), {"num": 4}),
    ((2.0, 2.0), {"num": 3}),
]


@pytest.mark.parametrize("ends, kwargs", LINSPACE)
def test_linspace_of_nodes_has_numpys_values_exactly(ends, kwargs):
    t = Tape()
    got = np.linspace(*(Leaf(t, e) for e in ends), **kwargs)
    got = getattr(got, "value", got)  # an integer dtype has no gradient: a plain array
    want = np.linspace(*ends, **kwargs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("endpoint", [True, False])
@pytest.mark.parametrize("axis", [0, 1])
def test_linspace_gradient_of_both_ends(endpoint, axis):
    start, stop = np.array([0.0, 1.0, 2.0]), np.array([1.5, -1.0, 3.0])
    w = np.random.default_rng(5).standard_normal((5, 3) if axis == 0 else (3, 5))

    def f(start, stop):
        return np.sum(np.sin(np.linspace(start, stop, 5, endpoint=endpoint, axis=axis)) * w)

    for i, g in enumerate(grad(f)(start, stop)):
        np.testing.assert_allclose(g, numeric_grad(f, (start, stop), i), rtol=1e-6, atol=1e-9)
    y, step = np.linspace(Leaf(Tape(), 0.0), 2.0, 5, retstep=True)
    assert step.value == np.linspace(0.0, 2.0, 5, retstep=True)[1]


def test_full_like_differentiates_the_fill_value_only():
    x = np.array([0.5, -1.0, 2.0])

    def f(x, v):
        return np.sum(np.full_like(x, v, shape=(2, 3)) * x**2)

    gx, gv = grad(f)(x, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(gx, numeric_grad(f, (x, np.array([1.0, 2.0, 3.0])), 0), rtol=1e-6)
    np.testing.assert_allclose(gv, 2 * x**2, rtol=1e-12)  # d/dv of sum over 2 rows of v x^2
    filled = np.full_like(Leaf(Tape(), x), 3.0)  # x lends its shape, to a buffer of its own
    assert filled.value.tolist() == [3.0, 3.0, 3.0]
    assert grad(lambda x: np.sum(np.full_like(x, 3.0) * 0 + np.full_like(x, 1, dtype=int)))(
        x
    )[0].tolist() == [0.0, 0.0, 0.0]


# -- writes and views that library code makes: fill_diagonal, .flat, copyto, as_strided ---


def _same_as_numpy(f, x, *rest):
    """f's value and gradient on a node: NumPy's value on an ndarray, and the gradient
    by central differences of that program."""
    value, grads = __import__("tape").value_and_grad(f, argnums=tuple(range(1 + len(rest))))(
        x.copy(), *rest
    )
    assert np.isclose(value, f(x.copy(), *rest))
    for i, g in enumerate(grads):
        args = (x, *rest)
        expected = numeric_grad(lambda *a: f(a[0].copy(), *a[1:]), args, i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((5, 2), True), ((2, 5), False),
                                         ((2, 2, 2), False)])  # fmt: skip
def test_fill_diagonal_of_a_node(shape, wrap):
    def f(x, v):
        np.fill_diagonal(x, v, wrap=wrap)
        return np.sum(x**2 * np.arange(x.size).reshape(x.shape))

    x = np.random.default_rng(0).normal(size=shape)
    _same_as_numpy(f, x, 1.5)
    _same_as_numpy(f, x, np.array([2.0, -1.0]))  # repeated along the diagonal, as NumPy


def test_fill_diagonal_of_a_transposed_node_writes_the_base():
    def f(x):
        y = x.T  # a view: the write reaches x
        np.fill_diagonal(y, 0.0)
        return np.sum(x * np.arange(6.0).reshape(2, 3))

    _same_as_numpy(f, np.random.default_rng(1).normal(size=(2, 3)))


@pytest.mark.parametrize("index", [3, slice(1, 5), [0, 4, 5], np.array([True, False] * 3),
                                   slice(None, None, -2)])  # fmt: skip
def test_flat_reads_and_writes(index):
    def read(x):
        return np.sum(x.flat[index] ** 2)

    def write(x, v):
        x.flat[index] = v
        return np.sum(x**2 * np.arange(6.0).reshape(3, 2))

    x = np.random.default_rng(2).normal(size=(3, 2))
    _same_as_numpy(read, x)
    _same_as_numpy(write, x, 0.5)
    _same_as_numpy(lambda x: write(x.T.copy().T, 0.5), x)  # an F-ordered node: C order still
    if not isinstance(index, int):
        _same_as_numpy(write, x, np.array([1.5, -2.0]))  # repeated as NumPy repeats


def test_copyto_into_a_node():
    def f(x, v):
        np.copyto(x, v * x[::-1], where=x > 0)
        return np.sum(x**2)

    def whole(x, v):
        np.copyto(x[1:], v)
        return np.sum(x * np.arange(4.0))

    x = np.random.default_rng(3).normal(size=4)
    _same_as_numpy(f, x, 2.0)
    _same_as_numpy(whole, x, 3.0)


def test_copyto_errors():
    with pytest.raises(TypeError, match="copyto.*ndarray dst.*zeros_like"):
        grad(lambda x: np.copyto(np.zeros(2), x))(np.ones(2))
    with pytest.raises(TypeError, match="[Cc]annot cast"):
        grad(lambda x: np.copyto(x, 1j * x))(np.ones(2))


def test_full_and_full_like_with_a_node_fill():
    _same_as_numpy(lambda x, v: np.sum(np.full((2, 4), v) * x), np.ones(4), 1.5)
    _same_as_numpy(lambda x, v: np.sum(np.full_like(np.ones((2, 4)), v) * x), np.ones(4), 1.5)
    _same_as_numpy(lambda x: np.sum(np.full((3, 2), x[:2]) ** 2), np.arange(1.0, 4.0))


@pytest.mark.parametrize("start", [slice(None), slice(1, None), slice(None, None, 2)])
def test_as_strided_windows(start):
    def f(x):
        y = x[start]
        s = y.strides[0]
        windows = as_strided(y, shape=(y.shape[0] - 2, 3), strides=(s, s))
        return np.sum(windows**2 * np.arange(windows.size).reshape(windows.shape))

    _same_as_numpy(f, np.random.default_rng(4).normal(size=9))


def test_as_strided_of_a_node_is_a_read_only_view():
    def writes(x):
        w = as_strided(x, shape=(2,), strides=(8,))
        w[0] = 1.0

    def follows(x):
        w = as_strided(x, shape=(2, 2), strides=(8, 8))
        x[1] = 10.0  # the view sees a write to its base, as in NumPy
        return np.sum(w)

    with pytest.raises(ValueError, match="read-only"):
        grad(writes)(np.ones(3))
    value, (g,) = __import__("tape").value_and_grad(follows)(np.ones(3))
    assert value == follows(np.ones(3)) and g.tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="outside the node's elements"):
        grad(lambda x: np.sum(as_strided(x, shape=(5,), strides=(8,))))(np.ones(3))


STRIDED_CASES = [
    Case(strided_view, lambda data: (data.draw(arrays((6,), -2.0, 2.0)),),
         fn=lambda x: strided_view(x, (4, 3), (8, 8))),
    Case(strided_view, lambda data: (data.draw(arrays((3, 4), -2.0, 2.0)),),
         fn=lambda x: strided_view(x, (2, 2, 2), (32, 8, 16)), name="strided_view 2-d"),
]  # fmt: skip
test_strided_view = rule_test(STRIDED_CASES)


def _copied_into(x, v):
    y = x * 1.0
    np.copyto(y, v, where=np.arange(np.size(y)).reshape(np.shape(y)) % 2 == 0)
    return y


COPYTO_IMPLEMENTED = [
    Case(np.copyto, lambda data: (data.draw(arrays((2, 3), -2.0, 2.0)),
                                  data.draw(arrays((3,), -2.0, 2.0))),
         fn=_copied_into, argnums=(0, 1)),
]  # fmt: skip
test_copyto_implementation = implementation_test(COPYTO_IMPLEMENTED)


# -- casts to kinds that carry no gradient -------------------------------------------------

DISCRETE_DTYPES = [int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                   np.uint64, np.intp, "i8", "int32", "u1", bool, np.bool_, "?"]  # fmt: skip


@pytest.mark.parametrize("dtype", DISCRETE_DTYPES, ids=str)
@pytest.mark.parametrize("spelling", ["method", "function"])
def test_a_cast_to_integers_or_booleans_has_zero_derivative(dtype, spelling):
    # NumPy's program: (3x).astype(int) is piecewise constant, so d/dx of it * x is the cast
    x = np.array([0.2, 0.5, 0.9, 1.7])
    cast_ = (lambda v: v.astype(dtype)) if spelling == "method" else (lambda v: np.astype(v, dtype))
    (g,) = grad(lambda x: np.sum(cast_(3 * x) * x))(x)
    np.testing.assert_array_equal(g, (3 * x).astype(dtype).astype(float))
    np.testing.assert_allclose(g, numeric_grad(lambda x: np.sum(cast_(3 * x) * x), (x,), 0))


def test_an_integer_cast_of_a_node_is_a_plain_array_that_indexes():
    x = np.array([0.2, 0.5, 0.9])
    t = Tape()
    index = (3 * Leaf(t, x)).astype(int)
    assert type(index) is np.ndarray and index.dtype == np.dtype(int)
    np.testing.assert_array_equal(index, (3 * x).astype(int))
    table = np.array([10.0, 20.0, 30.0, 40.0])
    (g,) = grad(lambda x: np.sum(table[(3 * x).astype(int)] * x**2))(x)
    np.testing.assert_allclose(g, 2 * x * table[(3 * x).astype(int)])
    (g,) = grad(lambda x: (3 * x).astype(np.int32) * x)(0.9)  # a Python float
    assert g == 2.0


def test_float_and_complex_casts_stay_differentiable():
    x = np.array([0.2, 0.5, 0.9])
    for dtype in (np.float32, np.float16, "f8", float, np.longdouble):
        (g,) = grad(lambda x, dtype=dtype: np.sum(x.astype(dtype) ** 2))(x)
        np.testing.assert_allclose(g, 2 * x, rtol=1e-3)
    (g,) = grad(lambda x: np.sum(np.abs((3 * x).astype(complex) * (1 + 1j))))(x)
    np.testing.assert_allclose(g, 3 * np.sqrt(2) * np.ones(3))


def test_casting_keywords_are_numpys_for_every_kind():
    x = np.array([0.2, 0.5, 0.9])
    (g,) = grad(lambda x: np.sum((3 * x).astype(int, copy=False) * x))(x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="safe"):
        grad(lambda x: np.sum((3 * x).astype(int, casting="safe") * x))(x)


def test_integer_casts_in_forward_mode_second_order_and_vmap():
    from tape import hessian, jvp, vmap

    x = np.array([0.2, 0.5, 0.9])
    f = lambda x: (3 * x).astype(int) * x**2  # noqa: E731
    _, tangent = jvp(f, (x,), (np.ones(3),))
    np.testing.assert_array_equal(tangent, 2 * x * [0, 1, 2])
    np.testing.assert_allclose(hessian(lambda x: np.sum(f(x)))(x), np.diag([0.0, 2.0, 4.0]))
    xs = np.stack([x, 2 * x])
    loss = lambda x: np.sum((3 * x).astype(int) * x)  # noqa: E731
    np.testing.assert_array_equal(vmap(grad(loss))(xs)[0], (3 * xs).astype(int))
    np.testing.assert_array_equal(vmap(f)(xs), np.stack([f(v) for v in xs]))
