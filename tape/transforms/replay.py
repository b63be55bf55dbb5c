"""The Python source of a compiled tape (``tape.transforms.compiled``): one statement per record.

``liveness`` marks the records that get an adjoint and those the output or a guard
needs; ``Source.forward`` writes one statement per needed record, ``Source.backward``
runs the reverse pass once on the recorded values, through ``tape.core.reverse``'s own
``accumulate`` and ``update_in_place``, and writes down what it did; ``Source.functions``
compiles the statements in chunks of a thousand records or more. Each statement's
function, rules, unbroadcasting and accumulation are decided here, from the recorded
values and shapes, so that a replay does no dictionary look-up, type test or shape
decision.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from sensitivities import broadcast_to, registry
from sensitivities.registry import function_name, shifted_axis

from ..core.node import Node
from ..core.records import Branch, Tape
from ..core.reverse import (
    ReverseTape,
    accumulate,
    call_foreign,
    in_place_rule,
    unbroadcast_axes,
    update_in_place,
)
from .batching import REDUCTIONS, Batched, multiply_data
from .grad import seed_of

__all__ = ["Source", "Changed", "Slot", "liveness", "slotted", "SCALAR_TYPES"]

_CHUNK = 1000  # records per generated function, at least
class Changed(Exception):
    """Raised inside a replay when a recorded plain result comes out differently."""


# -- scalar specialisation ----------------------------------------------------------------
# On float64 scalars a NumPy ufunc call costs ten times the arithmetic it does, so records
# whose values are all scalars replay as Python arithmetic and ``math`` calls. Each adjoint
# below is the registered rule's formula (sensitivities/elementwise.py) written for
# scalars; tests check the two agree. ``math`` raises where NumPy would warn (log(0),
# overflow, x / 0): such a call falls back to the eager gradient.
# speed: the scalar chain replays at 0.14 µs per op with these forms, 2.2 µs with the
# registered rules called on floats (benchmarks/run.py --quick --workloads chain)

_SCALAR: dict[Any, tuple[str, tuple[str, ...]]] = {
    np.add: ("{0} + {1}", ("{g}", "{g}")),
    np.subtract: ("{0} - {1}", ("{g}", "-{g}")),
    np.multiply: ("{0} * {1}", ("{g} * {1}", "{g} * {0}")),
    np.true_divide: ("{0} / {1}", ("{g} / {1}", "-{g} * {y} / {1}")),
    np.negative: ("-{0}", ("-{g}",)),
    np.square: ("{0} * {0}", ("{g} * 2 * {0}",)),
    np.exp: ("_exp({0})", ("{g} * {y}",)),
    np.log: ("_log({0})", ("{g} / {0}",)),
    np.sqrt: ("_sqrt({0})", ("{g} / (2 * {y})",)),
    np.sin: ("_sin({0})", ("{g} * _cos({0})",)),
    np.cos: ("_cos({0})", ("-{g} * _sin({0})",)),
    np.tanh: ("_tanh({0})", ("{g} * (1 - {y} * {y})",)),
}
_MATH = {f"_{name}": getattr(math, name) for name in ("exp", "log", "sqrt", "sin", "cos", "tanh")}


def _on_arrays(template: str) -> str:
    """A scalar form with NumPy's functions in place of ``math``'s: the rule, inlined."""
    return re.sub(r"\b_(exp|log|sqrt|sin|cos|tanh)\(", r"np.\1(", template)


SCALAR_TYPES = (float, np.float64)

def _differs(new: Any, old: Any) -> bool:
    """Whether a recomputed plain result differs from the recorded one."""
    if isinstance(old, np.ndarray):
        return not (
            type(new) is np.ndarray
            and new.shape == old.shape
            and new.dtype == old.dtype
            and np.array_equal(new, old)
        )
    if isinstance(old, (tuple, list)):
        return (
            type(new) is not type(old)
            or len(new) != len(old)
            or any(_differs(a, b) for a, b in zip(new, old))
        )
    try:
        return bool(type(new) is not type(old) or new != old)
    except Exception:
        return True

class Slot:
    __slots__ = ("pos",)

    def __init__(self, pos: int) -> None:
        self.pos = pos

def liveness(tape: Tape, differentiated: set, out_pos: int | None):
    """Which records a program needs, from each record's argument positions ``argpos``:
    ``active[p]`` where record ``p`` depends on a differentiated input (it gets an
    adjoint), ``live[p]`` where the output or a guard depends on it (it is computed)."""
    records = tape.records
    n = len(records)
    argpos = [
        _arg_positions(node.args, tape) if isinstance(node, Branch) else () for node in records
    ]
    active = [False] * n
    for p in range(n):
        active[p] = any(active[q] for q in argpos[p]) if argpos[p] else p in differentiated
    live = [False] * n
    if out_pos is not None:
        live[out_pos] = True
    for _at, _f, spec, _kwargs, _expected in tape.guards:
        for q in _spec_positions(spec):
            live[q] = True
    for p in range(n - 1, -1, -1):
        if live[p]:
            for q in argpos[p]:
                live[q] = True
    return argpos, active, live


class Source:
    """The generated source of one tape, chunk by chunk.

    Values and adjoints are locals (``x12``, ``g12``) of generated functions of a few
    thousand records each: chunk k runs its forward part, calls chunk k + 1, then runs its
    reverse part, so its locals serve both. Only what crosses chunks goes through the
    lists ``v`` and ``g``. Constants (functions, rules, arrays) are names in ``ns``.
    """

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        n = len(tape.records)
        self.size = max(_CHUNK, -(-n // 200))  # records per chunk: at most 200 chunks deep
        self.chunks = max(1, -(-n // self.size))
        self.defined: list[set[int]] = [set() for _ in range(self.chunks)]
        self.used: list[set[int]] = [set() for _ in range(self.chunks)]  # slots each reads
        self.uses = self.used[0]  # those of the chunk being written
        self.here = 0  # the chunk being written
        self.scalar = [False] * n  # records replayed as Python arithmetic on floats
        self.scalar_args: set[int] = set()  # inputs read by them: replayed as floats
        self.alias: dict[int, str] = {}  # slot -> the name its adjoint is read from
        self.ns: dict[str, Any] = {
            "np": np,
            "Changed": Changed,
            "_differs": _differs,
            "_broadcast_to": broadcast_to,  # NumPy's view, made faster
            **_MATH,
        }
        self.names = 0
        self.holds_batch = False  # a batched constant: of one vmap call, not replayable
        # the batches of one vmap (under vmap): the calls Batched would answer by its
        # fast paths are written on their data, the level read from an input (``lvl``)
        # speed: sparing each call Batched's protocol dispatch, per-example gradients
        # replayed (vmap(compile_grad(...))) take 0.80 ms, against 0.85 ms (best of 15)
        # and 15% more by the median (benchmarks/run.py --quick --workloads per_example)
        self.batch_input = _batch_input(tape)
        if self.batch_input is not None:
            self.ns.update(_B=Batched, _multiply=multiply_data)

    # -- the forward pass --------------------------------------------------------------

    def forward(self, live: list[bool], argpos: list) -> list[list[str]]:
        """Each chunk's forward statements: ``x{p} = call`` for every live Branch, and
        each guard before the record that followed it when the tape was recorded."""
        records, size = self.tape.records, self.size
        lines: list[list[tuple]] = [[] for _ in range(self.chunks)]
        for at, gf, spec, gkw, expected in self.tape.guards:
            k = max(at - 1, 0) // size
            self.uses = self.used[k]
            lines[k].append((at, self._guard(at, gf, spec, gkw, expected)))
        for p, node in enumerate(records):
            if not (live[p] and isinstance(node, Branch)):
                continue
            k = p // size
            self.scalar[p] = scalar = _is_scalar_record(node, self.tape)
            if scalar:
                self.scalar_args.update(argpos[p])
            self.uses = self.used[k]
            lines[k].append((p + 0.5, f"x{p} = {self._call(node, scalar)}"))
            self.defined[k].add(p)
        return [[line for _, line in sorted(chunk, key=lambda t: t[0])] for chunk in lines]

    def _call(self, node: Branch, scalar: bool) -> str:
        if scalar:
            template = _SCALAR[node.f][0]
            return template.format(*(self._expr(a) for a in node.args))
        if self.batch_input is not None:
            lowered = self._batched_call(node)
            if lowered is not None:
                return lowered
        reduce = REDUCTIONS.get(node.f)  # NumPy's reductions are its ufuncs' reduce, unwrapped
        if (
            reduce is not None
            and len(node.args) == 1
            and self.tape.owns(node.args[0])
            and type(node.args[0].value) is np.ndarray
            and set(node.kwargs) <= reduce[1]
        ):
            axis = "" if "axis" in node.kwargs else ", axis=None"  # reduce's default is 0
            return f"{self._name(reduce[0], 'f')}({self._args(node)}{axis})"
        return f"{self._name(node.f, 'f')}({self._args(node)})"

    def _batched_call(self, node: Branch) -> str | None:
        """``node``'s call on its batches' data, as Batched's fast paths make it: an
        elementwise ufunc, a vector per example times a matrix, a sum or an extremum;
        None for any other call."""
        f, args, kwargs = node.f, node.args, node.kwargs
        if type(node.value) is not Batched:
            return None
        vals = [a.value if self.tape.owns(a) else a for a in args]
        if isinstance(f, np.ufunc) and f.signature is None and not kwargs and len(args) <= 2:
            ranks = [_example_rank(v) for v in vals]
            if None in ranks or f.nout != 1:
                return None
            rank = max(ranks)  # each batch padded after its batch axis up to it
            exprs = [self._data(a, v, rank - r) for a, v, r in zip(args, vals, ranks)]
            call = "_multiply" if f is np.multiply else self._name(f, "f")
            return f"_B({call}({', '.join(exprs)}), lvl)"
        if (
            f is np.matmul
            and not kwargs
            and len(vals) == 2
            and type(vals[0]) is Batched
            and vals[0].data.ndim == 2
            and type(vals[1]) is np.ndarray
            and vals[1].ndim == 2
        ):  # x @ W: one product of every example's row
            return f"_B(np.matmul({self._expr(args[0])}.data, {self._expr(args[1])}), lvl)"
        reduce = REDUCTIONS.get(f)
        if reduce is None or len(vals) != 1 or type(vals[0]) is not Batched:
            return None
        axis = kwargs.get("axis")
        if not set(kwargs) <= reduce[1] or not (type(axis) in (int, tuple) or axis is None):
            return None
        shifted = shifted_axis(axis, vals[0].data.ndim - 1)
        rest = "".join(f", {k}={self._name(v)}" for k, v in kwargs.items() if k != "axis")
        call = self._name(reduce[0], "f")
        return f"_B({call}({self._expr(args[0])}.data, axis={shifted!r}{rest}), lvl)"

    def _data(self, a: Any, value: Any, missing: int = 0) -> str:
        """An operand on its data: a batch's data (with ``missing`` axes of length 1
        after its batch axis), or a plain value as it is."""
        if type(value) is not Batched:
            return self._expr(a)
        shape = value.data.shape
        padded = f".reshape({shape[:1] + (1,) * missing + shape[1:]})" if missing else ""
        return f"{self._expr(a)}.data{padded}"

    def _guard(self, at, gf, spec, gkw, expected) -> str:
        parts = [self._spec_expr(a) for a in spec]
        if gkw:
            parts.append("**" + self._name(gkw, "kw"))
        call = f"{self._name(gf, 'f')}({', '.join(parts)})"
        message = repr(
            f"{function_name(gf)} on nodes (before record {at}) came out differently than "
            "when the tape was recorded: these arguments take another path through the function"
        )
        if isinstance(expected, (bool, int, float, np.bool_, np.number)):
            return f"if {call} != {self._name(expected, 'e')}: raise Changed({message})"
        return f"if _differs({call}, {self._name(expected, 'e')}): raise Changed({message})"

    # -- the reverse pass --------------------------------------------------------------

    def backward(self, active: list[bool], differentiated: set, out_pos: int | None) -> list:
        """Each chunk's reverse statements. The reverse pass runs once here on the
        recorded values, through the eager pass's own ``accumulate`` and
        ``update_in_place``, so that unbroadcasting, accumulation and ownership are
        decided once, as the eager pass decides them (scalar records pass a stand-in
        adjoint on: they need no shapes)."""
        records, n = self.tape.records, len(self.tape.records)
        self.rtape = ReverseTape(self.tape)
        adj = self.rtape.adjoints
        backward: list[list[str]] = [[] for _ in range(self.chunks)]
        for k in range(self.chunks - 1, -1, -1):
            self.here, self.uses, lines = k, self.used[k], backward[k]
            lo, hi = k * self.size, min(n, (k + 1) * self.size)
            lines += [f"g{q} = g[{q}]" for q in range(lo, hi) if adj[q] is not None]
            if out_pos is not None and lo <= out_pos < hi and active[out_pos]:
                adj[out_pos] = seed = seed_of(records[out_pos].value)
                self.uses.add(out_pos)
                ones = "1.0" if type(seed) is float else f"np.ones_like(x{out_pos})"
                lines.append(f"g{out_pos} = {ones}")
            for p in range(hi - 1, lo - 1, -1):
                node = records[p]
                if adj[p] is None or not isinstance(node, Branch):
                    continue
                if self.scalar[p]:
                    self._reverse_scalar(node, p, active, lines)
                else:
                    self._reverse(node, p, adj[p], active, lines)
                    if np.ndim(node.value):
                        lines.append(f"g{p} = None")  # free the adjoint once it is used
            lines += [
                f"g[{q}] = {self._read(q)}"
                for q in sorted(differentiated)
                if lo <= q < hi and adj[q] is not None
            ]
        return backward

    def _reverse_scalar(self, node: Branch, p: int, active: list, out: list) -> None:
        """The contributions of a scalar record: its rule's formula, in Python arithmetic."""
        exprs = [self._expr(a) for a in node.args]
        gp = self._read(p)
        for i, a in enumerate(node.args):
            if self.tape.owns(a) and active[a.pos]:
                expr = _SCALAR[node.f][1][i].format(*exprs, y=f"x{p}", g=gp)
                done = accumulate(self.rtape, a, 1.0, node.f, i)  # 1.0: a stand-in
                self._accumulate(a.pos, expr, done, out, alias=expr == gp)

    def _reverse(self, node: Branch, p: int, ybar: Any, active: list, out: list) -> None:
        """The contributions of Branch ``node`` (at ``p``) to its active arguments."""
        rules = registry.lookup(node.f)
        vals, y, kwargs = node.vals, node.value, node.kwargs
        gp, call_args = self._read(p), self._args(node)
        if rules.pre is not None:
            kwargs = dict(kwargs, pre=rules.pre(y, ybar, *vals, **kwargs))
            out.append(f"pre = {self._name(rules.pre, 'pre')}(x{p}, {gp}, {call_args})")
            call_args += ", pre=pre"
        head = f"x{p}, {gp}, {call_args}"  # a rule's arguments
        for i, a in enumerate(node.args):
            foreign = node.f if rules.foreign else None
            if self._active(a, active):
                update = in_place_rule(rules, i, vals, ybar, a.value)
                if update is not None:
                    made = update_in_place(self.rtape, update, a, y, ybar, vals, kwargs, foreign, i)
                    if foreign is not None:
                        update = _guarded(update, foreign, i, np.shape(a.value), in_place=True)
                    self._update(a.pos, self._name(update, "u"), made, gp, head, out)
                    continue
                rule = rules.rule(i, vals)
                if foreign is None:
                    xbar = rule(y, ybar, *vals, **kwargs)
                else:
                    xbar = call_foreign(rule, foreign, i, y, ybar, vals, kwargs)
                    rule = _guarded(rule, foreign, i, np.shape(xbar))
                expr = self._adjoint(node, i, rule, p, ybar, kwargs, head)
                self._contribution(node, i, a, expr, xbar, out)
            elif (type(a) is list or type(a) is tuple) and any(self._active(b, active) for b in a):
                rule = rules.rule(i, vals)
                if foreign is None:
                    xbars = rule(y, ybar, *vals, **kwargs)
                else:
                    xbars = call_foreign(rule, foreign, i, y, ybar, vals, kwargs, len(a))
                    rule = _guarded(rule, foreign, i, tuple(map(np.shape, xbars)), len(a))
                out.append(f"cs = {self._name(rule, 'r')}({head})")
                for j, (b, xbar) in enumerate(zip(a, xbars)):
                    if self._active(b, active) and xbar is None:  # none for this element
                        out.append(f"if cs[{j}] is not None: raise Changed({_RULE_CHANGED!r})")
                    elif self._active(b, active):
                        self._contribution(node, i, b, f"cs[{j}]", xbar, out)

    def _active(self, a: Any, active: list) -> bool:
        return self.tape.owns(a) and active[a.pos]

    def _adjoint(self, node, i, rule, p, ybar, kwargs, head) -> str:
        """Argument ``i``'s contribution: the registered rule's formula written out where
        it is known (the scalar forms on arrays, a sum, a product of two matrices), else
        a call of ``rule``."""
        f, vals, gp = node.f, node.vals, self._read(p)
        if rule is _registered(f, i):  # (a user's rule comes wrapped: _guarded)
            if f in _SCALAR and not kwargs:
                template = _on_arrays(_SCALAR[f][1][i])
                if (
                    self.batch_input is not None
                    and template != "{g}"  # passed on as it is
                    and _same_batches(node, ybar, self.tape, template)
                ):
                    exprs = [
                        self._data(b, b.value if isinstance(b, Node) else b) for b in node.args
                    ]
                    data = template.format(*exprs, y=f"x{p}.data", g=f"({gp}).data")
                    return _BatchedData(data)
                exprs = [self._expr(b) for b in node.args]
                return template.format(*exprs, y=f"x{p}", g=gp)
            if f is np.sum and _plain_sum(node, vals):
                return _sum_adjoint(gp, vals[0], ybar, kwargs)
            if f is np.matmul and _plain_matmul(vals, ybar, kwargs):
                other = self._expr(node.args[1 - i])
                factors = (gp, f"{other}.T") if i == 0 else (f"{other}.T", gp)
                return "np.matmul({}, {})".format(*factors)
        return f"{self._name(rule, 'r')}({head})"

    def _contribution(self, node: Branch, i: int, a: Node, expr: str, xbar: Any, out) -> None:
        """Add contribution ``expr`` (``xbar`` when recorded) into ``a``'s slot, summed
        back to ``a``'s shape as the reverse pass sums it."""
        done = accumulate(self.rtape, a, xbar, node.f, i, node)  # raises if it cannot sum back
        leading, stretched = unbroadcast_axes(np.shape(xbar), np.shape(a.value))
        shift = 0
        if type(expr) is _BatchedData:  # summed on the data, past its batch axis
            shift = 1
            leading = tuple(k + 1 for k in leading)
        if leading:
            expr = f"np.add.reduce({expr}, axis={leading})"
        if stretched:
            expr = (
                f"np.add.reduce({expr}, axis={tuple(k + shift for k in stretched)}, keepdims=True)"
            )
        if shift:
            expr = f"_B({expr}, lvl)"
        self._accumulate(a.pos, expr, done, out)

    def _accumulate(self, q: int, expr: str, done: str, out: list, alias: bool = False) -> None:
        """Write what ``accumulate`` did (``done``) to slot ``q``, ``expr`` the contribution."""
        target = self._g(q)
        if done == "set" and alias and target == f"g{q}":
            self.alias[q] = expr  # a scalar passed on unchanged (by add): named, not copied
        elif done == "set":
            out.append(f"{target} = {expr}")
        elif done == "add in place":
            out.append(f"{target} += {expr}")
        else:
            out.append(f"{target} = {self.alias.pop(q, None) or target} + {expr}")

    def _update(self, q: int, update: str, made: str, gp: str, head: str, out: list) -> None:
        """Write an in-place rule's call, its accumulator made as ``update_in_place``
        made it (``made``)."""
        target = self._g(q)
        current = self.alias.pop(q, None) or target
        acc = _ACCUMULATOR[made].format(q=q, current=current, g=gp)
        out.append(f"{target} = {update}({acc}, {head})")

    def _g(self, q: int) -> str:
        """Where the adjoint of slot ``q`` is kept while the current chunk runs."""
        return f"g{q}" if q // self.size == self.here else f"g[{q}]"

    def _read(self, q: int) -> str:
        """The adjoint of slot ``q`` (of the current chunk), as it may be read now."""
        return self.alias.get(q) or f"g{q}"

    # -- expressions -------------------------------------------------------------------

    def _name(self, value: Any, prefix: str = "k") -> str:
        """``value`` in the source: a literal, or a new name bound to it in ``ns``."""
        if type(value) in (int, bool) or value is None:
            return repr(value)
        if type(value) is float and math.isfinite(value):
            return repr(value)
        self.holds_batch = self.holds_batch or _holds_batch(value)
        self.names += 1
        name = f"{prefix}{self.names}"
        self.ns[name] = value
        return name

    def _expr(self, a: Any) -> str:
        if self.tape.owns(a):
            self.uses.add(a.pos)
            return f"x{a.pos}"
        if type(a) is list or type(a) is tuple:
            inner = ", ".join(self._expr(b) for b in a)
            if type(a) is tuple:
                return f"({inner},)" if len(a) == 1 else f"({inner})"
            return f"[{inner}]"
        return self._name(a)  # a plain value, or an outer tape's node: a constant here

    def _args(self, node: Branch) -> str:
        parts = [self._expr(a) for a in node.args]
        if node.kwargs:
            parts.append("**" + self._name(node.kwargs, "kw"))
        return ", ".join(parts)

    def _spec_expr(self, a: Any) -> str:
        if isinstance(a, Slot):
            self.uses.add(a.pos)
            return f"x{a.pos}"
        if type(a) is list or type(a) is tuple:
            inner = ", ".join(self._spec_expr(b) for b in a)
            return f"({inner},)" if type(a) is tuple else f"[{inner}]"
        return self._name(a)

    # -- chunks ------------------------------------------------------------------------

    def functions(self, forward: list, backward: list, out_pos: int | None) -> Callable:
        """Compile one function per chunk; returns the first."""
        chunks, used, defined = self.chunks, self.used, self.defined
        for k in range(chunks):
            later = set().union(*used[k + 1 :]) if k + 1 < chunks else set()
            stores = sorted(q for q in defined[k] if q in later or q == out_pos)
            lines = [f"x{q} = v[{q}]" for q in sorted(used[k] - defined[k])]
            if self.batch_input is not None:
                lines.insert(0, f"lvl = v[{self.batch_input}].level")
            lines += forward[k] + [f"v[{q}] = x{q}" for q in stores]
            if k + 1 < chunks:
                lines.append(f"chunk_{k + 1}(v, g)")
            lines += backward[k]
            source = f"def chunk_{k}(v, g):\n" + "".join(
                f"    {line}\n" for line in lines or ["pass"]
            )
            exec(compile(source, f"<compiled tape: chunk {k}>", "exec"), self.ns)
        return self.ns["chunk_0"]


