"""Tape, Leaf and Branch: Nabla's worked example value for value, the REPL display
DESIGN.md shows, and a Branch made by hand is the one recording makes."""

import sys
import tracemalloc
import warnings

import numpy as np
import pytest

from tape import Branch, Leaf, Tape, grad, primitive, propagate, reverse_tape, sensitivity
from tape.core.recording import Call

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


# -- what a record keeps, and that keeping less never changes a gradient ------------------


def test_a_call_of_one_node_keeps_the_node_and_no_tuples():
    t = Tape()
    x = Leaf(t, 0.3)
    y = np.sin(x)
    assert y.inputs is x and y.args == (x,) and y.vals == (x.value,) and y.node_args == (0,)
    z = y + 1.0
    assert z.inputs == (y, 1.0) and z.vals == (y.value, 1.0)
    # records of the same call share what they have in common
    assert type(y.call) is Call and np.sin(x).call is y.call and (z + 2.0).call is z.call


def test_a_scalar_op_keeps_less_than_200_bytes():
    t = Tape()
    x = Leaf(t, 0.3)
    for _ in range(300):  # positions past Python's cached small ints
        x = np.sin(x) + 0.5
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(5000):
        x = np.sin(x) + 0.5
    per_record = (tracemalloc.get_traced_memory()[0] - base) / 10_000
    tracemalloc.stop()
    assert per_record < 200, per_record  # 140 and 196 bytes, where it was 268 and 284


def test_values_come_from_the_tape_as_they_were_when_recorded():
    def f(a):
        y = np.sin(a)  # the record keeps no value of a
        a += 1.0  # a written in place: its old record stays at its position
        return np.sum(y * a)

    a = np.array([0.1, 0.7])
    (g,) = grad(f)(a)
    expected = np.cos(a) * (a + 1.0) + np.sin(a)
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_a_view_keeps_its_values():
    def f(a):
        v = a[:2]  # a view: the tape cannot give its value again once a is written
        y = v * v
        a[0] = 5.0
        return np.sum(y) + np.sum(a)

    a = np.array([0.5, 2.0, 3.0])
    (g,) = grad(f)(a)
    np.testing.assert_allclose(g, [1.0, 5.0, 1.0])  # 2 a (the old a), and 1 but at a[0]


def test_a_rule_registered_between_recording_and_the_reverse_pass_gets_values():
    @primitive
    def twice(x):
        return 2.0 * x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sensitivity(twice, 0)(lambda y, ybar, x: ybar * 2.0)  # reads no value
        t = Tape()
        x = Leaf(t, 3.0)
        y = twice(x) + twice(x)
        sensitivity(twice, 0)(lambda y, ybar, x: ybar * x)  # now it does: x must be 3.0
        assert propagate(t, reverse_tape(y))[x] == 6.0


def test_adjoints_added_in_place_only_where_no_one_else_holds_them():
    w = np.array([1.0, 2.0, 3.0])

    def f(x, y):
        s = x + y  # add hands the same adjoint to both slots
        return np.sum(s * w) + np.sum(np.sin(x))  # x's slot then gets a second

    x, y = np.array([0.1, 0.2, 0.3]), np.array([1.0, 1.0, 1.0])
    gx, gy = grad(f)(x, y)
    np.testing.assert_allclose(gy, w)  # untouched by the addition into x's slot
    np.testing.assert_allclose(gx, w + np.cos(x))
    assert gx is not gy


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="reference counts")
def test_an_adjoint_held_by_the_caller_is_never_written():
    seed = np.ones(3)
    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0, 3.0]))
    y = x + x  # both contributions to x's slot are the seed itself
    rt = propagate(t, reverse_tape(y, seed))
    np.testing.assert_array_equal(seed, np.ones(3))
    np.testing.assert_array_equal(rt[x], [2.0, 2.0, 2.0])
