"""The tuple ``grad`` returns: a tuple in every way, except that NumPy may not use it.

``grad(f)(x)`` is ``(g,)``, one gradient per argument. A plain tuple that meets NumPy
becomes an array with a new leading axis, so ``x - grad(f)(x)`` would quietly have shape
``(1, n)``, and ``scipy.optimize.minimize(value_and_grad(f), x0, jac=True)`` would fail
deep inside SciPy. ``Gradients`` raises at that line instead, saying how to take the
gradient out.
"""

from __future__ import annotations

import numbers
from typing import Any, NoReturn

import numpy as np

__all__ = ["Gradients"]


def _refuse(what: str, count: int) -> NoReturn:
    if count == 1:
        parts, unpack = "1 gradient", "the gradient out of the tuple: `(g,) = grad(f)(x)`"
    else:
        parts = f"{count} gradients"
        unpack = (
            "the gradients out of the tuple, one name each: `gx, gy = grad(f)(x, y)` (for "
            "one argument, `(g,) = grad(f)(x)`)"
        )
    raise TypeError(
        f"{what} the tuple that grad returns, one gradient per argument ({parts}), not an "
        f"array. Take {unpack}; or ask for the bare gradient with `grad(f, argnums=0)` "
        "(SciPy's `jac=True` wants that: `minimize(value_and_grad(f, argnums=0), x0, "
        "jac=True)`)"
    )


class Gradients(tuple):
    """What ``grad`` and ``value_and_grad`` return for several gradients, or for an
    ``argnums`` that is not an int: a ``tuple`` (unpacking, indexing, ``==``, hashing,
    printing are a tuple's) that raises a ``TypeError`` saying how to take the gradients
    out when it meets NumPy arithmetic or an array conversion.

    >>> import numpy as np
    >>> from tape import grad
    >>> g = grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    >>> g
    (array([2., 4.]),)
    >>> (gx,) = g
    >>> np.array([1.0, 2.0]) - 0.1 * gx
    array([0.8, 1.6])
    >>> np.array([1.0, 2.0]) - g
    Traceback (most recent call last):
    TypeError: NumPy arithmetic met the tuple that grad returns, one gradient per ...
    """

    __slots__ = ()

    def __array__(self, dtype: Any = None, copy: Any = None) -> NoReturn:
        _refuse("An array conversion (np.asarray, np.array) met", len(self))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> NoReturn:
        _refuse("NumPy arithmetic met", len(self))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> NoReturn:
        name = getattr(func, "__name__", "a NumPy function")
        _refuse(f"np.{name} met", len(self))

    def __add__(self, other: Any) -> Any:
        if isinstance(other, tuple):
            return tuple.__add__(self, other)  # concatenation, as a tuple does
        _refuse("Arithmetic met", len(self))

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, (numbers.Number, np.ndarray)):
            _refuse("Arithmetic met", len(self))  # 2 * g would repeat the tuple
        return tuple.__mul__(self, other)

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, tuple):
            return tuple.__add__(other, self)
        _refuse("Arithmetic met", len(self))

    def _arithmetic(self, *other: Any) -> NoReturn:
        _refuse("Arithmetic met", len(self))

    __sub__ = __rsub__ = __truediv__ = __rtruediv__ = _arithmetic
    __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _arithmetic
    __neg__ = __pos__ = __abs__ = _arithmetic
    __rmul__ = __mul__

    def __float__(self) -> NoReturn:
        _refuse("float() met", len(self))

    def __reduce__(self) -> tuple:
        return (Gradients, (tuple(self),))
