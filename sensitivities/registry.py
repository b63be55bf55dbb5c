"""The rule registry: sensitivities keyed by function and argument index.

A *sensitivity* of argument ``argnum`` of ``f`` is a function
``rule(y, ybar, *args, **kwargs) -> xbar`` that maps the adjoint ``ybar`` of the
result ``y = f(*args, **kwargs)`` to the adjoint contribution of that argument.
Its *update form* ``rule(xbar, y, ybar, *args, **kwargs) -> xbar`` adds the
contribution into an accumulator it is handed and may do so in place.

Rules registered without types take a fast path: one dictionary look-up. Rules
registered with types are resolved through ``multipledispatch`` on the types of
the argument values, the most specific signature winning; an untyped rule of the
same function and argument is the fallback of last resort.

This module knows nothing of tapes or nodes: rules are plain NumPy over plain
values, which is what makes them differentiable again.
"""

from __future__ import annotations

import dis
import functools
import importlib
import inspect
import sys
import threading
import types
import warnings
from typing import Any, Callable

import numpy as np
from multipledispatch import Dispatcher

__all__ = [
    "first_argument",
    "sensitivity",
    "preprocess",
    "nondifferentiable",
    "implementation",
    "primitive",
    "pushforward",
    "pushforward_of",
    "lift",
    "shifted_axis",
    "Rules",
    "RuleReplacedWarning",
    "lookup",
    "value_of",
    "holds_node",
    "is_node",
    "is_primitive",
    "positional_form",
    "positional_form_of",
    "implementation_of",
    "registered_functions",
    "defer",
    "load_deferred",
    "foreign_operands",
    "foreign_handler",
    "function_name",
    "qualified_name",
]

_ANY = [object]  # multipledispatch's spelling of "any number of arguments of any type"


def function_name(f: Any) -> str:
    """A short readable name: ``multiply``, ``sum``, ``add.reduce``, ``linalg.inv``."""
    owner = getattr(f, "__self__", None)
    name = getattr(f, "__name__", None) or type(f).__name__
    if owner is not None and hasattr(owner, "nin"):  # a bound ufunc method
        return f"{owner.__name__}.{name}"
    module = getattr(f, "__module__", "") or ""
    for prefix in ("numpy.linalg", "numpy.fft", "scipy.linalg", "scipy.special"):
        if module.startswith(prefix):
            return prefix.split(".")[-1] + "." + name
    return name


# Where users import functions from, in the order a name is looked up, with the prefix
# they write it with.
_PUBLIC_MODULES = (
    ("numpy", "np"),
    ("numpy.linalg", "np.linalg"),
    ("numpy.fft", "np.fft"),
    ("numpy.lib.stride_tricks", "np.lib.stride_tricks"),
    ("scipy.special", "scipy.special"),
    ("scipy.linalg", "scipy.linalg"),
)


def qualified_name(f: Any) -> str:
    """The name a user imports ``f`` by: ``np.sin``, ``np.add.reduce``, ``np.linalg.inv``,
    ``np.lib.stride_tricks.sliding_window_view``, ``scipy.special.gammaln``; for anything
    else, its module and name (``mypackage.softplus``).

    >>> import numpy as np
    >>> qualified_name(np.lib.stride_tricks.sliding_window_view)
    'np.lib.stride_tricks.sliding_window_view'
    >>> qualified_name(np.add.reduce), qualified_name(np.linalg.eig)
    ('np.add.reduce', 'np.linalg.eig')
    """
    owner = getattr(f, "__self__", None)
    if owner is not None and hasattr(owner, "nin"):  # a bound ufunc method
        return f"{qualified_name(owner)}.{f.__name__}"
    name = getattr(f, "__name__", None) or type(f).__name__
    for module_name, prefix in _PUBLIC_MODULES:
        module = sys.modules.get(module_name)  # only what is imported: never import here
        if module is not None and getattr(module, name, None) is f:
            return f"{prefix}.{name}"
    module = str(getattr(f, "__module__", "") or "")
    return f"{module}.{name}" if module else name


