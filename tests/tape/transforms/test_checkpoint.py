"""checkpoint and stop_gradient (tape/transforms/checkpoint.py): the same gradients as the
function run plainly (analytic or by central differences), one Branch per checkpointed
call, the forward pass run again in the reverse pass with the same random numbers."""

import numpy as np
import pytest

from tape import (
    Leaf,
    Tape,
    check_grad,
    checkpoint,
    grad,
    hessian,
    jvp,
    stop_gradient,
)
from tape.transforms import checkpoint as checkpoint_module
from tests.fd import numeric_grad


def test_stop_gradient_returns_a_copy_as_np_copy_does():
    held = np.array([1.0, 2.0, 3.0])
    out = stop_gradient(held)
    out[0] = 100.0  # the caller's array keeps its data, as after c = np.copy(held)
    assert held.tolist() == [1.0, 2.0, 3.0] and out.flags.writeable
    out = stop_gradient({"w": held, "s": 2.0})
    assert not np.shares_memory(out["w"], held) and out["s"] == 2.0

    def f(x):
        c = stop_gradient(x)  # x is a Leaf holding the caller's array
        c *= 10.0  # plain NumPy on a constant of its own
        return np.sum(c * x)

    x = np.array([0.5, -1.0])
    (g,) = grad(f)(x)
    assert x.tolist() == [0.5, -1.0]
    np.testing.assert_allclose(g, 10.0 * x)  # d/dx sum(c * x), c = 10 x held constant


def test_stop_gradient_under_compile_grad_is_the_new_inputs_value():
    from tape import compile_grad

    def f(x):
        return np.sum(x * stop_gradient(x) ** 2)  # gradient c ** 2, c = x held constant

    compiled = compile_grad(f, np.array([1.0, 2.0]))
    for x in (np.array([3.0, -1.0]), np.array([0.5, 4.0]), np.array([1.0, 2.0])):
        np.testing.assert_allclose(compiled(x)[0], x**2)
        np.testing.assert_allclose(grad(f)(x)[0], x**2)


# -- checkpoint ---------------------------------------------------------------------------------


def layer(h, W, b):
    return np.tanh(h @ W + b)


def network(params, x, checkpointed):
    step = checkpoint(layer) if checkpointed else layer
    h = x
    for W, b in params:
        h = step(h, W, b)
    return np.sum(h**2)


def test_checkpoint_gives_the_same_gradient_and_records_one_branch():
    rng = np.random.default_rng(5)
    params = [(rng.standard_normal((3, 3)), rng.standard_normal(3)) for _ in range(4)]
    x = rng.standard_normal((2, 3))
    plain = grad(network, argnums=(0, 1))(params, x, False)
    ckpt = grad(network, argnums=(0, 1))(params, x, True)
    for (gW, gb), (cW, cb) in zip(plain[0], ckpt[0]):
        np.testing.assert_array_equal(gW, cW)
        np.testing.assert_array_equal(gb, cb)
    np.testing.assert_array_equal(plain[1], ckpt[1])

    t = Tape()
    h = Leaf(t, x)
    checkpoint(layer)(h, *params[0])
    assert len(t) == 2 and t[1].f is checkpoint_module.checkpointed


def test_checkpoint_recomputes_in_the_reverse_pass():
    calls = []

    def f(x):
        calls.append(1)
        return np.sin(x) * x

    g = grad(lambda x: np.sum(checkpoint(f)(x)))(np.array([0.3, 0.4]))[0]
    np.testing.assert_allclose(g, np.sin([0.3, 0.4]) + [0.3, 0.4] * np.cos([0.3, 0.4]))
    assert len(calls) == 2  # once forwards, once again backwards


def test_checkpoint_to_second_order_and_in_forward_mode():
    f = lambda x: np.sum(checkpoint(lambda v, s: np.exp(np.sin(v) * s))(x, 2.0))  # noqa: E731
    g = lambda x: np.sum(np.exp(np.sin(x) * 2.0))  # noqa: E731
    x = np.array([0.1, -0.7, 0.4])
    np.testing.assert_allclose(hessian(f)(x), hessian(g)(x), rtol=1e-12)
    np.testing.assert_allclose(grad(lambda x: grad(f)(x)[0][1])(x)[0], hessian(g)(x)[1], rtol=1e-12)
    np.testing.assert_allclose(jvp(f, (x,), (np.ones(3),))[1], jvp(g, (x,), (np.ones(3),))[1])
    check_grad(f, x, order=2)


