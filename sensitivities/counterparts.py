"""Which differentiable counterpart stands for a SciPy function that met a node.

SciPy functions that are not ufuncs convert their arguments with ``np.asarray``; a node
refuses that (it would drop off the tape), and the error it raises names the counterpart
found here: the public ``tape.scipy`` name, laid out as SciPy is. The engine hands over
the stack frame of the conversion; everything that knows SciPy's layout lives here,
beside the counterparts themselves.
"""

from __future__ import annotations

from typing import Any

from .registry import holds_node

__all__ = ["scipy_caller", "covered"]


# SciPy's solvers with a counterpart in tape.scipy (which the rules may not import): a
# node reaches them through the function they call, a closure over it
SOLVERS = {
    "integrate": {"solve_ivp", "odeint"},
    "optimize": {"root", "root_scalar", "brentq", "brenth", "ridder", "bisect", "toms748",
                 "fixed_point", "minimize"},
}  # fmt: skip


def covered() -> dict:
    """``{SciPy submodule: names with a counterpart in tape.scipy}``; for ``stats``,
    ``{distribution: its methods}``."""
    from . import special
    from .scipy import linalg, signal, stats

    distributions = {
        name: getattr(stats, name).methods for name in stats.__all__
        if hasattr(getattr(stats, name), "methods")
    }  # fmt: skip
    return {
        "linalg": set(linalg.__all__),
        "special": set(special.__all__),
        "signal": set(signal.__all__),
        "stats": distributions,
        **SOLVERS,
    }


def _distribution(frame: Any) -> str:
    """The name of the ``scipy.stats`` distribution whose method runs in ``frame``."""
    owner = frame.f_locals.get("self")
    owner = getattr(owner, "dist", owner)  # a frozen distribution
    name = getattr(owner, "name", None)
    if not isinstance(name, str):
        name = type(owner).__name__
        for suffix in ("_gen", "_frozen"):
            name = name.removesuffix(suffix)
    return name


def scipy_caller(frame: Any) -> tuple | None:
    """``(SciPy's function, tape's counterpart)``, as dotted names, when SciPy code on the
    stack from ``frame`` up is converting a node; None otherwise. The outermost SciPy
    function with a counterpart wins: the one the user called, not its helpers.

    A solver of ``scipy.integrate`` or ``scipy.optimize`` that was not handed the node
    (it came through the function the solver calls: a closure) gives a third entry,
    True; one with no counterpart (``quad``, ``least_squares``) then has ``""`` for it.

    >>> import sys
    >>> scipy_caller(sys._getframe()) is None
    True
    """
    from . import linalg

    names = covered()
    found = solver = None
    start = frame
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("scipy."):
            family = module.split(".")[1]
            name = frame.f_code.co_name
            closure = family in SOLVERS and _public(f"scipy.{family}", name)
            closure = closure and not _handed_a_node(frame)
            if closure:
                solver = f"scipy.{family}.{name}", "", True  # a solver with no counterpart
            if family == "stats":
                methods = names["stats"].get(_distribution(frame), ())
                if name in methods:
                    dotted = f"stats.{_distribution(frame)}.{name}"
                    found = f"scipy.{dotted}", f"tape.scipy.{dotted}"
            elif name in names.get(family, ()):
                found = f"scipy.{family}.{name}", f"tape.scipy.{family}.{name}"
                found += (True,) if closure else ()
        frame = frame.f_back
    if found is None:
        ours = linalg.scipy_counterpart(start)  # sees through SciPy's batching wrapper
        if ours:
            name = ours.rpartition(".")[2]
            found = f"scipy.linalg.{name}", f"tape.scipy.linalg.{name}"
    return found or solver


def _handed_a_node(frame: Any) -> bool:
    """Whether a node is among the arguments of the call running in ``frame``."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)
    local = frame.f_locals
    return any(holds_node(local.get(name)) for name in code.co_varnames[:count])


def _public(module: str, name: str) -> bool:
    """Whether ``name`` is a public function of the SciPy module ``module``."""
    import sys

    return not name.startswith("_") and hasattr(sys.modules.get(module), name)


def sparse_operator(frame: Any) -> bool:
    """Whether one of SciPy's sparse operators (``S @ x``, ``S * x``, ``S.dot(x)``) is
    converting a node, from ``frame`` up. They give an operand back to Python (so that
    the node's reflected operator runs) when ``np.asanyarray`` makes a 0-d object array
    of it. Only the operators: the method ``S.multiply(x)`` would hand that back to the
    user as ``NotImplemented``."""
    outermost = None
    while frame is not None and frame.f_globals.get("__name__", "").startswith("scipy.sparse"):
        outermost = frame.f_code.co_name
        frame = frame.f_back
    return outermost in ("__matmul__", "__rmatmul__", "__mul__", "__rmul__", "dot")