class Rules:
    """Everything registered for one function.

    ``plain[argnum]`` / ``update[argnum]`` hold untyped rules;
    ``typed[(kind, argnum)]`` holds a ``Dispatcher`` once any typed rule exists
    for that slot; ``pre`` is the optional shared work done once per Branch.
    """

    __slots__ = (
        "f", "plain", "update", "typed", "pre", "nondiff", "argnums", "family", "guarded",
        "foreign", "blind", "fast", "calls",
    )  # fmt: skip

    def __init__(self, f: Any) -> None:
        self.f = f
        self.plain: dict[int, Callable] = {}
        self.update: dict[int, Callable] = {}
        self.typed: dict[tuple[str, int], Dispatcher] = {}
        self.pre: Callable | None = None
        self.nondiff = False
        # (keyword, position) of arguments of a non-differentiable function that would carry a
        # gradient (histogram's weights): a node there is an error, never a silent zero
        self.guarded: tuple = ()
        self.argnums: set[int] = set()  # the arguments with any rule, checked when recording
        self.family: str = ""  # the module that registered the first rule: docs list by family
        # a rule written outside this package and the engine (a user's): the engine hands
        # it read-only views and checks what it returns (``is_foreign``)
        self.foreign = False
        # node positions -> whether the rules for them read none of those arguments'
        # values (``blind_to``), learnt as records meet them; cleared on registration
        self.blind: dict[tuple, bool] = {}
        # node positions -> what the engine's records of a call of ``f`` with nodes
        # there share (``tape.core.recording.Call``); cleared on registration
        self.calls: dict[tuple, Any] = {}
        # ``plain`` where every rule is an untyped one of this package and there is no
        # ``pre`` (the reverse pass's fast path, one attribute to read), else None; kept
        # by ``registered``
        self.fast: dict[int, Callable] | None = self.plain

    def registered(self) -> None:
        """What is derived from the rules, made again after a registration."""
        self.blind.clear()
        self.calls.clear()
        fast = not (self.update or self.typed or self.foreign or self.pre is not None)
        self.fast = self.plain if fast else None

    def _resolve(self, kind: str, table: dict, argnum: int, vals: tuple) -> Callable | None:
        if self.typed:
            dispatcher = self.typed.get((kind, argnum))
            if dispatcher is not None:
                return dispatcher.dispatch(*map(_value_type, vals))
        return table.get(argnum)

    def rule(self, argnum: int, vals: tuple) -> Callable | None:
        """The plain rule for ``argnum`` given the argument values, or None."""
        return self._resolve("plain", self.plain, argnum, vals)

    def update_rule(self, argnum: int, vals: tuple) -> Callable | None:
        """The update-form rule for ``argnum`` given the argument values, or None."""
        return self._resolve("update", self.update, argnum, vals)

    def blind_to(self, node_args: tuple) -> bool:
        """Whether the rules for the arguments at positions ``node_args`` (each an
        untyped rule of this package, without ``pre``) read none of those arguments'
        values: ``add``'s rules return ``ybar``, ``exp``'s reads ``y``, ``x * 2.0``'s
        reads the constant. The reverse pass then hands them the nodes themselves, and
        takes no values from the tape (``tape.core.records.Branch.vals``). Learnt once
        per set of positions.

        >>> import numpy as np
        >>> lookup(np.add).blind_to((0, 1)), lookup(np.multiply).blind_to((1,))
        (True, True)
        >>> lookup(np.sin).blind_to((0,)), lookup(np.multiply).blind_to((0, 1))
        (False, False)
        """
        known = self.blind.get(node_args)
        if known is None:
            known = (
                not (self.update or self.typed or self.foreign or self.pre is not None)
                and all(i in self.plain for i in node_args)
                and all(set(node_args) <= unread_arguments(self.plain[i]) for i in node_args)
            )
            self.blind[node_args] = known
        return known

    def __repr__(self) -> str:
        return f"<Rules for {function_name(self.f)}: arguments {sorted(self.argnums)}>"


