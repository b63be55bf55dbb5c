"""is_duck_array: what the engine records as an array of another library. Dask and CuPy
themselves are tested in tests/test_dask.py and tests/test_cupy.py."""

import numpy as np

from tape import Leaf, Tape
from tape.core.duck_arrays import is_duck_array


class Duck:
    """The least an array of another library has: NumPy's two protocols, shape, dtype."""

    shape = (2,)
    dtype = np.dtype(np.float64)

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented


class NoDtype:
    shape = (2,)

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented


class NoUfuncs:
    shape = (2,)
    dtype = np.dtype(np.float64)

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented


def test_numpys_own_values_and_nodes_are_not_duck_arrays():
    t = Tape()
    for value in (np.ones(3), np.zeros(()), 1.0, 2, np.float64(1.5), np.float32(1.5),
                  [1.0, 2.0], Leaf(t, 1.0), Leaf(t, np.ones(2))):  # fmt: skip
        assert not is_duck_array(value), value


def test_a_class_with_both_protocols_a_shape_and_a_dtype_is_one():
    assert is_duck_array(Duck())


def test_a_class_missing_any_of_them_is_not():
    assert not is_duck_array(NoDtype())
    assert not is_duck_array(NoUfuncs())
