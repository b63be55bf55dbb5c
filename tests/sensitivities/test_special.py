"""scipy.special rules against central differences (skipped without SciPy)."""

import pytest

special = pytest.importorskip("scipy.special")

from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.sensitivities.test_elementwise import unary  # noqa: E402

CASES = [
    Case(special.gammaln, unary(0.2, 4.0)),
    Case(special.expit, unary(-4.0, 4.0)),
    Case(special.erf, unary()),
]

test_special_rules = rule_test(CASES)
