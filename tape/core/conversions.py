"""Conversions inside code the user does not own: ``np.asarray(node)`` in a library.

Library code converts what it is given before computing on it (statsmodels'
``X = np.asarray(X)``, ``np.array([x, y])``, ``np.r_[...]``, ``np.full(n, v)``). NumPy's
``__array__`` protocol must return an ndarray, so a node cannot answer such a call by
itself. Instead, while some thread runs a forward pass (``grad`` and every transform,
through ``converting()``), NumPy's conversion functions are replaced, wherever a loaded
module binds them by their own name (``numpy.asarray``, ``numpy._core.numeric.array``,
a library's ``from numpy import asarray``), by wrappers that

- in a thread that is recording, and given a node or a list or tuple holding one, return
  the node itself or the stacked node, with ``np.array``'s meaning (dtype, ``ndmin``,
  ``copy``: a copy is a recorded copy, so that writing to it leaves the node alone);
- otherwise call NumPy's own function: another thread gets NumPy's own results.

SciPy functions with a ``tape.scipy`` counterpart are replaced the same way (the
wrapper calls the counterpart when it meets a node; SciPy's private modules are left
alone), and so are the methods of ``scipy.stats``' distributions (on SciPy's base classes,
which frozen distributions reach too, and ``norm._cdf``-style standard forms).

The names come back when the last pass in any thread ends, on every exit, Ctrl-C
included (``tape.core.interrupts``). Outside a pass nothing is replaced and nothing costs;
inside one, a call that meets no node pays one Python call and a test of the thread's
id (``benchmarks/conversions.py``).
Out of reach: compiled code, which converts with C's ``PyArray_FromAny``; a name bound
under another name (``from numpy import asarray as aa``), or held in a default argument
or a data structure; a module imported while a pass runs, until the next pass.
``library_code(False)`` switches the mechanism off in the current thread.
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
from typing import Any, Callable

import numpy as np

from sensitivities import astype, full_like_node, strided_view
from sensitivities.counterparts import sparse_operator
from sensitivities.registry import value_of

from .errors import passed_to_compiled
from .interrupts import critical, deliver, undo_under, uninterrupted
from .recording import Record, extend, innermost_tape
from .warning_sites import warn as located_warn

__all__ = ["converting", "library_code", "is_converting", "stacked", "SCIPY_COUNTERPARTS"]


class _State(threading.local):
    depth = 0  # passes open in this thread
    off = 0  # library_code(False) blocks open in this thread
    sites: list = []  # (code, line, globals) of the lines that kept a node in this pass


_state = _State()
_lock = threading.Lock()
_threads = 0  # passes open in all threads that convert; the names are swapped while > 0
_swapped: tuple = ()  # the sites of the last swap: put back at the end where still ours
_scanned = (-1, ())  # (len(sys.modules), binding sites) of the last scan


# The threads whose conversions are recorded now: the wrappers' one test, a C call and a
# set lookup (a thread-local's attribute costs several times as much)
_converting: set = set()
_ident = threading.get_ident


@critical
def _update() -> None:
    """Put this thread in ``_converting`` or take it out, after its state changed."""
    if _state.depth > 0 and not _state.off:
        _converting.add(_ident())
    else:
        _converting.discard(_ident())


def is_converting() -> bool:
    """Whether conversions meeting nodes in this thread become recorded calls now."""
    return _ident() in _converting


class converting:
    """Context manager around a forward pass: library conversions of nodes are recorded
    inside it, in this thread (unless ``library_code(False)`` is in force)."""

    __slots__ = ("counted",)

    def __enter__(self) -> None:
        global _threads
        self.counted = False
        if _state.off:
            return
        try:
            with uninterrupted(), _lock:
                if _threads == 0:
                    _swap_in()
                _threads += 1
                _state.depth += 1
                self.counted = True
                if _state.depth == 1:
                    _state.sites = []
                _update()
        except BaseException:  # a signal handler's exception: no swap outlives the call
            self._undo()
            raise

    @critical
    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if not self.counted:
            return
        undo_under(_lock, self._undo)
        deliver()
        self._explain(error)

    @critical
    def _undo(self) -> None:
        # the counts and the flag change together, between calls: a signal handler that
        # raises anywhere here leaves them whole, and the names come back all the same
        global _threads
        if self.counted:
            self.counted = False
            _threads -= 1
            _state.depth -= 1
        _update()
        if _threads == 0 and (_swapped or _swapped_methods):
            _swap_out()

    @staticmethod
    def _explain(error: Any) -> None:
        if error is not None and _state.sites:
            # a node that a library kept for an ndarray and then handed to compiled code:
            # the error names the library's line, not the compiled code's complaint
            explained = passed_to_compiled(error, _state.sites)
            if explained is not None:
                raise explained from error


class library_code:
    """Context manager: ``library_code(False)`` switches off, in this thread, the recording
    of conversions inside library code (``np.asarray(node)`` then raises, as it does
    outside ``grad``); ``library_code(True)`` is the default.

    >>> import numpy as np
    >>> from tape import grad, library_code
    >>> grad(lambda x: np.sum(np.asarray(x) ** 2))(np.array([1.0, 2.0]))
    (array([2., 4.]),)
    >>> with library_code(False):
    ...     try:
    ...         grad(lambda x: np.sum(np.asarray(x) ** 2))(np.array([1.0, 2.0]))
    ...     except TypeError as e:
    ...         print(type(e).__name__)
    NodeConversionError
    """

    __slots__ = ("enabled", "saved")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)

    def __enter__(self) -> None:
        with uninterrupted():
            self.saved = _state.off
            _state.off = 0 if self.enabled else self.saved + 1
            _update()

    def __exit__(self, *exc: Any) -> None:
        with uninterrupted():
            _state.off = self.saved
            _update()


# -- the swap --------------------------------------------------------------------------


def _swap_in() -> None:
    # (no list of what was swapped: a pass pays for each site's two stores and no more)
    global _swapped
    _swapped = sites = _sites()
    for namespace, name, original, wrapper in sites:
        if namespace.get(name) is original:  # unless the module rebound it since
            namespace[name] = wrapper
    for owner, name, wrapper in _METHODS:
        _swapped_methods.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, wrapper)


@critical
def _swap_out() -> None:
    global _swapped
    for namespace, name, original, wrapper in _swapped:
        if namespace.get(name) is wrapper:  # (so a second run after a signal is harmless)
            namespace[name] = original
    _swapped = ()
    while _swapped_methods:
        owner, name, previous = _swapped_methods.pop()
        if previous is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, previous)


_MISSING = object()
_ORIGINAL_WARN = warnings.warn
_swapped_methods: list = []  # (class or distribution object, name, what it held)


# NumPy's modules that hold the C functions or only pass them on: no Python code there
# calls them by these names, and each swapped name costs every pass two stores
_REEXPORTS = frozenset(
    ("numpy._core", "numpy._core._multiarray_umath", "numpy._core.multiarray", "numpy._core.umath")
)


def _sites() -> tuple:
    """``(namespace, name, original, wrapper)`` for every loaded module that binds one of
    the replaced functions under its own name; scanned again when modules were imported.
    SciPy's private modules are left out for SciPy's functions: code reaches those
    through SciPy's public modules or binds them from there."""
    global _scanned
    count = len(sys.modules)
    if _scanned[0] == count:
        return _scanned[1]
    _load_counterparts()
    names = {name for _, name in _ORIGINALS}
    numpys = {id(original) for original, _ in _NUMPY_WRAPPERS}
    found = []
    for module_name, module in list(sys.modules.items()):
        if (
            module is None
            or module_name.startswith(("tape.", "sensitivities."))
            or module_name in _REEXPORTS
        ):
            continue
        private_scipy = module_name.startswith("scipy.") and "._" in module_name
        try:
            namespace = vars(module)
        except TypeError:
            continue
        if type(namespace) is not dict:
            continue
        for name in names:
            held = namespace.get(name)
            entry = _WRAPPERS.get(id(held)) if held is not None else None
            if entry is not None and entry[0] is held:
                if private_scipy and id(held) not in numpys:
                    continue
                found.append((namespace, name, held, entry[1]))
    # NumPy's Python code warns through the module's attribute (warnings.warn), seen here
    # alone: binding sites of ``warn`` (``from warnings import warn``) are SciPy's, many
    found.append((vars(warnings), "warn", _ORIGINAL_WARN, located_warn))
    _scanned = (count, tuple(found))
    return _scanned[1]


