"""Ctrl-C at random points of grad, jvp, compile_grad replays and vmap, and after each
one the check that nothing was left behind (the debug modes are ``with`` blocks of the
user's, as robust as Python's own context managers, and are not stormed). Used by
tests/test_interrupts.py (a bounded count) and scripts/interrupt_storm.py (thousands)."""

from __future__ import annotations

import _thread
import gc
import random
import signal
import threading
import time

import numpy as np

import tape
from tape import compile_grad, grad, jvp
from tape.core.observing import observing
from tape.runtime.conversions import converting_threads

_THRESHOLDS = gc.get_threshold()
_ERRORS = np.geterr()
_ERRCALL = np.geterrcall()
_HANDLERS = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


def _loss(x):
    for _ in range(30):
        x = np.tanh(x) + 0.1 * np.sin(x)
    return np.sum(x * x)


_compiled = compile_grad(_loss, np.ones(4))


WORK = {
    "grad": lambda x: grad(_loss)(x),
    "jvp": lambda x: jvp(_loss, (x,), (np.ones_like(x),)),
    "compiled replay": lambda x: _compiled(x),
    "vmap": lambda x: tape.vmap(grad(_loss))(np.stack([x, x])),
}


def left_behind() -> list[str]:
    """What a call may have left changed: empty when the process is as it was."""
    wrong = []
    if observing.get() is not None:
        wrong.append("a debug mode is still on")
    if not gc.isenabled() or gc.get_threshold() != _THRESHOLDS:
        wrong.append(f"the collector: {gc.isenabled()}, {gc.get_threshold()}")
    if converting_threads:
        wrong.append(f"threads still marked as recording: {converting_threads}")
    if np.geterr() != _ERRORS or np.geterrcall() is not _ERRCALL:
        wrong.append(f"NumPy's error state: {np.geterr()}, {np.geterrcall()}")
    handlers = {s: signal.getsignal(s) for s in _HANDLERS}
    if handlers != _HANDLERS:
        wrong.append(f"signal handlers: {handlers}")
    return wrong


def storm(count: int, seed: int = 0) -> dict:
    """``count`` calls, each interrupted at a random moment; returns counts per kind of
    call, and raises AssertionError at the first call that left state behind."""
    rng = random.Random(seed)
    x = np.linspace(0.1, 0.4, 4)
    expected = grad(_loss)(x)[0]
    durations = {}
    for name, work in WORK.items():
        start = time.perf_counter()
        work(x)
        durations[name] = time.perf_counter() - start
    interrupted = dict.fromkeys(WORK, 0)
    for i in range(count):
        name = rng.choice(list(WORK))
        timer = threading.Timer(rng.uniform(0, 1.2 * durations[name]), _thread.interrupt_main)
        try:
            timer.start()
            WORK[name](x)
            timer.join()  # an interrupt due now arrives here, inside the try
        except KeyboardInterrupt:
            interrupted[name] += 1
        finally:
            timer.cancel()
        wrong = left_behind()
        assert not wrong, f"call {i} ({name}) interrupted: {wrong}"
        np.testing.assert_allclose(grad(_loss)(x)[0], expected)  # the next call works
        np.testing.assert_allclose(_compiled(x)[0], expected)
    return interrupted
