"""Forward mode: dual numbers as records of a ``ForwardTape``.

A ``ForwardTape`` is a tape whose every record is a dual number: the record's value is
the primal part, and the tape holds its tangent (the part along ``ε``, with ``ε² = 0``).
The tangent of a Branch is computed the moment it is recorded, from the tangents of its
arguments, so nothing is left to do backwards. Because it is a ``Tape``, its nodes join
NumPy through the same protocols, its level orders it among reverse tapes (forward over
reverse, reverse over forward, forward over forward all nest), and every function that
can be recorded can be pushed forward.

Tangents carry a leading axis of ``k`` directions, so ``k`` Jacobian-vector products,
or a whole Jacobian, take one pass. A pushforward is found in this order:

1. an explicit rule registered with ``sensitivities.registry.pushforward`` (the common
   non-elementwise functions, in ``sensitivities/pushforwards.py``);
2. for a ufunc on real values, the sensitivity itself: an elementwise function has a
   diagonal Jacobian, which is its own transpose, so ``rule(y, xdot, *args)`` is exactly
   ``J xdot`` once ``xdot`` is aligned with the output;
3. the pushforward derived from the sensitivity: a sensitivity is linear in ``ybar``,
   ``<rule(y, u, *args), v> = <u, J v>``, so ``J v`` is the gradient with respect to
   ``u`` of that inner product, a reverse pass through the rule (rules are
   differentiable). Exact for every rule, but one small reverse pass per direction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sensitivities import lift, registry
from sensitivities.registry import function_name, value_of

from ..core.display import preview
from ..core.errors import MissingRuleError, check_adjoint
from ..core.node import Node
from ..core.recording import current
from ..core.records import Branch, Leaf, Tape
from ..core.reverse import call_foreign, unbroadcast
from ..runtime import run_pass
from .grad import grad

__all__ = ["ForwardTape"]


class ForwardTape(Tape):
    """A tape of dual numbers: each record's value is the primal, ``tangent(node)`` its
    tangent, with a leading axis of ``directions`` directions. Seed a Leaf with
    ``seed(leaf, tangent)``; every call recorded after that pushes its tangent forward.

    >>> import numpy as np
    >>> from tape import Leaf
    >>> from tape.transforms.forward import ForwardTape
    >>> t = ForwardTape(directions=1)
    >>> x = Leaf(t, 0.5)
    >>> t.seed(x, np.array([1.0]))
    >>> y = x * np.sin(x)
    >>> t.tangent(y)  # d/dx x sin x = sin x + x cos x
    array([0.91821682])
    >>> t
    Forward tape with 3 elements and 1 direction:
      [0]: Leaf{float64} 0.5  tangent 1.0
      [1]: Branch{float64} 0.479425538604203 f=sin  tangent 0.8775825618903728
      [2]: Branch{float64} 0.2397127693021015 f=multiply  tangent 0.9182168195493894
    """

    __slots__ = ("tangents", "directions")

    def __init__(self, directions: int = 1) -> None:
        super().__init__()
        self.tangents: dict[int, Any] = {}  # position -> tangent; None means zero
        self.directions = directions

    def add(self, record: Node) -> None:
        """A forward tape's records are dual numbers: a Branch's tangent is pushed
        forward from its arguments' the moment it is recorded."""
        super().add(record)  # its arguments final (vmap may broadcast one first)
        if isinstance(record, Branch):
            try:
                self.tangents[record.pos] = _push(self, record)
            except BaseException:
                self.records.pop()  # a failed call leaves no record
                raise

    def release(self) -> None:
        """``Tape.release``, and the tangents with the records."""
        super().release()
        self.tangents.clear()

    def seed(self, node: Node, tangent: Any) -> None:
        """Set the tangent of ``node`` (a Leaf of this tape): shape ``(directions,) + shape``."""
        if node.tape is not self:
            raise ValueError("seed needs a node of this forward tape")
        expected = (self.directions,) + np.shape(node.value)
        if np.shape(tangent) != expected:
            raise ValueError(f"a tangent of shape {expected} was expected, got {np.shape(tangent)}")
        self.tangents[node.pos] = tangent

    def tangent(self, node: Any) -> Any:
        """The tangent of ``node``, shape ``(directions,) + shape``; zeros for a constant."""
        node = current(node)  # a node written in place: its latest version
        t = self.tangents.get(node.pos) if self.owns(node) else None
        if t is None:
            value = node.value if self.owns(node) else node
            t = np.zeros((self.directions,) + np.shape(value), dtype=_float_type(value))
        return t

    def __repr__(self) -> str:
        n = self.directions
        lines = [
            f"Forward tape with {len(self.records)} elements and {n} direction{'s' * (n != 1)}"
            + (":" if self.records else "")
        ]
        for node in self.records:
            t = self.tangents.get(node.pos)
            shown = "0" if t is None else preview(t[0] if n == 1 else t)
            lines.append(f"  [{node.pos}]: {node!r}  tangent {shown}")
        return "\n".join(lines)


def _float_type(value: Any) -> np.dtype:
    value = value_of(value)
    dtype = np.result_type(value)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _complex(v: Any) -> bool:
    dtype = getattr(v, "dtype", None)  # a node's dtype is its plain value's
    return isinstance(v, complex) if dtype is None else dtype.kind == "c"


