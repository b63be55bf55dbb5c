"""The floor of a pure-Python tape on the length-10 chain and on the MLP: what recording
and reverse cost when everything ``tape`` does beyond recording is left out.

    python benchmarks/bare_tape.py

This bare tape has a dozen hard-wired rules, no registry, no checks of arguments, shapes
or mutation, no nested tapes, no freezing of results, no debugging hooks, and its max
ignores ties: it is not a library, only a measure of how far below ``tape`` a Python
tape can go on these workloads (NumPy's own calls on length-10 arrays are ~0.3-0.6 µs
each). It prints its times beside ``tape``'s and the hand-written gradient's, all
measured here, with the collector paused as ``grad`` does.
"""

from __future__ import annotations

import functools
import gc
import os
import statistics
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # before NumPy loads its BLAS: one thread, as run.py

import numpy as np  # noqa: E402

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

    def __array_function__(self, func, types, args, kwargs):
        # np.sum and np.max, over everything or with keepdims: their rules need no kwargs
        node = record(functools.partial(func, **kwargs), args)
        node.f = func
        return node

    def __add__(self, other):
        return record(np.add, (self, other))

    def __radd__(self, other):
        return record(np.add, (other, self))

    def __sub__(self, other):
        return record(np.subtract, (self, other))

    def __rsub__(self, other):
        return record(np.subtract, (other, self))

    def __mul__(self, other):
        return record(np.multiply, (self, other))

    def __rmul__(self, other):
        return record(np.multiply, (other, self))

    def __truediv__(self, other):
        return record(np.true_divide, (self, other))

    def __matmul__(self, other):
        return record(np.matmul, (self, other))

    def __rmatmul__(self, other):
        return record(np.matmul, (other, self))

    def __neg__(self):
        return record(np.negative, (self,))


def summed_to(g, shape):
    """``g`` summed over the axes that broadcasting added or stretched."""
    if np.shape(g) == shape:
        return g
    extra = np.ndim(g) - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1)
    return np.add.reduce(g, axis=axes, keepdims=True).reshape(shape)


RULES = {
    np.sin: (lambda y, g, x: g * np.cos(x),),
    np.exp: (lambda y, g, x: g * y,),
    np.log: (lambda y, g, x: g / x,),
    np.tanh: (lambda y, g, x: g * (1 - y * y),),
    np.negative: (lambda y, g, x: -g,),
    np.add: (
        lambda y, g, a, b: summed_to(g, np.shape(a)),
        lambda y, g, a, b: summed_to(g, np.shape(b)),
    ),
    np.subtract: (
        lambda y, g, a, b: summed_to(g, np.shape(a)),
        lambda y, g, a, b: summed_to(-g, np.shape(b)),
    ),
    np.multiply: (lambda y, g, a, b: g * b, lambda y, g, a, b: g * a),
    np.true_divide: (lambda y, g, a, b: g / b,),
    np.matmul: (lambda y, g, a, b: g @ b.T, lambda y, g, a, b: a.T @ g),
    # sums over everything or with keepdims (all the MLP has): g broadcasts as it is
    np.sum: (lambda y, g, x: np.broadcast_to(g, np.shape(x)),),
    np.max: (lambda y, g, x: (x == y) * g,),  # ties ignored: a floor, not a rule
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


def bare_mlp(loss, params, x, y):
    tape = BareTape()
    nodes = [leaf(tape, p) for p in params]
    out = loss(nodes, x, y)
    adjoints = reverse(tape, out)
    tape.records.clear()
    return out.value, [adjoints[n.pos] for n in nodes]


def per_op(run, repeats=7):
    times = []
    for _ in range(repeats):
        gc.disable()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times) / (workloads.CHAIN_ITERATIONS * workloads.OPS_PER_ITERATION)


def per_call(run, calls=300, repeats=15):
    times = []
    for _ in range(repeats):
        gc.disable()
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - start) / calls)
        gc.enable()
    return statistics.median(times)


def main():
    import tape

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    chain = workloads.chain_fn(np)
    x0 = np.linspace(-1, 1, 10)
    gradient = tape.grad(lambda x: np.sum(chain(x)), argnums=0)
    expected = workloads.chain_hand(x0, workloads.CHAIN_ITERATIONS, np)[1]
    assert np.allclose(bare_gradient(x0, chain), expected, rtol=1e-12)
    assert np.allclose(gradient(x0), expected, rtol=1e-12)
    bare = per_op(lambda: bare_gradient(x0, chain))
    full = per_op(lambda: gradient(x0))
    print(f"length-10 chain, time per op: bare tape {bare * 1e6:.2f} µs, tape {full * 1e6:.2f} µs")

    params, x, y = workloads.mlp_data()
    loss = workloads.mlp_fn(np, lambda z: np.max(z, axis=1, keepdims=True))
    value_and_grad = tape.value_and_grad(loss, argnums=0)
    reference = workloads.mlp_hand(params, x, y)
    for run in (lambda: bare_mlp(loss, params, x, y), lambda: value_and_grad(params, x, y)):
        assert workloads.relative_error(run(), reference) < 1e-12
    hand = per_call(lambda: workloads.mlp_hand(params, x, y))
    bare = per_call(lambda: bare_mlp(loss, params, x, y))
    full = per_call(lambda: value_and_grad(params, x, y))
    print(
        f"MLP value and gradient: hand-written {hand * 1e6:.0f} µs, bare tape {bare * 1e6:.0f} µs "
        f"({bare / hand:.2f}×), tape {full * 1e6:.0f} µs ({full / hand:.2f}×)"
    )


if __name__ == "__main__":
    main()
