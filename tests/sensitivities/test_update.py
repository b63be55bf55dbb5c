"""Rule cases for the functional index updates behind ``tape.at``."""

import numpy as np
from hypothesis import strategies as st

from sensitivities.update import add_at, multiply_at, set_at
from tests.sensitivities.cases import Case, rule_test
from tests.strategies import arrays


def _draw(unique):
    def draw(data):
        n = data.draw(st.integers(1, 5))
        x = data.draw(arrays((n, 2)))
        if unique:
            index = np.array(
                data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
            )
        else:
            index = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))
        v = data.draw(arrays((len(index), 2)))
        return x, index, v

    return draw


CASES = [
    Case(set_at, _draw(True), argnums=(0, 2)),
    Case(add_at, _draw(False), argnums=(0, 2)),
    Case(multiply_at, _draw(True), argnums=(0, 2)),
]

test_update_rules = rule_test(CASES, max_examples=15)
