"""scipy.special rules against central differences (skipped without SciPy); the
counterparts of SciPy's Python-level functions; float32; second derivatives."""

import numpy as np
import pytest
from hypothesis import strategies as st

special = pytest.importorskip("scipy.special")

from sensitivities import lookup  # noqa: E402
from sensitivities.special import _logsumexp, log_softmax, logsumexp, polygamma, softmax  # noqa: E402
from tape import MissingRuleError, grad, library_code, value_and_grad  # noqa: E402
from tests.fd import check_grads, numeric_grad  # noqa: E402
from tests.sensitivities.cases import (  # noqa: E402
    Case,
    implementation_test,
    rule_test,
    second_order_test,
)
from tests.sensitivities.test_elementwise import PHASE, binary, unary  # noqa: E402
from tests.strategies import SHAPES, arrays, broadcastable  # noqa: E402


def with_order(orders, low, high):
    """(order, x) for functions of a fixed order: the order is not differentiated."""

    def draw(data):
        return data.draw(st.sampled_from(orders)), data.draw(
            SHAPES.flatmap(lambda s: arrays(s, low, high))
        )

    return draw


def with_params(*params, low, high):
    """Fixed parameters, then x: for functions differentiated in their last argument."""

    def draw(data):
        return (*params, data.draw(SHAPES.flatmap(lambda s: arrays(s, low, high))))

    return draw


def ternary_x(low, high, x_low, x_high):
    def draw(data):
        sa, sb, sx = data.draw(broadcastable(3))
        return (
            data.draw(arrays(sa, low, high)),
            data.draw(arrays(sb, low, high)),
            data.draw(arrays(sx, x_low, x_high)),
        )

    return draw


def huber_draw(data):
    # r = delta * q with |q| away from 1 keeps r off the kink at |r| == delta
    sd, sr = data.draw(broadcastable(2))
    delta = data.draw(arrays(sd, 0.5, 2.0))
    q = data.draw(arrays(np.broadcast_shapes(sd, sr), -3.0, 3.0, avoid=(-1.0, 1.0)))
    return delta, delta * q


def reduction_draw(data, with_b=False):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    args = (data.draw(arrays(shape, -5.0, 5.0)), axis)
    if with_b:
        args += (data.draw(arrays(shape, 0.2, 2.0)),)
    return args


