"""A node behaves like its value: operators both ways, attributes, methods, indexing."""

import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
from tape import Leaf, Tape, grad
from tape.core.errors import NodeConversionError
from tests.fd import check_grads, numeric_grad

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


def test_resize_in_place_says_what_to_use_instead():
    # sort, partition, fill and put write the node, as NumPy's do (the spellings below)
    x = Leaf(Tape(), A)
    with pytest.raises(TypeError, match=r"x\.resize\(\) changes an array in place.*use "):
        x.resize(1)


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
    [
        np.asarray,
        np.array,
        float,
        int,
        math.sin,
        math.exp,
        lambda n: np.array([n, n]),
        lambda n: n.item(),
    ],
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


# -- every ndarray spelling: NumPy's result on the value, or tape's own clear error --------

M = np.array([[1.5, -2.0, 3.25], [0.5, 5.0, -1.0]])  # 5.0 is an element, for `in`


def _after(method, *args, **kwargs):
    """An in-place method's effect: the array after ``a.method(*args, **kwargs)``."""

    def run(a):
        assert getattr(a, method)(*args, **kwargs) is None
        return a

    return run


def _flat_write(a):
    a.flat[[1, 4]] = [7.0, 8.0]
    a.flat[0] = -3.0
    return a


SPELLINGS = {
    # astype and its keywords
    "astype(float32)": lambda a: a.astype(np.float32),
    "astype(copy=False)": lambda a: a.astype(np.float64, copy=False),
    "astype(float32, copy=False)": lambda a: a.astype(np.float32, copy=False),
    "astype(casting='same_kind')": lambda a: a.astype(np.float32, casting="same_kind"),
    "astype(casting='safe') of a narrowing": lambda a: a.astype(np.float32, casting="safe"),
    "astype(casting='no')": lambda a: a.astype(np.float64, casting="no"),
    "astype(order='F')": lambda a: a.astype(np.float64, order="F"),
    "astype(order='X')": lambda a: a.astype(np.float64, order="X"),
    "astype(subok=False)": lambda a: a.astype(np.float32, subok=False),
    "astype positionally": lambda a: a.astype(np.float32, "C", "unsafe", True, True),
    # flatten and ravel, every order
    "flatten()": lambda a: a.flatten(),
    "flatten('F')": lambda a: a.flatten("F"),
    "flatten(order='A')": lambda a: a.flatten(order="A"),
    "flatten('K') of a transpose": lambda a: a.T.flatten("K"),
    "ravel('F')": lambda a: a.ravel("F"),
    "ravel(order='K') of a transpose": lambda a: a.T.ravel(order="K"),
    # operators
    "divmod(a, c)": lambda a: divmod(a, 0.7),
    "divmod(c, a)": lambda a: divmod(2.5, a),
    "divmod(a, a)": lambda a: divmod(a, a[::-1]),
    "a // c, a % c": lambda a: (a // 0.7, a % -0.7, 3.0 % a),
    "5.0 in a": lambda a: 5.0 in a,
    "7.0 in a": lambda a: 7.0 in a,
    "row in a": lambda a: [0.5, 5.0, -1.0] in a,
    "a & 1": lambda a: a & 1,
    "1 | a": lambda a: 1 | a,
    "a ^ a": lambda a: a ^ a,
    "a << 1": lambda a: a << 1,
    "2 >> a": lambda a: 2 >> a,
    "~a": lambda a: ~a,
    "round(a[0, 0])": lambda a: round(a[0, 0]),
    "round(a[0, 0], 1)": lambda a: round(a[0, 1], 1),
    "round(a, 1)": lambda a: round(a, 1),
    "format(a[0, 0], '.3f')": lambda a: format(a[0, 0], ".3f"),
    "format(a, '')": lambda a: format(a, ""),
    "format(a, '.2f')": lambda a: format(a, ".2f"),
    "bool(size 1)": lambda a: bool(a[1:, 1:2]),
    "bool(size 6)": lambda a: bool(a),
    "len(a)": lambda a: len(a),
    "len(0-d)": lambda a: len(a[0, 0]),
    "len(0-d array)": lambda a: len(a.sum(keepdims=False).reshape(())),
    "iter(0-d)": lambda a: list(a.reshape(-1)[0].reshape(())),
    "list(a)": lambda a: [r for r in a],
    "operator.index(a[0, 0])": lambda a: operator.index(a[0, 0]),
    # in-place methods
    "fill": _after("fill", 2.5),
    "fill of a sequence": _after("fill", [1.0, 2.0]),
    "sort()": _after("sort"),
    "sort(axis=0)": _after("sort", axis=0),
    "sort(kind='stable')": _after("sort", kind="stable"),
    "sort(axis=None)": _after("sort", axis=None),
    "partition(1)": _after("partition", 1),
    "partition(0, axis=0)": _after("partition", 0, axis=0),
    "put": _after("put", [0, 4], [9.0, 8.0]),
    "put repeating": _after("put", [0, 1, 5], 7.0),
    "put negative": _after("put", [-1], [4.0]),
    "put mode='wrap'": _after("put", [7, -8], [1.0, 2.0], mode="wrap"),
    "put mode='clip'": _after("put", [9, -3], [1.0, 2.0], mode="clip"),
    "put out of bounds": _after("put", [6], [1.0]),
    "a.flat[...] = v": _flat_write,
    "a.flat = v": lambda a: (setattr(a, "flat", 2.0), a)[1],
    "a.flat = values": lambda a: (setattr(a, "flat", np.arange(6.0)), a)[1],
    "divmod(a, 0)": lambda a: divmod(a, 0.0),
    "np.astype(copy=False)": lambda a: np.astype(a, np.float64, copy=False),
    "a[i] = v in a row": lambda a: (a[1].__setitem__(0, 9.0), a)[1],
    # flat
    "flat[3]": lambda a: a.flat[3],
    "flat[1:4]": lambda a: a.flat[1:4],
    "flat[[0, 5]]": lambda a: a.flat[[0, 5]],
    "list(flat)": lambda a: list(a.flat),
    "len(flat)": lambda a: len(a.flat),
    # views and copies
    "view()": lambda a: a.view(),
    "view(np.ndarray)": lambda a: a.view(np.ndarray),
    "view(float64)": lambda a: a.view(np.float64),
    "copy()": lambda a: a.copy(),
    "copy('F')": lambda a: a.copy("F"),
    # reshaping
    "reshape(3, 2)": lambda a: a.reshape(3, 2),
    "reshape((3, 2))": lambda a: a.reshape((3, 2)),
    "reshape(-1, order='F')": lambda a: a.reshape(-1, order="F"),
    "reshape(np.int64(6))": lambda a: a.reshape(np.int64(6)),
    "transpose()": lambda a: a.transpose(),
    "transpose(1, 0)": lambda a: a.transpose(1, 0),
    "transpose((1, 0))": lambda a: a.transpose((1, 0)),
    "swapaxes(0, 1)": lambda a: a.swapaxes(0, 1),
    "squeeze()": lambda a: a[:1].squeeze(),
    "squeeze(axis=0)": lambda a: a[:1].squeeze(axis=0),
    "T, mT": lambda a: (a.T, a.mT),
    "shape, ndim, size, dtype, itemsize, nbytes": lambda a: (
        a.shape,
        a.ndim,
        a.size,
        a.dtype,
        a.itemsize,
        a.nbytes,
    ),
    # reductions and the rest, with their keywords
    "sum(axis=0, keepdims=True)": lambda a: a.sum(axis=0, keepdims=True),
    "sum(0)": lambda a: a.sum(0),
    "sum(where=)": lambda a: a.sum(where=a > 0),
    "mean(axis=1, dtype=float32)": lambda a: a.mean(axis=1, dtype=np.float32),
    "std(ddof=1)": lambda a: a.std(ddof=1),
    "var(axis=0, ddof=1)": lambda a: a.var(axis=0, ddof=1),
    "max(axis=1, initial=4.0)": lambda a: a.max(axis=1, initial=4.0),
    "min(keepdims=True)": lambda a: a.min(keepdims=True),
    "prod(axis=1)": lambda a: a.prod(axis=1),
    "cumsum()": lambda a: a.cumsum(),
    "cumprod(1)": lambda a: a.cumprod(1),
    "argmax()": lambda a: a.argmax(),
    "argmax(axis=1, keepdims=True)": lambda a: a.argmax(axis=1, keepdims=True),
    "argmin(0)": lambda a: a.argmin(0),
    "argsort(axis=0, kind='stable')": lambda a: a.argsort(axis=0, kind="stable"),
    "argpartition(1)": lambda a: a.argpartition(1),
    "all(), any(axis=0)": lambda a: (a.all(), a.any(axis=0)),
    "clip(0, 3)": lambda a: a.clip(0, 3),
    "clip(min=0, max=3)": lambda a: a.clip(min=0, max=3),
    "clip(max=3)": lambda a: a.clip(max=3),
    "round(1), round(decimals=1)": lambda a: (a.round(1), a.round(decimals=1)),
    "conj(), conjugate()": lambda a: (a.conj(), a.conjugate()),
    "real, imag": lambda a: (a.real, a.imag),
    "diagonal(), diagonal(1)": lambda a: (a.diagonal(), a.diagonal(1)),
    "trace(), trace(offset=1)": lambda a: (a.trace(), a.trace(offset=1)),
    "repeat(2, axis=1)": lambda a: a.repeat(2, axis=1),
    "take([0, 2], axis=1), take([1, 4])": lambda a: (a.take([0, 2], axis=1), a.take([1, 4])),
    "compress([True, False], axis=0)": lambda a: a.compress([True, False], axis=0),
    "nonzero()": lambda a: a.nonzero(),
    "searchsorted": lambda a: a[1].cumsum().searchsorted([0.0, 5.0], side="right"),
    "dot(v)": lambda a: a.dot(np.ones(3)),
    "np.choose": lambda a: np.choose([0, 1, 0], a),
}

# NumPy gives a plain number, bytes or memory; a node refuses, saying why (the gradient)
REFUSED = {
    "float(a[0, 0])": lambda a: float(a[0, 0]),
    "int(a[0, 0])": lambda a: int(a[0, 0]),
    "complex(a[0, 0])": lambda a: complex(a[0, 0]),
    "item()": lambda a: a[0, 0].item(),
    "tolist()": lambda a: a.tolist(),
    "tobytes()": lambda a: a.tobytes(),
    "view(int64)": lambda a: a.view(np.int64),
    "statistics.mean(list(a[0]))": lambda a: __import__("statistics").mean(list(a[0])),
    "dumps()": lambda a: a.dumps(),
    "resize": lambda a: a.resize((3, 2)),
    "shape = ...": lambda a: setattr(a, "shape", (3, 2)),
    "dtype = ...": lambda a: setattr(a, "dtype", np.int64),
    "real = ...": lambda a: setattr(a, "real", 1.0),
    **{name: (lambda a, name=name: getattr(a, name)) for name in (
        "flags", "base", "ctypes", "data", "byteswap")},
}  # fmt: skip


def _plain(result):
    from sensitivities.registry import value_of

    if isinstance(result, (tuple, list)):
        return type(result)(_plain(r) for r in result)
    return value_of(result)


def _assert_same(got, want, name):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), name
        for g, w in zip(got, want):
            _assert_same(g, w, name)
        return
    if isinstance(want, (str, bool, int, tuple, np.dtype)) and not isinstance(want, np.generic):
        assert type(got) is type(want) and got == want, (name, got, want)
        return
    assert np.shape(got) == np.shape(want) and np.result_type(got) == np.result_type(want), name
    np.testing.assert_array_equal(got, want, err_msg=name)
    if isinstance(want, np.ndarray) and want.ndim > 1:  # the memory order it asked for
        assert got.flags.f_contiguous == want.flags.f_contiguous, name


