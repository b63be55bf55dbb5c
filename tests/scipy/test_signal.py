"""tape.scipy.signal against scipy.signal: values in every mode, gradients against central
differences, second order in both modes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sps = pytest.importorskip("scipy.signal")

from sensitivities.scipy.signal import _lfilter  # noqa: E402
from sensitivities.scipy.signal import convolve as convolve_rule  # noqa: E402
from tape import check_grad, grad, library_code  # noqa: E402
from tape.scipy import signal  # noqa: E402
from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.strategies import arrays  # noqa: E402

MODES = st.sampled_from(["full", "same", "valid"])


def conv_draw(data, ndim=None):
    ndim = ndim or data.draw(st.integers(1, 2))
    s1 = tuple(data.draw(st.integers(1, 5)) for _ in range(ndim))
    # 'valid' needs one input at least as large as the other in every axis
    s2 = tuple(data.draw(st.integers(1, n)) for n in s1)
    if data.draw(st.booleans()):
        s1, s2 = s2, s1
    return data.draw(arrays(s1)), data.draw(arrays(s2)), data.draw(MODES)


def lfilter_draw(data):
    b = data.draw(arrays((data.draw(st.integers(1, 3)),)))
    a = np.concatenate([[1.0], data.draw(arrays((data.draw(st.integers(0, 2)),), -0.4, 0.4))])
    x = data.draw(arrays(data.draw(st.sampled_from([(5,), (2, 4)]))))
    return b, a * data.draw(st.sampled_from([1.0, 2.0])), x, data.draw(st.sampled_from([-1, 0]))


CASES = [
    Case(convolve_rule, conv_draw, lambda a, b, mode: signal.convolve(a, b, mode),
         argnums=(0, 1)),  # fmt: skip
    Case(_lfilter, lfilter_draw, lambda b, a, x, axis: signal.lfilter(b, a, x, axis),
         argnums=(0, 1, 2)),  # fmt: skip
]

test_rules_match_finite_differences = rule_test(CASES, max_examples=8)

FUNCTIONS = ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d"]


@pytest.mark.parametrize("name", FUNCTIONS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_values_are_scipys(name, data):
    a, b, mode = conv_draw(data, 2 if name.endswith("2d") else None)
    np.testing.assert_allclose(getattr(signal, name)(a, b, mode),
                               getattr(sps, name)(a, b, mode), atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("name", FUNCTIONS[1:])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_gradients_in_both_modes_to_second_order(name, mode):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((2, 3))
    if not name.endswith("2d"):
        a, b = a[0], b[0]
    check_grad(lambda a, b: getattr(signal, name)(a, b, mode), a, b, order=2)


def test_lfilter_values_and_second_order():
    rng = np.random.default_rng(1)
    b, a, x = np.array([0.5, 0.3, 0.2]), np.array([2.0, -0.8, 0.2]), rng.standard_normal((3, 6))
    for axis in (-1, 0):
        np.testing.assert_allclose(signal.lfilter(b, a, x, axis), sps.lfilter(b, a, x, axis))
    check_grad(lambda b, a, x: signal.lfilter(b, a, x), b, a, x, order=2)
    zi = np.zeros(2)
    for got, want in zip(signal.lfilter(b, a, x[0], zi=zi), sps.lfilter(b, a, x[0], zi=zi)):
        np.testing.assert_allclose(got, want)
    with pytest.raises(NotImplementedError, match="without zi"):
        grad(lambda x: np.sum(signal.lfilter(b, a, x, zi=zi)[0]))(x[0])


def test_unsupported_options_are_refused():
    with pytest.raises(NotImplementedError, match="boundary='fill'"):
        signal.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap")
    with pytest.raises(ValueError, match="2-D"):
        signal.correlate2d(np.ones(3), np.ones(2))


def test_scipys_own_names_the_counterpart():
    with library_code(False), pytest.raises(
        TypeError, match=r"scipy.signal.correlate .* tape.scipy.signal.correlate"
    ):
        grad(lambda x: np.sum(sps.correlate(x, np.ones(2))))(np.ones(3))
    # inside grad, SciPy's own computes the counterpart: d/dx sum(correlate(x, [1, 1]))
    np.testing.assert_allclose(
        grad(lambda x: np.sum(sps.correlate(x, np.ones(2))))(np.ones(3))[0], [2.0, 2.0, 2.0]
    )
    assert signal.welch is sps.welch  # not covered: SciPy's own
