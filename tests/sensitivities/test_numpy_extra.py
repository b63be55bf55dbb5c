"""Implementations in sensitivities.numpy_extra: NumPy's values, gradients against central
differences."""

import numpy as np
import pytest
from hypothesis import strategies as st

from tape import Leaf, Tape, check_grad
from tests.sensitivities.cases import Case, implementation_test
from tests.strategies import arrays


def geomspace_draw(data):
    shape = data.draw(st.sampled_from([(), (2,), (2, 3)]))
    sign = data.draw(st.sampled_from([1.0, -1.0]))  # both ends on one side of zero
    start, stop = (sign * data.draw(arrays(shape, 0.5, 3.0)) for _ in range(2))
    return start, stop, data.draw(st.integers(0, 6)), data.draw(st.booleans()), data.draw(
        st.sampled_from([0, -1])
    )


def _written(write):
    """A function of ``a`` and ``v`` that writes ``v`` into a copy of ``a`` with ``write``
    (NumPy's in-place functions) and returns the copy."""

    def fn(a, v, *rest):
        y = a * 1.0
        write(y, v, *rest)
        return y

    return fn


def write_draw(data):
    n = data.draw(st.integers(1, 6))
    a = data.draw(arrays((n,)))
    v = data.draw(arrays((data.draw(st.integers(1, 4)),)))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return a, v, mask


def put_draw(data):
    a, v, _ = write_draw(data)
    index = np.array(data.draw(st.lists(st.integers(0, len(a) - 1), min_size=1, max_size=4,
                                        unique=True)))
    return a, v, index


def along_draw(data):
    a = data.draw(arrays((3, 4)))
    index = np.array(data.draw(st.permutations(range(3))))[:, None][:2]
    return a, data.draw(arrays((2, 4))), index


IMPLEMENTED = [
    Case(np.place, write_draw, fn=_written(lambda y, v, m: np.place(y, m, v)), argnums=(0, 1)),
    Case(np.putmask, write_draw, fn=_written(lambda y, v, m: np.putmask(y, m, v)),
         argnums=(0, 1)),
    Case(np.put, put_draw, fn=_written(lambda y, v, i: np.put(y, i, v)), argnums=(0, 1)),

    Case(
        np.geomspace,
        geomspace_draw,
        fn=lambda a, b, num, endpoint, axis: np.geomspace(a, b, num, endpoint, axis=axis),
        argnums=(0, 1),
    ),
]

test_numpy_extra_implementations = implementation_test(IMPLEMENTED, value_rtol=1e-12)

# NumPy's own Python code, which writes through the node's indexing
ENTERED = [
    Case(np.put_along_axis, along_draw,
         fn=_written(lambda y, v, i: np.put_along_axis(y, i, v, axis=0)), argnums=(0, 1)),
]

test_entered_writes = implementation_test(ENTERED, implemented=False)


@pytest.mark.parametrize(
    "start, stop, kwargs",
    [
        (1j, 1000j, {"num": 4}),
        (-1.0, 1j, {"num": 5}),
        (1 + 1j, 10 - 10j, {"num": 3, "endpoint": False}),
        (-2.0, -32.0, {"num": 5, "dtype": np.float32}),
        (1.0, 1000.0, {"num": 4, "dtype": int}),
        (np.array([1.0, -2.0]), np.array([[10.0], [-4j]]), {"num": 3, "axis": -1}),
        (2.0, 8.0, {"num": 1}),
        (2.0, 8.0, {"num": 0}),
    ],
)
def test_geomspace_values_are_numpys(start, stop, kwargs):
    want = np.geomspace(start, stop, **kwargs)
    got = np.geomspace(Leaf(Tape(), start), stop, **kwargs)
    got = getattr(got, "value", got)  # an integer dtype: a plain array, with no gradient
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_geomspace_second_order_and_zero():
    check_grad(lambda a, b: np.geomspace(a, b, 4), 0.7, np.array([2.0, 5.0]), order=2)
    with pytest.raises(ValueError, match="cannot include zero"):
        np.geomspace(Leaf(Tape(), 0.0), 1.0)
