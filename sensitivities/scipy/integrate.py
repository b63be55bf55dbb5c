"""The rules of ODE solutions: ``y(t_i)`` for ``dy/dt = f(t, y, *p)``, ``y(t0) = y0``,
as a function of ``y0``, ``t0``, the output times ``t_i`` and the parameters ``p``.

Two ways, as ``tape.scipy.integrate`` offers them:

- the *continuous adjoint* (``ode_solution``, one Branch): the reverse pass integrates
  the adjoint system backwards with SciPy's own integrators,

      dy/dt = f,   da/dt = -a' f_y,   dpbar/dt = -a' f_p,

  from the last output time to ``t0``, adding each output's adjoint ``ybar_i`` to ``a``
  at its time and restarting ``y`` there from the stored forward value. Then
  ``y0bar = a(t0)``, ``pbar = pbar(t0)``, ``t_ibar = ybar_i . f(t_i, y_i)`` and
  ``t0bar = -a(t0) . f(t0, y0)``. Nothing of the forward steps is kept, so the memory is
  that of a few states, however many steps the solvers take; the gradient is as accurate
  as the adjoint integration's tolerances (``adjoint_rtol``, ``adjoint_atol``). Where
  nodes of an outer tape are about (forward mode, second order), the same sweep is
  recorded, its backward integrations replayed as RK45 steps (``_recorded_sweep``).
- the *discrete* derivative (``rk_replay``, recorded step by step): SciPy's explicit
  Runge-Kutta steps (``RK23``, ``RK45``) replayed on the nodes, on the step sizes SciPy
  chose, with SciPy's dense output at the requested times: the exact derivative of the
  numbers SciPy computes, at a memory cost proportional to the steps.

Derivatives of ``f`` come from the caller, as ``derivatives`` (``vjp``; see
``tape.scipy._derivatives``): this package never imports an engine.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from ..registry import preprocess, primitive, sensitivity, value_of
from .optimize import ConvergenceError, _differentiable, _higher_order

__all__ = ["ode_solution", "OdeProblem", "rk_replay", "as_vector"]


def as_vector(out: Any) -> Any:
    """A right-hand side's result as one array (SciPy takes lists of numbers too)."""
    if type(out) is list or type(out) is tuple:
        return np.stack([np.asarray(o) if not hasattr(o, "tape") else o for o in out])
    return out


class OdeProblem:
    """What the adjoint needs besides the arrays: ``f(t, y, *params)``, how SciPy lays
    the output out (``transposed``: ``odeint``'s ``(len(t), n)`` instead of
    ``solve_ivp``'s ``(n, len(t))``), and the backward integration's method and
    tolerances."""

    def __init__(self, name: str, f: Callable, method: Any, rtol: float, atol: Any,
                 transposed: bool = False) -> None:  # fmt: skip
        self.name, self.f, self.method = name, f, method
        self.rtol, self.atol, self.transposed = rtol, atol, transposed
        self.steps = 0  # right-hand sides evaluated by the last backward integration

    def rhs(self, t: float, y: Any, params: tuple) -> Any:
        return np.asarray(value_of(as_vector(self.f(t, y, *params))), dtype=float)


@primitive
def ode_solution(Y: Any, problem: OdeProblem, y0: Any, t0: Any, times: Any, params: tuple,
                 derivatives: Any) -> Any:  # fmt: skip
    """``Y``, the solution SciPy computed at ``times`` (the forward pass), recorded as a
    function of ``y0``, ``t0``, ``times`` and ``params`` (a tuple: the solver's ``args``)."""
    return np.array(Y, copy=True)


