"""tree_flatten, tree_unflatten, tree_leaves_like and tree_map on nested tuples, lists,
dicts and namedtuples, with the expected leaves and containers written out by hand, and
a round-trip property over random trees."""

from collections import OrderedDict, namedtuple

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tape.core.trees import tree_flatten, tree_leaves_like, tree_map, tree_unflatten

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


# -- the public tools: tree_map over several trees, ravel ------------------------------


def test_tree_map_pairs_several_trees_by_position_and_dict_key():
    a = {"w": np.array([1.0, 2.0]), "b": (3.0, None)}
    b = {"b": (30.0, 7.0), "w": np.array([10.0, 20.0])}
    got = tree_map(lambda x, y: x + y, a, b)
    assert list(got) == ["w", "b"]
    np.testing.assert_array_equal(got["w"], [11.0, 22.0])
    assert got["b"] == (33.0, None)  # None passes through, f is not called on it


def test_tree_map_refuses_trees_of_another_structure():
    import pytest

    with pytest.raises(ValueError, match="structure"):
        tree_map(lambda x, y: x, {"a": 1.0}, {"b": 1.0})


def test_treedefs_of_the_same_structure_are_equal_and_count_their_leaves():
    _, d1 = tree_flatten({"a": [1.0, 2.0], "b": None})
    _, d2 = tree_flatten({"a": [np.ones(3), 5.0], "b": 9.0})
    _, d3 = tree_flatten({"a": (1.0, 2.0), "b": None})
    assert d1 == d2 and d1 != d3
    assert d1.num_leaves == 3
    assert repr(d1) == "TreeDef({'a': [*, *], 'b': *})"


def test_tree_unflatten_checks_the_number_of_leaves():
    import pytest

    _, treedef = tree_flatten((1.0, 2.0))
    with pytest.raises(ValueError, match="takes 2 leaves, got 3"):
        tree_unflatten(treedef, [1, 2, 3])


def test_ravel_concatenates_in_flatten_order_and_unravel_restores_everything():
    from tape import ravel

    tree = {
        "w": np.arange(6.0, dtype=np.float32).reshape(2, 3),
        "b": Point(x=2.5, y=np.float32(4.0)),
        "none": None,
        "z": np.array(7.0),
    }
    v, unravel = ravel(tree)
    assert v.dtype == np.float64 and v.shape == (9,)
    np.testing.assert_array_equal(v, [0, 1, 2, 3, 4, 5, 2.5, 4.0, 7.0])
    back = unravel(v + 1)
    assert back["none"] is None and type(back["b"]) is Point
    assert back["w"].dtype == np.float32 and back["w"].shape == (2, 3)
    np.testing.assert_array_equal(back["w"], np.arange(1.0, 7.0).reshape(2, 3))
    assert type(back["b"].x) is float and back["b"].x == 3.5
    assert type(back["b"].y) is np.float32 and back["b"].y == 5.0
    assert type(back["z"]) is np.ndarray and back["z"].shape == () and back["z"] == 8.0
    # float32 leaves alone give a float32 vector; integers a float64 one
    assert ravel([np.ones(2, np.float32)])[0].dtype == np.float32
    assert ravel([np.arange(3)])[0].dtype == np.float64
    assert ravel({})[0].shape == (0,)


def test_unravel_refuses_a_vector_of_another_size():
    import pytest

    from tape import ravel

    _, unravel = ravel([np.ones(3)])
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        unravel(np.ones(4))


def test_unravel_is_differentiable():
    from tape import grad, ravel

    tree = {"a": np.array([1.0, 2.0]), "b": 3.0}
    v, unravel = ravel(tree)

    def loss(v):
        p = unravel(v)
        return np.sum(p["a"] ** 2) * p["b"]

    (g,) = grad(loss)(v)
    np.testing.assert_allclose(g, [2 * 1.0 * 3.0, 2 * 2.0 * 3.0, 1.0 + 4.0])
