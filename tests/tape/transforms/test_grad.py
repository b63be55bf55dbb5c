"""grad and value_and_grad: structure, shapes and dtypes in, clear errors out."""

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import grad, value_and_grad
from tests.fd import numeric_grad
from tests.strategies import SHAPES, arrays

Params = namedtuple("Params", ["w", "b"])


def test_one_gradient_per_positional_argument_as_a_tuple():
    f = lambda x, y, z: x * y * z  # noqa: E731
    assert grad(f)(2.0, 3.0, 4.0) == (12.0, 8.0, 6.0)
    assert grad(f, argnums=(2, 0))(2.0, 3.0, 4.0) == (6.0, 12.0)
    assert grad(f, argnums=1)(2.0, 3.0, 4.0) == 8.0  # an int picks one, as in JAX
    assert grad(f, argnums=-1)(2.0, 3.0, 4.0) == 6.0
    assert value_and_grad(f, argnums=(0,))(2.0, 3.0, 4.0) == (24.0, (12.0,))
    with pytest.raises(ValueError, match="out of range"):
        grad(f, argnums=3)(2.0, 3.0, 4.0)


def test_keyword_arguments_are_constants():
    assert grad(lambda x, scale=1.0: scale * x**2)(3.0, scale=2.0) == (12.0,)


def test_containers_keep_their_structure():
    def loss(params, data):
        w, b = params["layer"].w, params["layer"].b
        (x,) = data
        return np.sum((x @ w + b) ** 2) + params["extra"][0] * 0.0 + params["extra"][1] ** 2

    rng = np.random.default_rng(0)
    params = {"layer": Params(rng.standard_normal((3, 2)), np.zeros(2)), "extra": [1.0, 2.0]}
    x = rng.standard_normal((4, 3))
    g_params, g_data = grad(loss)(params, [x])
    assert isinstance(g_params["layer"], Params) and isinstance(g_data, list)
    assert g_params["extra"] == [0.0, 4.0]
    err = 2 * (x @ params["layer"].w + params["layer"].b)
    np.testing.assert_allclose(g_params["layer"].w, x.T @ err)
    np.testing.assert_allclose(g_params["layer"].b, err.sum(0))
    np.testing.assert_allclose(g_data[0], err @ params["layer"].w.T)


def test_none_leaves_are_passed_through_with_none_as_their_gradient():
    rng = np.random.default_rng(1)
    w32 = rng.standard_normal((3, 2)).astype(np.float32)
    params = {"layer": Params(w32, None), "extra": [None, 2.0], "skip": None}
    x = rng.standard_normal((4, 3)).astype(np.float32)

    def loss(params, x):
        return np.sum(np.tanh(x @ params["layer"].w)) * params["extra"][1] ** 2

    g_params, g_x = grad(loss)(params, x)
    assert g_params["layer"].b is None and g_params["extra"][0] is None
    assert g_params["skip"] is None and isinstance(g_params["layer"], Params)
    assert g_params["layer"].w.dtype == np.float32 and g_params["layer"].w.shape == (3, 2)
    assert g_x.dtype == np.float32 and g_x.shape == (4, 3)
    t = np.tanh(x.astype(float) @ w32.astype(float))
    np.testing.assert_allclose(g_params["layer"].w, 4.0 * x.T @ (1 - t**2), rtol=1e-4)
    np.testing.assert_allclose(g_params["extra"][1], 4.0 * np.sum(t), rtol=1e-4)
    value, (g,) = value_and_grad(lambda q: np.sum(q[0] ** 2), argnums=(0,))((np.ones(2), None))
    assert value == 2.0 and g[1] is None
    np.testing.assert_array_equal(g[0], [2.0, 2.0])
    assert grad(lambda q, y: y * 2.0)(None, 1.0) == (None, 2.0)  # a whole argument None
    # a genuinely non-differentiable leaf beside a None is still refused, by name
    with pytest.raises(TypeError, match=r"argument 0 \('q'\).*dtype int64"):
        grad(lambda q: np.sum(q[0]))((np.arange(3), None))
    with pytest.raises(TypeError, match=r"argument 0 \('q'\).*it is a str"):
        grad(lambda q: 1.0)({"a": None, "b": "text"})


