"""tape.transforms.batching: the interpreter runs each call by its batching rule on the
batch's data, or once per example, and says where it cannot run a call batched."""

import warnings

import numpy as np
import pytest

from sensitivities import primitive
from sensitivities.batching import batching
from tape import vmap
from tape.transforms.batching import Batched, BatchingError, VmapFallbackWarning

RNG = np.random.default_rng(2)
X = RNG.standard_normal((5, 3))


def test_a_primitive_runs_by_its_batching_rule_on_the_batchs_data():
    calls = []

    @primitive
    def shifted(x, by):
        return x + by

    @batching(shifted)
    def _(args, batched, **kwargs):
        calls.append(batched)
        x, by = args
        return x + by  # the batch leads; an unbatched shift broadcasts

    got = vmap(shifted, in_axes=(0, None))(X, 2.0)
    np.testing.assert_array_equal(got, X + 2.0)
    assert calls == [(True, False)]  # once for the whole batch, with its flags


def test_a_rule_that_answers_not_implemented_hands_the_call_to_the_loop():
    @primitive
    def doubled(x):
        return 2.0 * x

    batching(doubled)(lambda args, batched, **kwargs: NotImplemented)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = vmap(doubled, report=True)(X)
    np.testing.assert_array_equal(got, 2.0 * X)
    assert any(issubclass(w.category, VmapFallbackWarning) for w in caught)


def test_every_rule_of_numpys_functions_matches_each_example():
    fs = [
        lambda x: np.sum(x, axis=0),
        lambda x: np.cumsum(x),
        lambda x: np.sort(x)[::-1],
        lambda x: np.reshape(x, (3, 1)).T,
        lambda x: np.concatenate([x, np.ones(2)]),
        lambda x: np.stack([x, 2 * x], axis=1),
        lambda x: np.einsum("i,i->", x, x),
        lambda x: np.linalg.norm(x),
        lambda x: np.outer(x, x) @ x,
        lambda x: np.where(x > 0, x, 0.0),
        lambda x: np.isclose(x, 0.5),
    ]
    for f in fs:
        np.testing.assert_allclose(vmap(f)(X), np.stack([f(x) for x in X]))


def test_questions_of_shape_are_answered_by_one_example():
    assert vmap(lambda x: x * np.shape(x)[0] * np.ndim(x))(X).tolist() == (X * 3).tolist()
    b = Batched(X, level=-1)
    assert np.shape(b) == (3,) and np.result_type(b) == np.float64


def test_a_call_without_a_rule_over_no_examples_cannot_run():
    with pytest.raises(BatchingError, match="no examples"):
        vmap(lambda x: np.nonzero(x)[0])(np.zeros((0, 3)))
