"""Conversions inside code the user does not own: ``np.asarray(node)`` in a library.

Library code converts what it is given before computing on it (statsmodels'
``X = np.asarray(X)``, ``np.array([x, y])``, ``np.r_[...]``, ``np.full(n, v)``). NumPy's
``__array__`` protocol must return an ndarray, so a node cannot answer such a call by
itself. Instead NumPy's conversion functions are wrapped, once for the life of the
process, wherever a loaded module binds them by their own name (``numpy.asarray``,
``numpy._core.numeric.array``, a library's ``from numpy import asarray``). The wrappers
are installed by the first pass (``import tape`` alone changes nothing), and a pass that
finds modules loaded since the last one wraps their names too. A wrapper keeps no state
and changes no result:

- in a thread that runs a forward pass (``passes.run_pass``), given a node or a list or
  tuple holding one, it returns the node itself or the stacked node, with
  ``np.array``'s meaning (dtype, ``ndmin``, ``copy``: a copy is a recorded copy, so that
  writing to it leaves the node alone; a scalar node becomes a 0-d array node);
- in every other case it calls NumPy's own function with the very arguments it got.

It takes every call form NumPy's function takes, carries NumPy's name, module and
signature, and pickles as NumPy's function does. What it costs NumPy code that meets no
node is one Python call per conversion (``benchmarks/conversions.py``).

Other modules add their own wrappers through ``wrap`` and ``wrap_method`` (``tape.scipy``
sends SciPy's functions with a counterpart there) and ``on_scan``.

Out of reach: compiled code, which converts with C's ``PyArray_FromAny``; a name bound
under another name (``from numpy import asarray as aa``) or held in a data structure
before the first pass; a module imported during a pass from NumPy's private modules,
until the next pass. ``library_code(False)`` switches conversions off in the current
context.
"""

from __future__ import annotations

import enum
import functools
import sys
import threading
import warnings
from contextvars import ContextVar
from typing import Any, Callable

import numpy as np

from sensitivities import astype, full_like_node, strided_view
from sensitivities.counterparts import sparse_operator
from sensitivities.registry import value_of

from ..core.errors import passed_to_compiled
from ..core.recording import Record, extend, innermost_tape
from .warning_sites import warn as located_warn

__all__ = [
    "converting_threads", "is_converting", "library_code", "stacked", "install",
    "wrap", "wrap_method", "on_scan", "explain", "forget_sites",
]  # fmt: skip

# thread id -> forward passes open in it that convert; a thread that runs none is absent
# (or 0), so that a wrapper outside any pass pays one truth test of an empty dict. Only
# ``passes.run_pass`` changes it, with single stores that a signal cannot split.
converting_threads: dict[int, int] = {}
_switch: ContextVar[bool] = ContextVar("tape_library_code", default=True)
_ident = threading.get_ident


class _Kept(threading.local):
    sites: list = []  # (code, line, globals) of the lines that kept a node in this pass


_kept = _Kept()


def is_converting() -> bool:
    """Whether conversions meeting nodes in this thread become recorded calls now."""
    return converting_threads.get(_ident(), 0) > 0 and _switch.get()


def forget_sites() -> None:
    """Start this thread's list of the lines that kept a node (a new outermost pass)."""
    _kept.sites = []


def explain(error: BaseException) -> BaseException | None:
    """For an error leaving a forward pass: where a library kept a node for an ndarray and
    then handed it to compiled code, an error naming the library's line, else None."""
    sites, _kept.sites = _kept.sites, []
    return passed_to_compiled(error, sites) if sites else None


