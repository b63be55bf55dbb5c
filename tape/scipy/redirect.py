"""SciPy's functions met by nodes inside library code go to their counterparts here.

Library code calls SciPy as it calls NumPy: ``scipy.linalg.solve(A, b)``, ``from
scipy.special import expit``, ``stats.norm.cdf(z)``, a frozen ``stats.norm(mu).logpdf``.
Each of SciPy's modules below is wrapped by the first pass after it is loaded (through
``tape.runtime.conversions``, for the life of the process):

- the functions of ``scipy.linalg``, ``scipy.linalg.blas``, ``scipy.signal``,
  ``scipy.special``, ``scipy.spatial.distance``, ``scipy.integrate`` and
  ``scipy.interpolate`` that have a counterpart in ``tape.scipy`` (the names in its
  ``__all__``), wherever a module binds them (SciPy's private modules aside: code reaches
  those through the public ones). Ufuncs dispatch to nodes by themselves; classes are
  left in place (``isinstance`` keeps working), their methods are wrapped instead;
- the methods of ``scipy.interpolate``'s splines (``CubicSpline(x, y)``, ``PPoly``,
  ``BSpline``, ``interp1d``: construction, evaluation, ``derivative``,
  ``antiderivative``, ``integrate``), on SciPy's classes: SciPy's own objects then hold
  the nodes, and its methods hand them to ours;
- the methods of ``scipy.stats``' distributions that have a counterpart, on SciPy's base
  classes (every distribution object and frozen distribution reaches them), and the
  standard forms ``_cdf`` and ``_pdf`` that statsmodels calls (``norm._cdf``), on the
  distribution's class; the multivariate ones' (``multivariate_normal.logpdf``) on their
  own classes.

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
    for sub in ("linalg", "linalg.blas", "signal", "special", "spatial.distance", "stats",
                "integrate", "interpolate")
}  # fmt: skip
# counterparts that take the nodes through the function they integrate (a closure): ours
# runs whenever a pass records, and hands back SciPy's own result where it meets none
_THROUGH_CALLBACKS = frozenset({"quad"})
_wrapped: set = set()  # SciPy's modules wrapped so far


def _meets_node(args: tuple, kwargs: dict) -> bool:
    return is_converting() and (holds_node(args) or holds_node(tuple(kwargs.values())))


def _counterpart(original: Callable, ours: Callable, callbacks: bool = False) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if (callbacks and is_converting()) or _meets_node(args, kwargs):
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


def _node_method(original: Callable, cls: type, ours: Callable, meets: Callable) -> Callable:
    """SciPy's method ``original`` (found on ``cls`` or a base of it): ours for an object
    of ``cls`` where the call, or the object's own arrays, meet a node while recording."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self, cls) and is_converting() and meets(self, args, kwargs):
            return ours(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    return wrapper


def _wrap_methods(module: Any) -> None:
    """The methods ``module.METHODS`` lists as ``(SciPy's class, name, ours)``."""
    for cls, name, ours in getattr(module, "METHODS", ()):
        owner = next(k for k in cls.__mro__ if name in k.__dict__)
        original = owner.__dict__[name]
        wrap_method(owner, name, _node_method(original, cls, ours, module.meets_node))


def _wrap_module(theirs: Any, ours: Any) -> None:
    """The functions of SciPy's module ``theirs`` with a counterpart in ``ours``, and the
    methods ``ours.METHODS`` lists."""
    for name in getattr(ours, "__all__", ()):
        original, counterpart = getattr(theirs, name, None), getattr(ours, name, None)
        if (
            callable(original)
            and callable(counterpart)
            and original is not counterpart
            and not isinstance(original, np.ufunc)  # ufuncs dispatch by themselves
            and not isinstance(original, type)  # a class: its methods, below
        ):
            wrapper = _counterpart(original, counterpart, name in _THROUGH_CALLBACKS)
            wrap(original, wrapper, theirs.__name__)
            if original.__name__ != name:
                # f2py's routines call themselves "function dgemm": the runtime finds a
                # function by its __name__, so the module's own binding is set here (what
                # `blas.dgemm(...)` reaches; a name imported from it before is missed)
                setattr(theirs, name, wrapper)
    _wrap_methods(ours)


def _wrap_stats(theirs_stats: Any, ours_stats: Any) -> None:
    """The methods of ``scipy.stats``' distributions with a counterpart."""
    counterparts: dict = {}  # (distribution name, method) -> ours
    for name in ours_stats.__all__:
        ours = getattr(ours_stats, name, None)
        theirs = getattr(theirs_stats, name, None)
        if theirs is None or not hasattr(theirs, "__dict__"):
            continue
        multivariate = not isinstance(theirs, (theirs_stats.rv_continuous,
                                               theirs_stats.rv_discrete))  # fmt: skip
        for method in getattr(ours, "methods", ()):
            counterparts[(getattr(theirs, "name", name), method)] = getattr(ours, method)
            if multivariate and method in type(theirs).__dict__:  # multivariate_normal_gen
                original = type(theirs).__dict__[method]
                wrap_method(type(theirs), method, _standard_form(original, getattr(ours, method)))
            standard = "_" + method
            if method in ("cdf", "pdf") and standard in type(theirs).__dict__:
                original = type(theirs).__dict__[standard]
                wrap_method(type(theirs), standard, _standard_form(original, getattr(ours, method)))
    for base in (theirs_stats.rv_continuous, theirs_stats.rv_discrete):
        for method in sorted({m for _, m in counterparts}):
            original = base.__dict__.get(method)
            if callable(original):
                wrap_method(base, method, _method(original, method, counterparts))


def _wrap_scipy() -> None:
    """Before a scan: hand the runtime a wrapper for each function and method with a
    counterpart, in each of SciPy's modules loaded by now (once each; one loaded later is
    wrapped at the scan after it, so that nothing of SciPy is imported here)."""
    if "scipy" not in sys.modules:
        return
    for their_name, our_name in COUNTERPARTS.items():
        if their_name in _wrapped or their_name not in sys.modules:
            continue
        _wrapped.add(their_name)
        try:
            theirs = importlib.import_module(their_name)
            ours = importlib.import_module(our_name)
        except ImportError:
            continue
        if their_name == "scipy.stats":
            _wrap_stats(theirs, ours)
        else:
            _wrap_module(theirs, ours)


on_scan(_wrap_scipy)
