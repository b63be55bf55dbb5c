"""``vmap``, the transform: where each argument's batch is (``in_axes``) and where the
outputs' goes (``out_axes``), the batch's way in and out of the function, and the nodes
of outer tapes that the function closes over, broadcast over the batch. How each call
inside runs over the batch is the interpreter's business (``tape.transforms.batching``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from sensitivities.registry import value_of

from ..core.mutation import sealed
from ..core.node import Node
from ..core.observing import hold, rewriting, unhold
from ..core.records import Branch, Tape
from ..core.trees import tree_flatten, tree_unflatten
from .batched import owner_of
from .batching import (
    OWN_PRIMITIVES,
    Batched,
    BatchedControlFlowError,
    BatchingError,
    VmapFallbackWarning,
    batch_in,
    batch_out,
    broadcast,
    reporting,
)

__all__ = ["vmap", "Batched", "BatchedControlFlowError", "BatchingError", "VmapFallbackWarning"]


# -- closures over nodes of outer tapes ------------------------------------------------------


def _batched_at(v: Any, level: int) -> bool:
    """Whether ``v``'s plain value holds the batch of ``level`` (at any depth)."""
    v = value_of(v)
    while isinstance(v, Batched):
        if v.level == level:
            return True
        if v.level < level:
            return False
        v = v.data
    return False


class _Broadcaster:
    """A rewriter of the context (``tape.observing``) during a ``vmap`` call: a Branch of
    a tape made before the call, whose value is batched at this level, with an argument
    that is not (a node the function closed over) gets that argument through a recorded
    ``broadcast``, so that the reverse pass sums its adjoint over the batch."""

    __slots__ = ("level", "size")

    def __init__(self, level: int, size: int) -> None:
        self.level, self.size = level, size

    def recorded(self, record: Any) -> None:
        tape = record.tape
        if isinstance(record, Branch):
            self._seal_batches(record)
        if (
            isinstance(record, Branch)
            and tape.level < self.level
            and record.f not in OWN_PRIMITIVES
            and _batched_at(record.value, self.level)
        ):
            self._broadcast_arguments(record, tape)

    def _seal_batches(self, record: Any) -> None:
        # a batch handed to a recorded call as a constant is fingerprinted, as an ndarray
        # is, so that a write into it before the reverse pass is a MutationError
        for key, a in enumerate(record.args):
            if type(a) is Batched and a.level == self.level and type(a.data) is np.ndarray:
                record.seal = sealed(record.seal, key, a.data, record.tape)
        if record.kwargs:
            for key, a in record.kwargs.items():
                if type(a) is Batched and a.level == self.level and type(a.data) is np.ndarray:
                    record.seal = sealed(record.seal, key, a.data, record.tape)

    def _broadcast_arguments(self, record: Any, tape: Any) -> None:
        args = list(record.args)
        changed = False
        for i in record.node_args:
            a = args[i]
            if isinstance(a, Node):
                if a.tape is tape and not _batched_at(a, self.level):
                    args[i] = broadcast(a, self.level, self.size)
                    changed = True
            else:
                elements = list(a)
                for j, b in enumerate(elements):
                    if tape.owns(b) and not _batched_at(b, self.level):
                        elements[j] = broadcast(b, self.level, self.size)
                        changed = True
                args[i] = type(a)(elements)
        if changed:
            record.args = tuple(args)


# -- vmap --------------------------------------------------------------------------------


def _axes_tree(spec: Any, tree: Any, what: str, treedef: Any = None, count: int = -1) -> list:
    """``spec`` (an int, None, or a tree matching ``tree``'s structure, or a prefix of
    it) as one axis per leaf of ``tree``; ``treedef`` and ``count``, where given, are
    ``tree``'s structure and number of leaves (else it is flattened here)."""
    if count < 0:
        leaves, treedef = tree_flatten(tree)
        count = len(leaves)
    if spec is None or isinstance(spec, (int, np.integer)):
        return [spec] * count
    if treedef is None:
        raise ValueError(f"vmap: {what} {spec!r} does not match a single array")
    (kind, info), defs = treedef
    if kind == "dict":
        if not isinstance(spec, dict) or set(spec) != set(info[1]):
            raise ValueError(f"vmap: {what} {spec!r} does not match the structure of {tree!r}")
        children = [spec[k] for k in info[1]]
        subtrees = [tree[k] for k in info[1]]
    else:
        if not isinstance(spec, (tuple, list)) or len(spec) != len(defs):
            raise ValueError(
                f"vmap: {what} {spec!r} does not match the structure of the value "
                f"({len(defs)} entries)"
            )
        children = list(spec)
        subtrees = list(tree)
    out: list = []
    for s, t, (n, d) in zip(children, subtrees, defs):
        out += _axes_tree(s, t, what, d, n)
    return out