def _outcome(f, a):
    try:
        return f(a), None
    except Exception as error:  # noqa: BLE001 - the kind of error is what is compared
        return None, error


def _kind(error):
    return next(k for k in (IndexError, TypeError, ValueError, AttributeError, Exception)
                if isinstance(error, k))  # fmt: skip


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("name", SPELLINGS)
def test_every_ndarray_spelling_gives_numpys_result_on_the_value(name):
    f = SPELLINGS[name]
    want, numpy_error = _outcome(f, M.copy())
    x = Leaf(Tape(), M.copy())
    got, error = _outcome(f, x)
    if numpy_error is not None:
        assert error is not None, f"{name}: NumPy raises {numpy_error!r}, tape gave {got!r}"
        assert _kind(error) is _kind(numpy_error), (name, error, numpy_error)
        return
    assert error is None, f"{name}: NumPy gives {want!r}, tape raised {error!r}"
    _assert_same(_plain(got), want, name)
    written = M.copy()
    f(written)
    _assert_same(x.value, written, name)  # written in place where the ndarray was


@pytest.mark.parametrize("name", REFUSED)
def test_spellings_that_would_lose_the_gradient_are_refused_saying_why(name):
    numpy_result, numpy_error = _outcome(REFUSED[name], M.copy())
    assert numpy_error is None  # NumPy does it: tape's refusal is its own, and clear
    with pytest.raises((TypeError, AttributeError), match=r"node|gradient|in place|NumPy"):
        REFUSED[name](Leaf(Tape(), M.copy()))


