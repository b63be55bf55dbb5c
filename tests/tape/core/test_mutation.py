"""Mutation checks: a fingerprint changes whenever an array's contents change in place,
and the reverse pass refuses a record whose arrays changed, naming which one. (The errors
of docs/errors.md's table, mutation included, are tested in tests/tape/core/test_errors.py,
which the table names.)"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import Leaf, MutationError, Tape, propagate, reverse_tape
from tape.core.mutation import fingerprint, verify

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


# -- ndarray subclasses ---------------------------------------------------------------------


class _Tagged(np.ndarray):
    """A user's subclass that keeps ndarray's meaning."""


def _memmap(tmp_path, values):
    m = np.memmap(tmp_path / "constant.dat", dtype=float, mode="w+", shape=np.shape(values))
    m[:] = values
    return m


SUBCLASS_READS = {
    "argument": lambda x, c: np.sum(x * c),
    "reflected": lambda x, c: np.sum(c * x),
    "keyword": lambda x, c: np.sum(np.clip(x, a_min=None, a_max=c) * 1.0),
    "list element": lambda x, c: np.sum(np.concatenate([x, c]) ** 2),
    "index": lambda x, c: np.sum(x[c]),
}


@pytest.mark.parametrize("read", SUBCLASS_READS)
@pytest.mark.parametrize("kind", ["memmap", "subclass", "large subclass"])
def test_a_subclass_constant_written_after_use_is_refused_as_an_ndarray_is(tmp_path, kind, read):
    from tape import grad

    n = 20_000 if kind == "large subclass" else 3
    values = np.linspace(1.0, 2.0, n) if read != "index" else np.arange(n)[::-1].copy()
    if kind == "memmap":
        c = np.memmap(tmp_path / "c.dat", dtype=values.dtype, mode="w+", shape=values.shape)
        c[:] = values
    else:
        c = values.view(_Tagged)

    def f(x):
        y = SUBCLASS_READS[read](x, c)
        c[1] = 0  # a write after the read
        return y

    with pytest.raises(MutationError, match="was changed in place after it was recorded"):
        grad(f)(np.linspace(0.5, 1.5, n))


def test_a_memmap_input_is_sealed_too(tmp_path):
    m = _memmap(tmp_path, [1.0, 2.0])
    t = Tape()
    x = Leaf(t, m)
    y = np.sum(x * x)
    m[0] = 5.0
    with pytest.raises(MutationError, match="the input held by"):
        propagate(t, reverse_tape(y))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix's
@pytest.mark.parametrize("kind", ["matrix", "masked"])
def test_matrix_and_masked_constants_meeting_a_node_are_refused_clearly(kind):
    from tape import grad

    if kind == "matrix":
        constant = np.matrix([[1.0, 2.0]])
    else:
        constant = np.ma.array([1.0, 2.0], mask=[False, True])

    calls = [lambda x: x * constant, lambda x: constant * x, lambda x: np.add(x, constant),
             lambda x: np.concatenate([x, constant.reshape(-1)])]  # fmt: skip
    for call in calls:
        with pytest.raises(TypeError, match="tape follows ndarray semantics"):
            grad(lambda x, call=call: np.sum(call(x)))(np.array([1.0, 3.0]))


# -- the cost of reading one constant often ----------------------------------------------------


def test_one_reverse_pass_fingerprints_each_array_once(monkeypatch):
    import tape.core.mutation

    index, weights = np.arange(50) % 7, RNG.standard_normal(50)
    t = Tape()
    x = Leaf(t, RNG.standard_normal(7))
    y = x
    for _ in range(30):
        y = np.tanh(y[index] * weights)[:7]
    total = np.sum(y)
    prints = {id(entry[2]) for r in t for entry in (r.seal or ()) if entry[1] is index}
    assert len(prints) == 1  # the records share one fingerprint, not a copy each
    counted = []
    original = tape.core.mutation.fingerprint
    monkeypatch.setattr(
        tape.core.mutation, "fingerprint", lambda a: counted.append(a) or original(a)
    )
    rt = propagate(t, reverse_tape(total))
    assert len(counted) == 3  # x's input, index and weights: once each
    assert rt[x].shape == (7,)


@settings(max_examples=60, deadline=None)
@given(
    size=st.sampled_from([6, 20_000]),
    steps=st.lists(
        st.tuples(st.booleans(), st.integers(0, 5), st.sampled_from([0.0, -0.0, 1.0, 2.0])),
        min_size=1,
        max_size=8,
    ),
)
def test_a_change_between_reads_is_caught_however_often_the_array_is_read(size, steps):
    from tape import grad

    c = np.ones(size)
    seen = []

    def f(x):
        y = 0.0
        for write, i, v in steps:
            if write:
                c[i] = v
            else:
                y = y + np.sum(x * c)
                seen.append(c.tobytes())
        return y + np.sum(x)

    c[:] = 1.0
    seen.clear()
    changed = None
    try:
        grad(f)(np.ones(size))
    except MutationError:
        changed = True
    else:
        changed = False
    # the reverse pass sees c as it is at the end: any read of other bytes is refused
    assert changed == any(b != c.tobytes() for b in seen)


def test_arrays_in_a_list_passed_by_keyword_are_sealed_too():
    from tape import grad, primitive, sensitivity

    @primitive
    def weighted(x, *, weights):
        return x * weights[0] + weights[1]

    sensitivity(weighted, 0)(lambda y, ybar, x, *, weights: ybar * weights[0])
    w = [np.array([1.0, 2.0]), np.array([0.5, 0.5]).view(_Tagged)]

    def f(x, k):
        y = np.sum(weighted(x, weights=w))
        w[k][0] = 7.0
        return y

    for k in (0, 1):
        with pytest.raises(MutationError, match=rf"element {k} of keyword argument 'weights'"):
            grad(f, argnums=0)(np.ones(2), k)
