"""What the runtime's conversion wrappers cost code that never meets a node
(``tape.runtime.conversions``), and the fixed cost of a small ``grad``.

    python benchmarks/conversions.py

From the first pass on, NumPy's np.asarray, np.array, np.full and friends are wrapped,
wherever a module binds them, by stateless wrappers that call NumPy's own function unless
their thread records. Each workload below runs in fresh processes, alternately with
NumPy's own functions (no pass ever run) and with the wrappers installed (one pass run
first, nothing recording since), so that both sides see the same machine; the ratio is
that of the medians. ``numpy_heavy`` converts on every line (the worst case); the
statsmodels and scikit-learn fits (when installed) are library code as it is used.
Then the same while another thread records, and a small grad's fixed cost over its plain
call (the target: at most 40 us), beside ``torch.autograd.grad``'s whole call when
PyTorch is installed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


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


def _workloads() -> dict:
    rows = [np.random.default_rng(i).normal(size=3) for i in range(2000)]
    work = {"numpy_heavy": lambda: numpy_heavy(rows)}
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = X @ np.ones(5) + rng.normal(size=200)
    try:
        import statsmodels.api as sm

        family = sm.families.Binomial()
        work["statsmodels GLM fit"] = lambda: sm.GLM(y > 0, sm.add_constant(X), family).fit()
        work["statsmodels OLS summary"] = lambda: sm.OLS(y, sm.add_constant(X)).fit().summary()
    except ImportError:
        pass
    try:
        from sklearn.linear_model import LogisticRegression

        work["sklearn LogisticRegression"] = lambda: LogisticRegression().fit(X, y > 0)
    except ImportError:
        pass
    return work


def _median(f, repeats=15):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def child(wrapped: bool) -> None:
    """One side of the comparison, printed as JSON: medians per workload."""
    work = _workloads()
    for f in work.values():
        f()  # imports and caches warm
    if wrapped:
        import tape

        tape.grad(lambda x: x * 2.0)(1.0)  # the first pass installs the wrappers
        assert np.asarray.__wrapped__ is np._core.multiarray.asarray
    print(json.dumps({name: _median(f) for name, f in work.items()}))


def _another_thread_records(work: dict) -> dict:
    import tape

    recording, finished = threading.Event(), threading.Event()

    def records(x):  # holds a forward pass open in another thread
        recording.set()
        finished.wait()
        return np.sum(x)

    other = threading.Thread(target=lambda: tape.grad(records)(np.ones(2)))
    other.start()
    recording.wait()
    during = {name: _median(f) for name, f in work.items()}
    finished.set()
    other.join()
    return during


def _small_grad() -> str:
    import tape

    v = np.ones(8)
    small = lambda v: np.sum(v * 2.0)  # noqa: E731
    tiny = tape.grad(small)
    tiny(v)
    per_grad = _median(lambda: [tiny(v) for _ in range(2000)], repeats=9) / 2000
    per_call = _median(lambda: [small(v) for _ in range(2000)], repeats=9) / 2000
    text = (f"grad of np.sum(v * 2.0), 8 floats: {per_grad * 1e6:.1f} us, "
            f"{(per_grad - per_call) * 1e6:.1f} us over the plain call")  # fmt: skip
    try:
        import torch

        t = torch.ones(8, dtype=torch.float64, requires_grad=True)
        torch_call = lambda: torch.autograd.grad(torch.sum(t * 2.0), t)  # noqa: E731
        per_torch = _median(lambda: [torch_call() for _ in range(2000)], repeats=9) / 2000
        text += f"; torch.autograd.grad, the whole call: {per_torch * 1e6:.1f} us"
    except ImportError:
        pass
    return text


def main() -> None:
    runs: dict[bool, list] = {False: [], True: []}
    for _ in range(3):
        for wrapped in (False, True):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(int(wrapped))],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[wrapped].append(json.loads(out.stdout))
    names = list(runs[False][0])
    own = {n: statistics.median(r[n] for r in runs[False]) for n in names}
    wrapped = {n: statistics.median(r[n] for r in runs[True]) for n in names}

    import tape

    tape.grad(lambda x: x * 2.0)(1.0)
    during = _another_thread_records(_workloads())
    print(f"{'workload':<28}{'NumPy own':>11}{'wrapped':>11}{'ratio':>7}"
          f"{'another records':>17}{'ratio':>7}")  # fmt: skip
    for n in names:
        print(f"{n:<28}{own[n] * 1e3:>8.2f} ms{wrapped[n] * 1e3:>8.2f} ms"
              f"{wrapped[n] / own[n]:>7.3f}{during[n] * 1e3:>14.2f} ms"
              f"{during[n] / own[n]:>7.3f}")  # fmt: skip
    print(_small_grad())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(bool(int(sys.argv[2])))
    else:
        main()
