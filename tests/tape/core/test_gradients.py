"""The tuple grad returns: every tuple behaviour, and a clear error where NumPy meets it."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import compile_grad, grad, jacobian, tree_map, value_and_grad

FIX = r"\(g,\) = grad\(f\)\(x\).*argnums=0"


def loss(x):
    return np.sum(x**2)


X = np.array([1.0, 2.0, 3.0])


def test_a_tuple_in_every_way():
    g = grad(loss)(X)
    assert isinstance(g, tuple) and len(g) == 1
    (gx,) = g
    np.testing.assert_allclose(gx, 2 * X)
    np.testing.assert_allclose(g[0], 2 * X)
    assert g[:1][0] is g[0]
    assert repr(g) == repr((g[0],)) and str(g) == str((g[0],))
    two = grad(lambda a, b: a * b)(2.0, 3.0)
    assert two == (3.0, 2.0) and (3.0, 2.0) == two
    assert hash(two) == hash((3.0, 2.0))
    assert {two: 1}[(3.0, 2.0)] == 1
    assert two + (1.0,) == (3.0, 2.0, 1.0) and (1.0,) + two == (1.0, 3.0, 2.0)
    assert list(two) == [3.0, 2.0] and tuple(two) == (3.0, 2.0)
    assert pickle.loads(pickle.dumps(two)) == two
    value, grads = value_and_grad(lambda a, b: a * b)(2.0, 3.0)
    assert value == 6.0 and grads == (3.0, 2.0)


@pytest.mark.parametrize(
    "use",
    [
        lambda g: X - g,
        lambda g: X - 0.1 * g,
        lambda g: g * 0.1,
        lambda g: 2 * g,
        lambda g: g / 2,
        lambda g: -g,
        lambda g: g + 1.0,
        lambda g: 1.0 + g,
        lambda g: X @ g,
        lambda g: np.float64(1.0) - g,
        lambda g: np.asarray(g),
        lambda g: np.array(g),
        lambda g: np.atleast_1d(g),
        lambda g: np.linalg.norm(g),
        lambda g: np.sqrt(g),
        lambda g: np.stack([g, g]),
        lambda g: np.asarray([g]),
        lambda g: float(g),
    ],
)
def test_numpy_meeting_the_tuple_says_how_to_take_the_gradient_out(use):
    with pytest.raises(TypeError, match=FIX):
        use(grad(loss)(X))
    with pytest.raises(TypeError, match=FIX):
        use(value_and_grad(loss)(X)[1])
    with pytest.raises(TypeError, match=FIX):
        use(compile_grad(loss, X)(X))


def test_the_message_names_the_tuple_and_its_length():
    with pytest.raises(TypeError) as caught:
        X - grad(lambda x, y: np.sum(x * y))(X, X)
    message = str(caught.value)
    assert message.startswith("NumPy arithmetic met the tuple that grad returns")
    assert "(2 gradients)" in message and "`gx, gy = grad(f)(x, y)`" in message


def test_a_bare_gradient_with_an_int_argnums_is_an_array():
    g = grad(loss, argnums=0)(X)
    assert type(g) is np.ndarray
    np.testing.assert_allclose(X - 0.1 * g, 0.8 * X)


def test_the_tuple_inside_other_transforms_is_a_container():
    h = jacobian(lambda x: grad(loss)(x))(X)  # a tuple output: one Jacobian per entry
    np.testing.assert_allclose(h[0], 2 * np.eye(3))
    params = (X, X + 1)
    grads = grad(lambda a, b: loss(a) + loss(b))(*params)
    stepped = tree_map(lambda p, g: p - 0.5 * g, params, grads)
    np.testing.assert_allclose(stepped[0], 0 * X)
    np.testing.assert_allclose(stepped[1], 0 * X)


def test_scipy_jac_true_gets_the_message():
    optimize = pytest.importorskip("scipy.optimize")
    with pytest.raises(TypeError, match=FIX):
        optimize.minimize(value_and_grad(loss), X, jac=True)
    result = optimize.minimize(value_and_grad(loss, argnums=0), X, jac=True)
    np.testing.assert_allclose(result.x, 0 * X, atol=1e-6)


UFUNCS = [u for u in vars(np).values() if isinstance(u, np.ufunc) and u.nin in (1, 2)]


@pytest.mark.parametrize("ufunc", UFUNCS, ids=[u.__name__ for u in UFUNCS])
def test_every_ufunc_refuses_the_tuple_in_every_position(ufunc):
    g = grad(lambda a, b: np.sum(a * b))(X, X)
    positions = [(g,)] if ufunc.nin == 1 else [(g, X), (X, g), (1.0, g), (g, 2)]
    for args in positions:
        with pytest.raises(TypeError, match=FIX):
            ufunc(*args)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.sampled_from([(), (3,), (2, 2)]))
def test_tuple_behaviours_for_any_number_of_arguments(n, shape):
    args = [np.full(shape, float(i + 1)) for i in range(n)]
    f = lambda *a: sum(np.sum(x**2) for x in a)  # noqa: E731
    g = grad(f)(*args)
    plain = tuple(2 * a for a in args)
    assert isinstance(g, tuple) and len(g) == n
    for got, want in zip(g, plain):
        np.testing.assert_array_equal(got, want)
    *head, last = g
    np.testing.assert_array_equal(last, plain[-1])
    assert repr(g) == repr(tuple(g)) and g[::-1] == tuple(g)[::-1] or shape
    with pytest.raises(TypeError, match=r"\(\d gradients?\)"):
        np.asarray(g)
