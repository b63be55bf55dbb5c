"""The Wengert list: tapes, their records, and how NumPy calls get recorded.

A ``Tape`` is a list of records. A ``Leaf`` records an input; a ``Branch`` records the
result of one call ``f(*args, **kwargs)`` in which some arguments were nodes of that
tape. Nodes join NumPy through its own protocols (``__array_ufunc__`` and
``__array_function__``), so plain ``import numpy as np`` code is recorded as it runs.

Every tape has a ``level`` drawn from a process-wide counter: a tape made later (inside
an inner ``grad``) has a higher level. A call that meets nodes of several tapes is
recorded on the one with the highest level, with the nodes of the others as constants;
its value is computed from the unboxed arguments, which may themselves be nodes of an
outer tape, and so is recorded there in turn. That is what makes nested derivatives
free of perturbation confusion, with no global stack of active tapes.
"""

from __future__ import annotations

import gc
import inspect
import itertools
import operator
import sys
import threading
from types import MappingProxyType
from typing import Any, Callable, Iterator

import numpy as np

from sensitivities import registry
from sensitivities.counterparts import scipy_caller
from sensitivities.registry import function_name

from .display import dtype_name, preview

__all__ = [
    "Tape",
    "Node",
    "Leaf",
    "Branch",
    "NodeConversionError",
    "MissingRuleError",
    "MutationError",
    "apply",
    "gc_paused",
]

_levels = itertools.count()  # next() on a count is atomic under the GIL: safe across threads

# Branches made without keyword arguments share one empty, read-only mapping: a dict per
# record would cost 64 bytes and an allocation on every operation.
_NO_KWARGS: Any = MappingProxyType({})

# How many debug or anomaly contexts are open, in any thread. While it is 0 the hot path
# pays one global read; tape.debugging installs the observer and keeps the count.
_watching = 0
_observer: Callable | None = None


class NodeConversionError(TypeError):
    """A node was asked to turn into a plain number or ndarray, which would drop it off the tape.

    >>> from tape import Tape, Leaf
    >>> float(Leaf(Tape(), 1.0))
    Traceback (most recent call last):
        ...
    tape.core.NodeConversionError: a Node cannot be turned into a Python number ...
    """


class MissingRuleError(TypeError):
    """A function met a node and has no sensitivity for it (and could not be entered).

    >>> from tape import Tape, Leaf, primitive
    >>> @primitive
    ... def halve(x):
    ...     return x / 2
    >>> halve(Leaf(Tape(), 1.0))
    Traceback (most recent call last):
        ...
    tape.core.MissingRuleError: the primitive halve has no sensitivity; register one with ...
    """


class MutationError(RuntimeError):
    """An array recorded on a tape was changed in place before the reverse pass read it.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate, MutationError
    >>> t = Tape()
    >>> w = np.array([1.0, 2.0])
    >>> x = Leaf(t, np.array([3.0, 4.0]))
    >>> y = np.sum(x * w)
    >>> w[0] = 10.0  # the reverse pass of x * w needs the old w
    >>> try:
    ...     propagate(t, reverse_tape(y))
    ... except MutationError as e:
    ...     print(str(e).split(" was changed")[0])
    argument 1 of [1] Branch{float64[2]} [3., 8.] f=multiply
    """


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

    __slots__ = ("records", "level", "sites", "__weakref__")

    def __init__(self) -> None:
        self.records: list[Node] = []
        self.level: int = next(_levels)
        # position -> (file, line, function) of the code that recorded it; filled only
        # under tape.debug() or tape.detect_anomaly()
        self.sites: dict[int, tuple] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, pos: int) -> Node:
        return self.records[pos]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.records)

    def __repr__(self) -> str:
        lines = [f"Tape with {len(self.records)} elements" + (":" if self.records else "")]
        lines += [f"  [{node.pos}]: {node!r}" for node in self.records]
        return "\n".join(lines)

    def to_dot(self, rtape: Any = None, *, constants: bool = True) -> str:
        """Graphviz DOT source of this tape, with a reverse tape's adjoints beside it
        when given; see ``tape.graph.to_dot``.

        >>> import numpy as np
        >>> from tape import Tape, Leaf
        >>> t = Tape()
        >>> y = np.exp(Leaf(t, 0.5))
        >>> print(t.to_dot().splitlines()[0])
        digraph tape {
        """
        from .graph import to_dot

        return to_dot(self, rtape, constants=constants)

    def draw(self, rtape: Any = None, *, constants: bool = True) -> Any:
        """A ``graphviz.Source`` of this tape (needs the ``graphviz`` package); see
        ``tape.graph.draw``."""
        from .graph import draw

        return draw(self, rtape, constants=constants)

    def _repr_svg_(self) -> str | None:
        # Jupyter shows a tape as a picture where graphviz can draw it, else as text
        from .graph import svg

        return svg(self)


