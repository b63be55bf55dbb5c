"""compile_grad: a recorded tape replayed equals grad, and guards catch what changed."""

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import Gradients, TapeMismatchError, compile_grad, grad, tree_flatten, value_and_grad
from tests.fd import numeric_grad


def chain(x, n=50):
    for _ in range(n):
        x = x + 0.01 * np.log(np.exp(np.sin(x)) + 1)
    return x


def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    m = np.max(logits, axis=1, keepdims=True)
    logp = logits - m - np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True))
    return -np.sum(y * logp) / x.shape[0]


def mlp_data(rng, batch=8, sizes=(5, 7, 3)):
    params = [
        rng.standard_normal((sizes[0], sizes[1])) * 0.3,
        rng.standard_normal(sizes[1]) * 0.1,
        rng.standard_normal((sizes[1], sizes[2])) * 0.3,
        rng.standard_normal(sizes[2]) * 0.1,
    ]
    x = rng.standard_normal((batch, sizes[0]))
    y = np.eye(sizes[2])[rng.integers(0, sizes[2], batch)]
    return params, x, y


def assert_same(a, b, rtol=1e-12):
    if isinstance(a, dict):
        assert type(b) is dict and list(a) == list(b)
        return assert_same(list(a.values()), list(b.values()), rtol)
    if isinstance(a, (tuple, list)):
        # grad's tuple of gradients is compared as the tuple it is
        a, b = (tuple(v) if type(v) is Gradients else v for v in (a, b))
        assert type(a) is type(b) and len(a) == len(b)
        for u, v in zip(a, b):
            assert_same(u, v, rtol)
        return
    assert type(a) is type(b)
    assert np.shape(a) == np.shape(b) and np.result_type(a) == np.result_type(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-14)


def test_scalar_chain_equals_grad_and_central_differences():
    g = compile_grad(chain, 0.3)
    for x in (0.3, -1.2, 2.5):
        assert_same(g(x), grad(chain)(x))
        assert g(x)[0] == pytest.approx(numeric_grad(chain, (x,), 0), rel=1e-6)
    assert g.recordings == 1
    assert_same(g(np.float64(0.7)), grad(chain)(np.float64(0.7)))  # another type: recorded again


def test_vector_chain_and_float32():
    f = lambda x: np.sum(chain(x, 10))  # noqa: E731
    x = np.linspace(-1, 1, 10)
    g = compile_grad(f, x)
    assert_same(g(x + 0.5), grad(f)(x + 0.5))
    x32 = x.astype(np.float32)
    g32 = compile_grad(f, x32)
    assert g32(x32)[0].dtype == np.float32
    assert_same(g32(x32 * 2), grad(f)(x32 * 2), rtol=1e-5)


def test_mlp_value_and_gradient_with_new_data():
    rng = np.random.default_rng(0)
    params, x, y = mlp_data(rng)
    g = compile_grad(mlp_loss, params, x, y, argnums=0)
    for _ in range(3):  # new parameters and a new batch: same tape
        params, x, y = mlp_data(rng)
        value, grads = g.value_and_grad(params, x, y)
        v2, g2 = value_and_grad(mlp_loss, argnums=0)(params, x, y)
        assert value == pytest.approx(v2, rel=1e-12)
        assert_same(grads, g2)
    assert g.recordings == 1
    numeric = numeric_grad(
        lambda b: mlp_loss([params[0], b, params[2], params[3]], x, y), (params[1],), 0
    )
    np.testing.assert_allclose(grads[1], numeric, rtol=1e-6, atol=1e-8)


def test_containers_indexing_lists_and_broadcasting():
    def f(p, idx):
        a, b = p["a"], p["b"]
        parts = np.concatenate([a[idx], b[None, :].T[:, 0] * 2.0, a[:2]])
        return np.sum(np.stack([parts, parts**2]) * np.array([[1.0], [0.5]])) + a[0] * a[1]

    rng = np.random.default_rng(1)
    p = {"a": rng.standard_normal(5), "b": rng.standard_normal(3)}
    idx = np.array([0, 0, 3])
    g = compile_grad(f, p, idx, argnums=0)
    p2 = {"a": rng.standard_normal(5), "b": rng.standard_normal(3)}
    assert_same(g(p2, idx), grad(f, argnums=0)(p2, idx))
    assert g.recordings == 1
    idx2 = np.array([1, 4, 4])  # an index array is frozen into the tape: new values re-record
    assert_same(g(p2, idx2), grad(f, argnums=0)(p2, idx2))
    assert g.recordings == 2


