"""A node behaves like its value: operators both ways, attributes, methods, indexing."""

import math
import operator

import numpy as np
import pytest

from tape import Leaf, Tape, grad
from tests.fd import check_grads

rng = np.random.default_rng(0)
A = rng.uniform(0.5, 1.5, (3, 4))
B = rng.uniform(0.5, 1.5, (4,))


@pytest.mark.parametrize(
    "op", [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.mod]
)
def test_binary_operators_both_ways(op):
    check_grads(lambda a, b: op(a, b), A, B)  # node op node
    check_grads(lambda a: op(a, B), A)  # node op ndarray
    check_grads(lambda b: op(A, b), B)  # ndarray op node: NumPy defers to the node
    check_grads(lambda a: op(a, 1.3), A)  # node op float
    check_grads(lambda a: op(1.3, a), A)  # float op node


def test_matmul_both_ways_and_unary_operators():
    M = rng.standard_normal((4, 2))
    check_grads(lambda a, m: a @ m, A, M)
    check_grads(lambda m: A @ m, M)
    check_grads(lambda a: a @ M, A)
    check_grads(lambda a: -a + (+a) * abs(a - 1.0), A)


def test_floor_division_is_piecewise_constant():
    assert grad(lambda x: x // 0.3 + x)(1.0) == (1.0,)


def test_comparisons_are_plain_and_drive_control_flow():
    t = Tape()
    x = Leaf(t, np.array([1.0, -2.0]))
    for result in (x > 0, x >= 0, x < 0, x <= 0, x == 1.0, x != 1.0):
        assert type(result) is np.ndarray and result.dtype == bool
    assert len(t) == 1  # comparisons record nothing

    def relu_sum(v):
        return v if v > 0 else -0.5 * v

    assert grad(relu_sum)(2.0) == (1.0,)
    assert grad(relu_sum)(-2.0) == (-0.5,)


def test_attributes_and_len():
    t = Tape()
    x = Leaf(t, np.zeros((3, 4), dtype=np.float32))
    assert x.shape == (3, 4) and x.ndim == 2 and x.size == 12 and x.dtype == np.float32
    assert len(x) == 3
    assert x.T.shape == (4, 3) and t[-1].f is np.transpose
    s = Leaf(t, 2.5)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.dtype == np.float64
    with pytest.raises(TypeError):
        len(s)
    assert [r.shape for r in x] == [(4,)] * 3  # iteration yields recorded rows


METHODS = {
    "sum": (lambda x: x.sum(axis=0), np.sum),
    "mean": (lambda x: x.mean(1), np.mean),
    "max": (lambda x: x.max(), np.max),
    "min": (lambda x: x.min(axis=1), np.min),
    "prod": (lambda x: x.prod(), np.prod),
    "reshape": (lambda x: x.reshape(4, 3), np.reshape),
    "reshape-tuple": (lambda x: x.reshape((2, 6)), np.reshape),
    "transpose": (lambda x: x.transpose(1, 0), np.transpose),
    "dot": (lambda x: x.dot(B), np.dot),
    "ravel": (lambda x: x.ravel(), np.ravel),
    "squeeze": (lambda x: x.reshape(1, 3, 4).squeeze(), np.squeeze),
    "clip": (lambda x: x.clip(0.7, 1.2), np.clip),
    "cumsum": (lambda x: x.cumsum(axis=1), np.cumsum),
    "diagonal": (lambda x: x.diagonal(1), np.diagonal),
    "repeat": (lambda x: x.repeat(2, axis=0), np.repeat),
    "take": (lambda x: x.take([0, 2, 2], axis=1), np.take),
    "copy": (lambda x: x.copy(), np.copy),
    "mT": (lambda x: x.mT, np.matrix_transpose),
}


@pytest.mark.parametrize("name", METHODS)
def test_methods_are_recorded_as_the_numpy_function(name):
    method, f = METHODS[name]
    t = Tape()
    method(Leaf(t, A))
    assert t[-1].f is f
    check_grads(method, A)


def test_methods_entered_through_their_numpy_implementation():
    check_grads(lambda x: x.trace(1), A)
    check_grads(lambda x: x.compress([True, False, True], axis=0), A)


def test_methods_with_plain_results_match_numpy():
    x = Leaf(Tape(), A)
    assert x.all() == A.all() and x.any(axis=0).tolist() == A.any(axis=0).tolist()
    assert np.array_equal(x.argsort(axis=1), A.argsort(axis=1))
    assert all(np.array_equal(u, v) for u, v in zip(x.nonzero(), A.nonzero()))
    assert x[0].searchsorted(1.0) == A[0].searchsorted(1.0)
    assert np.array_equal(x.round(1), A.round(1))
    assert x.nbytes == A.nbytes and x.itemsize == A.itemsize
    s = Leaf(Tape(), 2.5)
    assert s.nbytes == s.itemsize == np.float64(2.5).nbytes


@pytest.mark.parametrize("name", ["sort", "partition", "fill", "put", "resize"])
def test_in_place_methods_say_what_to_use_instead(name):
    x = Leaf(Tape(), A)
    with pytest.raises(TypeError, match=rf"x\.{name}\(\) changes an array in place.*use "):
        getattr(x, name)(1)


def test_astype_keeps_gradients_in_the_input_dtype():
    x = np.array([1.0, 2.0], dtype=np.float32)
    (g,) = grad(lambda x: np.sum(x.astype(np.float64) ** 2))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * x)


