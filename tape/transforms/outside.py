"""What a function reads from outside its arguments, and whether it has changed since.

A compiled tape (``tape.transforms.compiled``) is the gradient of ``f`` only while what
``f`` reads besides its arguments holds what it held when the tape was recorded: a
replay does not run ``f``, so it would not see a global rebound (``X = 2 * X``), an
array written in place (``X[:] = 5``) or anything computed from them inside ``f``
(a centred copy). ``Reads.of(f)`` finds those places from ``f``'s code, as a tracing
compiler's guards do:

- the globals that the code of ``f`` names, its closure cells and its defaults; then,
  for each function found there (a helper, a method), its own, all the way down;
- of each object found (a module, an instance, a class), the attributes named anywhere
  in that code; of a list, tuple or dict, its entries.

Library code (NumPy's, the standard library's, an installed package's) is not walked:
its state is not the program's data. ``snapshot()`` takes what each place holds (an
array's fingerprint, ``tape.core.mutation``; a number's value; any other object's
identity), and ``changed(snapshot)`` names the first place that holds something else.

Random draws are not data that can be compared: ``streams`` are the generators ``f``
can reach (NumPy's global one, Python's, and every ``Generator``, ``RandomState`` and
``random.Random`` found in the places above or in the arguments), and
``moved(states)`` names one that moved while ``f`` ran.
"""

from __future__ import annotations

import functools
import os
import pickle
import random
import sys
import sysconfig
import types
from typing import Any, Callable

import numpy as np

import sensitivities

from ..core.mutation import fingerprint
from ..core.node import Node

__all__ = ["Reads", "state_of"]

_LIBRARY_ROOTS = frozenset(sys.stdlib_module_names) | {"numpy", "scipy", "tape", "sensitivities"}
_LIBRARY_PATHS = tuple(
    {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {os.path.dirname(os.path.dirname(__file__)), os.path.dirname(sensitivities.__file__)}
)
_MAX_PLACES = 4096  # a bound on the walk: a program reads a few dozen
_MAX_ITEMS = 1024  # entries of one list or dict compared; a longer one by its identity
_MISSING = object()

_STREAMS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator, random.Random)


