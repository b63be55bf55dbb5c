"""Where tape's eager value-and-gradient spends its time, per benchmark workload.

    python benchmarks/profile_eager.py [--top 12] [--workloads chain,mlp,matmul]

Prints, per workload, the share of the forward pass (recording) and of the reverse pass
in plain wall time, then cProfile's functions by own time (cProfile slows Python code more
than NumPy's, so read its shares as an upper bound on the interpreter's part).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(name, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import workloads as w  # noqa: E402

import tape  # noqa: E402
from tape.runtime import run_pass  # noqa: E402


def cases(n_matmul):
    chain = w.chain_fn(np)
    params, x, y = w.mlp_data()
    loss = w.mlp_fn(np, lambda z: np.max(z, axis=1, keepdims=True))
    a, b, c = w.matmul_data(n_matmul)
    mm = w.matmul_fn(np)
    return {
        "chain": (chain, (0.3,), 12_000, 5),
        "vchain": (lambda v: np.sum(chain(v)), (np.linspace(-1, 1, 10),), 12_000, 5),
        "mlp": (lambda w1, b1, w2, b2: loss([w1, b1, w2, b2], x, y), tuple(params), 1, 300),
        "matmul": (mm, (a, b, c), 1, 3),
    }


def split(f, args, repeats):
    """Median seconds of the forward pass alone (recording) and of value and gradient."""

    def forward():
        t = tape.Tape()
        out = run_pass(True, f, *[tape.Leaf(t, a) for a in args])  # as grad records
        t.records.clear()
        return out

    vg = tape.value_and_grad(f)
    times = {"forward": [], "total": []}
    for _ in range(max(3, repeats // 10)):
        for key, fn in (("forward", forward), ("total", lambda: vg(*args))):
            start = time.perf_counter()
            for _ in range(max(1, repeats // 10)):
                fn()
            times[key].append((time.perf_counter() - start) / max(1, repeats // 10))
    return statistics.median(times["forward"]), statistics.median(times["total"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--workloads", default="chain,vchain,mlp,matmul")
    parser.add_argument("--n", type=int, default=1000, help="size of the matmul workload")
    args = parser.parse_args()
    for name, (f, fargs, ops, repeats) in cases(args.n).items():
        if name not in args.workloads.split(","):
            continue
        fwd, total = split(f, fargs, repeats)
        unit = "per op" if ops > 1 else "per call"
        print(
            f"== {name}: value and gradient {total * 1e6 / ops:.3g} µs {unit} "
            f"(forward {fwd / total:.0%}, reverse {1 - fwd / total:.0%})"
        )
        vg = tape.value_and_grad(f)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(repeats):
            vg(*fargs)
        profile.disable()
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("tottime").print_stats(args.top)
        text = out.getvalue()
        print(text[text.index("ncalls") :].rstrip(), "\n")


if __name__ == "__main__":
    main()