def _adjoint_sweep(problem, Y, ybar, y0, t0, times, params, derivatives):
    integrate = importlib.import_module("scipy.integrate")
    Y = np.asarray(Y, dtype=float)
    ybar = np.asarray(ybar, dtype=float)
    if problem.transposed:
        Y, ybar = Y.T, ybar.T
    times = np.asarray(times, dtype=float)
    t0 = float(t0)
    n = Y.shape[0]
    wrt = [i for i, p in enumerate(params) if _differentiable(p)]
    shapes = [np.shape(params[i]) for i in wrt]
    sizes = [int(np.size(params[i])) for i in wrt]
    f = problem.f
    problem.steps = 0

    def augmented(t, z):
        problem.steps += 1
        y, a = z[:n], z[n : 2 * n]

        def g(y, *p):
            return as_vector(f(t, y, *p))

        fy, pull = derivatives.vjp(g, (y,) + tuple(params), [0] + [1 + i for i in wrt])
        grads = pull(a)
        parts = [np.asarray(fy, dtype=float).ravel(), -np.asarray(grads[0], dtype=float).ravel()]
        parts += [-np.asarray(gp, dtype=float).ravel() for gp in grads[1:]]
        return np.concatenate(parts)

    a = np.zeros(n)
    pbar = np.zeros(sum(sizes))
    tbar = np.zeros(len(times))
    for i in range(len(times) - 1, -1, -1):
        ti, yi = float(times[i]), Y[:, i]
        tbar[i] = ybar[:, i] @ problem.rhs(ti, yi, params)
        a = a + ybar[:, i]
        t_prev = float(times[i - 1]) if i > 0 else t0
        if t_prev == ti:
            continue
        z = np.concatenate([yi, a, pbar])
        sol = integrate.solve_ivp(augmented, (ti, t_prev), z, method=problem.method,
                                  t_eval=[t_prev], rtol=problem.rtol,
                                  atol=problem.atol)  # fmt: skip
        if not sol.success:
            raise ConvergenceError(
                f"{problem.name}: the adjoint integration from t={ti} back to t={t_prev} "
                f"failed ({sol.message})"
            )
        z = sol.y[:, -1]
        a, pbar = z[n : 2 * n], z[2 * n :]
    t0bar = -(a @ problem.rhs(t0, np.asarray(y0, dtype=float), params))
    pbars: list = [None] * len(params)
    offset = 0
    for i, shape, size in zip(wrt, shapes, sizes):
        g = pbar[offset : offset + size].reshape(shape)
        pbars[i] = g if shape else float(g)
        offset += size
    return {"y0": a.reshape(np.shape(y0)), "t0": t0bar, "times": tbar, "params": pbars}


def _recorded_sweep(problem, Y, ybar, y0, t0, times, params, derivatives):
    """The adjoint sweep with nodes of an outer tape about (a derivative of a derivative,
    forward mode, a Jacobian by reverse mode): each backward integration is SciPy's RK45
    steps replayed on those nodes (``rk_replay``), so that the sweep is recorded there.
    Its values agree with the plain sweep's to the adjoint tolerances."""
    integrate = importlib.import_module("scipy.integrate")
    if problem.transposed:
        Y, ybar = np.transpose(Y), np.transpose(ybar)
    n = np.shape(Y)[0]
    wrt = [i for i, p in enumerate(params) if _differentiable(p)]
    f = problem.f
    tableau = (integrate.RK45.A, integrate.RK45.B, integrate.RK45.C, integrate.RK45.P)

    def augmented(t, z, *p):
        y, a = z[:n], z[n : 2 * n]
        fy, pull = derivatives.vjp(lambda y, *q: as_vector(f(t, y, *q)), (y,) + tuple(p),
                                   [0] + [1 + i for i in wrt])  # fmt: skip
        grads = pull(a)
        return np.concatenate([np.reshape(fy, (-1,))] + [-np.reshape(g, (-1,)) for g in grads])

    def plain_augmented(t, z):
        return np.asarray(value_of(augmented(t, z, *value_of(params))), dtype=float)

    a = ybar[:, -1] * 0.0
    pbar = [np.reshape(value_of(params[i]), (-1,)) * 0.0 for i in wrt]
    tbar = [None] * np.shape(times)[0]
    for i in range(len(tbar) - 1, -1, -1):
        ti, yi = times[i], Y[:, i]
        tbar[i] = np.sum(ybar[:, i] * as_vector(f(ti, yi, *params)))
        a = a + ybar[:, i]
        t_prev = times[i - 1] if i > 0 else t0
        if value_of(t_prev) == value_of(ti):
            continue
        z = np.concatenate([yi, a] + pbar)
        grid = integrate.solve_ivp(plain_augmented, (float(value_of(ti)), float(value_of(t_prev))),
                                   np.asarray(value_of(z), dtype=float), method="RK45",
                                   rtol=problem.rtol, atol=problem.atol).t  # fmt: skip
        z = rk_replay(augmented, tableau, grid, ti, t_prev, z, tuple(params))[:, -1]
        a, offset = z[n : 2 * n], 2 * n
        for k, i_p in enumerate(wrt):
            size = int(np.size(value_of(params[i_p])))
            pbar[k] = z[offset : offset + size]
            offset += size
    t0bar = -np.sum(a * as_vector(f(t0, y0, *params)))
    pbars: list = [None] * len(params)
    for k, i_p in enumerate(wrt):
        pbars[i_p] = np.reshape(pbar[k], np.shape(value_of(params[i_p])))
    return {"y0": np.reshape(a, np.shape(value_of(y0))), "t0": t0bar, "times": np.stack(tbar),
            "params": pbars}  # fmt: skip


