"""``grad`` and ``value_and_grad``: one forward pass on a fresh tape, one reverse pass."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from .core import Leaf, Node, Tape
from .reverse import propagate, reverse_tape

__all__ = ["grad", "value_and_grad", "tree_flatten", "tree_unflatten"]


# -- containers of arguments: tuples, lists, dicts and namedtuples of arrays ---------------


def tree_flatten(tree: Any) -> tuple[list, Any]:
    """The leaves of nested tuples, lists, dicts and namedtuples, and how to rebuild them."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        children = list(tree)
        kind = ("namedtuple", type(tree))
    elif type(tree) in (tuple, list):
        children = list(tree)
        kind = (type(tree).__name__, type(tree))
    elif isinstance(tree, dict):
        children = list(tree.values())
        kind = ("dict", (type(tree), list(tree.keys())))
    else:
        return [tree], None
    leaves, defs = [], []
    for child in children:
        child_leaves, child_def = tree_flatten(child)
        leaves += child_leaves
        defs.append((len(child_leaves), child_def))
    return leaves, (kind, defs)


def tree_unflatten(treedef: Any, leaves: Sequence) -> Any:
    """The inverse of ``tree_flatten``."""
    if treedef is None:
        return leaves[0]
    (kind, info), defs = treedef
    children, start = [], 0
    for count, child_def in defs:
        children.append(tree_unflatten(child_def, leaves[start : start + count]))
        start += count
    if kind == "namedtuple":
        return info(*children)
    if kind == "dict":
        cls, keys = info
        return cls(zip(keys, children))
    return info(children)


# -- grad -------------------------------------------------------------------------------


def _argument_name(f: Callable, i: int) -> str:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return f"argument {i}"
    if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
        return f"argument {i} ({params[i].name!r})"
    return f"argument {i}"


def _check_input(f: Callable, i: int, leaf: Any) -> None:
    value = leaf
    while isinstance(value, Node):
        value = value.value
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        if isinstance(value, (bool, int)):
            dtype = np.dtype(bool) if isinstance(value, bool) else np.dtype(int)
        elif isinstance(value, (float, complex)):
            return
        else:
            raise TypeError(
                f"cannot differentiate with respect to {_argument_name(f, i)} of "
                f"{getattr(f, '__name__', 'f')}: it is a {type(value).__name__}, not a float, "
                "an ndarray, or a tuple, list or dict of them"
            )
    if dtype.kind not in "fc":
        raise TypeError(
            f"cannot differentiate with respect to {_argument_name(f, i)} of "
            f"{getattr(f, '__name__', 'f')}: it has dtype {dtype}, and gradients need "
            "floating-point inputs; pass it as floats (np.asarray(x, dtype=float)) or "
            "leave it out with argnums"
        )


def _as_input_type(g: Any, x: Any) -> Any:
    """The gradient ``g`` with the shape, dtype and kind (float or array) of input ``x``."""
    if isinstance(g, Node):  # an outer tape's node, under nested differentiation
        if np.shape(g) != np.shape(x):
            g = np.broadcast_to(g, np.shape(x))
        return g
    if isinstance(x, Node):
        x = x.value
    dtype = np.result_type(x)
    if dtype.kind == "f" and np.iscomplexobj(g):
        g = np.real(g)  # a real input's gradient is real, also through complex intermediates
    if isinstance(x, np.generic):
        return dtype.type(g)
    if isinstance(x, (float, complex)):
        return type(x)(g)
    g = np.asarray(g, dtype=dtype)
    if g.shape != np.shape(x):
        g = np.broadcast_to(g, np.shape(x))
    if not g.flags.writeable:  # a broadcast view: hand the user an array of their own
        g = g.copy()
    return g


def _zeros_like_input(x: Any) -> Any:
    while isinstance(x, Node):
        x = x.value
    if isinstance(x, (float, complex)):
        return type(x)(0)
    return np.zeros_like(x)