# -- NumPy's conversions ---------------------------------------------------------------

_ndarray = np.ndarray


def _converted(a: Any, dtype: Any = None, copy: Any = None, ndmin: int = 0) -> Any:
    """``np.array(a, dtype, copy=copy, ndmin=ndmin)`` for ``a`` holding a node: the node,
    the stacked node, or a recorded copy or cast of it."""
    if sparse_operator(sys._getframe(2)):
        # SciPy's sparse operators hand an operand back to Python (and to the node's
        # reflected operator) when it converts to a 0-d object array, as Node.__array__
        # makes for them
        held = np.empty((), dtype=object)
        held[()] = a
        return held
    caller = sys._getframe(2)
    if len(_state.sites) < 64:
        _state.sites.append((caller.f_code, caller.f_lineno, caller.f_globals))
    if isinstance(a, Record):
        return _node_as_array(a, dtype, copy, ndmin)
    values = value_of(a)
    if not _plain_numbers(values):  # another library's arrays (a batch under vmap)
        return _node_as_array(_stacked(a), dtype, copy, ndmin)
    probe = _ORIGINAL_ARRAY(values, dtype=dtype, copy=copy, ndmin=ndmin)  # NumPy's errors
    if probe.dtype == object:
        return _object_array(a, probe.shape)
    if probe.dtype.kind not in "fc":  # integers and booleans: constants, as in NumPy
        return probe
    node = _stacked(a)
    if np.result_type(value_of(node)) != probe.dtype:
        node = astype(node, probe.dtype)
    if np.ndim(node) != probe.ndim:
        node = np.reshape(node, probe.shape)
    return node


