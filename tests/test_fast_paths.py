"""The rules' fast paths give what the general paths give.

Each shortcut (matmul's rule on a repeating adjoint, the sum rule's zero-stride view, the
extremum rule without ties) is checked against an independent reference: NumPy itself,
central differences, or the same rule on a plain copy of its input. The engine's own
shortcuts are tested with their modules: NumPy scalars through the operators in
tests/tape/core/test_recording.py, one-reduction unbroadcasting and adjoint ownership in
tests/tape/core/test_reverse.py, Branch construction in tests/tape/core/test_records.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensitivities.reductions import broadcast_to
from sensitivities.registry import lookup
from tests.fd import check_grads


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
