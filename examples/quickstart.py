"""Quickstart: Nabla's worked example, then grad, then a primitive with its own rule.

Run it with ``python examples/quickstart.py``; it prints what you would see in the REPL.
It takes ``--quick`` like every example, and is quick anyway.
"""

import argparse

import numpy as np

from tape import Leaf, Tape, grad, primitive, propagate, reverse_tape, sensitivity, value_and_grad


def show(source, value):
    print(f">>> {source}")
    if value is not None:
        print(value if isinstance(value, str) else repr(value))


def manual_tape():
    print("# 1. A tape by hand: record, seed, propagate")
    t = Tape()
    x = Leaf(t, 0.6791074260357777)
    y = Leaf(t, 0.8284134829000359)
    z = x * y + np.sin(x)
    show("t", t)
    rt = reverse_tape(z, 1.0)
    propagate(t, rt)
    show("rt = reverse_tape(z, 1.0); propagate(t, rt)", rt)
    show("rt[x], rt[y]", (rt[x], rt[y]))
    print()


def with_grad():
    print("# 2. The same through grad, and a gradient with respect to a matrix")

    def f(x, y):
        return x * y + np.sin(x)

    x, y = 0.6791074260357777, 0.8284134829000359
    show(f"grad(f)({x}, {y})", grad(f)(x, y))

    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 2))
    X = rng.standard_normal((4, 3))

    def loss(W, X):
        return np.mean(np.tanh(X @ W) ** 2)

    # what each call returns, as the REPL shows it: a tuple argnums gives a tuple of
    # gradients, as grad does; an int argnums gives the gradient alone
    show("value_and_grad(loss, argnums=(0,))(W, X)", value_and_grad(loss, argnums=(0,))(W, X))
    value, dW = value_and_grad(loss, argnums=0)(W, X)
    show("value, dW = value_and_grad(loss, argnums=0)(W, X)", None)
    show("dW.shape", dW.shape)
    print()


@primitive
def log1pexp(x):
    """log(1 + exp(x)), computed without overflow."""
    return np.logaddexp(0.0, x)


@sensitivity(log1pexp, 0)
def _(y, ybar, x):
    return ybar * np.exp(x - y)  # the logistic sigmoid, stable for large |x|


def custom_primitive():
    print("# 3. A primitive with its own sensitivity: one record on the tape")
    t = Tape()
    x = Leaf(t, np.array([-1000.0, 0.0, 1000.0]))
    np.sum(log1pexp(x))
    show("t", t)
    gradient = grad(lambda v: np.sum(log1pexp(v)))(x.value)
    show("grad(lambda v: np.sum(log1pexp(v)))(x.value)", gradient)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted; the quickstart is quick")
    parser.parse_args(argv)
    manual_tape()
    with_grad()
    custom_primitive()


if __name__ == "__main__":
    main()
