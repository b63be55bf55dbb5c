"""``scipy.integrate``, differentiable ODE solutions: ``solve_ivp`` and ``odeint`` have
SciPy's names, arguments and return types (``OdeResult``; an array, or an array and a
dict); every other name is SciPy's own (``np.trapezoid`` is differentiable already).

When the initial state, the times or ``args`` hold nodes, SciPy integrates the plain
values and the solution is recorded as one Branch. Its reverse pass integrates the
adjoint ODE backwards with SciPy's own integrator (the continuous adjoint method), at
``adjoint_rtol``/``adjoint_atol`` (by default the forward tolerances) with
``adjoint_method`` (by default the forward one): its memory is a few states however many
steps are taken. ``solve_ivp(..., adjoint="discrete")`` instead replays SciPy's own
``RK45``/``RK23`` steps on the tape: the exact derivative of SciPy's numbers, with memory
in proportion to the steps, and differentiable again. Pass everything ``fun``
differentiates through ``args``. ``events`` and ``dense_output`` are SciPy's own on plain
values only; a failed integration is an error (``ConvergenceError``), never a gradient.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy import integrate
>>> def y1(k):  # dy/dt = -k y, y(0) = 1: y(1) = exp(-k), dy(1)/dk = -exp(-k)
...     sol = integrate.solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), np.array([1.0]),
...                               t_eval=[1.0], args=(k,), rtol=1e-10, atol=1e-12)
...     return sol.y[0, -1]
>>> round(grad(y1)(0.5)[0], 8), round(float(-np.exp(-0.5)), 8)
(-0.60653066, -0.60653066)
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from sensitivities.registry import holds_node, value_of
from sensitivities.scipy.integrate import OdeProblem, ode_solution, rk_replay
from sensitivities.scipy.optimize import ConvergenceError

from ._derivatives import derivatives
from ._forward import forward, listing

__all__ = ["solve_ivp", "odeint"]


def _si():
    return importlib.import_module("scipy.integrate")




def _checked(fun, name):
    def checked(*a):
        out = fun(*a)
        if holds_node(out):
            raise TypeError(
                f"{name}: the right-hand side returns a node it was not given (a closure or a "
                "global): pass every value it is differentiated in through args=(...)"
            )
        return out

    return checked


def _as_array(x: Any) -> Any:
    # a list or tuple holding nodes becomes one node, so that its gradient has one place
    return np.stack(list(x)) if (type(x) is list or type(x) is tuple) and holds_node(x) else x


def _flattened(args: tuple) -> tuple:
    """``args`` as a flat tuple of leaves (lists, tuples and dicts opened, at any depth),
    the form the solution's record takes its parameters in, and the function that puts
    such leaves back in ``args``' structure for the right-hand side."""
    leaves: list = []

    def flatten(tree: Any) -> None:
        if type(tree) is list or type(tree) is tuple:
            for item in tree:
                flatten(item)
        elif type(tree) is dict:
            for item in tree.values():
                flatten(item)
        else:
            leaves.append(tree)

    def build(tree: Any, it: Any) -> Any:
        if type(tree) is list or type(tree) is tuple:
            return type(tree)(build(item, it) for item in tree)
        if type(tree) is dict:
            return {key: build(item, it) for key, item in tree.items()}
        return next(it)

    flatten(args)
    return tuple(leaves), lambda flat: build(args, iter(flat))


def _adjoint_atol(atol: Any) -> Any:
    return atol if np.ndim(atol) == 0 else float(np.min(atol))


