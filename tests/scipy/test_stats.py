"""tape.scipy.stats against scipy.stats: values (inside, at and beyond the support, and
for invalid parameters), gradients against central differences in every differentiable
argument, second order and forward mode, and the errors where no derivative exists."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sps = pytest.importorskip("scipy.stats")

from tape import Leaf, Tape, check_grad, grad, jvp, library_code  # noqa: E402
from tape.scipy import stats  # noqa: E402
from tests.fd import check_grads, numeric_grad  # noqa: E402
from tests.strategies import arrays, broadcastable  # noqa: E402

# name -> (domain of the standardised point, domains of the shape parameters, shapes whose
# distribution functions have no derivative)
CONTINUOUS = {
    "norm": ((-3.0, 3.0), [], ()),
    "t": ((-3.0, 3.0), [(1.5, 8.0)], ("df",)),
    "cauchy": ((-3.0, 3.0), [], ()),
    "laplace": ((-3.0, 3.0), [], ()),
    "logistic": ((-3.0, 3.0), [], ()),
    "expon": ((0.1, 3.0), [], ()),
    "gamma": ((0.2, 4.0), [(0.7, 4.0)], ("a",)),
    "beta": ((0.05, 0.95), [(0.7, 3.0), (0.7, 3.0)], ("a", "b")),
    "chi2": ((0.2, 5.0), [(1.5, 6.0)], ("df",)),
    "lognorm": ((0.2, 4.0), [(0.4, 1.5)], ()),
    "uniform": ((0.05, 0.95), [], ()),
}
METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf")
POINTS = np.array([-np.inf, -30.0, -2.5, -1.0, 0.0, 1e-300, 0.3, 0.5, 1.0, 1.7, 30.0, np.inf,
                   np.nan])  # fmt: skip
QUANTILES = np.array([-0.1, 0.0, 1e-10, 0.2, 0.5, 0.9, 1.0, 1.1, np.nan])


def shape_values(name):
    return {
        "t": [(3.0,), (0.5,), (-1.0,)],
        "gamma": [(2.5,), (1.0,), (0.5,), (0.0,)],
        "beta": [(2.0, 3.0), (1.0, 1.0), (0.5, 0.7), (-1.0, 2.0)],
        "chi2": [(3.0,), (2.0,), (1.0,)],
        "lognorm": [(0.7,), (-1.0,)],
    }.get(name, [()])


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_values_are_scipys_everywhere(name):
    ours, theirs = getattr(stats, name), getattr(sps, name)
    with np.errstate(all="ignore"):
        for shapes in shape_values(name):
            for loc, scale in [(0.0, 1.0), (0.5, 2.0), (0.0, -1.0), (0.0, 0.0)]:
                for method in METHODS:
                    points = QUANTILES if method == "ppf" else POINTS
                    got = getattr(ours, method)(points, *shapes, loc=loc, scale=scale)
                    want = getattr(theirs, method)(points, *shapes, loc=loc, scale=scale)
                    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300,
                                               err_msg=f"{name}{shapes}.{method}")  # fmt: skip
                    one = getattr(ours, method)(0.5, *shapes, loc, scale)  # positionally
                    assert type(one) is type(getattr(theirs, method)(0.5, *shapes, loc, scale))


def draw_continuous(data, name, method):
    domain, shape_domains, _ = CONTINUOUS[name]
    shapes = data.draw(broadcastable(3 + len(shape_domains), max_dims=2))
    loc = data.draw(arrays(shapes[1], -1.0, 1.0))
    scale = data.draw(arrays(shapes[2], 0.5, 2.0))
    params = [data.draw(arrays(s, *d)) for s, d in zip(shapes[3:], shape_domains)]
    if method == "ppf":
        return data.draw(arrays(shapes[0], 0.05, 0.95)), params, loc, scale
    z = data.draw(arrays(shapes[0], *domain, avoid=0.0 if name == "laplace" else None))
    return loc + scale * z, params, loc, scale  # a point inside the support, off laplace's kink


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_continuous_gradients_match_finite_differences(name, method, data):
    x, params, loc, scale = draw_continuous(data, name, method)
    f = getattr(getattr(stats, name), method)
    fixed = CONTINUOUS[name][2] if method not in ("logpdf", "pdf") else ()
    names = CONTINUOUS[name][2] if fixed else ()
    free = [i for i, n in enumerate(getattr(stats, name).shapes) if n not in names]

    def call(x, loc, scale, *free_params):
        ps = list(params)
        for i, p in zip(free, free_params):
            ps[i] = p
        return f(x, *ps, loc, scale)

    args = (x, loc, scale, *[params[i] for i in free])
    with np.errstate(all="ignore"):
        want = getattr(getattr(sps, name), method)(x, *params, loc, scale)
    np.testing.assert_allclose(call(*args), want, rtol=1e-9)
    check_grads(call, *args, rtol=1e-4, atol=1e-6)


SECOND_ORDER = [
    ("norm", "logcdf", ()), ("t", "logpdf", (3.0,)), ("cauchy", "ppf", ()),
    ("laplace", "cdf", ()), ("logistic", "logsf", ()), ("expon", "logpdf", ()),
    ("gamma", "logpdf", (2.5,)), ("gamma", "cdf", (2.5,)), ("beta", "logpdf", (2.0, 3.0)),
    ("chi2", "sf", (3.0,)), ("lognorm", "ppf", (0.7,)), ("uniform", "logpdf", ()),
]  # fmt: skip


@pytest.mark.parametrize("name, method, shapes", SECOND_ORDER,
                         ids=[f"{n}.{m}" for n, m, _ in SECOND_ORDER])  # fmt: skip
def test_second_order_in_both_modes(name, method, shapes):
    f = getattr(getattr(stats, name), method)
    inside = {"beta": 0.4, "uniform": 0.4}.get(name, 0.8)
    x = np.array([0.3, 0.6]) if method == "ppf" else np.array([inside, 1.3]) * 0.5 + 0.4
    differentiable = () if method not in ("cdf", "sf") else CONTINUOUS[name][2]
    if not differentiable and shapes:
        check_grad(lambda x, s, loc, scale: f(x, *s, loc, scale), x, np.array(shapes), 0.1, 1.2,
                   order=2)  # fmt: skip
    else:
        check_grad(lambda x, loc, scale: f(x, *shapes, loc, scale), x, 0.1, 1.2, order=2)


def test_forward_mode_gives_the_reverse_gradient():
    x = np.array([0.5, 1.5, 2.5])
    f = lambda a: np.sum(stats.gamma.logpdf(x, a, 0.1, 1.3))  # noqa: E731
    (g,) = grad(f)(2.0)
    _, tangent = jvp(f, (2.0,), (1.0,))
    np.testing.assert_allclose(tangent, g)


@pytest.mark.parametrize("name, method, shape", [
    ("t", "cdf", "df"), ("gamma", "sf", "a"), ("beta", "ppf", "b"), ("chi2", "logcdf", "df"),
    ("nbinom", "cdf", "n"), ("binom", "logpmf", "n"),
])  # fmt: skip
def test_a_parameter_without_a_derivative_is_refused(name, method, shape):
    dist = getattr(stats, name)
    values = {"df": 3.0, "a": 2.0, "b": 2.0, "n": 4.0, "p": 0.3}
    params = [values[s] for s in dist.shapes]
    i = dist.shapes.index(shape)

    def f(v):
        ps = list(params)
        ps[i] = v
        return getattr(dist, method)(0.4 if name in ("beta",) else 2.0, *ps)

    with pytest.raises(TypeError, match=f"{name}.{method} in its parameter {shape}"):
        grad(f)(params[i])


# -- discrete ---------------------------------------------------------------------------

DISCRETE = {
    "poisson": [(2.5,), (0.0,), (-1.0,)],
    "binom": [(5, 0.3), (5, 0.0), (5, 1.0), (5.5, 0.3), (5, 1.2)],
    "nbinom": [(2.5, 0.3), (3, 1.0)],
    "geom": [(0.3,), (1.0,), (0.0,)],
}
COUNTS = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 5.0, 6.0, 40.0, np.inf, np.nan])


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_values_are_scipys_everywhere(name):
    with np.errstate(all="ignore"):
        for shapes in DISCRETE[name]:
            for loc in (0, 1):
                for method in ("logpmf", "pmf", "cdf", "sf"):
                    got = getattr(getattr(stats, name), method)(COUNTS, *shapes, loc=loc)
                    want = getattr(getattr(sps, name), method)(COUNTS, *shapes, loc=loc)
                    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300,
                                               err_msg=f"{name}{shapes}.{method}")  # fmt: skip


DISCRETE_GRADS = [
    ("poisson", lambda mu, k: (k, mu), [(0.3, 6.0)]),
    ("binom", lambda p, k: (k, 7, p), [(0.1, 0.9)]),
    ("nbinom", lambda n, p, k: (k, n, p), [(0.5, 5.0), (0.1, 0.9)]),
    ("geom", lambda p, k: (k, p), [(0.1, 0.9)]),
]


@pytest.mark.parametrize("name, arrange, domains", DISCRETE_GRADS,
                         ids=[d[0] for d in DISCRETE_GRADS])  # fmt: skip
@pytest.mark.parametrize("method", ["logpmf", "pmf", "cdf", "sf"])
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_discrete_gradients_match_finite_differences(name, arrange, domains, method, data):
    params = [data.draw(arrays((), *d)) for d in domains]
    k = np.arange(0.0, 8.0) + (1 if name == "geom" else 0)
    f = getattr(getattr(stats, name), method)
    argnums = (1,) if (name == "nbinom" and method in ("cdf", "sf")) else None
    if argnums:
        check_grads(lambda n, p: f(*arrange(n, p, k)), *params, argnums=argnums)
    else:
        check_grads(lambda *ps: f(*arrange(*ps, k)), *params)
        check_grad(lambda *ps: f(*arrange(*ps, k)), *params, order=2)


def test_a_count_is_not_differentiated():
    with pytest.raises(TypeError, match=r"poisson.logpmf in k"):
        grad(lambda k: stats.poisson.logpmf(k, 2.0))(2.0)


# -- multivariate ----------------------------------------------------------------------


def spd(rng, n):
    b = rng.standard_normal((n, n))
    return b @ b.T + n * np.eye(n), b


@pytest.mark.parametrize("shape", [(3,), (4, 3), (2, 4, 3)])
def test_multivariate_normal_values_are_scipys(shape):
    rng = np.random.default_rng(0)
    cov, _ = spd(rng, 3)
    mean, x = rng.standard_normal(3), rng.standard_normal(shape)
    for method in ("logpdf", "pdf"):
        got = getattr(stats.multivariate_normal, method)(x, mean, cov)
        want = getattr(sps.multivariate_normal, method)(x, mean, cov)
        np.testing.assert_allclose(got, want)
        assert np.shape(got) == np.shape(want)
    frozen = stats.multivariate_normal(mean, cov)
    np.testing.assert_allclose(frozen.logpdf(x), sps.multivariate_normal(mean, cov).logpdf(x))
    for x, m, c in [(0.3, None, 2.0), (np.array([0.3, 1.0]), 0.5, 2.0),
                    (np.ones((2, 3)), np.zeros(3), np.array([1.0, 2.0, 3.0])),
                    (np.ones(3), mean, 2.0)]:  # fmt: skip
        want = sps.multivariate_normal.logpdf(x, m, c)
        np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, m, c), want)


def test_multivariate_normal_gradients_to_second_order():
    rng = np.random.default_rng(1)
    _, b = spd(rng, 3)
    x, mean = rng.standard_normal((4, 3)), rng.standard_normal(3)

    def f(x, mean, b):  # a covariance through its factor: every direction is symmetric
        return stats.multivariate_normal.logpdf(x, mean, b @ b.T + np.eye(3))

    check_grads(f, x, mean, b)
    check_grad(f, x, mean, b, order=2)
    # the gradient in cov is the symmetric one: Sigma^-1 (S - Sigma) Sigma^-1 / 2 summed
    cov = b @ b.T + np.eye(3)
    (g,) = grad(lambda c: np.sum(stats.multivariate_normal.logpdf(x, mean, c)))(cov)
    inv = np.linalg.inv(cov)
    dev = x - mean
    expected = 0.5 * (inv @ dev.T @ dev @ inv - len(x) * inv)
    np.testing.assert_allclose(g, expected, rtol=1e-10)


@st.composite
def singular_normal(draw):
    """A covariance ``B B'`` of rank ``r < d`` (with repeated zero eigenvalues where
    ``d - r > 1``), a mean, and points on its support ``mean + z B'``."""
    d = draw(st.integers(2, 5))
    r = draw(st.integers(1, d - 1))
    factor = draw(arrays((d, r), -2.0, 2.0))
    factor = factor + 2.0 * np.eye(d, r)  # well of rank r
    return factor, draw(arrays((d,))), draw(arrays((draw(st.integers(1, 3)), r)))


