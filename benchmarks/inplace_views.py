"""The cost of writes through views: CPU time, best of five runs.

    python benchmarks/inplace_views.py [--steps 150] [--depth 1500]

- ``steps`` writes ``y += 0.001 * y`` on a 64-vector, as they are and with ``y =
  y.reshape(-1)`` before each (every step writes through a new view of the last one);
- the same number of writes through one view, ``y[8:40].reshape(4, 8).T``;
- one write after a chain of ``depth`` ravels (``y = y.ravel()``), then a read, against
  the same after one ravel.

Recording only, no reverse pass: the point is what a write costs as views pile up.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tape import Leaf, Tape


def writes(steps: int, new_view_each_step: bool) -> None:
    y = Leaf(Tape(), np.linspace(0.0, 1.0, 64))
    for _ in range(steps):
        if new_view_each_step:
            y = y.reshape(-1)
        y += 0.001 * y


def writes_through_one_view(steps: int) -> None:
    y = Leaf(Tape(), np.linspace(0.0, 1.0, 64))
    v = y[8:40].reshape(4, 8).T
    for _ in range(steps):
        v += 0.001 * v


def write_after_chain(depth: int) -> None:
    y = Leaf(Tape(), np.linspace(0.0, 1.0, 64))
    y[0] = 2.0
    for _ in range(depth):
        y = y.ravel()
    y += 1.0
    np.sum(y)


def best_ms(f, *args, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        f(*args)
        times.append(time.process_time() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--depth", type=int, default=1500)
    options = parser.parse_args()
    n = options.steps
    plain, viewed = best_ms(writes, n, False), best_ms(writes, n, True)
    print(f"{n} writes y += 0.001 * y: {plain:.1f} ms")
    print(f"  with y = y.reshape(-1) before each: {viewed:.1f} ms ({viewed / plain:.1f}x)")
    one = best_ms(writes_through_one_view, n)
    print(f"  through one view y[8:40].reshape(4, 8).T: {one:.1f} ms")
    try:
        deep = best_ms(write_after_chain, options.depth)
        print(f"one write after {options.depth} ravels: {deep:.1f} ms", end="")
        print(f" (after one: {best_ms(write_after_chain, 1):.2f} ms)")
    except RecursionError:
        print(f"one write after {options.depth} ravels: RecursionError")


if __name__ == "__main__":
    main()