def test_an_unused_argument_gets_zeros_of_its_own_shape_and_dtype():
    g = grad(lambda x, y: np.sum(x))(np.ones(2), np.ones((2, 2), dtype=np.float32))
    assert g[1].shape == (2, 2) and g[1].dtype == np.float32 and not g[1].any()
    assert grad(lambda x, y: 3.0)(1.0, np.ones(2))[0] == 0.0
    assert value_and_grad(lambda x: 3.0)(1.0) == (3.0, (0.0,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_keep_the_input_dtype(dtype):
    x = np.linspace(0.1, 1, 5, dtype=dtype)
    (g,) = grad(lambda x: np.sum(np.exp(x) * 2.0))(x)
    assert g.dtype == dtype and g.shape == x.shape and g.flags.writeable
    (g,) = grad(lambda x: np.sum(x))(x)  # the sum rule's broadcast view is not handed out
    assert g.flags.writeable and g.dtype == dtype
    (s,) = grad(lambda s: s * s)(dtype(3.0))
    assert type(s) is dtype and s == 6.0
    assert type(grad(lambda s: s * s)(3.0)[0]) is float


@pytest.mark.parametrize("bad", [1, True, np.arange(3), np.array([True, False]), "x", [1.0, 2]])
def test_integer_boolean_and_other_inputs_are_type_errors_naming_the_argument(bad):
    def f(weights, data):
        return np.sum(weights) * 2.0

    with pytest.raises(TypeError, match=r"argument 1 \('data'\)"):
        grad(f)(1.0, bad)


def test_non_scalar_outputs_point_to_jacobian_and_vjp():
    with pytest.raises(TypeError, match="jacobian or vjp"):
        grad(lambda x: x * 2)(np.ones(3))
    # one element in any shape is taken as a scalar, as autograd does
    np.testing.assert_array_equal(grad(lambda x: x[:1])(np.ones(3))[0], [1.0, 0.0, 0.0])


def test_a_failed_call_leaves_nothing_behind():
    def flaky(x, fail):
        y = np.sin(x)
        if fail:
            raise RuntimeError("boom")
        return np.sum(y)

    x = np.array([0.1, 0.2])
    with pytest.raises(RuntimeError, match="boom"):
        grad(flaky, argnums=0)(x, True)
    np.testing.assert_allclose(grad(flaky, argnums=0)(x, False), np.cos(x))


def test_nested_grad_is_free_of_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1, not 2
    def f(x):
        return x * grad(lambda y: x + y)(3.0)[0]

    assert grad(f)(2.0) == (1.0,)
    d2 = grad(lambda x: grad(np.sin)(x)[0])(0.7)[0]
    assert d2 == pytest.approx(-np.sin(0.7))
    x = np.array([0.3, -0.4])
    (h,) = grad(lambda v: np.sum(grad(lambda u: np.sum(np.tanh(u) * u))(v)[0]))(x)
    t = np.tanh(x)
    np.testing.assert_allclose(h, 2 * (1 - t**2) - 2 * x * t * (1 - t**2))


# -- random compositions against central differences ---------------------------------------

UNARY = [np.sin, np.cos, np.tanh, lambda v: np.exp(np.tanh(v)),
         lambda v: np.log(1.5 + np.sin(v)), lambda v: np.sqrt(1.1 + np.cos(v)),
         lambda v: np.tanh(v) ** 2, lambda v: v * 0.5 - 1.0]  # fmt: skip
BINARY = [np.add, np.subtract, np.multiply, lambda a, b: a / (1.5 + np.tanh(b))]
REDUCE = [np.sum, np.mean, lambda v: np.sum(v, axis=0), lambda v: np.mean(v, axis=-1)]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_compositions_match_finite_differences(data):
    shape = data.draw(SHAPES)
    x = data.draw(arrays(shape, -1.5, 1.5))
    w = data.draw(arrays(shape[-1:] if shape else (), -1.5, 1.5))
    steps = data.draw(
        st.lists(
            st.tuples(st.integers(0, 7), st.integers(0, 3), st.booleans()), min_size=1, max_size=6
        )
    )
    reduce = data.draw(st.sampled_from(REDUCE))

    def f(x, w):
        h = x
        for u, b, use_w in steps:
            h = UNARY[u](h)
            h = BINARY[b](h, w if use_w else h)
        return np.sum(reduce(h)) if np.ndim(h) else h

    gx, gw = grad(f)(x, w)
    np.testing.assert_allclose(gx, numeric_grad(f, (x, w), 0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gw, numeric_grad(f, (x, w), 1), rtol=1e-4, atol=1e-6)


def test_a_node_the_caller_keeps_costs_its_own_value():
    # the loss kept in a list by the differentiated function: once grad is done with its
    # tape, the node holds its value, not the arguments of every record before it
    import tracemalloc

    rng = np.random.default_rng(0)
    w = rng.standard_normal((100, 100))
    kept = []

    def f(x):
        h = x
        for _ in range(10):
            h = np.tanh(w @ h)
        loss = np.sum(h**2)
        kept.append(loss)
        return loss

    x = np.ones((100, 20))
    grad(f)(x)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(10):
            grad(f)(x)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # the records' values are 10 arrays of 100 x 20 doubles (160 KB) a call: all of them
    # would be 1.6 MB over ten calls; a kept scalar loss and its node are well under 20 KB
    assert held < 100_000, held
    assert kept[0] * 2.0 == 2.0 * kept[0].value  # a spent node is a constant: its value


def test_trace_releases_the_tape_when_f_raises():
    from tape import Tape
    from tape.transforms.grad import trace

    t = Tape()

    def f(x):
        np.sin(x)
        raise RuntimeError("inside f")

    with pytest.raises(RuntimeError, match="inside f"):
        trace(f, t, (np.ones(2),), {}, (0,))
    assert len(t) == 0


def test_pull_back_seeds_each_output_once_per_appearance_and_skips_the_rest():
    from tape import Tape
    from tape.transforms.grad import pull_back, trace

    t = Tape()
    out, inputs = trace(lambda x, c: (x * 3.0, x * 3.0, c, x), t, (2.0, 5.0), {}, (0,))
    x = inputs[0][2][0]
    y, _, c, same = out
    # y twice: both cotangents add; c is no node of t and x's own cotangent reaches it
    adjoints = pull_back(t, [y, y, c, same], [1.0, 10.0, 100.0, 1000.0])
    assert adjoints[x.pos] == 3.0 * 11.0 + 1000.0
    assert pull_back(t, [y, c], [None, 1.0]) is None  # nothing seeded: all zero


def test_pull_back_seeds_a_written_output_at_its_latest_version():
    from tape import Tape
    from tape.transforms.grad import pull_back, trace

    t = Tape()

    def f(x):
        y = x * 1.0
        y *= x  # y's value is now x ** 2: its adjoint belongs to that version
        return y

    out, inputs = trace(f, t, (np.array([3.0]),), {}, (0,))
    adjoints = pull_back(t, [out], [np.ones(1)])
    np.testing.assert_allclose(adjoints[inputs[0][2][0].pos], [6.0])
