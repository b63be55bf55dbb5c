"""Gradients in several threads at once equal the sequential ones; failures leave nothing
behind. References are analytic derivatives. (That debug modes are per thread is tested in
tests/tape/tools/test_debugging.py; the collector's pace in tests/tape/runtime/test_passes.py.)"""

import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tape
from tape import grad

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


def test_failures_in_threads_leave_no_state():
    def bad(seed):
        if seed % 2:
            with pytest.raises(ZeroDivisionError):
                grad(lambda x: np.sin(x) * (1 / 0))(1.0)
        return grad(np.sin)(0.5)[0]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(bad, range(12)))
    assert results == [pytest.approx(np.cos(0.5))] * 12
    assert gc.isenabled() and not tape.runtime.conversions.converting_threads


def test_threads_that_first_meet_scipy_at_once_find_its_rules():
    # SciPy's rules load on the first miss, once per process: a fresh process, eight
    # threads meeting four special functions at the same moment
    import subprocess
    import sys
    from pathlib import Path

    code = """
import threading
import scipy.special as sp
import tape
fs = [sp.gammaln, sp.erf, sp.expit, sp.digamma]
barrier = threading.Barrier(8)
grads, errors = {}, []
def work(i):
    barrier.wait()
    try:
        grads[i] = tape.grad(fs[i % 4])(1.5)[0]
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors)
print(repr([float(grads[i]) for i in range(8)]))
"""
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    errors, values = result.stdout.splitlines()[-2:]
    assert errors == "[]", errors
    import scipy.special as sp

    want = [sp.digamma(1.5), 2 / np.sqrt(np.pi) * np.exp(-2.25), sp.expit(1.5) * sp.expit(-1.5),
            sp.polygamma(1, 1.5)]  # fmt: skip
    np.testing.assert_allclose(eval(values), [want[i % 4] for i in range(8)], rtol=1e-12)
