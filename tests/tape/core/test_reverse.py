"""The reverse pass: a loop, skipping what does not reach the output, accumulating safely,
undoing broadcasting in one reduction, and handing out arrays no one else holds."""

import sys

import numpy as np
import pytest

from tape import (
    Leaf,
    Tape,
    compile_grad,
    grad,
    primitive,
    propagate,
    reverse_tape,
    sensitivity,
)
from tape.core.reverse import unbroadcast
from tests.fd import check_grads, numeric_grad


def test_records_that_do_not_reach_the_output_are_skipped():
    calls = []

    @primitive
    def watched(x):
        return x + 1.0

    sensitivity(watched, 0)(lambda y, ybar, x: calls.append(1) or ybar)
    t = Tape()
    x = Leaf(t, 1.0)
    unused = watched(x) * 3.0  # noqa: F841
    y = x * 2.0
    rt = propagate(t, reverse_tape(y))
    assert rt[x] == 2.0 and not calls
    assert rt[1] is None and rt[2] is None  # never reached: unset


def test_a_100000_record_tape_propagates_with_the_default_recursion_limit():
    assert sys.getrecursionlimit() <= 10_000
    t = Tape()
    x = Leaf(t, 0.5)
    y = x
    for _ in range(50_000):
        y = y * 1.00001 + 0.0  # two records a step
    assert len(t) == 100_001
    rt = propagate(t, reverse_tape(y))
    assert rt[x] == pytest.approx(1.00001**50_000, rel=1e-9)


def test_fan_out_accumulates_and_never_mutates_the_seed_or_shared_adjoints():
    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0]))
    a = x + 0.0
    y = a + a + a * 2.0  # a's slot gets the same ybar array twice, then more
    seed = np.array([1.0, 10.0])
    rt = propagate(t, reverse_tape(y, seed))
    np.testing.assert_array_equal(rt[x], [4.0, 40.0])
    np.testing.assert_array_equal(seed, [1.0, 10.0])  # the user's seed is untouched
    np.testing.assert_array_equal(rt[y], [1.0, 10.0])


def test_broadcasting_is_undone_to_each_input_shape():
    gx, gb, gs = grad(lambda x, b, s: np.sum(x * b + s))(np.ones((2, 3)), np.ones((1, 3)), 1.0)
    assert gx.shape == (2, 3) and gb.shape == (1, 3) and type(gs) is float
    np.testing.assert_array_equal(gb, [[2.0, 2.0, 2.0]])
    assert gs == 6.0


def test_seed_and_tape_mismatches_are_errors():
    t = Tape()
    x = Leaf(t, np.ones(3))
    y = x * 2.0
    with pytest.raises(ValueError, match="shape"):
        reverse_tape(y, 1.0)
    with pytest.raises(TypeError, match="node"):
        reverse_tape(np.ones(3))
    rt = reverse_tape(y, np.ones(3))
    with pytest.raises(ValueError, match="another tape"):
        propagate(Tape(), rt)
    y * 3.0  # the tape grew after the reverse tape was made
    with pytest.raises(ValueError, match="after recording"):
        propagate(t, rt)


def test_reverse_tape_indexing():
    t = Tape()
    x = Leaf(t, 3.0)
    y = x * x
    rt = propagate(t, reverse_tape(y))
    assert rt[x] == rt[0] == 6.0 and len(rt) == 2 and list(rt) == [6.0, 1.0]
    with pytest.raises(KeyError):
        rt[Leaf(Tape(), 1.0)]


def test_free_drops_branch_adjoints_once_passed_on_and_keeps_the_leaves():
    import tracemalloc

    t = Tape()
    x = Leaf(t, np.ones(3))
    y = np.sum(np.sin(x) * 2.0)
    rt = propagate(t, reverse_tape(y), free=True)
    np.testing.assert_allclose(rt[x], 2 * np.cos(np.ones(3)))
    assert all(rt[i] is None for i in range(1, len(t)))

    def chain(v):
        for _ in range(30):
            v = np.tanh(v) * 1.01
        return np.sum(v)

    def peak(free):
        t = Tape()
        v = Leaf(t, np.ones(100_000))
        out = chain(v)
        tracemalloc.start()
        propagate(t, reverse_tape(out), free=free)
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size

    assert peak(True) < peak(False) / 5  # 60 adjoints of 800 kB held, against a few


