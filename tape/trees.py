"""Containers of arguments: tuples, lists, dicts and namedtuples of arrays, nested.

``grad`` and the transforms take and return such containers; these functions take them
apart into their leaves and put them back together.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["tree_flatten", "tree_unflatten", "tree_leaves_like", "tree_map"]



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


def tree_map(f: Any, tree: Any) -> Any:
    """``tree`` with ``f`` applied to each leaf, in the same containers."""
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [f(leaf) for leaf in leaves])
