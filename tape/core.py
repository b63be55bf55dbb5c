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

import itertools
import operator
from typing import Any, Callable, Iterator

import numpy as np

from sensitivities import registry
from sensitivities.registry import function_name

from .display import dtype_name, preview

__all__ = ["Tape", "Node", "Leaf", "Branch", "NodeConversionError", "MissingRuleError", "apply"]

_levels = itertools.count()  # next() on a count is atomic under the GIL: safe across threads


class NodeConversionError(TypeError):
    """A node was asked to turn into a plain number or ndarray, which would drop it off the tape."""


class MissingRuleError(TypeError):
    """A function met a node and has no sensitivity for it (and could not be entered)."""


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

    __slots__ = ("records", "level")

    def __init__(self) -> None:
        self.records: list[Node] = []
        self.level: int = next(_levels)

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


def _check_differentiable_value(value: Any) -> None:
    while isinstance(value, Node):
        value = value.value
    if isinstance(value, (bool, int, np.bool_, np.integer)) or (
        isinstance(value, np.ndarray) and value.dtype.kind not in "fc"
    ):
        raise TypeError(
            f"a Leaf needs a floating-point or complex value, got {dtype_name(value)}: "
            "convert it first, e.g. np.asarray(x, dtype=float)"
        )
    if not isinstance(value, (float, complex, np.inexact, np.ndarray)):
        raise TypeError(
            f"a Leaf holds a float, a complex number or an ndarray, got {type(value).__name__}"
        )


