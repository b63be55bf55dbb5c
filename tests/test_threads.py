"""Gradients in several threads at once equal the sequential ones; debug modes are per
thread; failures leave nothing behind. References are analytic derivatives."""

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tape
from tape import AnomalyError, debug, detect_anomaly, grad, recorded_at
from tape.collector import gc_paused
from tape.records import observing

RNG = np.random.default_rng(11)


def _loss(w, x):
    h = np.tanh(x @ w)
    return np.sum(h**2) + np.sum(np.sin(w)) * 0.1


def _reference(w, x):
    h = np.tanh(x @ w)
    return x.T @ (2 * h * (1 - h**2)) + 0.1 * np.cos(w)


def _nested(v):
    # d/dv sum(d/du sum(u * sin(u)) at u = v) = 2 cos v - v sin v
    return np.sum(grad(lambda u: np.sum(u * np.sin(u)))(v)[0])


def _job(seed):
    rng = np.random.default_rng(seed)
    w, x = rng.standard_normal((4, 3)), rng.standard_normal((6, 4))
    v = rng.standard_normal(5)
    for _ in range(20):
        (gw,) = grad(_loss, argnums=(0,))(w, x)
        (gv,) = grad(_nested)(v)
    return gw, gv, w, x, v


def test_concurrent_gradients_equal_the_sequential_ones():
    seeds = list(range(16))
    sequential = [_job(s)[:2] for s in seeds]
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(_job, seeds))
    for (gw, gv), (cw, cv, w, x, v) in zip(sequential, concurrent):
        np.testing.assert_array_equal(cw, gw)
        np.testing.assert_array_equal(cv, gv)
        np.testing.assert_allclose(cw, _reference(w, x), rtol=1e-10)
        np.testing.assert_allclose(cv, 2 * np.cos(v) - v * np.sin(v), rtol=1e-10)
    assert gc.isenabled()


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


def test_failures_in_threads_leave_no_state():
    def bad(seed):
        if seed % 2:
            with pytest.raises(ZeroDivisionError):
                grad(lambda x: np.sin(x) * (1 / 0))(1.0)
        return grad(np.sin)(0.5)[0]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(bad, range(12)))
    assert results == [pytest.approx(np.cos(0.5))] * 12
    assert gc.isenabled() and tape.collector._gc_pauses == 0


def test_gc_pause_is_counted_and_restores_the_collector_state():
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector the user turned off stays off
    finally:
        gc.enable()
