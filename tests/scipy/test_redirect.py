"""SciPy's functions met by nodes in library code go to tape.scipy's counterparts
(``tape.scipy.redirect``); plain values get SciPy's own results, and what is wrapped
pickles as SciPy's. References: central differences and SciPy's own values."""

import math
import pickle

import numpy as np
import pytest

from tape import grad
from tests.fd import numeric_grad

scipy_linalg = pytest.importorskip("scipy.linalg")
stats = pytest.importorskip("scipy.stats")


def _library(x):  # as library code writes it: SciPy's public names, a distribution's form
    A = np.diag(1.0 + x**2) + 0.1
    return np.sum(scipy_linalg.solve(A, x)) + np.sum(stats.norm.cdf(x)) + stats.norm._pdf(x[0])


def test_library_code_calling_scipy_differentiates_through_the_counterparts():
    x = np.array([0.3, -0.5, 1.2])
    np.testing.assert_allclose(grad(_library)(x)[0], numeric_grad(_library, (x,), 0), rtol=1e-6)


def test_plain_values_get_scipys_results_and_everything_pickles():
    grad(_library)(np.ones(3))  # the wrappers are in place
    x = np.array([0.3, -0.5])
    assert np.allclose(stats.norm.cdf(x), [0.5 * (1 + math.erf(v / 2**0.5)) for v in x])
    assert pickle.loads(pickle.dumps(scipy_linalg.solve)) is scipy_linalg.solve
    frozen = pickle.loads(pickle.dumps(stats.norm(1.0, 2.0)))
    assert frozen.cdf(1.0) == 0.5
    assert pickle.loads(pickle.dumps(stats.norm)).pdf(0.0) == pytest.approx(0.3989422804014327)
    # a distribution made after the wrapping reads its shapes from SciPy's signatures
    assert stats.gamma.numargs == 1 and stats.gamma(2.0).mean() == pytest.approx(2.0)
