"""The reverse pass: a reverse tape of adjoints, filled by one loop over the tape."""

from __future__ import annotations

import sys
import sysconfig
from typing import Any, Iterator

import numpy as np

from sensitivities import registry

from .display import adjoints_text
from .duck_arrays import is_duck_array
from .errors import (
    bad_seed,
    check_adjoint,
    check_adjoints,
    check_reverse_tape,
    not_summable,
    note_reverse_failure,
    rank,
    writes_its_inputs,
)
from .mutation import verify
from .node import Node
from .observing import observing
from .recording import current
from .records import Branch, Tape

__all__ = ["ReverseTape", "reverse_tape", "propagate", "reverse_pass", "accumulate",
           "update_in_place", "in_place_rule", "unbroadcast", "unbroadcast_axes",
           "record_running_in"]  # fmt: skip


class ReverseTape:
    """The adjoints of a tape's records, slot for slot; unset slots are ``None``.

    Index it by position or by node: ``rt[x]`` is the adjoint of ``x``.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate
    >>> t = Tape()
    >>> x = Leaf(t, 3.0)
    >>> y = x * x
    >>> rt = propagate(t, reverse_tape(y))
    >>> rt[x], rt[0], list(rt)
    (6.0, 6.0, [6.0, 1.0])
    """

    __slots__ = ("tape", "adjoints", "owned")

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.adjoints: list[Any] = [None] * len(tape.records)
        # owned[p]: adjoints[p] is an ndarray the reverse pass made itself, so it may
        # add into it in place; never true of an array a rule, another slot or the user
        # holds. The positions in a set, not a flag per record: few slots are ever added
        # into, and a list would cost 8 bytes a record at the pass's peak of memory.
        self.owned = _Positions()

    def __len__(self) -> int:
        return len(self.adjoints)

    def __getitem__(self, key: Node | int) -> Any:
        if isinstance(key, Node):
            if key.tape is not self.tape:
                raise KeyError("this node is not on the reverse tape's tape")
            key = key.pos
        adjoint = self.adjoints[key]
        # a float64 scalar reads as a Python float, without NumPy 2's np.float64(...)
        if isinstance(adjoint, (np.float64, np.complex128)):
            return adjoint.item()
        return adjoint

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self.adjoints)))

    def __repr__(self) -> str:
        return adjoints_text(self.adjoints)

    def text(self, full: bool = False) -> str:
        """The slots, one a line, as ``repr`` shows them: the first and last 10 of more
        than 40, unless ``full``."""
        return adjoints_text(self.adjoints, full)


class _Positions(set):
    """A set of positions that reads and writes as a list of flags would: ``s[p]`` is
    whether ``p`` is in it, ``s[p] = flag`` puts it in or takes it out."""

    __slots__ = ()

    def __getitem__(self, pos: int) -> bool:
        return pos in self

    def __setitem__(self, pos: int, flag: bool) -> None:
        if flag:
            self.add(pos)
        else:
            self.discard(pos)


def reverse_tape(y: Node, ybar: Any = 1.0) -> ReverseTape:
    """The reverse tape for output ``y``: as long as ``y``'s tape, unset but for ``ybar``
    at ``y``'s position. ``ybar`` has ``y``'s shape (a float for a scalar ``y``).

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate
    >>> t = Tape()
    >>> x = Leaf(t, 2.0)
    >>> y = x * x
    >>> rt = propagate(t, reverse_tape(y, 1.0))
    >>> rt[x]
    4.0
    """
    if not isinstance(y, Node) or np.shape(ybar) != np.shape(y.value):
        raise bad_seed(y, ybar)
    pos = current(y).pos  # a node written in place: its latest version (which may record)
    rtape = ReverseTape(y.tape)
    rtape.adjoints[pos] = ybar
    return rtape