def test_second_argument_and_unused_argument():
    f = lambda x, y, z: np.sum(x * y) + 0.0 * np.sum(x)  # noqa: E731
    x, y, z = np.ones(3), np.arange(3.0), 2.0
    g = compile_grad(f, x, y, z)
    assert_same(g(x * 2, y + 1, 3.0), grad(f)(x * 2, y + 1, 3.0))


def test_changed_shape_dtype_or_type_re_records_or_raises():
    f = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    g = compile_grad(f, np.ones(3))
    assert_same(g(np.ones(4)), grad(f)(np.ones(4)))
    assert_same(g(np.ones(4, np.float32)), grad(f)(np.ones(4, np.float32)))
    assert g.recordings == 3
    strict = compile_grad(f, np.ones(3), on_change="raise")
    with pytest.raises(
        TapeMismatchError,
        match=r"argument 0 is ndarray float64\[4\], recorded as ndarray float64\[3\]",
    ):
        strict(np.ones(4))
    with pytest.raises(TapeMismatchError, match="float32"):
        strict(np.ones(3, np.float32))


def test_changed_branch_is_never_replayed():
    def f(x):
        if x > 0:
            return x * x
        return np.sin(x)

    g = compile_grad(f, 2.0)
    assert g(3.0) == (6.0,)
    assert g(-1.0) == (math.cos(-1.0),)  # the other branch: recorded again
    assert g.recordings == 2
    strict = compile_grad(f, 2.0, on_change="raise")
    with pytest.raises(TapeMismatchError, match="greater.*another path"):
        strict(-1.0)


def test_changed_mask_and_truth_value_and_argmax():
    def f(x):
        i = np.argmax(x)
        y = np.where(x > 0, x, 0.1 * x)
        if np.sum(x):  # bool of a node
            y = y * 2.0
        return np.sum(y**2) + x[i]

    x = np.array([1.0, -2.0, 3.0])
    g = compile_grad(f, x, on_change="raise")
    assert_same(g(x * 1.5), grad(f)(x * 1.5))
    for other in (
        np.array([3.0, -2.0, 1.0]),
        np.array([1.0, 2.0, 3.0]),
        np.array([1.0, -4.0, 3.0]),
    ):
        with pytest.raises(TapeMismatchError):
            g(other)
    relaxed = compile_grad(f, x)
    for other in (
        np.array([3.0, -2.0, 1.0]),
        np.array([1.0, 2.0, 3.0]),
        np.array([1.0, -4.0, 3.0]),
    ):
        assert_same(relaxed(other), grad(f)(other))


def test_math_errors_fall_back_to_numpy_semantics():
    f = lambda x: np.log(x) + 1.0 / x  # noqa: E731
    g = compile_grad(f, np.float64(2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        for x in (np.float64(0.0), np.float64(-1.0)):  # math.log raises where np.log warns
            assert_same(g(x), grad(f)(x))


def test_keyword_arguments_and_constant_outputs():
    f = lambda x, scale=1.0: scale * np.sum(x**2)  # noqa: E731
    g = compile_grad(f, np.ones(2))
    assert_same(g(np.ones(2), scale=3.0), grad(f)(np.ones(2), scale=3.0))
    c = compile_grad(lambda x: 1.0, np.ones(2))
    assert_same(c(np.ones(2)), (np.zeros(2),))


def test_data_argument_used_as_plain_value_stays_a_constant():
    def f(w, n):
        return np.sum(w**2) * float(n)  # float() needs a plain value

    g = compile_grad(f, np.ones(2), 2.0, argnums=0)
    assert_same(g(np.ones(2) * 3, 2.0), grad(f, argnums=0)(np.ones(2) * 3, 2.0))
    assert_same(g(np.ones(2), 5.0), grad(f, argnums=0)(np.ones(2), 5.0))


def test_errors_match_grad():
    with pytest.raises(TypeError, match="dtype int"):
        compile_grad(lambda x: np.sum(x), np.arange(3))
    with pytest.raises(TypeError, match="scalar"):
        compile_grad(lambda x: x * 2, np.ones(3))


def test_nested_derivative_goes_through_an_outer_tape():
    g = compile_grad(lambda x: x**3, 2.0, argnums=0)
    second = grad(lambda x: g(x) * 1.0, argnums=0)
    assert second(2.0) == pytest.approx(12.0)


def test_long_tape_compiles_in_chunks():
    g = compile_grad(lambda x: chain(x, 800), 0.1)  # 4,800 records
    assert g.tape_length > 4800
    assert_same(g(0.2), grad(lambda x: chain(x, 800))(0.2))


@pytest.mark.parametrize(
    "axis, keepdims", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, False)]
)
def test_sum_reductions_with_axes(axis, keepdims):
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    f = lambda x: np.sum(np.sum(x, axis=axis, keepdims=keepdims) ** 2)  # noqa: E731
    assert_same(compile_grad(f, x)(x + 1), grad(f)(x + 1))


