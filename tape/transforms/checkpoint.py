"""``checkpoint`` and ``stop_gradient``: what a function's gradient keeps of its inside.

``checkpoint(f)`` records ``f`` as one Branch and runs it again when its derivatives are
needed (the rule is ``sensitivities.checkpoint``; ``_Rerun`` is what it asks of the
engine); ``stop_gradient`` makes a value a constant at every level of nesting.

Every run of a checkpointed function, the forward one included, records it on a tape of
its own (``_Block``), so that it means what it means without ``checkpoint``: a write into
an argument is the tape's write-through, committed afterwards to the caller's node, and
each run knows what it wrote. The Branch holds one array (``_packed``): the outputs the
run computed and the new values of the arguments it wrote, taken apart on the caller's
tape (``_Block.results``), as ``np.linalg.eigh`` is (``sensitivities.linalg``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sensitivities import checkpointed
from sensitivities.registry import first_argument, is_node, value_of

from ..core.duck_arrays import is_duck_array
from ..core.errors import MutationError
from ..core.mutation import fingerprint
from ..core.node import Node
from ..core.recording import current, innermost_tape, plain
from ..core.records import Leaf, Tape
from ..core.trees import tree_flatten, tree_map, tree_unflatten
from ..core.versions import Alias, memory_of
from ..runtime import run_pass
from .batched import BatchedBase
from .forward import ForwardTape
from .grad import pull_back

__all__ = ["checkpoint", "stop_gradient"]


def stop_gradient(x: Any) -> Any:
    """``x``'s value as a constant: no gradient flows through it, at any level of nesting,
    in either mode. Works on arrays, floats and containers of them.

    An array comes back as a copy of its own, as ``np.copy`` would give it: a write into
    the result never reaches the caller's array, nor the node's value.

    >>> from tape import grad, stop_gradient
    >>> grad(lambda x: x * stop_gradient(x))(3.0)  # d/dx [x * c] with c = x = 3
    (3.0,)
    """
    return tree_map(_stopped, x)


def _stopped(x: Any) -> Any:
    # a node's value is a plain result computed from the tape (plain tells the tape, and
    # a compiled replay then computes it again from its new inputs rather than keep it)
    return plain(_constant, (x,)) if isinstance(x, Node) else _constant(x)


def _constant(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.copy()
    return np.copy(x) if is_duck_array(x) else x


# -- checkpointing -------------------------------------------------------------------------


def checkpoint(f: Callable) -> Callable:
    """``f`` recorded as one Branch: its inner records are dropped after the forward pass
    and recomputed from its inputs in the reverse pass (Griewank's trade of time for
    memory). Values, gradients and writes are those of ``f`` without it.

    ``f`` takes arrays, floats, or containers of them (by position or by keyword), and
    returns an array, a float, or a container of them. Pass everything it differentiates
    as an argument: a node it closes over would be recorded inside it. Splitting a chain
    of ``n`` steps into about ``sqrt(n)`` checkpointed segments keeps peak memory near
    ``sqrt(n)`` steps' worth (``benchmarks/checkpoint_memory.py``).

    NumPy's meaning is kept: a write into an argument (``x *= 2``, ``x[0] = 0``,
    ``np.add(x, 1, out=x)``) is seen by the caller as without ``checkpoint``, and once;
    an output that is an argument, or a view of one, is that argument or that view. The
    recomputation starts from the arguments as the forward pass found them and draws the
    same random numbers (NumPy's global stream, and generators passed as arguments). It
    raises where it cannot be the same function: a ``RuntimeError`` if it gives another
    value (a global changed in between), a ``MutationError`` if an array passed as a
    constant was written since, a ``TypeError`` for a write into an argument that another
    argument views. Writes into arrays that ``f`` closes over happen again. An array
    passed as a constant is copied while the forward pass runs, to see whether it writes.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, grad, checkpoint
    >>> block = checkpoint(lambda x, w: np.tanh(x * w) + x)
    >>> t = Tape()
    >>> y = block(Leaf(t, np.ones(3)), 0.5)
    >>> len(t)  # the Leaf and one Branch: tanh, multiply and add are not kept
    2
    >>> grad(lambda x: np.sum(block(x, 0.5)))(np.zeros(3))
    (array([1.5, 1.5, 1.5]),)
    """

    @functools.wraps(f)
    def checkpointed_f(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = tree_flatten((list(args), kwargs))
        if innermost_tape(leaves) is None:
            return f(*args, **kwargs)  # nothing is recorded, so there is nothing to recompute
        block = _Block(f, treedef, leaves)
        handed: list = []
        for i, x in enumerate(leaves):  # an input passed twice is one input
            handed.append(_handed(x) if block.first[i] == i else handed[block.first[i]])
        handed_tuple = tuple(handed)
        packed = checkpointed(_Group(block, 0), handed_tuple, _Rerun)
        return block.results(packed, leaves, handed_tuple)

    return checkpointed_f


class _Rerun:
    """What the checkpoint rule (``sensitivities.checkpoint``) needs of the engine: the
    block run again on a fresh tape, for its adjoints or its tangent. The records live
    only while one Branch's derivatives are computed."""

    @staticmethod
    def pullback(fn: _Group, handed: tuple, y: Any, ybar: Any) -> list:
        block = fn.block
        tape = Tape()
        try:
            xs, packed = block.rerun(tape, handed, y, fn.group)
            adjoints = run_pass(False, pull_back, tape, [packed], [ybar])
            return [
                adjoints[x.pos]
                if adjoints is not None and tape.owns(x) and block.first[i] == i
                else None
                for i, x in enumerate(xs)
            ]
        finally:
            tape.release()

    @staticmethod
    def pushforward(fn: _Group, handed: tuple, y: Any, xdots: list) -> Any:
        k = next(np.shape(t)[0] for t in xdots if t is not None)
        tape = ForwardTape(k)
        try:
            _, packed = fn.block.rerun(tape, handed, y, fn.group, xdots)
            return tape.tangent(packed) if tape.owns(packed) else None
        finally:
            tape.release()


def _differentiable(x: Any) -> bool:
    x = value_of(x)
    return isinstance(x, (float, complex, np.inexact)) or (
        (isinstance(x, np.ndarray) or is_duck_array(x)) and x.dtype.kind in "fc"
    )


def _memory(x: Any) -> Any:
    """The ndarray holding plain value ``x``'s elements; None where ``x`` is never written
    in place (a float, a Dask array)."""
    return x if isinstance(x, np.ndarray) else memory_of(x)


def _handed(x: Any) -> Any:
    """Argument leaf ``x`` as the Branch records it: a node that carries a gradient as it
    is, an array the Branch keeps as a constant in a ``_Held``, anything else as it is."""
    if isinstance(x, Node):
        if _differentiable(x):
            return x
        x = value_of(x)  # an integer node carries no gradient, at any level
        return x if _memory(x) is None else _Held(x, written_through=True)
    return x if _memory(x) is None else _Held(x)


class _Held:
    """An array a checkpointed function is handed as a constant: a plain array, or the
    value of a node that carries no gradient (``written_through``: a write is committed to
    the node, as the tape writes a node). The Branch records this holder rather than the
    array, so that a write by the forward run is no change behind the tape's back; it
    keeps what the recomputation needs, the array as the forward run found it."""

    __slots__ = ("array", "through", "kept", "print_", "written")

    def __init__(self, array: Any, written_through: bool = False) -> None:
        self.array, self.through = array, written_through
        self.kept = self.print_ = None
        self.written = False

    def entered(self) -> Any:
        """What the first forward run is handed: a node's value in a copy; a plain array
        itself, written as NumPy writes it, once a copy of it is kept (where it can be
        written at all)."""
        if self.through:
            return np.copy(self.array)
        if _memory(self.array).flags.writeable:
            self.kept = np.copy(self.array)
        return self.array

    def settle(self, handed: Any) -> None:
        """After the first forward run, which was handed ``handed``: what it wrote."""
        before = self.array if self.through else self.kept
        self.written = before is not None and not _same_value(before, handed)
        if self.through:
            self.kept, self.array = self.array, handed  # the value to commit, if written
        elif not self.written:
            self.kept = self.array
        if self.through or not self.written:  # the caller's array, not a copy of ours
            self.print_ = fingerprint(_memory(self.kept))

    def again(self, name: str) -> Any:
        """What a recomputation (or a compiled replay) is handed: the array as the first
        forward run found it; in a copy of its own where that run wrote it, else read-only
        (a write now would be a second one)."""
        if self.print_ is not None and fingerprint(_memory(self.kept)) != self.print_:
            raise MutationError(
                f"checkpoint({name}): an array it was handed as a constant was changed in "
                "place after the forward pass, and the recomputation needs it as it was. "
                "Do not write into it before the gradient is taken: make a copy first "
                "(a = a.copy())"
            )
        if self.written:
            return np.copy(self.kept)
        if type(self.kept) is np.ndarray and self.kept.flags.writeable:
            self.kept = self.kept.view()
            self.kept.flags.writeable = False
        elif isinstance(self.kept, BatchedBase):
            self.kept = self.kept.read_only_view()
        return self.kept


class _Block:
    """One call of a checkpointed function: ``f`` on the flat leaves of its arguments
    (``run``), the random states its first run started from, and what that run gave
    (``layout``: the output's structure, an entry per output leaf, then the inputs it
    wrote), which every later run must give again.

    Each run records ``f`` on a tape of its own whose Leaves are the inputs that carry a
    gradient: a write into one is the tape's write-through (neither the caller's array
    nor an array the tape computed, read-only, is written), which tells the run what it
    wrote. An output leaf that is an input, or a view of one, comes back as that input
    itself or the same view of it; one computed from constants only, as it is; the others
    and the new values of the inputs written are packed into the Branch's value, one
    Branch per group of parts that NumPy can put in one array without broadcasting one
    over another's batch (``_group_of``): almost always one."""

    __slots__ = (
        "f", "treedef", "name", "first", "generators", "states", "layout", "out_def",
        "parts", "views", "plain", "held", "pending",
    )  # fmt: skip

    def __init__(self, f: Callable, treedef: Any, leaves: list) -> None:
        self.f, self.treedef = f, treedef
        self.name = getattr(f, "__name__", "f")
        seen: dict = {}
        self.first = [seen.setdefault(id(x), i) for i, x in enumerate(leaves)]
        self.generators = [x for x in leaves if isinstance(x, _STREAMS)]
        self.states = self.layout = self.out_def = None
        self.parts: list = []  # per group, (shape, dtype, scalar) of each packed part
        self.views: dict = {}  # output leaf -> (input, the calls that made it a view)
        self.plain: dict = {}  # output leaf -> a value computed from constants only
        self.held: list = []  # (position, holder) of each constant array
        self.pending: dict = {}  # group -> the first run's packed value, until recorded

    def run(self, xs: list, replayed: bool) -> Any:
        """``f`` on ``xs``; ``replayed``: on the random states of the first run."""
        args, kwargs = tree_unflatten(self.treedef, xs)
        if not replayed:
            return run_pass(True, self.f, *args, **kwargs)
        now = _stream_states(self.generators)
        _set_stream_states(self.generators, self.states)
        try:
            return run_pass(True, self.f, *args, **kwargs)
        finally:
            _set_stream_states(self.generators, now)

    def inputs(self, tape: Tape, handed: tuple, held: Callable) -> list:
        """A run's inputs: a Leaf of ``tape`` for each that carries a gradient, ``held``
        of each ``_Held``, anything else as it is; an input passed twice, once."""
        xs: list = []
        for i, h in enumerate(handed):
            if self.first[i] != i:
                xs.append(xs[self.first[i]])
            elif isinstance(h, _Held):
                xs.append(held(h))
            else:
                xs.append(Leaf(tape, h) if _differentiable(h) else h)
        return xs

    def forward(self, group: int, handed: tuple) -> Any:
        """The value of ``group``'s Branch. The first run gives every group's; a later
        call (a compiled replay) runs ``f`` again from the inputs as the first run found
        them, and must give an output of the same layout."""
        if self.layout is None:
            self.pending = dict(enumerate(self._forward(handed)))
        if group in self.pending:
            return self.pending.pop(group)
        return self._forward(handed)[group]

    def _forward(self, handed: tuple) -> list:
        first = self.layout is None
        if first:
            self.states = _stream_states(self.generators)
        tape = Tape()
        try:
            xs = self.inputs(tape, handed, _Held.entered if first else self._again)
            layout, groups = self._split(tape, xs, self.run(xs, not first), first)
            if first:
                self.layout = layout
                for i, h in enumerate(handed):
                    if isinstance(h, _Held) and self.first[i] == i:
                        h.settle(xs[i])
                        self.held.append((i, h))
                self._check_no_write_through_shared_memory(handed)
            elif layout != self.layout:
                raise RuntimeError(self._another("gave an output of another layout"))
            return [_packed([part.value for part in parts]) for parts in groups]
        finally:
            tape.release()

    def _check_no_write_through_shared_memory(self, handed: tuple) -> None:
        """Refuse a write into an argument whose memory another argument shares, which
        each run cannot follow: its Leaves are apart. (A node written beside a constant
        view of its array is fine: the tape writes a node's value anew, not in place.)"""
        written = {e[1] for e in self.layout[1:] if e[0] == "wrote"}
        written |= {i for i, h in self.held if h.written}
        for i in written:
            for j, other in enumerate(handed):
                if j == i or self.first[j] != j:
                    continue
                if isinstance(other, _Held) and not isinstance(handed[i], _Held):
                    continue
                if _share_memory(_before(handed[i]), _before(other)):
                    raise TypeError(
                        f"checkpoint({self.name}) writes into an argument whose memory another "
                        "of its arguments shares (a view of it, or the same array), which it "
                        "cannot follow: each is an input of its own there. Pass one of them "
                        "and take the other inside, or pass a copy"
                    )

    def _again(self, h: _Held) -> Any:
        return h.again(self.name)

    def rerun(self, tape: Tape, handed: tuple, y: Any, group: int, tangents: Any = None) -> tuple:
        """A recomputation on ``tape`` (seeded with ``tangents``, a forward tape), which
        must give ``y``, the value of ``group``'s Branch: its inputs and packed value."""
        xs = self.inputs(tape, handed, self._again)
        for i, x in enumerate(xs):
            if tangents is not None and tangents[i] is not None and self.first[i] == i:
                if tape.owns(x):
                    tape.seed(x, tangents[i])
        layout, groups = self._split(tape, xs, self.run(xs, True), False)
        if layout != self.layout or not _recomputed(y, packed := _packed(groups[group])):
            raise RuntimeError(self._another("gave another value than in the forward pass"))
        return xs, packed

    def _another(self, what: str) -> str:
        return (
            f"checkpoint({self.name}): run again for its derivative, the function {what}, "
            "so the derivative would be another function's. Randomness from NumPy's global "
            "stream and from generators passed as arguments is replayed; pass any other "
            "generator (one the function closes over) as an argument, and keep the "
            "function free of other state (globals, time, counters, data it changes)"
        )

    def _split(self, tape: Tape, xs: list, out: Any, first: bool) -> tuple[tuple, list]:
        """The layout of one run's output, and the nodes of ``tape`` it packs, by group:
        the output leaves the run computed, then the inputs it wrote. The first run keeps
        what ``results`` hands back besides."""
        outs, out_def = tree_flatten(out)
        inputs: dict = {}  # a Leaf's id -> the first position it stands at
        for i, x in enumerate(xs):
            if tape.owns(x):
                inputs.setdefault(id(x), i)
        layout: list = [out_def]
        keys: list = []
        groups: list = []

        def pack(node: Any) -> tuple:
            key = _group_of(node.value)
            if key not in keys:
                keys.append(key)
                groups.append([])
            groups[keys.index(key)].append(current(node))
            return (keys.index(key), *_part_of(node.value))

        for k, o in enumerate(outs):
            if not tape.owns(o):
                layout.append(("constant",))
                if first:
                    self.plain[k] = o
            elif id(o) in inputs:
                layout.append(("input", inputs[id(o)]))
            elif (view := _view_of_input(o, inputs, self.name)) is not None:
                layout.append(("view", view[0], tuple(f for f, _, _ in view[1])))
                if first:
                    self.views[k] = view
            else:
                layout.append(("part", *pack(o)))
        for i in sorted(set(inputs.values())):
            if current(xs[i]) is not xs[i]:
                layout.append(("wrote", i, *pack(xs[i])))
        groups = groups or [[]]  # a first Branch all the same, holding nothing
        if first:
            self.out_def = out_def
            self.parts = [[_part_of(part.value) for part in parts] for parts in groups]
        return tuple(layout), groups

    def results(self, packed: Any, leaves: list, handed: tuple) -> Any:
        """The output on the caller's tape, from ``packed``, the first group's Branch, and
        the other groups' Branches recorded here; the first run's writes committed to the
        caller's nodes before any output is read."""
        packs = [packed] + [
            checkpointed(_Group(self, g), handed, _Rerun) for g in range(1, len(self.parts))
        ]
        for p in packs:
            if isinstance(p, Node) and p.tape.owns(p.value):
                raise TypeError(
                    f"checkpoint({self.name}) uses a node of the same tape that it was not "
                    "given as an argument (a closure or a global): pass it as an argument, "
                    "so that the recomputation can differentiate it"
                )
        pieces = [iter(_unpacked(p, parts)) for p, parts in zip(packs, self.parts)]
        entries = [e for e in self.layout[1:] if e[0] != "wrote"]
        outputs = [next(pieces[e[1]]) if e[0] == "part" else None for e in entries]
        for entry in self.layout[1 + len(entries) :]:  # the inputs written, in place
            leaves[entry[1]][...] = next(pieces[entry[2]])
        for i, h in self.held:
            if h.through and h.written:
                leaves[i][...] = h.array
        for k, entry in enumerate(entries):
            if entry[0] == "constant":
                outputs[k] = self.plain.pop(k)
            elif entry[0] == "input":
                outputs[k] = leaves[entry[1]]
            elif entry[0] == "view":
                outputs[k] = _view_again(leaves, *self.views.pop(k))
        return tree_unflatten(self.out_def, outputs)


class _Group:
    """The function the primitive records for one group of a block's packed parts."""

    __slots__ = ("block", "group")

    def __init__(self, block: _Block, group: int) -> None:
        self.block, self.group = block, group

    def __call__(self, *handed: Any) -> Any:
        return self.block.forward(self.group, handed)

    @staticmethod
    def __record_call__(primitive: Callable, f: Callable, args: tuple, kwargs: dict) -> Any:
        """The primitive's dispatch, first argument first (``sensitivities.registry.
        primitive``): a node among the arguments records the call, as it would; batches
        (``vmap``'s) are handed to the block as they are, whose NumPy code runs batched,
        rather than run example by example as a primitive without a batching rule is."""
        node = first_argument(args, is_node)
        if node is not None:
            return type(node).__record_call__(primitive, f, args, kwargs)
        return f(*args, **kwargs)


def _before(handed: Any) -> Any:
    """An argument's value as the first run found it."""
    if isinstance(handed, _Held):
        return handed.kept if handed.through else handed.array
    return handed


def _share_memory(a: Any, b: Any) -> bool:
    a, b = _memory(value_of(a)), _memory(value_of(b))
    return a is not None and b is not None and np.may_share_memory(a, b)


def _group_of(value: Any) -> tuple:
    """What parts packed together must share: the ``vmap`` levels a value is batched at
    (an unbatched part packed with batched ones would come back batched) and the
    library of a Dask or CuPy array (a NumPy part would come back one of those)."""
    value = value_of(value)
    levels = []
    while isinstance(value, BatchedBase):
        levels.append(value.level)
        value = value.data
    return tuple(levels), type(value) if is_duck_array(value) else None


def _view_of_input(o: Any, inputs: dict, name: str) -> tuple | None:
    """``(i, calls)`` where node ``o`` is a view of input ``i`` of its run, made from it by
    ``calls``, ``(f, args, kwargs)`` each, ``_PARENT`` in args standing for the node it was
    made from; None where it is no view of an input."""
    alias = o.alias
    if type(alias) is not Alias or alias.root is None or id(alias.root) not in inputs:
        return None
    calls = []
    node = o
    while node is not alias.root:
        parent, f, args, kwargs = node.alias.made
        if any(a is not parent and innermost_tape((a,)) is o.tape for a in args):
            raise TypeError(
                f"checkpoint({name}) returns a view of an argument made by "
                f"{getattr(f, '__name__', f)} from other values of its own too, which it "
                "cannot make again from the caller's argument: return a copy (np.copy)"
            )
        calls.append((f, tuple(_PARENT if a is parent else a for a in args), kwargs))
        node = parent
    return inputs[id(alias.root)], calls[::-1]


def _view_again(leaves: list, i: int, calls: list) -> Any:
    """The view of caller's argument ``leaves[i]`` that ``calls`` made of it in the run."""
    view = leaves[i]
    for f, args, kwargs in calls:
        view = f(*(view if a is _PARENT else a for a in args), **kwargs)
    return view


_PARENT = object()


def _part_of(value: Any) -> tuple:
    """``(shape, dtype, scalar)`` of a value to pack; ``scalar`` for a NumPy or Python
    number (a 0-d array stays one)."""
    value = value_of(value)
    dtype = getattr(value, "dtype", None)
    shape = np.shape(value)
    scalar = shape == () and not isinstance(value, np.ndarray)
    return shape, np.dtype(dtype) if dtype is not None else np.result_type(value), scalar


def _packed(parts: list) -> Any:
    """The Branch's one value: the one part as it is, else the elements of all in one
    flat array, in the dtype NumPy promotes them to (``_unpacked`` casts each back)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(0)
    return np.concatenate([np.ravel(p) for p in parts])


def _unpacked(packed: Any, parts: list) -> list:
    """The parts of node ``packed``, recorded on its tape: slices, reshaped and cast."""
    if len(parts) == 1:
        return [packed]
    complex_pack = np.result_type(value_of(packed)).kind == "c"
    pieces, start = [], 0
    for shape, dtype, scalar in parts:
        size = math.prod(shape)
        piece = packed[start] if scalar else np.reshape(packed[start : start + size], shape)
        start += size
        if complex_pack and dtype.kind != "c":
            piece = np.real(piece)
        if piece.dtype != dtype:
            piece = piece.astype(dtype)
        pieces.append(piece)
    return pieces


def _same_value(a: Any, b: Any) -> bool:
    """Whether two values, nodes or batches of any level, hold the same elements."""
    a, b = (_elements(v) for v in (a, b))
    if np.shape(a) != np.shape(b):
        return False
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:  # no NaN in this dtype (strings, objects)
        return bool(np.array_equal(a, b))


def _recomputed(recorded: Any, again: Any) -> bool:
    """Whether a recomputed value is the recorded one: equal, or apart by rounding only
    (BLAS may round a product differently on memory aligned otherwise, or on threads)."""
    if _same_value(recorded, again):
        return True
    a, b = _elements(recorded), _elements(again)
    if np.shape(a) != np.shape(b) or np.result_type(a).kind not in "fc":
        return False
    scale = np.max(np.abs(a), initial=0.0)
    return bool(np.allclose(a, b, rtol=1e-10, atol=1e-10 * scale, equal_nan=True))


def _elements(v: Any) -> Any:
    v = value_of(v)
    return v.data if isinstance(v, BatchedBase) else v


_STREAMS = (np.random.Generator, np.random.RandomState)


def _stream_states(generators: list) -> list:
    legacy = np.random.get_state()  # noqa: NPY002 (NumPy's global stream)
    return [legacy] + [
        g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state()
        for g in generators
    ]


def _set_stream_states(generators: list, states: list) -> None:
    np.random.set_state(states[0])  # noqa: NPY002
    for g, state in zip(generators, states[1:]):
        if isinstance(g, np.random.Generator):
            g.bit_generator.state = state
        else:
            g.set_state(state)