# Names whose call lets a function read its local variables without naming them.
_INTROSPECTION = frozenset(("locals", "vars", "eval", "exec", "_getframe", "currentframe"))


def unread_arguments(rule: Callable) -> frozenset:
    """The positions among the argument values a rule ``rule(y, ybar, *vals)`` is handed
    that its code never reads: no instruction of it loads the parameter, and no function
    nested in it closes over it. Anything it cannot see through (a builtin, a
    ``functools.partial``, a call of ``locals``) reads every argument.

    >>> sorted(unread_arguments(lambda y, ybar, a, b, **kw: ybar * b))
    [0]
    """
    code = getattr(rule, "__code__", None)
    if type(rule) is not types.FunctionType or code is None or set(code.co_names) & _INTROSPECTION:
        return frozenset()
    read = set(code.co_cellvars)
    for instruction in dis.get_instructions(code):
        name = instruction.opname  # LOAD_FAST and its variants across Python versions
        if "FAST" in name or "DEREF" in name or "CLOSURE" in name:
            argval = instruction.argval
            read.update(argval if isinstance(argval, tuple) else (argval,))
    params = code.co_varnames[2 : code.co_argcount]  # after y and ybar
    return frozenset(k for k, param in enumerate(params) if param not in read)


_registry: dict[Any, Rules] = {}
_implementations: dict[Any, Callable] = {}
# Kept apart from ``_registry``: a pushforward alone does not make a function
# differentiable (recording needs a sensitivity), and must not stop it being entered.
_pushforwards: dict[Any, dict[int, Callable]] = {}


def value_of(x: Any) -> Any:
    """``x`` with every node, of every tape, replaced by its plain value, through lists
    and tuples: a constant. Inside a rule it is the way to stop a gradient (a sign, a
    mask, an index computed from a value).

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> t = Tape()
    >>> value_of([Leaf(t, 1.5), (Leaf(t, np.ones(1)), 2)])
    [1.5, (array([1.]), 2)]
    """
    kind = type(x)
    if kind is np.ndarray or kind is float:
        return x  # the common constants, without the questions below
    if kind is list or kind is tuple:
        return kind(value_of(a) for a in x)
    while is_node(x):
        x = x.value
    return x


def is_node(v: Any) -> bool:
    """Whether ``v`` is a node, of any tape (not a list holding one: see ``holds_node``).
    A record of the engine's tapes is known by what it holds, its ``tape`` and a class
    that records calls: this package never imports the engine.

    >>> from tape import Tape, Leaf
    >>> is_node(Leaf(Tape(), 1.0)), is_node(1.0)
    (True, False)
    """
    return hasattr(type(v), "__record_call__") and hasattr(v, "tape")


def holds_node(x: Any) -> bool:
    """Whether ``x`` is a node, of any tape, or a list or tuple holding one.

    >>> holds_node([1.0, (2.0, 3.0)])
    False
    """
    if type(x) is list or type(x) is tuple:
        return any(holds_node(a) for a in x)
    return is_node(x)


def _value_type(v: Any) -> type:
    # Values of an inner tape may be nodes of an outer one; dispatch on what they hold.
    return type(value_of(v))


def canonical(f: Any) -> Any:
    """``f``, or the function it stands for where ``f`` is a wrapper that a layer above
    installed in NumPy's place (``tape.runtime.conversions`` marks them ``__stands_for__``):
    rules are registered and found under NumPy's own function.

    >>> canonical(np.sin) is np.sin
    True
    """
    return getattr(f, "__stands_for__", f)


def _rules_for(f: Any, module: str = "") -> Rules:
    f = canonical(f)
    rules = _registry.get(f)
    if rules is None:
        rules = _registry[f] = Rules(f)
    if not rules.family:
        rules.family = module.rpartition(".")[2]
    return rules


