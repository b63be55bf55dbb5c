"""Complex inputs and intermediates, under JAX's convention.

For a real-valued f of a complex z = x + iy, ``grad(f)(z) == df/dx - 1j * df/dy``. Each
test takes df/dx and df/dy by central differences in the real and the imaginary
direction separately and compares with that.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import Leaf, Tape, grad
from tests.fd import numeric_grad
from tests.strategies import SHAPES, arrays, broadcastable


def check_complex_grads(f, *args, argnums=(0,), rtol=1e-5, atol=1e-6):
    """Assert that ``grad(f)`` matches JAX's convention by central differences, with the
    input's dtype kept."""
    got = grad(f, argnums=tuple(argnums))(*args)
    for g, i in zip(got, argnums):
        assert np.shape(g) == np.shape(args[i])
        assert np.result_type(g) == np.result_type(args[i]), (
            np.result_type(g),
            np.result_type(args[i]),
        )
        expected = numeric_grad(f, args, i)  # JAX's convention for complex arguments
        np.testing.assert_allclose(g, expected, rtol=rtol, atol=atol, err_msg=f"argument {i}")


def complex_arrays(shape, low=0.3, high=1.5):
    """Complex arrays whose real and imaginary parts are, in magnitude, in [low, high]:
    off both axes, so away from every branch cut of the principal branches."""
    magnitude = arrays(shape, low, high)
    signs = arrays(shape, -1.0, 1.0, avoid=0.0).map(np.sign)
    return st.tuples(magnitude, signs, magnitude, signs).map(
        lambda p: p[0] * p[1] + 1j * p[2] * p[3]
    )


def weight(shape):
    """A fixed complex weight: Re(w * f(z)) sees both parts of f(z)."""
    k = np.arange(int(np.prod(shape)), dtype=float).reshape(shape)
    return np.exp(1j * (0.7 * k + 0.3)) * (1 + 0.1 * k)


def real_loss(f):
    def loss(*args):
        y = f(*args)
        return np.sum(np.real(y * weight(np.shape(y))))

    return loss


# -- the documented example --------------------------------------------------------------


def test_the_convention_of_jaxs_autodiff_cookbook():
    # grad(f)(3+4j) for f(z) = x**2 + y**2 is 6-8j in JAX's cookbook
    f = lambda z: np.real(z) ** 2 + np.imag(z) ** 2  # noqa: E731
    assert grad(f)(3.0 + 4.0j) == (6.0 - 8.0j,)
    assert grad(lambda z: np.abs(z) ** 2)(3.0 + 4.0j) == (6.0 - 8.0j,)
    # a gradient-descent step goes along the conjugate
    z = 3.0 + 4.0j
    for _ in range(50):
        z = z - 0.1 * np.conj(grad(f)(z)[0])
    assert abs(z) < 1e-4


# -- holomorphic functions: the real rule unchanged ---------------------------------------

HOLOMORPHIC = {
    "negative": np.negative, "positive": np.positive, "square": np.square,
    "reciprocal": np.reciprocal, "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2,
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh, "sinc": np.sinc,
    "power_real_exponent": lambda z: np.power(z, 2.5), "power_of_real_base": lambda z: 1.7 ** z,
    "rdiv": lambda z: 1.0 / z, "matmul_free_polynomial": lambda z: 3 * z**3 - z * 2j + 1,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_holomorphic_functions(name, data):
    f = HOLOMORPHIC[name]
    z = data.draw(SHAPES.flatmap(complex_arrays))
    check_complex_grads(real_loss(f), z)


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "power": np.power,
    "float_power": np.float_power,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_binary_functions_under_broadcasting(name, data):
    f = BINARY[name]
    sa, sb = data.draw(broadcastable(2))
    a, b = data.draw(complex_arrays(sa)), data.draw(complex_arrays(sb))
    check_complex_grads(real_loss(f), a, b, argnums=(0, 1))


# -- functions that are not holomorphic ---------------------------------------------------

NOT_HOLOMORPHIC = {
    "absolute": lambda z: np.abs(z) * 1.5, "abs_squared": lambda z: np.abs(z) ** 2,
    "real": lambda z: np.real(z * (2 - 1j)), "imag": lambda z: np.imag(z * (2 - 1j)),
    "angle": np.angle, "angle_deg": lambda z: np.angle(z, deg=True),
    "conjugate": lambda z: np.real(np.conjugate(z) * z * (1 + 2j)),
    "conj_method_mixture": lambda z: np.abs(np.exp(z.conjugate()) + z) ** 2,
    # a real value made from a complex one, used in complex arithmetic again
    "real_back_into_complex": lambda z: np.real((np.abs(z) * 1j + z) ** 2),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NOT_HOLOMORPHIC))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_functions_that_are_not_holomorphic(name, data):
    f = NOT_HOLOMORPHIC[name]
    z = data.draw(SHAPES.flatmap(complex_arrays))
    check_complex_grads(lambda z: np.sum(f(z)), z)


