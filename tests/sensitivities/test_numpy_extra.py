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


IMPLEMENTED = [
    Case(
        np.geomspace,
        geomspace_draw,
        fn=lambda a, b, num, endpoint, axis: np.geomspace(a, b, num, endpoint, axis=axis),
        argnums=(0, 1),
    ),
]

test_numpy_extra_implementations = implementation_test(IMPLEMENTED, value_rtol=1e-12)


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
