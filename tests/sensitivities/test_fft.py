"""numpy.fft rules against central differences: every transform with n/s, axis/axes and
norm, from real inputs and from complex ones (their real and imaginary parts drawn as
separate real arguments, so that both directions are differentiated), and complex inputs
directly under JAX's convention."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import grad
from tests.fd import check_grads
from tests.sensitivities.cases import Case, rule_test
from tests.sensitivities.test_complex import check_complex_grads, weight
from tests.strategies import arrays

NORMS = st.sampled_from([None, "backward", "ortho", "forward"])
SHAPE = st.lists(st.integers(2, 5), min_size=1, max_size=3).map(tuple)


def project(y):
    """A real array from the transform's output, seeing its real and imaginary parts."""
    return np.real(y * weight(np.shape(y))) if np.iscomplexobj(y) else y


def one_axis(complex_input):
    def draw(data):
        shape = data.draw(SHAPE)
        parts = (data.draw(arrays(shape)),) + ((data.draw(arrays(shape)),) if complex_input else ())
        n = data.draw(st.none() | st.integers(2, 7))
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        return parts + (n, axis, data.draw(NORMS))

    return draw


def n_axes(complex_input, count=None):
    def draw(data):
        shape = data.draw(SHAPE.filter(lambda s: len(s) >= (count or 1)))
        order = data.draw(st.permutations(range(len(shape))))
        axes = tuple(order[: count or data.draw(st.integers(1, len(shape)))])
        s = data.draw(st.none() | st.tuples(*[st.integers(2, 6)] * len(axes)))
        parts = (data.draw(arrays(shape)),) + ((data.draw(arrays(shape)),) if complex_input else ())
        return parts + (s, axes, data.draw(NORMS))

    return draw


def from_parts(transform, **fixed):
    """The transform of a + 1j b (or of a), its output made real."""

    def fn(*args):
        *parts, size, where, norm = args
        z = parts[0] + 1j * parts[1] if len(parts) == 2 else parts[0]
        keys = ("n", "axis") if transform.__name__ in ONE_AXIS else ("s", "axes")
        return project(transform(z, **dict(zip(keys, (size, where))), norm=norm, **fixed))

    return fn