# real reductions of complex arrays: spreads and norms, each a sum of |.|^2 or of |.|
COMPLEX_TO_REAL = {
    "var": np.var, "var_ddof_axis": lambda z: np.var(z, axis=0, ddof=1),
    "std": np.std, "std_axis": lambda z: np.std(z, axis=-1, keepdims=True),
    "nanvar": np.nanvar, "nanstd": np.nanstd,
    "norm_fro": lambda z: np.linalg.norm(z, "fro"), "norm_nuc": lambda z: np.linalg.norm(z, "nuc"),
    "norm_2": lambda z: np.linalg.norm(z, 2), "norm_minus_2": lambda z: np.linalg.norm(z, -2),
    "svd_values": lambda z: np.linalg.svd(z, compute_uv=False) * np.array([1.0, -0.4]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMPLEX_TO_REAL))
def test_real_reductions_of_complex_arrays(name):
    rng = np.random.default_rng(11)
    z = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    check_complex_grads(lambda z: np.sum(COMPLEX_TO_REAL[name](z)), z)


@pytest.mark.parametrize(
    "f",
    [
        lambda z: np.linalg.slogdet(z)[1],
        lambda z: np.real((0.7 - 0.3j) * np.linalg.slogdet(z)[0]),  # the sign moves too
        lambda z: np.sum(np.linalg.slogdet(np.stack([z, z @ z]))[1]),
    ],
    ids=["logabsdet", "sign", "batched"],
)
def test_slogdet_of_a_complex_matrix(f):
    rng = np.random.default_rng(12)
    z = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    check_complex_grads(f, z)


def _hermitian(b):
    """A Hermitian positive definite matrix (and batch) from any complex b."""
    return b @ np.conj(np.swapaxes(b, -1, -2)) + 3 * np.eye(b.shape[-1])


_R = np.random.default_rng(13)
_WEIGHTS = _R.standard_normal((2, 3, 3)) + 1j * _R.standard_normal((2, 3, 3))
_REAL_WEIGHTS = _R.standard_normal((2, 3, 3))

# losses that do not depend on the phase of each eigenvector: |V|^2 and eigenvalues
HERMITIAN = {
    "eigvalsh": lambda b: np.sum(np.linalg.eigvalsh(_hermitian(b)) * _REAL_WEIGHTS[..., 0]),
    "eigh": lambda b: np.sum(np.linalg.eigh(_hermitian(b))[0] * _REAL_WEIGHTS[..., 1])
    + np.sum(np.abs(np.linalg.eigh(_hermitian(b))[1]) ** 2 * _REAL_WEIGHTS),
    "eigh_upper": lambda b: np.sum(np.abs(np.linalg.eigh(_hermitian(b), UPLO="U")[1]) ** 2),
    "cholesky": lambda b: np.real(np.sum(np.linalg.cholesky(_hermitian(b)) * _WEIGHTS)),
    "cholesky_upper": lambda b: np.real(
        np.sum(np.linalg.cholesky(_hermitian(b), upper=True) * _WEIGHTS)
    ),
}


@pytest.mark.parametrize("shapes", [((3, 2), (2, 3)), ((2, 3), (3, 2)), ((2, 3, 2), (2, 2, 3))])
def test_pinv_of_a_complex_matrix(shapes):
    z = _R.standard_normal(shapes[0]) + 1j * _R.standard_normal(shapes[0])
    w = _R.standard_normal(shapes[1]) + 1j * _R.standard_normal(shapes[1])
    check_complex_grads(lambda z: np.real(np.sum(np.linalg.pinv(z) * w)), z)


@pytest.mark.parametrize("shape", [(3, 2), (3, 3), (2, 4), (2, 3, 2)])
def test_qr_of_a_complex_matrix(shape):
    # NumPy's complex R has a real diagonal, so Q and R are unique: any loss will do
    z = _R.standard_normal(shape) + 1j * _R.standard_normal(shape)
    k = min(shape[-2:])
    wq = _R.standard_normal(shape[:-1] + (k,)) + 1j * _R.standard_normal(shape[:-1] + (k,))
    wr_shape = shape[:-2] + (k, shape[-1])
    wr = _R.standard_normal(wr_shape) + 1j * _R.standard_normal(wr_shape)

    def f(z):
        q, r = np.linalg.qr(z)
        return np.real(np.sum(q * wq)) + np.real(np.sum(r * wr))

    check_complex_grads(f, z)