def _of_an_argument(data: np.ndarray, leaves: list) -> bool:
    """Whether ``data`` is an ndarray argument's memory (the argument, or a view of it)."""
    owner = data if data.base is None else owner_of(data)
    return any(type(a) is np.ndarray and (a is owner or owner_of(a) is owner) for a in leaves)


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, *, report: bool = False) -> Callable:
    """``f``, written for one example, run over a batch: ``vmap(f)(X)`` is
    ``np.stack([f(x) for x in X])``, computed with NumPy's own vectorisation.

    ``in_axes`` says where each argument's batch axis is, as in JAX: an int for all
    arguments, ``None`` for an argument that is the same for every example, or a tuple
    (one entry per positional argument, each an int, None, or a container matching
    that argument's structure). ``out_axes`` says where the batch goes in the outputs,
    likewise (``None`` for an output that does not depend on the batch). Arguments and
    outputs may be tuples, lists, dicts and namedtuples of arrays; a ``None`` leaf in
    either is passed through as ``None``, whatever its axis.

    It composes with the other transforms both ways round: ``vmap(grad(f))`` gives
    per-example gradients, ``grad`` of a function that calls ``vmap`` differentiates
    through the batch, and ``vmap(vmap(f))``, ``vmap(jvp(...))``, ``jacobian(vmap(f))``,
    ``checkpoint``, ``stop_gradient`` and ``at`` work inside. Python control flow that
    depends on a batched value raises ``BatchedControlFlowError`` naming the line.

    A NumPy function with no batching rule runs once per example (the loop fallback);
    ``report=True`` (or running under ``tape.debug()``) warns where that happens.

    For speed, map a compiled gradient, ``vmap(compile_grad(f, *one_example))``: its
    program is recorded once on the batch and replayed for every later batch of the same
    shapes, without the tape's per-operation cost (docs/guide/vmap.md, "Speed").

    >>> import numpy as np
    >>> from tape import vmap, grad
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> vmap(lambda x: x @ x)(X)
    array([ 5., 25., 61.])
    >>> w = np.array([0.5, -1.0])
    >>> loss = lambda w, x: np.tanh(x @ w) ** 2
    >>> per_example = vmap(grad(loss, argnums=0), in_axes=(None, 0))(w, X)
    >>> per_example.shape
    (3, 2)
    >>> np.allclose(per_example[1], grad(loss, argnums=0)(w, X[1]))
    True
    """

    @functools.wraps(f)
    def batched(*args: Any, **kwargs: Any) -> Any:
        spec = in_axes
        if isinstance(spec, list):
            spec = tuple(spec)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(
                f"vmap: in_axes has {len(spec)} entries but {getattr(f, '__name__', 'f')} "
                f"was called with {len(args)} positional arguments"
            )
        if isinstance(spec, dict):
            raise TypeError(
                "vmap: in_axes is an int, None, or a tuple with one entry per positional "
                "argument (a dict goes inside that tuple, for a dict argument)"
            )
        leaves, treedef = tree_flatten(args)
        axes = _axes_tree(spec, args, "in_axes", treedef, len(leaves)) if args else []
        sizes = set()
        for leaf, axis in zip(leaves, axes):
            if axis is None or leaf is None:  # a None leaf is an empty part: passed through
                continue
            shape = leaf.shape if type(leaf) is np.ndarray else np.shape(value_of(leaf))
            if not -len(shape) <= axis < len(shape):
                raise ValueError(
                    f"vmap: in_axes {axis} is out of range for an argument of shape {shape}"
                )
            sizes.add(shape[axis])
        if not sizes:
            raise ValueError("vmap: no argument is batched (in_axes is None for all of them)")
        if len(sizes) > 1:
            raise ValueError(
                f"vmap: the batched arguments disagree on the batch size: {sorted(sizes)}"
            )
        size = sizes.pop()
        level = Tape().level
        ins = []
        for leaf, axis in zip(leaves, axes):
            if axis is None and type(leaf) is np.ndarray and leaf.flags.writeable:
                # the same array for every example: each example's program would write it
                # in turn, which one batched write cannot follow, so writes are refused
                shared = leaf.view()
                shared.flags.writeable = False
                ins.append(shared)
            elif axis is None or leaf is None:
                ins.append(leaf)
            elif type(leaf) is np.ndarray and axis % leaf.ndim == 0:
                ins.append(Batched(leaf, level))  # what batch_in does with it, directly
            else:
                ins.append(batch_in(leaf, axis % np.ndim(value_of(leaf)), level))
        broadcaster = _Broadcaster(level, size)
        rewriters, reports = rewriting.get(), reporting.get()
        hold()
        try:
            rewriting.set((broadcaster,) + rewriters)
            reporting.set(report or reports)
            out = f(*tree_unflatten(treedef, ins), **kwargs)
        finally:
            # each put back by the first call of its statement: a signal cannot land before
            rewriting.set(rewriters)
            reporting.set(reports)
            unhold()
        outs, out_def = tree_flatten(out)
        oaxes = _axes_tree(out_axes, out, "out_axes", out_def, len(outs))
        results = []
        for o, axis in zip(outs, oaxes):
            if type(o) is Batched and o.level == level and axis in (0, -1 - o.ndim):
                data = o.data  # what batch_out does with it, directly
                if type(data) is np.ndarray and _of_an_argument(data, leaves):
                    data = data.copy()  # a new array, as np.stack makes, not the argument's
                results.append(data)
                continue
            if axis is None:
                if _batched_at(o, level):
                    raise ValueError(
                        "vmap: out_axes is None for an output that depends on the batch"
                    )
                results.append(o)
                continue
            if o is None:
                results.append(None)
                continue
            if not _batched_at(o, level) and not isinstance(o, (np.ndarray, Node)):
                o = np.asarray(o, dtype=np.result_type(o))
            ndim = np.ndim(value_of(o)) if not _batched_at(o, level) else value_of(o).ndim
            results.append(batch_out(o, axis % (ndim + 1), level, size))
        return tree_unflatten(out_def, results)

    return batched

