"""Forward mode: every rule pushes forward, alone and in batches of directions, and
agrees with reverse mode and with finite differences."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tape import Leaf, check_grad, grad, jacobian, jvp, vjp
from tape.transforms.forward import ForwardTape
from tape.transforms.grad import tree_flatten
from tests.fd import numeric_grad
from tests.strategies import arrays
from tests.tape.sweeps import CASES, defined_at, smooth_at


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_rule_pushes_forward_like_finite_differences(case, data):
    args = tuple(case.draw(data))
    assume(defined_at(case, args) and smooth_at(case, args))
    check_grad(case.call, *args, argnums=case.argnums, modes=("fwd",), eps=1e-4,
               rtol=max(10 * case.rtol, 1e-4), atol=max(10 * case.atol, 1e-5))  # fmt: skip


def _real(tree):
    return not any(np.iscomplexobj(x) for x in tree_flatten(tree)[0])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_rule_gives_the_same_jacobian_in_both_modes(case, data):
    # fwd: all directions at once through the pushforwards; rev: all cotangents at once
    # through the sensitivities (forward mode over the linear pullback)
    args = tuple(case.draw(data))
    assume(defined_at(case, args))
    assume(_real(args) and _real(case.call(*args)))
    assume(not any(isinstance(args[i], (list, tuple, dict)) for i in case.argnums))
    fwd = jacobian(case.call, argnums=case.argnums, mode="fwd")(*args)
    rev = jacobian(case.call, argnums=case.argnums, mode="rev")(*args)
    for a, b in zip(tree_flatten(fwd)[0], tree_flatten(rev)[0]):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


# -- jvp --------------------------------------------------------------------------------------


UNARY = [
    np.sin, np.tanh, np.exp, lambda v: np.log(1.5 + np.sin(v)), np.square,
    lambda v: v[::-1] * 0.5, lambda v: np.cumsum(v, axis=-1), lambda v: v / (1 + np.sum(v * v)),
]  # fmt: skip
MIXING = [lambda a, W: a @ W, lambda a, W: np.tanh(a) @ W.T, lambda a, W: a * np.sum(W, axis=0)]


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_jvp_and_vjp_agree_on_random_compositions(data):
    # <u, J v> computed forwards and backwards
    n = data.draw(st.integers(1, 4))
    x = data.draw(arrays((data.draw(st.integers(1, 3)), n), -1.5, 1.5))
    W = data.draw(arrays((n, n), -1.5, 1.5))
    step = st.tuples(st.integers(0, len(UNARY) - 1), st.integers(0, len(MIXING) - 1))
    steps = data.draw(st.lists(step, min_size=1, max_size=5))

    def f(x, W):
        h = x
        for u, m in steps:
            h = MIXING[m](UNARY[u](h), W)
        return h

    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    v = (rng.standard_normal(x.shape), rng.standard_normal(W.shape))
    y, ydot = jvp(f, (x, W), v)
    u = rng.standard_normal(np.shape(y))
    y2, pullback = vjp(f, x, W)
    xbar, Wbar = pullback(u)
    np.testing.assert_allclose(y, y2)
    np.testing.assert_allclose(
        np.sum(u * ydot), np.sum(xbar * v[0]) + np.sum(Wbar * v[1]), rtol=1e-8, atol=1e-10
    )


def test_batched_tangents_are_one_pass_of_many_directions():
    rng = np.random.default_rng(0)
    x, A = rng.standard_normal(3), rng.standard_normal((4, 3))
    f = lambda x: np.tanh(A @ x) * np.sum(x**2)  # noqa: E731
    V = rng.standard_normal((5, 3))
    y, Ydot = jvp(f, (x,), (V,))
    assert Ydot.shape == (5, 4)
    for k in range(5):
        np.testing.assert_allclose(Ydot[k], jvp(f, (x,), (V[k],))[1], rtol=1e-12)
    # one pass: the forward tape records each operation once, whatever the directions
    t = ForwardTape(directions=5)
    leaf = Leaf(t, x)
    t.seed(leaf, V)
    f(leaf)
    assert len(t) == 6  # the leaf, matmul, tanh, power, sum, multiply


def test_jvp_of_several_arguments_structures_and_constants():
    def f(params, x, scale):
        return {"out": scale * np.tanh(x @ params["w"] + params["b"])}

    rng = np.random.default_rng(2)
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal((4, 3))
    dparams = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    y, ydot = jvp(f, (params, x, 2.0), (dparams, None, None))
    assert set(ydot) == {"out"} and ydot["out"].shape == (4, 2)

    def along(t):
        moved = {k: params[k] + t * dparams[k] for k in params}
        return np.sum(f(moved, x, 2.0)["out"] * np.arange(8.0).reshape(4, 2))

    np.testing.assert_allclose(np.sum(ydot["out"] * np.arange(8.0).reshape(4, 2)),
                               numeric_grad(along, (0.0,), 0), rtol=1e-6)  # fmt: skip


def test_outputs_that_do_not_depend_on_the_input_have_zero_tangents():
    y, ydot = jvp(lambda x: (np.ones(2), x * 0.0 + 1.0), (np.ones(3),), (np.ones(3),))
    np.testing.assert_array_equal(ydot[0], np.zeros(2))
    np.testing.assert_array_equal(ydot[1], np.zeros(3))


def test_float32_stays_float32():
    x = np.linspace(0.1, 1.0, 4, dtype=np.float32)
    y, ydot = jvp(lambda x: np.sin(x) * 2.0, (x,), (np.ones(4, dtype=np.float32),))
    assert ydot.dtype == np.float32


def test_complex_functions_push_forward():
    z = np.array([0.3 + 0.4j, -1.0 + 0.2j])
    check_grad(lambda z: np.abs(z * z) + np.real(np.conjugate(z) * 1j), z, modes=("rev", "fwd"))


@pytest.mark.parametrize(
    "tangent, message",
    [(np.ones(2), "does not fit"), (np.ones((2, 2, 3)), "does not fit")],
)
def test_a_tangent_of_the_wrong_shape_is_a_clear_error(tangent, message):
    with pytest.raises(ValueError, match=message):
        jvp(np.sin, (np.ones(3),), (tangent,))


def test_batched_and_single_tangents_do_not_mix():
    with pytest.raises(ValueError, match="every tangent is batched"):
        jvp(np.add, (np.ones(3), np.ones(3)), (np.ones((2, 3)), np.ones(3)))
    with pytest.raises(ValueError, match="number of directions"):
        jvp(np.add, (np.ones(3), np.ones(3)), (np.ones((2, 3)), np.ones((4, 3))))


def test_integer_primals_with_a_tangent_are_type_errors():
    with pytest.raises(TypeError, match="argument 0"):
        jvp(lambda n: n * 2.0, (3,), (1.0,))


def test_forward_over_reverse_and_reverse_over_forward_agree():
    f = lambda x: np.sum(np.sin(x) * np.roll(x, 1))  # noqa: E731
    x, v = np.array([0.2, -0.5, 1.0]), np.array([1.0, 2.0, -1.0])
    fwd_over_rev = jvp(lambda x: grad(f)(x)[0], (x,), (v,))[1]
    rev_over_fwd = grad(lambda x: jvp(f, (x,), (v,))[1])(x)[0]
    np.testing.assert_allclose(fwd_over_rev, rev_over_fwd, rtol=1e-12)


def test_a_forward_tape_is_freed_without_the_collector():
    import gc
    import weakref

    enabled = gc.isenabled()
    gc.disable()
    try:
        t = ForwardTape(directions=2)
        alive = weakref.ref(t)
        del t  # a tape holds no reference to itself: its count drops to zero here
        assert alive() is None
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize(
    "shape, index",
    [
        ((3, 4), (None, 0, Ellipsis, [0, 0])),
        ((3, 4, 5), (0, slice(None), [1, 2])),
        ((3, 4, 5), ([0], None, [1])),
        ((3, 4, 5), (Ellipsis, [0, 1])),
    ],
    ids=["ellipsis of no axis between", "slice between", "none between", "ellipsis first"],
)
def test_advanced_indices_apart_push_forward_like_numpy(shape, index):
    """Advanced indices parted by a slice, None or an Ellipsis (even one that stands for no
    axis) put their axes first: the tangents' too."""
    rng = np.random.default_rng(5)
    x, v = rng.standard_normal(shape), rng.standard_normal(shape)
    value, tangent = jvp(lambda a: a[index], (x,), (v,))
    h = 1e-6
    np.testing.assert_array_equal(value, x[index])
    expected = ((x + h * v)[index] - (x - h * v)[index]) / (2 * h)
    np.testing.assert_allclose(tangent, expected, atol=1e-8)
