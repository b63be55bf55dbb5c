"""Ctrl-C at any point of a call leaves no state behind (a bounded storm; the long one is
scripts/interrupt_storm.py)."""

import signal

import numpy as np
import pytest

import tape
from tests.interrupt_storm import left_behind, storm


def test_interrupts_at_random_points_leave_nothing_behind():
    interrupted = storm(250, seed=1)
    assert sum(interrupted.values()) > 100  # most calls were cut somewhere
    assert all(interrupted.values())  # every kind of call was
    assert not left_behind()


class _Alarm(Exception):
    """What a program's own signal handler raises (a timeout's, pytest-timeout's)."""


def _raise_alarm(signum, frame):
    raise _Alarm


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")
def test_no_global_setting_outlives_a_call_whatever_the_handler_raises():
    import random

    previous = signal.signal(signal.SIGALRM, _raise_alarm)
    rng = random.Random(0)
    hits = 0
    calls = (
        lambda: tape.grad(lambda x: np.sum(np.tanh(np.asarray(x)) ** 2))(np.ones(8)),
        lambda: tape.jvp(lambda x: np.sum(np.asarray(x) ** 3), (np.ones(3),), (np.ones(3),)),
        lambda: tape.value_and_grad(lambda x: np.sum(np.sin(x) * x))(np.ones(4)),
    )
    try:
        for _ in range(400):
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, 4e-4))
                    for _ in range(20):
                        calls[rng.randrange(len(calls))]()
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _Alarm:
                hits += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert hits > 50  # the handler did land inside the calls
    assert not left_behind()
    with pytest.warns(RuntimeWarning, match="divide by zero"):  # sqrt's derivative at 0
        assert tape.grad(np.sqrt)(0.0)[0] == np.inf
