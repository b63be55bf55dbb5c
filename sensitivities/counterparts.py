"""Which differentiable counterpart stands for a SciPy function that met a node.

SciPy functions that are not ufuncs convert their arguments with ``np.asarray``; a node
refuses that (it would drop off the tape), and the error it raises names the counterpart
found here. The engine hands over the stack frame of the conversion; everything that
knows SciPy's layout lives here, beside the counterparts themselves.
"""

from __future__ import annotations

from typing import Any

__all__ = ["scipy_caller"]


def scipy_caller(frame: Any) -> tuple[str, str] | None:
    """``(SciPy's function, tape's counterpart)``, as dotted names, when SciPy code on the
    stack from ``frame`` up is converting a node; None otherwise.

    >>> import sys
    >>> scipy_caller(sys._getframe()) is None
    True
    """
    from . import linalg, special

    start = frame
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("scipy."):
            name = frame.f_code.co_name
            for ours in (linalg, special):
                if name in getattr(ours, "__all__", ()) or (
                    not name.startswith("_")
                    and callable(getattr(ours, name, None))
                    and getattr(getattr(ours, name), "__module__", "") == ours.__name__
                ):
                    family = module.split(".")[1]
                    return f"scipy.{family}.{name}", f"{ours.__name__}.{name}"
        frame = frame.f_back
    ours = linalg.scipy_counterpart(start)  # sees through SciPy's batching wrapper
    return (f"scipy.linalg.{ours.rpartition('.')[2]}", ours) if ours else None
