"""The engine's and the rules' fast paths give what the general paths give.

Each shortcut (NumPy scalars through the operators, matmul's rule on a repeating adjoint,
the sum rule's zero-stride view, the extremum rule without ties, one-reduction
unbroadcasting) is checked against an independent reference: NumPy itself, central
differences, or the same rule on a plain copy of its input.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensitivities.reductions import broadcast_to
from sensitivities.registry import lookup
from tape import Branch, Leaf, Tape, compile_grad, grad, propagate, reverse_tape
from tape.reverse import unbroadcast
from tests.fd import check_grads

SCALARS = [np.float64(0.7), np.float32(0.7), np.complex128(0.7 - 0.2j), 0.7]


@pytest.mark.parametrize("f", [np.add, np.subtract, np.multiply, np.true_divide])
@pytest.mark.parametrize("a", SCALARS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("b", [*SCALARS, 3, np.float64(0.0)], ids=lambda v: type(v).__name__)
def test_recorded_scalar_arithmetic_gives_numpys_value_and_type(f, a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # x / 0.0
        expected = f(a, b)
        got = f(Leaf(Tape(), a), b).value
    assert type(got) is type(expected)
    np.testing.assert_array_equal(got, expected)


def test_python_floats_divide_by_zero_as_numpy_does():
    with np.errstate(divide="ignore"):
        y = Leaf(Tape(), 1.0) / 0.0
    assert np.isinf(y.value)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([((4, 3), (3, 5)), ((2, 4, 3), (3, 5)), ((4, 3), (2, 3, 5)), ((1, 3), (3, 1))]),
    st.sampled_from(["scalar", "rows", "columns"]),
    st.integers(0, 2**32 - 1),
)
def test_matmul_rule_on_a_repeating_adjoint_equals_the_full_product(shapes, kind, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    y = a @ b
    part = {
        "scalar": rng.standard_normal(()),
        "rows": rng.standard_normal(y.shape[-1]),  # every row the same
        "columns": rng.standard_normal(y.shape[:-1] + (1,)),  # every column the same
    }[kind]
    ybar = broadcast_to(part, y.shape)
    dense = np.array(ybar)
    # the formulas themselves, on a dense copy: ybar b^T and a^T ybar
    expected = (dense @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ dense)
    rules = lookup(np.matmul)
    for i in (0, 1):
        got = rules.rule(i, (a, b))(y, ybar, a, b)
        assert np.shape(got) == expected[i].shape
        np.testing.assert_allclose(got, expected[i], rtol=1e-12, atol=1e-12)


def test_sum_then_matmul_matches_finite_differences():
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal((5, 5)) / 2 for _ in range(3))
    check_grads(lambda a, b, c: np.sum(np.tanh(a @ b) @ c), a, b, c)
    check_grads(lambda a, b: np.sum(a @ b, axis=0) @ np.arange(5.0), a, b)
    check_grads(lambda a, b: np.sum(np.sum(a @ b, axis=1) ** 2), a, b)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        [
            ((), (3, 4)),
            ((4,), (3, 4)),
            ((1, 4), (3, 4)),
            ((3, 1), (3, 4)),
            ((2, 1, 4), (2, 3, 4)),
            ((1,), (5,)),
        ]
    ),  # fmt: skip
    st.booleans(),
)
def test_broadcast_to_is_numpys(shapes, strided):
    small, shape = shapes
    a = (
        np.arange(float(np.prod(small) * 2)).reshape(small + (2,))[..., 0]
        if strided
        else (np.arange(float(np.prod(small))).reshape(small))
    )
    got, expected = broadcast_to(a, shape), np.broadcast_to(a, shape)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == expected.shape and not got.flags.writeable
    assert np.shares_memory(got, a) or a.size == 0


def test_broadcast_to_refuses_what_numpy_refuses():
    with pytest.raises(ValueError):
        broadcast_to(np.ones(3), (4,))
    with pytest.raises(ValueError):
        broadcast_to(np.ones((2, 3)), (3,))


@pytest.mark.parametrize(
    "x, expected",
    [
        (np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 0.0]]), [[0, 1, 0], [0.5, 0.5, 0]]),
        (np.array([[1.0, np.nan, 2.0], [5.0, 5.0, 0.0]]), [[0, 0, 0], [0.5, 0.5, 0]]),
        (
            np.array([[np.inf, 1.0], [-np.inf, -np.inf], [3.0, 3.0]]),
            [[1, 0], [0.5, 0.5], [0.5, 0.5]],
        ),
        (np.array([[2.0, 1.0], [0.0, 4.0]]), [[1, 0], [0, 1]]),
    ],
)
def test_max_shares_ties_and_gives_nan_slices_nothing(x, expected):
    y = np.max(x, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rule itself warns of nothing
        got = lookup(np.max).rule(0, (x,))(y, np.ones_like(y), x, axis=1)
    np.testing.assert_array_equal(got, expected)


def test_max_without_ties_matches_finite_differences():
    x = np.random.default_rng(2).standard_normal((6, 5))
    check_grads(lambda x: np.max(x, axis=1, keepdims=True) * np.arange(6.0)[:, None], x)
    check_grads(lambda x: np.min(x, axis=0) ** 2, x)


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
