"""A primitive with a hand-written sensitivity: ``log1pexp(x) = log(1 + exp(x))``.

Traced op by op, the naive formula overflows (``exp(1000)`` is ``inf``) and its gradient
is ``nan``; the stable formula ``max(x, 0) + log(1 + exp(-|x|))`` is right but records
seven operations and runs seven rules backwards. As a ``primitive`` the function is one
record, its forward pass is NumPy's ``logaddexp``, and its rule is one line of NumPy,
``ybar * exp(x - y)``: the logistic sigmoid, with no overflow anywhere.

The rule is NumPy over its inputs, so it is differentiable in turn: second derivatives
work, in reverse and forward mode, and ``check_grad`` checks both orders in both modes
against central differences.

    python examples/custom_sensitivity.py           # 1,000,000 points, timed
    python examples/custom_sensitivity.py --quick   # 10,000 points
"""

from __future__ import annotations

import argparse
import timeit
import warnings

import numpy as np

from tape import Leaf, Tape, check_grad, grad, primitive, sensitivity


@primitive
def log1pexp(x):
    """``log(1 + exp(x))`` without overflow, as one record on the tape."""
    return np.logaddexp(0.0, x)


@sensitivity(log1pexp, 0)
def _(y, ybar, x):
    return ybar * np.exp(x - y)  # = sigmoid(x), since y = log(1 + exp(x))


def log1pexp_naive(x):
    return np.log(1.0 + np.exp(x))


def log1pexp_traced(x):
    """The stable formula, recorded operation by operation."""
    return np.maximum(x, 0.0) + np.log(1.0 + np.exp(-np.abs(x)))


def records(f, x):
    t = Tape()
    f(Leaf(t, x))
    return len(t) - 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small array, fewer repeats")
    args = parser.parse_args(argv)

    def total(f):
        return lambda x: np.sum(f(x))

    print("# Stability: gradient at x = -1000, 0, 1000 (exact: 0, 0.5, 1)")
    x = np.array([-1000.0, 0.0, 1000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the overflow we are showing
        naive = grad(total(log1pexp_naive), argnums=0)(x)
    print(f"  naive, traced       {naive}")
    print(f"  stable, traced      {grad(total(log1pexp_traced), argnums=0)(x)}")
    print(f"  primitive + rule    {grad(total(log1pexp), argnums=0)(x)}")

    print("\n# Checked against finite differences, to second order, in both modes")
    rng = np.random.default_rng(0)
    for x in (rng.uniform(-30.0, 30.0, size=50), np.array([-1000.0, 0.0, 1000.0])):
        # raises AssertionError if grad (reverse) or jvp (forward), or their derivatives,
        # disagree with 5-point central differences of log1pexp itself
        check_grad(log1pexp, x, order=2, modes=("rev", "fwd"))
    print("  check_grad(log1pexp, x, order=2, modes=('rev', 'fwd')): passed")

    n = 10_000 if args.quick else 1_000_000
    repeat = 3 if args.quick else 5
    x = rng.standard_normal(n) * 10
    print(f"\n# Speed: value and gradient of sum(log1pexp(x)) for {n:,} points")
    timings = {}
    for name, f in [("stable, traced", log1pexp_traced), ("primitive + rule", log1pexp)]:
        g = grad(total(f), argnums=0)
        seconds = min(timeit.repeat(lambda g=g: g(x), number=1, repeat=repeat))
        timings[name] = seconds
        print(f"  {name:18s} records: {records(f, x)}  {seconds * 1e3:8.2f} ms")
    return timings


if __name__ == "__main__":
    main()