def _node_as_array(node: Any, dtype: Any, copy: Any, ndmin: int) -> Any:
    """``np.array(node, dtype, copy=copy, ndmin=ndmin)``: the node itself, or a recorded
    cast, reshape or copy of it (a copy, so that a write to it leaves the node alone)."""
    fresh = False
    if dtype is not None:
        target = np.dtype(dtype)
        if target.kind == "O":
            return _object_array(node, np.shape(value_of(node)))
        if target.kind not in "fc":  # integers and booleans: constants, as in NumPy
            return _ORIGINAL_ARRAY(value_of(node), dtype=target, copy=copy, ndmin=ndmin)
        if target != node.dtype:
            if copy is False:
                raise ValueError(
                    "Unable to avoid copy while creating an array as requested."
                )  # as NumPy says it
            node = astype(node, target)
            fresh = True
    if np.ndim(node) < ndmin:
        node = np.reshape(node, (1,) * (ndmin - np.ndim(node)) + np.shape(node))
    if copy and not fresh:
        node = np.copy(node)
    return node


def _plain_numbers(values: Any) -> bool:
    """Whether ``values`` (a nest of lists) holds only NumPy's arrays and numbers."""
    if type(values) is list or type(values) is tuple:
        return all(_plain_numbers(v) for v in values)
    return isinstance(values, (np.ndarray, np.generic, int, float, complex, bool, str))


def _object_array(a: Any, shape: tuple) -> np.ndarray:
    """``np.array(a, dtype=object)`` of nodes: an object array holding them (the elements
    of a node that is an array, as NumPy takes an ndarray's)."""
    held = np.empty(shape, dtype=object)
    depth = len(shape) - len(_ORIGINAL_ARRAY(value_of(a), dtype=object).shape)  # ndmin
    for index in np.ndindex(*shape):
        item = a
        for k, i in enumerate(index[depth:]):
            if type(item) is list or type(item) is tuple:
                item = item[i]
            else:
                item = item[index[depth + k :]]
                break
        held[index] = item
    return held


def stacked(seq: Any) -> Any:
    """A list or tuple holding nodes (at any depth) as one node, as ``np.array`` reads it."""
    return _converted(seq)


def _stacked(seq: Any) -> Any:
    items = [
        _stacked(b) if (type(b) is list or type(b) is tuple) and innermost_tape(b) else b
        for b in seq
    ]
    return np.stack(items)


def _held(a: Any) -> bool:
    if isinstance(a, Record):
        return True
    return (type(a) is list or type(a) is tuple) and innermost_tape(a) is not None


def _like(original: Callable, args: tuple, kwargs: dict) -> Any:
    """``original(*args, **kwargs)`` with ``like=``, dispatched as NumPy does, but handing
    the array's ``__array_function__`` NumPy's own function: NumPy would look the function
    up by name on the numpy module, and find the wrapper there."""
    like = kwargs["like"]
    handler = getattr(type(like), "__array_function__", None)
    if type(like) is not _ndarray and handler is not None:
        rest = {k: v for k, v in kwargs.items() if k != "like"}
        result = handler(like, original, (type(like),), args, rest)
        if result is not NotImplemented:
            return result
    return original(*args, **kwargs)


