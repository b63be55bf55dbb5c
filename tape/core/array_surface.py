"""The array surface that a recorded value (``Node``) and a batched one (``Batched``)
share: every operator, ndarray method and property, each the NumPy function it means.

A class that takes the surface says how a call reaches it, with ``_apply(f, args,
kwargs=None)``: a node records it (``recording.apply``), a batch runs it over the batch.
Shape and dtype (``shape``, ``dtype``) are its own; what writes in place, converts to
plain values or prints, each class defines, as what they mean differs.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Iterator

import numpy as np

__all__ = ["ARITHMETIC", "ArraySurface"]


def _method(f: Callable) -> Callable:
    """The ndarray method ``x.name(*args, **kwargs)`` as ``f(x, *args, **kwargs)``."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._apply(f, (self, *args), kwargs)

    method.__name__ = f.__name__
    return method


def _operator(ufunc: np.ufunc, name: str, reflected: bool = False) -> Callable:
    if reflected:

        def op(self: Any, other: Any) -> Any:
            return self._apply(ufunc, (other, self))

    else:

        def op(self: Any, other: Any) -> Any:
            return self._apply(ufunc, (self, other))

    op.__name__ = name
    return op


class ArraySurface:
    """What an ndarray offers, for a class with ``_apply``, ``shape`` and ``dtype``."""

    __slots__ = ()
    __hash__ = object.__hash__  # __eq__ is elementwise, identity still hashes

    _apply: Callable  # how a call of a NumPy function on this value runs
    shape: Any
    dtype: Any

    # -- operators, each the ufunc it means --------------------------------------------

    def __divmod__(self, other: Any) -> tuple:
        # np.divmod(x, y) is (x // y, x % y), as NumPy documents it
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> tuple:
        return self._apply(np.floor_divide, (other, self)), self._apply(np.remainder, (other, self))

    def __neg__(self) -> Any:
        return self._apply(np.negative, (self,))

    def __pos__(self) -> Any:
        return self._apply(np.positive, (self,))

    def __abs__(self) -> Any:
        return self._apply(np.absolute, (self,))

    def __invert__(self) -> Any:
        return self._apply(np.invert, (self,))

    def __getitem__(self, index: Any) -> Any:
        return self._apply(operator.getitem, (self, index))

    # -- sequences --------------------------------------------------------------------

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __contains__(self, item: Any) -> bool:
        # NumPy's meaning: (x == item).any()
        return bool(np.any(self == item))

    def __copy__(self) -> Any:
        return self.copy()

    def __deepcopy__(self, memo: dict) -> Any:
        return self.__copy__()

    # -- properties ---------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def T(self) -> Any:
        return self._apply(np.transpose, (self,))

    @property
    def mT(self) -> Any:
        return self._apply(np.matrix_transpose, (self,))

    @property
    def real(self) -> Any:
        return self._apply(np.real, (self,))

    @property
    def imag(self) -> Any:
        return self._apply(np.imag, (self,))

    @property
    def flat(self) -> Any:
        """``x.flat``: ``x.flat[i]`` reads elements in C order (a copy, as NumPy's), and
        ``x.flat[i] = v`` writes them; ``len`` and iteration too."""
        return Flat(self)

    @flat.setter
    def flat(self, value: Any) -> None:
        Flat(self)[...] = value  # x.flat = v writes every element, as NumPy's does

    @property
    def device(self) -> str:
        return "cpu"

    def to_device(self, device: Any, /, stream: Any = None) -> Any:
        if device != "cpu":
            raise ValueError(f"this value lives where NumPy's arrays do, on 'cpu', not {device!r}")
        return self

    # -- the ndarray methods, as the NumPy functions ------------------------------------

    sum = _method(np.sum)
    mean = _method(np.mean)
    max = _method(np.max)
    min = _method(np.min)
    prod = _method(np.prod)
    var = _method(np.var)
    std = _method(np.std)
    cumsum = _method(np.cumsum)
    cumprod = _method(np.cumprod)
    argmax = _method(np.argmax)
    argmin = _method(np.argmin)
    ravel = _method(np.ravel)
    squeeze = _method(np.squeeze)
    clip = _method(np.clip)
    argpartition = _method(np.argpartition)
    diagonal = _method(np.diagonal)
    trace = _method(np.trace)
    repeat = _method(np.repeat)
    take = _method(np.take)
    copy = _method(np.copy)
    round = _method(np.round)
    all = _method(np.all)
    any = _method(np.any)
    argsort = _method(np.argsort)
    searchsorted = _method(np.searchsorted)
    nonzero = _method(np.nonzero)

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return self._apply(np.reshape, (self, shape), kwargs)

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return self._apply(np.transpose, (self, axes or None))

    def swapaxes(self, axis1: Any, axis2: Any) -> Any:
        return self._apply(np.swapaxes, (self, axis1, axis2))

    def dot(self, other: Any, *args: Any, **kwargs: Any) -> Any:
        return self._apply(np.dot, (self, other, *args), kwargs)

    def flatten(self, order: str = "C") -> Any:
        # a copy, as ndarray's: np.ravel alone may give a view, which writes would share
        flat = self._apply(np.ravel, (self,), {"order": order} if order != "C" else None)
        return self._apply(np.copy, (flat,))

    def choose(self, choices: Any, *args: Any, **kwargs: Any) -> Any:
        return self._apply(np.choose, (self, choices, *args), kwargs)

    def compress(self, condition: Any, axis: Any = None) -> Any:
        return self._apply(np.compress, (condition, self), {"axis": axis})

    def conj(self) -> Any:
        return self._apply(np.conjugate, (self,))

    conjugate = conj


