"""Nodes passed by keyword, moved to their positional places.

Rules are keyed by argument position, so a call with a node among its keyword arguments
(``np.clip(x, a_max=m)``) is spelled by position before it is recorded: each such keyword
moves to its place among the positional arguments, the places before it taken from the
other keywords or filled with their defaults. A function may register its own positional
form (``sensitivities.registry.positional_form``: NumPy 2's ``np.clip(x, min=, max=)``).
Where ``f``'s signature has no such place (a keyword-only argument, ``**kwargs``), a
TypeError asks for the argument by position.
"""

from __future__ import annotations

import inspect
from typing import Any

from sensitivities import registry
from sensitivities.registry import holds_node

from .errors import keyword_node

__all__ = ["positional_call"]


def positional_call(f: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of the same call of ``f``, with every node in ``kwargs`` moved
    to its positional place."""
    placed = registry.positional_form_of(f)
    if placed is not None:
        args, kwargs = placed(*args, **kwargs)
        if not any(holds_node(v) for v in kwargs.values()):
            return args, kwargs
    params = _positional_parameters(f)
    kwargs = dict(kwargs)
    places = {p.name: i for i, p in enumerate(params) if p.kind == p.POSITIONAL_OR_KEYWORD}
    held = [k for k, v in kwargs.items() if holds_node(v)]
    if not all(k in places and places[k] >= len(args) for k in held):
        raise keyword_node(f, held[0])
    args = list(args)
    for p in params[len(args) : max(places[k] for k in held) + 1]:
        if p.name in kwargs:
            args.append(kwargs.pop(p.name))
        elif p.default is not p.empty:
            args.append(p.default)
        else:
            raise keyword_node(f, held[0])
    return tuple(args), kwargs



def _positional_parameters(f: Any) -> list:
    """The parameters of ``f`` that a positional argument can fill, in order ([] where
    Python cannot tell: a ufunc, a builtin)."""
    params = _SIGNATURES.get(f)
    if params is None:
        try:
            every = inspect.signature(f).parameters.values()
        except (TypeError, ValueError):
            every = ()
        params = []
        for p in every:
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                break
            params.append(p)
        _SIGNATURES[f] = params
    return params


_SIGNATURES: dict[Any, list] = {}