def is_duck_array(value: Any) -> bool:
    """Whether ``value`` is an array of another library that speaks NumPy's protocols
    (a Dask or CuPy array): it has ``__array_function__``, ``__array_ufunc__``, ``shape``
    and ``dtype``. Nodes and ndarrays are not duck arrays here.

    >>> import numpy as np
    >>> from tape.core import is_duck_array
    >>> is_duck_array(np.ones(2)), is_duck_array(1.0)
    (False, False)
    """
    cls = type(value)
    return (
        cls is not np.ndarray
        and not isinstance(value, (Node, np.generic))
        and hasattr(cls, "__array_function__")
        and hasattr(cls, "__array_ufunc__")
        and hasattr(value, "shape")
        and hasattr(value, "dtype")
    )


def _check_differentiable_value(value: Any) -> None:
    if type(value) is float or (type(value) is np.ndarray and value.dtype.kind in "fc"):
        return  # the common cases, without the questions below
    while isinstance(value, Node):
        value = value.value
    if isinstance(value, (bool, int, np.bool_, np.integer)) or (
        (isinstance(value, np.ndarray) or is_duck_array(value))
        and np.dtype(value.dtype).kind not in "fc"
    ):
        raise TypeError(
            f"a Leaf needs a floating-point or complex value, got {dtype_name(value)}: "
            "convert it first, e.g. np.asarray(x, dtype=float)"
        )
    if not (isinstance(value, (float, complex, np.inexact, np.ndarray)) or is_duck_array(value)):
        raise TypeError(
            f"a Leaf holds a float, a complex number, an ndarray or an array of a library "
            f"that speaks NumPy's protocols (Dask, CuPy), got {type(value).__name__}"
        )


