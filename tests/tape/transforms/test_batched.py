"""tape.transforms.batched: a batch's conversions that have no single value, and its writes
in place, each against NumPy run on every example."""

import numpy as np
import pytest

from tape import vmap
from tape.transforms.batched import BatchedControlFlowError, BatchingError

RNG = np.random.default_rng(1)
X = RNG.standard_normal((4, 3))
X[:, 0] = [1.0, -1.0, 0.5, -0.5]  # examples that disagree on x[0] > 0


@pytest.mark.parametrize(
    "convert",
    [float, int, complex, lambda s: bool(s > 0), np.asarray, lambda s: s.item(), lambda s: [0][s]],
)
def test_a_value_per_example_has_no_single_one(convert):
    with pytest.raises(BatchedControlFlowError) as info:
        vmap(lambda x: convert(x[0]))(X)
    assert isinstance(info.value, BatchingError)  # what jacobian's reverse mode falls back on


def test_bool_where_every_example_agrees_is_that_answer():
    assert vmap(lambda x: x * (1.0 if x[0] > -100.0 else 0.0))(X).tolist() == X.tolist()


def _per_example(f, xs):
    return np.stack([f(x.copy()) for x in xs])


@pytest.mark.parametrize(
    "f",
    [
        lambda x: (lambda y: (y.__iadd__(1.0), y)[1])(x.copy()),  # y += 1
        lambda x: (lambda y, v: (v.__imul__(2.0), y)[1])(*(lambda y: (y, y[1:]))(x.copy())),
        lambda x: (lambda y: (y.__setitem__(slice(0, 2), 5.0), y)[1])(x.copy()),
        lambda x: (lambda y: (np.add(y, 1.0, out=y), y)[1])(x.copy()),
        lambda x: (lambda y: (y.sort(), y)[1])(x.copy()),
    ],
    ids=["+=", "write through a view", "x[i] = v", "out=", "sort"],
)
def test_writes_in_place_are_numpys_on_each_example(f):
    np.testing.assert_array_equal(vmap(f)(X.copy()), _per_example(f, X))


def test_a_write_into_a_batch_of_numpy_scalars_is_numpys_error():
    def write(x):
        s = np.sum(x)  # a NumPy scalar in each example
        s[...] = 1.0
        return s

    with pytest.raises(TypeError, match="does not support item assignment"):
        write(X[0])
    with pytest.raises(TypeError, match="does not support item assignment"):
        vmap(write)(X)


def test_writing_a_batch_into_an_array_shared_by_every_example_is_refused():
    shared = np.zeros(3)
    with pytest.raises(TypeError, match="the same for every example") as info:
        vmap(lambda x: np.add(x, 1.0, out=shared), in_axes=0)(X)
    assert isinstance(info.value, BatchingError)