def test_nested_checkpoints_and_keyword_constants():
    inner = checkpoint(lambda x, scale=1.0: np.tanh(x) * scale)
    outer = checkpoint(lambda x: inner(inner(x, scale=2.0), scale=0.5) + x)
    x = np.array([0.2, 0.5])
    check_grad(lambda x: np.sum(outer(x)), x, order=2)


def test_checkpoint_refuses_a_closure_over_a_node_of_its_tape():
    def f(x):
        return checkpoint(lambda v: v * x)(np.ones(2) * x)  # closes over x

    with pytest.raises(TypeError, match="pass it as an argument"):
        grad(lambda x: np.sum(f(x)))(1.0)


# -- stop_gradient and has_aux -----------------------------------------------------------------


def test_stop_gradient_in_both_modes_and_in_containers():
    assert grad(lambda x: x * stop_gradient(x))(3.0) == (3.0,)
    assert jvp(lambda x: x * stop_gradient(x), (3.0,), (1.0,)) == (9.0, 3.0)
    held = stop_gradient({"a": Leaf(Tape(), np.ones(2)), "b": [2.0]})
    assert type(held["a"]) is np.ndarray and held["b"] == [2.0]
    # it stops every level: the outer derivative of x * c(x) is c, not 2x
    assert grad(lambda x: grad(lambda y: y * stop_gradient(x * x))(1.0)[0])(3.0) == (0.0,)


# -- random numbers, replayed -----------------------------------------------------------


def _dropout(x, w, rng=None):
    keep = (rng.random(x.shape) if rng is not None else np.random.rand(*x.shape)) > 0.5  # noqa: NPY002
    return np.tanh(x * w) * keep / 0.5


@pytest.mark.parametrize("stream", ["global", "generator", "random_state"])
def test_checkpoint_replays_the_random_numbers_of_the_forward_pass(stream):
    x, w = np.linspace(-1.0, 1.0, 8), 0.7

    def run(wrap):
        made = {
            "global": lambda: None,
            "generator": lambda: np.random.default_rng(3),
            "random_state": lambda: np.random.RandomState(3),
        }[stream]
        np.random.seed(0)  # noqa: NPY002
        rng = made()
        block = wrap(_dropout)
        g = grad(lambda x: np.sum(block(x, w, rng) ** 2))(x)[0]
        after = np.random.rand() if rng is None else rng.random()  # noqa: NPY002
        return g, after

    (plain, after_plain), (checkpointed, after_checkpointed) = run(lambda f: f), run(checkpoint)
    np.testing.assert_array_equal(checkpointed, plain)  # the same mask, the same gradient
    assert after_checkpointed == after_plain  # the stream stands where one forward pass left it
    # and the gradient is the dropout program's, by differences with that mask kept fixed
    np.random.seed(0)  # noqa: NPY002
    rng = {"global": None, "generator": np.random.default_rng(3),
           "random_state": np.random.RandomState(3)}[stream]  # fmt: skip
    keep = (rng.random(x.shape) if rng is not None else np.random.rand(*x.shape)) > 0.5  # noqa: NPY002
    fixed = lambda x: np.sum((np.tanh(x * w) * keep / 0.5) ** 2)  # noqa: E731
    np.testing.assert_allclose(plain, numeric_grad(fixed, (x,), 0), rtol=1e-6, atol=1e-9)


def test_checkpoint_of_a_function_that_draws_from_a_generator_it_closes_over_raises():
    rng = np.random.default_rng(0)
    block = checkpoint(lambda x: x * (rng.random(x.shape) > 0.5))
    with pytest.raises(RuntimeError, match=r"checkpoint.*another value.*as an argument"):
        grad(lambda x: np.sum(block(x) ** 2))(np.ones(16))
    assert grad(lambda x: np.sum(x**2))(np.ones(2))[0].tolist() == [2.0, 2.0]
