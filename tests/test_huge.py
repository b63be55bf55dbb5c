"""A million records: the reverse pass is a loop, and the tape's memory goes back."""

import gc
import math
import sys
import weakref

import numpy as np

from tape import Leaf, Tape, grad, propagate, reverse_tape


def test_a_million_record_chain_with_the_default_recursion_limit():
    assert sys.getrecursionlimit() <= 10_000
    steps = 333_333  # three records a step: sin, multiply, add

    def f(x):
        for _ in range(steps):
            x = x + 1e-6 * np.sin(x)
        return x

    (g,) = grad(f)(0.3)
    # the chain rule by hand: the product of 1 + 1e-6 cos(x_k) along the plain trajectory
    x, d = 0.3, 1.0
    for _ in range(steps):
        d *= 1.0 + 1e-6 * math.cos(x)
        x = x + 1e-6 * math.sin(x)
    assert abs(g - d) <= 1e-9 * abs(d)


def test_a_long_tape_is_freed_after_grad():
    made = []

    def f(x):
        made.append(weakref.ref(x.tape))
        for _ in range(10_000):
            x = np.sin(x)
        return x

    grad(f)(0.3)
    assert made[0]() is None  # grad cleared the records, so no cycle keeps the tape


def test_a_deep_manual_tape_propagates():
    t = Tape()
    x = Leaf(t, np.float64(0.5))
    y = x
    for _ in range(100_000):
        y = y * 1.0
    rt = propagate(t, reverse_tape(y))
    assert rt[x] == 1.0
    assert gc.isenabled()