# How update_in_place made an in-place rule's accumulator, as a replay makes it.
_ACCUMULATOR = {
    "zeros": "np.zeros_like(x{q}, dtype=np.result_type(x{q}, {g}))",
    "copy": "np.array({current}, dtype=np.result_type({current}, {g}))",
    "owned": "{current}",
}


def _plain_sum(node: Branch, vals: tuple) -> bool:
    keywords = REDUCTIONS[np.sum][1]
    return len(vals) == 1 and type(vals[0]) is np.ndarray and set(node.kwargs) <= keywords


def _plain_matmul(vals: tuple, ybar: Any, kwargs: Any) -> bool:
    """Whether matmul's rule comes down to one product here: two matrices, and an adjoint
    that does not repeat (a repeating one keeps the rule, which saves work on it). Either
    way the product is right, so the adjoint's structure need not be guarded."""
    return (
        not kwargs
        and all(type(v) is np.ndarray and v.ndim == 2 for v in vals)
        and type(ybar) is np.ndarray
        and 0 not in ybar.strides
    )


def _sum_adjoint(g: str, x: np.ndarray, ybar: Any, kwargs: Any) -> str:
    """The sum rule for a known shape: ``ybar`` with the reduced axes put back, broadcast."""
    if np.ndim(ybar) == 0 and x.size <= 1 << 14:
        return f"np.full({x.shape}, {g})"  # small: a filled array is cheaper than a view
    if np.ndim(ybar) == 0 or kwargs.get("keepdims"):
        return f"_broadcast_to({g}, {x.shape})"
    axis = kwargs.get("axis")
    axes = range(x.ndim) if axis is None else np.atleast_1d(axis) % x.ndim
    kept = tuple(1 if i in set(axes) else n for i, n in enumerate(x.shape))
    return f"_broadcast_to({g}.reshape({kept}), {x.shape})"


