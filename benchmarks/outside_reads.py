"""What ``compile_grad``'s check of outside data costs on each call.

A linear model's loss closes over its data ``X`` (n × 10) and ``y``; each call of the
compiled gradient fingerprints them (``tape.transforms.outside``) before it replays.
Printed: the check alone and the whole call, best of 5, for growing n.

    python benchmarks/outside_reads.py
"""

from __future__ import annotations

import timeit

import numpy as np

from tape import compile_grad


def main() -> None:
    rng = np.random.default_rng(0)
    for n in (100, 10_000, 1_000_000):
        X, y = rng.normal(size=(n, 10)), rng.normal(size=n)
        check, call = _timings(X, y)
        print(
            f"data {(X.nbytes + y.nbytes) / 1e6:8.2f} MB: check {check * 1e3:8.3f} ms, "
            f"whole call {call * 1e3:8.3f} ms ({check / call:.0%})"
        )


def _timings(X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The check alone and the whole call, in seconds, for a loss closing over X and y."""

    def loss(w):
        return np.mean((X @ w - y) ** 2)

    w = np.zeros(X.shape[1])
    g = compile_grad(loss, w)
    program = g._last
    check = min(timeit.repeat(lambda: program.check_constants([w]), number=20, repeat=5)) / 20
    call = min(timeit.repeat(lambda: g(w), number=5, repeat=5)) / 5
    return check, call


if __name__ == "__main__":
    main()