@pytest.mark.parametrize(
    "xshape, shape",
    [((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 3, 4), (1, 4)), ((2, 3, 4), ()), ((5,), (1,))],
)
def test_unbroadcast_sums_what_broadcasting_spread(xshape, shape):
    xbar = np.random.default_rng(3).standard_normal(xshape)
    got = unbroadcast(xbar, shape)
    # the reference: the adjoint of np.broadcast_to, by its definition <xbar, B v> = <B^T xbar, v>
    basis = np.eye(int(np.prod(shape))).reshape((-1, *shape))
    expected = np.array([np.sum(xbar * np.broadcast_to(e, xshape)) for e in basis]).reshape(shape)
    assert got.shape == shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_unbroadcast_still_refuses_a_rule_shape_that_does_not_sum_back():
    with pytest.raises(ValueError, match="does not sum back"):
        unbroadcast(np.ones((3, 4)), (3,))


@pytest.mark.parametrize("transform", [grad, lambda f: compile_grad(f, np.ones(3), np.ones(3))])
def test_gradients_of_inputs_that_share_an_adjoint_are_separate_arrays(transform):
    c = np.arange(3.0)
    gx, gy = transform(lambda x, y: np.sum((x + y) * c))(np.ones(3), np.ones(3))
    assert gx is not gy and not np.shares_memory(gx, gy)
    gx[0] = 10.0
    np.testing.assert_array_equal(gy, c)


VECTOR = np.array([0.3, -0.7, 1.1])


@pytest.mark.parametrize(
    "f, xs",
    [
        # add hands the same ybar to both of its arguments, and to x twice: a first
        # contribution kept as it came must never be added into in place afterwards
        (lambda x: np.sum(np.sin(x + x) * (x + 1.0)), [VECTOR, 0.4]),
        (lambda x: np.sum((x + x) * x) + np.sum(x * 3.0), [VECTOR, 0.4]),
        (lambda x: np.sum(np.exp(x) * x + np.sin(x)), [VECTOR, 0.4]),
        (lambda x: np.sum(x[0] * x + x), [VECTOR]),  # a broadcast contribution to x[0]
    ],
)
def test_adjoints_kept_as_the_rules_returned_them_are_never_changed(f, xs):
    for x in xs:
        check_grads(f, x)


def test_a_complex_adjoint_added_into_a_real_slot_the_pass_owns():
    # x's slot is first a real array the pass owns (from x[2] and x[1]), then meets the
    # complex adjoint of x[0:2] (from x[0:2] * (1 + 2j)): added into a new, complex array
    def f(x):
        a = x[0:2] * (1.0 + 2.0j)
        return np.real(np.sum(a * a)) + x[1] * 3.0 + x[2] * 2.0

    x = np.array([0.3, -0.5, 0.8])
    (g,) = grad(f)(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, numeric_grad(f, [x], 0), rtol=1e-7)
    # by hand: d/dx_k Re((x_k (1 + 2j))^2) = 2 x_k Re((1 + 2j)^2) = -6 x_k
    np.testing.assert_allclose(g, [-6 * 0.3, -6 * -0.5 + 3.0, 2.0])
    np.testing.assert_allclose(compile_grad(f, x)(x + 0.1)[0], grad(f)(x + 0.1)[0])


@pytest.mark.parametrize("y", [1.0, [1.0], np.ones(2)])
def test_reverse_tape_needs_a_node(y):
    with pytest.raises(TypeError, match="needs a node of a tape"):
        reverse_tape(y)


def test_reverse_tape_needs_a_seed_of_the_output_shape_and_a_fresh_reverse_tape():
    t = Tape()
    y = Leaf(t, np.ones(2)) * 2
    with pytest.raises(ValueError, match=r"ybar has shape \(\), but the output y has shape \(2,\)"):
        reverse_tape(y, 1.0)
    rt = reverse_tape(y, np.ones(2))
    with pytest.raises(ValueError, match="made for another tape"):
        propagate(Tape(), rt)
    np.sin(y)  # recorded after the reverse tape was made
    with pytest.raises(ValueError, match="make the reverse tape after recording"):
        propagate(t, rt)