# the operators with a reflected and an augmented form, each the ufunc it means
ARITHMETIC = (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
              ("truediv", np.true_divide), ("floordiv", np.floor_divide),
              ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
              ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
              ("lshift", np.left_shift), ("rshift", np.right_shift))  # fmt: skip
for _name, _ufunc in ARITHMETIC:
    setattr(ArraySurface, f"__{_name}__", _operator(_ufunc, f"__{_name}__"))
    setattr(ArraySurface, f"__r{_name}__", _operator(_ufunc, f"__r{_name}__", reflected=True))
for _name, _ufunc in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal),
                      ("ne", np.not_equal)):  # fmt: skip
    setattr(ArraySurface, f"__{_name}__", _operator(_ufunc, f"__{_name}__"))


class Flat:
    """``x.flat``: the elements of ``x`` in C order, by flat position."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def __len__(self) -> int:
        return self.array.size

    def __iter__(self) -> Iterator[Any]:
        flat = np.ravel(self.array)
        return (flat[i] for i in range(self.array.size))

    def __getitem__(self, index: Any) -> Any:
        picked = np.ravel(self.array)[index]
        # NumPy's flat[...] gives a copy: a view would share the array's writes
        return np.copy(picked) if np.ndim(picked) > 0 else picked

    def __setitem__(self, index: Any, value: Any) -> None:
        array = self.array
        value = _as_array(value)
        positions = np.ravel(np.arange(array.size)[index])
        count = np.size(value)
        if positions.size and count != positions.size:
            if not count:
                raise ValueError("flat assignment of an empty sequence")
            # NumPy repeats (or cuts) the values to the number of positions
            value = np.ravel(value)[np.arange(positions.size) % count]
        elif np.ndim(value) > 1:
            value = np.ravel(value)
        array[np.unravel_index(positions, array.shape)] = value

    def copy(self) -> Any:
        return np.copy(np.ravel(self.array))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.array.__array__(dtype, copy)


def _as_array(values: Any) -> Any:
    """``values`` as NumPy reads a value to write: a list or tuple (of numbers, or of
    recorded or batched values, stacked) becomes one array; anything else stays."""
    if type(values) is not list and type(values) is not tuple:
        return values
    if not values or all(isinstance(v, (int, float, complex, np.generic)) for v in values):
        return np.asarray(values)
    return np.stack([_as_array(v) for v in values])
