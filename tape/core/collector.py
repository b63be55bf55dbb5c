"""Python's cyclic garbage collector during a forward or reverse pass.

Records and their tape form reference cycles, and a long pass makes millions of objects
that the collector, at its usual pace (a collection every 700 allocations), would scan
again and again for nothing: a quarter of the time of a pass of 10^6 records. During a
pass it runs less often (every 50,000 allocations), which takes that below a tenth. It is
never switched off: other threads' garbage, and the cycles a differentiated function
makes, are still collected while a pass runs. The thresholds in force when the first pass
began come back when the last one ends; nested passes and passes in several threads are
counted, and the change and its undoing cannot be cut in half by Ctrl-C
(``tape.core.interrupts``).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from .interrupts import critical, deliver, guard_handlers, undo_under, uninterrupted

__all__ = ["fewer_collections"]

_DURING_A_PASS = (50_000, 20, 10)
_lock = threading.Lock()
_passes = 0
_thresholds = gc.get_threshold()  # what the program had set, restored after the last pass


class fewer_collections:
    """Context manager: the cyclic garbage collector runs less often inside it (still
    on), and at the pace it had once the last such block exits.

    >>> import gc
    >>> from tape.core.collector import fewer_collections
    >>> before = gc.get_threshold()
    >>> with fewer_collections():
    ...     gc.isenabled(), gc.get_threshold()[0]
    (True, 50000)
    >>> gc.get_threshold() == before
    True
    """

    __slots__ = ("counted",)

    # A signal handler that raises (SIGALRM's, a program's own SIGINT handler) may do so at
    # any call: the count and the flag change together, between calls, and whatever the
    # handler interrupts is undone before its exception leaves, so the pace never outlives
    # the block.

    def __enter__(self) -> None:
        global _passes, _thresholds
        self.counted = False
        try:
            with uninterrupted(), _lock:
                if _passes == 0:
                    guard_handlers()
                    _thresholds = gc.get_threshold()
                    gc.set_threshold(*_DURING_A_PASS)
                _passes += 1
                self.counted = True
        except BaseException:
            self._undo()
            raise

    @critical
    def __exit__(self, *exc: Any) -> None:
        undo_under(_lock, self._undo)
        deliver()

    @critical
    def _undo(self) -> None:
        global _passes
        if self.counted:
            self.counted = False
            _passes -= 1
        if _passes == 0 and gc.get_threshold() != _thresholds:
            gc.set_threshold(*_thresholds)
