"""Shape and indexing rules against central differences."""

import operator

import numpy as np
from hypothesis import strategies as st

from sensitivities.shape import astype, scatter_add
from tests.sensitivities.cases import Case, rule_test
from tests.strategies import SHAPES, arrays

NONEMPTY = SHAPES.filter(len)


def array(data, shapes=SHAPES):
    return data.draw(shapes.flatmap(arrays))


def reshape_draw(data):
    x = array(data)
    return x, data.draw(st.sampled_from([(x.size,), (1, x.size), (x.size, 1), (-1,)]))


def transpose_draw(data):
    x = array(data)
    return x, data.draw(st.permutations(range(x.ndim)).map(tuple) | st.none())


def two_axes(data):
    x = array(data, NONEMPTY)
    axes = st.integers(-x.ndim, x.ndim - 1)
    return x, data.draw(axes), data.draw(axes)


def expand_draw(data):
    x = array(data)
    return x, data.draw(st.integers(-x.ndim - 1, x.ndim))


def broadcast_draw(data):
    x = array(data)
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    target = tuple(lead) + tuple(n if n != 1 else data.draw(st.integers(1, 3)) for n in x.shape)
    return x, target


def flip_draw(data):
    x = array(data, NONEMPTY)
    return x, data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))


def squeeze_draw(data):
    x = array(data).reshape(data.draw(SHAPES).__len__() * (1,) + data.draw(SHAPES))
    return (x.reshape(x.shape + (1,)),)


def matrix_draw(data):
    x = data.draw(arrays(data.draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))))
    return x, data.draw(st.integers(-2, 2))


def index_draw(data):
    """An array and an index: integer, slice, integer array with repeats, or boolean mask."""
    x = array(data, NONEMPTY)
    n = x.shape[0]
    index = data.draw(
        st.one_of(
            st.integers(-n, n - 1),
            st.builds(slice, st.none() | st.integers(-n, n), st.none() | st.integers(-n, n),
                      st.none() | st.sampled_from([1, 2, -1])),
            st.lists(st.integers(-n, n - 1), min_size=1, max_size=6).map(np.array),
            st.lists(st.booleans(), min_size=n, max_size=n).map(lambda b: np.array(b, dtype=bool)),
            st.just((Ellipsis, 0)),
        )
    )
    return x, index


def scatter_draw(data):
    x, index = index_draw(data)
    values = data.draw(arrays(np.shape(x[index])))
    return x, index, values


CASES = [
    Case(np.reshape, reshape_draw),
    Case(np.ravel, lambda d: (array(d),)),
    Case(np.squeeze, lambda d: (array(d).reshape((1,) + array(d).shape[:0] + (-1,)),)),
    Case(np.expand_dims, expand_draw),
    Case(np.broadcast_to, broadcast_draw),
    Case(np.transpose, transpose_draw),
    Case(np.swapaxes, two_axes),
    Case(np.moveaxis, two_axes),
    Case(np.flip, flip_draw),
    Case(np.triu, matrix_draw),
    Case(np.tril, matrix_draw),
    Case(astype, lambda d: (array(d), np.float64)),
    Case(operator.getitem, index_draw),
    Case(scatter_add, scatter_draw, argnums=(2,)),
]

test_shape_rules = rule_test(CASES)


def test_repeated_indices_accumulate():
    from tape import grad

    (g,) = grad(lambda x: np.sum(x[np.array([0, 0, 2, 0])] * np.array([1.0, 2.0, 3.0, 4.0])))(np.zeros(3))
    np.testing.assert_array_equal(g, [7.0, 0.0, 3.0])


def test_indexing_with_a_mask_and_a_slice():
    from tape import grad

    x = np.arange(6.0).reshape(2, 3)
    (g,) = grad(lambda x: np.sum(x[x > 2] ** 2) + np.sum(x[:, 1:]))(x)
    np.testing.assert_array_equal(g, [[0.0, 1.0, 1.0], [6.0, 9.0, 11.0]])