GRADIENT_SPELLINGS = [
    "astype(order='F')", "flatten('F')", "flatten('K') of a transpose",
    "divmod(a, c)", "divmod(c, a)", "sort()", "sort(axis=0)", "partition(1)", "put",
    "put repeating", "put mode='wrap'", "a.flat[...] = v", "flat[1:4]", "view()", "fill",
]  # fmt: skip


@pytest.mark.parametrize("name", GRADIENT_SPELLINGS)
def test_the_gradient_of_every_spelling_is_that_of_numpys_program(name):
    f = SPELLINGS[name]

    def scalar(a):
        out = f(a * 1.0)  # on a copy: the in-place methods write into it
        outs = out if isinstance(out, tuple) else (out,)
        weights = [np.arange(1.0, np.size(o) + 1).reshape(np.shape(o)) for o in outs]
        return sum(np.sum(o.astype(np.float64) * w) for o, w in zip(outs, weights))

    check_grads(scalar, M + 0.1, rtol=1e-4, atol=1e-5, eps=1e-4)


def test_copies_and_views_alias_as_numpys_do():
    t = Tape()
    x = Leaf(t, M.copy())
    same = x.astype(np.float64, copy=False)
    assert same is x  # NumPy: a.astype(a.dtype, copy=False) is a
    flat, view = x.flatten(), x.view()
    flat[0] = 100.0  # a copy: x keeps its value
    assert x.value[0, 0] == M[0, 0]
    view[0, 1] = 50.0  # a view: x sees it
    assert x.value[0, 1] == 50.0
    row = x.flat[0:3]
    row[0] = -1.0  # flat[...] is a copy
    assert x.value[0, 0] == M[0, 0]


