"""SciPy's functions met by nodes inside library code go to their counterparts here.

Library code calls SciPy as it calls NumPy: ``scipy.linalg.solve(A, b)``, ``from
scipy.special import expit``, ``stats.norm.cdf(z)``, a frozen ``stats.norm(mu).logpdf``.
Once SciPy is loaded, the first pass after it wraps (through ``tape.runtime.conversions``,
for the life of the process):

- the functions of ``scipy.linalg``, ``scipy.signal``, ``scipy.special`` and
  ``scipy.spatial.distance`` that have a counterpart in ``tape.scipy`` (the names in its
  ``__all__``), wherever a module binds them (SciPy's private modules aside: code reaches
  those through the public ones). Ufuncs dispatch to nodes by themselves;
- the methods of ``scipy.stats``' distributions that have a counterpart, on SciPy's base
  classes (every distribution object and frozen distribution reaches them), and the
  standard forms ``_cdf`` and ``_pdf`` that statsmodels calls (``norm._cdf``), on the
  distribution's class.

A wrapper calls the counterpart where it meets a node in a thread that records, and
SciPy's own function otherwise. ``import tape`` does not import SciPy.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

import numpy as np

from sensitivities.registry import holds_node

from ..runtime import is_converting, on_scan, wrap, wrap_method

__all__ = ["COUNTERPARTS"]

# SciPy's module -> ours, by function (the names in our ``__all__``), or for scipy.stats
# by method of each distribution
COUNTERPARTS = {
    f"scipy.{sub}": f"tape.scipy.{sub}"
    for sub in ("linalg", "signal", "special", "spatial.distance", "stats")
}
_done = False


def _meets_node(args: tuple, kwargs: dict) -> bool:
    return is_converting() and (holds_node(args) or holds_node(tuple(kwargs.values())))


def _counterpart(original: Callable, ours: Callable) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _meets_node(args, kwargs):
            return ours(*args, **kwargs)
        return original(*args, **kwargs)

    return wrapper


def _standard_form(original: Callable, ours: Callable) -> Callable:
    """``norm_gen._cdf`` and the like: ``self`` is the distribution, its standard form
    the counterpart's with the default location and scale."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _meets_node(args, kwargs):
            return ours(*args, **kwargs)
        return original(self, *args, **kwargs)

    return wrapper


def _method(original: Callable, method: str, counterparts: dict) -> Callable:
    """SciPy's distribution method ``method`` (``rv_continuous.cdf``): the counterpart of
    ``self``'s distribution where it meets a node in a recording thread."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _meets_node(args, kwargs):
            ours = counterparts.get((getattr(self, "name", None), method))
            if ours is not None:
                return ours(*args, **kwargs)
        return original(self, *args, **kwargs)

    return wrapper


def _wrap_scipy() -> None:
    """Once SciPy is loaded: hand the runtime a wrapper for each function and method with
    a counterpart."""
    global _done
    if _done or "scipy" not in sys.modules:
        return
    _done = True
    for their_name, our_name in COUNTERPARTS.items():
        if their_name == "scipy.stats":
            continue
        try:
            theirs = importlib.import_module(their_name)
            ours = importlib.import_module(our_name)
        except ImportError:
            continue
        for name in getattr(ours, "__all__", ()):
            original, counterpart = getattr(theirs, name, None), getattr(ours, name, None)
            if (
                callable(original)
                and callable(counterpart)
                and original is not counterpart
                and not isinstance(original, np.ufunc)  # ufuncs dispatch by themselves
            ):
                wrap(original, _counterpart(original, counterpart), their_name)
    try:
        theirs_stats = importlib.import_module("scipy.stats")
        ours_stats = importlib.import_module(COUNTERPARTS["scipy.stats"])
    except ImportError:
        return
    counterparts: dict = {}  # (distribution name, method) -> ours
    for name in ours_stats.__all__:
        ours = getattr(ours_stats, name, None)
        theirs = getattr(theirs_stats, name, None)
        if theirs is None or not hasattr(theirs, "__dict__"):
            continue
        for method in getattr(ours, "methods", ()):
            counterparts[(getattr(theirs, "name", name), method)] = getattr(ours, method)
            standard = "_" + method
            if method in ("cdf", "pdf") and standard in type(theirs).__dict__:
                original = type(theirs).__dict__[standard]
                wrap_method(type(theirs), standard, _standard_form(original, getattr(ours, method)))
    for base in (theirs_stats.rv_continuous, theirs_stats.rv_discrete):
        for method in sorted({m for _, m in counterparts}):
            original = base.__dict__.get(method)
            if callable(original):
                wrap_method(base, method, _method(original, method, counterparts))


on_scan(_wrap_scipy)
