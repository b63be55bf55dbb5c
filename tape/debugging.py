"""Debugging aids: the line of code behind each record, and where NaN first appears.

Both modes are context managers that hold for the current thread or ``contextvars``
context only, so one thread debugging does not slow down or change another. While no
mode is open anywhere, recording pays one global read for them.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from contextvars import ContextVar
from typing import Any

import numpy as np

from . import core
from .core import Node, describe

__all__ = ["debug", "detect_anomaly", "AnomalyError", "recorded_at"]


class AnomalyError(FloatingPointError):
    """Under ``detect_anomaly()``: a record's value or adjoint turned NaN or infinite.

    >>> import numpy as np
    >>> from tape import grad, detect_anomaly, AnomalyError
    >>> with detect_anomaly(), np.errstate(all="ignore"):
    ...     try:
    ...         grad(lambda x: np.log(x - 1.0))(1.0)
    ...     except AnomalyError as e:
    ...         print(str(e).splitlines()[0])
    log returned -inf from finite inputs, at [2] Branch{float64} -inf f=log
    """


class _Mode:
    __slots__ = ("anomaly", "forward")

    def __init__(self, anomaly: bool, forward: bool) -> None:
        self.anomaly = anomaly
        self.forward = forward


_mode: ContextVar[_Mode | None] = ContextVar("tape_debug_mode", default=None)
_lock = threading.Lock()


def _internal_dirs() -> tuple[str, ...]:
    import sensitivities

    modules = [core, sensitivities, np]
    for name in ("scipy",):
        module = sys.modules.get(name)
        if module is not None:
            modules.append(module)
    return tuple(os.path.dirname(m.__file__) + os.sep for m in modules)


_INTERNAL = _internal_dirs()


def _call_site() -> tuple | None:
    """(file, line, function) of the first frame outside tape, the rules and NumPy."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name


def _watch(step: int) -> None:
    with _lock:
        core._watching += step


class debug:
    """Context manager: every Branch recorded inside it remembers the file and line of
    code that made it, and errors of the reverse pass show that line.

    It holds for the current thread (or ``contextvars`` context) only. Recording pays for
    it (a walk up the call stack per record); outside it, nothing.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, debug, recorded_at
    >>> t = Tape()
    >>> x = Leaf(t, 0.5)
    >>> with debug():
    ...     y = np.sin(x)
    >>> recorded_at(y)[1]  # the line number within this example
    2
    """

    _anomaly = False

    def __init__(self) -> None:
        self._tokens: list = []
        self._forward = True

    def __enter__(self) -> debug:
        outer = _mode.get()
        anomaly = self._anomaly or (outer is not None and outer.anomaly)
        forward = self._forward if self._anomaly else (outer.forward if outer else True)
        self._tokens.append(_mode.set(_Mode(anomaly, forward)))
        _watch(+1)
        return self

    def __exit__(self, *exc: Any) -> None:
        _mode.reset(self._tokens.pop())
        _watch(-1)


class detect_anomaly(debug):
    """Context manager: like ``debug``, and the first record whose value (in the forward
    pass) or adjoint (in the reverse pass) turns NaN or infinite from finite inputs raises
    ``AnomalyError`` naming the record and the line of code that made it.

    ``forward=False`` checks adjoints only, for code that makes infinities on purpose
    (``np.where(x > 0, np.log(x), 0.0)``) and wants to know where the gradient breaks.

    >>> import numpy as np
    >>> from tape import grad, detect_anomaly, AnomalyError
    >>> def f(x):
    ...     return np.sum(np.sqrt(x))  # sqrt's derivative is infinite at 0
    >>> with detect_anomaly():
    ...     try:
    ...         grad(f)(np.array([0.0, 1.0]))
    ...     except AnomalyError as e:
    ...         print(str(e).splitlines()[0])
    the sensitivity of sqrt for argument 0 returned inf from a finite adjoint
    """

    _anomaly = True

    def __init__(self, forward: bool = True) -> None:
        super().__init__()
        self._forward = forward


def recorded_at(node: Node) -> tuple | None:
    """``(file, line, function)`` of the code that recorded ``node`` under ``debug()``,
    or None.

    >>> from tape import Tape, Leaf, recorded_at
    >>> recorded_at(Leaf(Tape(), 1.0)) is None
    True
    """
    sites = node.tape.sites
    return sites.get(node.pos) if sites else None


def anomaly_detected() -> bool:
    """Whether the current context is under ``detect_anomaly()``."""
    mode = _mode.get()
    return mode is not None and mode.anomaly


# -- what the engine calls --------------------------------------------------------------


def _observe(node: Node) -> None:
    """Called for each new Branch while any mode is open in any thread."""
    mode = _mode.get()
    if mode is None:
        return
    tape = node.tape
    if tape.sites is None:
        tape.sites = {}
    tape.sites[node.pos] = _call_site()
    if mode.anomaly and mode.forward and not _finite(node.value) and _inputs_finite(node):
        message = (
            f"{core.function_name(node.f)} returned {_bad(node.value)} from finite inputs, "
            f"at {describe(node)}"
        )
        del tape.records[node.pos :]
        raise AnomalyError(message)


def _check_adjoints(node: Node, ybar: Any, rtape: Any) -> None:
    """After a Branch's rules ran: the first argument slot that turned non-finite."""
    if not _finite(ybar):
        return
    tape = node.tape
    for i, arg in enumerate(node.args):
        elements = arg if type(arg) in (list, tuple) else (arg,)
        for element in elements:
            if isinstance(element, Node) and element.tape is tape:
                adjoint = rtape.adjoints[element.pos]
                if adjoint is not None and not _finite(adjoint):
                    raise AnomalyError(
                        f"the sensitivity of {core.function_name(node.f)} for argument {i} "
                        f"returned {_bad(adjoint)} from a finite adjoint\n"
                        f"  at {describe(node)}\n"
                        f"  into the adjoint of {describe(element)}"
                    )


def _finite(value: Any) -> bool:
    value = core._strip_one(value)
    if type(value) is float or type(value) is np.float64:
        return math.isfinite(value)
    try:
        return bool(np.all(np.isfinite(value)))
    except TypeError:  # not a number: an axis, an index, a string
        return True


def _inputs_finite(node: Node) -> bool:
    for a in core._strip(node.args):
        if type(a) in (list, tuple):
            if not all(_finite(b) for b in a):
                return False
        elif not _finite(a):
            return False
    return True


def _bad(value: Any) -> str:
    value = np.asarray(core._strip_one(value))
    if np.isnan(value).any():
        return "NaN"
    if np.iscomplexobj(value):
        return "inf"
    return "-inf" if np.all(value[np.isinf(value)] < 0) else "inf"


core._observer = _observe
