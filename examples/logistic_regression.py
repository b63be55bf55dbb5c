"""Logistic regression on scikit-learn's breast-cancer data, fitted by SciPy's L-BFGS.

``scipy.optimize.minimize(fun, x0, jac=True)`` wants one function that returns the loss
and its gradient: that is exactly ``value_and_grad``. The loss is written in plain NumPy.

    python examples/logistic_regression.py           # full fit
    python examples/logistic_regression.py --quick   # a few iterations
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import minimize
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from tape import value_and_grad


def loss(params, X, y, l2):
    """Mean logistic loss with an L2 penalty; ``params`` is the weights, then the bias."""
    w, b = params[:-1], params[-1]
    z = X @ w + b
    # log(1 + exp(z)) - y z, written so that exp never overflows
    nll = np.maximum(z, 0.0) - y * z + np.log(1.0 + np.exp(-np.abs(z)))
    return np.mean(nll) + 0.5 * l2 * np.sum(w**2)


def accuracy(params, X, y):
    return np.mean(((X @ params[:-1] + params[-1]) > 0) == y)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop after a few iterations")
    parser.add_argument("--l2", type=float, default=1e-3, help="L2 penalty on the weights")
    args = parser.parse_args(argv)

    data = load_breast_cancer()
    X_train, X_test, y_train, y_test = train_test_split(
        data.data, data.target.astype(float), test_size=0.25, random_state=0,
        stratify=data.target,
    )
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    X_train, X_test = (X_train - mean) / std, (X_test - mean) / std

    x0 = np.zeros(X_train.shape[1] + 1)
    fun = value_and_grad(loss, argnums=0)  # (loss, d loss / d params), as jac=True wants
    result = minimize(
        fun, x0, args=(X_train, y_train, args.l2), jac=True, method="L-BFGS-B",
        options={"maxiter": 10 if args.quick else 500},
    )
    print(f"L-BFGS: {result.nit} iterations, {result.nfev} loss+gradient evaluations")
    print(f"final loss      {result.fun:.4f}")
    print(f"train accuracy  {accuracy(result.x, X_train, y_train):.3f}")
    print(f"test accuracy   {accuracy(result.x, X_test, y_test):.3f}")
    return result


if __name__ == "__main__":
    main()