def test_indexing_is_recorded_and_scatters_back():
    check_grads(lambda x: x[1], A)
    check_grads(lambda x: x[:, ::2], A)
    check_grads(lambda x: x[np.array([0, 0, 2])], A)
    check_grads(lambda x: x[x > 1.0], A)
    check_grads(lambda x: x[..., 1:3][0], A)


def test_setitem_writes_the_node_as_numpy_would():
    t = Tape()
    x = Leaf(t, np.zeros(3))
    y = x
    x[0] = 1.0
    assert y is x and x.value.tolist() == [1.0, 0.0, 0.0]
    assert t[0].value.tolist() == [0.0, 0.0, 0.0]  # the record of the value passed in


@pytest.mark.parametrize(
    "convert",
    [np.asarray, np.array, float, int, math.sin, math.exp, lambda n: np.array([n, n]),
     lambda n: n.item()],
    ids=["asarray", "array", "float", "int", "math.sin", "math.exp", "array-of-nodes", "item"],
)
def test_turning_a_node_into_a_constant_is_a_clear_type_error(convert):
    t = Tape()
    x = Leaf(t, 0.5)
    with pytest.raises(TypeError, match="gradient"):
        convert(x)


def test_storing_a_node_into_an_ndarray_explains_itself():
    t = Tape()
    x = Leaf(t, 0.5)
    a = np.zeros(3)
    # NumPy reports element assignment as a ValueError; the node's TypeError is its cause
    with pytest.raises((TypeError, ValueError)) as info:
        a[0] = x
    error = info.value if isinstance(info.value, TypeError) else info.value.__cause__
    assert isinstance(error, TypeError) and "np.stack" in str(error)
    with pytest.raises(TypeError, match="np.stack"):
        a[:] = Leaf(t, np.ones(3))
    np.testing.assert_array_equal(a, 0.0)


def test_bool_of_a_node_is_the_truth_of_its_value():
    t = Tape()
    assert Leaf(t, 1.0) and not Leaf(t, 0.0)


def test_real_and_imag_attributes_are_recorded():
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    # f(z) = sum(re(z)^2 + 3 im(z)): JAX's convention gives df/dx - i df/dy
    (g,) = grad(lambda z: np.sum(z.real**2 + 3 * z.imag))(z)
    np.testing.assert_allclose(g, 2 * z.real - 3j)
    check_grads(lambda x: (x * (1 + 1j)).imag * x, A)


