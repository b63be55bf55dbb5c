"""Recording: how a call that meets nodes becomes a Branch.

Nodes reach this module three ways, all ending in ``apply(f, args, kwargs)``: NumPy's
protocols (``np.sin(x)`` calls ``x.__array_ufunc__``, ``np.sum(x)`` calls
``x.__array_function__``), the node's operators (``x * y``), and primitives, which
hand a call that meets a node to the node's ``__record_call__`` (see
``sensitivities.registry.primitive``). ``apply`` then does one of four things:

- ``f`` has sensitivities: one Branch on the innermost tape among the arguments, whose
  value is ``f`` on the arguments unwrapped one level (so a node of an outer tape is
  recorded there in turn, which is what makes nested derivatives work);
- ``f`` is non-differentiable: ``f`` on the plain values, a constant (``plain``);
- ``f`` has neither: it is entered, its NumPy implementation running on the nodes and
  recording its inner calls (``enter``);
- a node passed by keyword is first moved to its positional place, since rules are keyed
  by position (``apply_with_keyword_nodes``).

Before any of that, a node argument written in place is replaced by the record of its
latest version (``current``, ``_apply_current``: one attribute test per node argument on
the common path), except in a function that is entered, which runs on the nodes the
caller holds. A result whose value is a NumPy view of a node argument's is registered as
a view of that node's root (``versions.note_view``), so that a write to either shows in
the other (``tape.core.inplace``), a result that is an argument's own array (``np.squeeze(a)
is a``) included.

Branches are made by their tape (``tape.branch``), and added to it by
``Tape.add``, which is what lets a ``Tape`` subclass decide how a record is added (see
``tape.core.records``). This module knows records
only as ``Record``: a value on a tape at a position.
"""

from __future__ import annotations

import operator
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from sensitivities import registry
from sensitivities.registry import function_name

from .errors import (
    cannot_enter,
    caused_by_conversion,
    converts_nodes,
    explain_mix,
    missing_rule,
    not_differentiable_in,
)
from .keywords import positional_call
from .mutation import sealed, sealed_subclass
from .versions import MEMORY, OUTDATED, VERSION, commit, note_view, positions, stale, written

__all__ = [
    "Record", "Call", "apply", "current", "plain", "innermost_tape", "record_primitive", "extend",
    "extension",
]  # fmt: skip


class Record:
    """What recording needs of a node: its ``value``, its ``tape``, its position ``pos``
    there, and ``alias``, None unless the node was written in place or has views (an
    ``Alias``); and ``seal``, the fingerprints of the mutable arrays the reverse pass will
    read (None when there are none), a slot of a Leaf's, its ``Call``'s for a Branch.
    ``tape.Node`` adds the operator surface."""

    __slots__ = ("value", "tape", "pos", "alias")


class Call:
    """What a Branch records of its call besides its value and arguments: the function
    ``f``, its keyword arguments, the positions ``node_args`` of this tape's nodes among
    the arguments, ``seal``, and ``held``, the values of the arguments where the tape
    cannot give them again (a view, a list of nodes, a tape of a mode), else None.

    Records of the same call (the same function, nodes at the same positions, no keywords
    and nothing to fingerprint) share one, kept by the function's rules (``Rules.calls``):
    three slots fewer on every record, which with ``Branch.inputs`` makes the record of
    ``np.sin(x)`` 140 bytes instead of 268, and the scalar chain's 168 bytes per op instead
    of 276 (python benchmarks/record_memory.py)."""

    __slots__ = ("f", "kwargs", "node_args", "seal", "held")

    def __init__(
        self, f: Any, kwargs: Any, node_args: tuple, seal: list | None = None,
        held: tuple | None = None,
    ) -> None:  # fmt: skip
        self.f = f
        self.kwargs = kwargs
        self.node_args = node_args
        self.seal = seal
        self.held = held

    def but(self, **fields: Any) -> Call:
        """A copy of this call (a record's own) with ``fields`` changed."""
        call = Call(self.f, self.kwargs, self.node_args, self.seal, self.held)
        for name, value in fields.items():
            setattr(call, name, value)
        return call

    def __repr__(self) -> str:
        return f"<Call of {function_name(self.f)} at {self.node_args}>"