def _recorded_method(f: Callable) -> Callable:
    """The ndarray method ``x.name(*args, **kwargs)``, recorded as ``f(x, *args, **kwargs)``."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return apply(f, (self, *args), kwargs)

    method.__name__ = f.__name__
    return method


def _in_place(name: str, instead: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"x.{name}() changes an array in place, which the tape cannot record; "
            f"use {instead} instead"
        )

    method.__name__ = name
    return method


class Node:
    """A recorded value. It behaves like the value: arithmetic, ``@``, indexing,
    ``.shape``, and every NumPy function, each recorded on the node's tape.
    Comparisons return plain results, so that Python control flow works.

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> x = Leaf(Tape(), np.array([1.0, -2.0]))
    >>> y = 2 * x[::-1] @ x.T
    >>> y
    Branch{float64} -8.0 f=matmul
    >>> bool(x[0] > 0)  # comparisons give plain results, for if and while
    True
    """

    __slots__ = ("value", "tape", "pos", "seal")
    __array_priority__ = 1000.0  # NumPy defers binary operators to us
    __hash__ = object.__hash__  # __eq__ is elementwise, identity still hashes

    value: Any
    tape: Tape
    pos: int
    seal: list | None  # fingerprints of the mutable arrays the reverse pass will read

    # -- NumPy's protocols -------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            return apply(ufunc, inputs)  # np.sin(x): the common call, first
        if kwargs.get("out") is not None:
            raise TypeError(
                f"np.{ufunc.__name__}(..., out=...) would write the result into an array in "
                "place (as a += x does), which the tape cannot record; drop out= and use the "
                "returned value (a = a + x)"
            )
        if method == "__call__":
            return apply(ufunc, inputs, kwargs)
        if method == "at":
            raise TypeError(
                f"np.{ufunc.__name__}.at updates an array in place, which the tape cannot "
                "record; use the functional update tape.at(x)[index].add(v) (or .multiply, "
                ".set), or build a new array (np.where, np.concatenate, np.stack)"
            )
        bound = getattr(ufunc, method)
        rules = registry.lookup(ufunc)
        if registry.lookup(bound) is None and rules is not None and rules.nondiff:
            return _plain(bound, inputs, kwargs)
        return apply(bound, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
        return apply(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        counterpart = scipy_caller(sys._getframe(1))
        if counterpart:
            raise NodeConversionError(
                f"{counterpart[0]} converts its arguments to ndarrays, which would cut this "
                f"node off the tape; call its differentiable counterpart {counterpart[1]} "
                "instead (same arguments)"
            )
        raise NodeConversionError(
            "a Node cannot be turned into an ndarray: its value would be cut off the tape "
            "and its gradient silently lost. Build arrays from nodes with np.stack, "
            "np.concatenate or np.where; instead of a[i] = node write a = tape.at(a)[i]"
            ".set(node); use node.value for a constant copy; or register a "
            "sensitivity for the function that needs an ndarray (see tape.sensitivity)"
        )

    def __float__(self) -> float:
        raise NodeConversionError(
            "a Node cannot be turned into a Python number (float(), int(), math.*, or "
            "storing it into an ndarray with a[i] = node): its gradient would be silently "
            "lost. Use NumPy functions instead of math (np.sin, np.exp); instead of a[i] = "
            "node write a = tape.at(a)[i].set(node), or build the array with np.stack or "
            "np.concatenate; or take node.value for a constant"
        )

    __int__ = __complex__ = __index__ = __float__

    def __bool__(self) -> bool:
        return _plain(bool, (self,), None)

    # -- arithmetic, each recorded as the NumPy ufunc it means ----------------------------

    def __add__(self, other: Any) -> Any:
        return apply(np.add, (self, other))

    def __radd__(self, other: Any) -> Any:
        return apply(np.add, (other, self))

    def __sub__(self, other: Any) -> Any:
        return apply(np.subtract, (self, other))

    def __rsub__(self, other: Any) -> Any:
        return apply(np.subtract, (other, self))

    def __mul__(self, other: Any) -> Any:
        return apply(np.multiply, (self, other))

    def __rmul__(self, other: Any) -> Any:
        return apply(np.multiply, (other, self))

    def __truediv__(self, other: Any) -> Any:
        return apply(np.true_divide, (self, other))

    def __rtruediv__(self, other: Any) -> Any:
        return apply(np.true_divide, (other, self))

    def __floordiv__(self, other: Any) -> Any:
        return apply(np.floor_divide, (self, other))

    def __rfloordiv__(self, other: Any) -> Any:
        return apply(np.floor_divide, (other, self))

    def __mod__(self, other: Any) -> Any:
        return apply(np.remainder, (self, other))

    def __rmod__(self, other: Any) -> Any:
        return apply(np.remainder, (other, self))

    def __pow__(self, other: Any) -> Any:
        return apply(np.power, (self, other))

    def __rpow__(self, other: Any) -> Any:
        return apply(np.power, (other, self))

    def __matmul__(self, other: Any) -> Any:
        return apply(np.matmul, (self, other))

    def __rmatmul__(self, other: Any) -> Any:
        return apply(np.matmul, (other, self))

    def __neg__(self) -> Any:
        return apply(np.negative, (self,))

    def __pos__(self) -> Any:
        return apply(np.positive, (self,))

    def __abs__(self) -> Any:
        return apply(np.absolute, (self,))

    # -- comparisons give plain results -----------------------------------------------

    def __lt__(self, other: Any) -> Any:
        return apply(np.less, (self, other))

    def __le__(self, other: Any) -> Any:
        return apply(np.less_equal, (self, other))

    def __gt__(self, other: Any) -> Any:
        return apply(np.greater, (self, other))

    def __ge__(self, other: Any) -> Any:
        return apply(np.greater_equal, (self, other))

    def __eq__(self, other: Any) -> Any:
        return apply(np.equal, (self, other))

    def __ne__(self, other: Any) -> Any:
        return apply(np.not_equal, (self, other))

    # -- indexing and the array attributes ---------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        return apply(operator.getitem, (self, index))

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError(
            "nodes are immutable: x[i] = v cannot be recorded on the tape. Use the "
            "functional update x = tape.at(x)[i].set(v) (or .add(v), .multiply(v)), "
            "differentiable with respect to both x and v, or build the array from its "
            "parts with np.where(mask, v, x), np.stack or np.concatenate"
        )

    def __len__(self) -> int:
        return len(self.value)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    @property
    def shape(self) -> tuple:
        return np.shape(self.value)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def dtype(self) -> np.dtype:
        value = _strip_one(self)
        return getattr(value, "dtype", None) or np.result_type(value)

    @property
    def T(self) -> Any:
        return apply(np.transpose, (self,))

    @property
    def real(self) -> Any:
        return apply(np.real, (self,))

    @property
    def imag(self) -> Any:
        return apply(np.imag, (self,))

    # -- the ndarray methods people call, recorded as the NumPy functions ---------------

    sum = _recorded_method(np.sum)
    mean = _recorded_method(np.mean)
    max = _recorded_method(np.max)
    min = _recorded_method(np.min)
    prod = _recorded_method(np.prod)
    var = _recorded_method(np.var)
    std = _recorded_method(np.std)
    cumsum = _recorded_method(np.cumsum)
    cumprod = _recorded_method(np.cumprod)
    argmax = _recorded_method(np.argmax)
    argmin = _recorded_method(np.argmin)

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return apply(np.reshape, (self, shape), kwargs)

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return apply(np.transpose, (self, axes or None))

    def dot(self, other: Any) -> Any:
        return apply(np.dot, (self, other))

    ravel = _recorded_method(np.ravel)

    def flatten(self) -> Any:
        return apply(np.ravel, (self,))

    squeeze = _recorded_method(np.squeeze)

    def swapaxes(self, axis1: Any, axis2: Any) -> Any:
        return apply(np.swapaxes, (self, axis1, axis2))

    def astype(self, dtype: Any, **kwargs: Any) -> Any:
        from sensitivities.shape import astype

        return apply(astype, (self, dtype), kwargs)

    clip = _recorded_method(np.clip)

    def conj(self) -> Any:
        return apply(np.conjugate, (self,))

    conjugate = conj

    diagonal = _recorded_method(np.diagonal)
    trace = _recorded_method(np.trace)
    repeat = _recorded_method(np.repeat)
    take = _recorded_method(np.take)

    def compress(self, condition: Any, axis: Any = None) -> Any:
        return apply(np.compress, (condition, self), {"axis": axis})

    copy = _recorded_method(np.copy)
    round = _recorded_method(np.round)
    all = _recorded_method(np.all)
    any = _recorded_method(np.any)
    argsort = _recorded_method(np.argsort)

    def nonzero(self) -> Any:
        return apply(np.nonzero, (self,))

    searchsorted = _recorded_method(np.searchsorted)

    @property
    def mT(self) -> Any:
        return apply(np.matrix_transpose, (self,))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    # ndarray methods that change the array in place have no recordable meaning
    sort = _in_place("sort", "the sorted copy x = np.sort(x)")
    partition = _in_place("partition", "x = np.partition(x, kth)")
    fill = _in_place("fill", "np.full_like(x, v), or np.where(mask, v, x)")
    put = _in_place("put", "the functional update x = tape.at(x)[indices].set(v)")
    resize = _in_place("resize", "x = np.resize(x, shape)")

    def item(self, *args: Any) -> Any:
        raise NodeConversionError(
            "node.item() would return a plain number and lose the gradient; index the "
            "node instead (x[()] or x[i]), or take node.value for a constant"
        )

    tolist = item


class Leaf(Node):
    """An input recorded on ``tape``: ``Leaf(tape, value)``, value a float or an ndarray.

    >>> from tape import Tape, Leaf
    >>> t = Tape()
    >>> Leaf(t, 0.25)
    Leaf{float64} 0.25
    """

    __slots__ = ()

    def __init__(self, tape: Tape, value: Any) -> None:
        if not isinstance(tape, Tape):
            raise TypeError(f"Leaf(tape, value) needs a Tape, got {type(tape).__name__}")
        _check_differentiable_value(value)
        self.value = value
        self.tape = tape
        self.seal = [(-1, value, fingerprint(value))] if type(value) is np.ndarray else None
        self.pos = len(tape.records)
        tape.records.append(self)

    def __repr__(self) -> str:
        return f"Leaf{{{dtype_name(self.value)}}} {preview(self.value)}"


class Branch(Node):
    """The recorded result of ``f(*args, **kwargs)``: ``.value``, ``.f``, ``.args``,
    ``.kwargs``, ``.tape`` and ``.pos``. The engine makes these as calls are recorded.

    ``.vals`` is ``args`` with this tape's nodes replaced by their values (what ``f`` was
    called with, and what the rules are handed), and ``.parents`` the positions in ``args``
    that hold this tape's nodes: the reverse pass reads both instead of searching ``args``.

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> x = Leaf(Tape(), 0.5)
    >>> y = np.power(np.sin(x), 2)
    >>> y.f is np.power, y.args[0].f is np.sin, y.args[1], y.pos, y.parents
    (True, True, 2, 2, (0,))
    """

    __slots__ = ("f", "args", "kwargs", "vals", "parents")

    def __init__(
        self,
        tape: Tape,
        value: Any,
        f: Any,
        args: tuple,
        kwargs: Any,
        vals: tuple,
        parents: tuple,
        seal: list | None = None,
    ) -> None:
        # apply, which makes nearly every Branch, sets the same slots inline
        self.value = value
        self.tape = tape
        self.f = f
        self.args = args
        self.kwargs = kwargs
        self.vals = vals
        self.parents = parents
        self.seal = seal
        self.pos = len(tape.records)
        tape.records.append(self)

    def __repr__(self) -> str:
        return f"Branch{{{dtype_name(self.value)}}} {preview(self.value)} f={function_name(self.f)}"


# -- recording ------------------------------------------------------------------------


def _strip_one(value: Any) -> Any:
    while isinstance(value, Node):
        value = value.value
    return value


# Compiled tapes (tape.compiled) add a hook here while they record: it is told of every
# plain result computed from nodes (a comparison, argmax, bool(node)), so that a replay can
# check that the function still takes the same path. Empty, it costs one global read.
plain_result_hooks: list[Callable] = []


def _plain(f: Any, args: tuple, kwargs: Any) -> Any:
    """``f`` on the plain values inside ``args``: a result that carries no gradient."""
    result = f(*_strip(args), **kwargs) if kwargs else f(*_strip(args))
    if plain_result_hooks:
        for hook in plain_result_hooks:
            hook(f, args, kwargs, result)
    return result


def _strip(args: Any) -> Any:
    """The plain values inside ``args``, through every level of nesting."""
    out = []
    for a in args:
        if isinstance(a, Node):
            a = _strip_one(a)
        elif type(a) is list or type(a) is tuple:
            a = type(a)(_strip(a))
        out.append(a)
    return tuple(out)


def innermost_tape(args: Any) -> Tape | None:
    """The tape of highest level among the nodes in ``args`` (and in lists/tuples there)."""
    tape = None
    for a in args:
        if isinstance(a, Node):
            if tape is None or a.tape.level > tape.level:
                tape = a.tape
        elif type(a) is list or type(a) is tuple:
            t = innermost_tape(a)
            if t is not None and (tape is None or t.level > tape.level):
                tape = t
    return tape


def _how_to_register(f: Any, argnum: int) -> str:
    name = function_name(f)
    module = str(getattr(f, "__module__", "") or "")
    if module.startswith("numpy") or (isinstance(f, np.ufunc) and getattr(np, name, None) is f):
        qual = f"np.{name}"
    elif getattr(sys.modules.get("scipy.special"), name, None) is f:
        qual = f"scipy.special.{name}"
    else:
        qual = name
    return (
        f"register one with\n\n    @tape.sensitivity({qual}, {argnum})\n"
        "    def _(y, ybar, *args, **kwargs):\n"
        f"        return ...  # the adjoint of argument {argnum}\n"
    )


def apply(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """Call ``f(*args, **kwargs)`` where some arguments may be nodes, recording it.

    A function with sensitivities records one Branch on the innermost tape; a
    non-differentiable one computes on plain values; one with neither is entered
    (its NumPy implementation runs on the nodes, recording its inner calls).
    """
    tape = None  # innermost_tape(args), inline: a call fewer on every record
    for a in args:
        if isinstance(a, Node):
            if tape is None or (a.tape is not tape and a.tape.level > tape.level):
                tape = a.tape
        elif type(a) is list or type(a) is tuple:
            tape = innermost_tape(args)
            break
    rules = _rules_get(f)
    if tape is None or rules is None or rules.nondiff or (kwargs and "out" in kwargs):
        return _unrecorded(f, tape, rules, args, kwargs)
    records = tape.records
    if not records:
        raise ValueError(_STALE)
    argnums = rules.argnums
    seal = None
    vals = []
    parents = ()
    for i, a in enumerate(args):
        if isinstance(a, Node):
            if a.tape is tape:
                if i not in argnums:
                    raise _missing_rule(f, i)
                a = a.value
                parents += (i,)
        elif type(a) is _ndarray:
            seal = _sealed(seal, i, a)
        elif type(a) is list or type(a) is tuple:
            a, seal, held = _unbox_sequence(f, i, a, tape, argnums, seal)
            if held:
                parents += (i,)
        vals.append(a)
    vals = tuple(vals)
    if kwargs:
        for k, v in kwargs.items():
            if type(v) is _ndarray:
                seal = _sealed(seal, k, v)
            elif isinstance(v, Node) or (
                (type(v) is list or type(v) is tuple) and innermost_tape(v) is not None
            ):
                return _apply_placing_keywords(f, args, kwargs)
        try:
            value = f(*vals, **kwargs)
        except Exception as error:
            _explain_mix(error, f, vals)
            raise
    else:
        kwargs = _NO_KWARGS
        call = f
        if f in _SCALAR_ARITHMETIC and (
            type(vals[0]) in _NUMPY_SCALARS or type(vals[-1]) in _NUMPY_SCALARS
        ):
            call = _SCALAR_ARITHMETIC[f]
        try:
            value = call(*vals)
        except Exception as error:
            _explain_mix(error, f, vals)
            raise
    if type(value) is _ndarray and value.base is None:
        # A result the tape made itself: freezing it costs nothing and stops any later
        # in-place change at the line that tries it. Views share the data of an array that
        # is frozen or fingerprinted already.
        value.setflags(False)  # write=False, passed positionally: a third of the cost
    node = _new_node(Branch)  # Branch.__init__'s work without its call: most records pass here
    node.value = value
    node.tape = tape
    node.f = f
    node.args = args
    node.kwargs = kwargs
    node.vals = vals
    node.parents = _PARENTS.setdefault(parents, parents)
    node.seal = seal
    node.pos = len(records)
    records.append(node)
    if _watching:
        _observer(node)
    return node


def _unrecorded(f: Any, tape: Tape | None, rules: Any, args: tuple, kwargs: dict | None) -> Any:
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
    if not tape.records:
        raise ValueError(_STALE)
    if keyword_only and rules is not None and not rules.nondiff:
        return _apply_placing_keywords(f, args, kwargs)
    if kwargs and kwargs.get("out") is not None and (rules is None or not rules.nondiff):
        raise TypeError(
            f"np.{function_name(f)}(..., out=...) would write the result into an array "
            "in place, which the tape cannot record; drop out= and use the returned value"
        )
    if rules is None:
        return _enter(f, tape, args, kwargs or {})
    if rules.nondiff:
        for keyword, position in rules.guarded:
            held = kwargs.get(keyword) if kwargs else None
            if position < len(args):
                held = args[position]
            if innermost_tape((held,)) is not None:
                raise MissingRuleError(
                    f"{function_name(f)} is not differentiable with respect to {keyword!r}, "
                    f"which is a node here; {_how_to_register(f, position)}"
                )
        return _plain(f, args, kwargs)
    return apply(f, args, {k: v for k, v in kwargs.items() if k != "out"})  # out=None


def _explain_mix(error: Exception, f: Any, vals: tuple) -> None:
    """Where a call that mixes array libraries (NumPy and Dask, NumPy and CuPy) fails,
    say which arrays met: the library's own message may not mention the mix."""
    kinds = [_kind(v) for v in vals]
    libraries = {k.split(".")[0] for k in kinds if k}
    if len(libraries) > 1:
        error.add_note(
            f"while recording {function_name(f)} on {', '.join(k or 'a scalar' for k in kinds)}"
            ": arrays of different libraries meet here, and the one that is not NumPy decides "
            "(the error above is its own). Check the shapes, or where it refuses ndarrays, "
            "convert them first (dask.array.from_array, cupy.asarray)"
        )


