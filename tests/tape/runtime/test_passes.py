"""The one pass context (``tape.runtime.passes``): after any pass, completed, raising or
cut by a signal, in any thread or a forked child, the process is as it would be without
tape; settings the program makes inside a pass stay, warnings come as often as NumPy's.
References: plain NumPy runs of the same code, central differences, Python's own
semantics (asyncio, unittest) in a fresh interpreter."""

from __future__ import annotations

import functools
import gc
import pickle
import subprocess
import sys
import textwrap
import types
import warnings

import numpy as np
import pytest

import tape
from tape import grad, library_code
from tape.runtime import is_converting, run_pass
from tape.runtime.conversions import converting_threads
from tape.runtime.passes import DURING_A_PASS
from tests.fd import numeric_grad

ROOT = __file__.rsplit("/tests/", 1)[0]


def _fresh(script: str, timeout: float = 120) -> str:
    """Run ``script`` after ``_PRELUDE`` in a fresh interpreter; its standard output."""
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(script)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# -- settings and warnings ------------------------------------------------------------------


def test_a_setting_made_inside_the_function_stays_as_it_would_without_tape():
    def f(x):
        np.seterr(divide="ignore")
        return np.sum(np.log(x))

    before = np.geterr()
    try:
        f(np.ones(2))
        plain = np.geterr()
        np.seterr(**before)
        grad(f)(np.ones(2))
        assert np.geterr() == plain and plain["divide"] == "ignore"
        assert np.geterrcall() is None
    finally:
        np.seterr(**before)
    assert not converting_threads


def test_the_collector_runs_slower_during_a_pass_and_the_programs_own_pace_stays():
    before = gc.get_threshold()
    seen = []
    grad(lambda x: seen.append((gc.isenabled(), gc.get_threshold())) or x * 2.0)(1.0)
    assert seen == [(True, DURING_A_PASS)] and gc.get_threshold() == before
    with pytest.raises(ZeroDivisionError):
        grad(lambda x: x * (1 / 0))(1.0)
    assert gc.get_threshold() == before

    def sets_its_own(x):
        gc.set_threshold(900, 11, 12)  # the program's own setting, made inside f
        return x * 2.0

    try:
        sets_its_own(1.0)
        plain = gc.get_threshold()
        gc.set_threshold(*before)
        grad(sets_its_own)(1.0)
        assert gc.get_threshold() == plain == (900, 11, 12)
        gc.disable()  # a program that turned it off finds it off, during and after
        assert grad(lambda x: gc.isenabled() * 1.0 + x)(1.0) == (1.0,) and not gc.isenabled()
    finally:
        gc.enable()
        gc.set_threshold(*before)


def test_passes_in_many_threads_leave_the_collectors_pace_as_it_was():
    from concurrent.futures import ThreadPoolExecutor

    before = gc.get_threshold()
    f = lambda x: np.sum(np.tanh(np.asarray(x)) ** 2)  # noqa: E731
    with ThreadPoolExecutor(6) as pool:
        grads = list(pool.map(lambda x: grad(f)(x)[0], [np.full(3, k / 10) for k in range(60)]))
    assert gc.get_threshold() == before and not converting_threads
    x = np.full(3, 0.5)
    np.testing.assert_allclose(grads[5], numeric_grad(f, (x,), 0), rtol=1e-6)


def test_the_error_state_is_back_after_a_pass_that_raises():
    before, call = np.geterr(), np.geterrcall()
    with pytest.raises(ZeroDivisionError):
        grad(lambda x: x * (1 / 0))(1.0)
    assert np.geterr() == before and np.geterrcall() is call


def _pole(x):
    return np.sum(np.log(x) * 2.0)  # at 0: log warns forward, its rule (1/x) backward


def test_a_loop_that_reaches_a_pole_warns_as_often_as_numpy():
    def shown(steps, differentiate):
        module = types.ModuleType("loop_at_a_pole")  # a registry of its own, as a script's
        exec("def step(f, x):\n    return f(x)\n", module.__dict__)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            for _ in range(steps):
                module.step(grad(_pole) if differentiate else _pole, np.zeros(2))
        return len(seen), len(module.__dict__.get("__warningregistry__", {}))

    once, registry_once = shown(1, True)
    assert shown(30, True) == (once, registry_once) and once >= 1
    assert shown(30, False)[0] == shown(1, False)[0] == 1  # plain NumPy: once per line


# -- library_code and conversions ----------------------------------------------------------


def test_library_code_true_inside_false_switches_conversions_back_on():
    f = lambda x: np.sum(np.asarray(x) ** 2)  # noqa: E731
    with library_code(False):
        with pytest.raises(tape.NodeConversionError):
            grad(f)(np.ones(2))
        with library_code(True):
            assert grad(f)(np.array([1.0, 2.0]))[0].tolist() == [2.0, 4.0]
            seen = []
            grad(lambda x: seen.append(is_converting()) or np.sum(x))(1.0)
            assert seen == [True]
        with pytest.raises(tape.NodeConversionError):
            grad(f)(np.ones(2))


