"""Ctrl-C held back while the engine changes state that outlives a call.

A ``KeyboardInterrupt`` can land between any two bytecodes. One that lands inside a
context manager's ``__enter__``, after it changed some state but before the ``with``
block began, skips the ``__exit__`` that would undo the change: a debug mode or the
collector's setting would stay changed for the rest of the process. Inside
``uninterrupted()`` an interrupt is held back, and raised when the section ends, once
the state is whole again.

Python runs signal handlers in the main thread only, so only the main thread needs
this. The first time it is needed there, and only while SIGINT has Python's default
handler, that handler is wrapped by one that defers while a section is open: entering
and leaving a section then costs a thread check and a counter, not a system call. A
program that installs its own SIGINT handler keeps it, and is then not deferred.
"""

from __future__ import annotations

import signal
import threading
from _signal import getsignal as _handler_of  # signal.getsignal less its enum: 20x faster
from typing import Any

__all__ = ["uninterrupted", "critical", "guard_handlers", "deliver", "undo_under"]

_MAIN = threading.main_thread().ident
_open = 0  # sections open in the main thread
_pending: tuple | None = None  # (handler, signum, frame) of a signal held back
_wrapped: Any = None  # the handler that ours defers to, once installed
_critical: set = set()  # the code of the functions that undo state (``critical``)
# the signals whose Python handlers a program (or pytest-timeout, or signal.alarm's
# timeouts) may make raise; SIGINT's default handler is wrapped on its own (_deferring)
_GUARDED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGALRM", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)


def critical(function: Any) -> Any:
    """Decorator: a signal whose handler ``guard_handlers`` wrapped, landing while
    ``function`` runs its own code (from its first instruction, where Python checks for
    signals before any line), is held back until ``deliver()``. For the ``__exit__``
    methods that put global state back: their restore cannot be skipped."""
    _critical.add(function.__code__)
    return function


def _held_back(frame: Any) -> bool:
    return _open > 0 or (frame is not None and frame.f_code in _critical)


def _deferring(signum: int, frame: Any) -> None:
    global _pending
    if _held_back(frame):
        _pending = (_wrapped, signum, frame)
    else:
        _wrapped(signum, frame)


class _Deferred:
    """A program's own signal handler, held back inside tape's state changes."""

    __slots__ = ("handler",)

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> None:
        global _pending
        if _held_back(frame):
            _pending = (self.handler, signum, frame)
        else:
            self.handler(signum, frame)


def _install() -> None:
    global _wrapped
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _deferring)
        except ValueError:  # not the main interpreter
            return
        _wrapped = signal.default_int_handler


def guard_handlers() -> None:
    """In the main thread, wrap the Python handlers a program installed for the usual
    signals so that they are held back inside tape's state changes (``uninterrupted``,
    ``critical``): a handler that raises (a timeout's) then raises once the state is
    whole, and no global setting outlives the call. The handler itself is kept."""
    if threading.get_ident() != _MAIN:
        return
    for signum in _GUARDED:
        handler = _handler_of(signum)
        if callable(handler) and handler is not _deferring and type(handler) is not _Deferred:
            if handler is signal.default_int_handler:
                continue  # _install's
            try:
                signal.signal(signum, _Deferred(handler))
            except ValueError:
                return


def deliver() -> None:
    """Raise what a held-back signal's handler raises, now that the state is whole (the
    last call of a ``critical`` function; nothing while a section is open)."""
    global _pending
    if _pending is not None and not _open and threading.get_ident() == _MAIN:
        (handler, signum, frame), _pending = _pending, None
        handler(signum, frame)


class uninterrupted:
    """Context manager: a Ctrl-C that arrives inside it is raised when it ends.

    >>> with uninterrupted():
    ...     pass
    """

    __slots__ = ()

    @critical
    def __enter__(self) -> None:
        global _open
        if threading.get_ident() == _MAIN:
            if _wrapped is None:
                _install()
            _open += 1

    @critical
    def __exit__(self, *exc: Any) -> None:
        global _open, _pending
        if threading.get_ident() == _MAIN:
            _open -= 1
            if not _open and _pending is not None:
                (handler, signum, frame), _pending = _pending, None
                if handler is not _wrapped or signal.getsignal(signal.SIGINT) is _deferring:
                    handler(signum, frame)  # the signal, now that the state is whole


@critical
def undo_under(lock: Any, undo: Any) -> None:
    """``undo()`` under ``lock`` with signals held back; where a signal handler raises
    all the same (before the section opened), ``undo()`` again before its exception
    leaves: an ``undo`` undoes only what is left, so the state comes back either way."""
    try:
        with uninterrupted(), lock:
            undo()
    except BaseException:
        undo()
        raise