@settings(max_examples=15, deadline=None)
@given(drawn=singular_normal())
def test_multivariate_normal_with_a_singular_covariance(drawn):
    factor, mean, z = drawn

    def logpdf(factor, z, mean, dist=stats.multivariate_normal):  # moving on the support
        return dist.logpdf(mean + z @ factor.T, mean, factor @ factor.T, allow_singular=True)

    def loss(factor, z, mean, dist=stats.multivariate_normal):
        return np.sum(logpdf(factor, z, mean, dist) * np.arange(1.0, len(z) + 1))

    theirs = logpdf(factor, z, mean, sps.multivariate_normal)
    np.testing.assert_allclose(logpdf(factor, z, mean), theirs, rtol=1e-10, atol=1e-10)
    got = grad(loss, argnums=(0, 1, 2))(factor, z, mean)
    for i in range(3):  # central differences of SciPy's own density
        want = numeric_grad(lambda *a: loss(*a, dist=sps.multivariate_normal), (factor, z, mean), i)
        np.testing.assert_allclose(got[i], want, rtol=1e-6, atol=1e-6)


def test_singular_multivariate_normal_off_its_support_second_order_and_pdf():
    cov, x = np.diag([1.0, 2.0, 0.0, 0.0]), np.array([0.3, -0.2, 0.0, 0.0])
    mean = np.zeros(4)
    for method in ("logpdf", "pdf"):  # autograd's case: the mean and x in the range

        def ours(x, m, method=method):
            return getattr(stats.multivariate_normal, method)(x, m, cov, allow_singular=True)

        def in_range(x2, m2, ours=ours):
            return ours(np.concatenate([x2, [0.0, 0.0]]), np.concatenate([m2, [0.0, 0.0]]))

        np.testing.assert_allclose(ours(x, mean), getattr(sps.multivariate_normal, method)(
            x, mean, cov, allow_singular=True), rtol=1e-12)  # fmt: skip
        check_grad(in_range, x[:2], mean[:2], order=2)
    gx = grad(lambda x: stats.multivariate_normal.logpdf(x, mean, cov, allow_singular=True))(x)[0]
    np.testing.assert_allclose(gx, -np.linalg.pinv(cov) @ x, rtol=1e-12)  # -C^+ (x - mean)
    off = x + np.array([0.0, 0.0, 0.1, 0.0])  # off the support: -inf, as SciPy, no gradient
    assert stats.multivariate_normal.logpdf(off, mean, cov, allow_singular=True) == -np.inf
    assert np.all(grad(lambda x: stats.multivariate_normal.pdf(x, mean, cov,
                                                                allow_singular=True))(off)[0] == 0)
    with pytest.raises(np.linalg.LinAlgError):  # without allow_singular: refused, as SciPy
        grad(lambda x: stats.multivariate_normal.logpdf(x, mean, cov))(x)
    frozen = stats.multivariate_normal(mean, cov, allow_singular=True)
    assert frozen.logpdf(x) == pytest.approx(sps.multivariate_normal.logpdf(
        x, mean, cov, allow_singular=True))  # fmt: skip


