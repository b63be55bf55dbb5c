"""The floor of a pure-Python tape on the length-10 chain: what recording and reverse
cost when everything ``tape`` does beyond recording is left out.

    python benchmarks/bare_tape.py

This bare tape has five hard-wired rules, no registry, no checks of arguments, shapes or
mutation, no nested tapes, no freezing of results, no debugging hooks: it is not a
library, only a measure of how far below ``tape`` a Python tape can go on this workload
(NumPy's own calls on length-10 arrays are ~0.3-0.6 µs each). It prints its time per op
beside ``tape``'s, both measured here, with the collector paused as ``grad`` does.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402


class BareTape:
    __slots__ = ("records",)

    def __init__(self):
        self.records = []


class BareNode:
    __slots__ = ("value", "tape", "pos", "f", "args", "vals", "parents")
    __array_priority__ = 1000.0

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return record(ufunc, inputs)

    def __add__(self, other):
        return record(np.add, (self, other))

    def __radd__(self, other):
        return record(np.add, (other, self))

    def __mul__(self, other):
        return record(np.multiply, (self, other))

    def __rmul__(self, other):
        return record(np.multiply, (other, self))


RULES = {
    np.sin: (lambda y, g, x: g * np.cos(x),),
    np.exp: (lambda y, g, x: g * y,),
    np.log: (lambda y, g, x: g / x,),
    np.add: (lambda y, g, a, b: g, lambda y, g, a, b: g),
    np.multiply: (lambda y, g, a, b: g * b, lambda y, g, a, b: g * a),
}


def leaf(tape, value):
    node = BareNode()
    node.value, node.tape, node.parents = value, tape, ()
    node.pos = len(tape.records)
    tape.records.append(node)
    return node


def record(f, args):
    tape, vals, parents = None, [], ()
    for i, a in enumerate(args):
        if isinstance(a, BareNode):
            tape, a = a.tape, a.value
            parents += (i,)
        vals.append(a)
    vals = tuple(vals)
    node = BareNode()
    node.value, node.tape, node.f, node.args, node.vals = f(*vals), tape, f, args, vals
    node.parents = parents
    node.pos = len(tape.records)
    tape.records.append(node)
    return node


def reverse(tape, out):
    adjoints = [None] * len(tape.records)
    adjoints[out.pos] = np.ones_like(out.value)
    records = tape.records
    for pos in range(len(records) - 1, -1, -1):
        g = adjoints[pos]
        if g is None or not records[pos].parents:
            continue
        node = records[pos]
        rules = RULES[node.f]
        for i in node.parents:
            q = node.args[i].pos
            contribution = rules[i](node.value, g, *node.vals)
            adjoints[q] = contribution if adjoints[q] is None else adjoints[q] + contribution
    return adjoints


def bare_gradient(x0, chain):
    tape = BareTape()
    x = leaf(tape, x0)
    adjoints = reverse(tape, chain(x))
    tape.records.clear()
    return adjoints[x.pos]


def per_op(run, repeats=7):
    times = []
    for _ in range(repeats):
        gc.disable()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times) / (workloads.CHAIN_ITERATIONS * workloads.OPS_PER_ITERATION)


def main():
    import tape

    chain = workloads.chain_fn(np)
    x0 = np.linspace(-1, 1, 10)
    gradient = tape.grad(lambda x: np.sum(chain(x)), argnums=0)
    expected = workloads.chain_hand(x0, workloads.CHAIN_ITERATIONS, np)[1]
    assert np.allclose(bare_gradient(x0, chain), expected, rtol=1e-12)
    assert np.allclose(gradient(x0), expected, rtol=1e-12)
    bare = per_op(lambda: bare_gradient(x0, chain))
    full = per_op(lambda: gradient(x0))
    print(f"length-10 chain, time per op: bare tape {bare * 1e6:.2f} µs, tape {full * 1e6:.2f} µs")


if __name__ == "__main__":
    main()
