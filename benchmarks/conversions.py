"""What the recording of conversions in library code costs (``tape.runtime.conversions``).

    python benchmarks/conversions.py

From the first pass on, NumPy's np.asarray, np.array, np.full and friends are wrapped,
wherever a module binds them, by stateless wrappers that call NumPy's own function unless
their thread records (tape.runtime.conversions). This times a NumPy-heavy function that
never meets a node (its calls convert lists and arrays on every line) in a fresh process
before any pass (NumPy's own functions), after a pass with nothing recording, and while
another thread records; and the fixed cost of grad of a small function over its plain
call (the target: at most 40 us).
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
    tape.grad(lambda x: x * 2.0)(1.0)  # the first pass installs the wrappers
    assert np.asarray.__wrapped__ is np._core.multiarray.asarray
    after = {f.__name__: _median(f, rows) for f in (numpy_heavy, conversions_only)}

    recording, finished = threading.Event(), threading.Event()

    def records(x):  # holds a forward pass open in another thread
        recording.set()
        finished.wait()
        return np.sum(x)

    other = threading.Thread(target=lambda: tape.grad(records)(np.ones(2)))
    other.start()
    recording.wait()
    during = {f.__name__: _median(f, rows) for f in (numpy_heavy, conversions_only)}
    finished.set()
    other.join()

    calls = len(rows) * 3  # conversions per run of conversions_only
    print(f"{'function':<18}{'NumPy own':>12}{'wrapped, idle':>16}{'ratio':>7}"
          f"{'another records':>18}{'ratio':>7}")  # fmt: skip
    for name in plain:
        print(f"{name:<18}{plain[name] * 1e3:>9.2f} ms{after[name] * 1e3:>13.2f} ms"
              f"{after[name] / plain[name]:>7.2f}{during[name] * 1e3:>15.2f} ms"
              f"{during[name] / plain[name]:>7.2f}")  # fmt: skip
    extra = (after["conversions_only"] - plain["conversions_only"]) / calls
    print(f"per conversion call, wrapped, nothing recording: {extra * 1e9:+.0f} ns")

    v = np.ones(8)
    small = lambda v: np.sum(v * 2.0)  # noqa: E731
    tiny = tape.grad(small)
    tiny(v)
    per_grad = _median(lambda: [tiny(v) for _ in range(2000)], repeats=9) / 2000
    per_call = _median(lambda: [small(v) for _ in range(2000)], repeats=9) / 2000
    print(f"grad of np.sum(v * 2.0), 8 floats: {per_grad * 1e6:.1f} us, "
          f"{(per_grad - per_call) * 1e6:.1f} us over the plain call")  # fmt: skip


if __name__ == "__main__":
    main()
