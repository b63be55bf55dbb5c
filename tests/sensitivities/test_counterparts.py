"""scipy_caller: a SciPy function that converts a node is named with its differentiable
counterpart, and nothing is named from code outside SciPy."""

import sys

import numpy as np
import pytest

from sensitivities.counterparts import scipy_caller
from tape import NodeConversionError, grad, library_code


def _frame_in(module, name):
    """The frame of a function ``name`` defined in a module called ``module``."""
    namespace = {"__name__": module, "sys": sys}
    exec(f"def {name}():\n    return sys._getframe()\n", namespace)
    return namespace[name]()


def test_no_scipy_on_the_stack_names_nothing():
    assert scipy_caller(sys._getframe()) is None
    assert scipy_caller(_frame_in("mypackage.linalg", "expm")) is None  # not SciPy's


def test_a_scipy_function_with_a_counterpart_is_named_with_it():
    assert scipy_caller(_frame_in("scipy.linalg._matfuncs", "expm")) == (
        "scipy.linalg.expm",
        "tape.scipy.linalg.expm",
    )
    assert scipy_caller(_frame_in("scipy.special._logsumexp", "logsumexp")) == (
        "scipy.special.logsumexp",
        "tape.scipy.special.logsumexp",
    )


def test_a_scipy_function_without_a_counterpart_names_nothing():
    assert scipy_caller(_frame_in("scipy.linalg._helpers", "_no_such_counterpart")) is None


def test_the_error_for_expm_on_a_node_names_its_counterpart():
    sla = pytest.importorskip("scipy.linalg")
    special = pytest.importorskip("scipy.special")
    named = r"scipy\.linalg\.expm .*tape\.scipy\.linalg\.expm instead"
    with library_code(False):  # inside grad SciPy's own computes the counterpart instead
        with pytest.raises(NodeConversionError, match=named):
            grad(lambda a: np.sum(sla.expm(a)))(np.eye(2) * 0.1)
        with pytest.raises(NodeConversionError, match=r"tape\.scipy\.special\.logsumexp instead"):
            grad(special.logsumexp)(np.ones(2))
    # d/dA sum(expm(A)) at 0 is ones: expm(E) = I + E to first order
    np.testing.assert_allclose(grad(lambda a: np.sum(sla.expm(a)))(np.zeros((2, 2)))[0], 1.0)
