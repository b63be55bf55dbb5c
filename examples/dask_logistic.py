"""Logistic regression on a data set larger than any worker's memory, on a Dask cluster.

The loss is the same plain NumPy code as for ndarrays. Given Dask arrays, ``grad`` records
the forward pass and runs the reverse pass without computing anything: the gradients it
returns are lazy Dask arrays, whose graph (generating the data, the forward pass and the
reverse pass, chunk by chunk) runs on a ``dask.distributed`` cluster when computed.

The script starts a ``LocalCluster`` of worker processes, each with a memory limit, makes
a data set larger than one worker's limit with ``dask.array.random`` (lazily: no machine
ever holds all of it), checks the gradient against NumPy's on a sample that fits in
memory (and with ``--large``, block by block, on all of it), and takes a few steps of
gradient descent.

    python examples/dask_logistic.py           # 2 workers x 200 MB, 240 MB of data, 2 steps
    python examples/dask_logistic.py --large   # 2 workers x 300 MB, 1 GB of data, 5 steps
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from tape import grad, value_and_grad

FEATURES = 20


def loss(w, b, X, y, l2):
    """Mean logistic loss with an L2 penalty: the same code runs on ndarrays and Dask arrays."""
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.sum(w**2)


def make_data(rows, chunk_rows, seed=0):
    """Features and 0/1 labels of a logistic model, as lazy Dask arrays: each chunk is
    generated where it is needed."""
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, FEATURES), chunks=(chunk_rows, FEATURES))
    w_true = np.linspace(-2.0, 2.0, FEATURES)
    p = 1.0 / (1.0 + np.exp(-(X @ w_true + 0.5)))
    y = (rng.random(rows, chunks=chunk_rows) < p).astype(np.float64)
    return X, y


def start_cluster(workers, memory_limit):
    """A local cluster of ``workers`` processes of one thread, each with ``memory_limit``."""
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
        dashboard_address=None, silence_logs=logging.WARNING,
    )
    return cluster, Client(cluster)


def blockwise_numpy_gradient(w, b, X, y, l2):
    """The full-data gradient from NumPy alone, one block of rows at a time (the mean
    over all rows is the row-weighted mean of the blocks' means; the penalty once)."""
    total_w, total_b = np.zeros_like(w), 0.0
    rows = X.shape[0]
    for Xb, yb in zip(X.blocks, y.blocks):
        Xb, yb = Xb.compute(), yb.compute()
        gw, gb = grad(loss, argnums=(0, 1))(w, b, Xb, yb, 0.0)
        total_w += gw * len(yb) / rows
        total_b += gb * len(yb) / rows
    return total_w + l2 * w, total_b


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted; the default is quick")
    parser.add_argument("--large", action="store_true",
                        help="1 GB on workers of 300 MB, 5 steps, and a block-by-block check "
                             "of the gradient on all of it (a minute on 2 cores)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="gradient-descent steps")
    args = parser.parse_args(argv)

    import dask

    if args.large:
        memory_limit, rows, chunk_rows, steps = "300MB", 6_250_000, 125_000, 5
    else:
        memory_limit, rows, chunk_rows, steps = "200MB", 1_500_000, 75_000, 2
    steps = args.steps if args.steps is not None else steps
    l2 = 1e-3

    cluster, client = start_cluster(args.workers, memory_limit)
    try:
        X, y = make_data(rows, chunk_rows)
        limit = dask.utils.parse_bytes(memory_limit)
        print(f"cluster         {args.workers} workers x 1 thread x {memory_limit}")
        print(
            f"data            {rows:,} x {FEATURES} float64 = {X.nbytes / 1e6:,.0f} MB "
            f"({X.nbytes / limit:.1f}x one worker's limit), chunks of {chunk_rows:,} rows"
        )

        w, b = np.zeros(FEATURES), 0.0
        start = time.perf_counter()
        gw, gb = grad(loss, argnums=(0, 1))(w, b, X, y, l2)  # lazy: nothing computed yet
        recorded = time.perf_counter() - start
        kind = f"{type(gw).__module__.split('.')[0]}.{type(gw).__name__}"
        print(f"recorded        {recorded * 1e3:.1f} ms; the gradient is a lazy {kind}")
        start = time.perf_counter()
        gw_, gb_ = dask.compute(gw, gb)
        print(f"computed        {time.perf_counter() - start:.2f} s on the cluster")

        # the same function on a sample that fits in memory: Dask on the cluster vs NumPy
        n = 10_000
        Xs, ys = X[:n], y[:n]
        sample = dask.compute(*grad(loss, argnums=(0, 1))(w + 0.1, b, Xs, ys, l2))
        Xn, yn = dask.compute(Xs, ys)
        reference = grad(loss, argnums=(0, 1))(w + 0.1, b, Xn, yn, l2)
        sample_diff = max(np.max(np.abs(s - r)) for s, r in zip(sample, reference))
        print(f"sample of {n:,}   max |Dask - NumPy| {sample_diff:.2e}")

        if args.large:  # all the data, through NumPy one block at a time
            full = blockwise_numpy_gradient(w, b, X, y, l2)
            full_diff = max(np.max(np.abs(s - r)) for s, r in zip((gw_, gb_), full))
            print(f"all rows        max |Dask - NumPy by blocks| {full_diff:.2e}")

        step = value_and_grad(loss, argnums=(0, 1))
        losses = []
        for _ in range(steps):
            start = time.perf_counter()
            value, (gw, gb) = step(w, b, X, y, l2)
            value, gw, gb = dask.compute(value, gw, gb)
            w, b = w - 1.0 * gw, b - 1.0 * gb
            losses.append(float(value))
            took = time.perf_counter() - start
            print(f"step {len(losses)}          loss {value:.4f}  ({took:.2f} s)")
        return {"sample_diff": sample_diff, "losses": losses, "w": w}
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
