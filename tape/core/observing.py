"""What watches the records of the current thread or ``contextvars`` context: the debug
modes (``tape.debug()``, ``tape.detect_anomaly()``) and ``tape.vmap``'s closures.

They are two hooks, held apart, so that neither takes the other's place when one is
opened inside the other (a ``tape.debug()`` block inside a vmapped function, or a
``vmap`` call under ``tape.debug()``):

- the *rewriters* (``rewriting``, a tuple, innermost first): one for each ``vmap`` call
  in progress. ``rewriter.recorded(record)`` may change a new record's arguments and
  insert records before it (``vmap`` broadcasts a node the function closed over).
- the *observer* (``observing``): the debug mode, at most one; a mode opened inside
  another takes its place for the block and keeps its settings. ``observer.recorded``
  is called for every new record and ``observer.propagated(branch, ybar, rtape)`` (unless
  None) after each Branch of a reverse pass.

``Tape.add`` hands each new record to the rewriters first, then to the observer, so that
the observer sees each record as it ends up: its arguments and its position final. A
count of the hooks set in any thread lets a record pay one integer read while none is.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

__all__ = ["observing", "rewriting", "hold", "unhold"]

observing: ContextVar[Any] = ContextVar("tape_observing", default=None)
observer = observing.get
rewriting: ContextVar[tuple] = ContextVar("tape_rewriting", default=())
rewriters = rewriting.get
observed = 0  # hooks set in any thread: while none is, a record reads one int
_lock = threading.Lock()


def hold() -> None:
    """Count a hook about to be set (before it is): while any is counted, records ask
    for them. A count left high by a Ctrl-C costs speed, never a record."""
    global observed
    with _lock:
        observed += 1


def unhold() -> None:
    """Count a hook that was put back (after it was)."""
    global observed
    with _lock:
        observed -= 1