CASES = [
    # gamma and beta functions
    Case(special.gammaln, unary(0.2, 4.0)),
    Case(special.loggamma, unary(0.2, 4.0)),
    Case(special.gamma, unary(0.2, 4.0)),
    Case(special.rgamma, unary(0.2, 4.0)),
    Case(special.digamma, unary(0.2, 4.0)),
    Case(polygamma, with_order([0, 1, 2, 3], 0.3, 4.0), argnums=(1,)),
    Case(special.beta, binary(0.3, 3.0, 0.3, 3.0), argnums=(0, 1)),
    Case(special.betaln, binary(0.3, 3.0, 0.3, 3.0), argnums=(0, 1)),
    # error functions and the normal distribution
    Case(special.erf, unary()),
    Case(special.erfc, unary()),
    Case(special.erfinv, unary(-0.9, 0.9)),
    Case(special.erfcinv, unary(0.1, 1.9)),
    Case(special.erfcx, unary(-2.0, 3.0)),
    Case(special.erfi, unary()),
    Case(special.dawsn, unary(-3.0, 3.0)),
    Case(
        special.wofz,
        binary(-2.0, 2.0, 0.1, 2.0),
        fn=lambda a, b: np.real(special.wofz(a + 1j * b) * PHASE),
        argnums=(0, 1),
    ),
    Case(special.ndtr, unary(-3.0, 3.0)),
    Case(special.log_ndtr, unary(-20.0, 5.0), rtol=1e-4),
    Case(special.ndtri, unary(0.05, 0.95)),
    Case(special.ndtri_exp, unary(-5.0, -0.05)),
    # the logistic function; softplus is SciPy's np.logaddexp(0, x)
    Case(special.expit, unary(-4.0, 4.0)),
    Case(special.logit, unary(0.05, 0.95)),
    Case(special.log_expit, unary(-5.0, 5.0)),
    Case(np.logaddexp, unary(-5.0, 5.0), fn=special.softplus, name="softplus"),
    # x log y and entropies
    Case(special.xlogy, binary(low_b=0.1, high_b=3.0), argnums=(0, 1)),
    Case(special.xlog1py, binary(low_b=-0.8, high_b=3.0), argnums=(0, 1)),
    Case(special.entr, unary(0.1, 3.0)),
    Case(special.rel_entr, binary(0.1, 3.0, 0.1, 3.0), argnums=(0, 1)),
    Case(special.kl_div, binary(0.1, 3.0, 0.1, 3.0), argnums=(0, 1)),
    Case(special.huber, huber_draw, argnums=(0, 1)),
    Case(special.pseudo_huber, binary(0.5, 2.0, -3.0, 3.0), argnums=(0, 1)),
    # Box-Cox, in the data
    # (lambda kept off 0, where SciPy switches formulas and tiny lambdas lose precision)
    Case(special.boxcox, binary(0.2, 3.0, -1.0, 2.0, avoid_b=0.0)),
    Case(special.boxcox1p, binary(-0.5, 3.0, -1.0, 2.0, avoid_b=0.0)),
    Case(special.inv_boxcox, binary(-0.4, 0.4, -1.0, 2.0, avoid_b=0.0)),
    Case(special.inv_boxcox1p, binary(-0.4, 0.4, -1.0, 2.0, avoid_b=0.0)),
    # Bessel functions
    Case(special.i0, unary(-3.0, 3.0)),
    Case(special.i1, unary(-3.0, 3.0)),
    Case(special.i0e, unary(-3.0, 3.0, avoid=0.0)),
    Case(special.i1e, unary(-3.0, 3.0, avoid=0.0)),
    Case(special.k0, unary(0.2, 3.0)),
    Case(special.k1, unary(0.2, 3.0)),
    Case(special.k0e, unary(0.2, 3.0)),
    Case(special.k1e, unary(0.2, 3.0)),
    Case(special.j0, unary(-5.0, 5.0)),
    Case(special.j1, unary(-5.0, 5.0)),
    Case(special.y0, unary(0.5, 5.0)),
    Case(special.y1, unary(0.5, 5.0)),
    Case(special.jv, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 5.0), argnums=(1,)),
    Case(special.yv, with_order([0.0, 0.5, 1.0, 2.5], 0.5, 5.0), argnums=(1,)),
    Case(special.iv, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 3.0), argnums=(1,)),
    Case(special.kv, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 3.0), argnums=(1,)),
    Case(special.ive, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 3.0), argnums=(1,)),
    Case(special.kve, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 3.0), argnums=(1,)),
    # incomplete functions and distributions, in x
    Case(special.gammainc, binary(0.5, 3.0, 0.1, 4.0), argnums=(1,)),
    Case(special.gammaincc, binary(0.5, 3.0, 0.1, 4.0), argnums=(1,)),
    Case(special.betainc, ternary_x(0.5, 3.0, 0.05, 0.95), argnums=(2,)),
    # SciPy's stdtr is accurate to about 1e-11, which central differences magnify
    Case(special.stdtr, binary(1.0, 10.0, -3.0, 3.0), argnums=(1,), rtol=1e-4, atol=1e-5),
    Case(special.chdtr, binary(1.0, 6.0, 0.2, 5.0), argnums=(1,)),
    Case(special.owens_t, binary(), argnums=(0, 1)),
    # integrals
    Case(special.exp1, unary(0.1, 3.0)),
    Case(special.expi, unary(0.1, 3.0)),
    Case(special.spence, unary(0.1, 3.0)),
    Case(special.ellipk, unary(0.05, 0.95)),
    Case(special.ellipe, unary(0.05, 0.95)),
    # SciPy's elementary functions and degrees
    Case(special.expm1, unary()),
    Case(special.log1p, unary(-0.8, 3.0)),
    Case(special.cbrt, unary(avoid=0.0)),
    Case(special.exp2, unary()),
    Case(special.exp10, unary()),
    Case(special.cosm1, unary()),
    Case(special.sindg, unary(-80.0, 80.0)),
    Case(special.cosdg, unary(-80.0, 80.0)),
    Case(special.tandg, unary(-80.0, 80.0)),
    Case(special.cotdg, unary(10.0, 170.0)),
    # more gamma-type functions
    Case(special.poch, binary(0.5, 3.0, 0.2, 2.0), argnums=(0, 1)),
    Case(special.binom, binary(3.0, 6.0, 0.5, 2.5), argnums=(0, 1)),
    Case(special.powm1, binary(0.2, 3.0, -2.0, 2.0), argnums=(0, 1)),
    Case(special.exprel, unary(-3.0, 3.0)),
    Case(special.expn, with_order([0, 1, 2, 3], 0.2, 3.0), argnums=(1,)),
    Case(
        special._ufuncs._lambertw,
        unary(-0.3, 3.0),
        fn=lambda x: np.real(special.lambertw(x)),
        name="lambertw",
    ),  # fmt: skip
    Case(special.wrightomega, unary(-2.0, 2.0)),
    # inverses of distribution functions, and their complements
    Case(special.gammaincinv, binary(0.5, 3.0, 0.05, 0.95), argnums=(1,)),
    Case(special.gammainccinv, binary(0.5, 3.0, 0.05, 0.95), argnums=(1,)),
    Case(special.betaincc, ternary_x(0.5, 3.0, 0.05, 0.95), argnums=(2,)),
    Case(special.betaincinv, ternary_x(0.5, 3.0, 0.05, 0.95), argnums=(2,), rtol=1e-4),
    Case(special.betainccinv, ternary_x(0.5, 3.0, 0.05, 0.95), argnums=(2,), rtol=1e-4),
    Case(special.stdtrit, binary(1.0, 10.0, 0.05, 0.95), argnums=(1,), rtol=1e-4, atol=1e-5),
    Case(special.chdtrc, binary(1.0, 6.0, 0.2, 5.0), argnums=(1,)),
    Case(special.chdtri, binary(1.0, 6.0, 0.05, 0.95), argnums=(1,), rtol=1e-4),
    Case(special.gdtr, ternary_x(0.5, 3.0, 0.1, 3.0), argnums=(2,)),
    Case(special.gdtrc, ternary_x(0.5, 3.0, 0.1, 3.0), argnums=(2,)),
    # Bessel and Struve functions of an order
    Case(special.kn, with_order([0, 1, 2, 3], 0.2, 3.0), argnums=(1,)),
    Case(special.yn, with_order([0, 1, 2, 3], 0.5, 5.0), argnums=(1,)),
    Case(special.jve, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 5.0), argnums=(1,)),
    Case(special.yve, with_order([0.0, 0.5, 1.0, 2.5], 0.5, 5.0), argnums=(1,)),
    Case(special.struve, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 4.0), argnums=(1,)),
    Case(special.modstruve, with_order([0.0, 0.5, 1.0, 2.5], 0.2, 3.0), argnums=(1,)),
    # hypergeometric functions
    Case(special.hyp2f1, with_params(0.5, 1.5, 2.5, low=-0.9, high=0.9), argnums=(3,)),
    Case(special.hyp1f1, with_params(0.5, 1.5, low=-2.0, high=2.0), argnums=(2,)),
    Case(special.hyperu, with_params(0.5, 1.5, low=0.2, high=3.0), argnums=(2,)),
    Case(special.hyp0f1, with_order([0.5, 1.0, 2.5], -2.0, 2.0), argnums=(1,)),
    # elliptic integrals
    Case(special.ellipkm1, unary(0.05, 0.95)),
    Case(special.ellipkinc, binary(-1.5, 1.5, 0.05, 0.95)),
    Case(special.ellipeinc, binary(-1.5, 1.5, 0.05, 0.95)),
    # orthogonal polynomials
    Case(special.eval_legendre, with_order([0, 1, 2, 5], -0.9, 0.9), argnums=(1,)),
    Case(special.eval_chebyt, with_order([0, 1, 2, 5], -0.9, 0.9), argnums=(1,)),
    Case(special.eval_chebyu, with_order([0, 1, 2, 5], -0.9, 0.9), argnums=(1,)),
    Case(special.eval_laguerre, with_order([0, 1, 2, 5], 0.0, 3.0), argnums=(1,)),
    Case(special.eval_hermite, with_order([0, 1, 2, 5], -2.0, 2.0), argnums=(1,)),
    Case(special.eval_hermitenorm, with_order([0, 1, 2, 5], -2.0, 2.0), argnums=(1,)),
    Case(special.eval_jacobi, with_params(3, 0.5, 1.5, low=-0.9, high=0.9), argnums=(3,)),
    Case(special.eval_gegenbauer, with_params(3, 0.7, low=-0.9, high=0.9), argnums=(2,)),
    Case(special.eval_genlaguerre, with_params(3, 0.7, low=0.0, high=3.0), argnums=(2,)),
    # counterparts of SciPy's Python-level functions
    Case(_logsumexp, reduction_draw, fn=lambda a, axis: logsumexp(a, axis=axis)),
    Case(
        _logsumexp,
        lambda data: reduction_draw(data, with_b=True),
        fn=lambda a, axis, b: logsumexp(a, axis=axis, b=b),
        argnums=(0, 2),
        name="logsumexp_b",
    ),
    Case(softmax, reduction_draw, fn=lambda x, axis: softmax(x, axis=axis)),
    Case(log_softmax, reduction_draw, fn=lambda x, axis: log_softmax(x, axis=axis)),
]

