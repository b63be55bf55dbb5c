"""tape.transforms.pushforward: a forward rule written for one direction, used by jvp, forward
jacobian, hessian and hvp; the transposed reverse rule of a linear function; the clear
error for a non-linear one without a sensitivity; check_grad checking both rules."""

import numpy as np
import pytest

from tape import (
    MissingRuleError,
    check_grad,
    grad,
    hessian,
    hvp,
    jacobian,
    jvp,
    primitive,
    pushforward,
    sensitivity,
)
from tests.fd import numeric_grad


@primitive
def scaled_cumsum(x, c):
    return c * np.cumsum(x)


CALLS = []


@pushforward(scaled_cumsum, 0, linear=True)
def _(y, xdot, x, c):
    CALLS.append(np.shape(xdot))
    return c * np.cumsum(xdot)


@primitive
def cube(x):
    return x**3


@pushforward(cube, 0)
def _(y, xdot, x):
    return 3 * x**2 * xdot


X = np.array([0.5, -1.0, 2.0])


def test_the_rule_sees_one_direction_of_the_arguments_shape_and_jvp_uses_it():
    CALLS.clear()
    y, ydot = jvp(lambda x: scaled_cumsum(x, 2.0), (X,), (np.ones(3),))
    np.testing.assert_allclose(ydot, [2.0, 4.0, 6.0])
    assert CALLS and all(shape == (3,) for shape in CALLS)
    # many directions at once: the engine batches the rule, which still sees one
    CALLS.clear()
    _, ydots = jvp(lambda x: scaled_cumsum(x, 2.0), (X,), (np.eye(3),))
    np.testing.assert_allclose(ydots, 2.0 * np.tril(np.ones((3, 3))).T)
    assert all(shape == (3,) for shape in CALLS)


def test_forward_jacobian_hessian_and_hvp_use_it():
    J = jacobian(lambda x: scaled_cumsum(x, 2.0), mode="fwd")(X)
    np.testing.assert_allclose(J, 2.0 * np.tril(np.ones((3, 3))))
    f = lambda x: np.sum(cube(x))  # noqa: E731
    np.testing.assert_allclose(jacobian(cube, mode="fwd")(X), np.diag(3 * X**2))
    np.testing.assert_allclose(jvp(f, (X,), (np.ones(3),))[1], np.sum(3 * X**2))
    g = lambda x: np.sum(scaled_cumsum(x, 1.0) ** 3)  # noqa: E731
    H = hessian(g)(X)
    fd = np.stack([numeric_grad(lambda x, k=k: grad(g)(x)[0][k], [X], 0) for k in range(3)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hvp(g)(X, np.array([1.0, 0.0, -1.0])), H @ [1.0, 0.0, -1.0])


def test_a_linear_function_gets_its_reverse_rule_by_transposition():
    f = lambda x: np.sum(np.sin(scaled_cumsum(x, 3.0)))  # noqa: E731
    np.testing.assert_allclose(grad(f)(X)[0], numeric_grad(f, [X], 0), rtol=1e-7)
    check_grad(f, X, order=2)


def test_a_nonlinear_function_without_a_sensitivity_is_a_clear_error_in_reverse_mode():
    with pytest.raises(MissingRuleError, match=r"only a forward rule .* linear=True"):
        grad(lambda x: np.sum(cube(x)))(X)

    # adding a sensitivity later replaces the error without a warning, and check_grad
    # then checks both rules
    @primitive
    def square(x):
        return x * x

    @pushforward(square, 0)
    def _(y, xdot, x):
        return 2 * x * xdot

    with pytest.raises(MissingRuleError):
        grad(lambda x: np.sum(square(x)))(X)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @sensitivity(square, 0)
        def _(y, ybar, x):
            return 2 * x * ybar

    check_grad(lambda x: np.sum(square(x) ** 2), X, order=2)


def test_check_grad_catches_a_wrong_forward_rule():
    @primitive
    def double(x):
        return 2.0 * x

    @sensitivity(double, 0)
    def _(y, ybar, x):
        return 2.0 * ybar

    @pushforward(double, 0)
    def _(y, xdot, x):
        return 3.0 * xdot  # wrong

    check_grad(lambda x: np.sum(double(x)), X, modes=("rev",))
    with pytest.raises(AssertionError, match="fwd"):
        check_grad(lambda x: np.sum(double(x)), X)


def test_registration_errors():
    with pytest.raises(TypeError, match="callable"):
        pushforward(cube, 0)(3)
    with pytest.raises(TypeError):
        pushforward(lambda x: x, 0)  # a plain Python function is never recorded