def propagate(tape: Tape, rtape: ReverseTape, *, free: bool = False) -> ReverseTape:
    """The reverse pass: fill ``rtape`` with the adjoint of every record that reaches the
    seeded output, walking ``tape`` backwards once. Returns ``rtape``.

    With ``free=True`` each Branch's adjoint is dropped as soon as it has been passed on,
    so that only the Leaves' adjoints remain: the peak memory of the pass is then that of
    the adjoints still in flight (``grad`` does this).

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate
    >>> t = Tape()
    >>> x = Leaf(t, np.array([1.0, 2.0]))
    >>> y = np.sum(x ** 3)
    >>> rt = reverse_tape(y, 1.0)
    >>> propagate(t, rt) is rt
    True
    >>> rt[x]  # 3 x^2
    array([ 3., 12.])
    """
    check_reverse_tape(tape, rtape)
    return reverse_pass(tape, rtape, free)


def reverse_pass(tape: Tape, rtape: ReverseTape, free: bool = False) -> ReverseTape:
    """``propagate``'s walk itself, for a caller that made ``rtape`` for ``tape`` after
    recording (``grad``). ``record_running_in`` reads its loop's state."""
    observer = observing.get()  # under tape.detect_anomaly(), each Branch's contributions
    check = None if observer is None else observer.propagated  # are checked as they are made
    records = tape.records
    adjoints = rtape.adjoints
    pos = len(records)
    now: dict = {}  # the fingerprints taken in this pass: each array's once (tape.core.mutation)
    try:
        for pos in range(len(records) - 1, -1, -1):
            ybar = adjoints[pos]
            if ybar is None:
                continue
            node = records[pos]
            if not isinstance(node, Branch):
                if node.seal is not None:
                    verify(node, now)
                continue
            call = node.call
            if call.seal is not None:
                verify(node, now)
            rules = _rules_of(call.f)
            plain = rules.fast  # one untyped rule per argument, of this package's; no pre
            if plain is None or check is not None:
                _backpropagate(node, ybar, tape, rtape)
                if check is not None:
                    check(node, ybar, rtape)
            else:
                # The common case, here rather than in a call of its own: a call fewer
                # on every record, 3% of the scalar chain's Python work
                # (python benchmarks/run.py --workloads chain).
                inputs = node.inputs
                y = node.value
                kwargs = call.kwargs
                if type(inputs) is not tuple:  # a call of one node (Branch.inputs)
                    held = call.held  # its value, as Branch.vals has it
                    v = records[inputs.pos].value if held is None else held[0]
                    rule = plain[0]
                    xbar = rule(y, ybar, v, **kwargs) if kwargs else rule(y, ybar, v)
                    # accumulate's commonest case inline (a first contribution, in shape)
                    q = inputs.pos
                    value = inputs.value
                    if adjoints[q] is None and (
                        (type(xbar) in _SCALARS and type(value) in _SCALARS)
                        or (type(xbar) in SHAPED and xbar.shape == getattr(value, "shape", 0))
                    ):
                        adjoints[q] = xbar
                    else:
                        accumulate(rtape, inputs, xbar, call.f, 0, node)
                    if free:
                        adjoints[pos] = None
                    continue
                # the values, as Branch.vals has them; where the rules read none of the
                # nodes' values (x + y, 2.0 * x: Rules.blind_to, as registered now), the
                # arguments themselves
                vals = inputs if rules.blind.get(call.node_args) else node.vals
                for i in call.node_args:
                    arg = inputs[i]
                    if not isinstance(arg, Node):  # a list or tuple holding nodes
                        _contribute_each(rules, i, arg, node, ybar, kwargs, tape, rtape)
                        continue
                    # an empty **kwargs still costs a dict on every call: most have none
                    rule = plain[i]
                    xbar = rule(y, ybar, *vals, **kwargs) if kwargs else rule(y, ybar, *vals)
                    q = arg.pos
                    if adjoints[q] is None and (
                        (type(xbar) in _SCALARS and type(arg.value) in _SCALARS)
                        or (type(xbar) in SHAPED and xbar.shape == getattr(arg.value, "shape", 0))
                    ):
                        adjoints[q] = xbar
                    else:
                        accumulate(rtape, arg, xbar, call.f, i, node)
            if free:
                adjoints[pos] = None
    except Exception as error:
        note_reverse_failure(error, records, pos)
        raise
    return rtape