@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (3, 3), (2, 3, 2)])
def test_svd_of_a_complex_matrix(shape):
    # losses that do not depend on the phase of each pair u_i, v_i: |U|^2, |Vh|^2, s and
    # u_i^H B v_i (v_i = conj(vh[i]))
    z = _R.standard_normal(shape) + 1j * _R.standard_normal(shape)
    k = min(shape[-2:])
    b = _R.standard_normal(shape) + 1j * _R.standard_normal(shape)
    wu, wv = _R.standard_normal(shape[:-1] + (k,)), _R.standard_normal(shape[:-2] + (k, shape[-1]))
    c = _R.standard_normal(k)

    def f(z):
        u, s, vh = np.linalg.svd(z, full_matrices=False)
        t = np.einsum("...ki,...kl,...il->...i", np.conj(u), b, np.conj(vh))
        phases = np.real(np.sum(t * (0.7 - 0.2j))) + np.imag(np.sum(t * c))
        return phases + np.sum(np.abs(u) ** 2 * wu) + np.sum(np.abs(vh) ** 2 * wv) + np.sum(s * c)

    check_complex_grads(f, z)


@pytest.mark.parametrize("b_shape", [(4,), (4, 3)])
def test_lstsq_of_complex_arrays(b_shape):
    a = _R.standard_normal((4, 2)) + 1j * _R.standard_normal((4, 2))
    b = _R.standard_normal(b_shape) + 1j * _R.standard_normal(b_shape)

    def f(a, b):
        solution, residuals, _, _ = np.linalg.lstsq(a, b)
        return np.real(np.sum(solution * (0.3 - 1.1j))) + np.sum(residuals)

    check_complex_grads(f, a, b, argnums=(0, 1))
    got = np.linalg.lstsq(Leaf(Tape(), a), b)[1].value
    np.testing.assert_allclose(got, np.linalg.lstsq(a, b)[1], rtol=1e-12)  # |r|^2 summed


@pytest.mark.parametrize("name", sorted(HERMITIAN))
def test_decompositions_of_hermitian_matrices(name):
    b = _R.standard_normal((2, 3, 3)) + 1j * _R.standard_normal((2, 3, 3))
    check_complex_grads(HERMITIAN[name], b)


def test_absolute_of_zero_has_gradient_zero():
    assert grad(lambda z: np.abs(z))(0j) == (0j,)


# -- dtypes ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_complex_input_keeps_its_complex_dtype(dtype):
    z = np.array([1 + 2j, -0.5 + 1j], dtype=dtype)
    (g,) = grad(lambda z: np.sum(np.abs(np.sin(z)) ** 2))(z)
    assert g.dtype == dtype
    assert isinstance(grad(lambda z: np.abs(z))(1 + 1j)[0], complex)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_real_input_through_complex_intermediates_gets_a_real_gradient(dtype):
    x = np.array([0.3, -1.2, 2.0], dtype=dtype)

    def f(x):
        z = np.exp(1j * x) * (1 + x)  # complex intermediates throughout
        return np.sum(np.real(z) ** 2 + np.imag(z * z))

    (g,) = grad(f)(x)
    assert g.dtype == dtype
    xd = x.astype(float)
    expected = 2 * np.cos(xd) * (1 + xd) * (np.cos(xd) - np.sin(xd) * (1 + xd))
    expected += 2 * np.cos(2 * xd) * (1 + xd) ** 2 + 2 * np.sin(2 * xd) * (1 + xd)  # d Im(z^2)
    np.testing.assert_allclose(g, expected, rtol=1e-5 if dtype == np.float64 else 1e-4)


def test_real_and_complex_arguments_together():
    x, z = np.array([0.5, -1.0]), np.array([1 + 1j, 0.3 - 2j])
    check_complex_grads(lambda x, z: np.sum(np.abs(x * z + np.exp(z)) ** 2), x, z, argnums=(0, 1))


def test_second_derivatives_through_complex_intermediates():
    from tests.fd import check_grads

    # d/dx of a real gradient computed through complex arithmetic
    f = lambda x: np.sum(np.abs(np.exp(1j * x) * (2 + x)) ** 2 + np.real(np.sin(x + 1j) ** 2))  # noqa: E731
    check_grads(lambda x: grad(f, argnums=0)(x), np.array([0.3, -0.7, 1.1]), rtol=1e-4, atol=1e-5)


# -- real-valued functions of complex input, to second order -------------------------------

_Z = _R.standard_normal((3, 3)) + 1j * _R.standard_normal((3, 3))