class library_code:
    """Context manager: ``library_code(False)`` switches off, in this thread (or async
    task), the recording of conversions inside library code (``np.asarray(node)`` then
    raises, as it does outside ``grad``); ``library_code(True)`` switches it back on,
    also inside a ``library_code(False)`` block. On is the default.

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

    __slots__ = ("enabled", "token")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)

    def __enter__(self) -> None:
        self.token = _switch.set(self.enabled)

    def __exit__(self, *exc: Any) -> None:
        _switch.reset(self.token)


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
    if len(_kept.sites) < 64:
        _kept.sites.append((caller.f_code, caller.f_lineno, caller.f_globals))
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
    if isinstance(value_of(node), (float, complex, np.generic)):
        # a Python or NumPy scalar: a 0-d array, as NumPy makes it (x[()], x[mask] = 0)
        node = np.reshape(np.atleast_1d(node), ())  # (a NumPy scalar reshapes to a scalar)
        fresh = True
    if np.ndim(node) < ndmin:
        node = np.reshape(node, (1,) * (ndmin - np.ndim(node)) + np.shape(node))
    if _copies(copy) and not fresh:
        node = np.copy(node)
    return node


def _copies(copy: Any) -> bool:
    """Whether ``np.array``'s ``copy`` asks for a copy: True, or ``np._CopyMode.ALWAYS``
    (SciPy passes the modes, whose truth NumPy refuses to tell)."""
    if isinstance(copy, enum.Enum):
        return copy.name == "ALWAYS"
    return bool(copy)


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


# Each wrapper hands its arguments on exactly as it got them: NumPy's own function then
# sees the very call.


def _argument(args: tuple, kwargs: dict, index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def _conversion(original: Callable, name: str, copy: Any, ndmin: int) -> Callable:
    """The wrapper of NumPy's ``original`` (``np.asarray``, ``np.array``...), whose first
    parameter is ``name`` and whose ``copy`` and ``ndmin`` are these unless the call
    names them."""

    def wrapper(*args, **kwargs):
        if converting_threads and is_converting():
            a = _argument(args, kwargs, 0, name)
            if type(a) is not _ndarray and _held(a):
                dtype = _argument(args, kwargs, 1, "dtype")
                return _converted(a, dtype, kwargs.get("copy", copy), kwargs.get("ndmin", ndmin))
        # (with like=, NumPy hands the array's __array_function__ numpy.asarray as the
        # program sees it: this wrapper, which it may call again without like=)
        return original(*args, **kwargs) if kwargs else original(*args)

    return wrapper


def _stacking(original: Callable, then: Callable | None = None) -> Callable:
    """The wrapper of one of NumPy's private helpers that convert a reduction's argument
    in C (``fromnumeric._wrapreduction`` behind ``np.sum``, ``_methods._mean`` behind
    ``np.mean``): handed a list or tuple holding a node, it stacks them into one node, as
    ``np.array`` reads the list, and carries on with ``original`` (or ``then``, NumPy's
    public function, whose rule the node meets), so that ``np.sum([a, 2 * b])``
    records. The public functions themselves stay NumPy's own objects."""

    def wrapper(*args, **kwargs):
        if converting_threads and is_converting() and args:
            a = args[0]
            if (type(a) is list or type(a) is tuple) and innermost_tape(a) is not None:
                return (then or original)(stacked(a), *args[1:], **kwargs)
        return original(*args, **kwargs)

    return wrapper


def _private_helpers() -> list:
    """NumPy's helpers that ``_stacking`` wraps, with the function each hands over to;
    those this NumPy has."""
    from numpy._core import _methods, fromnumeric

    helpers = [
        (getattr(fromnumeric, "_wrapreduction", None), None),  # sum, prod, max, min, ...
        (getattr(fromnumeric, "_wrapfunc", None), None),  # cumsum, argmax, round, ...
        (getattr(_methods, "_mean", None), np.mean),
        (getattr(_methods, "_var", None), np.var),
        (getattr(_methods, "_std", None), np.std),
    ]
    return [(helper, then) for helper, then in helpers if helper is not None]


def _isscalar(element: Any) -> bool:
    # a node answers for its value: np.isscalar(x[0]) is True where x[0] is a NumPy scalar
    return _ORIGINAL_ISSCALAR(value_of(element) if isinstance(element, Record) else element)


def _asarray_chkfinite(*args, **kwargs):
    if converting_threads and is_converting():
        a = _argument(args, kwargs, 0, "a")
        if type(a) is not _ndarray and _held(a):
            node = _converted(a, _argument(args, kwargs, 1, "dtype"))
            if not np.isfinite(value_of(node)).all():
                raise ValueError("array must not contain infs or NaNs")
            return node
    return _ORIGINAL_ASARRAY_CHKFINITE(*args, **kwargs)


def _full(*args, **kwargs):
    if converting_threads and is_converting():
        fill_value = _argument(args, kwargs, 1, "fill_value")
        if type(fill_value) is not float and _held(fill_value):
            plain = dict(kwargs, fill_value=value_of(fill_value)) if len(args) < 2 else kwargs
            plain_args = args[:1] + (value_of(fill_value),) + args[2:] if len(args) > 1 else args
            probe = _ORIGINAL_FULL(*plain_args, **plain)  # NumPy's errors
            fill = _converted(fill_value, probe.dtype)
            return np.zeros(probe.shape, probe.dtype) + fill  # a fresh node, writable in place
    return _ORIGINAL_FULL(*args, **kwargs)


def _full_like(*args, **kwargs):
    if converting_threads and is_converting():
        fill_value = _argument(args, kwargs, 1, "fill_value")
        if type(fill_value) is not float and _held(fill_value):
            a = _argument(args, kwargs, 0, "a")
            rest = {k: v for k, v in kwargs.items() if k not in ("a", "fill_value")}
            _ORIGINAL_FULL_LIKE(value_of(a), value_of(fill_value), *args[2:], **rest)  # errors
            return full_like_node(a, fill_value, *args[2:], **rest)
    return _ORIGINAL_FULL_LIKE(*args, **kwargs)


def _as_strided(*args, **kwargs):
    if converting_threads and is_converting():
        x = _argument(args, kwargs, 0, "x")
        if type(x) is not _ndarray and isinstance(x, Record):
            shape = _argument(args, kwargs, 1, "shape")
            strides = _argument(args, kwargs, 2, "strides")
            held = value_of(x)
            shape = np.shape(held) if shape is None else tuple(shape)
            strides = held.strides if strides is None else tuple(strides)
            return strided_view(x, shape, strides)
    return _ORIGINAL_AS_STRIDED(*args, **kwargs)