ONE_AXIS = {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"}
fft = np.fft

CASES = [
    Case(fft.fft, one_axis(True), fn=from_parts(fft.fft), argnums=(0, 1)),
    Case(fft.fft, one_axis(False), fn=from_parts(fft.fft), name="fft_of_real"),
    Case(fft.ifft, one_axis(True), fn=from_parts(fft.ifft), argnums=(0, 1)),
    Case(fft.rfft, one_axis(False), fn=from_parts(fft.rfft)),
    Case(fft.irfft, one_axis(True), fn=from_parts(fft.irfft), argnums=(0, 1)),
    Case(fft.hfft, one_axis(True), fn=from_parts(fft.hfft), argnums=(0, 1)),
    Case(fft.ihfft, one_axis(False), fn=from_parts(fft.ihfft)),
    Case(fft.fftn, n_axes(True), fn=from_parts(fft.fftn), argnums=(0, 1)),
    Case(fft.ifftn, n_axes(True), fn=from_parts(fft.ifftn), argnums=(0, 1)),
    Case(fft.rfftn, n_axes(False), fn=from_parts(fft.rfftn)),
    Case(fft.irfftn, n_axes(True), fn=from_parts(fft.irfftn), argnums=(0, 1)),
    Case(fft.fft2, n_axes(True, 2), fn=from_parts(fft.fft2), argnums=(0, 1)),
    Case(fft.ifft2, n_axes(True, 2), fn=from_parts(fft.ifft2), argnums=(0, 1)),
    Case(fft.rfft2, n_axes(False, 2), fn=from_parts(fft.rfft2)),
    Case(fft.irfft2, n_axes(True, 2), fn=from_parts(fft.irfft2), argnums=(0, 1)),
    Case(
        fft.fftshift,
        n_axes(False),
        fn=lambda a, s, axes, norm: fft.fftshift(a, axes) * weight(np.shape(a)).real,
    ),
    Case(
        fft.ifftshift,
        n_axes(False),
        fn=lambda a, s, axes, norm: fft.ifftshift(a, axes) * weight(np.shape(a)).real,
    ),
]

test_fft_rules = rule_test(CASES, max_examples=8)


# -- defaults, complex inputs directly, dtypes, second order --------------------------------


def test_default_arguments():
    x = np.random.default_rng(0).standard_normal((4, 6))
    for f in (fft.fft, fft.ifft, fft.rfft, fft.fftn, fft.ifftn, fft.rfftn, fft.fft2, fft.ifft2,
              fft.rfft2, fft.fftshift, fft.ifftshift, fft.ihfft):  # fmt: skip
        check_grads(lambda x, f=f: project(f(x)), x)
    for f in (fft.irfft, fft.irfftn, fft.irfft2, fft.hfft):
        check_grads(lambda a, b, f=f: project(f(a + 1j * b)), x, x[::-1].copy(), argnums=(0, 1))


@pytest.mark.parametrize(
    "name", ["fft", "ifft", "irfft", "hfft", "fftn", "ifftn", "irfftn", "fft2"]
)
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_complex_inputs_under_jaxs_convention(name, data):
    transform = getattr(fft, name)
    shape = data.draw(SHAPE.filter(lambda s: len(s) >= 2 or name not in ("fft2",)))
    z = data.draw(arrays(shape)) + 1j * data.draw(arrays(shape))
    norm = data.draw(NORMS)
    check_complex_grads(lambda z: np.sum(project(transform(z, norm=norm))), z)


def test_a_real_signal_through_a_spectral_filter():
    # a circular convolution done in the frequency domain, against its real matrix
    x = np.random.default_rng(1).standard_normal(8)
    k = np.array([0.5, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25])
    C = sum(k[i] * np.roll(np.eye(8), i, axis=0) for i in range(8))

    def circular(x):
        return fft.irfft(fft.rfft(x) * fft.rfft(k), n=8)

    np.testing.assert_allclose(circular(x), C @ x)
    w = np.arange(8.0)
    (g,) = grad(lambda x: np.sum(circular(x) * w))(x)
    np.testing.assert_allclose(g, C.T @ w, atol=1e-12)
    assert g.dtype == np.float64


def test_float32_stays_float32_and_complex64_stays_complex64():
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    (g,) = grad(lambda x: np.sum(np.abs(fft.rfft(x)) ** 2) + np.sum(fft.irfft(fft.fft(x)[:4])))(x)
    assert g.dtype == np.float32
    z = (x + 1j * x[::-1]).astype(np.complex64)
    (g,) = grad(lambda z: np.sum(np.abs(fft.ifft2(z.reshape(2, 3))) ** 2))(z)
    assert g.dtype == np.complex64


SECOND_ORDER = [
    lambda x: np.abs(fft.fft(x)) ** 2,
    lambda x: fft.irfft(fft.rfft(x) ** 2, n=5),
    lambda x: np.real(fft.fftn(np.sin(x.reshape(1, 5)), s=(2, 7), axes=(0, 1)) ** 2),
    lambda x: fft.hfft(np.exp(1j * x[:3]), n=4) ** 2,
    lambda x: np.real(fft.ifft(x * 1j, n=3) ** 2 * (1 + 1j)),
    lambda x: fft.fftshift(x**3),
]


@pytest.mark.parametrize("i", range(len(SECOND_ORDER)))
def test_second_derivatives_match_finite_differences(i):
    f = SECOND_ORDER[i]
    x = np.array([0.3, -1.1, 0.8, 0.5, -0.4])
    w = np.random.default_rng(i).standard_normal(np.shape(f(x)))
    first = grad(lambda x: np.sum(f(x) * w), argnums=0)
    check_grads(first, x, rtol=1e-4, atol=1e-5)
