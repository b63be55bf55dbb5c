"""Rule test cases: each names the registered function it checks, a function to
differentiate that calls it, and a hypothesis recipe for arguments in its domain.

Every family's test module lists its ``CASES``; ``test_coverage`` fails when a registered
function has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensitivities.registry import canonical
from tape import Leaf, Tape
from tests.fd import check_grads


@dataclass(frozen=True)
class Case:
    registered: Any  # the function whose sensitivities are under test
    draw: Callable  # hypothesis data -> tuple of arguments
    fn: Callable | None = None  # what to differentiate; default registered(*args)
    argnums: tuple = (0,)
    rtol: float = 1e-5
    atol: float = 1e-6
    name: str = field(default="")

    def __post_init__(self) -> None:
        # NumPy's function where a name was read after the runtime wrapped it
        object.__setattr__(self, "registered", canonical(self.registered))

    @property
    def id(self) -> str:
        from sensitivities.registry import function_name

        return self.name or function_name(self.registered)

    def call(self, *args):
        return (self.fn or self.registered)(*args)


def records_on_tape(case: Case, args: tuple) -> bool:
    """Whether calling the case on nodes records a Branch of the registered function."""
    t = Tape()
    args = list(args)
    for i in case.argnums:
        args[i] = Leaf(t, args[i])
    case.call(*args)
    return any(getattr(node, "f", None) == case.registered for node in t)


def rule_test(cases, max_examples=20):
    """A parametrised hypothesis test of every case against central differences."""

    @pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])
    @settings(max_examples=max_examples, deadline=None)
    @given(data=st.data())
    def test_matches_finite_differences(case, data):
        args = tuple(case.draw(data))
        assert records_on_tape(case, args), f"{case.id}: the rule under test was not used"
        check_grads(case.call, *args, argnums=case.argnums, rtol=case.rtol, atol=case.atol)

    return test_matches_finite_differences


def _plain(out):
    if isinstance(out, (list, tuple)):
        return [_plain(o) for o in out]
    while hasattr(out, "tape") and hasattr(out, "value"):
        out = out.value
    return out


def implementation_test(cases, max_examples=15, implemented=True, value_rtol=1e-6):
    """A hypothesis test of functions defined for nodes by an implementation (or, with
    ``implemented=False``, by NumPy's own Python code): the value on nodes is NumPy's
    value on arrays, and the gradient matches central differences. A case's ``argnums``
    of None means every float argument (None, strings and dicts pass through)."""
    from sensitivities.registry import implementation_of

    @pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])
    @settings(max_examples=max_examples, deadline=None)
    @given(data=st.data())
    def test_matches_numpy_and_finite_differences(case, data):
        assert (implementation_of(case.registered) is not None) == implemented, case.id
        args = tuple(case.draw(data))
        argnums = case.argnums
        if argnums is None:
            argnums = tuple(i for i, a in enumerate(args) if isinstance(a, (np.ndarray, float)))
        expected = case.call(*args)
        t = Tape()
        nodes = list(args)
        for i in argnums:
            nodes[i] = Leaf(t, args[i])
        got = _plain(case.call(*nodes))
        np.testing.assert_allclose(got, _plain(expected), rtol=value_rtol, atol=1e-12)
        check_grads(case.call, *args, argnums=argnums, rtol=case.rtol, atol=case.atol)

    return test_matches_numpy_and_finite_differences


def draw_arrays(data, shapes, strategy):
    return tuple(data.draw(strategy(s)) for s in shapes)


def scalar_or_array(a):
    return float(a) if np.ndim(a) == 0 else a


def second_order_test(functions):
    """A hypothesis test that reverse over reverse matches central differences of the
    first derivative, for ``(f, (low, high))`` pairs of elementwise functions."""
    from tape import grad
    from tests.strategies import arrays

    @pytest.mark.parametrize("f, domain", functions, ids=[str(i) for i in range(len(functions))])
    @settings(max_examples=4, deadline=None)
    @given(data=st.data())
    def test_second_derivatives_match_finite_differences(f, domain, data):
        x = data.draw(arrays((3,), *domain))
        w = np.array([0.3, -1.1, 0.8])
        first = grad(lambda x: np.sum(f(x) * w), argnums=0)
        check_grads(first, x, rtol=1e-4, atol=1e-5)

    return test_second_derivatives_match_finite_differences
