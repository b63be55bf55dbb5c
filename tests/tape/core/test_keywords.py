"""A node passed by keyword (tape/core/keywords.py) is recorded at its positional place:
the value is NumPy's own for every spelling of the call, the rule of that position gives
the gradient (checked against central differences or the analytic derivative), and where
the signature has no such place the call is refused at the user's line, leaving the tape
as it was."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensitivities.registry import holds_node
from tape import Branch, Leaf, Tape, grad
from tests.fd import check_grads

A = np.random.default_rng(0).uniform(0.5, 1.5, (3, 4))
X, W = np.array([0.3, 1.2, 1.9]), np.array([1.1, 1.6, 2.2])

KEYWORD_NODES = {
    "clip a_min a_max": lambda x, w: np.clip(x, a_min=w[0] * 0.5, a_max=w[2] - 1.4),
    "clip max only": lambda x, w: np.clip(x, max=w[1] * 0.6),  # NumPy 2's spelling
    "clip min only": lambda x, w: np.clip(x, min=w[1] * 0.6),
    "norm x": lambda x, w: np.linalg.norm(x=x * w),
    "dot b": lambda x, w: np.dot(x, b=w),
    "dot a b": lambda x, w: np.dot(a=x, b=w),
    "select default": lambda x, w: np.select([x > 1], [x], default=w),
    "cumsum a": lambda x, w: np.cumsum(a=x * w),
    "interp left right": lambda x, w: np.interp(x * 2 - 1, [0.0, 1.0, 2.5], [1.0, 2.0, 0.5],
                                                left=w[0], right=w[1] * w[2]),
    "average weights": lambda x, w: np.average(x, weights=w),  # axis= filled by its default
    "stack arrays": lambda x, w: np.stack(arrays=[x, w * 2.0], axis=1),  # a list of nodes
    "where x y": lambda x, w: np.where(x > 1.0, x * w, w),
    "tensordot b axes": lambda x, w: np.tensordot(x, b=np.outer(w, w), axes=1),
}  # fmt: skip


@pytest.mark.parametrize("name", KEYWORD_NODES)
def test_a_node_passed_by_keyword_is_recorded_at_its_position(name):
    check_grads(KEYWORD_NODES[name], X, W)


@pytest.mark.parametrize("name", KEYWORD_NODES)
def test_the_value_is_numpys_and_no_record_keeps_a_node_among_its_keywords(name):
    f = KEYWORD_NODES[name]
    expected = f(X.copy(), W.copy())
    t = Tape()
    got = f(Leaf(t, X.copy()), Leaf(t, W.copy()))
    np.testing.assert_array_equal(got.value, expected)
    assert got.value.dtype == expected.dtype and got.value.shape == expected.shape
    assert not any(isinstance(r, Branch) and holds_node(r.kwargs.values()) for r in t)


def test_a_node_only_passed_by_keyword_enters_python_implementations():
    x, w = np.array([1.0, 2.0, 4.0]), np.array([0.2, 0.3, 0.5])
    check_grads(lambda x, w: np.average(x, weights=w), x, w)
    check_grads(lambda hi: np.clip(A, 0.6, a_max=hi), 1.0)  # recorded: a_max moves to its place


def test_a_call_numpy_refuses_is_refused_with_a_node_too():
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a_max'"):
        np.clip(A, 0.5, max=2.0)
    with pytest.raises(TypeError):
        grad(lambda m: np.sum(np.clip(A, 0.5, max=m)))(2.0)


# every spelling of np.clip: a positional prefix, the rest by keyword (NumPy 2's min= and
# max= too), gives NumPy's value and the analytic gradient: 1 where the bound is not hit
# for a, 1 where it is for the bound that is hit
SPELLINGS = {
    "positional": lambda a, lo, hi: np.clip(a, lo, hi),
    "a_max": lambda a, lo, hi: np.clip(a, lo, a_max=hi),
    "a_min a_max": lambda a, lo, hi: np.clip(a, a_min=lo, a_max=hi),
    "all": lambda a, lo, hi: np.clip(a=a, a_min=lo, a_max=hi),
    "reordered": lambda a, lo, hi: np.clip(a_max=hi, a=a, a_min=lo),
    "min max": lambda a, lo, hi: np.clip(a, min=lo, max=hi),
}


@settings(max_examples=30, deadline=None)
@given(
    a=st.lists(st.floats(-3, 3), min_size=1, max_size=5),
    lo=st.floats(-2, -0.1),
    hi=st.floats(0.1, 2),
    spelling=st.sampled_from(sorted(SPELLINGS)),
)
def test_every_spelling_of_a_call_gives_numpys_value_and_the_analytic_gradient(
    a, lo, hi, spelling
):
    a = np.array(a)
    a = np.where(np.isclose(a, lo) | np.isclose(a, hi), a + 0.05, a)  # no ties at a bound
    f = SPELLINGS[spelling]
    t = Tape()
    got = f(Leaf(t, a), Leaf(t, lo), Leaf(t, hi))
    np.testing.assert_array_equal(got.value, np.clip(a, lo, hi))
    ga, glo, ghi = grad(lambda *v: np.sum(f(*v)), argnums=(0, 1, 2))(a, lo, hi)
    np.testing.assert_array_equal(ga, ((a > lo) & (a < hi)).astype(float))
    assert glo == np.sum(a < lo) and ghi == np.sum(a > hi)


def test_a_node_with_no_positional_place_is_refused_and_the_tape_is_left_as_it_was():
    # np.pad takes constant_values= through **kwargs: no position for a rule to be keyed by
    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0]))
    s = x[0] * 2.0
    before = list(t)
    with pytest.raises(TypeError, match="keyword argument 'constant_values'.*positionally"):
        np.pad(x, 1, constant_values=s)
    assert list(t) == before
    # a constant by keyword stays a keyword, and the value is NumPy's
    padded = np.pad(x, 1, constant_values=3.0)
    np.testing.assert_array_equal(padded.value, np.pad(x.value, 1, constant_values=3.0))
    check_grads(lambda v: np.pad(v * v, (1, 2), constant_values=3.0), np.array([1.0, 2.0]))
