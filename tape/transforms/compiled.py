"""Compiled tapes: record a function's tape once, replay it as straight-line Python.

A tape is a straight-line program. ``compile_grad(f, *example_args)`` records it once and
generates Python source that replays its forward and reverse passes: each record is one
statement over local variables, with its function, its rules, its unbroadcasting and its
accumulation decided at compile time from the recorded values and shapes, so a replay
does no dictionary look-up, type test or shape decision. ReverseDiff.jl's compiled
tapes, with no compile step beyond Python's own.

How a tape becomes a program (``_Program``): ``f`` is traced once on a
``_GuardedTape`` (``tape.transforms.grad.trace``), and ``tape.transforms.replay`` writes
its records down as the statements of a few Python functions.

What is frozen at compile time, and how a replay knows it still holds:

- the shapes, dtypes and types of the arguments, and the values of the arguments that
  are not floating-point (integers, index arrays, strings): checked on every call;
- every plain result computed from nodes (a comparison, ``argmax``, ``bool(node)``):
  the engine reports each one while the tape is recorded, and the replay recomputes it
  and checks that it comes out the same, so a different branch is never replayed;
- what ``f`` reads from outside its arguments: the globals and closure cells its code
  names, its helpers', the attributes and entries of the objects found there
  (``tape.transforms.outside``). What each holds (an array's fingerprint, a number's
  value) is compared on every call, so a global rebound or an array written in place
  (and so anything ``f`` computes from them) is seen.

A check that fails re-records the tape for the new arguments (or, with
``on_change="raise"``, raises ``TapeMismatchError``): a replay never returns the
gradient of another program. What no check could see is refused when the tape is
recorded, with a ValueError that says how to pass it in: random draws from a generator
``f`` can reach (a replay would repeat them, and leave the generator where it stands),
and state that ``f`` changes while it runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Sequence

import numpy as np

from ..core.errors import MissingRuleError, NodeConversionError
from ..core.gradients import Gradients
from ..core.recording import current, innermost_tape
from ..core.records import Leaf, Tape
from ..core.trees import tree_flatten, tree_unflatten
from ..runtime import run_pass
from .batching import Batched
from .grad import (
    argnums_spec,
    check_output,
    input_gradients,
    normalise_argnums,
    trace,
    value_and_grad,
)
from .outside import Reads, state_of
from .replay import SCALAR_TYPES, Changed, Slot, Source, liveness, slotted

__all__ = ["compile_grad", "CompiledGrad", "TapeMismatchError"]

CacheInfo = namedtuple("CacheInfo", "hits misses maxsize currsize")



class TapeMismatchError(ValueError):
    """The arguments of a compiled gradient no longer match the recorded tape.

    >>> import numpy as np
    >>> from tape import compile_grad
    >>> g = compile_grad(lambda x: np.sum(x ** 2), np.ones(2), on_change="raise")
    >>> g(np.ones(3))
    Traceback (most recent call last):
        ...
    tape.transforms.compiled.TapeMismatchError: compile_grad(<lambda>): the arguments' shapes, ...
    """


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
    control flow, and while what ``f`` reads from outside its arguments (globals, closure
    cells, attributes, their arrays' contents) holds what it held. Anything else is
    detected: the tape is recorded again, or with ``on_change="raise"`` a
    ``TapeMismatchError`` says what changed. ``.value_and_grad(*args)`` gives the value
    too. A function that draws random numbers (from ``np.random``, ``random`` or a
    generator it can reach) or changes state it reads is refused with a ValueError:
    pass the draws, or the state, as arguments.

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
            return run_pass(False, program.run, leaves)  # warnings at the caller's line
        except Changed as changed:
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
    """Whether argument ``new`` holds what ``old``, the ``state_of`` a constant argument
    when the tape was recorded, says: the same object written in place since does not."""
    if type(new) is Batched or type(old) is _Batch:
        return False  # a batch of another vmap call (another level): not this call's
    return state_of(new, attributes=True) == old


class _Batch:
    """The state of a batched constant: never the same as a later call's."""


def _check_recording(reads: Reads, streams: list, before: list, fname: str) -> None:
    """Refuse to compile ``f`` (named ``fname``) where a replay could not be its gradient:
    it drew random numbers while it was recorded (a replay would repeat the draws and
    leave the generator where it stands), or it changed what it reads from outside its
    arguments (a replay would not)."""
    moved = reads.moved(streams)
    if moved:
        raise ValueError(
            f"compile_grad({fname}): {fname} draws random numbers from {moved}: a replay "
            "would repeat the draws of the recording and leave the generator where it stands. "
            "Draw them outside and pass them in (mask = rng.random(n) < p; g(w, mask)), or "
            "use grad, which runs the function on every call"
        )
    changed = reads.changed(before)
    if changed:
        raise ValueError(
            f"compile_grad({fname}): {fname} changes {changed} while it runs, and reads it: a "
            "replay would neither change it nor see it change. Pass that state as an "
            "argument, or use grad, which runs the function on every call"
        )



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
        spec, found = slotted(args, self)
        if found:
            self.guards.append((len(self.records), f, spec, kwargs, result))



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
        reads = Reads.of(f, (args, kwargs))
        streams, before = reads.stream_states(), reads.snapshot()
        out, recorded = trace(f, tape, call_args, kwargs, nums)
        try:
            _check_recording(reads, streams, before, fname)
            out = current(out)  # a node written in place: its latest version
            on_tape = tape.owns(out)
            value = out.value if on_tape else out
            check_output(value, fname, "compile_grad")
            inputs, constants, grads = _number_leaves(tape, call_args, recorded, flat)
            program = cls(tape, out.pos if on_tape else None, value, inputs, constants, grads)
        finally:
            tape.release()  # break node <-> tape cycles; the program keeps plain values
        program.key, program.nums, program.single = key, nums, single
        program.reads, program.read_states = reads, before
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
        argpos, active, live = liveness(tape, differentiated, out_pos)
        source = Source(tape)
        forward = source.forward(live, argpos)
        backward = source.backward(active, differentiated, out_pos)
        self.entry = source.functions(forward, backward, out_pos)
        self.holds_batch = source.holds_batch
        self.scalar_inputs = [
            pos in source.scalar_args and type(leaf_values[pos]) in SCALAR_TYPES
            for _, pos in inputs
        ]

    def check_constants(self, leaves: list) -> str:
        """Why the tape no longer holds for arguments ``leaves``: a constant argument or
        what ``f`` reads from outside them holds something else; "" if it holds."""
        for index, recorded in self.constants:
            if not _same_constant(leaves[index], recorded):
                return (
                    f"a non-float argument (leaf {index}) has another value than when the "
                    "tape was recorded"
                )
        changed = self.reads.changed(self.read_states)
        if changed:
            return f"{changed}, which f reads, holds another value than when the tape was recorded"
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


def _constant_state(x: Any) -> Any:
    return _Batch() if type(x) is Batched else state_of(x, attributes=True)


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
            slots = [None if node is None else Slot(node.pos) for node in nodes]  # None: None
            grads[i] = (at, treedef, slots)
            index += len(nodes)
            continue
        for x in tree_flatten(a)[0]:
            if tape.owns(x):
                inputs.append((index, x.pos))
            else:
                constants.append((index, _constant_state(x)))
            index += 1
    constants += [(k, _constant_state(flat[k])) for k in range(index, len(flat))]  # keywords
    return inputs, constants, grads

