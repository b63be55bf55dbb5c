"""The rule of ``tape.checkpoint``: a function recorded as one Branch and run again,
on a fresh tape, when its derivative is needed.

The rule needs an engine to run ``fn`` again and differentiate it; this package never
imports one, so the engine hands its own in with the call, as the argument
``derivatives``: an object with ``pullback(fn, leaves, y, ybar)`` (the adjoints of
``leaves``, a list with None for those that get none) and ``pushforward(fn, leaves, y,
xdots)`` (the tangent of the result). Each is handed ``y``, the value the forward pass
recorded, which the function run again must give.
"""

from __future__ import annotations

from typing import Any, Callable

from .registry import primitive, pushforward, sensitivity

__all__ = ["checkpointed"]


@primitive
def checkpointed(fn: Callable, leaves: tuple, derivatives: Any) -> Any:
    """``fn(*leaves)`` recorded as one Branch: what ``tape.checkpoint`` records."""
    return fn(*leaves)


@sensitivity(checkpointed, 1)
def _(y, ybar, fn, leaves, derivatives):
    return derivatives.pullback(fn, leaves, y, ybar)


@pushforward(checkpointed, 1)
def _(y, xdots, fn, leaves, derivatives):
    return derivatives.pushforward(fn, leaves, y, xdots)
