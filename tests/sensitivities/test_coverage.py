"""Every function with a sensitivity has a finite-difference case in some family's tests."""

import importlib
import pkgutil

import pytest

import tests.scipy as scipy_tests
import tests.sensitivities as family_tests
from sensitivities import lookup, registered_functions
from sensitivities.registry import function_name

# test_pushforwards sweeps the cases of every family: it has none of its own
_NOT_FAMILIES = ("test_coverage", "test_pushforwards")


def all_cases():
    """The rule cases of every family's tests: its lists named CASES or ..._CASES."""
    return every_case(rules_only=True)


def every_case(rules_only=False):
    """Every Case in a module-level list of some family's tests (CASES, IMPLEMENTED,
    ENTERED and the like)."""
    from tests.sensitivities.cases import Case

    cases = []
    for package in (family_tests, scipy_tests):  # the families, and tape.scipy's counterparts
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("test_") and info.name not in _NOT_FAMILIES:
                try:
                    module = importlib.import_module(f"{package.__name__}.{info.name}")
                except pytest.skip.Exception:  # a family that needs a missing optional library
                    continue
                for name, value in vars(module).items():
                    if rules_only and not (name == "CASES" or name.endswith("_CASES")):
                        continue
                    if isinstance(value, list) and value and all(
                        isinstance(c, Case) for c in value
                    ):
                        cases += value
    return cases


def test_every_sensitivity_has_a_finite_difference_case():
    tested = {case.registered for case in all_cases()}
    untested = [
        function_name(f)
        for f in registered_functions()
        if lookup(f) is not None
        and not lookup(f).nondiff
        and f not in tested
        and not str(getattr(f, "__module__", "")).startswith("tests")  # rules that tests define
    ]
    assert not untested, f"functions with sensitivities but no finite-difference case: {untested}"


def test_every_implementation_has_a_finite_difference_case():
    from sensitivities.registry import _implementations

    tested = {case.registered for case in every_case()}
    untested = [
        function_name(f)
        for f, impl in _implementations.items()
        if f not in tested and str(impl.__module__).startswith("sensitivities")
    ]
    assert not untested, f"implementations with no finite-difference case: {untested}"


def test_every_public_numpy_function_is_classified():
    """Fails when NumPy gains a function (or tape loses one) that nobody classified: give it
    a rule, an implementation, a non-differentiable mark, or a reason in
    sensitivities.audit.UNSUPPORTED."""
    from sensitivities.audit import CONVERTED, ENTERED, UNSUPPORTED, classify, public_callables

    public = dict(public_callables())
    kinds = {name: classify(name, f)[0] for name, f in public.items()}
    unclassified = sorted(name for name, kind in kinds.items() if kind == "unclassified")
    assert not unclassified, f"public NumPy functions nobody classified: {unclassified}"
    # the tables name only functions NumPy has, and only ones that need them
    listed = set(UNSUPPORTED) | ENTERED | CONVERTED
    stale = sorted(
        n for n in listed if kinds.get(n) not in ("unsupported", "entered", "converted")
    )
    assert not stale, f"names in sensitivities.audit NumPy lacks or the registry covers: {stale}"


def test_every_entered_function_has_a_finite_difference_case():
    from sensitivities.audit import ENTERED, public_callables

    tested = {case.registered for case in every_case()}
    public = dict(public_callables())
    assert not [n for n in ENTERED if public[n] not in tested]