# The ``Rules`` registered for ``f``, or None: the dict's own ``get``, since the engine
# calls it on every record and a wrapper would double its cost.
lookup: Callable[[Any], Rules | None] = _registry.get


def implementation_of(f: Any) -> Callable | None:
    """The NumPy-level implementation registered with ``implementation(f)``, or None."""
    return _implementations.get(canonical(f))


def registered_functions() -> list:
    """Every function with a sensitivity, a non-differentiable mark or an implementation
    (SciPy's among them once SciPy is imported)."""
    load_deferred()
    return list(_registry) + [f for f in _implementations if f not in _registry]


def defer(*modules: str) -> None:
    """Name rule families that register rules for SciPy's functions: they are imported
    by ``load_deferred`` once SciPy is, so that importing the rules does not import SciPy
    (a node can only meet SciPy's functions after the program imported SciPy)."""
    _deferred.extend(modules)


def load_deferred() -> bool:
    """Import the deferred families if SciPy is imported; True if they were imported
    since the caller looked for a rule (by this thread, or by another that this one
    waited for). The engine calls it when a function met by a node has no rules."""
    if not _deferred or "scipy" not in sys.modules:
        return False
    with _loading_lock:
        if _loading.owned:  # an import inside the families: its rules are on the way
            return False
        if not _deferred:
            return True  # another thread loaded them while this one waited
        _loading.owned = True
        try:
            for module in list(_deferred):
                importlib.import_module(module)
            del _deferred[:]  # only now: a thread that comes meanwhile waits above
        finally:
            _loading.owned = False
    return True


class _Loading(threading.local):
    owned = False  # this thread is importing the deferred families


_deferred: list[str] = []
_loading = _Loading()
_loading_lock = threading.RLock()


def foreign_operands(recognises: Callable[[Any], bool], handlers: dict) -> None:
    """Register how a node meets an operand of another library that NumPy cannot take
    (SciPy's sparse matrices): ``recognises(operand)`` tells one, and ``handlers[f](a, b)``
    computes ``f(a, b)`` (``np.matmul``, ``np.multiply``) with it, recording what it needs.
    The engine asks only when a node's binary operator meets an operand of a type it
    does not know."""
    _foreign.append((recognises, handlers))


def foreign_handler(f: Any, operand: Any) -> Callable | None:
    """The handler registered for ``f`` and an operand of this kind, or None."""
    for recognises, handlers in _foreign:
        if f in handlers and recognises(operand):
            return handlers[f]
    return foreign_handler(f, operand) if load_deferred() else None


_foreign: list[tuple[Callable, dict]] = []


def _register(kind: str, f: Any, argnum: int, types: tuple, override: bool) -> Callable:
    _check_target(f, argnum, "sensitivity")
    for t in types:
        if not isinstance(t, (type, tuple)):
            raise TypeError(f"types must be classes (or tuples of classes), got {t!r}")

    def register(rule: Callable) -> Callable:
        if not callable(rule):
            raise TypeError(f"a sensitivity must be callable, got {rule!r}")
        rules = _rules_for(f, getattr(rule, "__module__", "") or "")
        table = rules.plain if kind == "plain" else rules.update
        key = (kind, argnum)
        if types:
            dispatcher = rules.typed.get(key)
            if dispatcher is None:
                dispatcher = rules.typed[key] = Dispatcher(f"{function_name(f)}_{kind}_{argnum}")
                if argnum in table:
                    dispatcher.add((_ANY,), table[argnum])
            if (f, key, types) in _typed_signatures:
                _replacing(f, argnum, override)
            _typed_signatures.add((f, key, types))
            dispatcher.add((*types, _ANY), rule)
        else:
            if argnum in table and not getattr(table[argnum], "provisional", False):
                # a rule marked provisional (the transpose of a public pushforward, or its
                # "reverse mode needs a sensitivity" error) is replaced without a warning
                _replacing(f, argnum, override)
            table[argnum] = rule
            if key in rules.typed:
                rules.typed[key].add((_ANY,), rule)
        rules.argnums.add(argnum)
        rules.foreign = rules.foreign or is_foreign(rule)
        rules.registered()
        return rule

    return register


