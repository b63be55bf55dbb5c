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
from typing import Any

__all__ = ["uninterrupted"]

_MAIN = threading.main_thread().ident
_open = 0  # sections open in the main thread
_pending: tuple | None = None  # (signum, frame) of an interrupt held back
_wrapped: Any = None  # the handler that ours defers to, once installed


def _deferring(signum: int, frame: Any) -> None:
    global _pending
    if _open:
        _pending = (signum, frame)
    else:
        _wrapped(signum, frame)


def _install() -> None:
    global _wrapped
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _deferring)
        except ValueError:  # not the main interpreter
            return
        _wrapped = signal.default_int_handler


class uninterrupted:
    """Context manager: a Ctrl-C that arrives inside it is raised when it ends.

    >>> with uninterrupted():
    ...     pass
    """

    __slots__ = ()

    def __enter__(self) -> None:
        global _open
        if threading.get_ident() == _MAIN:
            if _wrapped is None:
                _install()
            _open += 1

    def __exit__(self, *exc: Any) -> None:
        global _open, _pending
        if threading.get_ident() == _MAIN:
            _open -= 1
            if not _open and _pending is not None:
                held, _pending = _pending, None
                if signal.getsignal(signal.SIGINT) is _deferring:
                    _wrapped(*held)  # the interrupt, now that the state is whole