def record_running_in(frame: Any) -> Any:
    """The record whose rules run where ``frame`` is a frame of ``reverse_pass``'s loop
    (the warning site of a rule's warning, ``tape.runtime.warning_sites``); else None."""
    if frame.f_code is not reverse_pass.__code__:
        return None
    records, pos = frame.f_locals.get("records"), frame.f_locals.get("pos")
    if records is None or pos is None or not 0 <= pos < len(records):
        return None
    return records[pos]


def _backpropagate(node: Branch, ybar: Any, tape: Tape, rtape: ReverseTape) -> None:
    """Add the adjoint contributions of one Branch to its arguments' slots (``reverse_pass``
    does it itself where each argument has one untyped rule of this package's, and no
    ``pre``)."""
    f = node.f
    rules = _rules_of(f)
    args = node.args
    vals = node.vals
    y = node.value
    kwargs = node.kwargs
    if rules.pre is not None:
        kwargs = dict(kwargs, pre=rules.pre(y, ybar, *vals, **kwargs))
    plain = None if rules.update or rules.typed or rules.foreign else rules.plain
    for i in node.node_args:
        arg = args[i]
        if not isinstance(arg, Node):  # a list or tuple holding nodes of this tape
            _contribute_each(rules, i, arg, node, ybar, kwargs, tape, rtape)
        elif plain is not None:
            accumulate(rtape, arg, plain[i](y, ybar, *vals, **kwargs), f, i, node)
        else:
            _contribute(rules, i, arg, node, ybar, kwargs, rtape)


def _contribute_each(rules, i, arg, record, ybar, kwargs, tape, rtape) -> None:
    """The contributions to the elements of list argument ``i`` that are ``tape``'s nodes."""
    vals, f = record.vals, rules.f
    rule = rules.rule(i, vals)
    if rules.foreign:
        xbars = call_foreign(rule, f, i, record.value, ybar, vals, kwargs, elements=len(arg))
    else:
        xbars = rule(record.value, ybar, *vals, **kwargs)
    for element, xbar in zip(arg, xbars):
        if tape.owns(element) and xbar is not None:
            accumulate(rtape, element, xbar, f, i)


_rules_of = registry.lookup
_ndarray = np.ndarray
_SCALARS = (float, np.float64)  # shape () for sure: no need to ask np.shape
# Types whose ``.shape`` is what ``np.shape`` answers, read directly (vmap adds its batches,
# which would otherwise answer through NumPy's dispatch on every adjoint).
SHAPED = {np.ndarray}


def _contribute(rules, i, arg, record, ybar, kwargs, rtape) -> None:
    y, vals = record.value, record.vals
    update = in_place_rule(rules, i, vals, ybar, arg.value)
    if update is not None:
        foreign = rules.f if rules.foreign else None
        update_in_place(rtape, update, arg, y, ybar, vals, kwargs, foreign, i)
        return
    rule = rules.rule(i, vals)
    if rules.foreign:
        xbar = call_foreign(rule, rules.f, i, y, ybar, vals, kwargs)
    else:
        xbar = rule(y, ybar, *vals, **kwargs)
    accumulate(rtape, arg, xbar, rules.f, i, record)