def _dtype(args: tuple, kwargs: dict) -> Any:
    return args[0] if args else kwargs.get("dtype")


# Each wrapper hands its arguments on exactly as it got them: NumPy's own function then
# sees the very call (a like= argument dispatches on what it names).


def _conversion(original: Callable, copy: Any, ndmin: int) -> Callable:
    """The wrapper of NumPy's ``original`` (``np.asarray``, ``np.array``...), whose
    ``copy`` and ``ndmin`` are these unless the call names them."""

    def wrapper(a, *args, **kwargs):
        if type(a) is not _ndarray and _ident() in _converting and _held(a):
            dtype = _dtype(args, kwargs)
            return _converted(a, dtype, kwargs.get("copy", copy), kwargs.get("ndmin", ndmin))
        if kwargs and kwargs.get("like") is not None:
            return _like(original, (a, *args), kwargs)
        return original(a, *args, **kwargs)

    return wrapper


_asarray = _conversion(np.asarray, None, 0)
_asanyarray = _conversion(np.asanyarray, None, 0)
_array = _conversion(np.array, True, 0)
_ascontiguousarray = _conversion(np.ascontiguousarray, None, 1)
_asfortranarray = _conversion(np.asfortranarray, None, 1)


def _asarray_chkfinite(a, *args, **kwargs):
    if type(a) is not _ndarray and _ident() in _converting and _held(a):
        node = _converted(a, _dtype(args, kwargs))
        if not np.isfinite(value_of(node)).all():
            raise ValueError("array must not contain infs or NaNs")
        return node
    return _ORIGINAL_ASARRAY_CHKFINITE(a, *args, **kwargs)


def _full(shape, fill_value, *args, **kwargs):
    if type(fill_value) is not float and _ident() in _converting and _held(fill_value):
        probe = _ORIGINAL_FULL(shape, value_of(fill_value), *args, **kwargs)  # NumPy's errors
        fill = _converted(fill_value, probe.dtype)
        return np.zeros(probe.shape, probe.dtype) + fill  # a fresh node, writable in place
    if kwargs and kwargs.get("like") is not None:
        return _like(_ORIGINAL_FULL, (shape, fill_value, *args), kwargs)
    return _ORIGINAL_FULL(shape, fill_value, *args, **kwargs)


def _full_like(a, fill_value, *args, **kwargs):
    if type(fill_value) is not float and _ident() in _converting and _held(fill_value):
        _ORIGINAL_FULL_LIKE(value_of(a), value_of(fill_value), *args, **kwargs)  # NumPy's errors
        return full_like_node(a, fill_value, *args, **kwargs)
    return _ORIGINAL_FULL_LIKE(a, fill_value, *args, **kwargs)


def _as_strided(x, shape=None, strides=None, subok=False, writeable=True):
    # (as_strided is Python code: nothing to dispatch on, its arguments can be named)
    if type(x) is not _ndarray and _ident() in _converting and isinstance(x, Record):
        held = value_of(x)
        shape = np.shape(held) if shape is None else tuple(shape)
        strides = held.strides if strides is None else tuple(strides)
        return strided_view(x, shape, strides)
    return _ORIGINAL_AS_STRIDED(x, shape, strides, subok, writeable)


_ORIGINAL_ARRAY = np.array
_ORIGINAL_ASARRAY_CHKFINITE = np.asarray_chkfinite
_ORIGINAL_FULL = np.full
_ORIGINAL_FULL_LIKE = np.full_like
_ORIGINAL_AS_STRIDED = np.lib.stride_tricks.as_strided

_NUMPY_WRAPPERS = (
    (np.asarray, _asarray),
    (np.asanyarray, _asanyarray),
    (np.array, _array),
    (np.ascontiguousarray, _ascontiguousarray),
    (np.asfortranarray, _asfortranarray),
    (np.asarray_chkfinite, _asarray_chkfinite),
    (np.full, _full),
    (np.full_like, _full_like),
    (np.lib.stride_tricks.as_strided, _as_strided),
)
for _original, _wrapper in _NUMPY_WRAPPERS:
    _wrapper.__name__ = _original.__name__
    _wrapper.__wrapped__ = _original