_OURS = ("sensitivities", "tape")


def is_foreign(rule: Callable) -> bool:
    """Whether ``rule`` was written outside this package and the engine: by a user, whose
    rule may write into the arrays it is handed or return the wrong thing, which the
    engine then guards against (the rules here are tested not to). A wrapper made here
    around a user's function (``__wrapped__``) is the user's."""
    module = getattr(inspect.unwrap(rule), "__module__", None) or ""
    return module.partition(".")[0] not in _OURS


_typed_signatures: set = set()  # (f, (kind, argnum), types) of every typed rule


def _check_target(f: Any, argnum: int, what: str) -> None:
    """A clear TypeError, at registration, for a rule that could never be used."""
    if not callable(f):
        raise TypeError(f"{what}(f, argnum) needs a function f, got {type(f).__name__} {f!r}")
    if not isinstance(argnum, int) or isinstance(argnum, bool) or argnum < 0:
        raise TypeError(f"argnum must be a non-negative int, got {argnum!r}")
    if isinstance(f, types.FunctionType) and f not in _primitives:
        raise TypeError(
            f"{what}({f.__name__}, {argnum}): {f.__name__} is a plain Python function, and "
            "calls of it are never recorded (only NumPy's functions and primitives are), so "
            f"this rule would never be used. Decorate it with @tape.primitive first, then "
            "register its rules"
        )
    arity = _arity(f)
    if arity is not None and argnum >= arity:
        raise TypeError(
            f"{what}({function_name(f)}, {argnum}): {function_name(f)} takes "
            f"{arity} positional argument{'s' * (arity != 1)} (argnum counts from 0)"
        )


def _arity(f: Any) -> int | None:
    """How many positional arguments ``f`` takes, or None where there is no limit or
    Python cannot tell."""
    if hasattr(f, "nin") and hasattr(f, "nout"):  # a ufunc
        return f.nin
    try:
        params = inspect.signature(getattr(f, "__wrapped__", f)).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = [p.kind for p in params]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(k in positional for k in kinds)


class RuleReplacedWarning(UserWarning):
    """A rule was registered where one existed already, without ``override=True``."""


def _replacing(f: Any, argnum: int, override: bool) -> None:
    if not override:
        warnings.warn(
            f"replacing the rule of {function_name(f)} for argument {argnum}, for the whole "
            "process; pass override=True to say this is meant",
            RuleReplacedWarning,
            stacklevel=4,
        )


