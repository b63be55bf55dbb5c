"""``Reads``: the places a function reads from outside its arguments, found from its
code, and the generators it can reach. (Compiled replays' use of them is tested in
tests/test_no_silent_gradient.py against eager gradients.)"""

from __future__ import annotations

import random
import types

import numpy as np
import pytest

from tape.transforms.outside import Reads, state_of

SHIFT = np.zeros(2)
LIMIT = 3


def _helper(x):
    return x + SHIFT


class _Holder:
    def __init__(self):
        self.w = np.ones(2)
        self.unused = np.ones(2)

    def apply(self, x):
        return self.w * x


def _names(reads):
    return [what for what, _ in reads.places]


def test_globals_of_f_and_of_its_helpers_are_found_but_not_librarys():
    reads = Reads.of(lambda x: np.sum(_helper(x)) * LIMIT)
    names = _names(reads)
    assert any(n.startswith("SHIFT ") for n in names)
    assert any(n.startswith("LIMIT ") for n in names)
    assert not any("sum" in n and "np" not in n for n in names)  # NumPy's code is not walked
    assert len(names) < 10


def test_only_the_attributes_the_code_names_are_found():
    holder = _Holder()
    names = _names(Reads.of(holder.apply))
    assert any(n.endswith(".w") for n in names)
    assert not any(n.endswith(".unused") for n in names)


@pytest.mark.parametrize(
    "change, seen",
    [
        (lambda ns: ns.a.__setitem__(0, 2.0), True),  # written in place
        (lambda ns: setattr(ns, "a", np.ones(3)), False),  # rebound to an equal array
        (lambda ns: setattr(ns, "k", 4), True),  # a number rebound
        (lambda ns: ns.items.append(1.0), True),  # a list grown
    ],
)
def test_changed_names_the_place_that_holds_something_else(change, seen):
    ns = types.SimpleNamespace(a=np.ones(3), k=3, items=[1.0])
    reads = Reads.of(lambda x: ns.a * ns.k + len(ns.items))
    before = reads.snapshot()
    change(ns)
    assert bool(reads.changed(before)) == seen


def test_state_of_compares_contents_nan_included():
    a = np.array([1.0, np.nan])
    assert state_of(a) == state_of(a.copy())
    assert state_of(float("nan")) == state_of(float("nan"))
    assert state_of([a, 1]) != state_of([a + 1, 1])
    assert state_of(types.SimpleNamespace(x=a), attributes=True) != state_of(
        types.SimpleNamespace(x=a * 2), attributes=True
    )


def test_generators_reached_and_passed_are_streams_whose_moves_are_named():
    rng = np.random.default_rng(0)
    passed = np.random.RandomState(1)
    reads = Reads.of(lambda x: x * rng.random(), ([passed],))
    states = reads.stream_states()
    assert reads.moved(states) == ""
    rng.random()
    assert "rng" in reads.moved(states)
    states = reads.stream_states()
    passed.uniform()
    assert "an argument" in reads.moved(states)
    states = reads.stream_states()
    random.random()
    assert "Python's global" in reads.moved(states)
