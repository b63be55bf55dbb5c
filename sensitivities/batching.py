"""Batching rules: how a primitive runs over a whole batch in one call, for ``vmap``.

A batching rule ``rule(args, batched, **kwargs) -> result`` gets the arguments with the
batch as the leading axis of each argument flagged in ``batched`` (a tuple of bools, one
per positional argument; the others are the same for every example) and returns the
result with the batch as its leading axis (each output, for a tuple of outputs), or
``NotImplemented`` to hand the call to the loop over the batch. Plain NumPy, like the
sensitivities: the engine (``tape.transforms.vmap``) unwraps and wraps the batched values.

NumPy's own functions are batched in the engine, by axis shifts, broadcasting and
stacks of matrices; rules here are for the primitives of this package, which NumPy's
protocols do not reach. A primitive without a rule still works under ``vmap``: it runs
once per example and the results are stacked.

>>> import numpy as np
>>> from sensitivities.batching import batching_rule_of
>>> from sensitivities.special import softmax
>>> rule = batching_rule_of(softmax)
>>> rule((np.array([[0.0, 0.0], [0.0, np.log(3.0)]]),), (True,))  # two examples
array([[0.5 , 0.5 ],
       [0.25, 0.75]])
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .registry import lift, shifted_axis

__all__ = [
    "advanced_axes_first",
    "batching",
    "batching_rule_of",
    "batched_form",
    "run_batched_form",
]

_batching: dict[Any, Callable] = {}
_forms: dict[str, Callable] = {}


def batching(f: Any) -> Callable[[Callable], Callable]:
    """Register the batching rule of ``f`` (see the module docstring)."""
    if not callable(f):
        raise TypeError(f"batching(f) needs a function, got {f!r}")

    def register(rule: Callable) -> Callable:
        _batching[f] = rule
        return rule

    return register


def batching_rule_of(f: Any) -> Callable | None:
    """The batching rule registered for ``f``, or None."""
    return _batching.get(f)


def batched_form(name: str) -> Callable[[Callable], Callable]:
    """Register the batched form of the rules called ``name`` (``"sum"``, ``"extremum"``,
    ``"matmul"``): under ``vmap`` a rule meets batched values, and these rules, which
    per-example gradients run most, hand them to the form the engine registers here,
    which computes on the batch's data at once. It takes the rule's arguments (the
    argument number first) and returns the contribution, or ``NotImplemented`` for the
    rule to run as written."""

    def register(form: Callable) -> Callable:
        _forms[name] = form
        return form

    return register


def run_batched_form(name: str, *args: Any, **kwargs: Any) -> Any:
    """What the batched form registered as ``name`` answers, or ``NotImplemented``."""
    form = _forms.get(name)
    return NotImplemented if form is None else form(*args, **kwargs)


def advanced_axes_first(index: Any) -> int:
    """How many axes NumPy puts first when it indexes with ``index`` (a tuple, or one
    part): those of its advanced indices, broadcast together, where a slice, None or an
    Ellipsis (even one that stands for no axis) parts them; else 0, their axes staying
    in place. Integers count as advanced beside an array. With a batch axis in front
    (``x[(slice(None),) + index]``), the batch comes after those axes.

    >>> advanced_axes_first((0, slice(None), [1, 2])), advanced_axes_first((slice(None), [1, 2]))
    (1, 0)
    """
    parts = index if isinstance(index, tuple) else (index,)
    basic = [p is None or p is Ellipsis or isinstance(p, slice) for p in parts]
    if all(b or (isinstance(p, (int, np.integer)) and not isinstance(p, bool))
           for b, p in zip(basic, parts)):  # fmt: skip
        return 0  # no array among them: integers are basic indices
    at = [k for k, b in enumerate(basic) if not b]
    if at[-1] - at[0] + 1 == len(at):
        return 0  # side by side: their axes stay where they are
    shapes = []
    for p, b in zip(parts, basic):
        if not b:
            p = np.asarray(p)
            shapes.append(np.shape(np.flatnonzero(p)) if p.dtype == bool else p.shape)
    return len(np.broadcast_shapes(*shapes))


_shift = shifted_axis  # a logical ``axis`` of one example (``ndim`` axes) as an axis of the batch


def _padded(x: Any, rank: int) -> Any:
    """A batched ``x`` with length-1 axes after the batch, up to ``rank`` axes of one
    example, so that it broadcasts against unbatched values as one example would."""
    return lift(x, rank + 1)
