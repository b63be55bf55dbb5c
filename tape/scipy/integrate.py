"""``scipy.integrate``, differentiable ODE solutions and integrals: ``solve_ivp``,
``odeint`` and ``quad`` have SciPy's names, arguments and return types (``OdeResult``;
an array, or an array and a dict; a tuple); every other name is SciPy's own
(``fixed_quad``, ``simpson``, ``trapezoid`` are NumPy code, differentiable as they are).

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

from sensitivities.registry import canonical, holds_node, value_of
from sensitivities.scipy.integrate import OdeProblem, ode_solution, rk_replay
from sensitivities.scipy.optimize import ConvergenceError

from ._derivatives import derivatives
from ._forward import forward, listing

__all__ = ["solve_ivp", "odeint", "quad"]


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


# -- quad: SciPy's value, the derivative of a fixed rule on SciPy's own subintervals --------

_GAUSS = 21  # points of the Gauss-Legendre rule on each subinterval (QUADPACK's Kronrod: 21)


def quad(func, a, b, args=(), full_output=0, epsabs=1.49e-8, epsrel=1.49e-8, limit=50,
         points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
         complex_func=False):  # fmt: skip
    """``scipy.integrate.quad``, differentiable in ``a``, ``b`` (finite or not), the nodes
    of ``args`` and the nodes ``func`` closes over, to any order.

    The value is SciPy's. Its derivatives are those of a Gauss-Legendre rule on the
    subintervals SciPy's adaptive integration ended with (refined further where that rule
    does not reproduce SciPy's value to its tolerance: a singular end); where it cannot be
    made to, a ``ConvergenceError``, never an inaccurate gradient. ``weight`` and
    ``complex_func`` are SciPy's own, on plain values; under ``vmap`` each example needs
    SciPy's adaptive integration of its own, which it cannot run on a batch.

    >>> import numpy as np
    >>> from tape import grad
    >>> from tape.scipy import integrate
    >>> def decay(k):  # the integral of exp(-k x) over [0, inf) is 1 / k
    ...     return integrate.quad(lambda x: np.exp(-k * x), 0.0, np.inf)[0]
    >>> round(grad(decay)(2.0)[0], 10)  # -1 / k**2
    -0.25
    """
    args = args if isinstance(args, tuple) else (args,)
    met: list = []  # whether the integrand returned a node (a closure over one)

    def plain(x, *p):
        out = func(x, *p)
        if holds_node(out):
            met.append(True)
            return value_of(out)
        return out

    scipy_quad = canonical(_si().quad)  # SciPy's own, not the redirect to this one
    limits = value_of((a, b))
    options = dict(epsabs=epsabs, epsrel=epsrel, limit=limit, points=points, weight=weight,
                   wvar=wvar, wopts=wopts, maxp1=maxp1, limlst=limlst,
                   complex_func=complex_func)  # fmt: skip
    result = scipy_quad(plain, *limits, args=value_of(args), full_output=full_output, **options)
    if not (met or holds_node((a, b, args))):
        return result
    if weight is not None or complex_func:
        raise NotImplementedError("quad: weight= and complex_func= are integrated by SciPy on "
                                  "plain values only")  # fmt: skip
    info = scipy_quad(plain, *limits, args=value_of(args), full_output=1, **options)[2]
    value, abserr = result[0], result[1]
    last = info["last"]
    mapped = _Mapped(func, a, b, args, info["alist"][:last], info["blist"][:last])
    tolerance = 2.0 * max(abserr, epsabs, epsrel * abs(value)) + 1e-14 * abs(value)
    intervals = _refined(mapped, mapped.intervals, value, tolerance, 4 * limit)
    total = mapped.rule(intervals)
    return (value + (total - value_of(total)),) + tuple(result[1:])


class _Mapped:
    """``func`` on a variable of ``[0, 1]``: on finite limits the fraction ``p`` of the
    way from ``a`` to ``b`` (so that the points move with the limits); on infinite ones
    QUADPACK's ``t``, with ``x = a + (1 - t) / t``. SciPy's subintervals are mapped there
    (``intervals``)."""

    def __init__(self, func, a, b, args, alist, blist):
        self.func, self.args = func, args
        lo, hi = value_of((a, b))
        self.sign = -1.0 if lo > hi else 1.0
        self.a, self.b = (b, a) if lo > hi else (a, b)
        lo, hi = min(lo, hi), max(lo, hi)
        self.finite = np.isfinite(lo) and np.isfinite(hi)
        self.low_finite, self.high_finite = np.isfinite(lo), np.isfinite(hi)
        ends = np.stack([alist, blist], axis=-1).astype(float)
        if self.finite:  # (an empty interval: the rule still has a derivative in b - a)
            ends = (ends - lo) / (hi - lo) if hi > lo else np.array([[0.0, 1.0]])
        self.intervals = [tuple(iv) for iv in ends]

    def __call__(self, p):
        """The integrand at ``p``, times the map's Jacobian."""
        f = lambda x: self.func(x, *self.args)  # noqa: E731
        if self.finite:
            return f(self.a + p * (self.b - self.a)) * (self.b - self.a)
        u = (1.0 - p) / p
        if self.low_finite:
            return f(self.a + u) / p**2
        if self.high_finite:
            return f(self.b - u) / p**2
        return (f(u) + f(-u)) / p**2

    def rule(self, intervals, plain=False):
        """The Gauss-Legendre rule summed over ``intervals``; with ``plain``, on the
        integrand's plain values."""
        nodes, weights = _roots_legendre(_GAUSS)
        ends = np.array(intervals, dtype=float)
        half = (ends[:, 1] - ends[:, 0])[:, None] / 2.0
        points = (ends[:, 0][:, None] + half * (nodes + 1.0)).ravel()
        values = [self(p) for p in points]
        values = value_of(values) if plain else values
        return self.sign * np.sum(np.stack(values) * (half * weights).ravel())


def _roots_legendre(n):
    return importlib.import_module("scipy.special").roots_legendre(n)


def _refined(mapped, intervals, target, tolerance, most):
    """SciPy's final subintervals, bisected where the fixed rule disagrees with itself on
    the halves, until it gives SciPy's value to ``tolerance``."""
    def on(interval):
        return float(np.real(value_of(mapped.rule([interval], plain=True))))

    def split(interval):
        lo, hi = interval
        halves = ((lo, 0.5 * (lo + hi)), (0.5 * (lo + hi), hi))
        return halves, [on(half) for half in halves]

    parts = {iv: on(iv) for iv in intervals}
    splits: dict = {}  # each interval's halves and their values, once computed
    while abs(sum(parts.values()) - target) > tolerance:
        if len(parts) >= most:
            raise ConvergenceError(
                "quad: a fixed rule on SciPy's subintervals does not reproduce its value "
                f"({target}) to {tolerance:.2g}, so its derivative would be inaccurate (an "
                "integrand singular at an end?): change the variable of integration"
            )
        for interval in parts:
            if interval not in splits:
                splits[interval] = split(interval)
        worst = max(parts, key=lambda iv: abs(sum(splits[iv][1]) - parts[iv]))
        halves, values = splits.pop(worst)
        del parts[worst]
        parts.update(zip(halves, values))
    return list(parts)


__getattr__ = forward("scipy.integrate")
__dir__ = listing("scipy.integrate", __all__)
