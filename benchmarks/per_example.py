"""Per-example gradients of the MLP benchmark (batch 64): ``vmap(grad(loss))``.

    python benchmarks/per_example.py           # medians over 50 repeats
    python benchmarks/per_example.py --quick   # a smoke run

Compared, in one process and one thread: the hand-written per-example gradient in NumPy
(``einsum`` over the batch: the limit), ``tape.vmap(tape.grad(loss))``, a Python loop of
64 ``tape.grad`` calls, and, where installed, ``torch.func.vmap(torch.func.grad)`` and
``jax.vmap(jax.grad)`` (eager and jit). Every gradient is checked against the
hand-written one.
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

from workloads import mlp_data  # noqa: E402


def loss_one(params, x, y, np_like=np):
    """The MLP's loss on one example (x of shape (64,), y one-hot of shape (10,))."""
    w1, b1, w2, b2 = params
    h = np_like.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - np_like.max(z)
    logp = z - np_like.log(np_like.sum(np_like.exp(z)))
    return -np_like.sum(y * logp)


def hand(params, x, y):
    """Per-example gradients by hand: the batch is a leading axis, einsum over it."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - np.max(z, axis=1, keepdims=True)
    e = np.exp(z)
    s = np.sum(e, axis=1, keepdims=True)
    dz = e / s * np.sum(y, axis=1, keepdims=True) - y
    dh = (dz @ w2.T) * (1 - h * h)
    return [np.einsum("bi,bj->bij", x, dh), dh, np.einsum("bi,bj->bij", h, dz), dz]


def runners(params, x, y):
    import tape

    out = {"numpy (einsum, by hand)": lambda: hand(params, x, y)}
    per_example = tape.vmap(tape.grad(loss_one, argnums=0), in_axes=(None, 0, 0))
    out["tape vmap(grad)"] = lambda: per_example(params, x, y)
    g = tape.grad(loss_one, argnums=0)

    def loop():
        gs = [g(params, x[i], y[i]) for i in range(len(x))]
        return [np.stack([gi[k] for gi in gs]) for k in range(4)]

    out["tape loop of grad"] = loop
    if importlib.util.find_spec("torch"):
        import torch
        from torch.func import grad as tgrad
        from torch.func import vmap as tvmap

        torch.set_num_threads(1)
        tp = [torch.tensor(p) for p in params]
        tx, ty = torch.tensor(x), torch.tensor(y)
        tf = tvmap(tgrad(lambda p, a, b: loss_one(p, a, b, torch)), in_dims=(None, 0, 0))

        def torch_run():
            with torch.no_grad():
                return [t.numpy() for t in tf(tp, tx, ty)]

        out["torch.func vmap(grad)"] = torch_run
    if importlib.util.find_spec("jax"):
        import jax
        import jax.numpy as jnp

        jp = [jnp.asarray(p) for p in params]
        jx, jy = jnp.asarray(x), jnp.asarray(y)
        f = jax.vmap(jax.grad(lambda p, a, b: loss_one(p, a, b, jnp)), in_axes=(None, 0, 0))
        out["jax vmap(grad) eager"] = lambda: [np.asarray(t) for t in f(jp, jx, jy)]
        fj = jax.jit(f)
        out["jax vmap(grad) jit"] = lambda: [
            np.asarray(t) for t in jax.block_until_ready(fj(jp, jx, jy))
        ]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else args.repeats
    params, x, y = mlp_data(batch=64)
    expected = hand(params, x, y)
    rows = []
    for name, run in runners(params, x, y).items():
        got = run()
        error = max(
            float(np.max(np.abs(np.asarray(a) - b)) / (np.max(np.abs(b)) + 1e-300))
            for a, b in zip(got, expected)
        )
        if error > 1e-8:
            raise AssertionError(f"{name}: relative error {error:.2e} against the hand-written")
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        rows.append((name, statistics.median(times)))
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