def _kind(v: Any) -> str:
    if type(v) is np.ndarray:
        return f"numpy.ndarray{list(v.shape)}"
    if is_duck_array(v):
        return f"{type(v).__module__}.{type(v).__name__}{list(v.shape)}"
    return ""


_rules_get = registry._registry.get
_new_node = object.__new__
_ndarray = np.ndarray
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
_PARENTS: dict[tuple, tuple] = {}  # one shared tuple per set of positions, not one per Branch

_STALE = (
    "this node belongs to a tape whose gradient was already taken and cleared: a node "
    "escaped from the function given to grad (kept in a global, a list or a closure). "
    "Return what you need from the function, or keep node.value as a constant"
)


def _apply_placing_keywords(f: Any, args: tuple, kwargs: dict) -> Any:
    """``apply`` for a call with a node among its keyword arguments (``np.clip(x,
    a_max=m)``): rules are keyed by position, so each such keyword moves to its place among
    the positional arguments, the places before it taken from the other keywords or
    filled with their defaults. Where ``f``'s signature has no such place (a keyword-only
    argument, ``**kwargs``), a TypeError asks for the argument by position."""
    params = _positional_parameters(f)
    kwargs = dict(kwargs)
    if f is np.clip and len(args) == 1 and not {"a_min", "a_max"} & kwargs.keys():
        # NumPy 2's keyword-only spelling np.clip(x, min=..., max=...), either one optional
        kwargs["a_min"], kwargs["a_max"] = kwargs.pop("min", None), kwargs.pop("max", None)
    places = {p.name: i for i, p in enumerate(params) if p.kind == p.POSITIONAL_OR_KEYWORD}
    held = [k for k, v in kwargs.items() if innermost_tape((v,)) is not None]
    if not all(k in places and places[k] >= len(args) for k in held):
        raise _keyword_node(f, kwargs)
    args = list(args)
    for p in params[len(args) : max(places[k] for k in held) + 1]:
        if p.name in kwargs:
            args.append(kwargs.pop(p.name))
        elif p.default is not p.empty:
            args.append(p.default)
        else:
            raise _keyword_node(f, kwargs)
    return apply(f, tuple(args), kwargs)