def test_gradient_inside_the_function_and_its_branches():
    def f(x):
        inner = grad(lambda y: np.sum(np.where(y > 0, y, 0.0) * np.sin(x)))(x)[0]
        return np.sum(inner**2)

    x = np.array([0.3, -0.7, 1.1])
    g = compile_grad(f, x, on_change="raise")
    assert_same(g(x * 1.2), grad(f)(x * 1.2))
    with pytest.raises(TapeMismatchError):  # a comparison on the inner tape's nodes changed
        g(-x)


@pytest.mark.parametrize(
    "shapes",
    [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 2)), ((1, 4), (4, 5))],
)
@pytest.mark.parametrize("weighted", [True, False])  # False: sum's adjoint repeats
def test_matmul_products_inlined_or_through_the_rule(shapes, weighted):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s) for s in shapes)
    w = rng.standard_normal(np.shape(a @ b)) if weighted else 1.0
    c = rng.standard_normal(shapes[0])  # a constant left factor: only b's product is needed

    def f(a, b):
        return np.sum(np.tanh(a @ b) * w) + np.sum((c @ b) ** 2)

    g = compile_grad(f, a, b)
    for scale in (1.0, -0.5):
        got = g(a * scale, b + scale)
        assert_same(got, grad(f)(a * scale, b + scale))
        for i in range(2):
            expected = numeric_grad(f, (a * scale, b + scale), i)
            np.testing.assert_allclose(got[i], expected, rtol=1e-6, atol=1e-8)


