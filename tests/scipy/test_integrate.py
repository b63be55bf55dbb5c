"""tape.scipy.integrate: SciPy's values, and derivatives of ODE solutions (continuous
adjoint and replayed steps) against analytic solutions and central differences."""

import tracemalloc

import numpy as np
import pytest

si = pytest.importorskip("scipy.integrate")

from sensitivities.scipy.integrate import ode_solution  # noqa: E402
from tape import Leaf, Tape, grad  # noqa: E402
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
    assert integrate.quad is si.quad


def test_scipys_own_solvers_met_through_a_closure_name_the_counterpart_and_args():
    si = pytest.importorskip("scipy.integrate")
    from sensitivities.counterparts import SOLVERS
    from tape import NodeConversionError
    from tape.scipy import integrate as ours

    assert SOLVERS["integrate"] == set(ours.__all__)

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
        grad(lambda a: si.quad(lambda x: a * x, 0.0, 1.0)[0])(0.5)
    message = str(info.value)
    assert message.startswith("scipy.integrate.quad met a node through the function it calls")
    assert "tape.scipy has no counterpart of scipy.integrate.quad" in message
    assert "args=(...)" in message
    # a node handed to SciPy's solver itself: the counterpart, as for any SciPy function
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
