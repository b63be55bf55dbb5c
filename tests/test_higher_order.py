"""Derivatives of derivatives: every rule family to second order, nesting to any depth,
and no perturbation confusion in either mode."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tape import check_grad, grad, hessian, jacobian, jvp, value_and_grad, vjp
from tests.fd import numeric_grad
from tests.tape.sweeps import CASES, defined_at, smooth_at

# Rules whose second derivatives are wrong at points the cases draw, as this test found.
# The first derivatives are right there; hessian(np.prod)([0.0, 2.0, 3.0]) shows the first.


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_second_derivatives_of_every_rule_match_finite_differences_of_first(case, data):
    # order=2: the directional derivative that reverse mode computes is itself
    # differentiated in reverse mode and compared with central differences of it
    args = tuple(case.draw(data))
    assume(defined_at(case, args) and smooth_at(case, args))
    check_grad(case.call, *args, argnums=case.argnums, order=2, modes=("rev",), eps=1e-4,
               rtol=max(100 * case.rtol, 1e-3), atol=max(100 * case.atol, 1e-5))  # fmt: skip


# -- nesting ---------------------------------------------------------------------------------


def test_three_levels_of_reverse_mode():
    f = lambda x: np.sin(x) * x  # noqa: E731
    d = lambda g: lambda x: grad(g)(x)[0]  # noqa: E731
    x = 0.7
    # (x sin x)''' = -3 sin x - x cos x
    assert d(d(d(f)))(x) == pytest.approx(-3 * np.sin(x) - x * np.cos(x))
    # and against central differences of the second derivative
    assert d(d(d(f)))(x) == pytest.approx(numeric_grad(d(d(f)), (x,), 0), rel=1e-6)


def test_three_levels_mixing_modes():
    f = lambda x: np.exp(2 * x)  # noqa: E731
    fwd = lambda g: lambda x: jvp(g, (x,), (1.0,))[1]  # noqa: E731
    rev = lambda g: lambda x: grad(g)(x)[0]  # noqa: E731
    for a in (fwd, rev):
        for b in (fwd, rev):
            for c in (fwd, rev):
                assert a(b(c(f)))(0.3) == pytest.approx(8 * np.exp(0.6))


def test_no_perturbation_confusion_in_either_mode():
    # d/dx [x * d/dy (x + y)] = 1: the inner derivative must not see x's perturbation
    for outer in ("rev", "fwd"):
        for inner in ("rev", "fwd"):

            def inner_derivative(x, inner=inner):
                if inner == "rev":
                    return grad(lambda y: x + y)(3.0)[0]
                return jvp(lambda y: x + y, (3.0,), (1.0,))[1]

            f = lambda x: x * inner_derivative(x)  # noqa: E731
            got = grad(f)(2.0)[0] if outer == "rev" else jvp(f, (2.0,), (1.0,))[1]
            assert got == 1.0, (outer, inner)


def test_closures_over_outer_nodes_at_three_levels():
    # f(x) = d/dy [ x * y * d/dz (x * y * z) ] = d/dy [x^2 y^2] = 2 x^2 y, at y = 1.5:
    # 3 x^2, whose derivative is 6 x
    def f(x):
        def g(y):
            return x * y * grad(lambda z: x * y * z)(0.5)[0]

        return grad(g)(1.5)[0]

    assert f(2.0) == pytest.approx(12.0)
    assert grad(f)(2.0)[0] == pytest.approx(12.0)
    assert grad(lambda x: grad(f)(x)[0])(2.0)[0] == pytest.approx(6.0)


def test_grad_of_value_and_grad():
    def energy(x):
        value, (g,) = value_and_grad(lambda v: np.sum(v**3))(x)
        return value + np.sum(g * g)  # sum x^3 + sum 9 x^4

    x = np.array([0.5, -1.0, 2.0])
    (got,) = grad(energy)(x)
    np.testing.assert_allclose(got, 3 * x**2 + 36 * x**3)


def numeric_jacobian(f, x, eps=1e-6):
    """Central differences, one column per element of x."""
    columns = [(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))]
    return np.stack(columns, axis=-1)


def test_jacobian_of_grad_is_the_hessian_in_both_modes():
    def f(x):
        return np.sum(np.sin(x) * x[::-1]) + x[0] ** 3

    x = np.array([0.3, -0.2, 0.9])
    expected = numeric_jacobian(lambda v: grad(f)(v)[0], x)
    for mode in ("fwd", "rev"):
        np.testing.assert_allclose(
            jacobian(lambda v: grad(f)(v)[0], mode=mode)(x), expected, rtol=1e-6
        )
    np.testing.assert_allclose(hessian(f)(x), expected, rtol=1e-6)


def test_a_pullback_inside_grad_is_differentiable():
    def f(x):
        _, pullback = vjp(lambda v: np.sin(v) * v, x)
        return np.sum(pullback(np.ones_like(x))[0] ** 2)

    x = np.array([0.4, 1.1])
    check_grad(f, x)
    np.testing.assert_allclose(grad(f)(x)[0], numeric_grad(f, (x,), 0), rtol=1e-6)


def test_fourth_derivative_of_a_polynomial():
    d = lambda g: lambda x: grad(g)(x)[0]  # noqa: E731
    assert d(d(d(d(lambda x: x**5))))(1.5) == pytest.approx(120 * 1.5)


def test_hessian_of_prod_with_a_zero_keeps_the_cross_derivatives():
    from tape import hessian

    # d2/dxi dxj prod(x) = prod of the others but i and j: at [0, 2, 3] that is x_k
    expected = np.array([[0.0, 3.0, 2.0], [3.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    np.testing.assert_allclose(hessian(np.prod)(np.array([0.0, 2.0, 3.0])), expected)
