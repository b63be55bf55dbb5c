"""tape.scipy.optimize: SciPy's values, and derivatives of solutions with respect to
``args`` against closed forms and central differences."""

import numpy as np
import pytest

so = pytest.importorskip("scipy.optimize")

from sensitivities.scipy.optimize import implicit_solution  # noqa: E402
from tape import grad, hessian, jacobian, value_and_grad  # noqa: E402
from tape.scipy import optimize  # noqa: E402
from tests.fd import check_grads, numeric_grad  # noqa: E402
from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.strategies import arrays  # noqa: E402


def cube_roots(a):
    return optimize.root(lambda x, a: x**3 - a, np.ones_like(a), args=(a,), tol=1e-12).x


CASES = [
    Case(implicit_solution, lambda data: (data.draw(arrays((3,), 0.5, 5.0)),), cube_roots,
         rtol=1e-5, atol=1e-7, name="implicit_solution (root)"),  # fmt: skip
]
test_implicit_solution_matches_finite_differences = rule_test(CASES, max_examples=5)


# -- closed forms --------------------------------------------------------------------------


def test_root_of_a_cube_is_the_cube_root():
    a = np.array([1.0, 8.0, 27.0, 2.0])
    np.testing.assert_allclose(cube_roots(a), np.cbrt(a), rtol=1e-12)
    g = grad(lambda a: np.sum(cube_roots(a)))(a)[0]
    np.testing.assert_allclose(g, a ** (-2.0 / 3.0) / 3.0, rtol=1e-9)


@pytest.mark.parametrize("method", ["brentq", "brenth", "ridder", "bisect", "toms748"])
def test_bracketing_solvers_match_scipy_and_the_closed_form(method):
    ours, theirs = getattr(optimize, method), getattr(so, method)
    f = lambda x, a: x**3 - a  # noqa: E731
    assert ours(f, 0.0, 5.0, args=(8.0,)) == theirs(f, 0.0, 5.0, args=(8.0,))
    g = grad(lambda a: ours(f, 0.0, 5.0, args=(a,)))(8.0)[0]
    np.testing.assert_allclose(g, 8.0 ** (-2.0 / 3.0) / 3.0, rtol=1e-8)
    x, r = ours(f, 0.0, 5.0, args=(8.0,), full_output=True)
    assert isinstance(r, so.RootResults) and r.converged and x == r.root


def test_root_scalar_returns_root_results_with_a_differentiable_root():
    def root_of(a, method, **kw):
        return optimize.root_scalar(lambda x, a: x**3 - a, args=(a,), method=method, **kw).root

    sol = optimize.root_scalar(lambda x: x**3 - 2.0, bracket=(0.0, 2.0))
    assert isinstance(sol, so.RootResults)
    assert sol.root == so.root_scalar(lambda x: x**3 - 2.0, bracket=(0.0, 2.0)).root
    expected = 27.0 ** (-2.0 / 3.0) / 3.0
    for method, kw in [("brentq", dict(bracket=(0.0, 10.0))), ("newton", dict(x0=2.0, xtol=1e-14)),
                       ("secant", dict(x0=2.0, x1=4.0, xtol=1e-14))]:  # fmt: skip
        d = grad(lambda a, method=method, kw=kw: root_of(a, method, **kw))(27.0)[0]
        assert d == pytest.approx(expected, 1e-8)


def test_fixed_point_matches_central_differences():
    fp = lambda c: optimize.fixed_point(lambda x, c: np.cos(c * x), 0.5, args=(c,))  # noqa: E731
    assert float(fp(1.0)) == pytest.approx(float(so.fixed_point(np.cos, 0.5)), abs=1e-12)
    c = np.array([0.7, 1.0])
    vec = lambda c: optimize.fixed_point(lambda x, c: np.cos(c * x), np.full(2, 0.5),  # noqa: E731
                                         args=(c,), xtol=1e-13)  # fmt: skip
    check_grads(vec, c, rtol=1e-6)
    # x = cos(c x): dx/dc = -x sin(c x) / (1 + c sin(c x))
    x = vec(c)
    expected = -x * np.sin(c * x) / (1 + c * np.sin(c * x))
    np.testing.assert_allclose(np.diag(jacobian(vec)(c)), expected, rtol=1e-8)