def test_printing_a_node_shows_its_value_as_numpy_does():
    from tape import Leaf, Tape, grad

    t = Tape()
    x, a = Leaf(t, 2.34567), Leaf(t, np.array([1.5, 2.25]))
    plain_x, plain_a = np.float64(2.34567), np.array([1.5, 2.25])
    assert f"{x:.3f}" == f"{plain_x:.3f}" == "2.346"
    assert format(x) == format(plain_x) and str(x) == str(plain_x)
    assert str(a) == str(plain_a) and f"{a}" == f"{plain_a}"
    assert round(x) == round(plain_x) == 2 and round(x, 2) == round(plain_x, 2)
    assert repr(x).startswith("Leaf{float64}")  # repr still shows the record
    printed = []

    def f(x):
        printed.append(f"x = {x:.2f}")
        return x * round(x, 1)  # the rounded factor is a constant

    assert grad(f)(2.34567) == (np.round(2.34567, 1),)
    assert printed == ["x = 2.35"]


# -- copies and pickling ------------------------------------------------------------------


def test_deepcopy_and_copy_are_np_copy_and_the_gradient_flows():
    import copy

    w = np.array([1.0, -2.0, 3.0])
    (g,) = grad(lambda p: np.sum(copy.deepcopy(p)["w"] ** 2))({"w": w})
    np.testing.assert_allclose(g["w"], 2 * w)
    check_grads(lambda x: copy.copy(x) * x, A)  # a Leaf
    check_grads(lambda x: copy.copy(x * 2.0) ** 2, A)  # a Branch
    check_grads(lambda x: copy.deepcopy([x, (x[0], {"k": x})])[1][1]["k"] * x, A)
    assert grad(lambda s: copy.copy(s) * copy.deepcopy(s))(1.5) == (3.0,)  # a float's node


def test_deepcopy_copies_a_node_met_twice_once_as_numpy_does():
    import copy

    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0]))
    y = x * 2.0
    copied = copy.deepcopy({"a": y, "b": [y, x], "c": x})
    assert copied["a"] is copied["b"][0] and copied["b"][1] is copied["c"]
    assert copied["a"] is not y and copied["c"] is not x
    plain = np.array([1.0, 2.0])
    reference = copy.deepcopy({"a": plain, "b": [plain]})
    assert reference["a"] is reference["b"][0]  # what NumPy's arrays do


def _written_then_copied(x, copier):
    y = x * 1.0
    y[0] = 5.0 * y[1]
    z = copier(y)
    z *= 2.0  # neither write shows in the other
    y += 1.0
    y[2] = y[2] * z[1]
    return np.sum(y * np.arange(1.0, 4.0)) + np.sum(z**2)


@pytest.mark.parametrize("name", ["copy", "deepcopy", "method"])
def test_a_copy_of_a_written_node_is_independent_of_it(name):
    import copy

    from tape import value_and_grad

    copier = {"copy": copy.copy, "deepcopy": copy.deepcopy, "method": lambda v: v.copy()}[name]
    x = np.array([0.5, -1.5, 2.0])
    value, _ = value_and_grad(lambda x: _written_then_copied(x, copier))(x)
    assert value == _written_then_copied(x.copy(), copier)  # NumPy on the ndarray
    check_grads(lambda x: _written_then_copied(x, copier), x)


@pytest.mark.parametrize("protocol", range(6))
def test_pickling_a_node_says_it_cannot_leave_its_process(protocol):
    import copyreg
    import pickle

    t = Tape()
    for node in (Leaf(t, np.ones(2)), Leaf(t, 1.0) * 2.0, [Leaf(t, 0.5)], {"k": Leaf(t, 0.5)}):
        with pytest.raises(TypeError, match="cannot pickle a node.*cannot leave"):
            pickle.dumps(node, protocol=protocol)
    for node in (Leaf(t, np.ones(2)), Leaf(t, 1.0) * 2.0):
        with pytest.raises(TypeError, match="cannot pickle a node"):
            node.__reduce_ex__(protocol)
        if protocol < 2:
            with pytest.raises(TypeError, match="cannot pickle a node"):
                copyreg._reduce_ex(node, protocol)  # what protocols 0 and 1 fall back on
    with pytest.raises(TypeError, match="cannot pickle a node"):
        grad(lambda x: pickle.loads(pickle.dumps(x)) * x)(1.0)