class _Same:
    """The state of an object compared by identity (it holds it, so the id stays its)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: Any) -> bool:
        return type(other) is _Same and other.obj is self.obj

    __hash__ = None  # type: ignore[assignment]


def state_of(value: Any, depth: int = 3, attributes: bool = False) -> Any:
    """What ``value`` holds, as a value that compares equal exactly when it holds the
    same: an array by its shape, dtype and fingerprint; a number, string or None by
    its type and value; a list, tuple or dict by its entries' states; with
    ``attributes``, an object by those of its ``__dict__``; anything else by identity."""
    t = type(value)
    if isinstance(value, Node):
        return _Same(value)
    if isinstance(value, np.ndarray):
        return ("array", t, value.shape, value.dtype.str, fingerprint(value))
    if isinstance(value, np.generic):
        return ("scalar", t, value.tobytes())
    if value is None or t in (bool, int, str, bytes):
        return (t, value)
    if t is float or t is complex:
        return (t, repr(value))  # repr: nan is its own equal
    if depth > 0 and (t is list or t is tuple or isinstance(value, tuple)):
        if len(value) <= _MAX_ITEMS:
            return (t, tuple(state_of(v, depth - 1, attributes) for v in value))
    if depth > 0 and isinstance(value, dict) and len(value) <= _MAX_ITEMS:
        try:
            return (t, tuple((k, state_of(v, depth - 1, attributes)) for k, v in value.items()))
        except RuntimeError:  # changed size meanwhile (another thread)
            return _Same(value)
    if attributes and depth > 0 and _is_instance(value):
        return (t, state_of(vars(value), depth - 1, attributes))
    return _Same(value)


def _is_instance(value: Any) -> bool:
    return (
        hasattr(value, "__dict__")
        and not isinstance(value, (type, types.ModuleType, types.FunctionType, *_STREAMS))
        and not callable(getattr(value, "__array__", None))
    )


class Reads:
    """The places ``f`` reads from outside its arguments (see the module docstring).

    >>> import numpy as np
    >>> X = np.ones(3)
    >>> reads = Reads.of(lambda w: np.sum(X * w))
    >>> before = reads.snapshot()
    >>> X[0] = 2.0
    >>> reads.changed(before)
    'X (a global of tape.transforms.outside)'
    """

    __slots__ = ("places", "streams")

    def __init__(self) -> None:
        self.places: list[tuple[str, Callable[[], Any]]] = []  # (what it is, its current value)
        self.streams: list[tuple[str, Any]] = [
            ("NumPy's global random generator (np.random)", np.random.mtrand._rand),
            ("Python's global random generator (random)", random._inst),  # type: ignore[attr-defined]
        ]

    @classmethod
    def of(cls, f: Callable, args: Any = ()) -> Reads:
        """The places ``f`` reads, and the generators it and ``args`` can reach."""
        names: set[str] = set()
        while True:  # an object's attributes are those named by code found after it too
            known = len(names)
            reads = cls()
            _Walk(reads, names).callable(f, getattr(f, "__qualname__", "f"))
            if len(names) == known:
                break
        stream_ids = {id(s) for _, s in reads.streams}
        for what, value in _streams_in(args, "an argument"):
            if id(value) not in stream_ids:
                stream_ids.add(id(value))
                reads.streams.append((what, value))
        return reads

    def snapshot(self) -> list:
        return [state_of(read(), attributes=False) for _, read in self.places]

    def changed(self, before: list) -> str:
        """The first place whose value is not what ``before`` recorded; "" if none."""
        for (what, read), state in zip(self.places, before):
            if state_of(read(), attributes=False) != state:
                return what
        return ""

    def stream_states(self) -> list:
        return [_stream_state(s) for _, s in self.streams]

    def moved(self, before: list) -> str:
        """The first generator whose state is not ``before``'s; "" if none."""
        for (what, stream), state in zip(self.streams, before):
            if _stream_state(stream) != state:
                return what
        return ""


def _stream_state(stream: Any) -> bytes:
    if isinstance(stream, np.random.Generator):
        stream = stream.bit_generator
    if isinstance(stream, random.Random):
        return pickle.dumps(stream.getstate())
    if isinstance(stream, np.random.RandomState):
        return pickle.dumps(stream.get_state())
    return pickle.dumps(stream.state)


def _streams_in(value: Any, what: str, depth: int = 3) -> list:
    if isinstance(value, _STREAMS):
        return [(f"{what} (a {type(value).__name__})", value)]
    if depth == 0:
        return []
    if isinstance(value, (list, tuple)):
        return [s for v in value[:_MAX_ITEMS] for s in _streams_in(v, what, depth - 1)]
    if isinstance(value, dict):
        values = list(value.values())[:_MAX_ITEMS]
        return [s for v in values for s in _streams_in(v, what, depth - 1)]
    if _is_instance(value):
        return _streams_in(vars(value), what, depth - 1)
    return []


def _library(module: str | None, filename: str | None = None) -> bool:
    """Whether code (by its file, where known) or a module or class (by its module's
    name) is a library's: the standard library, an installed package, NumPy, tape."""
    if filename is not None:
        return filename.startswith(_LIBRARY_PATHS)
    return (module or "").partition(".")[0] in _LIBRARY_ROOTS


