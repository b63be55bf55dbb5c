"""The Wengert list: a ``Tape`` of ``Leaf`` and ``Branch`` records.

Glossary of the engine (each term is one name in the code):

- *tape*: a ``Tape``, the list of records in the order they were made. Its ``level``
  comes from a process-wide counter: a tape made later (inside an inner ``grad``) has a
  higher level, and a call that meets nodes of several tapes is recorded on the
  *innermost* one, the one of highest level.
- *record*, *node*: an entry of a tape, a ``Leaf`` (an input) or a ``Branch`` (the
  result of one call). Both are ``Node``s, which behave like their ``value``; ``Node``'s
  base, ``tape.core.recording.Record``, is all that recording knows of them: a ``value`` on a
  ``tape`` at a position ``pos``, with a ``seal``.
- *plain value*: a value with every node, of every tape, replaced by its value
  (``sensitivities.registry.value_of``). A plain result carries no gradient.
- ``Branch.vals``: the call's arguments with this tape's nodes replaced by their values,
  one level down (a node of an outer tape stays a node); what ``f`` and its rules see.
  A record keeps less than ``args`` and ``vals`` (``Branch.inputs``, ``Branch.call``):
  see ``Branch``.
- ``Branch.node_args``: the positions in ``args`` that hold this tape's nodes, directly
  or inside a list: the arguments the reverse pass sends adjoints to.
- *rule*, *sensitivity*: ``rule(y, ybar, *vals, **kwargs) -> xbar``, registered per
  function and argument in ``sensitivities``; *adjoint*: the ``ybar`` or ``xbar`` of a
  record, kept in a ``ReverseTape`` slot for slot.
- *seal*: the fingerprints of mutable arrays a record was handed (``tape.core.mutation``).
- *written node*, *version*: a node written in place (``x += v``, ``x[i] = v``; see
  ``tape.core.inplace``) keeps its identity and its position, that of the value it first had,
  where a copy of its first record now stands; its ``alias.latest`` is the record of its
  current value (a *version*), on which later calls are recorded (``recording.current``).
  A *view*: a node whose value shares memory with another node's, registered in
  ``alias.views`` of its *root*, the node that is no view (``tape.core.versions``).

Where things happen: ``tape.core.recording`` turns a call into a Branch; ``tape.core.node`` is
the operator surface that brings calls there; ``tape.core.reverse`` runs the reverse pass;
``tape.transforms.grad`` wraps both as ``grad``.

Modes plug in here, at one place. Every record is added through ``Tape.add``, and
every plain result computed from a tape's nodes (a comparison, ``bool(x)``) is reported
to ``Tape.plain``. A new mode subclasses ``Tape`` and overrides them:
``tape.transforms.forward.ForwardTape.add`` pushes each Branch's tangent as it is recorded, and
``tape.transforms.compiled`` overrides ``plain`` to guard a replay's control flow. ``tape.debug``
observes the records of every tape in its context, and ``tape.vmap`` rewrites those of
closures, through ``tape.core.observing``, which ``Tape.add`` consults.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator

import numpy as np

from sensitivities.registry import function_name

from . import observing
from .display import dtype_name, preview, tape_text
from .errors import check_leaf_value
from .mutation import sealed
from .node import Node
from .recording import Call

__all__ = ["Tape", "Leaf", "Branch", "PICTURES"]

# Pictures of a tape are a tool, above the engine (``tape.tools.graph``): the engine
# imports no tool, so that module puts its ``to_dot``, ``draw`` and ``svg`` here as it is
# imported (``import tape`` imports it), and ``Tape``'s methods call them from here.
PICTURES: dict[str, Callable] = {}

_levels = itertools.count()  # next() on a count is atomic under the GIL: safe across threads

class Tape:
    """A Wengert list of ``Leaf`` and ``Branch`` records, in the order they were made.

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> t = Tape()
    >>> x = Leaf(t, 0.5)
    >>> y = np.exp(x)
    >>> t
    Tape with 2 elements:
      [0]: Leaf{float64} 0.5
      [1]: Branch{float64} 1.6487212707001282 f=exp
    """

    __slots__ = ("records", "level", "sites", "prints", "__weakref__")
    branch: Callable  # the one constructor of a Branch on this tape, defined below

    def __init__(self) -> None:
        self.records: list[Node] = []
        self.level: int = next(_levels)
        # position -> (file, line, function) of the code that recorded it; filled only
        # under tape.debug() or tape.detect_anomaly()
        self.sites: dict[int, tuple] | None = None
        # id of an array -> its last fingerprint, which records that find it unchanged
        # share (tape.core.mutation.sealed)
        self.prints: dict[int, Any] = {}

    # -- the extension points ----------------------------------------------------------

    def add(self, record: Node) -> None:
        """Append a new record and set its position. Every record passes here once; a
        mode overrides this (calling it) to act on each one as it is made."""
        if observing.observed:
            # vmap's closures: a rewriter records what the record is to use before it, so
            # that the reverse pass (backwards) meets the record first
            for rewriter in observing.rewriters():
                rewriter.recorded(record)
            record.pos = len(self.records)
            self.records.append(record)
            observer = observing.observer()  # tape.debug(): the record as it ends up
            if observer is not None:
                observer.recorded(record)
            return
        record.pos = len(self.records)
        self.records.append(record)

    def owns(self, value: Any) -> bool:
        """Whether ``value`` is a node recorded on this tape: not a plain value, and not
        a node of another tape (an outer tape's node is a constant here).

        >>> from tape import Tape, Leaf
        >>> t = Tape()
        >>> t.owns(Leaf(t, 1.0)), t.owns(Leaf(Tape(), 1.0)), t.owns(1.0)
        (True, False, False)
        """
        return isinstance(value, Node) and value.tape is self

    def release(self) -> None:
        """Drop the records, and what each holds of the others: a node that the caller
        keeps afterwards holds its own value only (its call's arguments and their values go,
        as PyTorch frees the saved tensors at ``backward()``). The
        transforms release the tapes they make once their gradients are read; a node of
        a released tape used again says that its tape is spent. A tape built by hand is
        the user's, and keeps everything."""
        for record in self.records:
            try:
                record.inputs = ()  # its call's arguments and their values
                if record.call.held is not None:  # (a call of its own: never shared)
                    record.call.held = ()
            except AttributeError:
                pass  # a Leaf: no call
            if record.alias is not None:
                getattr(record, "value", None)  # a view takes its value before its root goes
                record.alias = None
        self.records.clear()
        self.prints.clear()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("cannot pickle or copy a tape: its records cannot leave this process")

    def __deepcopy__(self, memo: dict) -> Any:
        # copying each record would record a copy of it on this very tape, without end
        raise TypeError("cannot copy a tape; copy the values you need (node.value)")

    def plain(self, f: Any, args: tuple, kwargs: Any, result: Any) -> None:
        """Told of every plain result ``f(*args, **kwargs)`` computed from this tape's
        nodes. Nothing to do on an ordinary tape."""

    # -- a list ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, pos: int) -> Node:
        return self.records[pos]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.records)

    def __repr__(self) -> str:
        return tape_text(self.records)

    def text(self, full: bool = False) -> str:
        """The tape, a record a line, as ``repr`` shows it: a tape of more than 40 records
        shows its first and last 10 (as NumPy summarises a large array), unless ``full``.

        >>> import numpy as np
        >>> from tape import Tape, Leaf
        >>> t = Tape()
        >>> x = Leaf(t, 0.0)
        >>> for _ in range(50):
        ...     x = np.sin(x)
        >>> len(repr(t).splitlines()), len(t.text(full=True).splitlines())
        (22, 52)
        """
        return tape_text(self.records, full)

    def to_dot(self, rtape: Any = None, *, constants: bool = True, names: Any = None) -> str:
        """Graphviz DOT source of this tape, with a reverse tape's adjoints beside it
        when given, and records labelled by ``names`` (``{x: "x"}``, by node or
        position) where given; see ``tape.tools.graph.to_dot``.

        >>> import numpy as np
        >>> from tape import Tape, Leaf
        >>> t = Tape()
        >>> y = np.exp(Leaf(t, 0.5))
        >>> print(t.to_dot().splitlines()[0])
        digraph tape {
        """
        return PICTURES["to_dot"](self, rtape, constants=constants, names=names)

    def draw(self, rtape: Any = None, *, constants: bool = True, names: Any = None) -> Any:
        """A ``graphviz.Source`` of this tape (needs the ``graphviz`` package); see
        ``tape.tools.graph.draw``."""
        return PICTURES["draw"](self, rtape, constants=constants, names=names)

    def _repr_svg_(self) -> str | None:
        # Jupyter shows a tape as a picture where graphviz can draw it, else as text
        svg = PICTURES.get("svg")
        return None if svg is None else svg(self)


