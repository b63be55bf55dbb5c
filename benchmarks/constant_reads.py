"""The cost of the mutation checks on a program that reads the same constants at every step.

    python benchmarks/constant_reads.py [--size 64] [--steps 200] [--repeats 7]

A fluid-like advection: a ``size`` x ``size`` field, flattened, is moved for ``steps``
steps by bilinear interpolation, ``f = w00 * f[i00] + w01 * f[i01] + w10 * f[i10] +
w11 * f[i11]``, with index arrays ``i..`` and weights ``w..`` fixed for the whole run (as
a simulation on a fixed grid reads its stencil's indices at every step): eight constant
arrays per step, each sealed by the record that reads it (``tape.core.mutation``). Printed:
the best CPU time of one gradient over the repeats, and how many fingerprints the
forward and the reverse pass take, with the share of the gradient's time they cost (CPU
times, which load from other processes on a shared machine disturbs less than wall time).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tape import grad
from tape.core import recording, reverse


def stencil(size: int, seed: int = 0) -> tuple[list, list]:
    """Four neighbour index arrays of a constant, random sub-cell shift, and their weights."""
    rng = np.random.default_rng(seed)
    rows, cols = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    dy, dx = rng.uniform(-1.5, 1.5, (2, size, size))
    y0, x0 = np.floor(rows + dy).astype(int), np.floor(cols + dx).astype(int)
    fy, fx = (rows + dy - y0).ravel(), (cols + dx - x0).ravel()
    index = [((y0 + a) % size * size + (x0 + b) % size).ravel() for a in (0, 1) for b in (0, 1)]
    weights = [(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx]
    return index, weights


def simulate(f, index, weights, steps):
    for _ in range(steps):
        f = sum(w * f[i] for w, i in zip(weights, index))
    return np.sum(f**2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    index, weights = stencil(args.size)
    f0 = np.random.default_rng(1).standard_normal(args.size**2)
    gradient = grad(lambda f: simulate(f, index, weights, args.steps))

    times = []
    for _ in range(args.repeats):
        start = time.process_time()
        gradient(f0)
        times.append(time.process_time() - start)

    # the checks, counted and timed in a separate run (the timer costs a little):
    # sealing the constants as they are recorded, verifying them in the reverse pass
    spent = {}

    def timed(module, name):
        original = getattr(module, name)
        spent[name] = [0, 0.0]

        def wrapper(*a, **k):
            start = time.process_time()
            try:
                return original(*a, **k)
            finally:
                spent[name][0] += 1
                spent[name][1] += time.process_time() - start

        setattr(module, name, wrapper)
        return original

    originals = [(m, n, timed(m, n)) for m, n in ((recording, "sealed"), (reverse, "verify"))]
    try:
        start = time.process_time()
        gradient(f0)
        total = time.process_time() - start
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
    print(f"grid {args.size}x{args.size}, {args.steps} steps, 8 constant arrays a step")
    print(f"gradient: {min(times) * 1e3:.1f} ms CPU (best of {args.repeats}; "
          f"median {statistics.median(times) * 1e3:.1f} ms)")  # fmt: skip
    for name, what in (("sealed", "forward pass, sealing"), ("verify", "reverse pass, verifying")):
        count, seconds = spent[name]
        print(f"{what}: {count} calls, {seconds * 1e3:.1f} ms CPU, "
              f"{100 * seconds / total:.0f}% of that gradient's {total * 1e3:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