class _Sensitivity:
    """Register a sensitivity of argument ``argnum`` (0-based) of ``f``.

    ``rule(y, ybar, *args, **kwargs) -> xbar`` receives the result ``y``, its adjoint
    ``ybar`` and the arguments exactly as ``f`` received them, and returns the adjoint
    contribution of ``args[argnum]``. It may return an array of the broadcast shape:
    the engine sums it back to the argument's shape. Where ``args[argnum]`` is a list
    or tuple of arrays (``np.concatenate``, ``np.stack``), the rule returns one
    contribution per element (``None`` for none).

    ``types``, when given, specialise the rule by the types of the argument values
    (``np.ndarray``, ``float``, ...) through ``multipledispatch``; the most specific
    registered rule wins, and a rule registered without types is the fallback.

    A rule replaces one registered before for the same function, argument and types (the
    built-in ones included) for the whole process: that warns (``RuleReplacedWarning``)
    unless ``override=True`` says it is meant. ``f`` must be a NumPy function or a
    ``primitive``, and ``argnum`` one of its positional arguments: anything else is a
    TypeError here, not a rule that is silently never used.

    >>> import numpy as np
    >>> @primitive
    ... def cube(x):
    ...     return x ** 3
    >>> @sensitivity(cube, 0)
    ... def _(y, ybar, x):
    ...     return ybar * 3 * x ** 2
    >>> def square(x):
    ...     return x ** 2
    >>> sensitivity(square, 0)
    Traceback (most recent call last):
        ...
    TypeError: sensitivity(square, 0): square is a plain Python function, ...

    ``sensitivity.update(f, argnum, *types)`` registers the in-place form
    ``rule(xbar, y, ybar, *args, **kwargs) -> xbar``: it adds the contribution into the
    accumulator ``xbar`` and returns it. The engine only hands it an array that it owns,
    so the rule may write into it.
    """

    def __call__(
        self, f: Any, argnum: int, *types: type, override: bool = False
    ) -> Callable[[Callable], Callable]:
        return _register("plain", f, argnum, types, override)

    def update(
        self, f: Any, argnum: int, *types: type, override: bool = False
    ) -> Callable[[Callable], Callable]:
        """Register the update form ``rule(xbar, y, ybar, *args, **kwargs) -> xbar``."""
        return _register("update", f, argnum, types, override)


sensitivity = _Sensitivity()


def preprocess(f: Any) -> Callable[[Callable], Callable]:
    """Register work shared by the rules of ``f``, done once per Branch.

    ``pre(y, ybar, *args, **kwargs)`` runs once before the rules of a Branch of ``f``
    are called, and its result is handed to each rule as the keyword argument ``pre``:
    ``rule(y, ybar, *args, pre=..., **kwargs)``. Use it for a factorisation, an
    inverse or a softmax that several arguments' rules need.

    >>> import numpy as np
    >>> from tape import grad, preprocess, primitive, sensitivity
    >>> @primitive
    ... def normalise(x, s):
    ...     return s * x / np.sqrt(np.sum(x ** 2))
    >>> @preprocess(normalise)
    ... def _(y, ybar, x, s):
    ...     return np.sqrt(np.sum(x ** 2))  # the norm, once for both rules
    >>> @sensitivity(normalise, 0)
    ... def _(y, ybar, x, s, pre):
    ...     return (s * ybar - y * np.sum(ybar * y) / s) / pre
    >>> @sensitivity(normalise, 1)
    ... def _(y, ybar, x, s, pre):
    ...     return np.sum(ybar * y) / s
    >>> grad(lambda x, s: normalise(x, s)[0])(np.array([3.0, 4.0]), 2.0)
    (array([ 0.256, -0.192]), 0.6)
    """

    def register(pre: Callable) -> Callable:
        rules = _rules_for(f)
        rules.pre = pre
        rules.registered()
        return pre

    return register


def nondifferentiable(*fs: Any) -> None:
    """Mark functions whose results carry no gradient (comparisons, ``floor``, ``argmax``).

    Called on nodes, they compute on the plain values and return plain results: a
    constant, so that control flow and indexing work, and zero gradient.

    >>> import numpy as np
    >>> from tape import grad, nondifferentiable, primitive
    >>> @primitive
    ... def rounded(x):
    ...     return np.round(x)
    >>> nondifferentiable(rounded)
    >>> grad(lambda x: np.sum(x * rounded(x)))(np.array([0.4, 2.6]))
    (array([0., 3.]),)
    """
    module = sys._getframe(1).f_globals.get("__name__", "")
    for f in fs:
        _rules_for(f, module).nondiff = True


def nondifferentiable_except(f: Any, keyword: str, position: int) -> None:
    """Mark ``f`` non-differentiable in all but one argument, which has no rule: a node
    there (by ``keyword`` or at ``position``) raises instead of silently getting zero."""
    rules = _rules_for(f, sys._getframe(1).f_globals.get("__name__", ""))
    rules.nondiff = True
    rules.guarded += ((keyword, position),)