def quadratic_minimiser(A, b, **kw):
    def f(x, A, b):
        return 0.5 * x @ A @ x - b @ x

    return optimize.minimize(f, np.zeros(len(b)), args=(A, b), tol=1e-12, **kw)


def test_minimize_of_a_quadratic_is_its_closed_form():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, 2.0])
    w = np.array([1.0, -2.0])
    res = quadratic_minimiser(A, b)
    # (BFGS may stop at tol=1e-12 with "precision loss", status 2, on some BLAS builds)
    assert isinstance(res, so.OptimizeResult) and res.status in (0, 2)
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-7)
    # x = A^-1 b: d(w.x)/db = A^-T w; d(w.x)/dA (the objective sees (A + A')/2) symmetrised
    x, lam = np.linalg.solve(A, b), np.linalg.solve(A.T, w)
    gA, gb = grad(lambda A, b: w @ quadratic_minimiser(A, b).x)(A, b)
    np.testing.assert_allclose(gb, lam, rtol=1e-7)
    np.testing.assert_allclose(gA, -0.5 * (np.outer(lam, x) + np.outer(x, lam)), atol=1e-7)
    # the minimum's derivative is the envelope theorem's: d min / db = -x
    np.testing.assert_allclose(grad(lambda b: quadratic_minimiser(A, b).fun)(b)[0], -x, atol=1e-7)


@pytest.mark.parametrize("jac", ["tape", "callable", True])
def test_minimize_with_every_kind_of_jac_matches_central_differences(jac):
    def loss(x, theta):
        return np.sum(np.cosh(x - theta)) + 0.25 * np.sum(x**4)

    gradient = grad(loss, argnums=0)
    kw = {"tape": {}, "callable": {"jac": gradient}, True: {"jac": True}}[jac]
    fun = value_and_grad(loss, argnums=0) if jac is True else loss
    w = np.array([0.5, -1.0, 2.0])

    def solved(theta):
        return w @ optimize.minimize(fun, np.zeros(3), args=(theta,), method="BFGS",
                                     options={"gtol": 1e-11}, **kw).x  # fmt: skip

    def reference(theta):  # the minimiser to 1e-14, for differences that are not noise
        return w @ so.root(lambda x: gradient(x, theta), np.zeros(3), tol=1e-14).x

    theta = np.array([0.3, -0.8, 1.5])
    expected = numeric_grad(reference, (theta,), 0, eps=1e-5)
    np.testing.assert_allclose(grad(solved)(theta)[0], expected, rtol=1e-6, atol=1e-8)


def test_second_derivative_of_a_solution():
    # x = a^(1/3): d2x/da2 = -2/9 a^(-5/3), reverse over reverse through the implicit rule
    d = grad(lambda a: optimize.brentq(lambda x, a: x**3 - a, 0.0, 10.0, args=(a,)))
    h = hessian(lambda a: np.sum(cube_roots(a)))(np.array([8.0]))
    np.testing.assert_allclose(h, [[-2.0 / 9.0 * 8.0 ** (-5.0 / 3.0)]], rtol=1e-6)
    assert d(8.0)[0] == pytest.approx(8.0 ** (-2.0 / 3.0) / 3.0, rel=1e-10)


def test_forward_mode_matches_reverse_mode():
    a = np.array([1.0, 8.0, 27.0])
    fwd = jacobian(cube_roots, mode="fwd")(a)
    np.testing.assert_allclose(fwd, np.diag(a ** (-2.0 / 3.0) / 3.0), rtol=1e-9)


# -- large problems: matrix-free -----------------------------------------------------------


def test_gmres_and_dense_agree_and_match_central_differences():
    n = 250  # beyond the dense limit: "auto" is matrix-free
    rng = np.random.default_rng(0)
    M = 3.0 * np.eye(n) + 0.05 * rng.standard_normal((n, n))
    b = rng.standard_normal(n)

    def loss(b, implicit="auto"):
        x = optimize.root(lambda x, b: M @ x + 0.1 * np.tanh(x) - b, np.zeros(n), args=(b,),
                          implicit=implicit).x  # fmt: skip
        return np.sum(x**2)

    g = grad(loss)(b)[0]
    np.testing.assert_allclose(g, grad(lambda b: loss(b, "dense"))(b)[0], rtol=1e-8, atol=1e-10)
    for i in (0, 17):
        e = np.zeros(n)
        e[i] = 1e-6
        assert g[i] == pytest.approx((loss(b + e) - loss(b - e)) / 2e-6, rel=1e-5)