test_special_rules = rule_test(CASES, max_examples=10)


# -- the counterparts: SciPy's values, and SciPy's own functions cannot take nodes ---------


def test_counterparts_give_scipy_values_on_plain_arrays():
    x = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
    b = np.array([1.0, -2.0, 0.5])
    for axis in (None, 0, 1, -1):
        np.testing.assert_allclose(logsumexp(x, axis=axis), special.logsumexp(x, axis=axis))
        np.testing.assert_allclose(softmax(x, axis=axis), special.softmax(x, axis=axis))
        np.testing.assert_allclose(log_softmax(x, axis=axis), special.log_softmax(x, axis=axis))
    for keepdims in (False, True):
        out, sign = logsumexp(x, axis=1, b=b, keepdims=keepdims, return_sign=True)
        want, want_sign = special.logsumexp(x, axis=1, b=b, keepdims=keepdims, return_sign=True)
        np.testing.assert_allclose(out, want)
        np.testing.assert_array_equal(sign, want_sign)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(logsumexp(x, axis=1, b=b), special.logsumexp(x, axis=1, b=b))
    np.testing.assert_allclose(polygamma(2, x), special.polygamma(2, x))


def test_logsumexp_with_signed_weights_and_its_sign_is_a_constant():
    x = np.array([1.0, 2.0, 0.5])
    b = np.array([1.0, -0.5, 2.0])

    def f(x, b):
        out, sign = logsumexp(x, b=b, return_sign=True)
        assert not hasattr(sign, "tape")
        return out * sign

    check_grads(f, x, b)
    b = np.array([1.0, -3.0, 0.1])  # a negative sum: log|S| is differentiated
    check_grads(f, x, b)