def _normalise_argnums(argnums: Any, nargs: int, fname: str) -> tuple[tuple[int, ...], bool]:
    if argnums is None:
        return tuple(range(nargs)), False
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else tuple(argnums)
    for n in nums:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"argnums must be ints, got {n!r}")
        if not -nargs <= n < nargs:
            raise ValueError(f"argnums {n} is out of range: {fname} was called with {nargs} positional arguments")
    return tuple(n % nargs for n in nums), single


def _forward_and_reverse(f: Callable, argnums: Any, args: tuple, kwargs: dict, who: str):
    fname = getattr(f, "__name__", "f")
    nums, single = _normalise_argnums(argnums, len(args), fname)
    if not nums:
        raise ValueError(f"{who} needs at least one argument to differentiate {fname} with respect to")
    tape = Tape()
    args = list(args)
    inputs = {}
    for i in nums:
        leaves, treedef = tree_flatten(args[i])
        for leaf in leaves:
            _check_input(f, i, leaf)
        nodes = [Leaf(tape, leaf) for leaf in leaves]
        inputs[i] = (leaves, treedef, nodes)
        args[i] = tree_unflatten(treedef, nodes)
    try:
        out = f(*args, **kwargs)
        value = out.value if isinstance(out, Node) and out.tape is tape else out
        shape = np.shape(value)
        if shape != ():
            raise TypeError(
                f"{who} needs {fname} to return a scalar, but it returned shape {shape}; "
                "use jacobian or vjp for non-scalar outputs, or reduce the output (np.sum)"
            )
        if np.iscomplexobj(value):
            raise TypeError(f"{who} needs {fname} to return a real scalar, got a complex one")
        if isinstance(out, Node) and out.tape is tape:
            rtape = propagate(tape, reverse_tape(out, 1.0))
            adjoint = rtape.adjoints
        else:
            adjoint = None
        grads = []
        for i in nums:
            leaves, treedef, nodes = inputs[i]
            gs = []
            for x, node in zip(leaves, nodes):
                g = None if adjoint is None else adjoint[node.pos]
                gs.append(_zeros_like_input(x) if g is None else _as_input_type(g, x))
            grads.append(tree_unflatten(treedef, gs))
    finally:
        tape.records.clear()  # break node <-> tape cycles so memory goes back at once
    return value, (grads[0] if single else tuple(grads))


def value_and_grad(f: Callable, argnums: int | Sequence[int] | None = None) -> Callable:
    """``value_and_grad(f)(*args)`` is ``(f(*args), grad(f)(*args))`` from one forward
    and one reverse pass.

    >>> from tape import value_and_grad
    >>> value_and_grad(lambda x, y: x * y)(3.0, 4.0)
    (12.0, (4.0, 3.0))
    """

    @functools.wraps(f)
    def value_and_gradient(*args: Any, **kwargs: Any):
        value, grads = _forward_and_reverse(f, argnums, args, kwargs, "value_and_grad")
        if isinstance(value, np.float64):
            value = float(value)
        return value, grads

    return value_and_gradient


def grad(f: Callable, argnums: int | Sequence[int] | None = None) -> Callable:
    """The gradient of scalar-valued ``f``.

    ``grad(f)(x, y)`` returns a tuple with one gradient per positional argument, or per
    entry of ``argnums``; an int ``argnums`` returns that one gradient alone. Each
    gradient has its argument's shape, dtype and container structure (tuple, list, dict,
    namedtuple); an argument that the output does not depend on gets zeros.

    >>> import numpy as np
    >>> from tape import grad
    >>> grad(lambda x, y: x * y + np.sin(x))(0.6791074260357777, 0.8284134829000359)
    (1.6065471361170487, 0.6791074260357777)
    >>> grad(lambda w: np.sum(w ** 2), argnums=0)(np.array([1.0, 2.0]))
    array([2., 4.])
    """

    @functools.wraps(f)
    def gradient(*args: Any, **kwargs: Any):
        return _forward_and_reverse(f, argnums, args, kwargs, "grad")[1]

    return gradient
