"""SciPy's BLAS wrappers (``scipy.linalg.blas``) as NumPy expressions with their meaning,
so that library code calling them on nodes (GPy's ``tdot`` calls ``dsyrk``) is
differentiated through NumPy's rules.

For each precision prefix SciPy has (``s`` float32, ``d`` float64, ``c`` complex64,
``z`` complex128): ``gemm gemv symm syrk syr ger axpy scal nrm2 dot`` (``dot`` for ``s``
and ``d``; ``dotu``, ``dotc``, ``herk``, ``hemm`` for ``c`` and ``z``), with SciPy's
arguments and defaults, and what SciPy returns: ``alpha op(a) op(b) + beta c`` for
``gemm``, where ``op`` is the identity, the transpose (``trans=1``) or the conjugate
transpose (``trans=2``); ``syrk``, ``herk`` and ``syr`` compute one triangle (``lower=0``:
the upper) and leave the other as ``c`` had it (zeros without ``c``); ``symm`` and
``hemm`` read ``a`` from one triangle. ``beta = 0`` ignores ``c``'s values, as BLAS does.
Arguments are cast to the routine's precision. Strided forms (``offx``, ``incx``, an
``n`` shorter than the vectors) are SciPy's own, for plain values only.

>>> import numpy as np
>>> from sensitivities.scipy.blas import dsyrk
>>> dsyrk(1.0, np.array([[1.0, 2.0], [3.0, 4.0]]))  # the upper triangle of a a'
array([[ 5., 11.],
       [ 0., 25.]])
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..registry import holds_node, is_node, value_of

try:
    import scipy.linalg.blas as _blas
except ImportError:  # SciPy is optional: without it there is nothing here
    _blas = None

_PRECISIONS = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _cast(x: Any, dtype: type) -> Any:
    # as f2py casts what it is handed to the routine's precision
    if not hasattr(x, "dtype"):
        return np.asarray(x, dtype=dtype)
    return x if x.dtype == dtype else np.astype(x, dtype)


def _meets_node(args: tuple, kwargs: dict) -> bool:
    # a node, or an array of another kind that speaks NumPy's protocols (vmap's batches)
    values = args + tuple(kwargs.values())
    return holds_node(values) or any(
        not isinstance(v, (np.ndarray, np.generic)) and hasattr(type(v), "__array_function__")
        for v in values
    )


def _op(x: Any, trans: int) -> Any:
    """BLAS's op(x): ``x``, its transpose (1) or its conjugate transpose (2)."""
    if trans == 0:
        return x
    xt = np.swapaxes(x, -1, -2)
    return np.conjugate(xt) if trans == 2 and np.iscomplexobj(x) else xt


def _in_triangle(n: int, lower: int) -> Any:
    rows, cols = np.indices((n, n))
    return rows >= cols if lower else rows <= cols


def _symmetric(a: Any, lower: int, hermitian: bool = False) -> Any:
    """The symmetric (Hermitian) matrix BLAS reads from one triangle of ``a``."""
    n = np.shape(a)[-1]
    triangle = np.where(_in_triangle(n, lower), a, np.zeros_like(a))
    strict = np.where(np.eye(n, dtype=bool), np.zeros_like(a), triangle)
    mirrored = np.swapaxes(strict, -1, -2)
    if hermitian:  # its diagonal is real: BLAS never reads the imaginary parts there
        mirrored = np.conjugate(mirrored)
        triangle = np.where(np.eye(n, dtype=bool), np.real(triangle) + 0j, triangle)
    return triangle + mirrored


def _plus(product: Any, beta: Any, c: Any) -> Any:
    # BLAS never reads c when beta is 0: a NaN there stays out of the result
    return product if c is None or (not holds_node(beta) and beta == 0) else product + beta * c


def _one_triangle(full: Any, c: Any, lower: int, dtype: type) -> Any:
    """``full`` on the computed triangle, ``c`` (or zeros) on the other."""
    other = np.zeros_like(full) if c is None else _cast(c, dtype)
    return np.where(_in_triangle(np.shape(full)[-1], lower), full, other)