class Leaf(Node):
    """An input recorded on ``tape``: ``Leaf(tape, value)``, value a float or an ndarray.

    >>> from tape import Tape, Leaf
    >>> t = Tape()
    >>> Leaf(t, 0.25)
    Leaf{float64} 0.25
    """

    __slots__ = ("seal",)

    def __init__(self, tape: Tape, value: Any) -> None:
        if not isinstance(tape, Tape):
            raise TypeError(f"Leaf(tape, value) needs a Tape, got {type(tape).__name__}")
        check_leaf_value(value)
        self.value = value
        self.tape = tape
        self.seal = sealed(None, -1, value, tape) if isinstance(value, np.ndarray) else None
        self.alias = None
        tape.add(self)

    def __repr__(self) -> str:
        return f"Leaf{{{dtype_name(self.value)}}} {preview(self.value)}"


class Branch(Node):
    """The recorded result of ``f(*args, **kwargs)``: ``.value``, ``.f``, ``.args``,
    ``.kwargs``, ``.tape`` and ``.pos``. The engine makes these as calls are recorded.

    ``.vals`` is ``args`` with this tape's nodes replaced by their values (what ``f`` was
    called with, what the rules are handed), and ``.node_args`` the positions in ``args``
    that hold this tape's nodes: the reverse pass reads both instead of searching
    ``args``.

    A record keeps little, as a scalar op records little else and every object costs
    (python benchmarks/run.py --workloads memory): ``.inputs``, the arguments, is the
    node itself for a call of one node (``np.sin(x)``), else the tuple ``args``; ``.call``,
    the function, its keywords and the rest (a ``tape.core.recording.Call``), is shared by
    the records of the same call. The values are not kept: the record at each node's
    position keeps its value as it was (a node written in place since included; see
    ``tape.core.inplace``), where ``vals`` takes it again; only a call whose arguments
    the tape cannot give again (a view, a list of nodes) keeps them, in its own call.

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> x = Leaf(Tape(), 0.5)
    >>> y = np.power(np.sin(x), 2)
    >>> y.f is np.power, y.args[0].f is np.sin, y.args[1], y.pos, y.node_args
    (True, True, 2, 2, (0,))
    """

    __slots__ = ("call", "inputs")

    def __new__(
        cls, tape: Tape, value: Any, f: Any, args: tuple, kwargs: Any, vals: tuple,
        node_args: tuple, seal: list | None = None,
    ) -> Branch:  # fmt: skip
        # Branch(tape, value, f, args, kwargs, vals, node_args, seal=None), by hand: a
        # call of its own, which keeps the values
        call = Call(f, kwargs, node_args, seal, tuple(vals))
        if len(args) == 1 and isinstance(args[0], Node):
            return tape.branch(value, call, args[0])
        return tape.branch(value, call, tuple(args))

    @property
    def f(self) -> Any:
        return self.call.f

    @property
    def kwargs(self) -> Any:
        return self.call.kwargs

    @property
    def node_args(self) -> tuple:
        return self.call.node_args

    @property
    def seal(self) -> list | None:
        return self.call.seal

    @seal.setter
    def seal(self, seal: list | None) -> None:
        self.call = self.call.but(seal=seal)  # (a shared call is never changed)

    @property
    def args(self) -> tuple:
        inputs = self.inputs
        return inputs if type(inputs) is tuple else (inputs,)

    @args.setter
    def args(self, args: tuple) -> None:
        # a mode's rewrite (vmap's): the values stay those the call was made with
        if self.call.held is None:
            self.call = self.call.but(held=self.vals)
        self.inputs = tuple(args)

    @property
    def vals(self) -> tuple:
        inputs, held = self.inputs, self.call.held
        if held is not None:
            return held
        if type(inputs) is tuple and not inputs:
            return ()  # a released record
        records = self.tape.records
        if type(inputs) is not tuple:  # a call of one node
            return (records[inputs.pos].value,)
        vals = list(inputs)
        for i in self.call.node_args:
            vals[i] = records[inputs[i].pos].value
        return tuple(vals)

    def __repr__(self) -> str:
        return f"Branch{{{dtype_name(self.value)}}} {preview(self.value)} f={function_name(self.f)}"


def _branch(tape: Tape, value: Any, call: Call, inputs: Any) -> Branch:
    """``tape.branch(value, call, inputs)``: the one constructor of a Branch
    (``Branch(tape, ...)`` comes here too), a plain function rather than ``__init__``,
    whose type call would double the cost of every record."""
    node = object.__new__(Branch)
    node.value = value
    node.tape = tape
    node.call = call
    node.inputs = inputs
    node.alias = None
    if type(tape) is Tape and not observing.observed:
        records = tape.records  # Tape.add itself, inline: a call fewer on every record
        node.pos = len(records)
        records.append(node)
    else:
        tape.add(node)  # (a mode that rewrites the arguments keeps the values: Branch.args)
    return node


Tape.branch = _branch
