"""The node's operator surface: a recorded value that behaves like its value.

Every operator, ndarray method and attribute of ``Node`` is the NumPy function it means,
handed to ``recording.apply``; NumPy's protocols (``__array_ufunc__``,
``__array_function__``) bring plain ``np.*`` calls to the same place. Nothing here
decides anything about the tape: that is recording's business.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable, Iterator

import numpy as np

from sensitivities import astype, registry
from sensitivities.counterparts import scipy_caller, sparse_operator
from sensitivities.registry import foreign_handler

from .conversions import is_converting
from .errors import (
    TO_ARRAY,
    TO_NUMBER,
    NodeConversionError,
    converted_in_library,
    in_place,
    scipy_conversion,
)
from .inplace import augmented, set_item
from .outputs import ufunc_out
from .recording import Record, apply, plain, record_primitive

__all__ = ["Node"]


def _recorded_method(f: Callable) -> Callable:
    """The ndarray method ``x.name(*args, **kwargs)``, recorded as ``f(x, *args, **kwargs)``."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return apply(f, (self, *args), kwargs)

    method.__name__ = f.__name__
    return method


def _in_place(name: str, instead: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        raise TypeError(in_place(name, instead))

    method.__name__ = name
    return method


class Node(Record):
    """A recorded value, the base of ``Leaf`` and ``Branch``. It behaves like the value:
    arithmetic, ``@``, indexing, ``.shape``, and every NumPy function, each recorded on
    the node's tape.
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

    __slots__ = ()
    __array_priority__ = 1000.0  # NumPy defers binary operators to us
    __hash__ = object.__hash__  # __eq__ is elementwise, identity still hashes

    value: Any
    tape: Any
    pos: int
    seal: list | None  # fingerprints of the mutable arrays the reverse pass will read

    # -- NumPy's protocols -------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            return apply(ufunc, inputs)  # np.sin(x): the common call, first
        if kwargs.get("out") is not None and method != "at":
            call = ufunc if method == "__call__" else getattr(ufunc, method)
            return ufunc_out(call, inputs, kwargs, method == "__call__")
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
            return plain(bound, inputs, kwargs)
        return apply(bound, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
        return apply(func, args, kwargs)

    # a primitive (sensitivities.registry.primitive) hands a call that meets a node here
    __record_call__ = staticmethod(record_primitive)

    def __array_namespace__(self, api_version: str | None = None) -> Any:
        """The array API namespace of nodes (``tape.array_api``): NumPy's, with an
        ``asarray`` that keeps a node a node."""
        from . import array_api

        return array_api

    @property
    def device(self) -> str:
        return "cpu"

    def to_device(self, device: Any, /, stream: Any = None) -> Any:
        if device != "cpu":
            raise ValueError(f"a node lives where NumPy's arrays do, on 'cpu', not {device!r}")
        return self

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if sparse_operator(sys._getframe(1)):
            held = np.empty((), dtype=object)  # SciPy then returns NotImplemented, and
            held[()] = self  # Python calls this node's reflected operator
            return held
        counterpart = scipy_caller(sys._getframe(1))
        if counterpart:
            raise NodeConversionError(scipy_conversion(*counterpart))
        frame = sys._getframe(1)
        raise NodeConversionError(converted_in_library(frame, is_converting()) or TO_ARRAY)

    def __float__(self) -> float:
        site = converted_in_library(sys._getframe(1), is_converting(), "a number")
        raise NodeConversionError(site or TO_NUMBER)

    __int__ = __complex__ = __index__ = __float__

    def __bool__(self) -> bool:
        return plain(bool, (self,))

    # -- printing: the value, as NumPy shows it (repr shows the record) -------------------

    def __str__(self) -> str:
        return str(registry.value_of(self))

    def __format__(self, spec: str) -> str:
        return format(registry.value_of(self), spec)

    def __round__(self, ndigits: int | None = None) -> Any:
        # rounding is piecewise constant: a plain result, as a comparison is
        return plain(round, (self,)) if ndigits is None else plain(round, (self, ndigits))

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
        if type(other) not in _KNOWN and (handler := _foreign(np.multiply, other)):
            return handler(self, other)
        return apply(np.multiply, (self, other))

    def __rmul__(self, other: Any) -> Any:
        if type(other) not in _KNOWN and (handler := _foreign(np.multiply, other)):
            return handler(other, self)
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
        if type(other) not in _KNOWN and (handler := _foreign(np.matmul, other)):
            return handler(self, other)
        return apply(np.matmul, (self, other))

    def __rmatmul__(self, other: Any) -> Any:
        if type(other) not in _KNOWN and (handler := _foreign(np.matmul, other)):
            return handler(other, self)  # SciPy's sparse S @ x arrives here
        return apply(np.matmul, (other, self))

    # -- augmented assignments write the node in place, as on an ndarray (tape.inplace);
    # a node holding a float or a NumPy scalar is rebound, as those are immutable

    def __iadd__(self, other: Any) -> Any:
        return augmented(self, np.add, other)

    def __isub__(self, other: Any) -> Any:
        return augmented(self, np.subtract, other)

    def __imul__(self, other: Any) -> Any:
        return augmented(self, np.multiply, other)

    def __itruediv__(self, other: Any) -> Any:
        return augmented(self, np.true_divide, other)

    def __ifloordiv__(self, other: Any) -> Any:
        return augmented(self, np.floor_divide, other)

    def __imod__(self, other: Any) -> Any:
        return augmented(self, np.remainder, other)

    def __ipow__(self, other: Any) -> Any:
        return augmented(self, np.power, other)

    def __imatmul__(self, other: Any) -> Any:
        return augmented(self, np.matmul, other)

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
        """``x[index] = v``, as NumPy does it: every name bound to ``x``, and every view
        of it, sees the new value; the gradient is that of the updated program, with
        respect to ``v`` and to the value ``x`` had before (see ``tape.inplace``). ``v``
        is cast to ``x``'s dtype and must broadcast to ``x[index]``, with NumPy's errors.
        A node holding a Python float or a NumPy scalar has no items, as in NumPy."""
        set_item(self, index, value)

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
        value = registry.value_of(self)
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

    def tolist(self) -> Any:
        raise NodeConversionError(
            "node.tolist() would return plain Python numbers and lose the gradient; iterate "
            "over the node (list(x), x[i]) to keep it, or take node.value.tolist() for constants"
        )

    @property
    def strides(self) -> tuple:
        """The strides of the value, for code that computes views with ``as_strided``."""
        return registry.value_of(self).strides

    # -- x.flat: a 1-D iterator over the elements in C order, readable and writable -------

    @property
    def flat(self) -> _Flat:
        """``x.flat``: ``x.flat[i]`` reads as ``np.ravel(x)[i]``, and ``x.flat[i] = v``
        writes ``x`` in place at those positions, ``v`` repeated as NumPy repeats it."""
        return _Flat(self)


class _Flat:
    """What ``node.flat`` gives: NumPy's flat iterator over a node, reads and writes
    recorded (a write is ``x[np.unravel_index(positions, x.shape)] = v``)."""

    __slots__ = ("base",)

    def __init__(self, base: Node) -> None:
        self.base = base

    def __getitem__(self, index: Any) -> Any:
        return np.ravel(self.base)[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        base = self.base
        shape = np.shape(base.value)
        positions = np.ravel(np.arange(int(np.prod(shape))).reshape(-1)[index])
        if positions.size and np.size(registry.value_of(value)) != positions.size:
            # NumPy repeats (or cuts) the values to the number of positions
            if not np.size(registry.value_of(value)):
                raise ValueError("flat assignment of an empty sequence")
            value = np.ravel(value)
            value = value[np.arange(positions.size) % np.size(registry.value_of(value))]
        elif np.ndim(registry.value_of(value)) > 1:
            value = np.ravel(value)
        set_item(base, np.unravel_index(positions, shape), value)

    def __iter__(self) -> Iterator[Any]:
        return iter(np.ravel(self.base))

    def __len__(self) -> int:
        return self.base.size

    def copy(self) -> Any:
        return np.copy(np.ravel(self.base))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.base.__array__(dtype, copy)


# Operands a node's operators take as NumPy does, without asking the registry whether they
# belong to another library (sparse matrices): the common ones, skipped cheaply.
_KNOWN = frozenset((float, int, complex, bool, np.float64, np.float32, np.ndarray))


def _foreign(f: Any, other: Any) -> Any:
    """How ``f`` meets ``other`` where it belongs to a library NumPy cannot take (a
    sparse matrix), registered with ``sensitivities.registry.foreign_operands``; else None."""
    return None if isinstance(other, Record) else foreign_handler(f, other)
