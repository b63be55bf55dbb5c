"""``out=``: a call that writes its result into an array, recorded as the in-place write
it is. ``np.tanh(x, out=x)`` means ``x[...] = np.tanh(x)`` (scikit-learn's MLP writes its
activations so), and ``where=`` keeps the old value where it is False; the result is
computed before the write, so an ``out`` that is also an input reads its old value, as in
NumPy. The write itself is ``tape.core.inplace.set_item``: every name and view of the node
sees it. NumPy's own errors (shape, casting) come first, from NumPy on the plain values.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sensitivities.registry import function_name, holds_node, value_of

from .errors import out_into_array
from .inplace import set_item
from .recording import extend

__all__ = ["ufunc_out", "function_out"]


def ufunc_out(call: Callable, inputs: tuple, kwargs: dict, elementwise: bool) -> Any:
    """``call(*inputs, **kwargs)`` with ``kwargs['out']`` a tuple of outputs, at least one
    of them a node or written from one. ``elementwise``: a ufunc's ``__call__``, whose
    ``where=`` masks the write (for a reduction it selects the elements read)."""
    outs = kwargs["out"]
    _check_targets(call, outs, inputs)
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    where = kwargs.pop("where", True) if elementwise else True
    _probe(call, inputs, kwargs, outs, where)
    result = call(*inputs, **kwargs)
    results = result if isinstance(result, tuple) else (result,)
    for target, r in zip(outs, results):
        if target is not None:
            _write(target, r, where)
    written = tuple(r if t is None else t for t, r in zip(outs, results))
    return written if isinstance(result, tuple) else written[0]


def function_out(f: Callable, args: tuple, kwargs: dict, apply: Callable) -> Any:
    """``f(*args, **kwargs)`` of a NumPy function (``np.sum(x, out=o)``), ``out`` a node
    or written from one: ``o[...] = f(*args)``, returning ``o``."""
    out = kwargs["out"]
    targets = out if isinstance(out, tuple) else (out,)
    _check_targets(f, targets, args)
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    _probe(f, args, kwargs, out, True)
    result = apply(f, args, kwargs)
    results = result if isinstance(result, tuple) else (result,)
    for target, r in zip(targets, results):
        _write(target, r, True)
    return out


def _check_targets(f: Callable, outs: tuple, inputs: Any) -> None:
    for target in outs:
        if isinstance(target, np.ndarray) and not target.flags.writeable:
            raise ValueError("output array is read-only")  # NumPy's error comes first
        if target is not None and not holds_node(target) and holds_node(inputs):
            raise TypeError(out_into_array(function_name(f)))


def _probe(f: Callable, inputs: Any, kwargs: dict, outs: Any, where: Any) -> None:
    """NumPy's own errors for the call, on copies of the plain values."""
    copies = tuple(None if o is None else np.array(value_of(o)) for o in _tuple(outs))
    extra = {} if where is True else {"where": value_of(where)}
    with np.errstate(all="ignore"):
        f(
            *value_of(tuple(inputs)),
            out=copies if isinstance(outs, tuple) else copies[0],
            **value_of(kwargs),
            **extra,
        )


def _tuple(outs: Any) -> tuple:
    return outs if isinstance(outs, tuple) else (outs,)


def _write(target: Any, r: Any, where: Any) -> None:
    if where is not True:
        r = np.where(where, r, target)
    set_item(target, Ellipsis, r)


extend(function_out=function_out)