def pushforward(f: Any, argnum: int, *, override: bool = False) -> Callable[[Callable], Callable]:
    """Register the forward-mode rule of argument ``argnum`` of ``f``.

    ``rule(y, xdot, *args, **kwargs) -> ydot`` maps the tangent ``xdot`` of
    ``args[argnum]`` to its contribution to the tangent of ``y = f(*args, **kwargs)``.
    Tangents carry a leading axis of directions: ``xdot`` has shape
    ``(k,) + np.shape(args[argnum])`` and the result ``(k,) + np.shape(y)`` (or one that
    broadcasts to it). For a list or tuple argument, ``xdot`` is a list with one tangent
    per element, ``None`` for a constant one. The rule may return ``None`` for no
    contribution, or ``NotImplemented`` to hand this call to the derived rule.

    A function with a sensitivity but no pushforward still has one: forward mode derives
    it from the sensitivity. Register one where that is too slow.

    >>> import numpy as np
    >>> @primitive
    ... def cube(x):
    ...     return x ** 3
    >>> @pushforward(cube, 0)
    ... def _(y, xdot, x):
    ...     return xdot * 3 * x ** 2
    >>> pushforward_of(cube, 0) is _
    True
    """
    _check_target(f, argnum, "pushforward")

    def register(rule: Callable) -> Callable:
        if not callable(rule):
            raise TypeError(f"a pushforward must be callable, got {rule!r}")
        if argnum in _pushforwards.get(f, {}):
            _replacing(f, argnum, override)
        _pushforwards.setdefault(f, {})[argnum] = rule
        return rule

    return register


def pushforward_of(f: Any, argnum: int) -> Callable | None:
    """The pushforward registered for argument ``argnum`` of ``f``, or None."""
    rules = _pushforwards.get(f)
    return None if rules is None else rules.get(argnum)


# -- values with one more axis in front: forward mode's directions, vmap's batch ----------


def lift(t: Any, rank: int) -> Any:
    """``t``, whose first axis is a leading one (directions, or a batch), with length-1
    axes after it up to ``rank`` axes in all: so that it broadcasts, past its leading
    axis, like a value of ``rank - 1`` axes.

    >>> import numpy as np
    >>> lift(np.ones((5, 3)), 4).shape
    (5, 1, 1, 3)
    """
    if type(t) is np.ndarray:  # the common case, without NumPy's dispatch
        shape = t.shape
        missing = rank - len(shape)
        return t if missing <= 0 else t.reshape(shape[:1] + (1,) * missing + shape[1:])
    shape = np.shape(t)
    missing = rank - len(shape)
    return t if missing <= 0 else np.reshape(t, shape[:1] + (1,) * missing + shape[1:])


def shifted_axis(axis: Any, ndim: int) -> Any:
    """A value's ``axis`` (an int, a tuple or list of them, or None: all of them) as the
    axis of the same value with one more axis in front (directions, or a batch); ``ndim``
    is the value's own number of axes. An axis out of range raises NumPy's AxisError.

    >>> shifted_axis(-1, 2), shifted_axis(None, 2), shifted_axis((0, 2), 3)
    (2, (1, 2), (1, 3))
    """
    kind = type(axis)
    if kind is int or kind is tuple or axis is None:  # asked on every reduction: kept
        shifted = _SHIFTED.get((axis, ndim))
        if shifted is not None:
            return shifted
    if axis is None:
        shifted = tuple(range(1, ndim + 1))
    elif isinstance(axis, (tuple, list)):
        shifted = tuple(_shifted_one(a, ndim) for a in axis)
    else:
        shifted = _shifted_one(axis, ndim)
    if (kind is int or kind is tuple or axis is None) and len(_SHIFTED) < 4096:
        _SHIFTED[axis, ndim] = shifted
    return shifted


_SHIFTED: dict = {}  # (axis, ndim) -> the shifted axes


