"""Tape, Leaf and Branch: Nabla's worked example value for value, the REPL display
DESIGN.md shows, and a Branch made by hand is the one recording makes."""

import numpy as np
import pytest

from tape import Branch, Leaf, Tape, grad, propagate, reverse_tape

X, Y = 0.6791074260357777, 0.8284134829000359


def test_worked_example_adjoints_match_the_analytic_derivatives():
    t = Tape()
    x = Leaf(t, X)
    y = Leaf(t, Y)
    z = x * y + np.sin(x)
    rt = reverse_tape(z, 1.0)
    assert propagate(t, rt) is rt
    # dz/dx = y + cos(x), dz/dy = x
    assert rt[x] == Y + np.cos(X) == 1.6065471361170487
    assert rt[y] == X == 0.6791074260357777
    assert rt[0] == rt[x] and rt[1] == rt[y]
    assert type(rt[x]) is float  # no np.float64(...) in the REPL


def test_worked_example_through_grad():
    assert grad(lambda x, y: x * y + np.sin(x))(X, Y) == (Y + np.cos(X), X)


def test_tape_reads_as_in_the_design():
    t = Tape()
    x = Leaf(t, X)
    y = Leaf(t, Y)
    z = x * y + np.sin(x)
    assert repr(t) == (
        "Tape with 5 elements:\n"
        "  [0]: Leaf{float64} 0.6791074260357777\n"
        "  [1]: Leaf{float64} 0.8284134829000359\n"
        "  [2]: Branch{float64} 0.5625817480655771 f=multiply\n"
        "  [3]: Branch{float64} 0.6280987324705773 f=sin\n"
        "  [4]: Branch{float64} 1.1906804805361544 f=add"
    )
    assert len(t) == 5 and list(t)[4] is z and t[4] is z
    assert (z.f, z.args, z.kwargs, z.tape, z.pos) == (np.add, (t[2], t[3]), {}, t, 4)
    rt = reverse_tape(z, 1.0)
    assert repr(rt).splitlines()[:2] == ["Reverse tape with 5 elements:", "  [0]: unset"]
    propagate(t, rt)
    assert repr(rt).splitlines()[1] == "  [0]: 1.6065471361170487"


def test_branch_records_its_unboxed_arguments_and_node_positions():
    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0]))
    y = np.concatenate([x, np.ones(1)])
    z = 2.0 * y
    assert z.vals[0] == 2.0 and z.vals[1] is y.value and z.node_args == (1,)
    assert y.node_args == (0,) and y.vals[0][0] is x.value
    rt = propagate(t, reverse_tape(np.sum(z)))
    np.testing.assert_array_equal(rt[x], [2.0, 2.0])


def test_a_branch_made_by_hand_is_one_recording_makes():
    t = Tape()
    x = Leaf(t, 0.5)
    by_hand = Branch(t, np.sin(0.5), np.sin, (x,), {}, (0.5,), (0,))
    recorded = np.sin(x)
    for slot in ("value", "f", "args", "kwargs", "vals", "node_args", "seal", "tape"):
        assert getattr(by_hand, slot) == getattr(recorded, slot), slot
    assert (by_hand.pos, recorded.pos) == (1, 2)
    rt = propagate(t, reverse_tape(by_hand + recorded))
    assert rt[x] == 2 * np.cos(0.5)


def test_a_long_tape_reads_as_numpy_summarises_a_large_array():
    t = Tape()
    x = Leaf(t, 0.5)
    for _ in range(3999):
        x = np.sin(x)
    lines = repr(t).splitlines()
    assert lines[0] == (
        "Tape with 4000 elements (the first and last 10; tape.text(full=True) lists them all):"
    )
    assert len(lines) == 22 and lines[11] == "  ..."
    assert lines[1].startswith("  [0]: Leaf{float64} 0.5") and lines[10].startswith("  [9]: ")
    assert lines[12].startswith("  [3990]: ") and lines[-1] == f"  [3999]: {t[3999]!r}"
    full = t.text(full=True).splitlines()
    assert len(full) == 4001 and full[0] == "Tape with 4000 elements:"
    assert full[1:] == [f"  [{i}]: {node!r}" for i, node in enumerate(t)]
    rt = propagate(t, reverse_tape(x))
    assert len(repr(rt).splitlines()) == 22 and len(rt.text(full=True).splitlines()) == 4001
    # up to 40 records, every one
    short = Tape()
    y = Leaf(short, 0.5)
    for _ in range(39):
        y = np.sin(y)
    assert len(repr(short).splitlines()) == 41 and repr(short) == short.text(full=True)


def test_a_tape_cannot_be_pickled_or_deep_copied():
    import copy
    import pickle

    t = Tape()
    x = Leaf(t, np.ones(2))
    x * 2.0
    for how in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(TypeError, match="tape"):
            how(t)
    assert len(t) == 2  # nothing recorded by the attempt


def test_owns_only_the_nodes_of_its_own_tape():
    outer, inner = Tape(), Tape()
    x = Leaf(outer, np.ones(2))
    y = Leaf(inner, x)  # a node of the inner tape whose value is a node of the outer one
    assert outer.owns(x) and inner.owns(y)
    assert not outer.owns(y) and not inner.owns(x)
    assert not any(outer.owns(v) for v in (x.value, 1.0, None, [x], (x,)))
