"""NumPy's floating-point warnings (divide by zero, invalid value, overflow), told at the
line of the user's code that caused them, as plain NumPy tells them.

NumPy warns from the innermost Python frame, which under ``tape`` is the engine's
(``tape/core/recording.py``) or a rule's (``sensitivities/elementwise.py``). Around a
transform's passes (``grad``, ``vjp``, ``jvp``, ``propagate``, a compiled replay),
``located_warnings`` switches NumPy's ``"warn"`` mode to ``"log"``, which hands the
message to ``_Teller.write`` instead; it warns again from the first frame outside
``tape`` and the rules, adding, for a warning of the reverse pass, the record whose rule
raised it. Nothing runs unless NumPy warns: entering costs one context-variable lookup.
Modes the user set to anything else (``"ignore"``, ``"raise"``, ``"call"``) are kept.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

import sensitivities

from .errors import describe

__all__ = ["located_warnings", "warn"]

# the files of tape (engine, transforms and tools) and of the rules, and the code a
# compiled gradient generates
_INTERNAL = tuple(
    os.path.dirname(m.__file__) + os.sep
    for m in (sys.modules[__name__.partition(".")[0]], sensitivities)
) + ("<compiled tape",)


class _Teller:
    """What NumPy's ``"log"`` mode writes to: each line a warning, told at the user's line."""

    def write(self, text: str) -> None:
        message = text.strip().removeprefix("Warning: ")
        try:
            frame, where = _users_frame(sys._getframe(1))  # from the frame of the ufunc's caller
        except Exception:  # finding the line must never fail the call that warned
            frame, where = None, ""
        if frame is None:
            warnings.warn(message + where, RuntimeWarning, stacklevel=2)
            return
        _tell(message + where, RuntimeWarning, frame)


def _tell(message: Any, category: Any, frame: Any) -> None:
    """Warn as ``warnings.warn`` would from code running in ``frame``."""
    module_globals = frame.f_globals
    # (no module_globals: a loader's source, absent for `python -c`, is not needed)
    warnings.warn_explicit(
        message,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get("__name__", "<string>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )


_warn = warnings.warn


def warn(message: Any, category: Any = None, stacklevel: int = 1, *args: Any, **kwargs: Any):
    """``warnings.warn`` while a forward pass records (``tape.conversions`` puts it in
    place): NumPy's Python code warns ``stacklevel`` frames up, meaning its caller, which
    is the engine for a function entered on nodes (``np.nanvar``'s "Degrees of freedom
    <= 0"). Such a warning is told at the first frame outside ``tape`` and the rules, the
    line plain NumPy names; every other warning passes through unchanged."""
    try:
        frame = sys._getframe(stacklevel)
    except ValueError:
        frame = None
    if frame is None or not frame.f_code.co_filename.startswith(_INTERNAL):
        return _warn(message, category, stacklevel + 1, *args, **kwargs)
    frame, where = _users_frame(frame)
    if frame is None:
        return _warn(message, category, stacklevel + 1, *args, **kwargs)
    if isinstance(message, Warning):
        category, message = type(message), str(message)
    _tell(str(message) + where, category or UserWarning, frame)


def _users_frame(frame: Any) -> tuple[Any, str]:
    """The first frame outside ``tape`` and the rules from ``frame`` out, and, where the
    warning came from a rule of the reverse pass, which record's."""
    where = ""
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        if not where:
            where = _reverse_pass_record(frame)
        frame = frame.f_back
    return frame, where


def _reverse_pass_record(frame: Any) -> str:
    """For a frame of the reverse pass's loop, which record's rule was running, else ''."""
    code = frame.f_code  # the reverse pass's loop (tape.core.reverse imports this module)
    if code.co_name != "reverse_pass" or not code.co_filename.endswith("reverse.py"):
        return ""
    records, pos = frame.f_locals.get("records"), frame.f_locals.get("pos")
    if records is None or not 0 <= pos < len(records):
        return ""
    node = records[pos]
    text = f", in the reverse pass, in a sensitivity rule of record {describe(node)}"
    if not node.tape.sites:
        text += "\n  (under `with tape.debug():` every record keeps the line that made it)"
    return text


_TELLER = _Teller()
_LOUD = ("call", "log")

try:  # NumPy 2 keeps the error state in a context variable: read and set it directly
    from numpy._core._ufunc_config import _extobj_contextvar
    from numpy._core.umath import _make_extobj
except ImportError:  # pragma: no cover (NumPy 1)
    _extobj_contextvar = None


def _told_by_teller() -> Any:
    """The error state to use in place of the current one, or None to keep it."""
    modes = np.geterr()
    if any(mode in _LOUD for mode in modes.values()):
        return None  # the user's own handler: left alone
    logged = {kind: "log" for kind, mode in modes.items() if mode == "warn"}
    if not logged:
        return None
    if _extobj_contextvar is None:  # pragma: no cover
        return np.errstate(call=_TELLER, **logged)
    return _make_extobj(call=_TELLER, **logged)


_STATES: dict = {}  # the user's error state -> ours (few: NumPy's default, mostly)


class located_warnings:
    """Context manager: NumPy's floating-point warnings inside it are told at the user's
    line (see the module's docstring)."""

    __slots__ = ("token",)

    def __enter__(self) -> None:
        if _extobj_contextvar is None:  # pragma: no cover
            self.token = _told_by_teller()
            if self.token is not None:
                self.token.__enter__()
            return
        state = _extobj_contextvar.get()
        try:
            ours = _STATES[state]
        except KeyError:
            if len(_STATES) > 64:
                _STATES.clear()
            ours = _STATES[state] = _told_by_teller()
        self.token = None if ours is None else _extobj_contextvar.set(ours)

    def __exit__(self, *exc: Any) -> None:
        if self.token is None:
            return
        if _extobj_contextvar is None:  # pragma: no cover
            self.token.__exit__(*exc)
        else:
            _extobj_contextvar.reset(self.token)