def call_foreign(
    rule: Any, f: Any, argnum: int, y: Any, ybar: Any, vals: tuple, kwargs: dict,
    elements: int | None = None, into: Any = None, kind: str = "sensitivity",
) -> Any:
    """Call a user's ``rule`` (``registry.is_foreign``) for argument ``argnum`` of ``f``
    as the reverse pass does, on read-only views of ``y``, ``ybar`` and the arguments:
    one adjoint array reaches several rules (``add`` hands its own to both operands) and
    the arguments are the caller's, so a rule that writes into them is stopped at the
    write, with an error naming it. What it returns is checked as ``accumulate`` checks
    it: an adjoint, or for a list argument one per of its ``elements``. ``into``: the
    accumulator of an in-place rule, the one array it may write. A ``"pushforward"``
    (``kind``), handed a tangent for ``ybar``, has its result checked by its caller."""
    head = (read_only(y), read_only(ybar))
    if into is not None:
        head = (into, *head)
    try:
        xbar = rule(*head, *map(read_only, vals), **kwargs)
    except ValueError as error:
        if "read-only" not in str(error):
            raise
        raise writes_its_inputs(f, argnum, into is not None, kind) from error
    if kind == "pushforward":
        return xbar
    if elements is None:
        check_adjoint(xbar, f, argnum)
    else:
        check_adjoints(xbar, f, argnum, elements)
    return xbar


def read_only(a: Any) -> Any:
    """``a``, or for an array that can be written a read-only view of it (a list's
    arrays too): what a user's rule is handed."""
    if isinstance(a, _ndarray):
        if a.flags.writeable:
            a = a.view()
            a.flags.writeable = False
        return a
    if type(a) is list or type(a) is tuple:
        return type(a)(map(read_only, a))
    view = getattr(type(a), "read_only_view", None)  # a batch of vmap's
    return a if view is None else view(a)


def in_place_rule(rules: Any, i: int, vals: tuple, ybar: Any, value: Any) -> Any:
    """The in-place form of the rule for argument ``i`` that the reverse pass uses here,
    or None where it uses the plain rule."""
    if not (rules.update or rules.typed):
        return None
    update = rules.update_rule(i, vals)
    if update is None or rules.rule(i, vals) is None:
        return update
    # In-place updates cannot be recorded: with nodes of an outer tape about, the plain
    # rule; so too for the arrays of other libraries (a Dask array has no np.add.at), and
    # an adjoint no plain accumulator can hold (a batch of them, under vmap).
    if isinstance(ybar, Node) or any(isinstance(v, Node) for v in vals) or is_duck_array(value):
        return None
    return None if type(ybar) is not _ndarray and is_duck_array(ybar) else update


def _complex_into_real(xbar: Any, ybar: Any) -> bool:
    # a complex adjoint cannot be added into a real array in place: the slot is copied
    kind = "c" if type(ybar) is complex else getattr(getattr(ybar, "dtype", None), "kind", "")
    return kind == "c" and xbar.dtype.kind != "c"


def update_in_place(rtape, update, arg, y, ybar, vals, kwargs, foreign=None, argnum=0) -> str:
    """Add into ``arg``'s slot with the in-place form ``update`` of a rule.

    Returns how the accumulator handed to ``update`` was made, for a compiled replay to
    do the same: ``"zeros"`` (a first contribution), ``"copy"`` (of an adjoint the
    reverse pass does not own) or ``"owned"`` (the slot's own array, added into).
    ``foreign``: the function of a user's rule (for argument ``argnum``), whose call is
    guarded (``call_foreign``) and whose result must have the argument's shape.
    """
    pos = arg.pos
    xbar = rtape.adjoints[pos]
    if xbar is None:
        xbar, made = np.zeros_like(arg.value, dtype=np.result_type(arg.value, ybar)), "zeros"
    elif not (pos in rtape.owned and type(xbar) is np.ndarray) or _complex_into_real(xbar, ybar):
        xbar, made = np.array(xbar, dtype=np.result_type(xbar, ybar)), "copy"
    else:
        made = "owned"
    if foreign is None:
        rtape.adjoints[pos] = update(xbar, y, ybar, *vals, **kwargs)
    else:
        result = call_foreign(update, foreign, argnum, y, ybar, vals, kwargs, into=xbar)
        if np.shape(result) != np.shape(xbar):
            raise not_summable(np.shape(result), np.shape(xbar), foreign, argnum)
        rtape.adjoints[pos] = result
    if rtape.adjoints[pos] is xbar:
        rtape.owned.add(pos)
    else:
        rtape.owned.discard(pos)
    return made