def _code_names(code: types.CodeType) -> set[str]:
    """The names a code object and the code nested in it (lambdas, comprehensions) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


class _Walk:
    """One walk from ``f`` over the places it reads, adding them to ``reads``; ``names``
    gathers the names its code uses, which select the attributes of the objects met."""

    def __init__(self, reads: Reads, names: set[str]) -> None:
        self.reads, self.names = reads, names
        self.seen: set[int] = set()
        self.stream_ids = {id(s) for _, s in reads.streams}

    def place(self, what: str, read: Callable[[], Any]) -> None:
        if len(self.reads.places) < _MAX_PLACES:
            self.reads.places.append((what, read))
            self.value(read(), what)

    def value(self, value: Any, what: str) -> None:
        """Walk into what a place holds."""
        if isinstance(value, _STREAMS):
            if id(value) not in self.stream_ids:
                self.stream_ids.add(id(value))
                self.reads.streams.append((f"{what} (a {type(value).__name__})", value))
            return
        if id(value) in self.seen or isinstance(value, (Node, np.ndarray, np.generic)):
            return
        if isinstance(value, (list, tuple)):
            self.seen.add(id(value))
            for k, v in enumerate(value[:_MAX_ITEMS]):
                self.value(v, f"{what}[{k}]")
        elif isinstance(value, dict):
            self.seen.add(id(value))
            for k, v in list(value.items())[:_MAX_ITEMS]:
                self.value(v, f"{what}[{k!r}]")
        elif isinstance(value, types.ModuleType):
            self.seen.add(id(value))
            if not (_library(value.__name__) or _library(None, getattr(value, "__file__", ""))):
                self.attributes(value, vars(value), what)
        elif callable(value) or isinstance(value, type):
            self.callable(value, what)
        elif _is_instance(value):
            self.seen.add(id(value))
            self.attributes(value, vars(value), what)
            self.methods(type(value), what)

    def attributes(self, owner: Any, namespace: dict, what: str) -> None:
        for name in sorted(self.names & namespace.keys()):
            self.place(f"{what}.{name}", functools.partial(namespace.get, name, _MISSING))

    def methods(self, cls: type, what: str) -> None:
        """The methods of ``cls`` that the code names: their code reads too."""
        if _library(cls.__module__):
            return
        for klass in cls.__mro__:
            for name in self.names & vars(klass).keys():
                member = vars(klass)[name]
                member = getattr(member, "__func__", member)  # staticmethod, classmethod
                if isinstance(member, (types.FunctionType, property)):
                    self.callable(member.fget if isinstance(member, property) else member,
                                  f"{what}.{name}")

    def callable(self, fn: Any, what: str) -> None:
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        if isinstance(fn, types.MethodType):
            self.value(fn.__self__, f"{what}.__self__")
            self.callable(fn.__func__, what)
        elif isinstance(fn, functools.partial):
            self.place(f"the arguments bound to {what}", lambda: (fn.args, fn.keywords))
            self.callable(fn.func, what)
        elif isinstance(fn, types.FunctionType):
            self.function(fn)
        elif isinstance(fn, type):
            if not _library(fn.__module__):
                self.attributes(fn, vars(fn), what)
                self.methods(fn, what)
        elif hasattr(fn, "__wrapped__"):  # functools.wraps, a compiled gradient's f
            self.callable(fn.__wrapped__, what)
        elif _is_instance(fn) and not _library(type(fn).__module__):  # an object with __call__
            self.attributes(fn, vars(fn), what)
            self.methods(type(fn), what)
            self.callable(type(fn).__call__, what)

    def function(self, fn: types.FunctionType) -> None:
        code = fn.__code__
        if _library(fn.__module__, code.co_filename):
            return
        names = _code_names(code)
        self.names |= names
        module = fn.__module__ or "?"
        scope = fn.__globals__
        for name in sorted(names & scope.keys()):
            read = functools.partial(scope.get, name, _MISSING)
            self.place(f"{name} (a global of {module})", read)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            what = f"{name} (a variable {fn.__qualname__} closes over)"
            self.place(what, functools.partial(_cell, cell))
        if fn.__defaults__ or fn.__kwdefaults__:
            what = f"the defaults of {fn.__qualname__}"
            self.place(what, lambda: (fn.__defaults__, fn.__kwdefaults__))


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not yet bound
        return _MISSING