def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, *, adjoint="continuous", adjoint_rtol=None,
              adjoint_atol=None, adjoint_method=None, **options):  # fmt: skip
    """``scipy.integrate.solve_ivp``, with ``sol.y`` differentiable in ``y0``, ``t_span``,
    ``t_eval`` and the nodes of ``args``. ``adjoint="continuous"`` (the adjoint ODE
    integrated backwards at ``adjoint_rtol``, ``adjoint_atol`` with ``adjoint_method``;
    by default the forward ones) or ``"discrete"`` (SciPy's ``RK45``/``RK23`` steps
    replayed on the tape). ``sol.t`` is ``t_eval`` as given, or SciPy's steps with the
    first and last taken from ``t_span``."""
    name = "solve_ivp"
    t_span = _as_array(t_span)
    y0 = _as_array(y0)
    t_eval = _as_array(t_eval)
    args_tuple = () if args is None else (args if isinstance(args, tuple) else tuple(args))
    if not holds_node((t_span, y0, t_eval, _flattened(args_tuple)[0])):
        return _si().solve_ivp(_checked(fun, name), t_span, y0, method=method, t_eval=t_eval,
                               dense_output=dense_output, events=events, vectorized=vectorized,
                               args=args, **options)  # fmt: skip
    if events is not None or dense_output:
        raise NotImplementedError(
            f"{name}: events and dense_output are not differentiated (an event time moves "
            "with the parameters); pass t_eval for the times you need"
        )
    if adjoint not in ("continuous", "discrete"):
        raise ValueError(f"{name}: adjoint must be 'continuous' or 'discrete', got {adjoint!r}")
    t0, t1 = t_span[0], t_span[1]
    leaves, structured = _flattened(args_tuple)
    plain_args = structured(value_of(leaves))
    res = _si().solve_ivp(_checked(fun, name), value_of((t0, t1)), value_of(y0), method=method,
                          t_eval=value_of(t_eval), vectorized=vectorized,
                          args=plain_args or None, **options)  # fmt: skip
    if not res.success:
        raise ConvergenceError(f"{name} failed ({res.message}), so its solution has no derivative")
    if t_eval is not None:
        times = t_eval
    elif holds_node((t0, t1)):
        inner = res.t[1:-1]
        times = np.concatenate([np.reshape(t0, (1,)), inner, np.reshape(t1, (1,))])
    else:
        times = res.t
    if adjoint == "discrete":
        res.y = _replay(fun, method, t0, t1, y0, args_tuple, t_eval, options, res)
    else:
        def rhs(t, y, *flat):
            return fun(t, y, *structured(flat))

        problem = OdeProblem(name, rhs, adjoint_method or method,
                             adjoint_rtol or options.get("rtol", 1e-3),
                             _adjoint_atol(adjoint_atol or options.get("atol", 1e-6)))  # fmt: skip
        res.y = ode_solution(res.y, problem, y0, t0, times, leaves, derivatives)
    res.t = times
    return res


def _replay(fun, method, t0, t1, y0, args, t_eval, options, res):
    si = _si()
    solver = {"RK45": si.RK45, "RK23": si.RK23}.get(method, method)
    if solver not in (si.RK45, si.RK23):
        raise NotImplementedError(
            f"solve_ivp: adjoint='discrete' replays the explicit Runge-Kutta methods RK45 and "
            f"RK23; {getattr(method, '__name__', method)} is differentiated by the continuous "
            "adjoint only"
        )
    steps = res if t_eval is None else si.solve_ivp(
        _checked(fun, "solve_ivp"), value_of((t0, t1)), value_of(y0), method=solver,
        args=value_of(args) or None, **options)  # fmt: skip
    tableau = (solver.A, solver.B, solver.C, solver.P)
    return rk_replay(fun, tableau, steps.t, t0, t1, y0, args, t_eval)


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None,
           rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0,
           mxhnil=0, mxordn=12, mxords=5, printmessg=0, tfirst=False, *, adjoint_rtol=None,
           adjoint_atol=None, adjoint_method="LSODA"):  # fmt: skip
    """``scipy.integrate.odeint``, differentiable in ``y0``, ``t`` (``t[0]`` is the initial
    time) and the nodes of ``args``, by the continuous adjoint: the adjoint ODE is
    integrated backwards with ``solve_ivp(method=adjoint_method)`` (LSODA, as odeint's
    own) at ``adjoint_rtol``, ``adjoint_atol`` (by default odeint's ``rtol``, ``atol``)."""
    name = "odeint"
    y0 = _as_array(y0)
    t = _as_array(t)
    args = args if isinstance(args, tuple) else (args,)
    kw = dict(Dfun=Dfun, col_deriv=col_deriv, ml=ml, mu=mu, rtol=rtol, atol=atol, tcrit=tcrit,
              h0=h0, hmax=hmax, hmin=hmin, ixpr=ixpr, mxstep=mxstep, mxhnil=mxhnil,
              mxordn=mxordn, mxords=mxords, printmessg=printmessg, tfirst=tfirst)  # fmt: skip
    if not holds_node((y0, t, _flattened(args)[0])):
        return _si().odeint(_checked(func, name), y0, t, args=args, full_output=full_output, **kw)
    leaves, structured = _flattened(args)
    Y, info = _si().odeint(_checked(func, name), value_of(y0), value_of(t),
                           args=structured(value_of(leaves)),
                           full_output=True, **kw)  # fmt: skip
    if info["message"] != "Integration successful.":
        raise ConvergenceError(f"{name} failed ({info['message']}), so its solution has no "
                               "derivative")  # fmt: skip

    def f(time, y, *flat):
        p = structured(flat)
        return func(time, y, *p) if tfirst else func(y, time, *p)

    tol = 1.49012e-8
    problem = OdeProblem(name, f, adjoint_method, adjoint_rtol or rtol or tol,
                         _adjoint_atol(adjoint_atol or atol or tol), transposed=True)  # fmt: skip
    Y = ode_solution(Y, problem, y0, t[0], t, leaves, derivatives)
    return (Y, info) if full_output else Y


__getattr__ = forward("scipy.integrate")
__dir__ = listing("scipy.integrate", __all__)
