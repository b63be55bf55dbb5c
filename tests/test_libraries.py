"""Library code differentiated unchanged, against the derivatives its authors ship:
statsmodels' ``score`` and ``hessian``, scikit-learn's ``_backprop`` and kernels'
``eval_gradient=True``, SciPy's ``rosen_der`` and ``rosen_hess``, lifelines' Efron
gradient and Hessian. Where a library's
own Hessian uses another parametrisation, central differences of its score stand in."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tape import grad, hessian, jacobian
from tests.fd import numeric_grad

RNG = np.random.default_rng(25)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _design(n=60, k=2):
    sm = pytest.importorskip("statsmodels.api")
    return sm, sm.add_constant(RNG.normal(size=(n, k)))


@pytest.mark.parametrize("model", ["Logit", "Probit", "Poisson"])
def test_statsmodels_discrete_models(model):
    sm, X = _design()
    b = np.array([0.2, -0.5, 0.8])
    if model == "Poisson":
        y = RNG.poisson(np.exp(X @ b * 0.5)).astype(float)
    else:
        y = (RNG.random(len(X)) < 1 / (1 + np.exp(-X @ b))).astype(float)
    m = getattr(sm, model)(y, X)
    np.testing.assert_allclose(grad(m.loglike)(b)[0], m.score(b), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hessian(m.loglike)(b), m.hessian(b), rtol=1e-10, atol=1e-10)


def test_statsmodels_negative_binomial():
    sm, X = _design()
    y = RNG.poisson(2.0, size=len(X)).astype(float)
    m = sm.NegativeBinomial(y, X)
    p = np.array([0.1, 0.2, -0.1, 0.5])  # the last is alpha
    np.testing.assert_allclose(grad(m.loglike)(p)[0], m.score(p), rtol=1e-10, atol=1e-10)
    H = hessian(m.loglike)(p)
    np.testing.assert_allclose(H[:3, :3], m.hessian(p)[:3, :3], rtol=1e-10, atol=1e-10)
    by_score = np.array([numeric_grad(lambda p, i=i: m.score(p)[i], (p,), 0) for i in range(4)])
    np.testing.assert_allclose(H, by_score, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("link", ["Logit", "Probit", "CLogLog", "Cauchy"])
def test_statsmodels_glm_binomial(link):
    sm, X = _design()
    b = np.array([0.2, -0.5, 0.8])
    y = (RNG.random(len(X)) < 1 / (1 + np.exp(-X @ b))).astype(float)
    m = sm.GLM(y, X, family=sm.families.Binomial(link=getattr(sm.families.links, link)()))
    np.testing.assert_allclose(grad(m.loglike)(b)[0], m.score(b), rtol=1e-8, atol=1e-8)
    if link in ("Logit", "Probit"):  # statsmodels' observed Hessian for the canonical pair
        np.testing.assert_allclose(hessian(m.loglike)(b), m.hessian(b), rtol=1e-8, atol=1e-8)
    by_score = np.array([numeric_grad(lambda b, i=i: m.score(b)[i], (b,), 0) for i in range(3)])
    np.testing.assert_allclose(hessian(m.loglike)(b), by_score, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("activation", ["tanh", "relu", "logistic", "identity"])
@pytest.mark.parametrize("kind", ["MLPRegressor", "MLPClassifier"])
def test_sklearn_mlp_against_backprop(kind, activation):
    nn = pytest.importorskip("sklearn.neural_network")
    X = RNG.normal(size=(20, 3))
    if kind == "MLPRegressor":
        y = RNG.normal(size=20)
    else:
        y = RNG.integers(0, 3, size=20)
    m = getattr(nn, kind)(hidden_layer_sizes=(5, 4), activation=activation, max_iter=3,
                          random_state=0, alpha=0.01).fit(X, y)  # fmt: skip
    Y = m._label_binarizer.transform(y) if kind == "MLPClassifier" else y.reshape(-1, 1)
    Y = Y.astype(float)
    layers = len(m.coefs_)

    def backprop(coefs, intercepts):
        saved = m.coefs_, m.intercepts_
        m.coefs_, m.intercepts_ = list(coefs), list(intercepts)
        try:
            empty = [None] * layers
            return m._backprop(X, Y, None, [X] + empty, list(empty), list(empty), list(empty))
        finally:
            m.coefs_, m.intercepts_ = saved

    coefs, intercepts = [c.copy() for c in m.coefs_], [b.copy() for b in m.intercepts_]
    _, coef_grads, intercept_grads = backprop(coefs, intercepts)
    gc, gi = grad(lambda c, b: backprop(c, b)[0])(coefs, intercepts)
    for ours, theirs in zip(gc + gi, coef_grads + intercept_grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    # _backprop itself, in-place deltas and all: the gradient of its first coefficient
    # gradient's squared norm, against central differences
    def norm(c0):
        return np.sum(backprop([c0] + coefs[1:], intercepts)[1][0] ** 2)

    if activation != "relu":  # relu's kinks make differences unreliable
        np.testing.assert_allclose(
            grad(norm)(coefs[0])[0], numeric_grad(norm, (coefs[0],), 0), rtol=1e-5, atol=1e-8
        )


def _kernels():
    kernels = pytest.importorskip("sklearn.gaussian_process.kernels")
    return [
        kernels.RBF(1.3),
        kernels.RBF(np.array([0.7, 1.9])),
        kernels.Matern(1.1, nu=0.5),
        kernels.Matern(1.1, nu=1.5),
        kernels.Matern(np.array([0.8, 1.2]), nu=2.5),
        kernels.RationalQuadratic(1.2, 0.7),
        kernels.ExpSineSquared(1.0, 2.0),
        kernels.ConstantKernel(2.0) * kernels.RBF(1.0) + kernels.WhiteKernel(0.5),
        kernels.DotProduct(0.5) ** 2,
    ]


@pytest.mark.parametrize("index", range(9))
def test_sklearn_kernels_against_eval_gradient(index):
    kernel = _kernels()[index]
    X = RNG.normal(size=(6, 2))
    _, dK = kernel(X, eval_gradient=True)  # with respect to the log hyperparameters
    J = jacobian(lambda theta: kernel.clone_with_theta(theta)(X))(kernel.theta)
    np.testing.assert_allclose(J, dK, rtol=1e-9, atol=1e-12)


def test_sklearn_gaussian_process_log_marginal_likelihood():
    gp_module = pytest.importorskip("sklearn.gaussian_process")
    kernels = pytest.importorskip("sklearn.gaussian_process.kernels")
    X = RNG.normal(size=(8, 2))
    y = np.sin(X[:, 0]) + 0.1 * RNG.normal(size=8)
    gp = gp_module.GaussianProcessRegressor(kernels.RBF(1.0) + kernels.WhiteKernel(0.1))
    gp.fit(X, y)
    theta = gp.kernel_.theta
    value, theirs = gp.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(grad(gp.log_marginal_likelihood)(theta)[0], theirs, rtol=1e-7)


@pytest.mark.parametrize("method", ["_get_efron_values_single", "_get_efron_values_batch"])
def test_lifelines_cox_efron_against_its_own_derivatives(method):
    pd = pytest.importorskip("pandas")
    coxph = pytest.importorskip("lifelines.fitters.coxph_fitter")
    n, d = 40, 3
    T = np.round(RNG.exponential(size=n), 1)  # rounded, so that deaths tie
    order = np.argsort(T, kind="stable")
    X = pd.DataFrame(RNG.normal(size=(n, d))[order])
    T, E = pd.Series(T[order]), pd.Series(RNG.random(n)[order] < 0.7)
    weights = pd.Series(RNG.uniform(0.5, 2.0, size=n))
    efron = getattr(coxph.SemiParametricPHFitter.__new__(coxph.SemiParametricPHFitter), method)
    beta = 0.3 * RNG.normal(size=d)
    their_hessian, their_gradient, _ = efron(X, T, E, weights, None, beta)

    def log_likelihood(beta):
        return efron(X, T, E, weights, None, beta)[2]

    ours = grad(log_likelihood)(beta)[0]
    np.testing.assert_allclose(ours, their_gradient, rtol=1e-10, atol=1e-12)
    ours = hessian(log_likelihood)(beta)
    np.testing.assert_allclose(ours, their_hessian, rtol=1e-10, atol=1e-12)


def test_scipy_rosen():
    optimize = pytest.importorskip("scipy.optimize")
    x = RNG.normal(size=5)
    np.testing.assert_allclose(grad(optimize.rosen)(x)[0], optimize.rosen_der(x), rtol=1e-12)
    np.testing.assert_allclose(hessian(optimize.rosen)(x), optimize.rosen_hess(x), rtol=1e-12)
    p = RNG.normal(size=5)
    hvp = grad(lambda x: np.sum(grad(optimize.rosen)(x)[0] * p))(x)[0]
    np.testing.assert_allclose(hvp, optimize.rosen_hess_prod(x, p), rtol=1e-12)
    np.testing.assert_allclose(
        grad(lambda x: np.sum(optimize.rosen_der(x) ** 2))(x)[0],
        2 * optimize.rosen_hess(x) @ optimize.rosen_der(x),
        rtol=1e-10,
    )


def test_scipy_stats_called_by_the_library_computes_the_counterpart():
    stats = pytest.importorskip("scipy.stats")
    x = np.array([-0.3, 0.4, 1.5])
    g = grad(lambda x: np.sum(stats.norm.cdf(x) + stats.norm._pdf(x) + stats.cauchy.logpdf(x)))
    expected = stats.norm.pdf(x) - x * stats.norm.pdf(x) - 2 * x / (1 + x**2)
    np.testing.assert_allclose(g(x)[0], expected, rtol=1e-12)
    assert type(stats.norm.cdf(x)) is np.ndarray  # SciPy's own outside grad


def test_scipy_linalg_by_module_and_by_bound_name():
    linalg = pytest.importorskip("scipy.linalg")
    A = RNG.normal(size=(3, 3))
    A = A @ A.T + 3 * np.eye(3)

    def f(A):
        L = linalg.cholesky(A, lower=True)
        return np.sum(np.log(np.diag(L)))  # half the log-determinant

    np.testing.assert_allclose(grad(f)(A)[0], 0.5 * np.linalg.inv(A).T, rtol=1e-10)