# -- errors --------------------------------------------------------------------------------


def test_a_solver_that_did_not_converge_is_an_error_in_the_forward_pass():
    def solve(a):
        return np.sum(optimize.minimize(lambda x, a: np.sum((x - a) ** 4), np.zeros(2),
                                        args=(a,), options={"maxiter": 2}).x)  # fmt: skip

    with pytest.raises(optimize.ConvergenceError, match="minimize did not converge"):
        grad(solve)(np.ones(2))
    # without nodes it is SciPy's result, success False and all
    assert not optimize.minimize(lambda x: np.sum((x - 1) ** 4), np.zeros(2),
                                 options={"maxiter": 2}).success  # fmt: skip


def test_a_singular_jacobian_at_the_solution_is_an_error_in_the_forward_pass():
    F = lambda x, a: np.stack([x[0] + x[1] - a, 2 * (x[0] + x[1] - a)])  # noqa: E731
    with pytest.raises(optimize.SingularJacobianError, match="singular"):
        grad(lambda a: np.sum(optimize.root(F, np.zeros(2), args=(a,), method="lm").x))(1.0)


def test_a_node_closed_over_is_refused_with_advice():
    with pytest.raises(TypeError, match="pass every value it is differentiated in through args"):
        grad(lambda a: optimize.brentq(lambda x: x**3 - a, 0.0, 5.0))(8.0)


def test_bounds_must_be_inactive_and_constraints_are_refused():
    f = lambda x, a: np.sum((x - a) ** 2)  # noqa: E731
    inside = lambda a: optimize.minimize(f, np.zeros(2), args=(a,), bounds=[(-5, 5)] * 2).x[0]  # noqa: E731
    assert grad(inside)(np.array([1.0, 2.0]))[0] == pytest.approx([1.0, 0.0], abs=1e-6)
    on = lambda a: optimize.minimize(f, np.zeros(2), args=(a,), bounds=[(-5, 1.5)] * 2).x[0]  # noqa: E731
    with pytest.raises(NotImplementedError, match="bounds"):
        grad(on)(np.array([1.0, 2.0]))


def test_plain_calls_are_scipys_own():
    res = optimize.root(lambda x: x**3 - 8.0, 1.0)
    assert res.x == pytest.approx(so.root(lambda x: x**3 - 8.0, 1.0).x)
    assert optimize.least_squares is so.least_squares
    assert numeric_grad(lambda a: optimize.brentq(lambda x: x**3 - a, 0, 5), (8.0,), 0) == (
        pytest.approx(8.0 ** (-2 / 3) / 3, rel=1e-6)
    )




def test_scipys_own_solvers_met_through_a_closure_name_the_counterpart_and_args():
    from sensitivities.counterparts import SOLVERS
    from tape import NodeConversionError

    assert SOLVERS["optimize"] == set(optimize.__all__)

    def through_minimize(a):
        return so.minimize(lambda x: np.sum((x - a) ** 2), np.zeros(2)).fun

    def through_root_scalar(a):
        return so.root_scalar(lambda x: x**2 - a, bracket=(0.0, 3.0)).root

    def through_brentq(a):
        return so.brentq(lambda x: x**2 - a, 0.0, 3.0)

    for f, x, name in (
        (through_minimize, np.ones(2), "minimize"),
        (through_root_scalar, 2.0, "root_scalar"),
        (through_brentq, 2.0, "brentq"),
    ):
        with pytest.raises((NodeConversionError, ValueError, AttributeError)) as info:
            grad(f)(x)
        error = info.value
        if isinstance(error, AttributeError):
            # brentq's compiled loop called the function again with our error still
            # pending, where Python's attribute lookups fail (CPython's state is broken)
            pytest.skip(f"SciPy's {name} called its callback with an error pending")
        while not isinstance(error, NodeConversionError):  # minimize wraps it in a ValueError
            error = error.__cause__ or error.__context__  # (NumPy's own, or SciPy's)
            if error is None:
                # brentq's compiled loop reads float(f(x)) without checking for an error,
                # and now and then raises its own ValueError with ours no longer attached
                pytest.skip(f"SciPy's {name} dropped the error raised in its callback")
        message = str(error)
        assert message.startswith(f"scipy.optimize.{name} met a node through the function")
        assert f"tape.scipy.optimize.{name} (same arguments)" in message
        assert "args=(...)" in message