# (original, the name it is bound by), and id(original) -> (original, wrapper): the
# original is kept to tell a reused id apart
_ORIGINALS: list = [(original, original.__name__) for original, _ in _NUMPY_WRAPPERS]
_WRAPPERS: dict[int, tuple] = {id(original): (original, w) for original, w in _NUMPY_WRAPPERS}


# -- SciPy's functions with a counterpart ---------------------------------------------

_counterparts_loaded = False
_METHODS: list = []  # (distribution object, method name, wrapper)

# SciPy's modules with counterparts, SciPy's module -> the module that holds them: by
# function (the names in its ``__all__``), or for ``scipy.stats`` by method of each
# distribution. The counterparts are a layer above the engine (``tape.scipy``), so the
# engine names none of them: ``tape/__init__.py`` fills this in, and a module here is
# imported only once SciPy is.
SCIPY_COUNTERPARTS: dict[str, str] = {}


def _counterpart(original: Callable, ours: Callable) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _ident() in _converting and (
            innermost_tape(args) is not None or innermost_tape(tuple(kwargs.values()))
        ):
            return ours(*args, **kwargs)
        return original(*args, **kwargs)

    wrapper.__name__ = getattr(original, "__name__", "wrapper")
    wrapper.__wrapped__ = original
    return wrapper


def _load_counterparts() -> None:
    """Add SciPy's functions that have a counterpart (``SCIPY_COUNTERPARTS``), once SciPy
    is loaded: ``scipy.linalg``'s and ``scipy.signal``'s by function, ``scipy.stats``'
    distributions by method of the distribution object."""
    global _counterparts_loaded
    if _counterparts_loaded or "scipy" not in sys.modules:
        return
    _counterparts_loaded = True
    for their_name, our_name in SCIPY_COUNTERPARTS.items():
        if their_name == "scipy.stats":
            continue
        try:
            theirs = importlib.import_module(their_name)
            ours = importlib.import_module(our_name)
        except ImportError:
            continue
        for name in getattr(ours, "__all__", ()):
            original, counterpart = getattr(theirs, name, None), getattr(ours, name, None)
            if (
                callable(original)
                and callable(counterpart)
                and original is not counterpart
                and not isinstance(original, np.ufunc)  # ufuncs dispatch by themselves
            ):
                _ORIGINALS.append((original, name))
                _WRAPPERS[id(original)] = (original, _counterpart(original, counterpart))
    try:
        theirs_stats = importlib.import_module("scipy.stats")
        ours_stats = importlib.import_module(SCIPY_COUNTERPARTS["scipy.stats"])
    except (ImportError, KeyError):
        return
    # the public methods once, on SciPy's base classes (every distribution object and
    # frozen distribution reaches them); the standard forms that statsmodels calls
    # (norm._cdf, norm._pdf) on the distribution objects
    counterparts: dict = {}  # (distribution name, method) -> ours
    for name in ours_stats.__all__:
        ours = getattr(ours_stats, name, None)
        theirs = getattr(theirs_stats, name, None)
        if theirs is None or not hasattr(theirs, "__dict__"):
            continue
        for method in getattr(ours, "methods", ()):
            counterparts[(getattr(theirs, "name", name), method)] = getattr(ours, method)
            if method in ("cdf", "pdf"):
                original = getattr(theirs, "_" + method, None)
                if callable(original):
                    wrapper = _counterpart(original, getattr(ours, method))
                    _METHODS.append((theirs, "_" + method, wrapper))
    for base in (theirs_stats.rv_continuous, theirs_stats.rv_discrete):
        for method in {m for _, m in counterparts}:
            original = base.__dict__.get(method)
            if callable(original):
                _METHODS.append((base, method, _method(original, method, counterparts)))


def _method(original: Callable, method: str, counterparts: dict) -> Callable:
    """SciPy's distribution method ``method`` (``rv_continuous.cdf``): the counterpart of
    ``self``'s distribution where it meets a node in a recording thread."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _ident() in _converting and (
            innermost_tape(args) is not None or innermost_tape(tuple(kwargs.values()))
        ):
            ours = counterparts.get((getattr(self, "name", None), method))
            if ours is not None:
                return ours(*args, **kwargs)
        return original(self, *args, **kwargs)

    wrapper.__name__ = method
    wrapper.__wrapped__ = original
    return wrapper


extend(stacked=stacked)