def _positional_parameters(f: Any) -> list:
    """The parameters of ``f`` that a positional argument can fill, in order ([] where
    Python cannot tell: a ufunc, a builtin)."""
    params = _SIGNATURES.get(f)
    if params is None:
        try:
            every = inspect.signature(f).parameters.values()
        except (TypeError, ValueError):
            every = ()
        params = []
        for p in every:
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                break
            params.append(p)
        _SIGNATURES[f] = params
    return params


_SIGNATURES: dict[Any, list] = {}


def _keyword_node(f: Any, kwargs: dict) -> TypeError:
    name = next(k for k, v in kwargs.items() if innermost_tape((v,)) is not None)
    return TypeError(
        f"{function_name(f)} got a node as keyword argument {name!r}; "
        "pass differentiable arguments positionally"
    )


def _missing_rule(f: Any, i: int) -> MissingRuleError:
    return MissingRuleError(
        f"{function_name(f)} has no sensitivity for argument {i}, which is a node "
        f"here; {_how_to_register(f, i)}"
    )


def _unbox_sequence(f, i, seq, tape, argnums, seal):
    """A list/tuple argument with ``tape``'s nodes unboxed, its arrays sealed, and
    whether it held any of ``tape``'s nodes."""
    out = []
    held = False
    for j, b in enumerate(seq):
        if isinstance(b, Node):
            if b.tape is tape:
                if i not in argnums:
                    raise _missing_rule(f, i)
                b = b.value
                held = True
        elif type(b) is np.ndarray:
            seal = _sealed(seal, (i, j), b)
        out.append(b)
    return type(seq)(out), seal, held