@pytest.mark.parametrize(
    "name", ["flatten()", "flatten('F')", "ravel('F')", "divmod(a, c)", "5.0 in a",
             "astype(float32)", "astype(order='F')", "reshape(-1, order='F')"],
)  # fmt: skip
def test_the_spellings_under_vmap_are_numpys_per_example(name):
    from tape import vmap

    f = SPELLINGS[name]
    X = np.stack([M, M[::-1] * 2.0, -M])
    if name == "5.0 in a":  # a plain answer: one per example, in a Python loop
        assert [f(x) for x in X] == [True, False, False]
        return
    got = vmap(f)(X)
    want = [f(x) for x in X]
    for g, w in zip(got if isinstance(got, tuple) else (got,), zip(*want) if isinstance(
            want[0], tuple) else (want,)):  # fmt: skip
        np.testing.assert_array_equal(g, np.stack(w))


@settings(max_examples=60, deadline=None)
@given(
    data=hnp.arrays(
        np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=3), elements=st.floats(-5, 5)
    ),
    transposed=st.booleans(),
    method=st.sampled_from(["flatten", "ravel", "astype"]),
    order=st.sampled_from(["C", "F", "A", "K"]),
)
def test_orders_of_flatten_ravel_and_astype_follow_numpy_with_the_gradient(
    data, transposed, method, order
):
    base = data.T if transposed else data  # a layout of its own: "A" and "K" read it

    def call(a):
        if method == "astype":
            return a.astype(np.float64, order=order)
        return getattr(a, method)(order)

    want = call(base)
    t = Tape()
    x = Leaf(t, base)
    got = call(x).value
    np.testing.assert_array_equal(got, want)
    assert got.shape == want.shape
    weights = np.arange(1.0, want.size + 1).reshape(want.shape)
    (g,) = grad(lambda a: np.sum(call(a) * weights))(base)
    # d/da sum(w * call(a)) puts each weight back where call took its element from
    ids = np.arange(base.size, dtype=float).reshape(base.shape)
    ids = np.copy(ids, order="F") if transposed else ids  # base's layout, for "A" and "K"
    expected = np.zeros(base.size)
    expected[call(ids).astype(int).reshape(-1)] = weights.reshape(-1)
    np.testing.assert_array_equal(g, expected.reshape(base.shape))