def _written(name: str, target: Any, result: Any, dtype: type, overwrite: Any) -> Any:
    """What SciPy hands back: ``result``, or, where f2py reuses ``target``'s memory (asked
    to, of the routine's precision, Fortran-contiguous, writeable), ``target`` itself with
    ``result`` written in: every name bound to it sees the new values, on a node too."""
    plain = value_of(target)
    if not (overwrite and isinstance(plain, np.ndarray) and plain.dtype == dtype
            and plain.flags.f_contiguous and plain.flags.writeable):  # fmt: skip
        return result
    if not is_node(target):
        raise TypeError(
            f"scipy.linalg.blas.{name} writes its result into the array it was handed, here "
            "an ndarray, which cannot hold a node's values: hand it a copy that is not "
            "Fortran-ordered, or pass the overwrite flag 0"
        )
    target[...] = result
    return target


def _refuse_strides(name: str, **strides: Any) -> None:
    defaults = {"n": None, "offx": 0, "offy": 0, "incx": 1, "incy": 1}
    if any(value != defaults[key] for key, value in strides.items()):
        raise NotImplementedError(
            f"scipy.linalg.blas.{name} on nodes takes whole vectors: "
            f"{', '.join(strides)} are for plain values only"
        )


def _routines(prefix: str) -> dict[str, Callable]:
    dtype = _PRECISIONS[prefix]
    complex_ = prefix in "cz"

    def gemm(alpha, a, b, beta=0.0, c=None, trans_a=0, trans_b=0, overwrite_c=0):
        product = alpha * (_op(_cast(a, dtype), trans_a) @ _op(_cast(b, dtype), trans_b))
        return _written(prefix + "gemm", c, _cast(_plus(product, beta, c), dtype), dtype,
                        overwrite_c)  # fmt: skip

    def gemv(alpha, a, x, beta=0.0, y=None, offx=0, incx=1, offy=0, incy=1, trans=0,
             overwrite_y=0):  # fmt: skip
        _refuse_strides(prefix + "gemv", offx=offx, incx=incx, offy=offy, incy=incy)
        product = alpha * (_op(_cast(a, dtype), trans) @ _cast(x, dtype))
        return _written(prefix + "gemv", y, _cast(_plus(product, beta, y), dtype), dtype,
                        overwrite_y)  # fmt: skip

    def symm(alpha, a, b, beta=0.0, c=None, side=0, lower=0, overwrite_c=0, *,
             hermitian=False):  # fmt: skip
        full = _symmetric(_cast(a, dtype), lower, hermitian)
        b = _cast(b, dtype)
        product = alpha * (b @ full if side else full @ b)
        return _written(prefix + "symm", c, _cast(_plus(product, beta, c), dtype), dtype,
                        overwrite_c)  # fmt: skip

    def syrk(alpha, a, beta=0.0, c=None, trans=0, lower=0, overwrite_c=0, *, hermitian=False):
        a = _cast(a, dtype)
        conjugate = 2 if hermitian else 1  # herk's op(a) op(a)^H, syrk's op(a) op(a)^T
        left = _op(a, conjugate if trans else 0)
        full = _plus(alpha * (left @ _op(left, conjugate)), beta, c)
        if hermitian:  # as BLAS, the diagonal of a Hermitian result is real
            full = np.where(np.eye(np.shape(full)[-1], dtype=bool), np.real(full) + 0j, full)
        result = _one_triangle(_cast(full, dtype), c, lower, dtype)
        return _written(prefix + "syrk", c, result, dtype, overwrite_c)

    def syr(alpha, x, lower=0, incx=1, offx=0, n=None, a=None, overwrite_a=0):
        # complex too: csyr and zsyr are symmetric (x x^T), not Hermitian
        _refuse_strides(prefix + "syr", incx=incx, offx=offx, n=n)
        x = _cast(x, dtype)
        full = alpha * (x[:, None] * x[None, :])
        full = full if a is None else full + _cast(a, dtype)
        return _written(prefix + "syr", a, _one_triangle(full, a, lower, dtype), dtype,
                        overwrite_a)  # fmt: skip

    def ger(alpha, x, y, incx=1, incy=1, a=None, overwrite_x=0, overwrite_y=0, overwrite_a=0,
            *, conjugate=False):  # fmt: skip
        _refuse_strides(prefix + "ger", incx=incx, incy=incy)
        y = _cast(y, dtype)
        y = np.conjugate(y) if conjugate else y  # gerc: x y^H
        full = alpha * (_cast(x, dtype)[:, None] * y[None, :])
        result = _cast(full if a is None else full + _cast(a, dtype), dtype)
        return _written(prefix + "ger", a, result, dtype, overwrite_a)

    def axpy(x, y, n=None, a=1.0, offx=0, incx=1, offy=0, incy=1):
        _refuse_strides(prefix + "axpy", n=n, offx=offx, incx=incx, offy=offy, incy=incy)
        result = _cast(a * _cast(x, dtype) + _cast(y, dtype), dtype)
        return _written(prefix + "axpy", y, result, dtype, True)  # y is always reused

    def scal(a, x, n=None, offx=0, incx=1):
        _refuse_strides(prefix + "scal", n=n, offx=offx, incx=incx)
        return _written(prefix + "scal", x, _cast(a * _cast(x, dtype), dtype), dtype, True)

    def nrm2(x, n=None, offx=0, incx=1):
        _refuse_strides(prefix + "nrm2", n=n, offx=offx, incx=incx)
        # SciPy hands back a Python float: double precision
        return np.astype(np.sqrt(np.sum(np.abs(_cast(x, dtype)) ** 2)), np.float64)

    def dot(x, y, n=None, offx=0, incx=1, offy=0, incy=1, *, conjugate=False):
        _refuse_strides(prefix + "dot", n=n, offx=offx, incx=incx, offy=offy, incy=incy)
        x = _cast(x, dtype)
        xy = np.sum((np.conjugate(x) if conjugate else x) * _cast(y, dtype))
        return np.astype(xy, np.complex128 if complex_ else np.float64)  # a Python number

    found = {"gemm": gemm, "gemv": gemv, "symm": symm, "syrk": syrk, "syr": syr,
             "axpy": axpy, "scal": scal, "nrm2": nrm2}  # fmt: skip
    if complex_:
        found.update(
            herk=lambda *a, **k: syrk(*a, **k, hermitian=True),
            hemm=lambda *a, **k: symm(*a, **k, hermitian=True),
            geru=ger,
            gerc=lambda *a, **k: ger(*a, **k, conjugate=True),
            dotu=dot,
            dotc=lambda *a, **k: dot(*a, **k, conjugate=True),
        )
    else:
        found.update(ger=ger, dot=dot)
    return {prefix + name: routine for name, routine in found.items()}


def _counterpart(ours: Callable, theirs: Any) -> Callable:
    """``ours`` where a call meets a node, SciPy's routine (and its return types) else."""

    def routine(*args: Any, **kwargs: Any) -> Any:
        if _meets_node(args, kwargs):
            return ours(*args, **kwargs)
        return theirs(*args, **kwargs)

    return routine


def _define() -> list[str]:
    names = []
    for prefix in _PRECISIONS:
        for name, ours in _routines(prefix).items():
            theirs = getattr(_blas, name, None)
            if theirs is None:
                continue
            routine = _counterpart(ours, theirs)
            routine.__name__ = routine.__qualname__ = name
            routine.__module__ = __name__
            routine.__doc__ = (f"``scipy.linalg.blas.{name}`` as a NumPy expression: "
                               f"``{(theirs.__doc__ or '').splitlines()[0]}``")  # fmt: skip
            globals()[name] = routine
            names.append(name)
    return names


__all__ = _define() if _blas is not None else []
