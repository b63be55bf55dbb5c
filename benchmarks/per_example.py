"""Per-example gradients of the MLP benchmark (batch 64): ``vmap(grad(loss))``.

    python benchmarks/per_example.py           # medians over 50 repeats
    python benchmarks/per_example.py --quick   # a smoke run

The same workload runs in ``benchmarks/run.py --workloads per_example`` (one process per
library, beside the other workloads). Compared here, in one process and one thread: the
hand-written per-example gradient in NumPy (``einsum`` over the batch: the limit),
``tape.vmap(tape.grad(loss))``, ``tape.vmap`` of ``tape.compile_grad(loss, ...)`` (one
example's gradient recorded once, its tape on batched values replayed), a Python loop of
64 ``tape.grad`` calls, and, where
installed, ``torch.func.vmap(torch.func.grad)`` and ``jax.vmap(jax.grad)`` (eager and
jit). Every gradient is checked against the hand-written one.
"""

from __future__ import annotations

import os

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads as w  # noqa: E402

# the workload's pieces, under the names this script has always given them
loss_one = w.per_example_loss
hand = w.per_example_hand
RUNNERS = {
    "numpy (einsum, by hand)": "numpy",
    "tape vmap(grad)": "tape",
    "tape vmap(compile_grad)": "tape-compiled",
    "tape loop of grad": "tape-loop",
    "torch.func vmap(grad)": "torch",
    "jax vmap(grad) eager": "jax",
    "jax vmap(grad) jit": "jax-jit",
}
MODULES = {"torch": "torch", "jax": "jax", "jax-jit": "jax"}


def runners():
    """One runner per row (``benchmarks/workloads.py``'s ``make_per_example``), for the
    libraries installed."""
    out = {}
    for name, lib in RUNNERS.items():
        if lib in MODULES and importlib.util.find_spec(MODULES[lib]) is None:
            continue
        runner = w.make_per_example(lib)
        out[name] = lambda runner=runner: runner.to_numpy(runner())[1]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else args.repeats
    expected = hand(*w.mlp_data(batch=64))
    runs = runners()
    for name, run in runs.items():
        got = run()
        error = max(
            float(np.max(np.abs(np.asarray(a) - b)) / (np.max(np.abs(b)) + 1e-300))
            for a, b in zip(got, expected)
        )
        if error > 1e-8:
            raise AssertionError(f"{name}: relative error {error:.2e} against the hand-written")
    # Rows take turns in blocks of calls, round after round: a change in the machine's load
    # falls on every row alike, and each block runs warm (its first call, after another
    # library's, is not timed; single calls taken in turn would time every row cold).
    rounds = 5
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            run()
            for _ in range(max(1, repeats // rounds)):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    rows = [(name, statistics.median(t)) for name, t in times.items()]
    base = rows[0][1]
    loop = dict(rows).get("tape loop of grad")
    print(f"per-example gradients, MLP 64-128-10, batch 64, median of {repeats}")
    print("| | ms | × hand-written | loop ÷ this |")
    print("| --- | ---: | ---: | ---: |")
    for name, t in rows:
        speedup = f"{loop / t:.1f}" if loop else ""
        print(f"| {name} | {t * 1e3:.3f} | {t / base:.2f} | {speedup} |")
    return rows


if __name__ == "__main__":
    main()