SINGULAR_LIBRARY = """
import numpy as np
from scipy import stats


def log_likelihood(factor, points):
    cov = factor @ factor.T
    return np.sum(stats.multivariate_normal.logpdf(points, np.zeros(len(cov)), cov,
                                                   allow_singular=True))
"""


def test_library_code_with_a_singular_multivariate_normal():
    import sys
    import types

    lib = types.ModuleType("singular_normal_library")
    sys.modules[lib.__name__] = lib
    exec(SINGULAR_LIBRARY, lib.__dict__)
    rng = np.random.default_rng(3)
    factor = rng.standard_normal((4, 2))
    f = lambda factor: lib.log_likelihood(factor, np.array([[0.3, -1.0], [1.2, 0.4]]) @ factor.T)  # noqa: E731
    np.testing.assert_allclose(grad(f)(factor)[0], numeric_grad(f, (factor,), 0), rtol=1e-6,
                               atol=1e-7)  # fmt: skip


def test_dirichlet_values_and_gradients():
    rng = np.random.default_rng(2)
    alpha = np.array([1.5, 2.0, 0.7])
    xs = rng.dirichlet(alpha, size=4).T
    for x in (xs[:, 0], xs, xs[:2, 0], xs[:2]):
        for method in ("logpdf", "pdf"):
            got = getattr(stats.dirichlet, method)(x, alpha)
            np.testing.assert_allclose(got, getattr(sps.dirichlet, method)(x, alpha))
    check_grads(lambda x, a: stats.dirichlet.logpdf(x, a), xs[:2], alpha)
    check_grad(lambda x, a: stats.dirichlet.logpdf(x, a), xs[:2], alpha, order=2)
    with pytest.raises(ValueError, match="must be in"):
        stats.dirichlet.logpdf(np.array([1.2, -0.2]), np.ones(2))


