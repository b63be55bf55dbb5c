"""fewer_collections: the collector runs less often inside a pass, never off; counted for
nesting and threads, and back at the program's pace after the last pass."""

import gc
import threading
import weakref

import numpy as np

from tape import grad
from tape.core.collector import fewer_collections


def test_the_collector_stays_on_and_its_pace_comes_back():
    before = gc.get_threshold()
    with fewer_collections():
        with fewer_collections():
            assert gc.isenabled() and gc.get_threshold()[0] > before[0]
        assert gc.get_threshold()[0] > before[0]  # the outer pass still runs
    assert gc.isenabled() and gc.get_threshold() == before


def test_a_program_that_set_its_own_pace_gets_it_back():
    before = gc.get_threshold()
    gc.set_threshold(1234, 5, 6)
    try:
        grad(lambda x: np.sum(np.sin(x)))(np.ones(3))
        assert gc.get_threshold() == (1234, 5, 6)
        gc.disable()
        grad(lambda x: np.sum(np.sin(x)))(np.ones(3))
        assert not gc.isenabled()  # a collector the program turned off stays off
    finally:
        gc.enable()
        gc.set_threshold(*before)


def test_another_threads_cycles_are_collected_during_a_long_pass():
    class Cycle:
        pass

    collected = []
    started, done = threading.Event(), threading.Event()

    def make_garbage():
        started.wait()
        for _ in range(200_000):  # many more allocations than one collection's threshold
            a, b = Cycle(), Cycle()
            a.other, b.other = b, a
            if not collected:
                weakref.finalize(a, collected.append, True)
            del a, b
        done.set()

    during_the_pass = []

    def long_loss(x):
        started.set()
        while not done.is_set() and not collected:
            x = x + 1e-9 * np.sin(x)
        during_the_pass.append(bool(collected))
        return np.sum(x)

    worker = threading.Thread(target=make_garbage)
    worker.start()
    grad(long_loss)(np.ones(2))
    worker.join()
    assert during_the_pass == [True]  # freed by the collector while f was still recording