def _shared_call(f: Any, rules: Any, node_args: tuple) -> Call:
    """The ``Call`` that records of ``f`` with nodes at ``node_args`` share, made once
    (where an argument there has no rule, the error that says so)."""
    for i in node_args:
        if i not in rules.argnums:
            raise missing_rule(f, i)
    rules.blind_to(node_args)  # learnt now, for the reverse pass to read
    call = rules.calls[node_args] = Call(f, _NO_KWARGS, node_args)
    return call


def current(node: Any) -> Any:
    """The record of ``node``'s current value: ``node`` itself unless it was written in
    place, else the record of its latest version. Anything else is returned as it is."""
    alias = getattr(node, "alias", None)
    if alias is None:
        return node
    if alias.root is not None and alias.version != alias.root.alias.version:
        _ = node.value  # a view whose root was written takes its value: OUTDATED
    if alias.latest is None:
        return node
    if alias.latest is OUTDATED:
        _remake(node)
    return alias.latest


def _remake(view: Any) -> None:
    """Record ``view`` again, its root having been written since: gathered from the
    root's latest version at the positions it covers, one record whatever the chain of
    views that made it. A view tape cannot map (``.real`` of a complex array) is made
    again by its own call from its parent's current record; the parents that need the
    same are found by a loop, first to last."""
    chain = [view]
    while type(positions(chain[-1])) is str:
        parent = chain[-1].alias.made[0]
        if parent.alias is not None and stale(parent.alias):
            _ = parent.value  # a view whose root was written takes its value: OUTDATED
        if parent.alias is None or parent.alias.latest is not OUTDATED:
            break
        chain.append(parent)
    for node in reversed(chain):
        mapped = positions(node)
        if type(mapped) is str:
            _, f, args, kwargs = node.alias.made
            new = apply(f, tuple(_current_in(a) for a in args), kwargs or None)
        else:
            if mapped.ndim:
                new = apply(np.take, (current(node.alias.root), mapped))
            else:  # np.take of a 0-d index gives a scalar; a view of 0-d is a 0-d array
                new = apply(np.take, (current(node.alias.root), mapped.reshape(1)))
                new = apply(np.reshape, (new, ()))
            # the same numbers, laid out as NumPy's view is (a refreshed view's value):
            # what is a view or a copy of it later (reshape, ravel) is then as in NumPy
            new.value = node.value
        commit(node, new)


def _current_in(a: Any) -> Any:
    if isinstance(a, Record):
        return current(a)
    if type(a) is list or type(a) is tuple:
        return type(a)(_current_in(b) for b in a)
    return a


def _apply_current(f: Any, args: tuple, kwargs: dict | None) -> Any:
    """``apply`` for a call that meets nodes written in place: recorded on their latest
    versions; a result that is a view registered on the nodes the caller holds (and a
    version, were one handed back, replaced by the node the caller holds: no version
    ever reaches the user). A function that is entered runs on the nodes the caller
    holds, each of its inner calls coming back here."""
    if _rules_of(f) is None:
        return _unrecorded(f, innermost_tape(args), None, args, kwargs)
    currents = tuple(_current_in(a) for a in args)
    result = apply(f, currents, kwargs)
    if isinstance(result, Record):
        if result.alias is None:
            note_view(result, args)
        elif result.alias is VERSION:
            for a, c in zip(args, currents):
                if result is c:
                    return a
    return result


def innermost_tape(args: Any) -> Any:
    """The tape of highest level among the nodes in ``args`` (and in lists/tuples there)."""
    tape = None
    for a in args:
        if isinstance(a, Record):
            if tape is None or a.tape.level > tape.level:
                tape = a.tape
        elif type(a) is list or type(a) is tuple:
            t = innermost_tape(a)
            if t is not None and (tape is None or t.level > tape.level):
                tape = t
    return tape