def _push(tape: ForwardTape, node: Branch) -> Any:
    """The tangent of a Branch just recorded on ``tape``: the sum over its arguments of
    each one's pushforward; None when no argument carries a tangent."""
    f, args, vals, kwargs = node.f, node.args, node.vals, node.kwargs
    tangents = tape.tangents
    total = None
    y = node.value
    for i in node.node_args:
        a = args[i]
        if isinstance(a, Node):
            xdot = tangents.get(a.pos)
            if xdot is None:
                continue
        else:  # a list or tuple holding nodes of this tape
            xdot = [
                tangents.get(b.pos) if tape.owns(b) else None for b in a
            ]
            if all(t is None for t in xdot):
                continue
        ydot = _pushforward(f, i, y, xdot, vals, kwargs, tape.directions, node)
        if ydot is not None:
            total = ydot if total is None else total + ydot
    if total is not None:
        shape = (tape.directions,) + np.shape(y)
        if np.shape(total) != shape:
            total = np.broadcast_to(total, shape)
    return total


def _pushforward(f, i, y, xdot, vals, kwargs, k, record=None):
    explicit = registry.pushforward_of(f, i)
    if explicit is not None:
        if registry.is_foreign(explicit):
            ydot = _foreign_pushforward(explicit, f, i, y, xdot, vals, kwargs, k)
        else:
            ydot = explicit(y, xdot, *vals, **kwargs)
        if ydot is not NotImplemented:
            return ydot
    rules = registry.lookup(f)
    if (
        isinstance(f, np.ufunc)
        and f.signature is None  # a generalised ufunc (matvec, vecdot) is not elementwise
        and not (_complex(y) or _complex(vals[i]))
    ):
        rule = rules.rule(i, vals)
        if rule is not None:
            xdot = lift(xdot, 1 + np.ndim(y))
            if rules.pre is not None:
                kwargs = dict(kwargs, pre=rules.pre(y, xdot, *vals, **kwargs))
            if rules.foreign:
                return call_foreign(rule, f, i, y, xdot, vals, kwargs)
            return rule(y, xdot, *vals, **kwargs)
    return derived_pushforward(rules, i, y, xdot, vals, kwargs, k, record)


def _foreign_pushforward(rule, f, i, y, xdot, vals, kwargs, k):
    """A user's pushforward, called as a user's rule is (``call_foreign``: the tangent it
    is handed is its argument's, which other records read) and checked to give a tangent
    that is None, NotImplemented or an array that broadcasts to ``(k,) + y``'s shape."""
    ydot = call_foreign(rule, f, i, y, xdot, vals, kwargs, kind="pushforward")
    if ydot is None or ydot is NotImplemented:
        return ydot
    check_adjoint(ydot, f, i, "pushforward")
    shape = (k,) + np.shape(y)
    try:
        fits = np.broadcast_shapes(np.shape(ydot), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"the pushforward of {function_name(f)} for argument {i} returned shape "
            f"{np.shape(ydot)}, which does not broadcast to the tangent's shape {shape} "
            f"(directions, then the result's shape)"
        )
    return ydot


def derived_pushforward(rules, i, y, xdot, vals, kwargs, k, record=None):
    """``J v`` for each direction ``v`` in ``xdot``, from the sensitivity alone.

    ``<u, J v> = <rule(y, u, *args), v>`` for every ``u``: the rule is the transpose of
    ``J``. So ``J v`` is the gradient of the right-hand side with respect to ``u``,
    one reverse pass through the rule per direction.
    """
    rule = rules.rule(i, vals)
    if rule is None:
        raise MissingRuleError(
            f"{function_name(rules.f)} has only an in-place sensitivity for argument {i}, "
            "which forward mode cannot transpose; register a plain sensitivity or a "
            "pushforward (sensitivities.registry.pushforward)"
        )
    listed = isinstance(xdot, list)

    def inner(a, b):
        # with complex numbers, a rule is the transpose under Re <a, b>: the convention
        # that a real loss L changes by Re(ybar * dy)
        product = np.sum(a * b)
        return np.real(product) if np.iscomplexobj(product) else product

    def pairing(u, v):
        kw = kwargs
        if rules.pre is not None:
            kw = dict(kwargs, pre=rules.pre(y, u, *vals, **kwargs))
        if rules.foreign:
            xbar = call_foreign(rule, rules.f, i, y, u, vals, kw, len(v) if listed else None)
        else:
            xbar = rule(y, u, *vals, **kw)
        if not listed:
            # checked as the reverse pass checks it: what it could not sum back is refused
            check_adjoint(xbar, rules.f, i)
            if np.shape(xbar) != np.shape(vals[i]):
                xbar = unbroadcast(xbar, np.shape(vals[i]), rules.f, i, record)
            return inner(xbar, v)
        total = 0.0
        for xb, vb in zip(xbar, v):
            if xb is not None and vb is not None:
                total = total + inner(xb, vb)
        return total

    # like y's plain value: a batch of them under vmap, so that no plain array meets a batch
    u0 = np.zeros_like(value_of(y), dtype=_float_type(y))
    columns = []
    for d in range(k):
        v = [None if t is None else t[d] for t in xdot] if listed else xdot[d]
        columns.append(grad(pairing, argnums=0)(u0, v))
    if not columns:  # no directions at all (the Jacobian of an empty array)
        return np.zeros((0,) + np.shape(y), dtype=u0.dtype)
    return np.stack(columns)


def push_forward(f, args, kwargs, tangents, k):
    """Run ``f(*args, **kwargs)`` on a fresh forward tape with ``k`` directions, seeding a
    leaf for each of ``args`` whose tangent (shape ``(k,) + shape``) is not None.
    Returns the output and the tape, which the caller releases when done with it."""
    tape = ForwardTape(k)
    nodes = list(args)
    try:
        for i, (x, t) in enumerate(zip(args, tangents)):
            if t is not None:
                nodes[i] = Leaf(tape, x)
                tape.seed(nodes[i], t)
        return run_pass(True, f, *nodes, **kwargs), tape
    except BaseException:
        tape.release()  # a failed call leaves no cycles behind
        raise