# -- mutation detection -------------------------------------------------------------------
#
# NumPy arrays have no version counter. Arrays the tape computes are made read-only; each
# array it was handed (a Leaf's input, an ndarray constant among a Branch's arguments) is
# fingerprinted when recorded and checked when the reverse pass reaches the record.
# Scalars are immutable and cost nothing. Small arrays keep a private copy of their bytes
# (exact); larger ones keep the wrap-around sum of their bits (catches any single change
# exactly) and a sum of their values weighted by position (catches rearrangements and sign
# flips): two passes over memory, about 0.5 ms for 8 MB.

_SMALL = 128 * 1024  # bytes: up to this size a copy (memcpy) is cheaper than the checksum


def fingerprint(a: np.ndarray) -> Any:
    """A value that changes when ``a``'s contents change in place.

    >>> import numpy as np
    >>> from tape.core import fingerprint
    >>> a = np.arange(1000.0)
    >>> before = fingerprint(a)
    >>> a[[1, 2]] = a[[2, 1]]
    >>> fingerprint(a) == before
    False
    """
    if a.nbytes <= _SMALL or a.dtype.kind not in "biufc":
        return a.tobytes()
    flat = np.ascontiguousarray(a).reshape(-1)
    bits = flat.view(np.uint64) if flat.nbytes % 8 == 0 else flat.view(np.uint8)
    total = int(np.add.reduce(bits, dtype=np.uint64))
    kind = flat.dtype.kind
    if kind == "c":
        flat = flat.view(f"f{flat.dtype.itemsize // 2}")
    elif kind != "f":
        flat = flat.astype(np.float64)
    # A sum weighted by position, as rows of _WIDTH elements: einsum, not BLAS, whose
    # threads make a product erratic on a busy machine.
    rows, rest = divmod(flat.size, _WIDTH)
    per_row = np.einsum("ij,j->i", flat[: rows * _WIDTH].reshape(rows, _WIDTH), _COLUMN_WEIGHTS)
    row_weights = 1.0 + (np.arange(rows + 1) * 0.41421356237309515) % 1.0
    weighted = np.einsum("i,i->", per_row, row_weights[:rows]) + row_weights[rows] * np.einsum(
        "i,i->", flat[rows * _WIDTH :], _COLUMN_WEIGHTS[:rest]
    )
    return total, weighted.tobytes()


