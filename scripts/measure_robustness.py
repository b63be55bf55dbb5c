"""What robustness costs: mutation checks, the debug modes, time and memory per record.

    python scripts/measure_robustness.py            # all, a few minutes
    python scripts/measure_robustness.py --quick    # smaller sizes

Times are CPU seconds of this process (time.process_time), best of several runs, so that
other work on the machine disturbs them less.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import tape  # noqa: E402
from tape import (  # noqa: E402
    Leaf,
    Tape,
    grad,
    propagate,
    reverse_tape,
)
from tape.core import mutation, recording  # noqa: E402


def chain(n):
    def f(x):
        for _ in range(n):
            x = x + 0.01 * np.log(np.exp(np.sin(x)) + 1)
        return x

    return f


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


@contextlib.contextmanager
def mutation_checks_off():
    """Fingerprints not taken (and so never checked): the engine without mutation detection."""
    saved = recording.sealed
    recording.sealed = lambda seal, key, a: seal
    try:
        yield
    finally:
        recording.sealed = saved


def scalar_chain(n=2000, repeats=15):
    g = grad(chain(n))
    ops = 6 * n
    rows = [("scalar chain, modes off", best(lambda: g(0.3), repeats) / ops * 1e6)]
    with mutation_checks_off():
        rows.append(
            ("scalar chain, mutation checks off", best(lambda: g(0.3), repeats) / ops * 1e6)
        )
    with tape.debug():
        rows.append(("scalar chain, under debug()", best(lambda: g(0.3), repeats) / ops * 1e6))
    with tape.detect_anomaly():
        rows.append(
            ("scalar chain, under detect_anomaly()", best(lambda: g(0.3), repeats) / ops * 1e6)
        )
    for name, us in rows:
        print(f"{name:45s} {us:7.3f} us/op (record + propagate)")


def matmul_workload(size=1000, repeats=5):
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal((size, size)) for _ in range(3))
    g = grad(lambda A, B, C: np.sum(np.tanh(A @ B) @ C))
    on = best(lambda: g(A, B, C), repeats)
    with mutation_checks_off():
        off = best(lambda: g(A, B, C), repeats)
    fp = best(lambda: mutation.fingerprint(A), 20)
    print(
        f"sum(tanh(A @ B) @ C), {size}x{size}: {on * 1e3:.1f} ms with mutation checks, "
        f"{off * 1e3:.1f} ms without ({(on / off - 1) * 100:+.1f}%); "
        f"one fingerprint of an {A.nbytes >> 20} MB array: {fp * 1e3:.2f} ms"
    )


def per_record(sizes, repeats):
    """Time per recorded and propagated op as the tape grows (the collector at the
    program's own pace: tape never changes it)."""
    print("records     forward us/op  reverse us/op")
    for records in sizes:
        n = records // 6
        fwd, rev = [], []
        for _ in range(repeats):
            t = Tape()
            x = Leaf(t, 0.3)
            t0 = time.process_time()
            y = chain(n)(x)
            t1 = time.process_time()
            propagate(t, reverse_tape(y))
            t2 = time.process_time()
            t.release()
            fwd.append((t1 - t0) / (6 * n) * 1e6)
            rev.append((t2 - t1) / (6 * n) * 1e6)
        print(f"{records:>9,}   {min(fwd):12.2f}  {min(rev):13.2f}")


def memory_per_record(records=200_000):
    gc.collect()
    tracemalloc.start()
    t = Tape()
    x = Leaf(t, 0.3)
    base = tracemalloc.get_traced_memory()[0]
    y = chain(records // 6)(x)
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    n = len(t) - 1
    print(
        f"memory per record of the scalar chain: {used / n:.0f} bytes "
        f"(Branch {sys.getsizeof(t[2])} B, args tuple {sys.getsizeof(t[2].args)} B, "
        f"value {sys.getsizeof(t[2].value)} B, list slot 8 B); {n:,} records"
    )
    del y
    t.release()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scalar_chain()
    matmul_workload(500 if args.quick else 1000)
    memory_per_record()
    sizes = [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])
    per_record(sizes, 3)


if __name__ == "__main__":
    main()