@preprocess(ode_solution)
def _(y, ybar, Y, problem, y0, t0, times, params, derivatives):
    # y, not Y: under an outer tape y is the solution as that tape's node
    if _higher_order(y, ybar, y0, t0, times, params):
        return _recorded_sweep(problem, y, ybar, y0, t0, times, params, derivatives)
    return _adjoint_sweep(problem, Y, ybar, y0, t0, times, params, derivatives)


sensitivity(ode_solution, 2)(lambda y, ybar, Y, problem, y0, t0, times, params, derivatives, pre:
                             pre["y0"])  # fmt: skip
sensitivity(ode_solution, 3)(lambda y, ybar, Y, problem, y0, t0, times, params, derivatives, pre:
                             pre["t0"])  # fmt: skip
sensitivity(ode_solution, 4)(lambda y, ybar, Y, problem, y0, t0, times, params, derivatives, pre:
                             pre["times"].reshape(np.shape(times)))  # fmt: skip
sensitivity(ode_solution, 5)(lambda y, ybar, Y, problem, y0, t0, times, params, derivatives, pre:
                             pre["params"])  # fmt: skip


# -- the discrete derivative: SciPy's steps replayed on nodes -------------------------------


def rk_replay(f: Callable, tableau: tuple, grid: Any, t0: Any, t1: Any, y0: Any, params: tuple,
              t_eval: Any = None) -> Any:  # fmt: skip
    """The explicit Runge-Kutta steps SciPy took (its step ends ``grid``, from ``t0`` to
    ``t1``), replayed in NumPy on whatever ``y0``, ``params`` and the times are, nodes
    included: ``(n, len(t_eval))`` at ``t_eval`` through SciPy's dense output, or at
    every step end where ``t_eval`` is None. ``tableau`` is ``(A, B, C, P)`` of
    ``scipy.integrate.RK23`` or ``RK45``."""
    A, B, C, P = tableau
    grid = np.asarray(value_of(grid), dtype=float)
    direction = 1.0 if grid[-1] >= grid[0] else -1.0
    # the step ends as functions of t0 and t1: interior ones keep SciPy's offsets from t0
    ts = [t0] + [t0 + (g - grid[0]) for g in grid[1:-1]] + [t1]
    te = None if t_eval is None else np.asarray(value_of(t_eval), dtype=float)
    y = y0
    fy = as_vector(f(ts[0], y, *params))
    outs = [y0] if t_eval is None else []
    e = 0
    for k in range(len(grid) - 1):
        t, h = ts[k], ts[k + 1] - ts[k]
        K = [fy]
        for s in range(1, len(C)):
            dy = np.stack(K, axis=-1) @ A[s, :s] * h
            K.append(as_vector(f(t + C[s] * h, y + dy, *params)))
        y_new = y + h * (np.stack(K, axis=-1) @ B)
        f_new = as_vector(f(ts[k + 1], y_new, *params))
        K.append(f_new)
        if t_eval is None:
            outs.append(y_new)
        else:
            Q = None
            while e < len(te) and direction * (te[e] - grid[k + 1]) <= 0:
                Q = np.stack(K, axis=-1) @ P if Q is None else Q
                x = (t_eval[e] - t) / h
                powers = [x]
                for _ in range(P.shape[1] - 1):
                    powers.append(powers[-1] * x)
                outs.append(y + h * (Q @ np.stack(powers)))
                e += 1
        y, fy = y_new, f_new
    return np.stack(outs, axis=-1)
