"""The engine's exceptions, and the messages that explain them.

Every error names what the user wrote and what to write instead; the long texts live
here so that the engine's code reads as code.
"""

from __future__ import annotations

import linecache
import sys
from typing import Any

import numpy as np

from sensitivities.registry import function_name

__all__ = [
    "NodeConversionError",
    "MissingRuleError",
    "MutationError",
    "AnomalyError",
    "missing_rule",
    "how_to_register",
    "describe",
    "format_site",
]


class NodeConversionError(TypeError):
    """A node was asked to turn into a plain number or ndarray, which would drop it off the tape.

    >>> from tape import Tape, Leaf
    >>> float(Leaf(Tape(), 1.0))
    Traceback (most recent call last):
        ...
    tape.errors.NodeConversionError: a Node cannot be turned into a Python number ...
    """


class MissingRuleError(TypeError, NotImplementedError):
    """A function met a node and has no sensitivity for it (and could not be entered).

    It is a ``NotImplementedError`` too, what Python code catches for "not supported".

    >>> from tape import Tape, Leaf, primitive
    >>> @primitive
    ... def halve(x):
    ...     return x / 2
    >>> halve(Leaf(Tape(), 1.0))
    Traceback (most recent call last):
        ...
    tape.errors.MissingRuleError: the primitive halve has no sensitivity; register one with ...
    """


class MutationError(RuntimeError):
    """An array recorded on a tape was changed in place before the reverse pass read it.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate, MutationError
    >>> t = Tape()
    >>> w = np.array([1.0, 2.0])
    >>> x = Leaf(t, np.array([3.0, 4.0]))
    >>> y = np.sum(x * w)
    >>> w[0] = 10.0  # the reverse pass of x * w needs the old w
    >>> try:
    ...     propagate(t, reverse_tape(y))
    ... except MutationError as e:
    ...     print(str(e).split(" was changed")[0])
    argument 1 of [1] Branch{float64[2]} [3., 8.] f=multiply
    """


class AnomalyError(FloatingPointError):
    """Under ``detect_anomaly()``: a record's value or adjoint turned NaN or infinite.

    >>> import numpy as np
    >>> from tape import grad, detect_anomaly, AnomalyError
    >>> with detect_anomaly(), np.errstate(all="ignore"):
    ...     try:
    ...         grad(lambda x: np.log(x - 1.0))(1.0)
    ...     except AnomalyError as e:
    ...         print(str(e).splitlines()[0])
    log returned -inf from finite inputs, at [2] Branch{float64} -inf f=log
    """


TO_ARRAY = (
    "a Node cannot be turned into an ndarray: its value would be cut off the tape "
    "and its gradient silently lost. Build arrays from nodes with np.stack, "
    "np.concatenate or np.where; instead of a[i] = node write a = tape.at(a)[i]"
    ".set(node); use node.value for a constant copy; or register a "
    "sensitivity for the function that needs an ndarray (see tape.sensitivity)"
)

TO_NUMBER = (
    "a Node cannot be turned into a Python number (float(), int(), math.*, or "
    "storing it into an ndarray with a[i] = node): its gradient would be silently "
    "lost. Use NumPy functions instead of math (np.sin, np.exp); instead of a[i] = "
    "node write a = tape.at(a)[i].set(node), or build the array with np.stack or "
    "np.concatenate; or take node.value for a constant"
)

STALE = (
    "this node belongs to a tape whose gradient was already taken and cleared: a node "
    "escaped from the function given to grad (kept in a global, a list or a closure). "
    "Return what you need from the function, or keep node.value as a constant"
)


def scipy_conversion(scipy_name: str, ours: str) -> str:
    return (
        f"{scipy_name} converts its arguments to ndarrays, which would cut this node off the "
        f"tape; call its differentiable counterpart {ours} instead (same arguments)"
    )


def in_place(name: str, instead: str) -> str:
    return (
        f"x.{name}() changes an array in place, which the tape cannot record; "
        f"use {instead} instead"
    )


def out_keyword(f: Any) -> str:
    return (
        f"np.{function_name(f)}(..., out=...) would write the result into an array in "
        "place (as a += x does), which the tape cannot record; drop out= and use the "
        "returned value (a = a + x)"
    )


def how_to_register(f: Any, argnum: int) -> str:
    """The lines a user writes to give argument ``argnum`` of ``f`` a sensitivity."""
    name = function_name(f)
    module = str(getattr(f, "__module__", "") or "")
    if module.startswith("numpy") or (isinstance(f, np.ufunc) and getattr(np, name, None) is f):
        qual = f"np.{name}"
    elif getattr(sys.modules.get("scipy.special"), name, None) is f:
        qual = f"scipy.special.{name}"
    else:
        qual = name
    return (
        f"register one with\n\n    @tape.sensitivity({qual}, {argnum})\n"
        "    def _(y, ybar, *args, **kwargs):\n"
        f"        return ...  # the adjoint of argument {argnum}\n"
    )


def missing_rule(f: Any, i: int) -> MissingRuleError:
    return MissingRuleError(
        f"{function_name(f)} has no sensitivity for argument {i}, which is a node "
        f"here; {how_to_register(f, i)}"
    )


def keyword_node(f: Any, name: str) -> TypeError:
    return TypeError(
        f"{function_name(f)} got a node as keyword argument {name!r}; "
        "pass differentiable arguments positionally"
    )


def describe(node: Any) -> str:
    """``[pos] Branch{...} f=name``, with the line that recorded it where known."""
    text = f"[{node.pos}] {node!r}"
    sites = node.tape.sites
    site = sites.get(node.pos) if sites else None
    if site is not None:
        text += "\n" + format_site(site)
    return text


def format_site(site: tuple) -> str:
    """A ``(file, line, function)`` triple as a traceback shows it."""
    filename, lineno, function = site
    line = linecache.getline(filename, lineno).strip()
    return f'  recorded at File "{filename}", line {lineno}, in {function}' + (
        f"\n    {line}" if line else ""
    )
