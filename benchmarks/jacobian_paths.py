"""``jacobian`` and ``hessian`` against the same matrices built with ``vmap``.

    python benchmarks/jacobian_paths.py            # min over 7 repeats
    python benchmarks/jacobian_paths.py --quick    # a smoke run

``jacobian(mode="fwd")`` pushes every direction through one batched forward pass,
``jacobian(mode="rev")`` pushes every cotangent through the pullback as the directions
of one forward pass, and ``hessian`` is the forward mode of ``grad``. The same matrices
by ``vmap``: ``vmap(lambda v: jvp(f, (x,), (v,))[1])`` over the identity,
``vmap(pullback)`` over the identity (the recording of ``f`` timed too, as ``jacobian``
records it), and ``vmap(lambda v: hvp(f)(x, v))`` over the identity. One process, one
thread; each time is the minimum over the repeats of a loop, and the ratio is
vmap's time over the path's (above 1: the path is faster). "fwd over pullback" is how
``jacobian(mode="rev")`` ran before it ran the pullback under ``vmap``, and still runs
where some rule cannot run batched.
"""

from __future__ import annotations

import os

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tape  # noqa: E402
from tape import hessian, hvp, jacobian, jvp, vjp, vmap  # noqa: E402
from tape.transforms import derivatives  # noqa: E402


def cases():
    rng = np.random.default_rng(0)
    W, b = rng.standard_normal((30, 50)) / 7, rng.standard_normal(30)
    V = rng.standard_normal((50, 30)) / 5
    A = rng.standard_normal((40, 40)) / 6
    return {
        "tanh layer R^50 -> R^30": (lambda x: np.tanh(W @ x + b), rng.standard_normal(50)),
        "tanh layer R^30 -> R^50": (lambda x: np.tanh(V @ x), rng.standard_normal(30)),
        "elementwise R^200 -> R^200": (lambda x: np.sin(x) * x, rng.standard_normal(200)),
        "two layers R^40 -> R^40": (
            lambda x: np.tanh(A @ np.tanh(A @ x)) * x,
            rng.standard_normal(40),
        ),
    }


def losses():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((30, 50)) / 7
    return {
        "sum tanh(Wx)^2, R^50": (lambda x: np.sum(np.tanh(W @ x) ** 2), rng.standard_normal(50)),
        "sum sin(x) x^2, R^200": (lambda x: np.sum(np.sin(x) * x**2), rng.standard_normal(200)),
    }


def vmap_fwd(f, x):
    eye = np.eye(np.size(x))
    return vmap(lambda v: jvp(f, (x,), (v,))[1], out_axes=-1)(eye)


def vmap_rev(f, x):
    y, pullback = vjp(f, x)
    eye = np.eye(np.size(y))
    return vmap(lambda u: pullback(u)[0])(eye)


def vmap_hessian(f, x):
    return vmap(lambda v: hvp(f)(x, v))(np.eye(np.size(x)))


def best(fn, repeat, budget=0.2):
    number = max(1, int(budget / max(timeit.timeit(fn, number=1), 1e-6)))
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def rev_by_forward_mode(f, x):
    """``jacobian(mode="rev")`` as it was: forward mode over the pullback."""
    derivatives._REV_BY_VMAP = False
    try:
        return jacobian(f, mode="rev")(x)
    finally:
        derivatives._REV_BY_VMAP = True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    repeat = 2 if parser.parse_args().quick else 7
    print(f"tape from {os.path.dirname(tape.__file__)}, numpy {np.__version__}")
    print(f"{'function':30} {'path':22} {'time':>10} {'vmap':>10} {'vmap/time':>10}")

    def row(name, path, own, other):
        t_own, t_vmap = best(own, repeat), best(other, repeat)
        print(f"{name:30} {path:22} {t_own * 1e3:8.3f}ms {t_vmap * 1e3:8.3f}ms "
              f"{t_vmap / t_own:10.2f}")  # fmt: skip

    for name, (f, x) in cases().items():
        J = jacobian(f, mode="fwd")(x)
        for other in (vmap_fwd, vmap_rev, rev_by_forward_mode):
            np.testing.assert_allclose(other(f, x), J, rtol=1e-10, atol=1e-12)
        row(name, "jacobian fwd", lambda f=f, x=x: jacobian(f, mode="fwd")(x),
            lambda f=f, x=x: vmap_fwd(f, x))  # fmt: skip
        row(name, "fwd over pullback", lambda f=f, x=x: rev_by_forward_mode(f, x),
            lambda f=f, x=x: vmap_rev(f, x))  # fmt: skip
        row(name, "jacobian rev (now)", lambda f=f, x=x: jacobian(f, mode="rev")(x),
            lambda f=f, x=x: vmap_rev(f, x))  # fmt: skip
    for name, (f, x) in losses().items():
        H = hessian(f)(x)
        np.testing.assert_allclose(vmap_hessian(f, x), H, rtol=1e-10, atol=1e-12)
        row(name, "hessian", lambda f=f, x=x: hessian(f)(x), lambda f=f, x=x: vmap_hessian(f, x))


if __name__ == "__main__":
    main()
