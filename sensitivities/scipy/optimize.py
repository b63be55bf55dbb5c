"""The rule of a solution defined implicitly: ``x`` with ``F(x, *params) = 0``, recorded
as one Branch whose sensitivities come from the implicit function theorem.

``dF = F_x dx + F_p dp = 0`` at the solution, so ``dx = -F_x^{-1} F_p dp`` and the
adjoint of ``p`` is ``-F_p^T lam`` with ``F_x^T lam = xbar``: one linear solve with the
transposed Jacobian at the solution, then one vector-Jacobian product of ``F``. Roots
(``F`` itself), fixed points (``g(x) - x``) and minimisers (``F`` the gradient, ``F_x``
the Hessian) all take this form. Nothing here differentiates the solver's iterations.

The rule needs derivatives of the user's ``F``; this package never imports an engine, so
the caller hands one in as ``derivatives`` (an object with ``vjp``, ``jvp``, ``jacobian``
and ``gradient``: ``tape.scipy._derivatives``), the pattern of ``sensitivities.checkpoint``.

The linear solve is done by a ``Linearisation`` made in the forward pass: ``dense`` (the
Jacobian formed, LU-factored once and checked for singularity there, so that a singular
Jacobian is an error in the forward pass) or ``gmres`` (matrix-free: each product is one
pullback of ``F``, the Jacobian never formed; for large ``x``).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from ..registry import primitive, pushforward, sensitivity, value_of

__all__ = ["implicit_solution", "Linearisation", "SingularJacobianError", "ConvergenceError"]


class SingularJacobianError(np.linalg.LinAlgError):
    """The Jacobian of the defining equation is singular at the solution: the solution
    is not a differentiable function of the parameters there."""


class ConvergenceError(RuntimeError):
    """A solver did not converge: a derivative of its result would be meaningless."""


def _differentiable(x: Any) -> bool:
    x = value_of(x)
    return isinstance(x, (float, complex, np.inexact)) or (
        isinstance(x, np.ndarray) and x.dtype.kind in "fc"
    )


class Linearisation:
    """``F_x`` at the solution, as the linear solves of the rules need it.

    ``Linearisation.dense(...)`` forms ``F_x`` (one forward pass with ``n`` directions),
    factors it and raises ``SingularJacobianError`` if it is singular to working
    precision; ``Linearisation.gmres(...)`` keeps it matrix-free.
    """

    def __init__(self, name: str, kind: str, lu: Any = None, rtol: float = 1e-10,
                 maxiter: int | None = None) -> None:  # fmt: skip
        self.name, self.kind, self.lu, self.rtol, self.maxiter = name, kind, lu, rtol, maxiter

    @classmethod
    def dense(cls, name: str, F: Callable, x: Any, params: tuple, derivatives: Any,
              what: str = "Jacobian") -> Linearisation:  # fmt: skip
        sla = importlib.import_module("scipy.linalg")
        n = int(np.size(x))
        J = np.reshape(np.asarray(derivatives.jacobian(F, (x,) + tuple(params), 0)), (n, n))
        if not np.all(np.isfinite(J)):
            raise SingularJacobianError(
                f"{name}: the {what} at the solution is not finite, so the solution has no "
                "derivative with respect to the parameters there"
            )
        cond = np.linalg.cond(J) if n else 1.0
        if not cond < 1.0 / (max(n, 1) * np.finfo(float).eps):
            raise SingularJacobianError(
                f"{name}: the {what} at the solution is singular (condition number "
                f"{cond:.3g}), so the solution is not a differentiable function of the "
                "parameters there"
            )
        return cls(name, "dense", lu=sla.lu_factor(J))

    @classmethod
    def gmres(cls, name: str, rtol: float = 1e-10, maxiter: int | None = None) -> Linearisation:
        return cls(name, "gmres", rtol=rtol, maxiter=maxiter)

    def solve_transposed(self, F: Callable, x: Any, params: tuple, derivatives: Any,
                         xbar: Any) -> Any:  # fmt: skip
        """``lam`` with ``F_x^T lam = xbar``, shaped like ``x``."""
        shape = np.shape(x)
        b = np.reshape(np.asarray(xbar, dtype=float), -1)
        if self.kind == "dense":
            sla = importlib.import_module("scipy.linalg")
            lam = sla.lu_solve(self.lu, b, trans=1)
        else:
            spla = importlib.import_module("scipy.sparse.linalg")
            _, pull = derivatives.vjp(F, (x,) + tuple(params), (0,))
            n = b.size

            def matvec(v):
                return np.reshape(np.asarray(pull(np.reshape(v, shape))[0], dtype=float), -1)

            op = spla.LinearOperator((n, n), matvec=matvec, dtype=float)
            lam, info = spla.gmres(op, b, rtol=self.rtol, atol=0.0, restart=min(n, 50),
                                   maxiter=self.maxiter)  # fmt: skip
            if info != 0:
                raise ConvergenceError(
                    f"{self.name}: GMRES did not solve the adjoint equation F_x' lam = xbar "
                    f"({'breakdown' if info < 0 else f'{info} iterations'}); the Jacobian "
                    "at the solution may be singular or ill-conditioned: use implicit='dense'"
                )
        return lam.reshape(shape) if shape else float(lam[0])

    def solve(self, F: Callable, x: Any, params: tuple, derivatives: Any, rhs: Any) -> Any:
        """``v`` with ``F_x v = rhs`` (forward mode), shaped like ``x``; ``rhs`` may hold
        ``k`` directions on a leading axis."""
        shape = np.shape(x)
        n = int(np.size(x))
        r = np.reshape(np.asarray(rhs, dtype=float), (-1, n))
        if self.kind == "dense":
            sla = importlib.import_module("scipy.linalg")
            v = sla.lu_solve(self.lu, r.T).T
        else:
            spla = importlib.import_module("scipy.sparse.linalg")

            def matvec(u):
                t = np.reshape(u, (1,) + shape)
                _, Ju = derivatives.jvp(F, (x,) + tuple(params), (0,), (t,))
                return np.reshape(np.asarray(Ju, dtype=float), -1)

            op = spla.LinearOperator((n, n), matvec=matvec, dtype=float)
            cols = []
            for row in r:
                u, info = spla.gmres(op, row, rtol=self.rtol, atol=0.0, restart=min(n, 50),
                                     maxiter=self.maxiter)  # fmt: skip
                if info != 0:
                    raise ConvergenceError(f"{self.name}: GMRES did not solve F_x v = rhs")
                cols.append(u)
            v = np.stack(cols)
        return np.reshape(v, (-1,) + shape)


@primitive
def implicit_solution(x: Any, F: Callable, params: tuple, derivatives: Any,
                      linear: Linearisation) -> Any:  # fmt: skip
    """``x``, a solution of ``F(x, *params) = 0`` found by a solver, recorded as a
    function of ``params`` (a tuple: the solver's ``args``)."""
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


def _higher_order(*xs: Any) -> bool:
    """Whether nodes of an outer tape are about (a derivative of a derivative, or a
    Jacobian pushing its cotangents forward): then the rules' own steps must be recorded."""
    for x in xs:
        if type(x) is list or type(x) is tuple:
            if _higher_order(*x):
                return True
        elif hasattr(type(x), "__record_call__") and hasattr(x, "tape"):
            return True
    return False


def _jacobian_matrix(F, y, params, derivatives):
    n = int(np.size(value_of(y)))
    return np.reshape(derivatives.jacobian(F, (y,) + tuple(params), 0), (n, n))


def _recorded_only(linear: Linearisation) -> None:
    if linear.kind != "dense":
        raise NotImplementedError(
            f"{linear.name}: derivatives of higher order (or Jacobians by reverse mode) "
            "through a matrix-free implicit solve are not supported: pass implicit='dense'"
        )


@sensitivity(implicit_solution, 2)
def _(y, ybar, x, F, params, derivatives, linear):
    # y, not x: under an outer tape y is the solution as that tape's node, so that the
    # steps below (recorded there) see how the solution moves
    if _higher_order(y, ybar, params):
        _recorded_only(linear)
        J = _jacobian_matrix(F, y, params, derivatives)
        lam = np.reshape(np.linalg.solve(np.transpose(J), np.reshape(ybar, (-1,))), np.shape(y))
    else:
        lam = linear.solve_transposed(F, x, params, derivatives, ybar)
    wrt = [i for i, p in enumerate(params) if _differentiable(p)]
    out: list = [None] * len(params)
    if not wrt:
        return out
    _, pull = derivatives.vjp(F, (y,) + tuple(params), [1 + i for i in wrt])
    for i, g in zip(wrt, pull(-lam)):
        out[i] = g
    return out


@pushforward(implicit_solution, 2)
def _(y, xdots, x, F, params, derivatives, linear):
    wrt = [i for i, t in enumerate(xdots) if t is not None]
    tangents = [xdots[i] for i in wrt]
    _, fdot = derivatives.jvp(F, (y,) + tuple(params), [1 + i for i in wrt], tangents)
    if _higher_order(y, params, fdot):
        _recorded_only(linear)
        J = _jacobian_matrix(F, y, params, derivatives)
        k = np.shape(fdot)[0]
        v = np.linalg.solve(J, np.transpose(np.reshape(fdot, (k, -1))))
        return -np.reshape(np.transpose(v), np.shape(fdot)[:1] + np.shape(y))
    return -linear.solve(F, x, params, derivatives, fdot)