class Node:
    """A recorded value. It behaves like the value: arithmetic, ``@``, indexing,
    ``.shape``, and every NumPy function, each recorded on the node's tape.
    Comparisons return plain results, so that Python control flow works.
    """

    __slots__ = ("value", "tape", "pos")
    __array_priority__ = 1000.0  # NumPy defers binary operators to us
    __hash__ = object.__hash__  # __eq__ is elementwise, identity still hashes

    value: Any
    tape: Tape
    pos: int

    # -- NumPy's protocols -------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("out") is not None:
            raise TypeError(
                f"np.{ufunc.__name__}(..., out=...) would write a node's value in place, "
                "which the tape cannot record; drop out= and use the returned value"
            )
        if method == "__call__":
            return apply(ufunc, inputs, kwargs)
        if method == "at":
            raise TypeError(
                f"np.{ufunc.__name__}.at updates an array in place, which the tape cannot "
                "record; build a new array instead (np.where, np.concatenate, np.stack)"
            )
        bound = getattr(ufunc, method)
        rules = registry.lookup(ufunc)
        if registry.lookup(bound) is None and rules is not None and rules.nondiff:
            return bound(*_strip(inputs), **kwargs)
        return apply(bound, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
        return apply(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise NodeConversionError(
            "a Node cannot be turned into an ndarray: its value would be cut off the tape "
            "and its gradient silently lost. Build arrays from nodes with np.stack, "
            "np.concatenate or np.where; use node.value for a constant copy; or register a "
            "sensitivity for the function that needs an ndarray (see tape.sensitivity)"
        )

    def __float__(self) -> float:
        raise NodeConversionError(
            "a Node cannot be turned into a Python number (float(), int(), math.*, or "
            "storing it into an ndarray with a[i] = node): its gradient would be silently "
            "lost. Use NumPy functions instead of math (np.sin, np.exp), build arrays with "
            "np.stack or np.concatenate, or take node.value for a constant"
        )

    __int__ = __complex__ = __index__ = __float__

    def __bool__(self) -> bool:
        return bool(_strip_one(self))

    # -- arithmetic, each recorded as the NumPy ufunc it means ----------------------------

    def __add__(self, other):
        return apply(np.add, (self, other))

    def __radd__(self, other):
        return apply(np.add, (other, self))

    def __sub__(self, other):
        return apply(np.subtract, (self, other))

    def __rsub__(self, other):
        return apply(np.subtract, (other, self))

    def __mul__(self, other):
        return apply(np.multiply, (self, other))

    def __rmul__(self, other):
        return apply(np.multiply, (other, self))

    def __truediv__(self, other):
        return apply(np.true_divide, (self, other))

    def __rtruediv__(self, other):
        return apply(np.true_divide, (other, self))

    def __floordiv__(self, other):
        return apply(np.floor_divide, (self, other))

    def __rfloordiv__(self, other):
        return apply(np.floor_divide, (other, self))

    def __mod__(self, other):
        return apply(np.remainder, (self, other))

    def __rmod__(self, other):
        return apply(np.remainder, (other, self))

    def __pow__(self, other):
        return apply(np.power, (self, other))

    def __rpow__(self, other):
        return apply(np.power, (other, self))

    def __matmul__(self, other):
        return apply(np.matmul, (self, other))

    def __rmatmul__(self, other):
        return apply(np.matmul, (other, self))

    def __neg__(self):
        return apply(np.negative, (self,))

    def __pos__(self):
        return apply(np.positive, (self,))

    def __abs__(self):
        return apply(np.absolute, (self,))

    # -- comparisons give plain results -----------------------------------------------

    def __lt__(self, other):
        return apply(np.less, (self, other))

    def __le__(self, other):
        return apply(np.less_equal, (self, other))

    def __gt__(self, other):
        return apply(np.greater, (self, other))

    def __ge__(self, other):
        return apply(np.greater_equal, (self, other))

    def __eq__(self, other):
        return apply(np.equal, (self, other))

    def __ne__(self, other):
        return apply(np.not_equal, (self, other))

    # -- indexing and the array attributes ---------------------------------------------

    def __getitem__(self, index):
        return apply(operator.getitem, (self, index))

    def __setitem__(self, index, value):
        raise TypeError(
            "nodes are immutable: x[i] = v cannot be recorded on the tape. Build the new "
            "array functionally instead, e.g. np.where(mask, v, x) or np.concatenate"
            "([x[:i], v[None], x[i + 1:]])"
        )

    def __len__(self) -> int:
        return len(self.value)

    def __iter__(self):
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
    def T(self):
        return apply(np.transpose, (self,))

    # -- the ndarray methods people call, recorded as the NumPy functions ---------------

    def sum(self, *args, **kwargs):
        return apply(np.sum, (self, *args), kwargs)

    def mean(self, *args, **kwargs):
        return apply(np.mean, (self, *args), kwargs)

    def max(self, *args, **kwargs):
        return apply(np.max, (self, *args), kwargs)

    def min(self, *args, **kwargs):
        return apply(np.min, (self, *args), kwargs)

    def prod(self, *args, **kwargs):
        return apply(np.prod, (self, *args), kwargs)

    def var(self, *args, **kwargs):
        return apply(np.var, (self, *args), kwargs)

    def std(self, *args, **kwargs):
        return apply(np.std, (self, *args), kwargs)

    def cumsum(self, *args, **kwargs):
        return apply(np.cumsum, (self, *args), kwargs)

    def cumprod(self, *args, **kwargs):
        return apply(np.cumprod, (self, *args), kwargs)

    def argmax(self, *args, **kwargs):
        return apply(np.argmax, (self, *args), kwargs)

    def argmin(self, *args, **kwargs):
        return apply(np.argmin, (self, *args), kwargs)

    def reshape(self, *shape, **kwargs):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return apply(np.reshape, (self, shape), kwargs)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return apply(np.transpose, (self, axes or None))

    def dot(self, other):
        return apply(np.dot, (self, other))

    def ravel(self, *args, **kwargs):
        return apply(np.ravel, (self, *args), kwargs)

    def flatten(self):
        return apply(np.ravel, (self,))

    def squeeze(self, *args, **kwargs):
        return apply(np.squeeze, (self, *args), kwargs)

    def swapaxes(self, axis1, axis2):
        return apply(np.swapaxes, (self, axis1, axis2))

    def astype(self, dtype, **kwargs):
        from sensitivities.shape import astype

        return apply(astype, (self, dtype), kwargs)

    def clip(self, *args, **kwargs):
        return apply(np.clip, (self, *args), kwargs)

    def conj(self):
        return apply(np.conjugate, (self,))

    conjugate = conj

    def item(self, *args):
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
        self.pos = len(tape.records)
        tape.records.append(self)

    def __repr__(self) -> str:
        return f"Leaf{{{dtype_name(self.value)}}} {preview(self.value)}"


class Branch(Node):
    """The recorded result of ``f(*args, **kwargs)``: ``.value``, ``.f``, ``.args``,
    ``.kwargs``, ``.tape`` and ``.pos``. The engine makes these as calls are recorded.
    """

    __slots__ = ("f", "args", "kwargs")

    def __init__(self, tape: Tape, value: Any, f: Any, args: tuple, kwargs: dict) -> None:
        self.value = value
        self.tape = tape
        self.f = f
        self.args = args
        self.kwargs = kwargs
        self.pos = len(tape.records)
        tape.records.append(self)

    def __repr__(self) -> str:
        return f"Branch{{{dtype_name(self.value)}}} {preview(self.value)} f={function_name(self.f)}"


# -- recording ------------------------------------------------------------------------


def _strip_one(value: Any) -> Any:
    while isinstance(value, Node):
        value = value.value
    return value


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


def unbox(args: tuple, tape: Tape) -> tuple:
    """``args`` with the nodes of ``tape`` replaced by their values (one list level deep)."""
    out = []
    for a in args:
        if isinstance(a, Node):
            if a.tape is tape:
                a = a.value
        elif type(a) is list or type(a) is tuple:
            a = type(a)(b.value if isinstance(b, Node) and b.tape is tape else b for b in a)
        out.append(a)
    return tuple(out)


def holds_node_of(a: Any, tape: Tape) -> bool:
    """Whether argument ``a`` is, or is a list/tuple holding, a node of ``tape``."""
    if isinstance(a, Node):
        return a.tape is tape
    if type(a) is list or type(a) is tuple:
        return any(isinstance(b, Node) and b.tape is tape for b in a)
    return False


def _how_to_register(f: Any, argnum: int) -> str:
    name = function_name(f)
    qual = f"np.{name}" if isinstance(f, np.ufunc) or getattr(f, "__module__", "").startswith("numpy") else name
    return (
        f"register one with\n\n    @tape.sensitivity({qual}, {argnum})\n"
        f"    def _(y, ybar, *args, **kwargs):\n        return ...  # the adjoint of argument {argnum}\n"
    )


def apply(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """Call ``f(*args, **kwargs)`` where some arguments may be nodes, recording it.

    A function with sensitivities records one Branch on the innermost tape; a
    non-differentiable one computes on plain values; one with neither is entered
    (its NumPy implementation runs on the nodes, recording its inner calls).
    """
    if kwargs is None:
        kwargs = {}
    tape = innermost_tape(args)
    if tape is None:
        return f(*args, **kwargs)
    rules = registry.lookup(f)
    if rules is None:
        return _enter(f, tape, args, kwargs)
    if rules.nondiff:
        return f(*_strip(args), **kwargs)
    for i, a in enumerate(args):
        if holds_node_of(a, tape) and i not in rules.argnums:
            raise MissingRuleError(
                f"{function_name(f)} has no sensitivity for argument {i}, which is a node "
                f"here; {_how_to_register(f, i)}"
            )
    if kwargs and innermost_tape(tuple(kwargs.values())) is not None:
        names = [k for k, v in kwargs.items() if innermost_tape((v,)) is not None]
        raise TypeError(
            f"{function_name(f)} got a node as keyword argument {names[0]!r}; "
            "pass differentiable arguments positionally"
        )
    value = f(*unbox(args, tape), **kwargs)
    return Branch(tape, value, f, args, kwargs)


def _enter(f: Any, tape: Tape, args: tuple, kwargs: dict) -> Any:
    impl = registry.implementation_of(f)
    entered = impl or getattr(f, "_implementation", None)
    if entered is None or isinstance(f, np.ufunc) or getattr(f, "__self__", None) is not None:
        raise MissingRuleError(
            f"{function_name(f)} has no sensitivity and cannot be entered; "
            f"{_how_to_register(f, 0)}"
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
