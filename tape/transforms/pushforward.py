"""``pushforward``: the public way to give a primitive a forward-mode (JVP) rule.

The registry keeps forward rules in the engine's own form, with a leading axis of
directions (``sensitivities.registry.pushforward``). Users write the rule for one
direction, of the argument's shape; this module turns it into the engine's form (the
directions are the engine's business, not the rule's), and, for a function declared
linear in that argument, transposes it into the reverse rule.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sensitivities import registry, sensitivity
from sensitivities.registry import function_name, value_of

from ..core.errors import MissingRuleError
from .grad import grad
from .vmap import vmap

__all__ = ["pushforward"]


def _directions(rule: Callable, y: Any, xdot: Any, args: tuple, kwargs: dict) -> Any:
    """``rule`` over each of the directions of ``xdot`` (shape ``(k,) + x.shape``, or a
    list of those for a list argument), stacked: the engine's form of the rule."""
    listed = isinstance(xdot, list)

    def one(t):
        return rule(y, t, *args, **kwargs)

    if listed:
        present = [i for i, t in enumerate(xdot) if t is not None]

        def one_of_list(*ts):
            full = [None] * len(xdot)
            for i, t in zip(present, ts):
                full[i] = t
            return one(full)

        ydot = vmap(one_of_list)(*[xdot[i] for i in present])
    else:
        ydot = vmap(one)(xdot)
    return ydot


def _inner(a: Any, b: Any) -> Any:
    product = np.sum(a * b)
    return np.real(product) if np.iscomplexobj(product) else product


def _transposed(f: Any, argnum: int, rule: Callable) -> Callable:
    """The sensitivity of a function linear in argument ``argnum``, from its pushforward:
    ``<xbar, v> = <ybar, J v>`` for every ``v``, so ``xbar`` is the gradient of the right
    side in ``v`` (one small reverse pass through the pushforward, which is linear)."""
    def transposed(y: Any, ybar: Any, *args: Any, **kwargs: Any) -> Any:
        x = value_of(args[argnum])
        if isinstance(x, list) or isinstance(x, tuple):
            raise MissingRuleError(
                f"{function_name(f)}: a pushforward cannot be transposed for a list argument "
                f"(argument {argnum}); register its sensitivity with tape.sensitivity"
            )
        dtype = np.result_type(x)
        u0 = np.zeros_like(x, dtype=dtype if dtype.kind in "fc" else np.float64)
        if np.ndim(u0) == 0 and not isinstance(x, np.ndarray):
            u0 = dtype.type(0) if dtype.kind in "fc" else 0.0

        def pairing(v):
            ydot = rule(y, v, *args, **kwargs)
            return 0.0 * np.sum(v) if ydot is None else _inner(ydot, ybar)

        return grad(pairing, argnums=0)(u0)

    transposed.provisional = True  # a sensitivity registered later replaces it silently
    transposed.__wrapped__ = rule  # the user's: guarded as a user's rule is
    return transposed


def _reverse_missing(f: Any, argnum: int) -> Callable:
    def missing(y: Any, ybar: Any, *args: Any, **kwargs: Any) -> Any:
        name = function_name(f)
        raise MissingRuleError(
            f"{name} has only a forward rule (pushforward) for argument {argnum}, and reverse "
            f"mode needs a sensitivity: register one with @tape.sensitivity({name}, {argnum}), "
            f"or, if {name} is linear in that argument, declare it with "
            f"tape.pushforward({name}, {argnum}, linear=True) and its transpose is used. "
            "jvp and jacobian(..., mode='fwd') work without one"
        )

    missing.provisional = True
    return missing


def pushforward(
    f: Any, argnum: int, *, linear: bool = False, override: bool = False
) -> Callable[[Callable], Callable]:
    """Register the forward-mode rule (pushforward, JVP) of argument ``argnum`` of ``f``.

    ``rule(y, xdot, *args, **kwargs) -> ydot`` gets the result ``y = f(*args,
    **kwargs)``, a tangent ``xdot`` of ``args[argnum]``'s shape, and the arguments, and
    returns the tangent of ``y`` that ``xdot`` causes (``None`` for none): ``J xdot``.
    The engine runs it over many directions at once (``jvp`` with batched tangents,
    ``jacobian``, ``hessian``, ``hvp``) by batching it with ``vmap``: write it for one.
    For a list argument (``np.concatenate``), ``xdot`` is a list with one tangent per
    element, ``None`` for a constant one.

    ``jvp``, ``jacobian`` in forward mode, ``hvp`` and ``hessian`` use it. Reverse mode
    needs a ``sensitivity``; a function that is linear in this argument may say so with
    ``linear=True``, and its reverse rule is then the transpose of this one, computed by
    the engine. Without either, ``grad`` raises a ``MissingRuleError`` saying so.
    ``check_grad`` checks both rules against finite differences.

    >>> import numpy as np
    >>> from tape import primitive, pushforward, jvp, grad, check_grad
    >>> @primitive
    ... def running_total(x):
    ...     return np.cumsum(x)
    >>> @pushforward(running_total, 0, linear=True)
    ... def _(y, xdot, x):
    ...     return np.cumsum(xdot)
    >>> jvp(running_total, (np.ones(3),), (np.array([1.0, 0.0, 2.0]),))[1]
    array([1., 1., 3.])
    >>> grad(lambda x: running_total(x)[1])(np.ones(3))  # the transpose: a reverse cumsum
    (array([1., 1., 0.]),)
    >>> check_grad(lambda x: np.sum(running_total(x) ** 2), np.ones(3), order=2)
    """
    store = registry.pushforward(f, argnum, override=override)  # checks f and argnum now

    def register(rule: Callable) -> Callable:
        if not callable(rule):
            raise TypeError(f"a pushforward must be callable, got {rule!r}")

        def batched(y: Any, xdot: Any, *args: Any, **kwargs: Any) -> Any:
            return _directions(rule, y, xdot, args, kwargs)

        batched.__wrapped__ = rule
        store(batched)
        rules = registry.lookup(f)
        existing = None if rules is None else rules.plain.get(argnum)
        if existing is None or getattr(existing, "provisional", False):
            made = _transposed(f, argnum, rule) if linear else _reverse_missing(f, argnum)
            sensitivity(f, argnum, override=True)(made)
        return rule

    return register