_WIDTH = 4096
# distinct weights in [1, 2) (a Weyl sequence): any swap of two different values changes the sum
_COLUMN_WEIGHTS = 1.0 + (np.arange(_WIDTH) * 0.6180339887498949) % 1.0


def _sealed(seal: list | None, key: Any, a: np.ndarray) -> list:
    entry = (key, a, fingerprint(a))
    if seal is None:
        return [entry]
    seal.append(entry)
    return seal


def verify(node: Node) -> None:
    """Raise ``MutationError`` if an array ``node`` recorded has changed since."""
    for key, a, print_ in node.seal:
        if fingerprint(a) != print_:
            raise MutationError(_mutation_message(node, key))


def _mutation_message(node: Node, key: Any) -> str:
    if key == -1:
        what = "the value of" if isinstance(node, Branch) else "the input held by"
    elif isinstance(key, str):
        what = f"keyword argument {key!r} of"
    elif isinstance(key, tuple):
        what = f"element {key[1]} of argument {key[0]} of"
    else:
        what = f"argument {key} of"
    return (
        f"{what} {describe(node)} was changed in place after it was recorded\n"
        "The reverse pass needs it as it was, and would return a wrong gradient. Do not "
        "write into an array (a[i] = ..., +=, out=, sort()) between using it and taking "
        "the gradient: make a copy first (a = a.copy()), or update functionally with "
        "tape.at(a)[i].set(v)."
    )