_ORIGINAL_ARRAY = np.array
_ORIGINAL_ISSCALAR = np.isscalar
_ORIGINAL_ASARRAY_CHKFINITE = np.asarray_chkfinite
_ORIGINAL_FULL = np.full
_ORIGINAL_FULL_LIKE = np.full_like
_ORIGINAL_AS_STRIDED = np.lib.stride_tricks.as_strided


# -- the wrapped names -------------------------------------------------------------------

# id(original) -> (original, the name it is bound by, wrapper): the original is kept, to
# tell a reused id apart
_WRAPPERS: dict[int, tuple] = {}
_METHODS: list = []  # (class, name, wrapper), set once
_SCANS: list = []  # callables run before each scan (``on_scan``)
_scanned = -1  # len(sys.modules) at the last scan
_lock = threading.Lock()


def _like_original(wrapper: Callable, original: Callable, module: str | None = None) -> Callable:
    """``wrapper`` with ``original``'s name, documentation and signature; ``module``: where
    it is found by its name, so that pickle finds this very object there."""
    functools.update_wrapper(wrapper, original)
    wrapper.__stands_for__ = original  # (the rules registry's key: sensitivities.registry)
    if module is not None:
        wrapper.__module__ = module
    return wrapper


def wrap(original: Callable, wrapper: Callable, module: str | None = None) -> None:
    """From the next pass on, ``wrapper`` stands for ``original`` in every loaded module
    that binds it by its name (but SciPy's private modules, for a function that is not
    NumPy's). ``wrapper`` must call ``original`` unless this thread records."""
    wrapper = _like_original(wrapper, original, module)
    _WRAPPERS[id(original)] = (original, original.__name__, wrapper)


def wrap_method(owner: type, name: str, wrapper: Callable) -> None:
    """From the next pass on, ``owner.name`` (a class's own method) is ``wrapper``."""
    original = owner.__dict__[name]
    _METHODS.append((owner, name, _like_original(wrapper, original)))


def on_scan(hook: Callable[[], None]) -> None:
    """Run ``hook`` before each scan of the loaded modules (it may ``wrap`` more)."""
    _SCANS.append(hook)


# NumPy's modules that hold the C functions or only pass them on: no Python code there
# calls them by these names; left as they are, they keep NumPy's own functions reachable
_REEXPORTS = frozenset(
    ("numpy._core", "numpy._core._multiarray_umath", "numpy._core.multiarray", "numpy._core.umath")
)


def install() -> None:
    """Wrap the names bound in the modules loaded since the last call (the first pass's
    call wraps them all). A name is only ever set to its wrapper, never put back: a call
    cut short leaves some names wrapped, which changes no result."""
    global _scanned
    if _scanned == len(sys.modules):
        return
    with _lock:
        count = len(sys.modules)
        for hook in _SCANS:
            hook()
        for owner, name, wrapper in _METHODS:
            if owner.__dict__.get(name) is not wrapper:
                setattr(owner, name, wrapper)
        names = {name for _, name, _ in _WRAPPERS.values()}
        for module_name, module in list(sys.modules.items()):
            if module is None or module_name.startswith(("tape.", "sensitivities.")):
                continue
            if module_name in _REEXPORTS:
                continue
            private_scipy = module_name.startswith("scipy.") and "._" in module_name
            namespace = getattr(module, "__dict__", None)
            if type(namespace) is not dict:
                continue
            for name in names:
                held = namespace.get(name)
                entry = _WRAPPERS.get(id(held)) if held is not None else None
                if entry is None or entry[0] is not held:
                    continue
                if private_scipy and entry[2].__module__.startswith("scipy"):
                    continue
                namespace[name] = entry[2]
        warnings.warn = _warn  # NumPy's Python code warns through the module's attribute
        _scanned = count


def _warn(message, category=None, stacklevel=1, *args, **kwargs):
    # NumPy's Python code, entered on nodes, warns at its caller: the engine's line; the
    # user's line is the one plain NumPy names
    if converting_threads:
        return located_warn(message, category, stacklevel + 1, *args, **kwargs)
    return _ORIGINAL_WARN(message, category, stacklevel + 1, *args, **kwargs)


_ORIGINAL_WARN = warnings.warn
_like_original(_warn, _ORIGINAL_WARN, "warnings")

for _original, _wrapper in (
    (np.asarray, _conversion(np.asarray, "a", None, 0)),
    (np.asanyarray, _conversion(np.asanyarray, "a", None, 0)),
    (np.array, _conversion(np.array, "object", True, 0)),
    (np.ascontiguousarray, _conversion(np.ascontiguousarray, "a", None, 1)),
    (np.asfortranarray, _conversion(np.asfortranarray, "a", None, 1)),
    (np.asarray_chkfinite, _asarray_chkfinite),
    (np.full, _full),
    (np.full_like, _full_like),
    (np.lib.stride_tricks.as_strided, _as_strided),
):
    wrap(_original, _wrapper)
wrap(np.isscalar, _isscalar)
for _helper, _then in _private_helpers():
    wrap(_helper, _stacking(_helper, _then))


extend(stacked=stacked, is_converting=is_converting)