IDIOMS = {
    "x[()]": lambda x: np.asarray(x)[()] ** 3,
    "x[np.newaxis]": lambda x: np.sum(np.asarray(x)[np.newaxis] * 2.0),
    "mask and fill": lambda x: np.sum(_fill(np.array(x, dtype=float))),
    "np.array then index": lambda x: np.array(x)[...] * np.sin(x),
    "atleast_1d": lambda x: np.sum(np.atleast_1d(np.asarray(x)) ** 2),
}


def _fill(a):
    a[a < 0] = 0.0
    return a * 3.0


@pytest.mark.parametrize("name", list(IDIOMS))
@pytest.mark.parametrize("x", [0.7, -0.4, np.float64(1.3), np.float32(0.5)])
def test_a_python_or_numpy_scalar_through_library_idioms(name, x):
    f = IDIOMS[name]
    value, (g,) = tape.value_and_grad(f)(x)
    assert value == pytest.approx(float(f(x)), rel=1e-6)  # NumPy's own value, run plainly
    expected = numeric_grad(f, (float(x),), 0)
    np.testing.assert_allclose(g, expected, rtol=1e-3 if type(x) is np.float32 else 1e-6)
    assert type(g) is type(x)


KEYWORD_FORMS = {
    "asarray(a=)": lambda x: np.sum(np.asarray(a=x) ** 2),
    "array(object=, ndmin=)": lambda x: np.sum(np.array(object=x, ndmin=2)[0] * x),
    "asanyarray(a=, dtype=)": lambda x: np.sum(np.asanyarray(a=x, dtype=np.float64) ** 3),
    "full(shape=, fill_value=)": lambda x: np.sum(np.full(shape=(2, 3), fill_value=x) * x),
    "full(2, fill_value=)": lambda x: np.sum(np.full(2, fill_value=x[0]) ** 2),
    "full_like(a=, fill_value=)": lambda x: np.sum(np.full_like(a=np.ones(3), fill_value=x[1]) * x),
    "as_strided(x=, shape=, strides=)": lambda x: np.sum(
        np.lib.stride_tricks.as_strided(x=x, shape=(2,), strides=(16,)) ** 2
    ),
}


@pytest.mark.parametrize("name", list(KEYWORD_FORMS))
def test_every_call_form_of_a_conversion_records_the_node(name):
    f = KEYWORD_FORMS[name]
    x = np.array([0.3, -1.2, 0.8])
    np.testing.assert_allclose(grad(f)(x)[0], numeric_grad(f, (x,), 0), rtol=1e-6, atol=1e-9)


def test_wrappers_take_every_call_form_and_pickle_as_numpys():
    grad(lambda x: x * 2.0)(1.0)  # the wrappers are in place from the first pass on
    assert np.array(object=[1.0]).tolist() == [1.0]
    assert np.asarray(a=[1, 2], dtype=float).dtype == np.float64
    assert np.full(shape=2, fill_value=3.0).tolist() == [3.0, 3.0]
    assert np.full_like(a=np.ones(2), fill_value=4.0).tolist() == [4.0, 4.0]
    strided = np.lib.stride_tricks.as_strided(x=np.arange(4.0), shape=(2,), strides=(16,))
    assert strided.tolist() == [0.0, 2.0]
    for f in (np.asarray, np.array, np.asanyarray, np.ascontiguousarray, np.full, np.full_like,
              np.asarray_chkfinite, np.lib.stride_tricks.as_strided, warnings.warn):  # fmt: skip
        assert pickle.loads(pickle.dumps(f)) is f
        assert f.__name__ == f.__wrapped__.__name__ and f.__doc__ == f.__wrapped__.__doc__
    partial = functools.partial(np.array, dtype=np.float32)
    assert pickle.loads(pickle.dumps(partial))([1]).dtype == np.float32


def test_a_module_imported_during_a_pass_and_a_partial_made_there_work_after_it():
    made = {}

    def f(x):
        module = types.ModuleType("imported_in_f")
        exec("from numpy import asarray, array\ndef g(v):\n    return asarray(v) * 2\n",
             module.__dict__)  # fmt: skip
        made["module"], made["partial"] = module, functools.partial(np.array, ndmin=2)
        return np.sum(module.g(x))

    assert grad(f)(np.ones(2))[0].tolist() == [2.0, 2.0]
    module, partial = made["module"], made["partial"]
    assert type(module.g([1.0])) is np.ndarray and module.g([1.0]).tolist() == [2.0]
    assert partial([1.0]).shape == (1, 1) and type(partial([1.0])) is np.ndarray
    leaf = tape.Leaf(tape.Tape(), np.ones(2))
    with pytest.raises(tape.NodeConversionError):
        module.asarray(leaf)  # outside a pass, as NumPy's own would refuse it