# -- the namespace: frozen distributions, SciPy's own for the rest, the conversion error --


def test_frozen_distributions_and_keywords():
    got = stats.gamma(2.0, scale=1.5).logpdf(np.array([0.5, 1.0]))
    np.testing.assert_allclose(got, sps.gamma(2.0, scale=1.5).logpdf([0.5, 1.0]))
    np.testing.assert_allclose(stats.t.logpdf(0.3, df=4.0, loc=0.1),
                               sps.t.logpdf(0.3, df=4.0, loc=0.1))  # fmt: skip
    (g,) = grad(lambda s: stats.norm(0.0, s).logpdf(1.0))(2.0)
    assert g == pytest.approx(-1 / 2.0 + 1 / 2.0**3)
    with pytest.raises(TypeError, match="missing required argument 'a'"):
        stats.gamma.logpdf(1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mu'"):
        stats.norm.logpdf(1.0, mu=2.0)


def test_other_names_are_scipys_own():
    assert stats.norm.rvs(size=3, random_state=0).shape == (3,)
    assert stats.norm(1.0, 2.0).mean() == 1.0
    assert stats.kstest is sps.kstest
    assert stats.norm.isf(0.5) == 0.0


def test_records_on_a_tape_as_the_numpy_calls_inside():
    t = Tape()
    stats.norm.logpdf(Leaf(t, np.array([0.1, 0.2])), 0.0, 1.0)
    assert len(t) > 1


def test_scipys_own_distributions_compute_the_counterpart_inside_grad():
    # spelled through SciPy's distribution object, the method meets the node and computes
    # tape's counterpart (tape.core.conversions); a frozen distribution too
    assert grad(lambda x: sps.norm.logpdf(x))(0.5)[0] == pytest.approx(-0.5)
    assert grad(lambda x: sps.norm(1.0, 2.0).logpdf(x))(0.5)[0] == pytest.approx(0.125)
    assert grad(lambda mu: sps.poisson.pmf(2, mu))(0.5)[0] == pytest.approx(
        np.exp(-0.5) * (0.5 - 0.125)
    )
    # SciPy's own Python code, entered on the node once np.asarray keeps it
    frozen = sps.multivariate_normal(np.zeros(2), [[2.0, 0.3], [0.3, 1.0]])
    x = np.array([0.3, -0.8])
    np.testing.assert_allclose(
        grad(frozen.pdf)(x)[0], numeric_grad(frozen.pdf, (x,), 0), rtol=1e-6, atol=1e-10
    )


def test_scipys_own_distributions_name_the_counterpart():
    with library_code(False), pytest.raises(
        TypeError, match=r"scipy.stats.norm.logpdf .* tape.scipy.stats.norm.logpdf"
    ):
        grad(lambda x: sps.norm.logpdf(x))(0.5)
    with library_code(False), pytest.raises(
        TypeError, match=r"counterpart tape.scipy.stats.multivariate_normal.pdf"
    ):
        grad(lambda x: sps.multivariate_normal(np.zeros(2)).pdf(x))(np.ones(2))
    with library_code(False), pytest.raises(
        TypeError, match=r"counterpart tape.scipy.stats.poisson.pmf"
    ):
        grad(lambda mu: sps.poisson.pmf(2, mu))(0.5)