# f(z) real; differentiated again, the adjoint of f's result may carry an imaginary part
# that means nothing (it met complex arithmetic on the way back): each rule must drop it
REAL_OF_COMPLEX = {
    "absolute": (np.abs, _Z[0]), "real": (np.real, _Z[0]), "imag": (np.imag, _Z[0]),
    "angle": (np.angle, _Z[0]), "angle_deg": (lambda z: np.angle(z, deg=True), _Z[0]),
    "var": (np.var, _Z[0]), "std": (np.std, _Z[0]),
    "std_axis_ddof": (lambda z: np.std(z, axis=0, ddof=1), _Z),
    "nanvar": (np.nanvar, _Z[0]), "nanstd": (np.nanstd, _Z[0]),
    "norm": (np.linalg.norm, _Z[0]), "norm_1": (lambda z: np.linalg.norm(z, 1), _Z[0]),
    "norm_3": (lambda z: np.linalg.norm(z, 3), _Z[0]),
    "norm_inf": (lambda z: np.linalg.norm(z, np.inf), _Z[0]),
    "norm_nuc": (lambda z: np.linalg.norm(z, "nuc"), _Z),
    "norm_2": (lambda z: np.linalg.norm(z, 2), _Z),
    "norm_axis": (lambda z: np.linalg.norm(z, axis=1), _Z),
    "vector_norm": (np.linalg.vector_norm, _Z[0]), "matrix_norm": (np.linalg.matrix_norm, _Z),
    "svdvals": (np.linalg.svdvals, _Z), "cond": (np.linalg.cond, _Z),
    "eigvalsh": (lambda z: np.linalg.eigvalsh(z + np.conj(z.T)), _Z),
    "slogdet": (lambda z: np.linalg.slogdet(z)[1], _Z),
    "lstsq_residuals": (lambda z: np.linalg.lstsq(z[:, :2], z[:, 2])[1], _Z),
    "irfft": (np.fft.irfft, _Z[0]), "hfft": (np.fft.hfft, _Z[0]), "irfft2": (np.fft.irfft2, _Z),
}  # fmt: skip


def _gradient_of_real_function(f, z):
    """The gradient of a loss through f in which f's adjoint depends on z too (so that,
    differentiated again, it is a node that meets complex arithmetic)."""
    w = np.random.default_rng(5).standard_normal(np.shape(f(z)))

    def loss(z):
        y = f(z)
        return np.sum(np.sin(y) * w) + 0.3 * np.sum(y**2)

    return lambda z: grad(loss)(z)[0]


@pytest.mark.parametrize("name", sorted(REAL_OF_COMPLEX))
def test_real_functions_of_complex_input_to_second_order(name):
    from tape import jvp

    f, z = REAL_OF_COMPLEX[name]
    g = _gradient_of_real_function(f, z)
    rng = np.random.default_rng(6)
    wz = rng.standard_normal(z.shape) + 1j * rng.standard_normal(z.shape)
    # reverse over reverse, against central differences in both real directions
    check_complex_grads(lambda z: np.real(np.sum(g(z) * wz)), z, rtol=1e-4, atol=1e-5)
    # forward over reverse: a complex tangent, against central differences along it
    dz = rng.standard_normal(z.shape) + 1j * rng.standard_normal(z.shape)
    _, tangent = jvp(g, (z,), (dz,))
    h = 1e-6
    expected = (g(z + h * dz) - g(z - h * dz)) / (2 * h)
    assert np.iscomplexobj(tangent)
    np.testing.assert_allclose(tangent, expected, rtol=1e-4, atol=1e-5)


def test_std_of_complex_input_reverse_over_reverse():
    from tape import hessian

    b, a = np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.2, 0.3])
    f = lambda a: np.std(a + 1j * b)  # noqa: E731
    nested = np.stack([grad(lambda a, i=i: grad(f)(a)[0][i])(a)[0] for i in range(3)])
    expected = np.stack([numeric_grad(lambda a, i=i: grad(f)(a)[0][i], (a,), 0) for i in range(3)])
    np.testing.assert_allclose(nested, expected, rtol=1e-5, atol=1e-7)
    assert abs(nested[1, 1] - 0.1810) < 1e-3
    np.testing.assert_allclose(hessian(f)(a), expected, rtol=1e-5, atol=1e-7)


def test_a_pullback_to_a_complex_input_stays_complex_under_an_outer_derivative():
    from tape import jvp, vjp

    def pull(v):
        return vjp(np.real, 0.4 + 0.1j)[1](v)[0]

    assert pull(0.7) == 0.7 + 0j
    value, tangent = jvp(pull, (0.7,), (1.0,))
    assert np.iscomplexobj(value) and np.iscomplexobj(tangent)
    assert value == 0.7 + 0j and tangent == 1.0 + 0j
