"""Peak memory of the gradient of a long chain, with and without checkpointing.

    python benchmarks/checkpoint_memory.py [--width 1000] [--lengths 16,64,256,1024,4096]

A chain of n steps h <- tanh(h) * 0.99 + 0.01 * h on a vector of ``width`` float64s is
differentiated twice: as it is, where the tape keeps every step's arrays (memory grows
like n), and split into segments of about sqrt(n) steps, each under ``tape.checkpoint``:
the tape keeps only the segment boundaries, and the reverse pass recomputes one segment
at a time (memory grows like sqrt(n)). Peaks are tracemalloc's (NumPy reports its array
buffers to it), over the whole gradient call. The gradients must be identical.
"""

from __future__ import annotations

import argparse
import math
import tracemalloc

import numpy as np

from tape import checkpoint, grad


def step(h):
    return np.tanh(h) * 0.99 + 0.01 * h


def chain(x, n):
    h = x
    for _ in range(n):
        h = step(h)
    return h


def loss(x, n):
    return np.sum(chain(x, n) ** 2)


def checkpointed_loss(x, n):
    size = max(1, round(math.sqrt(n)))
    segment = checkpoint(chain)
    h, done = x, 0
    while done < n:
        k = min(size, n - done)
        h = segment(h, k)
        done += k
    return np.sum(h**2)


def peak_of(f, *args):
    """The gradient of f and the peak bytes allocated while taking it."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    g = grad(f, argnums=0)(*args)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return g, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--lengths", default="16,64,256,1024,4096")
    options = parser.parse_args()
    x = np.linspace(-1.0, 1.0, options.width)
    step_mb = x.nbytes / 2**20

    print(f"chain of n steps on {options.width} float64s ({step_mb * 1024:.0f} KiB per array)\n")
    columns = ["     n", "plain peak MiB", "checkpointed peak MiB", "plain / n KiB",
               "checkpointed / sqrt(n) KiB", "same gradient"]  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("-" * (len(c) + 1) + ":" for c in columns) + "|")
    for n in map(int, options.lengths.split(",")):
        g_plain, plain = peak_of(loss, x, n)
        g_ckpt, ckpt = peak_of(checkpointed_loss, x, n)
        same = np.array_equal(g_plain, g_ckpt)
        row = [f"{n}", f"{plain / 2**20:.2f}", f"{ckpt / 2**20:.2f}", f"{plain / n / 1024:.1f}",
               f"{ckpt / math.sqrt(n) / 1024:.1f}", "yes" if same else "NO"]  # fmt: skip
        print("| " + " | ".join(v.rjust(len(c)) for v, c in zip(row, columns)) + " |")
        if not same:
            raise SystemExit("checkpointing changed the gradient")


if __name__ == "__main__":
    main()