def test_cloudpickle_refuses_a_node_too():
    cloudpickle = pytest.importorskip("cloudpickle")
    with pytest.raises(TypeError, match="cannot pickle a node"):
        cloudpickle.dumps(Leaf(Tape(), np.ones(2)))


# -- functions that write into their argument: random shuffles --------------------------

SHUFFLES = {
    "Generator.shuffle": lambda y: np.random.default_rng(7).shuffle(y),
    "np.random.shuffle": lambda y: np.random.RandomState(7).shuffle(y),
}


def _shuffled_sum(shuffle, x):
    y = x * 1.0
    shuffle(y)
    return np.sum(y * np.arange(1.0, y.size + 1.0).reshape(y.shape)) + np.sum(y[0] ** 2)


@pytest.mark.filterwarnings("ignore:you are shuffling")  # NumPy's, for a non-ndarray
@pytest.mark.parametrize("name", SHUFFLES)
def test_a_shuffle_of_a_vector_node_permutes_it_as_numpy_does(name):
    from tape import value_and_grad

    x = np.array([1.0, 5.0, 2.0, 7.0, 3.0, -1.0])
    f = lambda x: _shuffled_sum(SHUFFLES[name], x)  # noqa: E731
    value, _ = value_and_grad(f)(x)
    assert value == f(x.copy())  # the same permutation as NumPy's on the ndarray
    check_grads(f, x)  # the inverse permutation


@pytest.mark.filterwarnings("ignore:you are shuffling")
@pytest.mark.parametrize("name", SHUFFLES)
def test_a_shuffle_of_a_node_with_rows_is_refused_where_it_would_duplicate_rows(name):
    X = np.arange(12.0).reshape(4, 3)
    with pytest.raises(TypeError, match=r"shuffle.*duplicate rows.*rng\.permutation"):
        grad(lambda x: _shuffled_sum(SHUFFLES[name], x))(X)
    # the way the message gives: the rows NumPy's shuffle gives, from the same state
    shuffled = X.copy()
    np.random.default_rng(3).shuffle(shuffled)
    np.testing.assert_array_equal(shuffled, X[np.random.default_rng(3).permutation(len(X))])
    check_grads(lambda x: x[np.random.default_rng(3).permutation(len(x))] ** 2, X)


def test_a_swap_written_in_python_is_numpys_own_swap_of_views():
    import random

    def swap(x):
        y = x * 1.0
        y[0], y[2] = y[2], y[0]  # on an ndarray too the rows are views: row 2 gets row 2
        random.Random(1).shuffle(y)  # Python's shuffle: the same swaps of views
        return np.sum(y * np.arange(12.0).reshape(4, 3))

    from tape import value_and_grad

    X = np.arange(12.0).reshape(4, 3) ** 1.5
    assert value_and_grad(swap)(X)[0] == swap(X.copy())
    check_grads(swap, X)


@pytest.mark.filterwarnings("ignore:you are shuffling")
def test_random_functions_that_take_an_array_refuse_a_node():
    x = Leaf(Tape(), np.arange(4.0))
    rng = np.random.default_rng(0)
    for call in (rng.permutation, rng.permuted, rng.choice):
        with pytest.raises(TypeError):
            call(x)
    with pytest.raises(NotImplementedError, match="Axis"):  # NumPy's own refusal
        rng.shuffle(Leaf(Tape(), np.ones((2, 2))), axis=1)
