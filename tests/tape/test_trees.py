"""tree_flatten, tree_unflatten, tree_leaves_like and tree_map on nested tuples, lists,
dicts and namedtuples, with the expected leaves and containers written out by hand, and
a round-trip property over random trees."""

from collections import OrderedDict, namedtuple

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tape.trees import tree_flatten, tree_leaves_like, tree_map, tree_unflatten

Point = namedtuple("Point", ["x", "y"])

# leaves in order: dicts by their own key order, then depth first
NESTED = {"b": (1.0, [2.0, 3.0]), "a": Point(x=4.0, y={"c": 5.0}), "e": []}


def _same(a, b):
    """Equal values in containers of the same types, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b))
    return a == b


def test_a_value_that_is_no_container_is_its_own_leaf():
    a = np.ones(2)
    leaves, treedef = tree_flatten(a)
    assert len(leaves) == 1 and leaves[0] is a
    assert tree_unflatten(treedef, [7.0]) == 7.0
    assert tree_flatten(None)[0] == [None]


def test_nested_containers_flatten_depth_first_and_come_back_as_they_were():
    leaves, treedef = tree_flatten(NESTED)
    assert leaves == [1.0, 2.0, 3.0, 4.0, 5.0]
    rebuilt = tree_unflatten(treedef, [10.0, 20.0, 30.0, 40.0, 50.0])
    expected = {"b": (10.0, [20.0, 30.0]), "a": Point(x=40.0, y={"c": 50.0}), "e": []}
    assert _same(rebuilt, expected)
    assert list(rebuilt) == ["b", "a", "e"]


def test_empty_containers_and_dict_subclasses_keep_their_type():
    for empty in ((), [], {}):
        leaves, treedef = tree_flatten(empty)
        assert leaves == [] and _same(tree_unflatten(treedef, []), empty)
    ordered = OrderedDict([("z", 1.0), ("y", (2.0,))])
    leaves, treedef = tree_flatten(ordered)
    assert leaves == [1.0, 2.0]
    assert _same(tree_unflatten(treedef, [3.0, 4.0]), OrderedDict([("z", 3.0), ("y", (4.0,))]))


def test_leaves_like_pairs_dict_entries_by_key_whatever_their_order():
    _, treedef = tree_flatten(NESTED)
    reordered = {"e": [], "a": Point(x=40.0, y={"c": 50.0}), "b": (10.0, [20.0, 30.0])}
    assert tree_leaves_like(reordered, treedef) == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert tree_leaves_like(9.0, tree_flatten(1.0)[1]) == [9.0]


def test_leaves_like_is_none_for_another_structure():
    _, treedef = tree_flatten(NESTED)
    point = Point(4.0, {"c": 5.0})
    others = [
        {"b": (1.0, [2.0, 3.0]), "a": point},  # a key missing
        {"b": (1.0, [2.0, 3.0]), "a": point, "e": [], "f": 6.0},  # a key too many
        {"b": (1.0, [2.0]), "a": point, "e": []},  # a list too short
        {"b": 1.0, "a": point, "e": []},  # a leaf for a tuple
        {"b": (1.0, [2.0, 3.0]), "a": Point(4.0, 5.0), "e": []},  # a leaf for a dict
    ]
    for other in others:
        assert tree_leaves_like(other, treedef) is None, other


def test_tree_map_applies_to_every_leaf_in_the_same_containers():
    got = tree_map(lambda v: v * 2, {"w": [1.0, 2.0], "b": Point(3.0, (4.0,))})
    assert _same(got, {"w": [2.0, 4.0], "b": Point(6.0, (8.0,))})


def _count(tree):
    """The number of leaves, counted independently of the code under test."""
    if isinstance(tree, dict):
        return sum(_count(v) for v in tree.values())
    if isinstance(tree, (tuple, list)):
        return sum(_count(v) for v in tree)
    return 1


TREES = st.recursive(
    st.none() | st.integers() | st.floats(allow_nan=False),
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=2), children, max_size=3)
        | st.builds(Point, children, children)
    ),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(TREES)
def test_flatten_then_unflatten_gives_the_tree_back(tree):
    leaves, treedef = tree_flatten(tree)
    assert len(leaves) == _count(tree)
    assert _same(tree_unflatten(treedef, leaves), tree)
    assert tree_leaves_like(tree, treedef) == leaves
    assert _same(tree_map(lambda v: v, tree), tree)
    # leaves go back in the order they came out
    numbered = tree_unflatten(treedef, list(range(len(leaves))))
    assert tree_flatten(numbered)[0] == list(range(len(leaves)))
