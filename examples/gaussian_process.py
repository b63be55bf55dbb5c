"""Gaussian-process regression of the Mauna Loa CO2 series that ships with statsmodels.

The kernel hyperparameters are fitted by maximising the log marginal likelihood with
SciPy's L-BFGS, its gradient from ``tape``: Nabla's home use. The kernel matrix is built
in plain NumPy (broadcasting, ``exp``, ``sin``) and the likelihood through a Cholesky
factor and a triangular solve, all recorded as they run; ``np.linalg.cholesky`` and the
triangular solve have their own rules. Beside it, the same likelihood as one
``primitive`` whose rule is the textbook adjoint ``dL/dK = (K^-1 - a a^T) / 2`` with
``a = K^-1 y``: the two gradients agree, and ``--textbook`` fits with the second.
The posterior mean and a two-sigma band are plotted over a held-out stretch of years.

    python examples/gaussian_process.py           # 240 monthly points
    python examples/gaussian_process.py --quick   # 90 points, a few iterations
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.linalg import cho_solve, cholesky
from scipy.optimize import minimize

from tape import grad, primitive, sensitivity, value_and_grad
from tape.scipy.linalg import solve_triangular  # scipy.linalg's, differentiable

HERE = Path(__file__).resolve().parent


def co2_monthly():
    """Years (as floats) and monthly mean CO2 in ppm, gaps dropped."""
    import statsmodels.api as sm

    series = sm.datasets.co2.load_pandas().data["co2"].resample("MS").mean().dropna()
    years = series.index.year + (series.index.month - 0.5) / 12
    return np.asarray(years, dtype=float), series.to_numpy(dtype=float)


# -- the likelihood, twice ---------------------------------------------------------------


def neg_log_marginal_likelihood(K, y):
    """``y^T K^-1 y / 2 + log|K| / 2 + n log(2 pi) / 2``, recorded op by op."""
    L = np.linalg.cholesky(K)
    a = solve_triangular(L, y, lower=True)  # L^-1 y, so that y^T K^-1 y = a^T a
    return 0.5 * np.sum(a**2) + np.sum(np.log(np.diagonal(L))) + 0.5 * len(y) * np.log(2 * np.pi)


@primitive
def neg_log_marginal_likelihood_textbook(K, y):
    """The same, as one record on the tape, computed on plain arrays."""
    L = cholesky(K, lower=True)
    alpha = cho_solve((L, True), y)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(y) * np.log(2 * np.pi)


@sensitivity(neg_log_marginal_likelihood_textbook, 0)
def _(nll, nllbar, K, y):
    # SciPy's solves take plain arrays only: this rule serves first derivatives
    factor = (cholesky(K, lower=True), True)
    alpha = cho_solve(factor, y)
    K_inv = cho_solve(factor, np.eye(len(y)))
    return nllbar * 0.5 * (K_inv - np.outer(alpha, alpha))


# -- the kernel: plain NumPy, recorded op by op ----------------------------------------


def kernel(log_params, t1, t2):
    """A long trend, a yearly cycle that may drift, and medium-term wiggles: the CO2
    kernel of Rasmussen & Williams (section 5.4.3), less its rational-quadratic term."""
    s_trend, l_trend, s_year, l_decay, l_period, s_med, l_med = np.exp(log_params[:7])
    d = t1[:, None] - t2[None, :]
    trend = s_trend**2 * np.exp(-0.5 * d**2 / l_trend**2)
    yearly = s_year**2 * np.exp(-0.5 * d**2 / l_decay**2 - 2 * np.sin(np.pi * d) ** 2 / l_period**2)
    medium = s_med**2 * np.exp(-0.5 * d**2 / l_med**2)
    return trend + yearly + medium


def objective(log_params, t, y, nll=neg_log_marginal_likelihood):
    """The negative log marginal likelihood per point, of log hyperparameters."""
    noise = np.exp(log_params[7])
    K = kernel(log_params, t, t) + (noise**2 + 1e-6) * np.eye(len(t))
    return nll(K, y) / len(t)


def posterior(log_params, t, y, t_new):
    """Posterior mean and standard deviation at ``t_new``, on plain arrays."""
    noise = np.exp(log_params[7])
    L = cholesky(kernel(log_params, t, t) + (noise**2 + 1e-6) * np.eye(len(t)), lower=True)
    K_new = kernel(log_params, t_new, t)
    mean = K_new @ cho_solve((L, True), y)
    v = solve_triangular(L, K_new.T, lower=True)
    var = np.diag(kernel(log_params, t_new, t_new)) - np.sum(v**2, axis=0) + noise**2
    return mean, np.sqrt(np.maximum(var, 0.0))


def plot(t, y, t_test, y_test, t_grid, mean, std, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.fill_between(t_grid, mean - 2 * std, mean + 2 * std, color="C0", alpha=0.25,
                    label="posterior mean ± 2 sd")
    ax.plot(t_grid, mean, color="C0", lw=1.5)
    ax.plot(t, y, ".", color="k", ms=3, label="training data")
    ax.plot(t_test, y_test, ".", color="C3", ms=3, label="held out")
    ax.set(xlabel="year", ylabel="CO2 (ppm)",
           title="Mauna Loa CO2: Gaussian process, hyperparameters fitted with tape gradients")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer points and iterations")
    parser.add_argument("--points", type=int, default=None, help="training months")
    parser.add_argument("--textbook", action="store_true",
                        help="fit with the primitive and its textbook adjoint")
    parser.add_argument("--out", type=Path, default=HERE / "output", help="where the PNG goes")
    args = parser.parse_args(argv)
    n = args.points or (90 if args.quick else 240)

    years, co2 = co2_monthly()
    n_test = 36  # the three years after the training stretch
    t, y = years[-(n + n_test):-n_test], co2[-(n + n_test):-n_test]
    t_test, y_test = years[-n_test:], co2[-n_test:]
    offset, scale = y.mean(), y.std()
    t0 = t[0]
    y_std = (y - offset) / scale

    # scales in standardised ppm, lengths in years
    x0 = np.log([3.0, 50.0, 0.3, 50.0, 1.0, 0.1, 1.0, 0.05])
    recorded = grad(objective, argnums=0)(x0, t - t0, y_std)
    textbook = grad(objective, argnums=0)(x0, t - t0, y_std, neg_log_marginal_likelihood_textbook)
    print("gradient through the recorded Cholesky and solve vs the textbook adjoint: "
          f"max |difference| {np.max(np.abs(recorded - textbook)):.1e}")
    nll = neg_log_marginal_likelihood_textbook if args.textbook else neg_log_marginal_likelihood
    result = minimize(
        value_and_grad(objective, argnums=0), x0, args=(t - t0, y_std, nll), jac=True,
        method="L-BFGS-B", bounds=[(-5.0, 5.0)] * len(x0),
        options={"maxiter": 15 if args.quick else 200},
    )
    names = ["trend scale", "trend length", "yearly scale", "yearly decay", "period length",
             "medium scale", "medium length", "noise"]
    print(f"L-BFGS: {result.nit} iterations, nll per point {result.fun:.4f}")
    for name, value in zip(names, np.exp(result.x)):
        print(f"  {name:13s} {value:8.3f}")

    mean, std = posterior(result.x, t - t0, y_std, t_test - t0)
    mean, std = offset + scale * mean, scale * std
    rmse = float(np.sqrt(np.mean((mean - y_test) ** 2)))
    inside = float(np.mean(np.abs(mean - y_test) <= 2 * std))
    print(f"held-out {n_test} months: RMSE {rmse:.2f} ppm, {inside:.0%} inside the 2-sd band")

    t_grid = np.linspace(t[0], t_test[-1], 400)
    mean_grid, std_grid = posterior(result.x, t - t0, y_std, t_grid - t0)
    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "gaussian_process.png"
    plot(t, y, t_test, y_test, t_grid, offset + scale * mean_grid, scale * std_grid, png)
    print(f"posterior written to {png}")
    return result, rmse


if __name__ == "__main__":
    main()
