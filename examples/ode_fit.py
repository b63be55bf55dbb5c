"""Verhulst's logistic growth ODE fitted to the US population, 1959-2009 (statsmodels'
``macrodata``), by SciPy's BFGS with gradients through the ODE solver.

The model is ``dP/dt = r P (1 - P / K)``, ``P(0) = P0``, solved by
``tape.scipy.integrate.solve_ivp``; the loss is the mean squared error against the
yearly population. ``value_and_grad`` of the loss is what ``minimize(jac=True)`` wants:
its gradient with respect to ``(log r, log K, P0)`` comes from SciPy's own RK45 steps
replayed on the tape, or with ``--adjoint continuous`` from the continuous adjoint (the
adjoint ODE integrated backwards by SciPy: memory of a few states, however many steps,
but a tape per right-hand side evaluation, and so about ten times slower on this small
system). (No package ships the Hudson Bay lynx-hare series offline; the population
series is a classic of Verhulst's model too.)

    python examples/ode_fit.py                        # fit, through the discrete steps
    python examples/ode_fit.py --adjoint continuous   # the same fit, through the adjoint ODE
    python examples/ode_fit.py --quick                # a few iterations
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize

from tape import value_and_grad
from tape.scipy import integrate


def population():
    """Years since 1959 and the yearly mean US population, in hundreds of millions."""
    import statsmodels.api as sm

    data = sm.datasets.macrodata.load_pandas().data
    yearly = data.groupby("year")["pop"].mean()
    return yearly.index.to_numpy() - 1959.0, yearly.to_numpy() / 100.0


def logistic(t, P, r, K):
    return r * P * (1.0 - P / K)


def predict(theta, t, adjoint="continuous", rtol=1e-8):
    log_r, log_K, P0 = theta[0], theta[1], theta[2]
    sol = integrate.solve_ivp(logistic, (0.0, t[-1]), np.reshape(P0, (1,)), t_eval=t,
                              args=(np.exp(log_r), np.exp(log_K)), rtol=rtol, atol=1e-10,
                              adjoint=adjoint)  # fmt: skip
    return sol.y[0]


def loss(theta, t, P, adjoint="continuous"):
    return np.mean((predict(theta, t, adjoint) - P) ** 2)


def closed_form(theta, t):
    r, K, P0 = np.exp(theta[0]), np.exp(theta[1]), theta[2]
    return K / (1.0 + (K / P0 - 1.0) * np.exp(-r * t))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop after a few iterations")
    parser.add_argument("--adjoint", choices=["discrete", "continuous"], default="discrete",
                        help="replay SciPy's steps (fast here) or integrate the adjoint ODE")
    args = parser.parse_args(argv)

    t, P = population()
    theta0 = np.array([np.log(0.02), np.log(5.0), P[0]])
    fun = value_and_grad(loss, argnums=0)
    start = time.perf_counter()
    result = minimize(fun, theta0, args=(t, P, args.adjoint), jac=True, method="BFGS",
                      options={"maxiter": 3 if args.quick else 200, "gtol": 1e-7})  # fmt: skip
    elapsed = time.perf_counter() - start
    r, K, P0 = np.exp(result.x[0]), np.exp(result.x[1]), result.x[2]
    fitted = predict(result.x, t)
    print(f"BFGS: {result.nit} iterations, {result.nfev} loss+gradient evaluations, "
          f"{elapsed:.2f} s ({args.adjoint} adjoint)")  # fmt: skip
    print(f"r = {r:.4f} per year, K = {100 * K:.0f} million, P0 = {100 * P0:.1f} million")
    print(f"rms error       {np.sqrt(result.fun) * 100:.3f} million")
    gap = np.max(np.abs(fitted - closed_form(result.x, t)))
    print(f"ODE vs closed form: max difference {gap:.2e}")
    return result


if __name__ == "__main__":
    main()