def _shifted_one(axis: Any, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise np.exceptions.AxisError(axis, ndim)
    return axis % max(ndim, 1) + 1


def implementation(f: Any) -> Callable[[Callable], Callable]:
    """Give ``f`` an implementation in terms of other NumPy functions.

    When ``f`` meets a node, the registered function is called instead of NumPy's own,
    and its inner calls are recorded one by one: the fall-through, made explicit.
    This is how the statistics family gives ``np.polyval``, whose NumPy code converts its
    inputs to ndarrays, Horner's scheme::

        @implementation(np.polyval)
        def _polyval(p, x):
            y = np.zeros_like(x)
            for i in range(len(p)):
                y = y * x + p[i]
            return y

    >>> import numpy as np
    >>> from tape import Tape, Leaf, grad
    >>> grad(lambda p: np.polyval(p, 2.0))(np.array([1.0, 0.0, 0.0]))  # of 4 p0 + 2 p1 + p2
    (array([4., 2., 1.]),)
    >>> t = Tape()
    >>> y = np.polyval(Leaf(t, np.array([1.0, 0.0, 0.0])), 2.0)
    >>> len(t) > 2  # entered: the calls inside are on the tape, not one polyval record
    True
    """

    def register(impl: Callable) -> Callable:
        _implementations[canonical(f)] = impl
        return impl

    return register


def positional_form(f: Any) -> Callable[[Callable], Callable]:
    """Register how a call of ``f`` with nodes among its keywords is spelled by position.

    Rules are keyed by argument position, so the engine moves a node passed by keyword to
    its positional place, reading ``f``'s signature. Where the signature cannot say (a
    keyword-only alias such as NumPy 2's ``np.clip(x, min=..., max=...)``), register
    ``placed(*args, **kwargs) -> (args, kwargs)`` returning the positional form."""

    def register(placed: Callable) -> Callable:
        _positional_forms[f] = placed
        return placed

    return register


def positional_form_of(f: Any) -> Callable | None:
    """The positional form registered for ``f``, or None."""
    return _positional_forms.get(f)


_positional_forms: dict[Any, Callable] = {}
_primitives: set = set()


def is_primitive(f: Any) -> bool:
    """Whether ``f`` was made by ``primitive``."""
    return f in _primitives


def first_argument(args: Any, test: Callable[[Any], bool]) -> Any:
    """The first argument, in ``args`` or a list or tuple there (nested or not), that
    passes ``test``; None if none does."""
    for a in args:
        if test(a):
            return a
        if type(a) is list or type(a) is tuple:
            found = first_argument(a, test)
            if found is not None:
                return found
    return None


def _records_calls(a: Any) -> bool:
    return hasattr(type(a), "__record_call__")


def primitive(f: Callable) -> Callable:
    """Make ``f`` one record on the tape: Nabla's ``@explicit_intercepts``.

    Called on nodes, the returned function records a single Branch instead of the
    operations inside ``f``; give it rules with ``sensitivity``. Called on plain values
    it is ``f``.

    A primitive follows NumPy's own idea of dispatch (NEP 18): an argument whose class
    defines ``__record_call__(primitive, f, args, kwargs)`` (the engine's nodes do) is
    handed the call, and records it.

    >>> import numpy as np
    >>> @primitive
    ... def softplus(x):
    ...     return np.logaddexp(0.0, x)
    >>> @sensitivity(softplus, 0)
    ... def _(y, ybar, x):
    ...     return ybar / (1.0 + np.exp(-x))
    >>> softplus(0.0)  # on plain values, the function itself
    np.float64(0.6931471805599453)
    """

    @functools.wraps(f)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        node = first_argument(args, _records_calls)
        if node is None and kwargs:
            node = first_argument(tuple(kwargs.values()), _records_calls)
        if node is None:
            return f(*args, **kwargs)
        return type(node).__record_call__(recorded, f, args, kwargs)

    _primitives.add(recorded)
    return recorded
