"""Every function with a sensitivity has a finite-difference case in some family's tests."""

import importlib
import pkgutil

import pytest

import tests.scipy as scipy_tests
import tests.sensitivities as family_tests
from sensitivities import lookup, registered_functions
from sensitivities.registry import function_name


def all_cases():
    cases = []
    for package in (family_tests, scipy_tests):  # the families, and tape.scipy's counterparts
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("test_") and info.name != "test_coverage":
                try:
                    module = importlib.import_module(f"{package.__name__}.{info.name}")
                except pytest.skip.Exception:  # a family that needs a missing optional library
                    continue
                cases += getattr(module, "CASES", [])
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
