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


def draw_arrays(data, shapes, strategy):
    return tuple(data.draw(strategy(s)) for s in shapes)


def scalar_or_array(a):
    return float(a) if np.ndim(a) == 0 else a
