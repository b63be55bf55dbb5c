"""A bilevel problem: one ridge penalty per feature, tuned on held-out data, on
scikit-learn's diabetes data. The inner problem is solved by ``scipy.optimize.minimize``;
the outer gradient goes through its solution by the implicit function theorem.

Inner: ``w(lam) = argmin_w |X w - y|^2 / n + sum(exp(lam) * w^2)``, solved by
``tape.scipy.optimize.minimize`` with ``lam`` in ``args``. Outer: the validation error
``|X_val w(lam) - y_val|^2 / n_val``, minimised over ``lam`` by L-BFGS with
``value_and_grad`` through the inner solve: no derivative goes through BFGS's
iterations, only one linear solve with the Hessian at the inner solution. The ridge
solution has a closed form, ``w = (X'X / n + diag(exp(lam)))^-1 X'y / n``, against which
the hypergradient is checked.

    python examples/bilevel_ridge.py           # tune the penalties
    python examples/bilevel_ridge.py --quick   # a few outer iterations
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import minimize as scipy_minimize
from sklearn.datasets import load_diabetes

from tape import grad, value_and_grad
from tape.scipy import optimize


def data():
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = (y - y.mean()) / y.std()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    train, val = order[:150], order[150:]  # a small training set: penalties matter
    return X[train], y[train], X[val], y[val]


def inner_loss(w, lam, X, y):
    return np.mean((X @ w - y) ** 2) + np.sum(np.exp(lam) * w**2)


def weights(lam, X, y):
    """The inner solution, by SciPy's BFGS: differentiable in ``lam``."""
    res = optimize.minimize(inner_loss, np.zeros(X.shape[1]), args=(lam, X, y), method="BFGS",
                            options={"gtol": 1e-10})  # fmt: skip
    return res.x


def validation_error(lam, X, y, X_val, y_val):
    return np.mean((X_val @ weights(lam, X, y) - y_val) ** 2)


def closed_form_error(lam, X, y, X_val, y_val):
    n = len(y)
    w = np.linalg.solve(X.T @ X / n + np.diag(np.exp(lam)), X.T @ y / n)
    return np.mean((X_val @ w - y_val) ** 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few outer iterations")
    args = parser.parse_args(argv)

    X, y, X_val, y_val = data()
    lam0 = np.full(X.shape[1], np.log(0.1))
    hyper = grad(validation_error)(lam0, X, y, X_val, y_val)[0]
    exact = grad(closed_form_error)(lam0, X, y, X_val, y_val)[0]
    print(f"hypergradient vs closed form: max difference {np.max(np.abs(hyper - exact)):.2e}")

    fun = value_and_grad(validation_error, argnums=0)
    result = scipy_minimize(fun, lam0, args=(X, y, X_val, y_val), jac=True, method="L-BFGS-B",
                            bounds=[(-12.0, 4.0)] * X.shape[1],
                            options={"maxiter": 3 if args.quick else 100})  # fmt: skip
    print(f"L-BFGS: {result.nit} outer iterations, {result.nfev} inner solves")
    print(f"validation error  {validation_error(lam0, X, y, X_val, y_val):.4f} (one shared "
          f"penalty 0.1) -> {result.fun:.4f} (tuned)")  # fmt: skip
    print("penalties", np.array2string(np.exp(result.x), precision=3))
    return result, np.max(np.abs(hyper - exact))


if __name__ == "__main__":
    main()
