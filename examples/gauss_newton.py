"""Levenberg-Marquardt (damped Gauss-Newton) least squares, its Jacobian one row per data
point from ``vmap(jacobian(...))``: Michaelis-Menten kinetics fitted to the Puromycin
data.

A model is written for one data point: ``residual(params, x, y)`` is one number. The
Jacobian of all the residuals with respect to the parameters is then

    jacobian_rows = vmap(jacobian(residual), in_axes=(None, 0, 0))
    J = jacobian_rows(params, xs, ys)          # (points, parameters)

from one batched pass rather than a loop over the points. A step solves
``(J'J + lam diag(J'J)) delta = -J'r``: Gauss-Newton as ``lam`` goes to 0, gradient
descent while it is large; ``lam`` shrinks after a step that lowers the loss and grows
after one that does not.

The Puromycin data (Treloar 1974; Bates and Watts, *Nonlinear Regression Analysis*, 1988)
are the initial rates of an enzymatic reaction at 12 substrate concentrations, for the
treated enzyme; Bates and Watts give ``Vm = 212.7``, ``K = 0.06412``. The fit is compared
with ``scipy.optimize.least_squares`` where SciPy is installed. Fitted to the model's
own curve instead, the residuals vanish at the optimum: there Gauss-Newton converges
quadratically, the loss about squaring from one step to the next. Before each fit, the
Jacobian is checked against central differences.

    python examples/gauss_newton.py            # fit
    python examples/gauss_newton.py --quick    # fewer steps
"""

from __future__ import annotations

import argparse

import numpy as np

from tape import jacobian, vmap

# Puromycin, treated enzyme: substrate concentration (ppm), initial rate (counts/min^2)
CONCENTRATION = np.array([0.02, 0.02, 0.06, 0.06, 0.11, 0.11, 0.22, 0.22, 0.56, 0.56,
                          1.10, 1.10])  # fmt: skip
RATE = np.array([76.0, 47.0, 97.0, 107.0, 123.0, 139.0, 159.0, 152.0, 191.0, 201.0,
                 207.0, 200.0])  # fmt: skip
BATES_WATTS = np.array([212.7, 0.06412])  # their least-squares Vm, K


def michaelis_menten(params, x, y):
    """The residual of one point: ``Vm x / (K + x) - y``."""
    vm, k = params[0], params[1]
    return vm * x / (k + x) - y


def levenberg_marquardt(residual, params, xs, ys, steps=50, lam=1e-3, tol=1e-12):
    """Minimise ``sum(residual(params, x, y) ** 2) / 2`` over the points; returns the
    parameters and the loss after each accepted step (the first entry: at the start)."""
    residuals = vmap(residual, in_axes=(None, 0, 0))
    jacobian_rows = vmap(jacobian(residual), in_axes=(None, 0, 0))
    r = residuals(params, xs, ys)
    losses = [0.5 * r @ r]
    for _ in range(steps):
        J = jacobian_rows(params, xs, ys)
        g, A = J.T @ r, J.T @ J
        # least squares rather than solve: J'J is singular where parameters trade off
        delta = np.linalg.lstsq(A + lam * np.diag(np.diag(A)), -g, rcond=None)[0]
        trial = params + delta
        r_trial = residuals(trial, xs, ys)
        loss = 0.5 * r_trial @ r_trial
        if loss < losses[-1]:
            params, r, lam = trial, r_trial, lam / 10.0
            losses.append(loss)
            if np.linalg.norm(delta) <= tol * (tol + np.linalg.norm(params)):
                break
        else:
            lam *= 10.0
            if lam > 1e12:
                break
    return params, losses


def finite_difference_rows(residual, params, xs, ys, eps=1e-6):
    """The same Jacobian by central differences, one parameter at a time, in a loop."""
    J = np.zeros((len(xs), len(params)))
    for j in range(len(params)):
        step = eps * max(1.0, abs(params[j]))
        up, down = params.copy(), params.copy()
        up[j] += step
        down[j] -= step
        for i, (x, y) in enumerate(zip(xs, ys)):
            J[i, j] = (residual(up, x, y) - residual(down, x, y)) / (2 * step)
    return J


def check_jacobian(residual, params, xs, ys):
    """Largest difference between ``vmap(jacobian)`` and finite differences, relative to
    the largest entry; asserted small."""
    J = vmap(jacobian(residual), in_axes=(None, 0, 0))(params, xs, ys)
    fd = finite_difference_rows(residual, params, xs, ys)
    error = np.max(np.abs(J - fd)) / np.max(np.abs(fd))
    assert J.shape == (len(xs), len(params)) and error < 1e-6, error
    return error


def fit_puromycin(steps):
    start = np.array([200.0, 0.1])  # Vm near the largest rate, K near half-saturation
    error = check_jacobian(michaelis_menten, start, CONCENTRATION, RATE)
    params, losses = levenberg_marquardt(michaelis_menten, start, CONCENTRATION, RATE, steps)
    print("Michaelis-Menten on Puromycin (12 points, 2 parameters)")
    print(f"  Jacobian vs finite differences at the start: {error:.1e}")
    print(f"  {len(losses) - 1} steps, residual sum of squares {2 * losses[-1]:.2f}")
    print(f"  Vm = {params[0]:.2f}, K = {params[1]:.5f} (Bates and Watts: 212.7, 0.06412)")
    scipy_params = None
    try:
        from scipy.optimize import least_squares
    except ImportError:
        print("  (SciPy is not installed: no comparison with least_squares)")
    else:
        scipy_params = least_squares(
            lambda p: michaelis_menten(p, CONCENTRATION, RATE), start, method="lm",
            xtol=1e-15, ftol=1e-15, gtol=1e-15,
        ).x  # fmt: skip
        gap = np.max(np.abs(params - scipy_params) / np.abs(scipy_params))
        print(f"  scipy.optimize.least_squares: Vm = {scipy_params[0]:.2f}, "
              f"K = {scipy_params[1]:.5f}; max relative difference {gap:.1e}")  # fmt: skip
    return params, losses, scipy_params


def fit_model_curve(steps):
    """The same model fitted to its own curve at Bates and Watts' estimates: the
    residuals vanish at the optimum, where Gauss-Newton converges quadratically."""
    rates = vmap(michaelis_menten, in_axes=(None, 0, None))(BATES_WATTS, CONCENTRATION, 0.0)
    start = np.array([200.0, 0.1])
    params, losses = levenberg_marquardt(michaelis_menten, start, CONCENTRATION, rates, steps)
    print("The same model on its own curve (residuals vanish at the optimum)")
    print("  loss by step: " + " ".join(f"{loss:.1e}" for loss in losses))
    print(f"  Vm = {params[0]:.4f}, K = {params[1]:.6f}")
    return params, losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    args = parser.parse_args(argv)
    puromycin = fit_puromycin(steps=8 if args.quick else 100)
    curve = fit_model_curve(steps=6 if args.quick else 100)
    return puromycin, curve


if __name__ == "__main__":
    main()
