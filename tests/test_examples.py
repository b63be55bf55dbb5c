"""Every example runs with --quick, and its gradients agree with central differences."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tape import grad, jacobian, vmap

from .fd import numeric_grad

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    # named under tests, so that the rules it registers count as test fixtures
    spec = importlib.util.spec_from_file_location(f"tests.example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def number(pattern, text):
    return float(re.search(pattern, text).group(1))


def test_every_example_is_tested_here():
    for path in EXAMPLES.glob("*.py"):
        assert f"test_{path.stem}" in globals(), f"{path.name} has no test"


def test_quickstart():
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py"), "--quick"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout
    assert "(1.6065471361170487, 0.6791074260357777)" in out
    # each line shows what its call returns: here, value_and_grad's tuple of gradients
    shown = re.escape(">>> value_and_grad(loss, argnums=(0,))(W, X)")
    assert re.search(shown + r"\n\([\d.]+, \(array\(", out)


def test_custom_sensitivity(capsys):
    example = load("custom_sensitivity")
    timings = example.main(["--quick"])
    out = capsys.readouterr().out
    assert "primitive + rule    [0.  0.5 1. ]" in out
    assert "naive, traced       [0.  0.5 nan]" in out
    assert "passed" in out
    assert set(timings) == {"stable, traced", "primitive + rule"}
    x = np.linspace(-40.0, 40.0, 81)
    sigmoid = 1.0 / (1.0 + np.exp(-x))  # d/dx log(1 + e^x), written independently
    got = grad(lambda v: np.sum(example.log1pexp(v)), argnums=0)(x)
    np.testing.assert_allclose(got, sigmoid, rtol=1e-12, atol=1e-300)


def test_logistic_regression(capsys):
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    load("logistic_regression").main(["--quick"])
    out = capsys.readouterr().out
    assert number(r"train accuracy\s+([\d.]+)", out) > 0.95
    assert number(r"test accuracy\s+([\d.]+)", out) > 0.9


def test_logistic_regression_gradient():
    example = load("logistic_regression")
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 4)), (rng.random(20) > 0.5).astype(float)
    params = rng.standard_normal(5) * 3  # large enough that some |z| are large
    got = grad(example.loss, argnums=0)(params, X, y, 0.1)
    expected = numeric_grad(example.loss, (params, X, y, 0.1), 0)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


def test_mlp_digits(capsys, tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    history = load("mlp_digits").main(["--quick", "--out", str(tmp_path)])
    assert history["test"][-1] >= 0.95
    assert history["loss"][-1] < history["loss"][0]
    png = tmp_path / "mlp_digits.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "test accuracy" in capsys.readouterr().out


def test_mlp_digits_gradient():
    example = load("mlp_digits")
    rng = np.random.default_rng(1)
    params = example.init([5, 4, 10], rng)
    X = rng.standard_normal((6, 5))
    onehot = np.eye(10)[rng.integers(0, 10, size=6)]
    got = grad(example.loss, argnums=0)(params, X, onehot)
    for key, value in params.items():

        def f(v, key=key):
            return example.loss({**params, key: v}, X, onehot)

        np.testing.assert_allclose(got[key], numeric_grad(f, (value,), 0), rtol=1e-5, atol=1e-8)


def test_gaussian_process(capsys, tmp_path):
    pytest.importorskip("statsmodels")
    pytest.importorskip("matplotlib")
    pytest.importorskip("scipy")
    result, rmse = load("gaussian_process").main(["--quick", "--out", str(tmp_path)])
    assert rmse < 2.0  # ppm, over three held-out years; CO2 rises about 1.5 ppm a year
    assert (tmp_path / "gaussian_process.png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert number(r"max \|difference\| (\S+)", out) < 1e-8  # recorded vs textbook gradient
    assert "RMSE" in out


def test_gaussian_process_gradient():
    pytest.importorskip("scipy")
    example = load("gaussian_process")
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 5, size=12))
    y = np.sin(t) + 0.1 * rng.standard_normal(12)
    log_params = np.log([1.0, 3.0, 0.5, 4.0, 1.2, 0.3, 0.8, 0.2])
    for nll in (example.neg_log_marginal_likelihood, example.neg_log_marginal_likelihood_textbook):
        got = grad(example.objective, argnums=0)(log_params, t, y, nll)
        expected = numeric_grad(example.objective, (log_params, t, y, nll), 0)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8)


def test_gaussian_process_likelihoods_agree_with_one_through_a_general_solve():
    pytest.importorskip("scipy")
    example = load("gaussian_process")

    def through_solve(K, y):  # y^T K^-1 y / 2 + log|K| / 2, without the Cholesky factor
        return 0.5 * y @ np.linalg.solve(K, y) + 0.5 * np.linalg.slogdet(K)[1]

    rng = np.random.default_rng(3)
    B = rng.standard_normal((6, 6))
    y = rng.standard_normal(6)

    def through(nll):
        return grad(lambda B: nll(B @ B.T + 6 * np.eye(6), y), argnums=0)(B)

    expected = through(through_solve)
    for nll in (example.neg_log_marginal_likelihood, example.neg_log_marginal_likelihood_textbook):
        np.testing.assert_allclose(through(nll), expected, rtol=1e-8)


def test_tape_graph(capsys, tmp_path):
    tape = load("tape_graph").main(["--quick", "--out", str(tmp_path)])
    dot = (tmp_path / "tape_graph.dot").read_text()
    assert dot.startswith("digraph tape {") and "cluster_reverse" in dot
    assert dot.count(" [label=\"[") == 2 * len(tape)  # every record, and its adjoint
    out = capsys.readouterr().out
    assert "f=tanh" in out and "--quick: no PNG or SVG drawn" in out
    assert 'label="[0] W\\n' in dot and 'label="[2] v\\n' in dot  # the leaves' names


def test_tape_graph_says_why_it_draws_no_picture(capsys, tmp_path, monkeypatch):
    pytest.importorskip("graphviz")
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)  # no dot program
    load("tape_graph").main(["--out", str(tmp_path)])
    assert "no PNG or SVG drawn: Graphviz's dot program is not installed" in (
        capsys.readouterr().out
    )
    assert not (tmp_path / "tape_graph.png").exists()



def test_dask_logistic(capsys):
    pytest.importorskip("dask.array")
    pytest.importorskip("distributed")
    result = load("dask_logistic").main(["--quick"])
    out = capsys.readouterr().out
    assert "x one worker's limit" in out and number(r"\(([\d.]+)x one worker", out) > 1.0
    assert result["sample_diff"] < 1e-12  # Dask on the cluster vs NumPy on the same sample
    assert result["losses"][-1] < result["losses"][0]


def test_dask_logistic_gradient():
    example = load("dask_logistic")
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((30, example.FEATURES)), (rng.random(30) > 0.5).astype(float)
    w, b = rng.standard_normal(example.FEATURES), 0.3
    got = grad(example.loss, argnums=(0, 1))(w, b, X, y, 0.01)
    for i, g in enumerate(got):
        expected = numeric_grad(example.loss, (w, b, X, y, 0.01), i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)


def test_scipy_regression(capsys):
    pytest.importorskip("statsmodels")
    pytest.importorskip("scipy")
    params, se, params_sm, se_sm = load("scipy_regression").main(["--quick"])
    np.testing.assert_allclose(params, params_sm, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(se, se_sm, rtol=2e-3)  # statsmodels' Hessian is numerical
    assert "max relative difference in standard errors" in capsys.readouterr().out


def test_scipy_regression_gradient_and_hessian():
    pytest.importorskip("statsmodels")
    pytest.importorskip("scipy")
    from tape import hessian

    example = load("scipy_regression")
    rng = np.random.default_rng(5)
    X = np.column_stack([np.ones(15), rng.standard_normal((15, 2))])
    y = X @ [1.0, 2.0, -1.0] + rng.standard_t(3.0, 15)
    params = np.array([0.8, 1.7, -1.2, 3.0, 1.3])
    nll = example.negative_log_likelihood
    got = grad(nll, argnums=0)(params, X, y)
    np.testing.assert_allclose(got, numeric_grad(nll, (params, X, y), 0), rtol=1e-6)
    first = lambda p: grad(nll, argnums=0)(p, X, y)  # noqa: E731
    h = hessian(nll, argnums=0)(params, X, y)
    for i in range(len(params)):
        column = numeric_grad(lambda p, i=i: first(p)[i], (params,), 0)
        np.testing.assert_allclose(h[i], column, rtol=1e-5, atol=1e-6)


def test_ode_fit(capsys):
    pytest.importorskip("statsmodels")
    pytest.importorskip("scipy")
    example = load("ode_fit")
    result = example.main(["--quick"])
    out = capsys.readouterr().out
    assert "BFGS: 3 iterations" in out and "discrete adjoint" in out  # the fast default
    example.main(["--quick", "--adjoint", "continuous"])
    assert "continuous adjoint" in capsys.readouterr().out
    t, P = example.population()
    assert len(t) == 51 and 1.7 < P[0] < 1.8  # 1959-2009, in hundreds of millions
    # the solver's gradient, both ways, against central differences of the closed form
    theta = result.x
    for adjoint in ("continuous", "discrete"):
        g = grad(example.loss, argnums=0)(theta, t, P, adjoint)
        expected = numeric_grad(lambda th: np.mean((example.closed_form(th, t) - P) ** 2),
                                (theta,), 0)  # fmt: skip
        # the solver's tolerance (rtol 1e-8) bounds the agreement
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-7)


def test_bilevel_ridge(capsys):
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    result, difference = load("bilevel_ridge").main(["--quick"])
    out = capsys.readouterr().out
    assert "hypergradient vs closed form" in out and difference < 1e-7
    before = number(r"validation error\s+([\d.]+)", out)
    assert result.fun < before


def test_sparse_laplacian(capsys):
    pytest.importorskip("scipy")
    worst, _ = load("sparse_laplacian").main(["--quick"])
    out = capsys.readouterr().out
    assert "3600 unknowns, 7080 conductances" in out and "gradient of shape (7080,)" in out
    assert worst < 1e-5


def test_gauss_newton(capsys):
    example = load("gauss_newton")
    (params, losses, scipy_params), (curve_params, curve_losses) = example.main(["--quick"])
    out = capsys.readouterr().out
    assert "Jacobian vs finite differences at the start" in out
    # Bates and Watts' estimates, to the digits they give
    np.testing.assert_allclose(params, [212.7, 0.06412], rtol=5e-4)
    if scipy_params is not None:
        np.testing.assert_allclose(params, scipy_params, rtol=1e-6)
    assert all(b < a for a, b in zip(losses, losses[1:]))
    # on its own curve: quadratic convergence, the loss at least squaring near the optimum
    np.testing.assert_allclose(curve_params, [212.7, 0.06412], rtol=1e-9)
    near = [loss for loss in curve_losses if 1e-20 < loss < 1.0]
    assert len(near) >= 2 and all(b < a**2 for a, b in zip(near, near[1:]))


def test_gauss_newton_jacobian_rows():
    # one row per point from vmap(jacobian), against central differences per point and
    # the analytic Jacobian of Vm x / (K + x)
    example = load("gauss_newton")
    params = np.array([190.0, 0.08])
    x, y = example.CONCENTRATION, example.RATE
    J = vmap(jacobian(example.michaelis_menten), in_axes=(None, 0, 0))(params, x, y)
    for i in range(len(x)):
        fd = numeric_grad(example.michaelis_menten, (params, x[i], y[i]), 0)
        np.testing.assert_allclose(J[i], fd, rtol=1e-6)
    analytic = np.column_stack([x / (params[1] + x), -params[0] * x / (params[1] + x) ** 2])
    np.testing.assert_allclose(J, analytic, rtol=1e-12)
