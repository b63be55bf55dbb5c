"""Mutation checks: a fingerprint changes whenever an array's contents change in place,
and the reverse pass refuses a record whose arrays changed, naming which one. (The errors
of docs/errors.md's table, mutation included, are tested in tests/tape/test_errors.py,
which the table names.)"""

import numpy as np
import pytest

from tape import Leaf, MutationError, Tape
from tape.mutation import fingerprint, verify

RNG = np.random.default_rng(0)
SMALL = RNG.standard_normal(100)  # 800 bytes: a copy of the bytes is kept
LARGE = RNG.standard_normal(50_000)  # 400 kB: checksums are kept


def _swap(a):
    a[[3, 11]] = a[[11, 3]]


CHANGES = {
    "one element": lambda a: a.__setitem__(7, a[7] + 1.0),
    "the last bit of one element": lambda a: a.__setitem__(7, np.nextafter(a[7], np.inf)),
    "a swap": _swap,
    "a sign flip": lambda a: a.__setitem__(5, -a[5]),
    "reversal": lambda a: a.__setitem__(slice(None), a[::-1].copy()),
    "a roll": lambda a: a.__setitem__(slice(None), np.roll(a, 1)),
    "sorting": lambda a: a.sort(),
}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("array", [SMALL, LARGE], ids=["small", "large"])
def test_a_change_in_place_changes_the_fingerprint(array, change):
    a = array.copy()
    before = fingerprint(a)
    assert fingerprint(a) == before and fingerprint(a.copy()) == before  # contents, not identity
    CHANGES[change](a)
    assert not np.array_equal(a, array)  # the change is real
    assert fingerprint(a) != before


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64, np.int8])
def test_large_arrays_of_every_numeric_dtype(dtype):
    a = (np.random.default_rng(1).standard_normal(300_000) * 50).astype(dtype)
    assert a.nbytes > 128 * 1024
    before = fingerprint(a)
    i, j = 10, int(np.flatnonzero(a != a[10])[0])  # two different values
    a[[i, j]] = a[[j, i]]
    assert fingerprint(a) != before
    a[[i, j]] = a[[j, i]]
    assert fingerprint(a) == before  # swapped back: as it was
    a[100] = a[100] + 1
    assert fingerprint(a) != before


@pytest.mark.parametrize("shape", [(20, 10), (400, 100)], ids=["small", "large"])
def test_a_strided_view_notices_a_write_through_its_base(shape):
    base = np.random.default_rng(2).standard_normal(shape)
    view = base[::2, 1:]
    before = fingerprint(view)
    base[1, 5] = 9.0  # a row the view skips
    assert fingerprint(view) == before
    base[10, 5] += 1.0
    assert fingerprint(view) != before


def test_verify_names_the_argument_the_element_or_the_input_that_changed():
    t = Tape()
    held = np.array([0.5, 1.5])
    x = Leaf(t, held)
    w, tail = np.array([1.0, 2.0]), np.array([3.0])
    y = x * w
    z = np.concatenate([x, tail])
    for record in (x, y, z):
        verify(record)  # nothing changed yet
    w[0] = 5.0
    with pytest.raises(MutationError, match=r"^argument 1 of \[\d\] Branch.*f=multiply was chan"):
        verify(y)
    tail[0] = 0.0
    with pytest.raises(MutationError, match=r"^element 1 of argument 0 of \[\d\] Branch.*f=concat"):
        verify(z)
    held[1] = 2.0
    with pytest.raises(MutationError, match=r"^the input held by \[0\] Leaf"):
        verify(x)


def test_scalars_cost_nothing_and_values_the_tape_computes_are_read_only():
    t = Tape()
    s = Leaf(t, 0.5)
    assert s.seal is None and (s * 2.0).seal is None
    x = Leaf(t, np.ones(3))
    y = np.exp(x)
    assert not y.value.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        y.value[0] = 0.0