class _BatchedData(str):
    """A contribution's expression written on a batch's data: wrapped once summed back."""


def _batch_input(tape: Tape) -> int | None:
    """The position of an input holding a batch, where every batched value on ``tape``
    is a batch of ndarrays of that one level (a program of one vmap); else None."""
    level = first = None
    for node in tape.records:
        value = node.value
        if isinstance(value, Batched):
            if type(value.data) is not np.ndarray or level not in (None, value.level):
                return None
            level = value.level
            if first is None and not isinstance(node, Branch):
                first = node.pos
    return first


def _example_rank(value: Any) -> int | None:
    if type(value) is Batched:
        return value.data.ndim - 1
    if type(value) is np.ndarray:
        return value.ndim
    return 0 if type(value) in (float, int, complex, bool) or isinstance(value, np.number) else None


def _same_batches(node: Branch, ybar: Any, tape: Tape, template: str) -> bool:
    """Whether ``node``'s value, adjoint and the arguments ``template`` (a rule's scalar
    form) reads are batches of one data shape (or numbers): the form then reads the same
    on their data."""
    if type(ybar) is not Batched or type(node.value) is not Batched:
        return False
    shape = ybar.data.shape
    if node.value.data.shape != shape:
        return False
    for k, a in enumerate(node.args):
        if f"{{{k}}}" not in template:
            continue
        value = a.value if tape.owns(a) else a
        if type(value) is Batched:
            if value.data.shape != shape:
                return False
        elif _example_rank(value) != 0 or isinstance(value, np.ndarray):
            return False
    return True


