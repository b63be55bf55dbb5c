"""NumPy's floating-point warnings (divide by zero, invalid value, overflow), told at the
line of the user's code that caused them, as often as plain NumPy tells them.

NumPy warns from the innermost Python frame, which under ``tape`` is the engine's
(``tape/core/recording.py``) or a rule's (``sensitivities/elementwise.py``). While a pass
runs (``passes.run_pass``), NumPy's ``"warn"`` modes are ``"log"`` modes, which hand
the message to ``_Teller.write`` instead; it warns again from the first frame outside
``tape`` and the rules, with that module's registry, so that a line warns once, as under
plain NumPy. A warning of the reverse pass adds the record whose rule raised it, by
function and position (never by value, so that it repeats as NumPy's does). Modes the
user set to anything else (``"ignore"``, ``"raise"``, ``"call"``) are kept; a setting
the program makes inside the pass (``np.seterr``) is the program's after it
(``theirs``).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

import sensitivities
from sensitivities.registry import function_name

from ..core.reverse import record_running_in

__all__ = ["warn", "ours", "theirs", "extobj"]

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
    node = record_running_in(frame)
    if node is None:
        return ""
    text = (
        f", in the reverse pass, in a sensitivity rule of record [{node.pos}] "
        f"f={function_name(node.f)}"
    )
    site = node.tape.sites.get(node.pos) if node.tape.sites else None
    if site is not None:
        text += f'\n  recorded at File "{site[0]}", line {site[1]}, in {site[2]}'
    elif not node.tape.sites:
        text += "\n  (under `with tape.debug():` every record keeps the line that made it)"
    return text


_STATES: dict = {}  # the user's error state -> ours, or None to keep it (few: NumPy's default)


def ours(state: Any) -> Any:
    """The error state a pass runs under, given the program's ``state`` (NumPy's
    ``_extobj_contextvar`` value): its ``"warn"`` modes logged to the teller; None where
    there is nothing to change (no ``"warn"`` mode, or the user's own ``"call"`` or
    ``"log"`` handler, or ours already)."""
    try:
        return _STATES[state]
    except KeyError:
        pass
    modes, result = _read(state), None
    logged = {kind: "log" for kind, mode in modes.items() if mode == "warn"}
    if logged and not any(mode in _LOUD for mode in modes.values()):
        result = _made(state, call=_TELLER, **logged)
    if len(_STATES) > 64:
        _STATES.clear()
    _STATES[state] = result
    return result


def theirs(state: Any) -> Any:
    """``state``, a setting made inside a pass on top of ours, as the program means it:
    the modes we log to the teller back to ``"warn"``, without the teller."""
    token = extobj.set(state)
    try:
        if np.geterrcall() is not _TELLER:
            return state
    finally:
        extobj.reset(token)
    warned = {kind: "warn" for kind, mode in _read(state).items() if mode == "log"}
    return _made(state, call=None, **warned)


def _read(state: Any) -> dict:
    token = extobj.set(state)
    try:
        return np.geterr()
    finally:
        extobj.reset(token)


def _made(state: Any, **changes: Any) -> Any:
    """``state`` with ``changes`` (NumPy makes a state from the one in force)."""
    token = extobj.set(state)
    try:
        return _make_extobj(**changes)
    finally:
        extobj.reset(token)


_TELLER = _Teller()
_LOUD = ("call", "log")

try:  # NumPy 2 keeps the error state in a context variable, which a pass sets and resets
    from numpy._core._ufunc_config import _extobj_contextvar as extobj
    from numpy._core.umath import _make_extobj
except ImportError:  # pragma: no cover (NumPy 1: warnings are told where NumPy tells them)
    extobj = None