def test_logsumexp_keepdims_and_broadcast_weights():
    x = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
    b = np.array([0.5, 2.0, 1.0])
    check_grads(lambda x, b: logsumexp(x, axis=1, b=b, keepdims=True), x, b)
    check_grads(lambda x, b: logsumexp(x, axis=None, b=b), x, b)


def test_logsumexp_does_not_overflow():
    (g,) = grad(lambda x: logsumexp(x))(np.array([1000.0, 1000.0, -1000.0]))
    np.testing.assert_allclose(g, [0.5, 0.5, 0.0])


def test_scipys_own_python_functions_compute_the_counterparts_on_nodes():
    # inside grad, SciPy's own function spelled through its module meets the node and
    # computes the counterpart (tape.core.conversions); with that off, SciPy still converts
    # to ndarrays, and the error names the counterpart
    (g,) = grad(lambda x: special.logsumexp(x))(np.zeros(4))
    np.testing.assert_allclose(g, np.full(4, 0.25))
    with library_code(False), pytest.raises(TypeError, match="tape.scipy.special.logsumexp"):
        grad(lambda x: special.logsumexp(x))(np.ones(3))


def test_softplus_is_recorded_as_logaddexp():
    (g,) = grad(lambda x: np.sum(special.softplus(x)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_allclose(g, special.expit([-1.0, 0.0, 2.0]))


# -- float32 and second derivatives ---------------------------------------------------------

FLOAT32 = [
    (special.gammaln, 1.5), (special.digamma, 1.5), (special.gamma, 1.5), (special.erf, 0.5),
    (special.erfc, 0.5), (special.erfinv, 0.5), (special.erfcinv, 0.5), (special.erfcx, 0.5),
    (special.erfi, 0.5), (special.dawsn, 0.5), (special.ndtr, 0.5), (special.log_ndtr, 0.5),
    (special.ndtri, 0.5), (special.expit, 0.5), (special.logit, 0.5), (special.log_expit, 0.5),
    (special.entr, 0.5), (special.i0, 0.5), (special.i1, 0.5), (special.i0e, 0.5),
    (special.i1e, 0.5), (special.k0, 0.5), (special.k1, 0.5), (special.j0, 0.5),
    (special.j1, 0.5), (special.expm1, 0.5), (special.log1p, 0.5), (special.cbrt, 0.5),
    (special.exp2, 0.5), (special.exp10, 0.5), (special.sindg, 30.0), (special.tandg, 30.0),
]  # fmt: skip


@pytest.mark.parametrize("f, x", FLOAT32, ids=[f.__name__ for f, _ in FLOAT32])
def test_rules_keep_float32(f, x):
    x = np.full(3, x, dtype=np.float32)
    y = f(x)
    g = lookup(f).rule(0, (x,))(y, np.ones_like(y), x)
    assert g.dtype == np.float32, (f.__name__, g.dtype)


def test_counterparts_keep_float32():
    x = np.array([0.5, 1.5, 2.0], dtype=np.float32)
    for f in (lambda x: logsumexp(x), lambda x: softmax(x)[0], lambda x: log_softmax(x)[1],
              lambda x: np.sum(polygamma(1, x))):  # fmt: skip
        (g,) = grad(f)(x)
        assert g.dtype == np.float32


SECOND_ORDER = [
    (special.gammaln, (0.3, 3.0)), (special.digamma, (0.3, 3.0)), (special.erf, (-2.0, 2.0)),
    (special.erfinv, (-0.8, 0.8)), (special.ndtri, (0.1, 0.9)), (special.log_ndtr, (-5.0, 3.0)),
    (special.expit, (-3.0, 3.0)), (special.i1, (-2.0, 2.0)), (special.i0e, (0.2, 2.0)),
    (lambda x: special.xlogy(x, x + 3.0), (-1.0, 1.0)),
    (lambda x: polygamma(2, x), (0.3, 3.0)), (lambda x: logsumexp(x), (-3.0, 3.0)),
    (lambda x: softmax(x), (-3.0, 3.0)), (lambda x: log_softmax(x), (-3.0, 3.0)),
    (lambda x: special.jv(1.5, x), (0.3, 4.0)),
    (lambda x: special.betainc(2.0, 3.0, x), (0.1, 0.9)),
]  # fmt: skip


test_second_derivatives_match_finite_differences = second_order_test(SECOND_ORDER)


# -- ufuncs with several results, and the spherical Bessel functions ---------------------

def _weighted(results):
    return sum(np.sum(r * (k + 1)) for k, r in enumerate(results))


SEVERAL = {
    "airy": lambda s, x: s.airy(x),
    "airye": lambda s, x: s.airye(x),
    "fresnel": lambda s, x: s.fresnel(x),
    "sici": lambda s, x: s.sici(x),
    "shichi": lambda s, x: s.shichi(x),
    "itairy": lambda s, x: s.itairy(x / 2),
    "iti0k0": lambda s, x: s.iti0k0(x),
    "it2i0k0": lambda s, x: s.it2i0k0(x),
    "itj0y0": lambda s, x: s.itj0y0(x),
    "it2j0y0": lambda s, x: s.it2j0y0(x),
    "pbdv": lambda s, x: s.pbdv(0.6, x),
    "pbvv": lambda s, x: s.pbvv(0.6, x),
    "pbwa": lambda s, x: s.pbwa(0.4, x),
    "ellipj in u": lambda s, x: s.ellipj(x, 0.3),
    "ellipj in m": lambda s, x: s.ellipj(1.2, x / 3),
    "mathieu_cem": lambda s, x: s.mathieu_cem(2, 1.5, 20 * x),
    "mathieu_sem": lambda s, x: s.mathieu_sem(2, 1.5, 20 * x),
    "mathieu_modcem1": lambda s, x: s.mathieu_modcem1(2, 1.5, x / 3),
    "mathieu_modsem2": lambda s, x: s.mathieu_modsem2(2, 1.5, x / 3),
}


@pytest.mark.parametrize("name", list(SEVERAL))
def test_ufuncs_with_several_results_to_second_order(name):
    s = pytest.importorskip("scipy.special")

    def f(x):
        return _weighted(SEVERAL[name](s, x))

    def df(x):
        return np.sum(grad(f)(x)[0] ** 2)

    x = np.array([0.7, 1.3, 2.1])
    value, (g,) = value_and_grad(f)(x)
    assert np.isclose(value, f(x))
    np.testing.assert_allclose(g, numeric_grad(f, (x,), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad(df)(x)[0], numeric_grad(df, (x,), 0), rtol=1e-5, atol=1e-7)


def test_several_results_first_order_only_and_without_rules():
    s = pytest.importorskip("scipy.special")
    x = np.array([0.2, 0.5])

    def spheroidal(x):
        return np.sum(s.pro_ang1(1, 2, 1.5, x)[0])

    np.testing.assert_allclose(grad(spheroidal)(x)[0], numeric_grad(spheroidal, (x,), 0), rtol=1e-6)
    with pytest.raises(MissingRuleError, match="kelvin"):
        grad(lambda x: np.sum(np.real(s.kelvin(x)[0])))(x)
    with pytest.raises(MissingRuleError, match="argument 0"):
        grad(lambda v: np.sum(s.pbdv(v, x)[0]))(0.5)  # the order: no rule


@pytest.mark.parametrize("name", ["spherical_jn", "spherical_yn", "spherical_in", "spherical_kn"])
@pytest.mark.parametrize("derivative", [False, True])
def test_spherical_bessel_functions(name, derivative):
    s = pytest.importorskip("scipy.special")

    def f(z):
        return np.sum(getattr(s, name)(2, z, derivative=derivative) * np.arange(1.0, 4.0))

    def df(z):
        return np.sum(grad(f)(z)[0] ** 2)

    z = np.array([-0.7, 1.3, 2.1])  # a negative z: SciPy's reflection
    value, (g,) = value_and_grad(f)(z)
    assert np.isclose(value, f(z))
    np.testing.assert_allclose(g, numeric_grad(f, (z,), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad(df)(z)[0], numeric_grad(df, (z,), 0), rtol=1e-5, atol=1e-7)


def test_incomplete_elliptic_integrals_in_the_parameter():
    s = pytest.importorskip("scipy.special")
    phi = np.array([0.3, 1.1])
    for f in (lambda m: np.sum(s.ellipkinc(phi, m)), lambda m: np.sum(s.ellipeinc(phi, m))):
        assert grad(f)(0.4)[0] == pytest.approx(numeric_grad(f, (0.4,), 0), rel=1e-7)


def _in(low, high, *before):
    """Arguments ``*before`` then one array drawn in [low, high]."""

    def draw(data):
        return (*before, *unary(low, high)(data))

    return draw


# every result of every ufunc of several results, each against central differences
_DOMAINS = {
    "airy": _in(-2.0, 2.0), "airye": _in(0.2, 2.0), "fresnel": _in(-2.0, 2.0),
    "sici": _in(0.2, 3.0), "shichi": _in(0.2, 2.0), "itairy": _in(0.1, 1.5),
    "iti0k0": _in(0.2, 2.0), "it2i0k0": _in(0.2, 2.0), "itj0y0": _in(0.2, 3.0),
    "it2j0y0": _in(0.2, 3.0), "pbdv": _in(-2.0, 2.0, 0.6), "pbvv": _in(-2.0, 2.0, 0.6),
    "pbwa": _in(-2.0, 2.0, 0.4), "ellipj": _in(-2.0, 2.0), "mathieu_cem": _in(0.0, 90.0, 2, 1.5),
    "mathieu_sem": _in(5.0, 90.0, 2, 1.5), "mathieu_modcem1": _in(0.1, 1.0, 2, 1.5),
    "mathieu_modcem2": _in(0.2, 1.0, 2, 1.5), "mathieu_modsem1": _in(0.1, 1.0, 2, 1.5),
    "mathieu_modsem2": _in(0.2, 1.0, 2, 1.5), "pro_ang1": _in(-0.8, 0.8, 1, 2, 1.5),
    "obl_ang1": _in(-0.8, 0.8, 1, 2, 1.5), "pro_rad1": _in(1.1, 2.0, 1, 2, 1.5),
}  # fmt: skip


def _several_cases():
    """A rule case per result, and an implementation case per ufunc (its results summed)."""
    from sensitivities.special import RESULTS

    rules, implemented = [], []
    for ufunc, results in RESULTS.items():
        name = ufunc.__name__
        base = name.removesuffix("_cv")
        draw = _DOMAINS[base]
        if name.endswith("_cv"):
            cv = (special.pro_cv if base.startswith("pro") else special.obl_cv)(1, 2, 1.5)
            low, high = (-0.8, 0.8) if "ang" in base else (1.1, 2.0)
            draw = _in(low, high, 1, 2, 1.5, cv)
        fixed = (0.3,) if name == "ellipj" else ()  # m, after u
        argnum = len(draw(_Fixed())) - 1
        for k, result in enumerate(results):
            rules.append(Case(result, draw, fn=lambda *a, _r=result, _f=fixed: _r(*a, *_f),
                              argnums=(argnum,), rtol=1e-4, name=f"{name}[{k}]"))  # fmt: skip
            if name == "ellipj":
                rules.append(Case(result, lambda data: (1.2, *unary(0.05, 0.9)(data)),
                                  argnums=(1,), rtol=1e-4, name=f"ellipj[{k}] in m"))  # fmt: skip
        implemented.append(Case(
            ufunc, draw, argnums=(argnum,), rtol=1e-4, name=name,
            fn=lambda *a, _u=ufunc, _f=fixed: sum(r * (k + 1) for k, r in enumerate(_u(*a, *_f))),
        ))  # fmt: skip
    return rules, implemented


class _Fixed:
    """Hypothesis data stand-in: draws an array of one element, for counting arguments."""

    def draw(self, strategy):
        return np.ones(1)


SEVERAL_CASES, IMPLEMENTED_SEVERAL = _several_cases()
test_several_results = rule_test(SEVERAL_CASES, max_examples=5)
test_several_results_entered = implementation_test(IMPLEMENTED_SEVERAL, max_examples=5)


def _spherical_cases():
    from scipy.special import _spherical_bessel as b

    cases = []
    for name in ("jn", "yn", "in", "kn"):
        for suffix in ("", "_d"):
            f = getattr(b, f"_spherical_{name}{suffix}")
            cases.append(Case(f, lambda data: (2, *unary(0.3, 3.0)(data)), argnums=(1,)))
    return cases


SPHERICAL_CASES = _spherical_cases()
test_spherical_ufuncs = rule_test(SPHERICAL_CASES, max_examples=8)
