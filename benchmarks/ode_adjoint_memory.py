"""Peak memory of an ODE solution's gradient against the number of solver steps: the
continuous adjoint (``tape.scipy.integrate.solve_ivp``'s default) against SciPy's steps
replayed on the tape (``adjoint="discrete"``).

    python benchmarks/ode_adjoint_memory.py [--states 200] [--spans 4,16,64]

``dy/dt = -r y + cos(t)`` on ``states`` states, one output time ``T``: a longer span means
proportionally more RK45 steps. Peaks are tracemalloc's over the whole gradient call,
after one warm-up call. The two gradients must agree to the integration's tolerance.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import scipy.integrate as si

from tape import grad
from tape.scipy import integrate


def make_loss(T, states, adjoint):
    rates = np.linspace(0.5, 1.5, states)

    def loss(y0):
        sol = integrate.solve_ivp(lambda t, y, r: -r * y + np.cos(t), (0.0, T), y0, t_eval=[T],
                                  args=(rates,), adjoint=adjoint, rtol=1e-6,
                                  atol=1e-8)  # fmt: skip
        return np.sum(sol.y**2)

    return loss


def peak_of(f, *args):
    f(*args)
    tracemalloc.start()
    try:
        start = time.perf_counter()
        out = f(*args)
        return out, tracemalloc.get_traced_memory()[1], time.perf_counter() - start
    finally:
        tracemalloc.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=200)
    parser.add_argument("--spans", default="4,16,64")
    args = parser.parse_args(argv)
    y0 = np.linspace(1.0, 2.0, args.states)
    print(f"{'T':>5} {'steps':>6} {'continuous MB':>14} {'s':>6} {'discrete MB':>12} {'s':>6}")
    rows = []
    for T in (float(s) for s in args.spans.split(",")):
        steps = len(si.solve_ivp(lambda t, y: -y + np.cos(t), (0, T), y0, rtol=1e-6,
                                 atol=1e-8).t) - 1  # fmt: skip
        gc, pc, tc = peak_of(grad(make_loss(T, args.states, "continuous")), y0)
        gd, pd, td = peak_of(grad(make_loss(T, args.states, "discrete")), y0)
        assert np.allclose(gc[0], gd[0], rtol=1e-4, atol=1e-8)
        rows.append((T, steps, pc, pd))
        print(f"{T:5.0f} {steps:6d} {pc / 1e6:14.2f} {tc:6.2f} {pd / 1e6:12.2f} {td:6.2f}")
    return rows


if __name__ == "__main__":
    main()
