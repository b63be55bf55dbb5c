"""Containers of arguments (pytrees): tuples, lists, dicts and namedtuples of arrays, nested.

``grad`` and the transforms take and return such containers; these functions take them
apart into their leaves and put them back together. They are public: ``tree_map``,
``tree_flatten``, ``tree_unflatten`` and ``ravel`` are ``tape``'s tools for nested
parameters, as JAX's ``jax.tree_util`` and ``jax.flatten_util.ravel_pytree`` are.

A *leaf* is anything that is not a tuple, list, dict or namedtuple: an array, a float,
``None``. ``tree_map`` passes ``None`` leaves through without calling ``f`` on them, so a
parameter set to ``None`` (an absent bias) stays ``None``.

>>> import numpy as np
>>> from tape import tree_flatten, tree_unflatten, tree_map
>>> params = {"w": np.ones((2, 3)), "b": (np.zeros(3), None)}
>>> leaves, treedef = tree_flatten(params)
>>> [np.shape(x) for x in leaves]
[(2, 3), (3,), ()]
>>> treedef
TreeDef({'w': *, 'b': (*, *)})
>>> tree_unflatten(treedef, [1.0, 2.0, None])
{'w': 1.0, 'b': (2.0, None)}
>>> tree_map(lambda x: x.shape, params)
{'w': (2, 3), 'b': ((3,), None)}
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from sensitivities.registry import is_node, value_of

from .gradients import Gradients

__all__ = [
    "TreeDef",
    "tree_flatten",
    "tree_unflatten",
    "tree_leaves_like",
    "tree_map",
    "ravel",
]


class TreeDef(tuple):
    """How to rebuild a tree from its leaves: ``((kind, info), [(count, child), ...])``,
    ``child`` None for a leaf. ``num_leaves`` is how many leaves it takes; two trees of
    the same structure have equal treedefs."""

    __slots__ = ()

    @property
    def num_leaves(self) -> int:
        return sum(count for count, _ in self[1])

    def __repr__(self) -> str:
        return f"TreeDef({_show(self)})"


def _show(treedef: Any) -> str:
    if treedef is None:
        return "*"
    (kind, info), defs = treedef
    parts = [_show(d) for _, d in defs]
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(info[1], parts)) + "}"
    if kind == "namedtuple":
        return f"{info.__name__}(" + ", ".join(parts) + ")"
    if kind == "list":
        return "[" + ", ".join(parts) + "]"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def tree_flatten(tree: Any) -> tuple[list, Any]:
    """The leaves of nested tuples, lists, dicts and namedtuples, depth first (a dict's
    entries in its own order), and the treedef that ``tree_unflatten`` rebuilds it from.
    A value that is no container is its own single leaf (its treedef is None).

    >>> from tape import tree_flatten
    >>> tree_flatten({"a": 1.0, "b": [2.0, (3.0,)]})
    ([1.0, 2.0, 3.0], TreeDef({'a': *, 'b': [*, (*,)]}))
    """
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        children = list(tree)
        kind = ("namedtuple", type(tree))
    elif type(tree) in (tuple, list):
        children = list(tree)
        kind = (type(tree).__name__, type(tree))
    elif type(tree) is Gradients:  # grad's tuple, under another transform: a tuple
        children = list(tree)
        kind = ("tuple", tuple)
    elif isinstance(tree, dict):
        children = list(tree.values())
        kind = ("dict", (type(tree), list(tree.keys())))
    else:
        return [tree], None
    leaves, defs = [], []
    for child in children:
        if type(child) in _LEAVES:  # an array or a number: its own leaf, without a call
            leaves.append(child)
            defs.append(_ONE_LEAF)
            continue
        child_leaves, child_def = tree_flatten(child)
        leaves += child_leaves
        defs.append((len(child_leaves), child_def))
    return leaves, TreeDef((kind, defs))


_LEAVES = frozenset((np.ndarray, float, int, complex, bool, type(None), np.float64, np.float32))
_ONE_LEAF = (1, None)


def tree_unflatten(treedef: Any, leaves: Sequence) -> Any:
    """The inverse of ``tree_flatten``: the tree of ``treedef`` with ``leaves`` in it, in
    order. Leaves may be anything, ``None`` included.

    >>> from tape import tree_flatten, tree_unflatten
    >>> _, treedef = tree_flatten((1.0, {"x": 2.0}))
    >>> tree_unflatten(treedef, ["a", None])
    ('a', {'x': None})
    """
    leaves = list(leaves)
    if treedef is None:
        if len(leaves) != 1:
            raise ValueError(f"a single leaf was expected, got {len(leaves)}")
        return leaves[0]
    if not isinstance(treedef, tuple):
        raise TypeError(f"tree_unflatten needs a treedef from tree_flatten, got {treedef!r}")
    expected = sum(count for count, _ in treedef[1])
    if len(leaves) != expected:
        raise ValueError(f"this treedef takes {expected} leaves, got {len(leaves)}")
    return _unflatten(treedef, leaves)


def _unflatten(treedef: Any, leaves: Sequence) -> Any:
    if treedef is None:
        return leaves[0]
    (kind, info), defs = treedef
    children, start = [], 0
    for count, child_def in defs:
        if child_def is None:  # a leaf
            children.append(leaves[start])
        else:
            children.append(_unflatten(child_def, leaves[start : start + count]))
        start += count
    if kind == "namedtuple":
        return info(*children)
    if kind == "dict":
        cls, keys = info
        return cls(zip(keys, children))
    return info(children)


def tree_leaves_like(tree: Any, treedef: Any) -> list | None:
    """The leaves of ``tree`` in the order ``treedef`` gives them (a dict's entries by
    key, whatever order ``tree`` lists them in), or None where ``tree`` has another
    structure: how a tangent or cotangent is paired with the values it belongs to."""
    if treedef is None:
        return [tree]
    (kind, info), defs = treedef
    if kind == "dict":
        keys = info[1]
        if not isinstance(tree, dict) or len(tree) != len(keys) or any(k not in tree for k in keys):
            return None
        children = [tree[k] for k in keys]
    elif isinstance(tree, (tuple, list)) and len(tree) == len(defs):
        children = list(tree)
    else:
        return None
    leaves: list = []
    for child, (_, child_def) in zip(children, defs):
        child_leaves = tree_leaves_like(child, child_def)
        if child_leaves is None:
            return None
        leaves += child_leaves
    return leaves


def tree_map(f: Callable, tree: Any, *rest: Any) -> Any:
    """``tree`` with ``f`` applied to each leaf, in the same containers. With more trees,
    ``f`` takes one leaf of each, paired by position (a dict's entries by key); they
    must have ``tree``'s structure. A ``None`` leaf of ``tree`` stays ``None``.

    >>> import numpy as np
    >>> from tape import tree_map
    >>> params = {"w": np.array([1.0, 2.0]), "b": 0.5}
    >>> grads = {"b": 1.0, "w": np.array([10.0, 20.0])}
    >>> tree_map(lambda p, g: p - 0.1 * g, params, grads)
    {'w': array([0., 0.]), 'b': 0.4}
    """
    leaves, treedef = tree_flatten(tree)
    others = []
    for i, other in enumerate(rest):
        other_leaves = tree_leaves_like(other, treedef)
        if other_leaves is None:
            raise ValueError(_mismatch(i, tree, treedef, other))
        others.append(other_leaves)
    mapped = [
        None if leaf is None else f(leaf, *(o[k] for o in others)) for k, leaf in enumerate(leaves)
    ]
    return tree_unflatten(treedef, mapped)


def _mismatch(i: int, tree: Any, treedef: Any, other: Any) -> str:
    structure = tree_flatten(other)[1]
    message = (
        f"tree_map: tree {i + 1} of the rest has the structure "
        f"{'of a single leaf' if structure is None else repr(structure)}, not the first "
        f"tree's {treedef!r}"
    )
    if (type(tree) is Gradients) == (type(other) is Gradients):
        return message
    which, gradients = ("it", other) if type(other) is Gradients else ("the first tree", tree)
    count = f"{len(gradients)} gradient{'s' if len(gradients) != 1 else ''}"
    return (
        f"{message}: {which} is the tuple that grad returns, one gradient per argument "
        f"({count}). Take the gradient out of it, `(g,) = grad(f)(params)`, or ask for it "
        "alone with `grad(f, argnums=0)`"
    )


def ravel(tree: Any) -> tuple[Any, Callable]:
    """``(vector, unravel)``: the leaves of ``tree`` concatenated into one flat float
    vector, and the function that turns such a vector back into the tree, with each
    leaf's shape, dtype and container (a Python float comes back a float). ``None``
    leaves take no room and come back ``None``. The vector's dtype is the leaves'
    result type (float64 for integer leaves).

    It is what ``scipy.optimize.minimize`` needs of a dict of parameters. ``unravel`` is
    made of indexing and reshaping, so it may be differentiated through:
    ``grad(lambda v: loss(unravel(v)))``.

    >>> import numpy as np
    >>> from tape import ravel
    >>> params = {"w": np.arange(4.0).reshape(2, 2), "b": 5.0, "skip": None}
    >>> v, unravel = ravel(params)
    >>> v
    array([0., 1., 2., 3., 5.])
    >>> unravel(v * 10)
    {'w': array([[ 0., 10.],
           [20., 30.]]), 'b': 50.0, 'skip': None}
    """
    leaves, treedef = tree_flatten(tree)
    plain = [None if leaf is None else value_of(leaf) for leaf in leaves]
    present = [x for x in plain if x is not None]
    dtypes = [np.result_type(x) for x in present]
    dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    if dtype.kind not in "fc":
        dtype = np.result_type(dtype, np.float64)
    parts, spans, start = [], [], 0
    for leaf, x in zip(leaves, plain):
        if x is None:
            spans.append(None)
            continue
        n = int(np.size(x))
        spans.append((start, n, np.shape(x), np.result_type(x), type(x)))
        start += n
        parts.append(np.reshape(leaf, (n,)))
    if not parts:
        vector = np.zeros(0, dtype=dtype)
    elif any(is_node(p) for p in parts):
        vector = np.concatenate(parts)  # recorded: the vector is differentiable in the tree
    else:
        vector = np.concatenate([np.asarray(p, dtype=dtype) for p in parts])
    size = start

    def unravel(v: Any) -> Any:
        if np.shape(v) != (size,):
            raise ValueError(f"unravel takes a vector of shape ({size},), got {np.shape(v)}")
        out = []
        for span in spans:
            if span is None:
                out.append(None)
                continue
            a, n, shape, leaf_dtype, kind = span
            piece = np.reshape(v[a : a + n], shape)
            if is_node(piece):
                out.append(piece)  # the values keep the vector's dtype, and stay recorded
            elif kind is float:
                out.append(float(np.real(piece)) if leaf_dtype.kind == "f" else piece)
            elif kind is complex:
                out.append(complex(piece))
            elif leaf_dtype.kind in "fc" and np.result_type(piece).kind in "fc":
                piece = np.asarray(piece)
                if leaf_dtype.kind == "f" and piece.dtype.kind == "c":
                    piece = piece.real
                piece = piece.astype(leaf_dtype, copy=True)
                out.append(leaf_dtype.type(piece) if kind is not np.ndarray else piece)
            elif kind in (int, bool):
                out.append(kind(np.real(piece)))
            else:
                out.append(np.asarray(np.real(piece)).astype(leaf_dtype))
        return tree_unflatten(treedef, out)

    return vector, unravel