def apply(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """Call ``f(*args, **kwargs)`` where some arguments may be nodes, recording it.

    A function with sensitivities records one Branch on the innermost tape; a
    non-differentiable one computes on plain values; one with neither is entered
    (its NumPy implementation runs on the nodes, recording its inner calls).
    """
    # The commonest calls first, straight to their record: one node (np.sin(x)), a node
    # and a number (x + 1.0), two nodes of one tape (x * y), none a view or written, no
    # keywords. The path below, without its loops: a seventh of the scalar chain's
    # Python work (python benchmarks/run.py --workloads chain).
    node_args = None
    if not kwargs:
        n = len(args)
        if n == 1:
            x = args[0]
            if isinstance(x, Record) and x.alias is None:
                tape, node_args, vals, inputs = x.tape, _FIRST, (x.value,), x
        elif n == 2:
            a, b = args
            if isinstance(a, Record):
                if a.alias is None:
                    if isinstance(b, Record):
                        if b.alias is None and b.tape is a.tape:
                            tape, node_args, vals, inputs = a.tape, _BOTH, (a.value, b.value), args
                    elif type(b) in _NUMBERS:
                        tape, node_args, vals, inputs = a.tape, _FIRST, (a.value, b), args
            elif type(a) in _NUMBERS and isinstance(b, Record) and b.alias is None:
                tape, node_args, vals, inputs = b.tape, _SECOND, (a, b.value), args
    if node_args is not None:
        rules = _rules_of(f)
        if rules is not None and not rules.nondiff and tape.records:
            call = rules.calls.get(node_args)
            if call is None:
                call = _shared_call(f, rules, node_args)
            compute = f
            if f in _SCALAR_ARITHMETIC and (
                type(vals[0]) in _NUMPY_SCALARS or type(vals[-1]) in _NUMPY_SCALARS
            ):
                compute = _SCALAR_ARITHMETIC[f]
            try:
                value = compute(*vals)
            except Exception as error:
                explain_mix(error, f, vals)
                raise
            record = tape.branch(value, call, inputs)
            kind = type(value)
            if kind is _float64 or kind is float:
                return record
            return _kept(record, value, kind, vals, args, node_args)
    # One loop finds the innermost tape (innermost_tape, inline) and, where every argument
    # is a number or a node of that one tape (``simple``: np.sum(x, axis=1)), the values
    # and the positions of the nodes too; any other call takes a second loop below.
    tape = None
    plain_nodes = True  # no view or written node among the arguments, and no list
    simple = True
    vals = list(args)  # the arguments, this tape's nodes to be replaced by their values
    node_args = ()
    for i, a in enumerate(args):
        if isinstance(a, Record):
            if a.alias is not None:
                if stale(a.alias):
                    return _apply_current(f, args, kwargs)  # a node written in place
                plain_nodes = False
            if a.tape is not tape:
                if tape is not None:
                    simple = False  # nodes of several tapes: the innermost one's, below
                    if a.tape.level < tape.level:
                        continue
                tape = a.tape
            vals[i] = a.value
            node_args += (i,)
        elif type(a) in _NUMBERS:
            pass  # (asked first: a constant number, the commonest, skips the questions below)
        elif type(a) is list or type(a) is tuple:
            if written(args):
                return _apply_current(f, args, kwargs)
            tape = innermost_tape(args)
            plain_nodes = simple = False
            break
        else:
            simple = False  # an array to fingerprint, or a value of another library
    rules = _rules_of(f)
    if tape is None or rules is None or rules.nondiff or (kwargs and "out" in kwargs):
        return _unrecorded(f, tape, rules, args, kwargs)
    if not tape.records:  # a node whose pass has ended is a constant: its value
        return apply(f, _spent_as_values(args), _spent_as_values(kwargs))
    with_rules = rules.argnums
    seal = None
    if simple:
        for i in node_args:
            if i not in with_rules:
                raise missing_rule(f, i)
    else:
        vals = list(args)
        node_args = ()
        for i, a in enumerate(args):
            if isinstance(a, Record):
                if a.tape is tape:
                    if i not in with_rules:
                        raise missing_rule(f, i)
                    vals[i] = a.value
                    node_args += (i,)
            elif type(a) is _ndarray:
                seal = sealed(seal, i, a, tape)
            elif type(a) is list or type(a) is tuple:
                try:
                    vals[i], seal, held = _unwrap_sequence(f, i, a, tape, with_rules, seal)
                except _NestedNodes:
                    return apply(f, _stacked_within(args), kwargs)
                if held:
                    node_args += (i,)
            elif isinstance(a, _ndarray):  # np.memmap, a user's subclass: sealed too
                seal = sealed_subclass(seal, i, a, f, tape)
    vals = tuple(vals)
    call = f
    if kwargs:
        for k, v in kwargs.items():
            if type(v) is _ndarray:
                seal = sealed(seal, k, v, tape)
            elif isinstance(v, Record) or (
                (type(v) is list or type(v) is tuple) and innermost_tape(v) is not None
            ):
                return apply_with_keyword_nodes(f, args, kwargs)
            elif isinstance(v, _ndarray):
                seal = sealed_subclass(seal, k, v, f, tape)
            elif type(v) is list or type(v) is tuple:  # of constants only, as seen above
                seal = _unwrap_sequence(f, k, v, tape, with_rules, seal)[1]
    else:
        kwargs = _NO_KWARGS
        if f in _SCALAR_ARITHMETIC and (
            type(vals[0]) in _NUMPY_SCALARS or type(vals[-1]) in _NUMPY_SCALARS
        ):
            call = _SCALAR_ARITHMETIC[f]
    try:
        value = call(*vals, **kwargs) if kwargs else call(*vals)
    except Exception as error:
        explain_mix(error, f, vals)
        raise
    # one tuple per set of positions for the whole process, not one per Branch
    node_args = _NODE_ARGS.setdefault(node_args, node_args)
    # What the record keeps (tape.core.records.Branch): of a call of one node, the node
    # alone, and the values of the arguments only where the tape cannot give them again
    if kwargs is _NO_KWARGS and seal is None and plain_nodes:
        call = rules.calls.get(node_args) or _shared_call(f, rules, node_args)
    else:
        rules.blind_to(node_args)  # learnt now, for the reverse pass to read
        call = Call(f, kwargs, node_args, seal, None if plain_nodes else vals)
    kind = type(value)
    record = tape.branch(value, call, args[0] if simple and len(args) == 1 else args)
    if kind is _float64 or kind is float:
        return record
    return _kept(record, value, kind, vals, args, node_args)


def _kept(record: Any, value: Any, kind: type, vals: tuple, args: tuple, node_args: tuple) -> Any:
    """``record``, just made of ``value``, once its value is kept as NumPy would have it:
    an array the tape made, frozen; a view of an argument (or the argument's own array),
    registered as one, so that a write to either shows in the other."""
    if kind is not _ndarray and not (isinstance(value, Record) or kind in MEMORY):
        return record  # a number: nothing to freeze or to share
    if kind is _ndarray and value.base is None:
        for i in node_args:
            if vals[i] is value:  # the argument's own array (np.squeeze(a) is a): a view
                return note_view(record, args)  # of all of it, never frozen here
        # A result the tape made itself: freezing it costs nothing and stops any later
        # in-place change of the array at the line that tries it. Views share the data
        # of an array that is frozen or fingerprinted already.
        value.setflags(False)  # write=False, passed positionally: a third of the cost
        return record
    # a view, perhaps of an argument (or an outer tape's node that is one): a write to
    # either must show in the other
    return note_view(record, args)


def _unwrap_sequence(f, i, seq, tape, with_rules, seal):
    """A list/tuple argument with ``tape``'s nodes unwrapped, its arrays sealed, and
    whether it held any of ``tape``'s nodes."""
    out = []
    held = False
    for j, b in enumerate(seq):
        if isinstance(b, Record):
            if b.tape is tape:
                if i not in with_rules:
                    raise missing_rule(f, i)
                b = b.value
                held = True
        elif type(b) is np.ndarray:
            seal = sealed(seal, (i, j), b, tape)
        elif isinstance(b, np.ndarray):
            seal = sealed_subclass(seal, (i, j), b, f, tape)
        elif (type(b) is list or type(b) is tuple) and innermost_tape(b) is not None:
            raise _NestedNodes  # np.concatenate([x, [y, z]]): an array-like of nodes
        out.append(b)
    return type(seq)(out), seal, held


class _NestedNodes(Exception):
    """A list argument holds a list or tuple that holds nodes."""


def _stacked_within(args: tuple) -> tuple:
    """``args`` with each list or tuple of nodes nested in a list argument made one node,
    as NumPy reads an array-like (``np.concatenate([x, [y, z]])``)."""
    stacked = _extensions["stacked"]
    return tuple(
        type(a)(
            stacked(b) if (type(b) is list or type(b) is tuple) and innermost_tape(b) else b
            for b in a
        )
        if type(a) is list or type(a) is tuple
        else a
        for a in args
    )


def _spent_as_values(x: Any) -> Any:
    """``x`` (arguments, or keyword arguments) with each node of a released tape (its
    pass has ended: a logged loss, kept in a list) replaced by its value, a constant."""
    if isinstance(x, Record):
        return x.value if not x.tape.records else x
    if type(x) is list or type(x) is tuple:
        return type(x)(map(_spent_as_values, x))
    if type(x) is dict:
        return {k: _spent_as_values(v) for k, v in x.items()}
    return x


def _unrecorded(f: Any, tape: Any, rules: Any, args: tuple, kwargs: dict | None) -> Any:
    """``apply`` for every call that records no Branch of its own: no node among the
    positional arguments, no rules (entered), not differentiable (plain), or ``out=``."""
    keyword_only = False
    if tape is None:
        if not kwargs:
            return f(*args)
        tape = innermost_tape(tuple(kwargs.values()))
        if tape is None:
            return f(*args, **kwargs)
        keyword_only = True  # np.average(x, weights=w): fine to enter, not to record
    if not tape.records:  # a node whose pass has ended is a constant: its value
        return apply(f, _spent_as_values(args), _spent_as_values(kwargs))
    if kwargs and kwargs.get("out") is not None and (rules is None or not rules.nondiff):
        return _extensions["function_out"](f, args, kwargs, apply)
    if keyword_only and rules is not None and not rules.nondiff:
        return apply_with_keyword_nodes(f, args, kwargs)
    if rules is None:
        if registry.load_deferred():  # SciPy's rules, registered on the first miss
            return apply(f, args, kwargs)
        if registry.canonical(f) is not f:  # like= hands the runtime's wrapper of NumPy's
            return apply(registry.canonical(f), args, kwargs)
        return enter(f, tape, args, kwargs or {})
    if rules.nondiff:
        for keyword, position in rules.guarded:
            held = args[position] if position < len(args) else (kwargs or {}).get(keyword)
            if innermost_tape((held,)) is not None:
                raise not_differentiable_in(f, keyword, position)
        return plain(f, args, kwargs)
    return apply(f, args, {k: v for k, v in kwargs.items() if k != "out"})  # out=None


def plain(f: Any, args: tuple, kwargs: Any = None) -> Any:
    """``f`` on the plain values inside ``args``: a result that carries no gradient.

    Each tape whose nodes it read is told (``Tape.plain``): a compiled replay checks
    that such results come out the same."""
    result = f(*registry.value_of(args), **kwargs) if kwargs else f(*registry.value_of(args))
    for tape in _tapes_read(args, []):
        tape.plain(f, args, kwargs, result)
    return result


def _tapes_read(args: Any, tapes: list) -> list:
    for a in args:
        while isinstance(a, Record):
            if a.tape not in tapes:
                tapes.append(a.tape)
            a = a.value
        if type(a) is list or type(a) is tuple:
            _tapes_read(a, tapes)
    return tapes


def enter(f: Any, tape: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``f``'s implementation on the nodes (a registered one, else NumPy's own
    Python code), so that its inner calls are recorded; a failure records nothing."""
    entered = registry.implementation_of(f)
    if entered is None and not isinstance(f, np.ufunc) and getattr(f, "__self__", None) is None:
        entered = getattr(f, "_implementation", None)  # NumPy's own Python code
    if entered is None:
        raise cannot_enter(f, registry.is_primitive(f))
    start = len(tape.records)
    try:
        return entered(*args, **kwargs)
    except Exception as error:
        del tape.records[start:]  # a failed call leaves no half-recorded work behind
        if not caused_by_conversion(error):
            raise
        raise converts_nodes(f) from error


def record_primitive(primitive: Callable, f: Callable, args: tuple, kwargs: dict) -> Any:
    """A call of ``primitive`` (wrapping ``f``) that met a node: one Branch of the
    primitive itself, whose value is ``f`` on the arguments unwrapped one level."""
    if innermost_tape(args) is None:
        raise TypeError(f"{function_name(f)}: pass nodes positionally to a primitive")
    return apply(primitive, args, kwargs)


def apply_with_keyword_nodes(f: Any, args: tuple, kwargs: dict) -> Any:
    """``apply`` for a call with a node among its keyword arguments (``np.clip(x,
    a_max=m)``), spelled by position first: rules are keyed by position (``tape.core.keywords``)."""
    return apply(f, *positional_call(f, args, kwargs))


def extend(**hooks: Callable) -> None:
    """Register what the modules built on this one lend it (they import it; it imports
    none of them): ``stacked``, a list holding nodes made one node, and ``is_converting``,
    whether library conversions are recorded in this thread now (both
    ``tape.runtime.conversions``), and ``function_out``, a call with ``out=`` a node
    (``tape.core.outputs``)."""
    _extensions.update(hooks)


def extension(name: str) -> Callable:
    """The hook registered as ``name`` (``extend``); one that answers False where the
    layer that lends it is not loaded."""
    return _extensions.get(name, _no)


def _no(*args: Any, **kwargs: Any) -> bool:
    return False


_extensions: dict[str, Callable] = {}
_rules_of = registry.lookup
_ndarray = np.ndarray
_float64 = np.float64
_NODE_ARGS: dict[tuple, tuple] = {}
# the node positions of the commonest calls
_FIRST = _NODE_ARGS.setdefault((0,), (0,))
_SECOND = _NODE_ARGS.setdefault((1,), (1,))
_BOTH = _NODE_ARGS.setdefault((0, 1), (0, 1))
# Branches made without keyword arguments share one empty, read-only mapping: a dict per
# record would cost 64 bytes and an allocation on every operation.
_NO_KWARGS: Any = MappingProxyType({})
# NumPy's scalars do arithmetic through the operators ten times faster than through the
# ufuncs (40 ns against 550), with the same result by NumPy's own rules. (Not for two
# Python floats, whose operators raise on 1.0 / 0.0 where NumPy gives inf.)
_SCALAR_ARITHMETIC = {
    np.add: operator.add,
    np.subtract: operator.sub,
    np.multiply: operator.mul,
    np.true_divide: operator.truediv,
}
_NUMPY_SCALARS = frozenset(
    (np.float16, np.float32, np.float64, np.longdouble, np.complex64, np.complex128, np.clongdouble)
)
_NUMBERS = frozenset((float, int, complex, bool)) | _NUMPY_SCALARS
