"""Debugging aids: the line of code behind each record, and where NaN first appears.

Both modes are context managers that hold for the current thread or ``contextvars``
context only, so one thread debugging does not slow down or change another. They plug
into the engine as the context's observer (``tape.core.observing``): every record
is shown to it as it is made, and under ``detect_anomaly`` every Branch's adjoint
contributions after the reverse pass made them. Outside them, recording pays one
context-variable look-up.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

import sensitivities
from sensitivities.registry import function_name, value_of

from ..core.errors import AnomalyError, describe
from ..core.node import Node
from ..core.observing import hold, observing, unhold
from ..transforms.vmap import Batched

__all__ = ["debug", "detect_anomaly", "AnomalyError", "recorded_at", "anomaly_detected"]


def _internal_dirs() -> tuple[str, ...]:
    modules = [sys.modules[__name__.partition(".")[0]], sensitivities, np]  # all of tape
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


class _Sites:
    """The observer of ``debug()``: each Branch keeps the line of code that made it."""

    __slots__ = ("forward",)
    anomaly = False
    propagated = None  # nothing to check in the reverse pass

    def __init__(self, forward: bool) -> None:
        self.forward = forward

    def recorded(self, node: Node) -> None:
        if not hasattr(node, "f"):
            return  # a Leaf: the input, made by grad or by hand
        tape = node.tape
        if tape.sites is None:
            tape.sites = {}
        tape.sites[node.pos] = _call_site()
        if self.anomaly and self.forward and not _finite(node.value) and _inputs_finite(node):
            message = (
                f"{function_name(node.f)} returned {_bad(node.value)} from finite inputs, "
                f"at {describe(node)}"
            )
            del tape.records[node.pos :]
            raise AnomalyError(message)


class _Anomalies(_Sites):
    """The observer of ``detect_anomaly()``: sites, and the first non-finite value or
    adjoint made from finite ones."""

    __slots__ = ()
    anomaly = True

    def propagated(self, node: Node, ybar: Any, rtape: Any) -> None:
        """After a Branch's rules ran: the first argument slot that turned non-finite."""
        if not _finite(ybar):
            return
        tape = node.tape
        for i, arg in enumerate(node.args):
            elements = arg if type(arg) in (list, tuple) else (arg,)
            for element in elements:
                if tape.owns(element):
                    adjoint = rtape.adjoints[element.pos]
                    if adjoint is not None and not _finite(adjoint):
                        raise AnomalyError(
                            f"the sensitivity of {function_name(node.f)} for argument {i} "
                            f"returned {_bad(adjoint)} from a finite adjoint\n"
                            f"  at {describe(node)}\n"
                            f"  into the adjoint of {describe(element)}"
                        )


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
        self._outer: list = []  # the mode each entry of this object replaced
        self._forward = True

    def __enter__(self) -> debug:
        outer = observing.get()
        anomaly = self._anomaly or (outer is not None and outer.anomaly)
        forward = self._forward if self._anomaly else (outer.forward if outer else True)
        observer = (_Anomalies if anomaly else _Sites)(forward)
        self._outer.append(outer)
        hold()
        observing.set(observer)
        return self

    def __exit__(self, *exc: Any) -> None:
        # (as for any ``with`` block, a Ctrl-C landing exactly between the block's end and
        # this first call would skip it)
        observing.set(self._outer.pop())
        unhold()


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
    observer = observing.get()
    return observer is not None and observer.anomaly


def _plain(value: Any) -> Any:
    """The plain value of a node; a batch's values (under ``vmap``) as one array, so
    that one example's NaN is found, not refused as control flow on a batch."""
    value = value_of(value)
    while isinstance(value, Batched):
        value = value.data
    return value


def _finite(value: Any) -> bool:
    value = _plain(value)
    if type(value) is float or type(value) is np.float64:
        return math.isfinite(value)
    try:
        return bool(np.all(np.isfinite(value)))
    except TypeError:  # not a number: an axis, an index, a string
        return True


def _inputs_finite(node: Node) -> bool:
    for a in value_of(node.args):
        if type(a) in (list, tuple):
            if not all(_finite(b) for b in a):
                return False
        elif not _finite(a):
            return False
    return True


def _bad(value: Any) -> str:
    value = np.asarray(_plain(value))
    if np.isnan(value).any():
        return "NaN"
    if np.iscomplexobj(value):
        return "inf"
    return "-inf" if np.all(value[np.isinf(value)] < 0) else "inf"