def _holds_batch(value: Any) -> bool:
    if type(value) is Batched:
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_batch(v) for v in value)
    return isinstance(value, dict) and any(_holds_batch(v) for v in value.values())


def _registered(f: Any, argnum: int) -> Any:
    rules = registry.lookup(f)
    return None if rules is None or rules.typed else rules.plain.get(argnum)


_RULE_CHANGED = (
    "a rule that gave no contribution when the tape was recorded gives one now: "
    "the tape must be recorded again"
)


def _guarded(rule, f, argnum: int, shape, elements=None, in_place=False) -> Callable:
    """A user's ``rule`` as a replay calls it: guarded as the reverse pass guards it
    (``call_foreign``), and checked to give the shape it gave when the tape was recorded
    (per element for a list argument), which the replay's sums were written for."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        head, vals = (args[:3], args[3:]) if in_place else ((None, *args[:2]), args[2:])
        into, y, ybar = head
        xbar = call_foreign(rule, f, argnum, y, ybar, vals, kwargs, elements, into)
        got = np.shape(xbar) if elements is None else tuple(map(np.shape, xbar))
        if got != shape:
            raise Changed(
                f"the sensitivity of {function_name(f)} for argument {argnum} gave shape "
                f"{got}, not {shape} as when the tape was recorded"
            )
        return xbar

    return guarded


def _is_scalar_record(node: Branch, tape: Tape) -> bool:
    if node.f not in _SCALAR or node.kwargs or type(node.value) not in SCALAR_TYPES:
        return False
    if registry.lookup(node.f).foreign:  # a user's rule replaced the formula written here
        return False
    for a in node.args:
        value = a.value if tape.owns(a) else a
        if type(value) not in SCALAR_TYPES and type(value) is not int:
            return False
    return True


def _arg_positions(args: tuple, tape: Tape) -> list[int]:
    out = []
    for a in args:
        if tape.owns(a):
            out.append(a.pos)
        elif type(a) is list or type(a) is tuple:
            out += [b.pos for b in a if tape.owns(b)]
    return out


def slotted(args: Any, tape: Tape) -> tuple[Any, bool]:
    """``args`` of a plain call, with the nodes of ``tape`` as slots (reached through the
    nodes of inner tapes, whose values they are) and everything else as plain values."""
    found = False
    out = []
    for a in args:
        while isinstance(a, Node) and a.tape is not tape:
            a = a.value
        if isinstance(a, Node):
            a, found = Slot(a.pos), True
        elif type(a) is list or type(a) is tuple:
            inner, inner_found = slotted(a, tape)
            a, found = type(a)(inner), found or inner_found
        out.append(a)
    return tuple(out), found


def _spec_positions(spec: Any) -> list[int]:
    out = []
    for a in spec:
        if isinstance(a, Slot):
            out.append(a.pos)
        elif type(a) is list or type(a) is tuple:
            out += _spec_positions(a)
    return out