def test_logged_losses_behave_as_their_values():
    import io
    import logging

    losses, history = [], {}

    def f(x):
        loss = np.sum(x**2)
        losses.append(loss)
        history["loss"] = loss
        return loss

    xs = [np.full(2, float(step)) for step in range(3)]
    for x in xs:
        grad(f)(x)
    expected = [float(np.sum(x**2)) for x in xs]  # NumPy's own values
    assert np.mean(losses) == np.mean(expected) and type(np.mean(losses)) is np.float64
    np.testing.assert_array_equal(np.array(losses), expected)
    np.testing.assert_array_equal(np.stack(losses), expected)
    assert float(losses[-1]) == expected[-1] and int(losses[-1]) == int(expected[-1])
    assert losses[-1].item() == expected[-1] and losses[-1].tolist() == expected[-1]
    assert f"{history['loss']:.2f}" == f"{expected[-1]:.2f}" and str(losses[0]) == str(0.0)
    assert "%.1f" % losses[1] == "2.0" and np.sin(losses[1]) == np.sin(expected[1])  # noqa: UP031
    stream = io.StringIO()
    logger = logging.getLogger("tape-logging-test")
    logger.addHandler(logging.StreamHandler(stream))
    logger.warning("loss %.3f", losses[-1])
    assert stream.getvalue() == f"loss {expected[-1]:.3f}\n"
    tqdm = pytest.importorskip("tqdm")
    with tqdm.tqdm(total=1, file=io.StringIO()) as bar:
        bar.set_postfix(loss=losses[-1])  # formats the number
        assert "loss=8" in bar.postfix


def test_a_logged_loss_plots():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    losses = []
    for step in range(3):
        grad(lambda x: losses.append(np.sum(x**2)) or losses[-1])(np.full(2, float(step)))
    fig, ax = plt.subplots()
    (line,) = ax.plot(losses)
    np.testing.assert_array_equal(line.get_ydata(), [0.0, 2.0, 8.0])
    plt.close(fig)


def test_a_node_is_still_refused_as_a_number_inside_its_pass():
    with pytest.raises(NodeConversionError, match="gradient"):
        grad(lambda x: float(np.sum(x)))(np.ones(2))


_LIBRARY = """
import numpy as np

def potential(R):
    # galpy's shape: a scalar branch for anything that is not an ndarray
    if isinstance(R, np.ndarray):
        return -1.0 / np.sqrt(R ** 2 + 1.0)
    return -1.0 / (R + 1.0)

def kind(x):
    return isinstance(x, np.ndarray), type(x) is np.ndarray, x.__class__ is np.ndarray
"""


def test_isinstance_of_a_node_is_its_values_in_library_code():
    import types

    library = types.ModuleType("some_library")
    exec(_LIBRARY, library.__dict__)
    R = np.array([0.5, 1.5, 3.0])
    loss = lambda R: np.sum(library.potential(R))  # noqa: E731
    np.testing.assert_allclose(
        tape.value_and_grad(loss)(R)[0], loss(R), rtol=1e-15
    )  # NumPy's value: the array branch
    np.testing.assert_allclose(grad(loss)(R)[0], numeric_grad(loss, (R,), 0), rtol=1e-6)
    seen = []
    grad(lambda R: seen.append(library.kind(R)) or np.sum(R))(R)
    # isinstance answers for the value; type() and a written-out __class__ are the node's
    assert seen == [(True, False, False)]
    scalar = []
    grad(lambda R: scalar.append(library.kind(R[0])) or np.sum(R))(R)
    assert scalar == [(False, False, False)]  # a NumPy scalar's answer


def test_the_engine_and_the_standard_library_see_a_node():
    import copy
    import pickle

    def f(x):
        assert isinstance(x, tape.core.node.Node) and not isinstance(x, float)
        with pytest.raises(TypeError, match="cannot pickle"):
            pickle.dumps(x)
        return np.sum(copy.copy(x) ** 2)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(grad(f)(x)[0], 2 * x)
