"""Compiled tapes: record a function's tape once, replay it as straight-line Python.

A tape is a straight-line program. ``compile_grad(f, *example_args)`` records it once and
generates Python source that replays its forward and reverse passes: each record is one
statement over local variables, with its function, its rules, its unbroadcasting and its
accumulation decided at compile time from the recorded values and shapes, so a replay
does no dictionary look-up, type test or shape decision. ReverseDiff.jl's compiled
tapes, with no compile step beyond Python's own.

How a tape becomes a program (``_Program``): ``record_inputs`` records the arguments
and ``f`` runs once on a ``_GuardedTape``; ``_liveness`` marks the records that get an
adjoint and those the output or a guard needs; ``_Source.forward`` writes one statement
per needed record, ``_Source.backward`` runs the reverse pass once on the recorded values,
through ``tape.reverse``'s own ``accumulate`` and ``update_in_place``, and writes down
what it did; ``_Source.functions`` compiles the statements in chunks of a thousand
records or more.

What is frozen at compile time, and how a replay knows it still holds:

- the shapes, dtypes and types of the arguments, and the values of the arguments that
  are not floating-point (integers, index arrays, strings): checked on every call;
- every plain result computed from nodes (a comparison, ``argmax``, ``bool(node)``):
  the engine reports each one while the tape is recorded, and the replay recomputes it
  and checks that it comes out the same, so a different branch is never replayed;
- what ``f`` reads from outside its arguments (globals, closures, random draws made
  inside ``f``) and ``node.value`` read inside ``f``: frozen as they were when the tape
  was recorded, as in any tracing compiler.

A check that fails re-records the tape for the new arguments (or, with
``on_change="raise"``, raises ``TapeMismatchError``): a replay never returns the
gradient of another program.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Sequence

import numpy as np

from sensitivities import broadcast_to, registry
from sensitivities.registry import function_name, shifted_axis

from .batching import REDUCTIONS, Batched, multiply_data
from .errors import MissingRuleError, NodeConversionError
from .functional import (
    argnums_spec,
    check_output,
    input_gradients,
    normalise_argnums,
    trace,
    value_and_grad,
)
from .gradients import Gradients
from .node import Node
from .recording import current, innermost_tape
from .records import Branch, Leaf, Tape
from .reverse import (
    ReverseTape,
    accumulate,
    in_place_rule,
    unbroadcast_axes,
    update_in_place,
)
from .trees import tree_flatten, tree_unflatten
from .warning_sites import located_warnings

__all__ = ["compile_grad", "CompiledGrad", "TapeMismatchError"]

CacheInfo = namedtuple("CacheInfo", "hits misses maxsize currsize")

_CHUNK = 1000  # records per generated function, at least


class TapeMismatchError(ValueError):
    """The arguments of a compiled gradient no longer match the recorded tape.

    >>> import numpy as np
    >>> from tape import compile_grad
    >>> g = compile_grad(lambda x: np.sum(x ** 2), np.ones(2), on_change="raise")
    >>> g(np.ones(3))
    Traceback (most recent call last):
        ...
    tape.compiled.TapeMismatchError: compile_grad(<lambda>): the arguments' shapes, ...
    """


class _Changed(Exception):
    """Raised inside a replay when a recorded plain result comes out differently."""


# -- scalar specialisation ----------------------------------------------------------------
# On float64 scalars a NumPy ufunc call costs ten times the arithmetic it does, so records
# whose values are all scalars replay as Python arithmetic and ``math`` calls. Each adjoint
# below is the registered rule's formula (sensitivities/elementwise.py) written for
# scalars; tests check the two agree. ``math`` raises where NumPy would warn (log(0),
# overflow, x / 0): such a call falls back to the eager gradient.

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


_SCALAR_TYPES = (float, np.float64)

# Plain results that depend only on shapes and dtypes, which the argument check covers.
_SHAPE_ONLY = {
    np.shape, np.ndim, np.size, np.result_type, np.zeros_like, np.ones_like, np.empty_like,
    np.iscomplexobj, np.isrealobj, np.can_cast,
}  # fmt: skip


def compile_grad(
    f: Callable,
    *example_args: Any,
    argnums: int | Sequence[int] | None = None,
    on_change: str = "record",
    cache_size: int = 32,
) -> CompiledGrad:
    """``grad(f, argnums)``, recorded once on ``example_args`` and replayed on later calls.

    The result is equal to ``grad(f, argnums)`` for arguments of the same shapes and
    dtypes (and equal non-float arguments) that take the same path through ``f``'s
    control flow. Anything else is detected: the tape is recorded again for the new
    arguments, or with ``on_change="raise"`` a ``TapeMismatchError`` says what changed.
    ``.value_and_grad(*args)`` gives the value too. What ``f`` reads from outside its
    arguments is frozen at compile time: pass data as arguments.

    Under ``vmap``, a compiled gradient records its tape once more on the batched
    arguments and replays it for later batches of the same shapes (per-example
    gradients: ``vmap(compile_grad(loss, params, x0), in_axes=(None, 0))``).

    One tape is kept for each of the last ``cache_size`` argument signatures (shapes,
    dtypes, non-float values) used, the least recently used dropped first;
    ``cache_info()`` counts hits and misses. A compiled gradient may be shared by
    threads: replays run concurrently, recordings one at a time.

    >>> import numpy as np
    >>> from tape import compile_grad
    >>> g = compile_grad(lambda x: np.sum(np.sin(x) ** 2), np.zeros(2))
    >>> g(np.array([0.0, np.pi / 4]))
    (array([0., 1.]),)
    """
    if on_change not in ("record", "raise"):
        raise ValueError(f'on_change must be "record" or "raise", got {on_change!r}')
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
        raise ValueError(f"cache_size must be a positive int, got {cache_size!r}")
    return CompiledGrad(f, example_args, argnums_spec(argnums), on_change, cache_size)


class CompiledGrad:
    """The function ``compile_grad`` returns: call it for the gradient; see
    ``value_and_grad``. ``recordings`` counts how often the tape was recorded.

    >>> import numpy as np
    >>> from tape import compile_grad
    >>> g = compile_grad(lambda x: np.sum(x ** 2), np.ones(2))
    >>> g(np.array([1.0, 2.0])), g.value_and_grad(np.array([1.0, 2.0]))
    ((array([2., 4.]),), (5.0, (array([2., 4.]),)))
    >>> g(np.ones(3))[0], g.recordings  # new shapes: recorded again
    (array([2., 2., 2.]), 2)
    >>> g(np.ones(2))[0], g.cache_info()  # the first shapes are still kept
    (array([2., 2.]), CacheInfo(hits=3, misses=2, maxsize=32, currsize=2))
    """

    def __init__(
        self, f: Callable, example_args: tuple, argnums: Any, on_change: str, cache_size: int = 32
    ) -> None:
        self.f = f
        self.argnums = argnums
        self.on_change = on_change
        self.recordings = 0
        self.cache_size = cache_size
        self._programs: OrderedDict[Any, _Program] = OrderedDict()  # least recently used first
        self._hits = self._misses = 0
        self._lock = threading.Lock()  # the cache and the counts
        self._recording = threading.Lock()  # one recording at a time
        self._misses += 1
        with self._recording:
            self._record(example_args, {})

    def cache_info(self) -> CacheInfo:
        """``CacheInfo(hits, misses, maxsize, currsize)``: calls that replayed a kept tape,
        calls that had to record one (the first included), and the cache's size."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.cache_size, len(self._programs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(args, kwargs)[1]

    def value_and_grad(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """``(f(*args), grad(f)(*args))`` from one replay."""
        value, grads = self._run(args, kwargs)
        return (float(value) if isinstance(value, np.float64) else value), grads

    @property
    def tape_length(self) -> int:
        """The number of records of the most recently recorded tape."""
        return self._last.length

    def _run(self, args: tuple, kwargs: dict) -> tuple[Any, Any]:
        if innermost_tape(args) is not None or innermost_tape(tuple(kwargs.values())):
            # under an outer derivative the replay must be recorded too: go eager
            return value_and_grad(self.f, self.argnums)(*args, **kwargs)
        key, leaves = _signature(args, kwargs)
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
                self._hits += 1
            else:
                self._misses += 1
        if program is None:
            reason = "the arguments' shapes, dtypes or types differ from those the tape was "
            return self._mismatch(
                args, kwargs, key, None, reason + "recorded with" + _describe(key, self)
            )
        return self._replay(program, args, kwargs, key, leaves)

    def _replay(self, program: _Program, args: tuple, kwargs: dict, key: Any, leaves: list):
        if program.holds_batch:  # recorded under another vmap call: its batch is not ours
            return value_and_grad(self.f, self.argnums)(*args, **kwargs)
        reason = program.check_constants(leaves)
        if reason:
            return self._mismatch(args, kwargs, key, program, reason)
        try:
            with located_warnings():  # NumPy's warnings at the caller's line, not the replay's
                return program.run(leaves)
        except _Changed as changed:
            return self._mismatch(args, kwargs, key, program, str(changed))
        except Exception:
            # a scalar replay meets log(0) or x / 0: NumPy's semantics (inf, nan, a
            # warning, or the error) come from the eager gradient
            return value_and_grad(self.f, self.argnums)(*args, **kwargs)

    def _mismatch(self, args: tuple, kwargs: dict, key: Any, stale: Any, reason: str):
        """Record the tape again for ``args``, whose ``key`` found no program or the
        ``stale`` one that no longer holds: unless another thread did it meanwhile."""
        if self.on_change == "raise":
            raise TapeMismatchError(
                f"compile_grad({getattr(self.f, '__name__', 'f')}): {reason}; the tape would "
                'have to be recorded again (compile_grad(..., on_change="record") does that)'
            )
        with self._recording:
            with self._lock:
                current = self._programs.get(key)
                if current is not None and current is not stale and stale is None:
                    self._misses -= 1  # recorded by another thread while this one waited:
                    self._hits += 1  # this call replays, as a hit does
            if current is not None and current is not stale:
                program = current
            else:
                program = self._record(args, kwargs)
                if program.key == key:
                    return program.first_result
        return self._replay(program, args, kwargs, key, _signature(args, kwargs)[1])

    def _record(self, args: tuple, kwargs: dict) -> _Program:
        try:
            program = _Program.record(self.f, args, kwargs, self.argnums, data_as_leaves=True)
        except (NodeConversionError, MissingRuleError):
            # f needs a non-differentiated argument as a plain value: keep it a constant
            program = _Program.record(self.f, args, kwargs, self.argnums, data_as_leaves=False)
        with self._lock:
            self.recordings += 1
            self._programs[program.key] = program
            self._programs.move_to_end(program.key)
            while len(self._programs) > self.cache_size:
                self._programs.popitem(last=False)
            self._last = program
        return program


def _describe(key: Any, compiled: CompiledGrad) -> str:
    recorded = compiled._last.key
    for i, (new, old) in enumerate(zip(key[0], recorded[0])):
        if new != old:
            return f" (argument {i} is {_show(new)}, recorded as {_show(old)})"
    return ""


def _show(key: tuple) -> str:
    leaves = _leaf_keys(key)
    parts = [
        f"{t.__name__} {np.dtype(d).name}{list(s)}" if s is not None else t.__name__
        for t, s, d in leaves
    ]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


# -- signatures: what must match for a replay ------------------------------------------------


def _is_float(x: Any) -> bool:
    if isinstance(x, (np.ndarray, Batched)):
        return x.dtype.kind in "fc"
    return isinstance(x, (float, complex, np.inexact))


def _signature(args: tuple, kwargs: dict) -> tuple[Any, list]:
    """A hashable key of the arguments' structure, types, shapes and dtypes, and the flat
    list of their leaves (in ``tree_flatten``'s order), then of the keyword arguments."""
    leaves: list = []
    key = tuple(_walk(a, leaves) for a in args)
    names = tuple(sorted(kwargs)) if kwargs else ()
    for k in names:
        leaves.append(kwargs[k])
    levels = [leaf.level for leaf in leaves if type(leaf) is Batched]
    if levels:  # each vmap call takes a new level: what must match is their order
        order = sorted(set(levels))
        return (key, names, tuple(order.index(level) for level in levels)), leaves
    return (key, names), leaves


def _walk(a: Any, leaves: list) -> tuple:
    t = type(a)
    if t is np.ndarray:
        leaves.append(a)
        return (t, a.shape, a.dtype)
    if t is Batched and type(a.data) is np.ndarray:
        # under vmap: a program recorded on batched values replays on any batch of the
        # same shapes (its statements run batched), never holding one as a constant
        leaves.append(a)
        return (t, a.data.shape, a.data.dtype)
    if t is list or t is tuple or (isinstance(a, tuple) and hasattr(a, "_fields")):
        return ("tree", t, tuple(_walk(b, leaves) for b in a))
    if isinstance(a, dict):
        return ("tree", t, tuple(a), tuple(_walk(b, leaves) for b in a.values()))
    leaves.append(a)
    if isinstance(a, np.generic):
        return (t, (), a.dtype)
    return (t, None, None)


def _leaf_keys(key: tuple) -> list:
    if key[0] == "tree":
        return [leaf for child in key[-1] for leaf in _leaf_keys(child)]
    return [key]


def _same_constant(new: Any, old: Any) -> bool:
    if new is old:
        return True
    if type(new) is Batched or type(old) is Batched:
        return False  # a batch of another vmap call (another level): not this call's
    if isinstance(old, np.ndarray):
        return isinstance(new, np.ndarray) and new.shape == old.shape and np.array_equal(new, old)
    try:
        return bool(type(new) is type(old) and new == old)
    except Exception:  # an object without a truthy ==: only itself matches
        return False


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


# -- the program -------------------------------------------------------------------------


class _GuardedTape(Tape):
    """The tape a program is recorded on: it keeps every plain result computed from its
    nodes (a comparison, ``argmax``, ``bool(node)``) as a guard the replay checks."""

    __slots__ = ("guards",)

    def __init__(self) -> None:
        super().__init__()
        self.guards: list[tuple] = []  # (position, f, args as slots, kwargs, result)

    def plain(self, f: Any, args: tuple, kwargs: Any, result: Any) -> None:
        if f in _SHAPE_ONLY:
            return
        spec, found = _spec(args, self)
        if found:
            self.guards.append((len(self.records), f, spec, kwargs, result))


class _Slot:
    __slots__ = ("pos",)

    def __init__(self, pos: int) -> None:
        self.pos = pos


class _Program:
    """One recorded tape as generated Python: ``entry(v, g)`` reads the inputs from the
    list ``v`` and leaves the output's value there and the inputs' adjoints in ``g``."""

    @classmethod
    def record(cls, f: Callable, args: tuple, kwargs: dict, argnums: Any, data_as_leaves: bool):
        """Record ``f`` on ``args`` once and generate its program, whose first run gives
        the first call's answer. ``data_as_leaves``: the float leaves of the arguments not
        differentiated are inputs too (else constants, checked on every call)."""
        fname = getattr(f, "__name__", "f")
        nums, single = normalise_argnums(argnums, len(args), fname)
        if not nums:
            raise ValueError(
                f"compile_grad needs at least one argument to differentiate {fname} with respect to"
            )
        key, flat = _signature(args, kwargs)
        tape = _GuardedTape()
        call_args = _data_leaves(tape, args, nums) if data_as_leaves else args
        out, recorded = trace(f, tape, call_args, kwargs, nums)
        try:
            out = current(out)  # a node written in place: its latest version
            on_tape = tape.owns(out)
            value = out.value if on_tape else out
            check_output(value, fname, "compile_grad")
            inputs, constants, grads = _number_leaves(tape, call_args, recorded, flat)
            program = cls(tape, out.pos if on_tape else None, value, inputs, constants, grads)
        finally:
            tape.records.clear()  # break node <-> tape cycles; the program keeps plain values
        program.key, program.nums, program.single = key, nums, single
        try:  # the first call's answer comes from the program itself
            program.first_result = program.run(flat)
        except Exception:
            program.first_result = value_and_grad(f, argnums)(*args, **kwargs)
        return program

    def __init__(self, tape: _GuardedTape, out_pos, value, inputs, constants, grads) -> None:
        """Liveness, then the forward source, the reverse source, and their chunks."""
        self.length = len(tape.records)
        self.inputs = inputs  # (index in the flat leaves, tape position)
        self.constants = constants  # (index in the flat leaves, recorded value)
        self.out_pos = out_pos
        self.constant_value = value
        self.grads = grads  # per differentiated argument: its leaves' indices, treedef, slots
        leaf_values = {pos: tape.records[pos].value for _, pos in inputs}
        differentiated = {
            slot.pos for _, _, slots in grads.values() for slot in slots if slot is not None
        }
        argpos, active, live = _liveness(tape, differentiated, out_pos)
        source = _Source(tape)
        forward = source.forward(live, argpos)
        backward = source.backward(active, differentiated, out_pos)
        self.entry = source.functions(forward, backward, out_pos)
        self.holds_batch = source.holds_batch
        self.scalar_inputs = [
            pos in source.scalar_args and type(leaf_values[pos]) in _SCALAR_TYPES
            for _, pos in inputs
        ]

    def check_constants(self, leaves: list) -> str:
        for index, recorded in self.constants:
            if not _same_constant(leaves[index], recorded):
                return (
                    f"a non-float argument (leaf {index}) has another value than when the "
                    "tape was recorded"
                )
        return ""

    def run(self, leaves: list) -> tuple[Any, Any]:
        v = [None] * self.length
        for (index, pos), to_float in zip(self.inputs, self.scalar_inputs):
            x = leaves[index]
            v[pos] = float(x) if to_float else x
        g = [None] * self.length
        self.entry(v, g)
        value = self.constant_value if self.out_pos is None else v[self.out_pos]
        inputs = {i: ([leaves[k] for k in at], tdef, s) for i, (at, tdef, s) in self.grads.items()}
        grads = input_gradients(inputs, self.nums, g)
        return value, (grads[0] if self.single else Gradients(grads))


def _data_leaves(tape: Tape, args: tuple, nums: tuple) -> list:
    """``args`` with the float leaves of the arguments not in ``nums`` recorded on
    ``tape``: inputs of the program, not constants checked on every call."""
    args = list(args)
    for i, a in enumerate(args):
        if i not in nums:
            leaves, treedef = tree_flatten(a)
            leaves = [Leaf(tape, x) if _is_float(x) else x for x in leaves]
            args[i] = tree_unflatten(treedef, leaves)
    return args


def _number_leaves(tape, call_args, recorded, flat):
    """Number the arguments' leaves as ``_signature`` does (keyword arguments last) and
    sort them: the program's inputs, as ``(index, tape position)`` (the leaves that
    ``record_inputs`` recorded, and those ``_data_leaves`` recorded in ``call_args``), its
    constants, as ``(index, value)``, and per differentiated argument where its gradient
    is read."""
    inputs, constants, grads = [], [], {}
    index = 0
    for i, a in enumerate(call_args):
        if i in recorded:
            _, treedef, nodes = recorded[i]
            at = range(index, index + len(nodes))
            inputs += [(k, node.pos) for k, node in zip(at, nodes) if node is not None]
            slots = [None if node is None else _Slot(node.pos) for node in nodes]  # None: None
            grads[i] = (at, treedef, slots)
            index += len(nodes)
            continue
        for x in tree_flatten(a)[0]:
            if tape.owns(x):
                inputs.append((index, x.pos))
            else:
                constants.append((index, x))
            index += 1
    constants += [(k, flat[k]) for k in range(index, len(flat))]  # the keyword arguments
    return inputs, constants, grads


def _liveness(tape: _GuardedTape, differentiated: set, out_pos: int | None):
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


class _Source:
    """The generated source of one tape, chunk by chunk.

    Values and adjoints are locals (``x12``, ``g12``) of generated functions of a few
    thousand records each: chunk k runs its forward part, calls chunk k + 1, then runs its
    reverse part, so its locals serve both. Only what crosses chunks goes through the
    lists ``v`` and ``g``. Constants (functions, rules, arrays) are names in ``ns``.
    """

    def __init__(self, tape: _GuardedTape) -> None:
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
            "_Changed": _Changed,
            "_differs": _differs,
            "_broadcast_to": broadcast_to,  # NumPy's view, made faster
            **_MATH,
        }
        self.names = 0
        self.holds_batch = False  # a batched constant: of one vmap call, not replayable
        # the batches of one vmap (under vmap): the calls Batched would answer by its
        # fast paths are written on their data, the level read from an input (``lvl``)
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
            return f"if {call} != {self._name(expected, 'e')}: raise _Changed({message})"
        return f"if _differs({call}, {self._name(expected, 'e')}): raise _Changed({message})"

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
                adj[out_pos] = 1.0
                lines.append(f"g{out_pos} = 1.0")
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
            if self._active(a, active):
                update = in_place_rule(rules, i, vals, ybar, a.value)
                if update is not None:
                    made = update_in_place(self.rtape, update, a, y, ybar, vals, kwargs)
                    self._update(a.pos, self._name(update, "u"), made, gp, head, out)
                    continue
                rule = rules.rule(i, vals)
                xbar = rule(y, ybar, *vals, **kwargs)
                expr = self._adjoint(node, i, rule, p, ybar, kwargs, head)
                self._contribution(node, i, a, expr, xbar, out)
            elif (type(a) is list or type(a) is tuple) and any(self._active(b, active) for b in a):
                rule = rules.rule(i, vals)
                xbars = rule(y, ybar, *vals, **kwargs)
                out.append(f"cs = {self._name(rule, 'r')}({head})")
                for j, (b, xbar) in enumerate(zip(a, xbars)):
                    if self._active(b, active):
                        self._contribution(node, i, b, f"cs[{j}]", xbar, out)

    def _active(self, a: Any, active: list) -> bool:
        return self.tape.owns(a) and active[a.pos]

    def _adjoint(self, node, i, rule, p, ybar, kwargs, head) -> str:
        """Argument ``i``'s contribution: the registered rule's formula written out where
        it is known (the scalar forms on arrays, a sum, a product of two matrices), else
        a call of ``rule``."""
        f, vals, gp = node.f, node.vals, self._read(p)
        if rule is _registered(f, i):
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
        if xbar is None:
            out.append(f"if {expr} is not None: raise _Changed({_RULE_CHANGED!r})")
            return
        done = accumulate(self.rtape, a, xbar, node.f, i)  # raises if it cannot sum back
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
        if isinstance(a, Node):
            if a.tape is self.tape:
                self.uses.add(a.pos)
                return f"x{a.pos}"
            return self._name(a)  # an outer tape's node: a constant here
        if type(a) is list or type(a) is tuple:
            inner = ", ".join(self._expr(b) for b in a)
            if type(a) is tuple:
                return f"({inner},)" if len(a) == 1 else f"({inner})"
            return f"[{inner}]"
        return self._name(a)

    def _args(self, node: Branch) -> str:
        parts = [self._expr(a) for a in node.args]
        if node.kwargs:
            parts.append("**" + self._name(node.kwargs, "kw"))
        return ", ".join(parts)

    def _spec_expr(self, a: Any) -> str:
        if isinstance(a, _Slot):
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


def _is_scalar_record(node: Branch, tape: Tape) -> bool:
    if node.f not in _SCALAR or node.kwargs or type(node.value) not in _SCALAR_TYPES:
        return False
    for a in node.args:
        value = a.value if tape.owns(a) else a
        if type(value) not in _SCALAR_TYPES and type(value) is not int:
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


def _spec(args: Any, tape: Tape) -> tuple[Any, bool]:
    """``args`` of a plain call, with the nodes of ``tape`` as slots (reached through the
    nodes of inner tapes, whose values they are) and everything else as plain values."""
    found = False
    out = []
    for a in args:
        while isinstance(a, Node) and a.tape is not tape:
            a = a.value
        if isinstance(a, Node):
            a, found = _Slot(a.pos), True
        elif type(a) is list or type(a) is tuple:
            inner, inner_found = _spec(a, tape)
            a, found = type(a)(inner), found or inner_found
        out.append(a)
    return tuple(out), found


def _spec_positions(spec: Any) -> list[int]:
    out = []
    for a in spec:
        if isinstance(a, _Slot):
            out.append(a.pos)
        elif type(a) is list or type(a) is tuple:
            out += _spec_positions(a)
    return out