def test_nested_and_failed_passes_leave_no_thread_recording():
    assert run_pass(True, is_converting) and not is_converting()
    assert run_pass(False, run_pass, True, is_converting)
    with pytest.raises(KeyError):
        run_pass(True, {}.__getitem__, "missing")
    assert not converting_threads and gc.isenabled()


# -- signals, the host's Ctrl-C, fork: in a fresh interpreter --------------------------------

_PRELUDE = """
import gc, os, signal, sys, threading, time
import numpy as np
import tape
from tape.runtime.conversions import converting_threads
BEFORE = (gc.get_threshold(), np.geterr(), np.geterrcall(),
          {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)})
def state():
    return (gc.get_threshold(), np.geterr(), np.geterrcall(),
            {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)})
def loss(x):
    for _ in range(20):
        x = np.tanh(np.asarray(x)) + 0.1 * np.sin(x)
    return np.sum(x * x)
"""


def test_interrupts_as_jupyter_sends_them_leave_nothing_behind():
    out = _fresh("""
        import _thread, random
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as ipykernel, each cell
        rng, cut = random.Random(3), 0
        g = tape.grad(loss)
        for _ in range(150):
            timer = threading.Timer(rng.uniform(0, 0.004), _thread.interrupt_main)
            try:
                timer.start()
                for _ in range(5):
                    g(np.ones(3))
                timer.join()  # an interrupt due now arrives here, inside the try
            except KeyboardInterrupt:
                cut += 1
            timer.join()
            assert state() == BEFORE and not converting_threads, state()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        print("cut", cut)
    """)
    assert int(out.split()[-1]) > 30


def test_asyncio_and_unittest_keep_their_own_ctrl_c():
    out = _fresh("""
        import asyncio, unittest
        tape.grad(loss)(np.ones(3))
        async def main():
            tape.grad(loss)(np.ones(3))  # a gradient inside the coroutine
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                return "cancelled gracefully"
        print(asyncio.run(main()))
        assert state() == BEFORE
        unittest.installHandler()  # catch-break: the first Ctrl-C stops the run
        result = unittest.TestResult()
        unittest.registerResult(result)
        tape.grad(loss)(np.ones(3))
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        print("unittest stops" if result.shouldStop else "unittest raised")
    """)
    assert "cancelled gracefully" in out and "unittest stops" in out


def test_signals_arriving_during_passes_are_all_handled_in_their_pass():
    out = _fresh("""
        counts = {signal.SIGHUP: 0, signal.SIGTERM: 0, signal.SIGUSR1: 0}
        def count(signum, frame):
            counts[signum] += 1
        for s in counts:
            signal.signal(s, count)
        pid, pairs = os.getpid(), 60
        def send():  # each pair once the last was handled: Python merges a signal sent twice
            for i in range(pairs):
                os.kill(pid, signal.SIGHUP); os.kill(pid, signal.SIGTERM)
                deadline = time.time() + 5
                while min(counts[signal.SIGHUP], counts[signal.SIGTERM]) <= i:
                    if time.time() > deadline:
                        return
                    time.sleep(0.0005)
        sender = threading.Thread(target=send)
        sender.start()
        g = tape.grad(loss)
        while sender.is_alive():
            g(np.ones(3))
        sender.join()
        g(np.ones(3))
        print("pairs", counts[signal.SIGHUP], counts[signal.SIGTERM])
        def waits_for_its_signal(x):  # a signal landing in vmap is handled there
            os.kill(pid, signal.SIGUSR1)
            deadline = time.time() + 5
            while counts[signal.SIGUSR1] == 0 and time.time() < deadline:
                x = x * 1.0
            return np.sum(x) * counts[signal.SIGUSR1]
        handled = [float(np.sum(tape.vmap(tape.grad(waits_for_its_signal))(np.ones((2, 3)))[0]))
                   for _ in range(20)]
        print("vmap", counts[signal.SIGUSR1], min(handled))
    """)
    assert out.split("pairs")[1].split()[:2] == ["60", "60"]  # none of either kind lost
    assert out.split("vmap")[1].split()[1] != "0.0"  # handled inside its own pass


def test_a_child_forked_during_a_pass_lives_as_without_tape():
    out = _fresh("""
        import multiprocessing as mp
        def child_state(_):
            ok = state() == BEFORE and not converting_threads
            g = tape.grad(loss)(np.full(3, 0.5))[0]
            return ok, g.tolist()
        def f(x):
            with mp.get_context("fork").Pool(1) as pool:
                f.results = pool.map(child_state, [0])
            return loss(x)
        g = tape.grad(f)(np.full(3, 0.5))[0]
        (ok, child_grad), = f.results
        print("fork", ok, np.allclose(child_grad, g), state() == BEFORE)
    """)
    assert "fork True True True" in out