def describe(node: Node) -> str:
    """``[pos] Branch{...} f=name``, with the line that recorded it where known."""
    text = f"[{node.pos}] {node!r}"
    sites = node.tape.sites
    site = sites.get(node.pos) if sites else None
    if site is not None:
        text += "\n" + format_site(site)
    return text


def format_site(site: tuple) -> str:
    import linecache

    filename, lineno, function = site
    line = linecache.getline(filename, lineno).strip()
    return f'  recorded at File "{filename}", line {lineno}, in {function}' + (
        f"\n    {line}" if line else ""
    )


# -- the garbage collector ---------------------------------------------------------------
#
# Records and their tape form reference cycles, and a long forward or reverse pass makes
# millions of objects that the collector would scan again and again for nothing (grad
# frees them by clearing the tape). Passes pause it; the count makes nested passes and
# passes in several threads safe, and the collector's state is restored by the last one.

_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


class gc_paused:
    """Context manager: Python's cyclic garbage collector is off inside it (counted, so
    nested and concurrent uses are fine), and back as it was when the last one exits.

    >>> import gc
    >>> from tape.core import gc_paused
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """

    __slots__ = ()

    def __enter__(self) -> None:
        global _gc_pauses, _gc_was_enabled
        with _gc_lock:
            if _gc_pauses == 0:
                _gc_was_enabled = gc.isenabled()
                gc.disable()
            _gc_pauses += 1

    def __exit__(self, *exc: Any) -> None:
        global _gc_pauses
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _enter(f: Any, tape: Tape, args: tuple, kwargs: dict) -> Any:
    entered = registry.implementation_of(f)
    if entered is None and not isinstance(f, np.ufunc) and getattr(f, "__self__", None) is None:
        entered = getattr(f, "_implementation", None)  # NumPy's own Python code
    if entered is None:
        raise MissingRuleError(
            f"{function_name(f)} has no sensitivity and cannot be entered; {_how_to_register(f, 0)}"
        )
    start = len(tape.records)
    try:
        return entered(*args, **kwargs)
    except Exception as error:
        del tape.records[start:]  # a failed call leaves no half-recorded work behind
        if not _caused_by_conversion(error):
            raise
        raise MissingRuleError(
            f"np.{function_name(f)} has no sensitivity, and NumPy's implementation of it "
            f"cannot run on nodes (it converts them to ndarrays); {_how_to_register(f, 0)}"
        ) from error


def _caused_by_conversion(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, NodeConversionError):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def _record_primitive(key: Callable, f: Callable, args: tuple, kwargs: dict) -> Any:
    """How a ``primitive`` is called: plain values go straight to ``f``; nodes make one
    Branch of ``key`` (the primitive itself), whose value is ``key`` on the unboxed
    arguments, so that nodes of an outer tape are recorded there in turn."""
    if innermost_tape(args) is None:
        if kwargs and innermost_tape(tuple(kwargs.values())) is not None:
            raise TypeError(f"{function_name(f)}: pass nodes positionally to a primitive")
        return f(*args, **kwargs)
    if registry.lookup(key) is None:
        raise MissingRuleError(
            f"the primitive {function_name(f)} has no sensitivity; {_how_to_register(key, 0)}"
        )
    return apply(key, args, kwargs)


registry.set_recorder(_record_primitive)
