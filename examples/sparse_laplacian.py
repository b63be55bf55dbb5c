"""A resistor network of 100,000 nodes: the gradient of the electrical power with respect to
every edge conductance, through a sparse graph-Laplacian solve.

The grid's weighted Laplacian ``L(w)`` is assembled as ``tape.scipy.sparse.coo_array``
from the conductances ``w`` (one value per edge, the pattern fixed), converted to CSC and
solved, ``(L(w) + I / 10) u = f`` with ``tape.scipy.sparse.linalg.spsolve``. The
gradient of ``f . u`` with respect to the ~200,000 conductances has their shape; it
costs one more sparse solve (with ``L'``), never a dense matrix. A few coordinates are
checked against central differences.

    python examples/sparse_laplacian.py            # a 317 x 317 grid: 100,489 unknowns
    python examples/sparse_laplacian.py --quick    # a 60 x 60 grid
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tape import value_and_grad
from tape.scipy import sparse


def grid(n_side):
    """The edges of an ``n_side x n_side`` grid, and the Laplacian's pattern."""
    n = n_side * n_side
    ids = np.arange(n).reshape(n_side, n_side)
    i = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    j = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    rows = np.concatenate([i, j, i, j, np.arange(n)])
    cols = np.concatenate([i, j, j, i, np.arange(n)])
    return n, len(i), rows, cols


def make_loss(n_side):
    n, n_edges, rows, cols = grid(n_side)
    x = np.linspace(0.0, 1.0, n_side)
    f = (np.sin(3 * x)[:, None] * np.cos(2 * x)[None, :]).ravel()  # the injected currents

    def power(w):
        values = np.concatenate([w, w, -w, -w, np.full(n, 0.1)])
        L = sparse.coo_array((values, (rows, cols)), shape=(n, n)).tocsc()
        u = sparse.linalg.spsolve(L, f)
        return f @ u / n

    return power, n, n_edges


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 60 x 60 grid")
    args = parser.parse_args(argv)

    n_side = 60 if args.quick else 317
    power, n, n_edges = make_loss(n_side)
    w = np.random.default_rng(0).uniform(0.5, 1.5, n_edges)
    start = time.perf_counter()
    value, (g,) = value_and_grad(power)(w)
    elapsed = time.perf_counter() - start
    print(f"{n} unknowns, {n_edges} conductances: power {value:.6f}, gradient of shape "
          f"{g.shape} in {elapsed:.2f} s")  # fmt: skip
    worst = 0.0
    # edges where the power is sensitive (far-off edges move it less than its rounding)
    strong = np.flatnonzero(np.abs(g) > np.median(np.abs(g)))
    picks = [int(np.argmax(np.abs(g)))] + list(np.random.default_rng(1).choice(strong, 2))
    for k in picks:
        e = np.zeros(n_edges)
        e[k] = 1e-3
        fd = (power(w + e) - power(w - e)) / 2e-3
        worst = max(worst, abs(g[k] - fd) / abs(fd))
        print(f"  d power / d w[{k}] = {g[k]: .6e}   central difference {fd: .6e}")
    print(f"largest relative difference {worst:.1e}")
    return worst, elapsed


if __name__ == "__main__":
    main()
