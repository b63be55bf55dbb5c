"""Student-t regression on the stack-loss data, by maximum likelihood with tape.scipy.

The loss calls ``tape.scipy.stats.t.logpdf`` exactly as it would call
``scipy.stats.t.logpdf``: only the import line differs. ``scipy.optimize.minimize`` with
``jac=True`` takes ``value_and_grad`` of it; the standard errors come from the inverse of
``tape.hessian`` of the negative log-likelihood at the optimum (the observed
information), and are compared with statsmodels' ``TLinearModel``, which fits the same
model with numerical derivatives.

    python examples/scipy_regression.py           # fit, and compare with statsmodels
    python examples/scipy_regression.py --quick   # the same (the data are 21 rows)
"""

from __future__ import annotations

import argparse

import numpy as np
import statsmodels.api as sm
from scipy.optimize import minimize

from tape import hessian, value_and_grad
from tape.scipy import stats  # was: from scipy import stats

NAMES = ["const", "AIRFLOW", "WATERTEMP", "ACIDCONC", "df", "scale"]


def load():
    """Brownlee's stack-loss data, as statsmodels ships it (no download)."""
    data = sm.datasets.stackloss.load_pandas().data
    X = sm.add_constant(data[["AIRFLOW", "WATERTEMP", "ACIDCONC"]].to_numpy(dtype=float))
    return X, data["STACKLOSS"].to_numpy(dtype=float)


def negative_log_likelihood(params, X, y):
    """``params``: the coefficients, then the degrees of freedom and the scale."""
    beta, df, scale = params[:-2], params[-2], params[-1]
    return -np.sum(stats.t.logpdf(y, df, loc=X @ beta, scale=scale))


def objective(theta, X, y):
    """The same, with df and scale on the log scale: an unconstrained problem."""
    params = np.concatenate([theta[:-2], np.exp(theta[-2:])])
    return negative_log_likelihood(params, X, y)


def fit(X, y, maxiter=1000):
    beta0 = np.linalg.lstsq(X, y, rcond=None)[0]
    theta0 = np.concatenate([beta0, [np.log(5.0), np.log(np.std(y - X @ beta0))]])
    result = minimize(value_and_grad(objective, argnums=0), theta0, args=(X, y), jac=True,
                      method="BFGS", options={"maxiter": maxiter, "gtol": 1e-8})  # fmt: skip
    params = np.concatenate([result.x[:-2], np.exp(result.x[-2:])])
    information = hessian(negative_log_likelihood, argnums=0)(params, X, y)
    standard_errors = np.sqrt(np.diag(np.linalg.inv(information)))
    return params, standard_errors, result


def statsmodels_fit(X, y):
    from statsmodels.miscmodels.tmodel import TLinearModel

    model = TLinearModel(y, X)
    result = model.fit(disp=0, maxiter=5000, method="bfgs")
    return np.asarray(result.params), np.asarray(result.bse)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same fit (it is quick)")
    parser.parse_args(argv)

    X, y = load()
    params, se, result = fit(X, y)
    print(f"BFGS: {result.nit} iterations, {result.nfev} likelihood+gradient evaluations")
    print(f"negative log-likelihood {result.fun:.6f}")
    ours_sm, se_sm = statsmodels_fit(X, y)
    print(f"{'':10s} {'tape':>11s} {'s.e.':>9s} {'statsmodels':>12s} {'s.e.':>9s}")
    for name, p, s, q, t in zip(NAMES, params, se, ours_sm, se_sm):
        print(f"{name:10s} {p:11.5f} {s:9.5f} {q:12.5f} {t:9.5f}")
    print(f"max |difference| in estimates {np.max(np.abs(params - ours_sm)):.2e}")
    print(f"max relative difference in standard errors {np.max(np.abs(se / se_sm - 1)):.2e}")
    return params, se, ours_sm, se_sm


if __name__ == "__main__":
    main()
