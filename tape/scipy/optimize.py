"""``scipy.optimize``, differentiable in the problem's parameters: ``root``,
``root_scalar``, ``brentq`` (and ``brenth``, ``ridder``, ``bisect``, ``toms748``),
``fixed_point`` and ``minimize`` have SciPy's names, arguments and return types
(``OptimizeResult``, ``RootResults``, floats); every other name is SciPy's own.

SciPy solves on plain values. When ``args`` holds nodes, the solution is recorded as one
Branch, a function of ``args`` by the implicit function theorem: no derivative goes
through the solver's iterations. The Jacobian of the defining equation at the solution
(the residual, ``g(x) - x``, or the objective's gradient, whose Jacobian is the Hessian)
is formed and factored in the forward pass for up to 200 unknowns (``implicit="dense"``),
so that a singular one is an error there; beyond that (``implicit="gmres"``) the reverse
pass solves with it matrix-free, one vector-Jacobian product per GMRES iteration. A solver
that did not converge is an error in the forward pass (``ConvergenceError``), never a
gradient. Pass everything the function differentiates through ``args``.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy import optimize
>>> cube_root = lambda a: optimize.brentq(lambda x, a: x ** 3 - a, 0.0, 10.0, args=(a,))
>>> round(cube_root(8.0), 12)
2.0
>>> round(grad(cube_root)(8.0)[0], 9)  # d a^(1/3) / da = a^(-2/3) / 3
0.083333333
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Callable

import numpy as np

from sensitivities.registry import holds_node, value_of
from sensitivities.scipy.optimize import (  # noqa: F401  (the errors are raised from here)
    ConvergenceError,
    Linearisation,
    SingularJacobianError,
    implicit_solution,
)

from ._derivatives import derivatives
from ._forward import forward, listing

__all__ = ["root", "root_scalar", "brentq", "brenth", "ridder", "bisect", "toms748",
           "fixed_point", "minimize"]  # fmt: skip

DENSE_LIMIT = 200  # unknowns up to which implicit="auto" forms the Jacobian


def _so():
    return importlib.import_module("scipy.optimize")




def _as_args(args: Any) -> tuple:
    return args if isinstance(args, tuple) else (args,)


def _checked(fn: Callable | None, name: str, what: str) -> Callable | None:
    """``fn`` for SciPy's plain iterations: a node in its result means it closes over a
    node (a closure or a global), whose gradient the solution could not carry."""
    if fn is None or not callable(fn):
        return fn

    @functools.wraps(fn)
    def checked(*a, **k):
        out = fn(*a, **k)
        if holds_node(out):
            raise TypeError(
                f"{name}: {what} returns a node it was not given in args (a closure or a "
                "global): pass every value it is differentiated in through args=(...)"
            )
        return out

    return checked


def _first(fn: Callable, index: int = 0) -> Callable:
    return lambda x, *a: fn(x, *a)[index]


def _linearisation(name, implicit, F, x, params, what="Jacobian"):
    if implicit not in ("auto", "dense", "gmres"):
        raise ValueError(f"{name}: implicit must be 'auto', 'dense' or 'gmres', got {implicit!r}")
    if implicit == "gmres" or (implicit == "auto" and np.size(x) > DENSE_LIMIT):
        return Linearisation.gmres(name)
    return Linearisation.dense(name, F, x, params, derivatives, what)


def _solution(name, x, F, args, implicit, what="Jacobian"):
    """The solution ``x`` (plain) as a node of ``args``."""
    plain = value_of(args)
    linear = _linearisation(name, implicit, F, x, plain, what)
    return implicit_solution(x, F, tuple(args), derivatives, linear)


def _not_converged(name: str, message: Any) -> ConvergenceError:
    return ConvergenceError(
        f"{name} did not converge ({message}), so its result has no derivative: tighten or "
        "loosen the tolerances, raise maxiter, or start closer to the solution"
    )


# -- roots ----------------------------------------------------------------------------------


def root(fun, x0, args=(), method="hybr", jac=None, tol=None, callback=None, options=None,
         *, implicit="auto"):  # fmt: skip
    """``scipy.optimize.root``, with ``res.x`` and ``res.fun`` differentiable in the nodes
    of ``args`` (``implicit``: ``"auto"``, ``"dense"`` or ``"gmres"``, how the reverse
    pass solves with the Jacobian at the root)."""
    args = _as_args(args)
    res = _so().root(_checked(fun, "root", "fun"), value_of(x0), args=value_of(args),
                     method=method, jac=_checked(jac, "root", "jac"), tol=tol,
                     callback=callback, options=options)  # fmt: skip
    if not holds_node(args):
        return res
    if not res.success:
        raise _not_converged("root", res.message)
    F = _first(fun) if jac is True else fun
    res.x = _solution("root", res.x, F, args, implicit)
    res.fun = F(res.x, *args)
    return res


def root_scalar(f, args=(), method=None, bracket=None, fprime=None, fprime2=None, x0=None,
                x1=None, xtol=None, rtol=None, maxiter=None, options=None):  # fmt: skip
    """``scipy.optimize.root_scalar``, with ``sol.root`` differentiable in the nodes of
    ``args`` (``d root = -f_args / f_x`` at the root)."""
    args = _as_args(args)
    name = "root_scalar"
    sol = _so().root_scalar(_checked(f, name, "f"), args=value_of(args), method=method,
                            bracket=value_of(bracket), fprime=_checked(fprime, name, "fprime"),
                            fprime2=_checked(fprime2, name, "fprime2"), x0=value_of(x0),
                            x1=value_of(x1), xtol=xtol, rtol=rtol, maxiter=maxiter,
                            options=options)  # fmt: skip
    if not holds_node(args):
        return sol
    if not sol.converged:
        raise _not_converged("root_scalar", sol.flag)
    F = _first(f) if (fprime is True or fprime2 is True) else f
    sol.root = _solution("root_scalar", sol.root, F, args, "dense", "derivative")
    return sol


def _bracketing(method: str) -> Callable:
    scipy_fn = getattr(_so(), method)
    parameters = list(inspect.signature(scipy_fn).parameters)

    def solver(f, a, b, *rest, **kwargs):
        bound = dict(zip(parameters[3:], rest))
        bound.update(kwargs)
        args = _as_args(bound.pop("args", ()))
        full_output = bound.pop("full_output", False)
        x, r = scipy_fn(_checked(f, method, "f"), value_of(a), value_of(b), args=value_of(args),
                        full_output=True, **bound)  # fmt: skip
        if holds_node(args):
            if not r.converged:
                raise _not_converged(method, r.flag)
            x = _solution(method, x, f, args, "dense", "derivative")
            r.root = x
        return (x, r) if full_output else x

    solver.__name__ = solver.__qualname__ = method
    solver.__signature__ = inspect.signature(scipy_fn)
    solver.__doc__ = (
        f"``scipy.optimize.{method}``: a root of ``f`` in ``[a, b]``, differentiable in the "
        "nodes of ``args`` (``d root = -f_args / f_x`` at the root; the bracket has no "
        "derivative). Not converged, or ``f_x = 0`` at the root: an error."
    )
    return solver


brentq = _bracketing("brentq")
brenth = _bracketing("brenth")
ridder = _bracketing("ridder")
bisect = _bracketing("bisect")
toms748 = _bracketing("toms748")


def fixed_point(func, x0, args=(), xtol=1e-08, maxiter=500, method="del2", *, implicit="auto"):
    """``scipy.optimize.fixed_point``: ``x = func(x, *args)``, differentiable in the nodes of
    ``args`` (through ``g(x) - x = 0``; ``I - g_x`` singular at the fixed point is an
    error)."""
    args = _as_args(args)
    x = _so().fixed_point(_checked(func, "fixed_point", "func"), value_of(x0),
                          args=value_of(args), xtol=xtol, maxiter=maxiter,
                          method=method)  # fmt: skip
    if not holds_node(args):
        return x
    return _solution("fixed_point", x, lambda x, *a: func(x, *a) - x, args, implicit)


# -- minimisation ---------------------------------------------------------------------------


def minimize(fun, x0, args=(), method=None, jac=None, hess=None, hessp=None, bounds=None,
             constraints=(), tol=None, callback=None, options=None, *,
             implicit="auto"):  # fmt: skip
    """``scipy.optimize.minimize``, with ``res.x`` and ``res.fun`` differentiable in the
    nodes of ``args``: the minimiser through the stationarity condition ``grad f = 0``
    (its Jacobian is the Hessian, which must be nonsingular there), the minimum through it
    (which gives the envelope theorem). The gradient is ``jac``'s where ``jac`` is a
    function or ``True``, else ``tape.grad`` of ``fun``. With ``bounds`` the minimiser
    must lie inside them; ``constraints`` are not differentiated. SciPy's "precision loss"
    (``status == 2``) is accepted where the gradient vanishes there to 1e-6 (relative to
    the minimum); any other failure is a ``ConvergenceError``."""
    args = _as_args(args)
    res = _so().minimize(_checked(fun, "minimize", "fun"), value_of(x0), args=value_of(args),
                         method=method, jac=_checked(jac, "minimize", "jac"),
                         hess=_checked(hess, "minimize", "hess"),
                         hessp=_checked(hessp, "minimize", "hessp"), bounds=bounds,
                         constraints=constraints, tol=tol, callback=callback,
                         options=options)  # fmt: skip
    if not holds_node(args):
        return res
    objective = _first(fun) if jac is True else fun
    if jac is True:
        gradient = _first(fun, 1)
    elif callable(jac):
        gradient = jac
    else:
        gradient = derivatives.gradient(objective)
    if not res.success and not _stationary(gradient, res, value_of(args)):
        raise _not_converged("minimize", res.message)
    if constraints:
        raise NotImplementedError(
            "minimize: a constrained minimiser is not differentiated (its derivative needs the "
            "active constraints' multipliers); solve without nodes in args, or reformulate"
        )
    if bounds is not None:
        _check_inside(res.x, bounds)
    res.x = _solution("minimize", res.x, gradient, args, implicit, "Hessian")
    res.fun = objective(res.x, *args)
    return res


def _stationary(gradient, res, plain_args) -> bool:
    """A minimiser that SciPy flags for a loss of precision (BFGS's status 2) is accepted
    where the gradient vanishes to working precision there."""
    if res.get("status") != 2 or not np.all(np.isfinite(res.x)):
        return False
    g = np.asarray(value_of(gradient(res.x, *plain_args)), dtype=float)
    return bool(np.max(np.abs(g), initial=0.0) <= 1e-6 * max(1.0, abs(float(res.fun))))


def _check_inside(x, bounds) -> None:
    so = _so()
    if not isinstance(bounds, so.Bounds):
        lb, ub = zip(*[(-np.inf if lo is None else lo, np.inf if hi is None else hi)
                       for lo, hi in bounds])  # fmt: skip
        bounds = so.Bounds(lb, ub)
    lb = np.broadcast_to(np.asarray(bounds.lb, dtype=float), np.shape(x))
    ub = np.broadcast_to(np.asarray(bounds.ub, dtype=float), np.shape(x))
    margin = 1e-8 * (1.0 + np.abs(x))
    active = (x - lb <= margin) | (ub - x <= margin)
    if np.any(active):
        raise NotImplementedError(
            f"minimize: the minimiser lies on its bounds (at indices {np.flatnonzero(active)}), "
            "where it is not a smooth function of args; only an interior minimiser is "
            "differentiated"
        )


__getattr__ = forward("scipy.optimize")
__dir__ = listing("scipy.optimize", __all__)
