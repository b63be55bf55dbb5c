"""Ctrl-C at random points of grad, jvp, compile_grad replays and the debug contexts,
and after each one the check that nothing was left behind. Used by
tests/test_interrupts.py (a bounded count) and scripts/interrupt_storm.py (thousands)."""

from __future__ import annotations

import _thread
import gc
import random
import threading
import time

import numpy as np

import tape
from tape import compile_grad, debug, detect_anomaly, grad, jvp
from tape.core import collector
from tape.core.observing import observing


def _loss(x):
    for _ in range(30):
        x = np.tanh(x) + 0.1 * np.sin(x)
    return np.sum(x * x)


_compiled = compile_grad(_loss, np.ones(4))


def _with_debug(x):
    with debug():
        return grad(_loss)(x)


def _with_anomaly(x):
    with detect_anomaly():
        with debug():
            return grad(_loss)(x)


WORK = {
    "grad": lambda x: grad(_loss)(x),
    "jvp": lambda x: jvp(_loss, (x,), (np.ones_like(x),)),
    "compiled replay": lambda x: _compiled(x),
    "debug": _with_debug,
    "detect_anomaly": _with_anomaly,
}


def left_behind() -> list[str]:
    """What a call may have left changed: empty when the process is as it was."""
    wrong = []
    if observing.get() is not None:
        wrong.append("a debug mode is still on")
    if not gc.isenabled():
        wrong.append("the garbage collector is off")
    if collector._passes != 0 or gc.get_threshold() != collector._thresholds:
        wrong.append(f"the collector's pace: {gc.get_threshold()}, {collector._passes} passes")
    if tape.core.interrupts._open != 0:
        wrong.append("an uninterrupted section is still open")
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
