"""``at(x)[i].set/add/multiply`` (sensitivities/update.py): NumPy's in-place semantics,
functionally, with gradients checked against central differences; and the rule cases of
the functional index updates behind it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensitivities.update import add_at, multiply_at, set_at
from tape import Leaf, Tape, at, grad, value_and_grad
from tests.fd import check_grads
from tests.sensitivities.cases import Case, rule_test
from tests.strategies import arrays

RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 3))

# (index, shape of a value that fits it): ints, slices, masks, None/Ellipsis, integer arrays
INDICES = [
    (1, (3,)),
    ((2, 1), ()),
    (slice(1, 3), (2, 3)),
    ((slice(None), 0), (4,)),
    (X > 0, (int(np.sum(X > 0)),)),
    ((Ellipsis, 2), (4,)),
    (np.array([3, 0]), (2, 3)),
    ((np.array([0, 2, 3]), np.array([1, 1, 0])), (3,)),
]
REPEATED = [
    (np.array([1, 1, 2]), (3, 3)),
    ((np.array([0, 0, 0, 3]), np.array([2, 2, 2, 1])), (4,)),
    ((np.array([[1, 2], [1, 1]]), slice(0, 2)), (2, 2, 2)),
]


def _loop(x, index, v, op):
    """The reference: NumPy's own loop over occurrences, on a copy."""
    out = x.copy()
    if op == "add":
        np.add.at(out, index, v)
    elif op == "multiply":
        np.multiply.at(out, index, v)
    else:
        out[index] = v
    return out


@pytest.mark.parametrize("index, vshape", INDICES + REPEATED)
@pytest.mark.parametrize("op", ["set", "add", "multiply"])
def test_values_match_numpy(index, vshape, op):
    v = RNG.standard_normal(vshape)
    x = X.copy()
    got = getattr(at(x)[index], op)(v)
    np.testing.assert_allclose(got, _loop(X, index, v, op))
    np.testing.assert_array_equal(x, X)  # the input is never written


@pytest.mark.parametrize("index, vshape", INDICES + REPEATED)
@pytest.mark.parametrize("op", ["set", "add", "multiply"])
def test_gradients_wrt_x_and_v_match_finite_differences(index, vshape, op):
    v = RNG.standard_normal(vshape) + 0.5
    check_grads(lambda x, v: np.sin(getattr(at(x)[index], op)(v)), X, v, argnums=(0, 1))


@pytest.mark.parametrize("op", ["set", "add", "multiply"])
def test_a_broadcast_scalar_value_gets_the_summed_gradient(op):
    check_grads(lambda x, v: np.tanh(getattr(at(x)[np.array([0, 2, 0])], op)(v)), X, 0.7)
    check_grads(lambda x, v: np.tanh(getattr(at(x)[1:, 1], op)(v)), X, np.array(0.7))


