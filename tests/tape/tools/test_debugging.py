"""debug, detect_anomaly and recorded_at: the line behind each record, where NaN first
appears, and modes that hold for one thread or context only."""

import inspect
import threading

import numpy as np
import pytest

import tape
from tape import AnomalyError, Leaf, Tape, debug, detect_anomaly, grad, recorded_at
from tape.core.observing import observing
from tape.tools.debugging import anomaly_detected


def test_recorded_at_names_the_line_under_debug_and_nothing_outside():
    t = Tape()
    x = Leaf(t, 0.5)
    with debug():
        y, line = np.sin(x), inspect.currentframe().f_lineno
    assert recorded_at(y) == (
        __file__,
        line,
        "test_recorded_at_names_the_line_under_debug_and_nothing_outside",
    )
    assert recorded_at(np.cos(x)) is None  # recorded after the context closed
    assert recorded_at(Leaf(Tape(), 1.0)) is None


def test_anomaly_mode_is_on_inside_detect_anomaly_only_and_an_inner_debug_keeps_it():
    assert not anomaly_detected() and observing.get() is None
    with debug():
        assert not anomaly_detected()
    with detect_anomaly():
        assert anomaly_detected()
        with debug():
            assert anomaly_detected()
        assert anomaly_detected()
    assert not anomaly_detected() and observing.get() is None


def test_detect_anomaly_names_the_first_record_whose_value_turns_infinite():
    def f(x):
        y = np.exp(x)
        return np.sum(np.log(y - 1.0))  # log(0) at x = 0: the first infinity

    x = np.array([0.0, 1.0])
    with np.errstate(all="ignore"):
        with detect_anomaly(), pytest.raises(AnomalyError, match=r"log returned -inf") as info:
            grad(f)(x)
        assert "np.log(y - 1.0)" in str(info.value)
        with detect_anomaly(forward=False):  # adjoints only: the forward -inf passes
            with pytest.raises(AnomalyError, match="sensitivity of log"):
                grad(f)(x)


def test_debug_mode_belongs_to_its_thread():
    seen = {}
    start = threading.Barrier(2)

    def debugged():
        with debug():
            start.wait()
            t = tape.Tape()
            seen["debugged"] = recorded_at(np.sin(tape.Leaf(t, 1.0)))

    def plain():
        start.wait()
        t = tape.Tape()
        seen["plain"] = recorded_at(np.sin(tape.Leaf(t, 1.0)))

    threads = [threading.Thread(target=debugged), threading.Thread(target=plain)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen["debugged"] is not None and seen["debugged"][0] == __file__
    assert seen["plain"] is None
    assert observing.get() is None


def test_anomaly_mode_in_one_thread_does_not_raise_in_another():
    ready, done = threading.Event(), threading.Event()
    errors = []

    def anomalous():
        with detect_anomaly():
            ready.set()
            try:
                with np.errstate(all="ignore"):
                    grad(lambda x: np.sum(np.sqrt(x)))(np.array([0.0, 1.0]))
            except AnomalyError as e:
                errors.append(e)
            done.wait(5)

    th = threading.Thread(target=anomalous)
    th.start()
    ready.wait(5)
    with np.errstate(all="ignore"):
        (g,) = grad(lambda x: np.sum(np.sqrt(x)))(np.array([0.0, 1.0]))  # no anomaly mode here
    done.set()
    th.join()
    assert np.isinf(g[0]) and g[1] == 0.5
    assert len(errors) == 1