def accumulate(
    rtape: ReverseTape, arg: Node, xbar: Any, f: Any, argnum: int, record: Any = None
) -> str:
    """Add ``xbar``, summed back to ``arg``'s shape, into ``arg``'s slot.

    Only an array the reverse pass made itself is added into in place. Returns what was
    done, for a compiled replay to do the same: ``"set"`` (a first contribution, kept as
    it is), ``"add in place"`` or ``"add"`` (into a new array, which the slot then owns).
    ``record``, the Branch whose rule gave ``xbar`` where known, bounds the axes in front
    that unbroadcasting may sum away: no more than broadcasting among its value and
    arguments added.
    """
    value = arg.value
    if not (type(xbar) in _SCALARS and type(value) in _SCALARS):
        if type(xbar) is not _ndarray:  # a number, a batch, another library's array
            check_adjoint(xbar, f, argnum)
        shape = value.shape if type(value) in SHAPED else np.shape(value)
        if (xbar.shape if type(xbar) in SHAPED else np.shape(xbar)) != shape:
            xbar = unbroadcast(xbar, shape, f, argnum, record)
    pos = arg.pos
    current = rtape.adjoints[pos]
    if current is None:
        rtape.adjoints[pos] = xbar
        return "set"
    if (
        type(xbar) is _ndarray
        and type(current) is _ndarray
        and (pos in rtape.owned or _held_by_the_slot_alone(current))
        and xbar.dtype == current.dtype
    ):
        np.add(current, xbar, out=current)
        return "add in place"
    total = current + xbar
    rtape.adjoints[pos] = total
    if type(total) is _ndarray:
        rtape.owned.add(pos)
    else:
        rtape.owned.discard(pos)
    return "add"


def _held_by_the_slot_alone(current: np.ndarray) -> bool:
    """Whether ``current``, a slot's adjoint, is an array that nothing but the slot refers
    to (no other slot, rule, view or user): one whose memory is its own, writeable, and
    whose reference count is that of the slot, the caller's name for it and this call's.
    Adding into it in place then changes nothing anyone can see, and saves an array: a
    first contribution (``ybar * cos(x)``) is such an array once the records that
    handed it on are done. CPython's reference counts; elsewhere, never."""
    return current.base is None and _getrefcount(current) == _SLOT_ALONE and current.flags.writeable


# the slot in the adjoints list, ``accumulate``'s local name, and the argument of
# ``_held_by_the_slot_alone`` and of ``sys.getrefcount`` itself
_SLOT_ALONE = 4
_getrefcount = (
    sys.getrefcount
    if sys.implementation.name == "cpython" and not sysconfig.get_config_var("Py_GIL_DISABLED")
    else lambda a: 0
)


def _beyond_rank(xshape: tuple, record: Any) -> bool:
    """Whether an adjoint of ``xshape`` has more axes than any value of ``record``'s call
    (checked on the value first: an adjoint shaped like it is the common case)."""
    if record is None or len(xshape) <= getattr(record.value, "ndim", 0):
        return False
    return len(xshape) > rank(record.value, record.vals)


def _stretched_beyond(xshape: tuple, shape: tuple, record: Any) -> bool:
    """Whether an adjoint of ``xshape`` stretches an axis of size 1 of ``shape`` to a
    length that no value of ``record``'s call has on any axis: broadcasting could not
    have made it (any axis, not the same one: ``np.cross`` moves its arguments' axes)."""
    extra = len(xshape) - len(shape)
    lengths = None
    for k, n in enumerate(shape):
        m = xshape[extra + k]
        if n == 1 and m != 1 and m == m:  # m != m: nan, a size known only once computed
            if lengths is None:
                values = (record.value, *record.vals)
                lengths = {length for v in values for length in getattr(v, "shape", ())}
            if m not in lengths:
                return True
    return False