def test_repeated_set_keeps_the_last_and_only_it_gets_a_gradient():
    x = np.zeros(3)
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(at(x)[[1, 1, 1]].set(v), [0.0, 3.0, 0.0])
    gx, gv = grad(lambda x, v: np.sum(at(x)[[1, 1, 1]].set(v) * np.array([1.0, 5.0, 1.0])))(x, v)
    np.testing.assert_array_equal(gx, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(gv, [0.0, 0.0, 5.0])


def test_repeated_add_accumulates_and_each_occurrence_gets_its_slot_gradient():
    x = np.zeros(3)
    np.testing.assert_array_equal(at(x)[[0, 0, 2]].add(np.array([1.0, 2.0, 3.0])), [3.0, 0.0, 3.0])
    w = np.array([10.0, 20.0, 30.0])
    gx, gv = grad(lambda x, v: np.sum(at(x)[[0, 0, 2]].add(v) * w))(x, np.ones(3))
    np.testing.assert_array_equal(gx, w)
    np.testing.assert_array_equal(gv, [10.0, 10.0, 30.0])


def test_repeated_multiply_with_a_zero_factor_has_the_exact_gradient():
    # y0 = x0 * v0 * v1 with v1 = 0: d/dv0 = 0, d/dv1 = x0 * v0, with no 0/0
    x = np.array([2.0, 1.0])
    v = np.array([3.0, 0.0])
    gx, gv = grad(lambda x, v: np.sum(at(x)[[0, 0]].multiply(v)))(x, v)
    np.testing.assert_array_equal(gx, [0.0, 1.0])
    np.testing.assert_array_equal(gv, [0.0, 6.0])


def test_second_order_through_set_and_multiply():
    w = np.array([0.3, -1.2, 0.8])

    def first(x):
        return grad(lambda x: np.sum(np.sin(at(x)[[0, 2, 0]].multiply(x[:3])) * w))(x)[0]

    x = np.array([0.4, 0.9, -0.5])
    check_grads(lambda x: first(x), x, rtol=1e-4)

    def first_set(x):
        return grad(lambda x: np.sum(np.exp(at(x)[1].set(x[0] * x[2]))))(x)[0]

    check_grads(lambda x: first_set(x), x, rtol=1e-4)


def test_float32_keeps_its_dtype():
    x = np.ones(3, dtype=np.float32)
    assert at(x)[0].set(2.0).dtype == np.float32
    (g,) = grad(lambda x: np.sum(at(x)[0].multiply(2.0)))(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [2.0, 1.0, 1.0])


def test_nodes_of_a_manual_tape_are_recorded_as_one_branch_each():
    t = Tape()
    x = Leaf(t, np.zeros(3))
    at(x)[0].set(1.0)
    assert len(t) == 2 and "set_at" in repr(t[1])


def test_a_node_index_is_refused():
    t = Tape()
    x = Leaf(t, np.zeros(3))
    with pytest.raises(TypeError, match="index cannot be a node"):
        at(x)[Leaf(t, 1.0)]


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_integer_indices_match_the_numpy_loop_and_finite_differences(data):
    n = data.draw(st.integers(1, 5))
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=6)))
    op = data.draw(st.sampled_from(["set", "add", "multiply"]))
    x = RNG.standard_normal(n)
    v = RNG.standard_normal(idx.shape)
    np.testing.assert_allclose(getattr(at(x)[idx], op)(v), _loop(x, idx, v, op))
    check_grads(lambda x, v: np.cos(getattr(at(x)[idx], op)(v)), x, v, argnums=(0, 1))


# -- rule cases ------------------------------------------------------------------------------


def _draw(unique):
    def draw(data):
        n = data.draw(st.integers(1, 5))
        x = data.draw(arrays((n, 2)))
        if unique:
            index = np.array(
                data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
            )
        else:
            index = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))
        v = data.draw(arrays((len(index), 2)))
        return x, index, v

    return draw


CASES = [
    Case(set_at, _draw(True), argnums=(0, 2)),
    Case(add_at, _draw(False), argnums=(0, 2)),
    Case(multiply_at, _draw(True), argnums=(0, 2)),
]

test_update_rules = rule_test(CASES, max_examples=15)


def _differences(f, x, h=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        out[i] = (f(x + step) - f(x - step)) / (2 * h)
    return out


def _written_as_numpy(x, index, v):
    y = x.copy()
    y[index] = v
    return y


@pytest.mark.parametrize(
    "index, v",
    [
        (0, [7.0, 8.0, 9.0]),  # a list of numbers, as x[0] = [7., 8., 9.]
        ((slice(None), 1), (4.0, 5.0)),  # a tuple
        ([], 5.0),  # an empty list index selects nothing, as in NumPy
        (([], []), 5.0),
        ((0, []), 5.0),
        ((slice(0, 2), slice(0, 2)), [[1.0, 2.0], [3.0, 4.0]]),  # nested lists
        (([0, 1], [2, 2]), [1, 2]),  # integers into floats: cast, as NumPy does
    ],
)
def test_a_list_or_tuple_value_and_an_empty_list_index_as_numpy(index, v):
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(at(x)[index].set(v), _written_as_numpy(x, index, v))


def test_a_list_holding_nodes_is_written_and_differentiated():
    def f(x):
        y = x * 1.0
        y[0] = [x[1, 2] ** 2, 2.0, x[1, 0]]  # nodes and numbers in one list
        y[[0, 1], [2, 2]] = (x[1, 0], x[1, 1])
        y[:, :2] = [[x[0, 0], 1.0], (2.0, x[1, 2] * x[0, 1])]  # nested, a tuple inside
        return np.sum(at(y)[1].add([1.0, x[0, 1], 2.0]) ** 2 * x)

    x = np.arange(6.0).reshape(2, 3) + 1
    value, (gradient,) = value_and_grad(f)(x)
    assert value == f(x)  # the same program on ndarrays
    np.testing.assert_allclose(gradient, _differences(f, x), rtol=1e-6, atol=1e-6)
