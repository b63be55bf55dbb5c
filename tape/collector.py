"""Python's cyclic garbage collector during a forward or reverse pass.

Records and their tape form reference cycles, and a long forward or reverse pass makes
millions of objects that the collector would scan again and again for nothing (grad
frees them by clearing the tape). Passes pause it; the count makes nested passes and
passes in several threads safe, and the collector's state is restored by the last one.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

__all__ = ["gc_paused"]


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


class gc_paused:
    """Context manager: Python's cyclic garbage collector is off inside it (counted, so
    nested and concurrent uses are fine), and back as it was when the last one exits.

    >>> import gc
    >>> from tape.collector import gc_paused
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """

    __slots__ = ()

    def __enter__(self) -> None:
        global _gc_pauses, _gc_was_enabled
        with _gc_lock:
            if _gc_pauses == 0:
                _gc_was_enabled = gc.isenabled()
                gc.disable()
            _gc_pauses += 1

    def __exit__(self, *exc: Any) -> None:
        global _gc_pauses
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()
