"""The observer of the current thread or ``contextvars`` context: how ``tape.debug()``
(and ``tape.vmap``'s closures) see the records of every tape while they are open.

``observer.recorded(record)`` is called for every new record (``Tape.add``) and
``observer.propagated(branch, ybar, rtape)`` (unless None) after each Branch of a reverse
pass. A count of the contexts open in any thread lets a record pay one integer read
while none is.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

__all__ = ["observing", "observe", "unobserve"]

observing: ContextVar[Any] = ContextVar("tape_observing", default=None)
observer = observing.get
observed = 0  # observing contexts open in any thread: while none is, a record reads one int
_lock = threading.Lock()


def observe(observer: Any) -> Any:
    """Make ``observer`` the current context's (``observing``); returns the token that
    ``unobserve`` takes to undo it. The count goes up first and down last, so that a
    Ctrl-C between the two steps can only leave it high, which costs speed, not records."""
    global observed
    with _lock:
        observed += 1
    return observing.set(observer)


def unobserve(token: Any) -> None:
    """Undo the ``observe`` that gave ``token``."""
    global observed
    observing.reset(token)
    with _lock:
        observed -= 1
