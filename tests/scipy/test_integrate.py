"""tape.scipy.integrate: SciPy's values, and derivatives of ODE solutions (continuous
adjoint and replayed steps) and of quadratures against analytic solutions and central
differences; library code calling scipy.integrate itself."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

si = pytest.importorskip("scipy.integrate")

from sensitivities.scipy.integrate import ode_solution  # noqa: E402
from tape import (  # noqa: E402
    Leaf,
    Tape,
    check_grad,
    grad,
    hessian,
    jvp,
    library_code,
    value_and_grad,
    vmap,
)
from tape.scipy import integrate  # noqa: E402
from tests.fd import check_grads, numeric_grad  # noqa: E402
from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.strategies import arrays  # noqa: E402

TIGHT = dict(rtol=1e-10, atol=1e-12)


def decay(y0, k, t_eval, adjoint="continuous"):
    """dy/dt = -k y on (0, 1): y(t) = y0 exp(-k t)."""
    return integrate.solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), y0, t_eval=t_eval, args=(k,),
                               adjoint=adjoint, **TIGHT).y  # fmt: skip


def oscillator(y0, w, T, adjoint="continuous", method="RK45"):
    """y'' = -w^2 y: y(t) = p cos(w t) + v / w sin(w t), for y0 = (p, v)."""
    sol = integrate.solve_ivp(lambda t, y, w: np.stack([y[1], -(w**2) * y[0]]), (0.0, T), y0,
                              args=(w,), adjoint=adjoint, method=method, **TIGHT)  # fmt: skip
    return sol.y[:, -1]


def oscillator_exact(y0, w, T):
    p, v = y0
    position = p * np.cos(w * T) + v / w * np.sin(w * T)
    velocity = -p * w * np.sin(w * T) + v * np.cos(w * T)
    return np.array([position, velocity])


CASES = [
    Case(ode_solution,
         lambda data: (data.draw(arrays((2,), 0.5, 2.0)), data.draw(arrays((), 0.2, 2.0))),
         lambda y0, k: decay(y0, k, [0.3, 1.0]), argnums=(0, 1), rtol=1e-6, atol=1e-8,
         name="ode_solution (solve_ivp)"),  # fmt: skip
]
test_ode_solution_matches_finite_differences = rule_test(CASES, max_examples=3)


@pytest.mark.parametrize("adjoint", ["continuous", "discrete"])
def test_exponential_decay_against_its_solution(adjoint):
    y0, k, t = np.array([2.0, 0.5]), 0.7, np.array([0.0, 0.25, 1.0])
    np.testing.assert_allclose(decay(y0, k, t, adjoint), y0[:, None] * np.exp(-k * t), rtol=1e-9)
    w = np.array([[1.0, -1.0, 2.0], [0.5, 0.0, 1.0]])
    gy0, gk, gt = grad(lambda y0, k, t: np.sum(decay(y0, k, t, adjoint) * w),
                       argnums=(0, 1, 2))(y0, k, t)  # fmt: skip
    e = np.exp(-k * t)
    np.testing.assert_allclose(gy0, (w * e).sum(axis=1), rtol=1e-8)
    np.testing.assert_allclose(gk, -np.sum(w * y0[:, None] * t * e), rtol=1e-8)
    np.testing.assert_allclose(gt, -k * np.sum(w * y0[:, None] * e, axis=0), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("adjoint", ["continuous", "discrete"])
def test_harmonic_oscillator_against_its_solution(adjoint):
    y0, w, T = np.array([1.0, 0.5]), 2.0, 1.3
    np.testing.assert_allclose(oscillator(y0, w, T, adjoint), oscillator_exact(y0, w, T),
                               rtol=1e-8)  # fmt: skip
    c = np.array([1.0, -0.3])
    got = grad(lambda *a: c @ oscillator(*a, adjoint=adjoint), argnums=(0, 1, 2))(y0, w, T)
    for i, g in enumerate(got):  # central differences of the closed form
        expected = numeric_grad(lambda *a: c @ oscillator_exact(*a), (y0, w, T), i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)


def test_values_are_scipys_own():
    f = lambda t, y, k: -k * y + np.sin(t)  # noqa: E731
    t_eval = np.linspace(0, 2, 7)
    for te in (None, t_eval):
        theirs = si.solve_ivp(f, (0, 2), np.array([1.0]), args=(0.5,), t_eval=te)
        for adjoint in ("continuous", "discrete"):
            k = Leaf(Tape(), 0.5)
            sol = integrate.solve_ivp(f, (0, 2), np.array([1.0]), args=(k,), t_eval=te,
                                      adjoint=adjoint)  # fmt: skip
            assert isinstance(sol, type(theirs)) and sol.success
            # the replay repeats SciPy's arithmetic, to the last bits or nearly
            np.testing.assert_allclose(sol.y.value, theirs.y, rtol=1e-13, atol=1e-15)
            np.testing.assert_array_equal(sol.t, theirs.t)


def test_nonlinear_system_in_every_argument_matches_central_differences():
    def lotka_volterra(t, y, theta):
        a, b, c, d = theta
        return np.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])

    def final(y0, theta, t1, adjoint):
        return integrate.solve_ivp(lotka_volterra, (0.0, t1), y0, args=(theta,), adjoint=adjoint,
                                   **TIGHT).y[:, -1]  # fmt: skip

    y0, theta, t1 = np.array([1.0, 0.5]), np.array([1.1, 0.4, 0.8, 0.3]), 2.0
    for adjoint in ("continuous", "discrete"):
        check_grads(lambda *a, adjoint=adjoint: final(*a, adjoint), y0, theta, t1, rtol=1e-5,
                    atol=1e-7)  # fmt: skip


def test_odeint_matches_scipy_and_the_closed_form():
    t = np.array([0.0, 0.5, 1.0, 2.0])
    y0, k = np.array([2.0, 1.0]), 0.5
    f = lambda y, t, k: -k * y  # noqa: E731
    kw = dict(rtol=1e-11, atol=1e-12)
    np.testing.assert_array_equal(integrate.odeint(f, y0, t, args=(k,), **kw),
                                  si.odeint(f, y0, t, args=(k,), **kw))  # fmt: skip
    w = np.arange(8.0).reshape(4, 2)
    loss = lambda y0, k, t: np.sum(integrate.odeint(f, y0, t, args=(k,), **kw) * w)  # noqa: E731
    gy0, gk, gt = grad(loss, argnums=(0, 1, 2))(y0, k, t)
    e = np.exp(-k * (t - t[0]))[:, None]
    np.testing.assert_allclose(gy0, np.sum(w * e, axis=0), rtol=1e-8)
    np.testing.assert_allclose(gk, -np.sum(w * y0 * (t - t[0])[:, None] * e), rtol=1e-8)
    dt = -k * np.sum(w * y0 * e, axis=1)  # each output time; t[0] also starts the solution
    dt[0] -= dt.sum()
    np.testing.assert_allclose(gt, dt, rtol=1e-7, atol=1e-9)
    Y, info = integrate.odeint(f, y0, t, args=(k,), full_output=True, tfirst=False)
    assert Y.shape == (4, 2) and "nst" in info


def test_stiff_method_through_the_continuous_adjoint():
    def stiff(t, y, k):
        return np.stack([-k * y[0], k * y[0] - 50.0 * y[1]])

    def final(k):
        return np.sum(integrate.solve_ivp(stiff, (0, 1), np.array([1.0, 0.0]),
                                          args=(k,), method="BDF", rtol=1e-8,
                                          atol=1e-10).y[:, -1])  # fmt: skip

    assert grad(final)(2.0)[0] == pytest.approx(numeric_grad(final, (2.0,), 0, 1e-4), rel=1e-4)


def test_adjoint_memory_is_flat_in_the_number_of_steps():
    n = 200  # states: the discrete replay keeps every stage of every step

    def peak(T, adjoint):
        y0 = np.linspace(1.0, 2.0, n)
        rates = np.linspace(0.5, 1.5, n)

        def loss(y0):
            sol = integrate.solve_ivp(lambda t, y, r: -r * y + np.cos(t), (0.0, T), y0,
                                      t_eval=[T], args=(rates,), adjoint=adjoint,
                                      rtol=1e-4, atol=1e-6)  # fmt: skip
            return np.sum(sol.y)

        grad(loss)(y0)  # warm: imports and caches do not count
        tracemalloc.start()
        try:
            grad(loss)(y0)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    steps = [len(si.solve_ivp(lambda t, y: -y + np.cos(t), (0, T), np.ones(1), rtol=1e-4,
                              atol=1e-6).t) for T in (4.0, 40.0)]  # fmt: skip
    assert steps[1] > 4 * steps[0]
    continuous = [peak(T, "continuous") for T in (4.0, 40.0)]
    discrete = [peak(T, "discrete") for T in (4.0, 40.0)]
    assert continuous[1] < 1.5 * continuous[0], continuous
    assert discrete[1] > 3 * discrete[0], discrete


def test_errors_in_the_forward_pass():
    with pytest.raises(TypeError, match="through args"):
        grad(lambda k: np.sum(integrate.solve_ivp(lambda t, y: -k * y, (0, 1), np.ones(1)).y))(1.0)
    with pytest.raises(NotImplementedError, match="events"):
        grad(lambda k: np.sum(integrate.solve_ivp(lambda t, y, k: -k * y, (0, 1), np.ones(1),
                                                  args=(k,), events=lambda t, y, k: y[0] - 0.5).y))(
            1.0)  # fmt: skip
    with pytest.raises(NotImplementedError, match="RK45 and RK23"):
        grad(lambda k: np.sum(integrate.solve_ivp(lambda t, y, k: -k * y, (0, 1), np.ones(1),
                                                  args=(k,), method="LSODA",
                                                  adjoint="discrete").y))(1.0)  # fmt: skip
    with pytest.raises(integrate.ConvergenceError, match="failed"):
        grad(lambda k: np.sum(integrate.solve_ivp(lambda t, y, k: k * y**2, (0, 2), np.ones(1),
                                                  args=(k,)).y))(1.0)  # fmt: skip
    assert integrate.dblquad is si.dblquad  # not covered: SciPy's own


def test_scipys_own_solvers_met_through_a_closure_name_the_counterpart_and_args():
    si = pytest.importorskip("scipy.integrate")
    from sensitivities.counterparts import SOLVERS
    from tape import NodeConversionError
    from tape.scipy import integrate as ours

    # quad is redirected to its counterpart whenever a pass records, closures and all:
    # SciPy's own meets no node (SOLVERS, which names the counterpart, lacks it still)
    assert SOLVERS["integrate"] == set(ours.__all__) - {"quad"}  # (dblquad's errors name it)

    def through_odeint(k):
        return si.odeint(lambda y, t: -k * y, 1.0, [0.0, 1.0])[-1, 0]

    def through_solve_ivp(k):
        return si.solve_ivp(lambda t, y: -k * y, (0.0, 1.0), [1.0]).y[0, -1]

    for f, name in ((through_odeint, "odeint"), (through_solve_ivp, "solve_ivp")):
        with pytest.raises(NodeConversionError) as info:
            grad(f)(0.5)
        message = str(info.value)
        assert message.startswith(f"scipy.integrate.{name} met a node through the function")
        assert f"tape.scipy.integrate.{name} (same arguments)" in message
        assert "args=(...)" in message
    # and the fix it names works
    y0 = np.array([1.0])
    g = grad(lambda k: ours.odeint(lambda y, t, k: -k * y, y0, [0.0, 1.0], args=(k,))[-1, 0])
    np.testing.assert_allclose(g(0.5)[0], -np.exp(-0.5), rtol=1e-5)


def test_a_solver_without_a_counterpart_or_handed_the_node_says_what_fits():
    from tape import NodeConversionError

    with pytest.raises(NodeConversionError) as info:
        grad(lambda a: si.dblquad(lambda y, x: a * x, 0.0, 1.0, 0.0, 1.0)[0])(0.5)
    message = str(info.value)
    assert message.startswith("scipy.integrate.dblquad met a node through the function it")
    assert "tape.scipy has no counterpart of scipy.integrate.dblquad" in message
    assert "args=(...)" in message
    # a node handed to SciPy's solver itself: its counterpart runs while a pass records
    g = grad(lambda y0: si.odeint(lambda y, t: -y, y0, [0.0, 1.0])[-1, 0])(np.ones(1))[0]
    np.testing.assert_allclose(g, np.exp(-1.0), rtol=1e-5)
    with library_code(False):  # and with library code switched off, the error names it
        with pytest.raises(NodeConversionError) as info:
            grad(lambda y0: si.odeint(lambda y, t: -y, y0, [0.0, 1.0])[-1, 0])(np.ones(1))
    assert str(info.value).startswith("scipy.integrate.odeint converts its arguments")
    assert "tape.scipy.integrate.odeint" in str(info.value)
    # not a solver, and Python code that converts with np.asarray: recorded
    (g,) = grad(lambda y: si.simpson(y))(np.ones(5))
    np.testing.assert_allclose(g, np.array([1.0, 4.0, 2.0, 4.0, 1.0]) / 3)


@pytest.mark.parametrize(
    "spelling",
    ["tuple in args", "list of tuples in args", "dict in args", "solve_ivp dict"],
)
def test_nodes_nested_in_args_at_any_depth(spelling):
    W0 = np.array([[-0.5, 0.1], [0.0, -0.3]])
    b0 = np.array([0.1, 0.2])
    ts = np.linspace(0.0, 1.0, 5)
    tight = dict(rtol=1e-10, atol=1e-10)

    def loss(W, b):
        if spelling == "tuple in args":
            rhs = lambda y, t, wb: wb[0] @ y + wb[1]  # noqa: E731
            Y = integrate.odeint(rhs, np.ones(2), ts, args=((W, b),), **tight)
        elif spelling == "list of tuples in args":
            rhs = lambda y, t, wb: wb[0][0] @ y + wb[0][1]  # noqa: E731
            Y = integrate.odeint(rhs, np.ones(2), ts, args=([(W, b)],), **tight)
        elif spelling == "dict in args":
            rhs = lambda y, t, p: p["W"] @ y + p["b"]  # noqa: E731
            Y = integrate.odeint(rhs, np.ones(2), ts, args=({"W": W, "b": b},), **tight)
        else:
            rhs = lambda t, y, p: p["W"] @ y + p["b"]  # noqa: E731
            sol = integrate.solve_ivp(rhs, (0.0, 1.0), np.ones(2), args=({"W": W, "b": b},),
                                      **tight)  # fmt: skip
            return np.sum(sol.y[:, -1] ** 2)
        return np.sum(Y[-1] ** 2)

    gW, gb = grad(loss, argnums=(0, 1))(W0, b0)
    np.testing.assert_allclose(gW, numeric_grad(loss, (W0, b0), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, numeric_grad(loss, (W0, b0), 1), rtol=1e-5, atol=1e-6)


# -- quad: SciPy's value, differentiable in the limits, args and closures ------------------


@settings(max_examples=15, deadline=None)
@given(k=st.floats(0.3, 3.0), a=st.floats(-2.0, 1.0), length=st.floats(-3.0, 3.0),
       through=st.sampled_from(["args", "closure"]))  # fmt: skip
def test_quad_of_a_sine_in_its_frequency_and_limits(k, a, length, through):
    b = a + length

    def integral(k, a, b):
        if through == "args":
            return integrate.quad(lambda x, k: np.sin(k * x), a, b, args=(k,))[0]
        return integrate.quad(lambda x: np.sin(k * x), a, b)[0]

    theirs = si.quad(lambda x: np.sin(k * x), a, b)[0]
    value, grads = value_and_grad(integral, argnums=(0, 1, 2))(k, a, b)
    assert value == theirs  # SciPy's own number
    exact_dk = (b * np.sin(k * b) - a * np.sin(k * a)) / k - (np.cos(k * a) - np.cos(k * b)) / k**2
    np.testing.assert_allclose(list(grads), [exact_dk, -np.sin(k * a), np.sin(k * b)],
                               rtol=1e-7, atol=1e-9)  # fmt: skip


INFINITE = [  # (integral of k and a limit, its derivatives by hand)
    (lambda k, c: integrate.quad(lambda x: np.exp(-k * (x - c)), c, np.inf)[0],
     lambda k, c: (-1 / k**2, 0.0)),
    (lambda k, c: integrate.quad(lambda x: np.exp(k * (x - c)) * np.exp(c), -np.inf, c)[0],
     lambda k, c: (-np.exp(c) / k**2, np.exp(c) / k)),
    (lambda k, c: integrate.quad(lambda x: np.exp(-((x - c) ** 2) / k), np.inf, -np.inf)[0],
     lambda k, c: (-0.5 * np.sqrt(np.pi / k), 0.0)),  # reversed limits: minus the integral
]  # fmt: skip


@pytest.mark.parametrize("f, exact", INFINITE)
def test_quad_on_infinite_limits(f, exact):
    k, c = 1.7, 0.4
    np.testing.assert_allclose(list(grad(f, argnums=(0, 1))(k, c)), exact(k, c), rtol=1e-7,
                               atol=1e-9)  # fmt: skip


def test_quad_full_output_points_and_plain_values():
    def integral(k):
        return integrate.quad(lambda x: np.abs(x - k), 0.0, 1.0, points=[0.3], full_output=1)

    out = integral(0.3)
    theirs = si.quad(lambda x: np.abs(x - 0.3), 0.0, 1.0, points=[0.3], full_output=1)
    assert out[0] == theirs[0] and out[2].keys() == theirs[2].keys()
    # d/dk of the integral of |x - k| over [0, 1] is 2 k - 1 (the kink sits on points=)
    np.testing.assert_allclose(grad(lambda k: integral(k)[0])(0.3)[0], 2 * 0.3 - 1, rtol=1e-8)
    assert integrate.quad(np.sin, 0.0, 1.0) == si.quad(np.sin, 0.0, 1.0)  # plain: SciPy's


def test_quad_with_a_singular_end_refines_or_refuses():
    # the integral of k / sqrt(x) over (0, 1] is 2 k: SciPy extrapolates, the rule refines
    g = grad(lambda k: integrate.quad(lambda x: k / np.sqrt(x), 0.0, 1.0)[0])(1.5)[0]
    np.testing.assert_allclose(g, 2.0, rtol=1e-7)
    with pytest.raises(integrate.ConvergenceError, match="change the variable"):
        grad(lambda k: integrate.quad(lambda x: k / x**0.999, 0.0, 1.0)[0])(1.5)
    with pytest.raises(NotImplementedError, match="weight="):
        grad(lambda k: integrate.quad(lambda x: k * x, 0.0, 1.0, weight="cos", wvar=2.0)[0])(1.0)


def test_quad_second_order_and_forward_mode():
    def integral(k, b):
        return integrate.quad(lambda x: np.exp(-k * x**2), 0.0, b)[0]

    check_grad(integral, 0.8, 1.3, order=2, rtol=1e-5, atol=1e-8)
    h = hessian(lambda k: integrate.quad(lambda x: np.exp(-k * x), 0.0, np.inf)[0])(2.0)
    np.testing.assert_allclose(h, 2 / 2.0**3, rtol=1e-8)  # d2/dk2 of 1 / k
    _, slope = jvp(lambda b: integrate.quad(np.cos, 0.0, b)[0], (0.4,), (1.0,))
    np.testing.assert_allclose(slope, np.cos(0.4), rtol=1e-12)


# -- fixed_quad and Gauss-Legendre nodes: constants, SciPy's NumPy code on nodes ----------


def test_fixed_quad_and_legendre_nodes_are_differentiable():
    special = pytest.importorskip("scipy.special")

    def integral(k, b):  # 5 nodes: exact for polynomials of degree 9
        return integrate.fixed_quad(lambda x: k * x**3 + x**2, 0.0, b, n=5)[0]

    k, b = 0.7, 1.6
    np.testing.assert_allclose(integral(k, b), k * b**4 / 4 + b**3 / 3, rtol=1e-13)
    np.testing.assert_allclose(list(grad(integral, argnums=(0, 1))(k, b)),
                               [b**4 / 4, k * b**3 + b**2], rtol=1e-12)  # fmt: skip
    check_grad(integral, k, b, order=2)
    ks = np.array([0.2, 0.7, 1.1])
    per_example = vmap(grad(integral, argnums=(0, 1)), in_axes=(0, None))(ks, b)
    np.testing.assert_allclose(per_example[1], ks * b**3 + b**2, rtol=1e-12)

    def by_nodes(k, roots):  # the same rule, written with the nodes and weights by hand
        x, w = roots(7)
        return np.sum(w * np.exp(k * x))

    for roots in (special.roots_legendre, special.p_roots, np.polynomial.legendre.leggauss):
        np.testing.assert_allclose(grad(lambda k, r=roots: by_nodes(k, r))(0.3)[0],
                                   numeric_grad(by_nodes, (0.3, roots), 0),
                                   rtol=1e-8)  # fmt: skip
        np.testing.assert_allclose(hessian(lambda k, r=roots: by_nodes(k, r))(0.3),
                                   by_nodes_second(0.3), rtol=1e-9)  # fmt: skip


def by_nodes_second(k):
    """d2/dk2 of the integral of exp(k x) over [-1, 1], 2 sinh(k) / k."""
    s, c = np.sinh(k), np.cosh(k)
    return 2 * (s / k - 2 * c / k**2 + 2 * s / k**3)


# -- library code: SciPy's own names, redirected while a pass records -----------------------

INTEGRATING_LIBRARY = """
import numpy as np
import scipy.integrate
from scipy.integrate import odeint, quad, fixed_quad


def decay(y, t, k):
    return -k * y


def model(theta):
    k, y0 = theta[0], theta[1:]
    path = odeint(decay, y0, np.array([0.0, 0.5, 1.0]), args=(k,), rtol=1e-10, atol=1e-12)
    mass = quad(lambda x: np.exp(-k * x), 0.0, 2.0)[0]
    moment = fixed_quad(lambda x: x * np.exp(-k * x), 0.0, 2.0, n=8)[0]
    ivp = scipy.integrate.solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), y0, args=(k,),
                                    rtol=1e-10, atol=1e-12)
    return np.sum(path[-1]) + mass + moment + np.sum(ivp.y[:, -1])
"""


def test_library_code_that_calls_scipy_integrate_is_differentiated():
    import sys
    import types

    lib = types.ModuleType("integrating_library")
    sys.modules[lib.__name__] = lib
    exec(INTEGRATING_LIBRARY, lib.__dict__)
    theta = np.array([0.8, 1.0, 2.0])
    got = grad(lib.model)(theta)[0]
    np.testing.assert_allclose(got, numeric_grad(lib.model, (theta,), 0), rtol=1e-6, atol=1e-8)