def unbroadcast(
    xbar: Any, shape: tuple, f: Any = None, argnum: int = 0, record: Any = None
) -> Any:
    """Sum ``xbar`` over the axes that broadcasting added or stretched, to get ``shape``.

    Anything else is a rule's mistake, reported as such rather than broadcast silently;
    given the ``record`` whose rule made ``xbar``, so is an axis in front that
    broadcasting among its value and arguments could not have added.
    """
    xshape = xbar.shape if type(xbar) in SHAPED else np.shape(xbar)
    if type(xbar) is _ndarray and (
        record is None or xshape == getattr(record.value, "shape", None)
    ):
        # The common case: an adjoint in the shape of the record's value (broadcasting
        # made that shape, so the checks below pass), summed by a plan found once per
        # pair of shapes: 1 µs less on each of the MLP's four unbroadcasts
        # (python benchmarks/profile_eager.py --workloads mlp).
        plan = _SUMS.get((xshape, shape))
        if plan is None:
            if len(_SUMS) > 4096:  # a program of ever new shapes: start again
                _SUMS.clear()
            plan = _SUMS[xshape, shape] = _sum_plan(xshape, shape)
        if plan is not _NOT_SUMMABLE:
            leading, stretched = plan
            if leading is not None:
                xbar = np.add.reduce(xbar, axis=leading)
            if stretched is not None:
                xbar = np.add.reduce(xbar, axis=stretched, keepdims=True)
            return xbar
    extra = len(xshape) - len(shape)
    if record is not None and (
        (extra > 0 and _beyond_rank(xshape, record))
        or (extra >= 0 and _stretched_beyond(xshape, shape, record))
    ):
        raise not_summable(xshape, shape, f, argnum)
    if type(xbar) is _ndarray and extra >= 0:
        # the common case, in one reduction over the added axes and those of size 1 in
        # ``shape``; what comes out in any other shape was not broadcast from ``shape``
        axes = tuple(range(extra)) + tuple(extra + k for k, n in enumerate(shape) if n == 1)
        summed = np.add.reduce(xbar, axis=axes, keepdims=True)
        if summed.shape[extra:] == shape:
            return summed.reshape(shape)
        raise not_summable(xshape, shape, f, argnum)
    axes = unbroadcast_axes(xshape, shape)
    if axes is None:
        raise not_summable(xshape, shape, f, argnum)
    leading, stretched = axes
    if leading:
        xbar = np.sum(xbar, axis=leading)
    if stretched:
        xbar = np.sum(xbar, axis=stretched, keepdims=True)
    return xbar


def _sum_plan(xshape: tuple, shape: tuple) -> Any:
    """``unbroadcast_axes``, as ``np.add.reduce`` takes them (a single axis as an int,
    None for none), or ``_NOT_SUMMABLE``."""
    axes = unbroadcast_axes(xshape, shape)
    if axes is None:
        return _NOT_SUMMABLE
    return tuple(None if not a else a[0] if len(a) == 1 else a for a in axes)


_SUMS: dict = {}  # (adjoint shape, argument shape) -> _sum_plan
_NOT_SUMMABLE = object()


def unbroadcast_axes(xshape: tuple, shape: tuple) -> tuple[tuple, tuple] | None:
    """How an adjoint of shape ``xshape`` sums back to its argument's ``shape``:
    ``(leading, stretched)``, the axes that broadcasting added in front (summed away) and
    then those it stretched from size 1 (summed, kept as size 1); None where it cannot.

    >>> unbroadcast_axes((5, 3, 4), (3, 1))
    ((0,), (1,))
    """
    extra = len(xshape) - len(shape)
    if extra < 0:
        return None
    stretched = []
    for k, (n, m) in enumerate(zip(shape, xshape[extra:])):
        if n != m:
            if n != 1 or m != m:  # m != m: nan, a size known only once computed
                return None
            stretched.append(k)
    return tuple(range(extra)), tuple(stretched)
