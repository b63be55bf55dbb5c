"""What the recording of conversions in library code costs (``tape.core.conversions``).

    python benchmarks/conversions.py

While some thread runs a forward pass, NumPy's np.asarray, np.array, np.full and friends
are replaced, wherever a module binds them, by wrappers that test a thread-local before
calling NumPy's own function. This times a NumPy-heavy function that never meets a node
(its calls convert lists and arrays on every line), three ways: with nothing recording
(NumPy's own functions in place), while another thread records (the wrappers in place,
each call paying the test), and the same function's conversions alone; and the cost a
gradient pays to swap the names in and out, from grad of a function of one operation.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import tape  # noqa: E402


def numpy_heavy(rows):
    """Library-style code: converts its input, builds arrays from lists, fills, stacks."""
    total = 0.0
    for row in rows:
        a = np.asarray(row, dtype=float)
        b = np.array([a[0], a[1], 2.0])
        c = np.full(3, a[2])
        d = np.ascontiguousarray(np.r_[a, b])
        total += float(np.dot(d[:3], c) + np.sum(np.asanyarray(b) ** 2))
    return total


def conversions_only(rows):
    for row in rows:
        np.asarray(row)
        np.array(row)
        np.full(3, 1.0)


def _median(f, *args, repeats=15):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    rows = [np.random.default_rng(i).normal(size=3) for i in range(2000)]
    plain = {f.__name__: _median(f, rows) for f in (numpy_heavy, conversions_only)}

    recording, finished = threading.Event(), threading.Event()

    def records(x):  # holds a forward pass open in another thread
        recording.set()
        finished.wait()
        return np.sum(x)

    other = threading.Thread(target=lambda: tape.grad(records)(np.ones(2)))
    other.start()
    recording.wait()
    assert np.asarray is not tape.core.conversions._ORIGINAL_ASARRAY  # the wrappers are in place
    during = {f.__name__: _median(f, rows) for f in (numpy_heavy, conversions_only)}
    finished.set()
    other.join()

    calls = len(rows) * 3  # conversions per run of conversions_only
    print(f"{'function':<18}{'nothing recording':>20}{'another thread records':>25}{'ratio':>8}")
    for name in plain:
        print(f"{name:<18}{plain[name] * 1e3:>17.2f} ms{during[name] * 1e3:>22.2f} ms"
              f"{during[name] / plain[name]:>8.2f}")  # fmt: skip
    extra = (during["conversions_only"] - plain["conversions_only"]) / calls
    print(f"per conversion call while another thread records: {extra * 1e9:+.0f} ns")

    tiny = tape.grad(lambda x: x * 2.0)
    tiny(1.0)
    per_grad = _median(lambda: [tiny(1.0) for _ in range(2000)], repeats=7) / 2000
    with tape.library_code(False):
        per_grad_off = _median(lambda: [tiny(1.0) for _ in range(2000)], repeats=7) / 2000
    print(f"grad of one multiply: {per_grad * 1e6:.1f} us with the names swapped in and out, "
          f"{per_grad_off * 1e6:.1f} us with library_code(False)")  # fmt: skip


if __name__ == "__main__":
    main()