def test_gradients_come_in_the_order_of_argnums():
    f = lambda x, y: np.sum(x * y**2)  # noqa: E731
    x, y = np.ones(2), np.full(2, 3.0)
    g = compile_grad(f, x, y, argnums=(1, 0))
    assert_same(g(x, y), grad(f, argnums=(1, 0))(x, y))
    assert_same(g(y, x), grad(f, argnums=(1, 0))(y, x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_accumulation_as_the_reverse_pass_does_it(dtype):
    """Every way the reverse pass adds into a slot, replayed: a first contribution, a
    sum into a new array, in place into one it owns, an in-place rule (indexing) handed
    zeros, a copy, or the slot's own array, and axes summed that broadcasting added
    or stretched."""

    def f(x, b, c):
        h = np.tanh(x * 2.0 + b)  # b: (1, 4) stretched to (5, 4), then a leading axis
        k = np.sin(x) * c  # c: (4,) against (5, 4)
        return (
            np.sum(h[0]) + np.sum(h * h) + np.sum(h[:, 1] * h[2, 1])  # h: zeros, owned
            + np.sum(k[1]) + np.sum(np.cos(k))  # k: set, then a copy for the in-place rule
            + np.sum(x * x * x) + np.sum(b[..., :2])
            + np.sum(np.stack([x, x]) * b)  # b: a leading axis and a stretched one at once
        )  # fmt: skip

    rng = np.random.default_rng(4)
    args = lambda: [rng.standard_normal(s).astype(dtype) for s in ((5, 4), (1, 4), (4,))]  # noqa: E731
    g = compile_grad(f, *args())
    for _ in range(2):
        a = args()
        assert_same(g(*a), grad(f)(*a), rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert g.recordings == 1


def test_shared_by_threads_over_many_shapes_records_each_shape_once():
    import threading

    g = compile_grad(lambda x: np.sum(np.sin(x) * x), np.ones(1))
    shapes = [(n,) for n in range(1, 17)]
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(60):
                x = rng.normal(size=shapes[rng.integers(len(shapes))])
                (gx,) = g(x)
                np.testing.assert_allclose(gx, np.sin(x) + x * np.cos(x), rtol=1e-12)
        except Exception as error:  # reported below: a thread's failure must fail the test
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert g.recordings == len(shapes)  # every shape was seen (480 draws of 16)
    info = g.cache_info()
    assert info.misses == len(shapes) and info.hits == 8 * 60 + 1 - len(shapes)
    assert info.currsize == len(shapes) <= info.maxsize


def test_least_recently_used_shape_is_dropped_first():
    g = compile_grad(lambda x: np.sum(x**2), np.ones(1), cache_size=2)
    g(np.ones(2))  # cache: 1, 2
    g(np.ones(1))  # 1 used again: 2 is now the least recently used
    g(np.ones(3))  # drops 2
    assert g.recordings == 3
    g(np.ones(1))
    assert g.recordings == 3  # still kept
    np.testing.assert_array_equal(g(np.ones(2))[0], [2.0, 2.0])  # 2 x, recorded again
    assert g.recordings == 4
    with pytest.raises(ValueError, match="cache_size"):
        compile_grad(lambda x: np.sum(x), np.ones(1), cache_size=0)


def test_none_leaves_pass_through_a_compiled_gradient():
    f = lambda q: np.sum(q[0] ** 2) * q[2]  # noqa: E731
    g = compile_grad(f, (np.ones(2), None, 3.0))
    for scale in (1.0, 2.0):
        got = g((scale * np.ones(2), None, 3.0))
        expected = grad(f)((scale * np.ones(2), None, 3.0))
        assert got[0][1] is None and expected[0][1] is None
        np.testing.assert_allclose(got[0][0], expected[0][0])
        assert got[0][2] == expected[0][2]


def per_example_loss(params, x, y):
    w1, b1, w2, b2 = params
    z = np.tanh(x @ w1 + b1) @ w2 + b2
    z = z - np.max(z)
    return -np.sum(y * (z - np.log(np.sum(np.exp(z)))))


def test_under_vmap_a_program_recorded_on_batches_replays_on_later_batches():
    from tape import vmap

    rng = np.random.default_rng(7)
    params, x, y = mlp_data(rng, batch=6)
    compiled = compile_grad(per_example_loss, params, x[0], y[0], argnums=0)
    per_example = vmap(compiled, in_axes=(None, 0, 0))
    for k in range(3):  # each call a new vmap level: the one program recorded on batches
        xk = x + k
        eager = AssertionError("eager")
        with mock.patch("tape.transforms.compiled.value_and_grad", side_effect=eager):
            got = per_example(params, xk, y)  # by the program, which never goes eager here
        for i in range(len(x)):
            for j, g in enumerate(got):

                def one_leaf(leaf, x=xk[i], y=y[i], j=j):
                    return per_example_loss(params[:j] + [leaf] + params[j + 1 :], x, y)

                expected = numeric_grad(one_leaf, (params[j],), 0)
                np.testing.assert_allclose(g[i], expected, rtol=1e-6, atol=1e-8)
    assert compiled.recordings == 2  # the example's and the batch's
    assert compiled.cache_info().hits == 2
    per_example(params, x[:4], y[:4])  # another batch size: another program
    assert compiled.recordings == 3


def test_under_nested_vmap_and_with_batched_weights():
    from tape import vmap

    rng = np.random.default_rng(8)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))

    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    compiled = compile_grad(loss, w, x[0])
    expected = [numeric_grad(loss, (w, x[i] * 2), 0) for i in range(4)]
    twice = vmap(vmap(compiled, in_axes=(None, 0)), in_axes=(None, 0))
    for _ in range(2):
        got = twice(w, np.stack([x, x * 2]))[0]
        np.testing.assert_allclose(got[1], np.stack(expected), rtol=1e-6, atol=1e-8)
    ws = np.stack([w, -w, w * 2, w])
    got = vmap(compiled, in_axes=(0, 0))(ws, x)[0]
    for i in range(4):
        expected = numeric_grad(loss, (ws[i], x[i]), 0)
        np.testing.assert_allclose(got[i], expected, rtol=1e-6, atol=1e-8)


def test_a_batched_constant_of_one_vmap_call_is_never_replayed_in_another():
    from tape import vmap

    rng = np.random.default_rng(9)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))

    def leaky(w, x):  # the mask is a plain result computed from a batched node
        z = x @ w
        return np.sum(np.where(z > 0, z, 0.1 * z) ** 2)

    compiled = compile_grad(leaky, w, x[0])
    per_example = vmap(compiled, in_axes=(None, 0))
    for k in range(3):
        xk = x * (k - 1)
        got = per_example(w, xk)[0]
        for i in range(len(x)):
            expected = numeric_grad(leaky, (w, xk[i]), 0)
            np.testing.assert_allclose(got[i], expected, rtol=1e-6, atol=1e-8)
    # it holds the mask of the batch it was recorded on: later batches go eager, rather
    # than failing its guards and recording again on every call
    assert compiled.recordings == 2


