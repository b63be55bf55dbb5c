"""What the solver rules (``sensitivities.scipy.optimize``, ``sensitivities.scipy.integrate``)
need of the engine: derivatives of the user's own function (the residual, the objective,
the right-hand side of an ODE) at a point. The rules are plain NumPy and never import
``tape``; the counterparts in ``tape.scipy`` hand this object in with each call, as
``tape.checkpoint`` hands its own to ``sensitivities.checkpoint``.

Only the public ``tape`` API is used, imported when first needed, so that ``tape.scipy``
stays outside the engine's import graph.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence


def _tape():
    import tape

    return tape


def _partial(fn: Callable, args: Sequence, wrt: Sequence[int]) -> Callable:
    """``fn`` as a function of ``args[i]`` for ``i`` in ``wrt``, the others fixed."""
    args = list(args)

    def g(*chosen):
        full = list(args)
        for i, a in zip(wrt, chosen):
            full[i] = a
        return fn(*full)

    return g


class Derivatives:
    """Derivatives of ``fn(*args)`` with respect to some of its arguments."""

    @staticmethod
    def vjp(fn: Callable, args: Sequence, wrt: Sequence[int]) -> tuple[Any, Callable]:
        """``(fn(*args), pullback)``: ``pullback(ct)`` is the tuple of ``ct``'s adjoints of
        ``args[i]`` for ``i`` in ``wrt``; it may be called any number of times."""
        return _tape().vjp(_partial(fn, args, wrt), *[args[i] for i in wrt])

    @staticmethod
    def jvp(fn: Callable, args: Sequence, wrt: Sequence[int], tangents: Sequence) -> tuple:
        """``(fn(*args), J v)`` along ``tangents`` of ``args[i]`` for ``i`` in ``wrt``
        (each tangent may hold ``k`` directions on a leading axis)."""
        return _tape().jvp(_partial(fn, args, wrt), tuple(args[i] for i in wrt), tuple(tangents))

    @staticmethod
    def jacobian(fn: Callable, args: Sequence, argnum: int) -> Any:
        """The Jacobian of ``fn`` with respect to ``args[argnum]``, of shape
        ``out.shape + in.shape``, in one forward pass."""
        return _tape().jacobian(_partial(fn, args, (argnum,)), mode="fwd")(args[argnum])

    @staticmethod
    def gradient(fun: Callable) -> Callable:
        """``(x, *args) -> d fun(x, *args) / dx`` for a scalar ``fun``; differentiable
        again (``grad`` nests)."""
        g = _tape().grad(fun, argnums=0)

        def gradient_of(x, *args):
            return g(x, *args)

        return gradient_of


derivatives = Derivatives()
