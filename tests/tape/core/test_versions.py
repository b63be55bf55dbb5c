"""Versions of a node written in place and the views between nodes (tape/core/versions.py),
through public use, each against the same program run by NumPy on ndarrays: a written
node keeps its identity and position while the records made before the write keep the
value they saw; a view reads its root's latest value in NumPy's own layout (the same
strides, memory shared with the root as NumPy shares it; a node's value itself is
read-only, written through the node), however
many views and writes came before."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import Leaf, Tape, grad
from tests.fd import numeric_grad
from tests.tape.core.test_inplace import VIEW_HELPERS, X12


def _strides(a):
    return [s for s, n in zip(a.strides, a.shape) if n > 1]


def _same_layout(got, expected, base_got, base_expected):
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    # the strides of every axis longer than one (NumPy's own for a length-1 axis vary
    # with the helper, and never change what reshape or ravel do), and so the flags
    assert _strides(got) == _strides(expected)
    assert got.flags.c_contiguous == expected.flags.c_contiguous
    assert got.flags.f_contiguous == expected.flags.f_contiguous
    assert np.shares_memory(got, base_got) == np.shares_memory(expected, base_expected)


@pytest.mark.parametrize("name", VIEW_HELPERS)
def test_a_view_reads_its_roots_latest_value_in_numpys_layout(name):
    helper = VIEW_HELPERS[name]
    a = X12 * 1.0
    view = helper(a)
    a[1:7] *= 2.0
    a += 0.5

    t = Tape()
    y = Leaf(t, X12.copy()) * 1.0
    w = helper(y)
    y[1:7] *= 2.0
    y += 0.5
    np.testing.assert_array_equal(y.value, a)
    _same_layout(w.value, view, y.value, a)


@pytest.mark.parametrize("name", VIEW_HELPERS)
def test_a_view_made_after_a_write_is_made_from_the_latest_version(name):
    helper = VIEW_HELPERS[name]

    def f(x):
        y = x * 1.0
        y[0] = 3.0 * y[1]
        w = helper(y)
        y[2:4] += 1.0
        return np.sum(np.sin(w) * np.arange(1.0, w.size + 1.0).reshape(np.shape(w)))

    t = Tape()
    y = Leaf(t, X12.copy()) * 1.0
    y[0] = 3.0 * y[1]
    w = helper(y)
    a = X12 * 1.0
    a[0] = 3.0 * a[1]
    _same_layout(w.value, helper(a), y.value, a)
    np.testing.assert_allclose(
        grad(f)(X12.copy())[0], numeric_grad(lambda x: f(x.copy()), (X12,), 0), atol=1e-8
    )


def test_a_written_node_keeps_its_identity_and_position_and_earlier_records_their_value():
    a = np.array([0.4, -1.3, 2.2])
    t = Tape()
    x = Leaf(t, a.copy())
    y = x * 2.0
    z = np.sin(y)
    pos, node = y.pos, y
    y[0] = 5.0
    y *= 3.0
    assert y is node and y.pos == pos
    expected = a * 2.0
    expected[0] = 5.0
    expected *= 3.0
    np.testing.assert_array_equal(y.value, expected)
    np.testing.assert_array_equal(t[pos].value, a * 2.0)  # what z's record was made from
    np.testing.assert_array_equal(z.value, np.sin(a * 2.0))

    def f(x):
        y = x * 2.0
        z = np.sin(y)
        y[0] = 5.0
        y *= 3.0
        return np.sum(z * y)

    np.testing.assert_allclose(
        grad(f)(a.copy())[0], numeric_grad(lambda x: f(x.copy()), (a,), 0), rtol=1e-7
    )


CHAIN = [
    lambda v: v.reshape(4, 6),
    lambda v: v.T,
    lambda v: v[1:, ::2],
    lambda v: v[::-1],
    lambda v: np.expand_dims(v, 0),
    lambda v: np.squeeze(v, 0),
    lambda v: np.swapaxes(v, 0, 1),
]


@settings(max_examples=30, deadline=None)
@given(
    links=st.lists(st.integers(0, len(CHAIN) - 1), min_size=1, max_size=6),
    writes=st.lists(st.tuples(st.integers(0, 23), st.floats(-2, 2)), min_size=1, max_size=4),
)
def test_every_view_of_a_chain_reads_the_latest_version_after_each_write(links, writes):
    def chain(v):
        out = [v]
        for k in links:
            if k == 0 and out[-1].ndim != 1 or k == 5 and out[-1].shape[:1] != (1,):
                continue  # reshape of a 1-d array, squeeze of a leading 1 only
            if k == 2 and out[-1].ndim != 2:
                continue
            if k == 6 and out[-1].ndim < 2:
                continue
            out.append(CHAIN[k](out[-1]))
        return out

    base = np.linspace(-1.0, 1.0, 24)
    a = base.copy()
    expected = chain(a)
    t = Tape()
    y = Leaf(t, base.copy()) * 1.0
    got = chain(y)
    for i, c in writes:
        a[i] = c
        y[i] = c
        for g, e in zip(got, expected):
            _same_layout(g.value, e, y.value, a)