_STEPS = {
    "tanh": np.tanh,
    "exp": lambda z: np.exp(np.tanh(z)),  # bounded steps: central differences stay exact
    "sin": np.sin,
    "square": np.square,
    "negative": np.negative,
    "log": lambda z: np.log(1.5 + np.cos(z)),
    "minus its max": lambda z: z - np.max(z),
    "over its sum of squares": lambda z: z / np.sqrt(1.0 + np.sum(z * z)),
    "times a constant": lambda z: z * np.linspace(0.5, 1.5, np.shape(z)[-1]),
    "plus a number": lambda z: 2.0 - z,
    "times itself": lambda z: z * np.cos(z),
    "row max": lambda z: z - np.max(z, axis=-1, keepdims=True),
    "row sum": lambda z: np.tanh(np.sum(z, axis=0)) * z,
}


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.sampled_from(sorted(_STEPS)), min_size=1, max_size=4),
    matrix=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_under_vmap_a_compiled_gradient_equals_a_loop_of_grad(steps, matrix, seed):
    """The program recorded on batches writes most calls on the batches' data; replayed,
    it gives what a loop of eager gradients gives, example by example."""
    from tape import vmap

    rng = np.random.default_rng(seed)
    w, b = rng.standard_normal((3, 4)) * 0.5, rng.standard_normal(4) * 0.1
    xs = rng.standard_normal((5, 2, 3) if matrix else (5, 3))

    def f(params, x):
        z = x @ params[0] + params[1]
        for step in steps:
            z = _STEPS[step](z)
        return np.sum(z * z)

    compiled = compile_grad(f, (w, b), xs[0], argnums=(0, 1))
    per_example = vmap(compiled, in_axes=(None, 0))
    for k in range(2):  # recorded, then replayed
        x = xs + k
        eager = AssertionError("eager")
        with mock.patch("tape.transforms.compiled.value_and_grad", side_effect=eager):
            got = per_example((w, b), x)  # by the program: a failing one would go eager
        for i in range(len(x)):
            expected = grad(f, argnums=(0, 1))((w, b), x[i])
            for g, e in zip(tree_leaves(got), tree_leaves(expected)):
                np.testing.assert_allclose(g[i], e, rtol=1e-9, atol=1e-12)
    # and the replayed batch against central differences, on its first example (within
    # their error, which grows with the gradient's size)
    for g, expected in (
        (got[0][0][0], numeric_grad(lambda w: f((w, b), x[0]), (w,), 0)),
        (got[1][0], numeric_grad(f, ((w, b), x[0]), 1)),
    ):
        np.testing.assert_allclose(g, expected, atol=1e-5 * (1 + np.max(np.abs(expected))))
    assert compiled.recordings == 2


def tree_leaves(tree):
    return tree_flatten(tree)[0]
