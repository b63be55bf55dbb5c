"""vjp, jvp, jacobian, hessian, hvp and has_aux, each against an independent answer:
an analytic formula or central differences."""

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import expit

from tape import (
    Node,
    check_grad,
    grad,
    hessian,
    hvp,
    jacobian,
    jvp,
    tree_flatten,
    tree_map,
    tree_unflatten,
    value_and_grad,
    vjp,
    vmap,
)
from tape.core.trees import tree_leaves_like
from tape.transforms import derivatives
from tests.fd import numeric_grad
from tests.strategies import arrays


def numeric_jacobian(f, x, eps=1e-6):
    """d f / d x by central differences, shaped out.shape + x.shape."""
    x = np.asarray(x, dtype=float)
    columns = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        columns.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    out_shape = np.shape(columns[0])
    return np.moveaxis(np.array(columns), 0, -1).reshape(out_shape + x.shape)


def numeric_hessian(f, x):
    return numeric_jacobian(lambda v: grad(f)(v)[0], x)


# -- vjp ----------------------------------------------------------------------------------


def test_a_pullback_is_reused_without_running_f_again():
    calls = []

    def f(x, W):
        calls.append(1)
        return np.tanh(W @ x)

    rng = np.random.default_rng(0)
    x, W = rng.standard_normal(3), rng.standard_normal((4, 3))
    y, pullback = vjp(f, x, W)
    np.testing.assert_allclose(y, np.tanh(W @ x))
    for k in range(4):
        u = np.eye(4)[k]
        gx, gW = pullback(u)
        d = (1 - y**2) * u
        np.testing.assert_allclose(gx, W.T @ d)
        np.testing.assert_allclose(gW, np.outer(d, x))
    assert len(calls) == 1
    # the cotangent the user passes is never written into
    u = np.ones(4)
    pullback(u)
    np.testing.assert_array_equal(u, np.ones(4))


def test_vjp_of_structured_outputs_and_errors():
    y, pullback = vjp(lambda x: {"a": x * 2, "b": (np.sum(x), x[0])}, np.array([1.0, 2.0]))
    (g,) = pullback({"a": np.array([1.0, 1.0]), "b": (1.0, 10.0)})
    np.testing.assert_allclose(g, [13.0, 3.0])
    with pytest.raises(ValueError, match="shape"):
        pullback({"a": np.ones(3), "b": (1.0, 1.0)})


# -- jacobian -------------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_jacobian_in_both_modes_on_non_square_functions(data):
    n_in, n_out = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    x = data.draw(arrays((n_in, 2), -1.0, 1.0))
    A = data.draw(arrays((n_out, n_in), -1.0, 1.0))

    def f(x):
        h = np.tanh(A @ x)  # (n_out, 2)
        return h * np.sum(x**2) + np.sin(h[:, ::-1])

    fwd = jacobian(f, mode="fwd")(x)
    rev = jacobian(f, mode="rev")(x)
    assert fwd.shape == rev.shape == (n_out, 2, n_in, 2)
    np.testing.assert_allclose(fwd, rev, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fwd, numeric_jacobian(f, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jacobian(f)(x), fwd, rtol=1e-10, atol=1e-12)


def test_jacobian_of_several_arguments_and_outputs():
    def f(a, b, n):
        return a * b[0], np.sum(a) * b**n

    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0])
    for mode in ("fwd", "rev"):
        (Ja, Jb), (Ka, Kb) = jacobian(f, argnums=(0, 1), mode=mode)(a, b, 2)
        np.testing.assert_allclose(Ja, np.diag([0.5] * 3))
        np.testing.assert_allclose(Jb, np.stack([a, 0 * a], axis=1))
        np.testing.assert_allclose(Ka, np.outer(b**2, np.ones(3)))
        np.testing.assert_allclose(Kb, np.diag(np.sum(a) * 2 * b))


def test_scalar_inputs_and_outputs():
    assert jacobian(np.sin)(0.0) == 1.0
    np.testing.assert_allclose(jacobian(lambda x: np.sum(x**2))(np.array([1.0, 2.0])), [2.0, 4.0])
    np.testing.assert_allclose(jacobian(lambda s: s * np.arange(3.0))(2.0), np.arange(3.0))


def test_auto_mode_picks_forward_for_few_inputs_and_reverse_for_few_outputs(monkeypatch):
    used = []
    for name in ("_jacobian_fwd", "_jacobian_rev"):
        original = getattr(derivatives, name)
        monkeypatch.setattr(
            derivatives, name, lambda *a, _o=original, _n=name: used.append(_n) or _o(*a)
        )
    jacobian(lambda x: np.outer(x, x))(np.ones(2))  # 2 inputs, 4 outputs
    jacobian(lambda x: np.sum(x))(np.ones(3))  # 3 inputs, 1 output
    assert used == ["_jacobian_fwd", "_jacobian_rev"]


def test_jacobian_rejects_bad_modes_and_non_float_leaves():
    with pytest.raises(ValueError, match="mode"):
        jacobian(np.sin, mode="sideways")
    with pytest.raises(TypeError, match=r"argument 0 \('p'\).*dtype int64"):
        jacobian(lambda p: p[0] * p[1])((1.0, np.arange(2)))
    with pytest.raises(TypeError, match=r"argument 1 \('q'\).*str"):
        hessian(lambda p, q: p**2, argnums=(0, 1))(1.0, {"a": "x"})


def _complex_jacobian_by_differences(f, x, eps=1e-6):
    """d f / d x for real x and complex f, one central difference per input element."""
    columns = []
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        columns.append((f(x + step) - f(x - step)) / (2 * eps))
    return np.moveaxis(np.array(columns), 0, -1).reshape(np.shape(f(x)) + x.shape)


REAL_TO_COMPLEX = {
    "exp_ix": (lambda x: np.exp(1j * x) * x, (3,)),
    "matrix": (lambda x: (x + 1j * x.T) @ x, (3, 3)),
    "rfft": (np.fft.rfft, (4,)),
}


@pytest.mark.parametrize("name", REAL_TO_COMPLEX)
@pytest.mark.parametrize("mode", ["fwd", "rev", "auto"])
def test_jacobian_of_a_real_to_complex_function_keeps_the_imaginary_part(name, mode):
    f, shape = REAL_TO_COMPLEX[name]
    x = np.random.default_rng(6).standard_normal(shape)
    got = jacobian(f, mode=mode)(x)
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, _complex_jacobian_by_differences(f, x), atol=1e-8)


def test_tangents_and_cotangents_pair_with_dict_entries_by_key():
    p = {"a": np.array([1.0, 2.0]), "b": np.array([0.5, -1.0])}
    # the tangent lists its keys in the other order: paired by key, not by position
    _, ydot = jvp(
        lambda p: p["a"] * 2 + np.sin(p["b"]) * 10, (p,), ({"b": np.ones(2), "a": np.zeros(2)},)
    )
    np.testing.assert_allclose(ydot, 10 * np.cos(p["b"]))
    _, pullback = vjp(lambda x: {"a": x, "b": 3 * x}, np.array([1.0, 2.0]))
    np.testing.assert_allclose(pullback({"b": np.ones(2), "a": np.zeros(2)})[0], [3.0, 3.0])
    v = {"b": np.array([1.0, 0.0]), "a": np.array([0.0, 0.0])}
    hv = hvp(lambda p: np.sum(p["a"] ** 2 * p["b"] ** 3))(p, v)
    np.testing.assert_allclose(hv["a"], 2 * p["a"] * 3 * p["b"] ** 2 * v["b"])
    np.testing.assert_allclose(hv["b"], 6 * p["a"] ** 2 * p["b"] * v["b"])
    with pytest.raises(ValueError, match="primal's structure"):
        jvp(lambda p: p["a"], (p,), ({"c": np.ones(2), "a": np.zeros(2)},))
    with pytest.raises(ValueError, match="another structure"):
        pullback({"a": np.ones(2), "c": np.ones(2)})


def test_an_argument_named_twice_in_argnums_is_refused():
    with pytest.raises(ValueError, match="more than once"):
        grad(lambda a, b: np.sum(a * b * a), argnums=(0, 0))(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="more than once"):
        grad(lambda a, b: np.sum(a * b), argnums=(1, -1))(np.ones(2), np.ones(2))


# -- no result is the caller's own array --------------------------------------------------


def test_pullbacks_and_tangents_are_never_the_callers_arrays():
    x, cotangent = np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 0.5])
    for f in (lambda x: x, lambda x: x + 0.0, lambda x: x[::1]):
        _, pullback = vjp(f, x)
        (g,) = pullback(cotangent)
        np.testing.assert_array_equal(g, cotangent)  # the identity's J^T ybar = ybar
        g[0] = 50.0
        assert cotangent[0] == 1.0
        _, t = jvp(f, (x,), (cotangent,))
        np.testing.assert_array_equal(t, cotangent)
        t[1] = 50.0
        assert cotangent[1] == -1.0


def test_outputs_are_writeable_as_numpys_are():
    x = np.array([1.0, 2.0])
    f = lambda x: np.exp(x) * 2.0  # noqa: E731
    for y in (
        vjp(f, x)[0],
        jvp(f, (x,), (np.ones(2),))[0],
        grad(lambda x: (np.sum(x), f(x)), has_aux=True)(x)[1],
    ):
        assert y.flags.writeable == f(x).flags.writeable  # NumPy's own result: writeable
        np.testing.assert_allclose(y, f(x))
        y[0] = 0.0
    value, _ = value_and_grad(lambda x: np.sum(x, keepdims=True))(x)
    value[0] = 7.0  # one element, taken as the scalar: an array of the caller's own


# -- Hessians of known functions ------------------------------------------------------------


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n - 1):
        H[i, i] += 2 - 400 * (x[i + 1] - x[i] ** 2) + 800 * x[i] ** 2
        H[i + 1, i + 1] += 200
        H[i, i + 1] = H[i + 1, i] = -400 * x[i]
    return H


def test_hessian_of_rosenbrock():
    x = np.random.default_rng(0).standard_normal(5)
    np.testing.assert_allclose(hessian(rosenbrock)(x), rosenbrock_hessian(x), rtol=1e-12)
    np.testing.assert_allclose(jacobian(lambda v: grad(rosenbrock)(v)[0], mode="rev")(x),
                               rosenbrock_hessian(x), rtol=1e-12)  # fmt: skip
    check_grad(rosenbrock, x, order=2)


def test_hessian_of_a_quadratic_form():
    rng = np.random.default_rng(1)
    A, b = rng.standard_normal((4, 4)), rng.standard_normal(4)
    f = lambda x: 0.5 * x @ A @ x + b @ x + 3.0  # noqa: E731
    np.testing.assert_allclose(hessian(f)(rng.standard_normal(4)), (A + A.T) / 2, rtol=1e-12)
    # blocks for two arguments: f(x, y) = x^T B y
    B = rng.standard_normal((3, 2))
    (Hxx, Hxy), (Hyx, Hyy) = hessian(lambda x, y: x @ B @ y, argnums=(0, 1))(np.ones(3), np.ones(2))
    np.testing.assert_allclose(Hxy, B)
    np.testing.assert_allclose(Hyx, B.T)
    assert not Hxx.any() and not Hyy.any() and Hxx.shape == (3, 3) and Hyy.shape == (2, 2)


def test_hessian_of_the_logistic_loss():
    rng = np.random.default_rng(2)
    X, w = rng.standard_normal((20, 3)), rng.standard_normal(3)
    y = (rng.random(20) < 0.5).astype(float)

    def loss(w):
        z = X @ w
        return np.mean(np.logaddexp(0.0, z) - y * z) + 0.05 * np.sum(w**2)

    p = expit(X @ w)
    expected = X.T @ (X * (p * (1 - p))[:, None]) / 20 + 0.1 * np.eye(3)
    np.testing.assert_allclose(hessian(loss)(w), expected, rtol=1e-10)
    check_grad(loss, w, order=2)


def gp_log_marginal_likelihood(theta, X, y, use_cholesky):
    """log p(y | X, theta) of a GP with a squared-exponential kernel, theta the logs of the
    length scale, signal and noise standard deviations."""
    log_ell, log_sf, log_sn = theta[0], theta[1], theta[2]
    sq = (X[:, None] - X[None, :]) ** 2
    K = np.exp(2 * log_sf) * np.exp(-0.5 * sq * np.exp(-2 * log_ell)) + np.exp(2 * log_sn) * np.eye(
        len(X)
    )
    n = len(X)
    if use_cholesky:
        L = np.linalg.cholesky(K)
        a = np.linalg.solve(L, y)
        return -0.5 * a @ a - np.sum(np.log(np.diagonal(L))) - 0.5 * n * np.log(2 * np.pi)
    sign, logdet = np.linalg.slogdet(K)
    return -0.5 * y @ np.linalg.solve(K, y) - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)


@pytest.mark.parametrize("use_cholesky", [True, False], ids=["cholesky", "solve-slogdet"])
def test_hessian_of_a_gaussian_process_log_marginal_likelihood(use_cholesky):
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(-2, 2, 8))
    y = np.sin(2 * X) + 0.1 * rng.standard_normal(8)
    theta = np.array([-0.3, 0.2, -1.5])
    f = lambda t: gp_log_marginal_likelihood(t, X, y, use_cholesky)  # noqa: E731
    H = hessian(f)(theta)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(H, numeric_hessian(f, theta), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jacobian(lambda t: grad(f)(t)[0], mode="rev")(theta), H, rtol=1e-10)
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(hvp(f)(theta, v), H @ v, rtol=1e-10)


# -- hvp ----------------------------------------------------------------------------------------


def test_hvp_matches_the_hessian_times_v():
    rng = np.random.default_rng(4)
    x, v = rng.standard_normal(5), rng.standard_normal(5)
    np.testing.assert_allclose(hvp(rosenbrock)(x, v), rosenbrock_hessian(x) @ v, rtol=1e-12)
    # several arguments: v is a tuple, one part per entry of argnums
    f = lambda a, b: np.sum(a**2 * b)  # noqa: E731
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    ha, hb = hvp(f, argnums=(0, 1))(a, b, (np.ones(2), np.zeros(2)))
    np.testing.assert_allclose(ha, 2 * b)
    np.testing.assert_allclose(hb, 2 * a)


def test_hvp_never_forms_the_hessian():
    # the Hessian of this function on 10^5 inputs would take 80 GB
    n = 100_000
    x = np.linspace(-1, 1, n)
    v = np.cos(np.arange(n))
    f = lambda x: np.sum(np.sin(x) * x) + np.sum(x[1:] * x[:-1])  # noqa: E731
    got = hvp(f)(x, v)
    expected = (2 * np.cos(x) - x * np.sin(x)) * v
    expected[:-1] += v[1:]
    expected[1:] += v[:-1]
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_has_aux_carries_values_along():
    def loss(w):
        pred = np.tanh(w * 2.0)
        return np.sum(pred**2), {"pred": pred, "n": 3}

    w = np.array([0.1, 0.2])
    (g,), aux = grad(loss, has_aux=True)(w)
    (value, aux2), (g2,) = value_and_grad(loss, argnums=(0,), has_aux=True)(w)
    np.testing.assert_allclose(g, numeric_grad(lambda w: loss(w)[0], (w,), 0), rtol=1e-6)
    np.testing.assert_array_equal(g2, g)
    np.testing.assert_array_equal(aux2["pred"], aux["pred"])
    assert not isinstance(aux["pred"], Node) and aux["n"] == 3
    np.testing.assert_allclose(aux["pred"], np.tanh(w * 2.0))
    assert value == pytest.approx(np.sum(np.tanh(w * 2) ** 2))
    with pytest.raises(TypeError, match="pair"):
        grad(lambda w: np.sum(w), has_aux=True)(w)


def test_has_aux_under_nested_grad():
    def inner(x):
        g, aux = grad(lambda y: (y * x * x, y * x), has_aux=True)(1.0)
        return g[0] + aux  # x^2 + x

    assert grad(inner)(3.0) == (7.0,)


def test_float32_stays_float32_in_jacobians_and_hessians():
    x = np.array([0.3, -0.4, 0.8], dtype=np.float32)
    f = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    assert hessian(f)(x).dtype == np.float32
    assert hvp(f)(x, np.ones(3, dtype=np.float32)).dtype == np.float32
    for mode in ("fwd", "rev"):
        J = jacobian(np.sin, mode=mode)(x)
        assert J.dtype == np.float32
        np.testing.assert_allclose(J, np.diag(np.cos(x)), rtol=1e-6)


# -- containers: tuples, lists, dicts, namedtuples, nested, with None leaves ---------------

Pair = namedtuple("Pair", ["w", "b"])


def numeric_tree_jacobian(f, x, eps=1e-6):
    """d f / d x by central differences for trees: the output's tree, with the input's
    tree in place of each output leaf, leaves shaped out_leaf.shape + in_leaf.shape
    (None for a None leaf of either)."""
    xs, xdef = tree_flatten(x)
    ys, ydef = tree_flatten(f(x))
    blocks = [[None] * len(xs) for _ in ys]
    for j, leaf in enumerate(xs):
        if leaf is None:
            continue

        def out_leaves(v, j=j):
            moved = list(xs)
            moved[j] = v
            return tree_flatten(f(tree_unflatten(xdef, moved)))[0]

        for o, y in enumerate(ys):
            if y is not None:
                blocks[o][j] = numeric_jacobian(lambda v, o=o: out_leaves(v)[o], leaf, eps)
    return tree_unflatten(
        ydef, [None if y is None else tree_unflatten(xdef, b) for y, b in zip(ys, blocks)]
    )


def assert_same_tree(got, expected, rtol=1e-7, atol=1e-9, path="tree"):
    """The same containers (types, keys in order, None where None) and close leaves of
    the same shapes."""
    if expected is None or got is None:
        assert got is None and expected is None, f"{path}: {got!r} against {expected!r}"
    elif isinstance(expected, dict):
        assert type(got) is type(expected) and list(got) == list(expected), path
        for k in expected:
            assert_same_tree(got[k], expected[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), path
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_same_tree(g, e, rtol, atol, f"{path}[{k}]")
    else:
        assert np.shape(got) == np.shape(expected), (path, np.shape(got), np.shape(expected))
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=path)


def tree_dtypes(tree):
    return [None if x is None else np.result_type(x) for x in tree_flatten(tree)[0]]


def nested_params(rng, dtype=np.float64):
    return {
        "a": rng.standard_normal(2).astype(dtype),
        "b": (rng.standard_normal(3).astype(dtype), None),
        "c": Pair(rng.standard_normal((2, 2)).astype(dtype), [0.7, None]),
    }


def nested_f(p):
    s = np.sum(p["a"] ** 2) * np.sum(np.sin(p["b"][0]))
    return {
        "o": p["a"] * p["c"].b[0] + p["c"].w @ p["a"],
        "s": (s, None),
        "t": [np.tanh(p["c"].w) * s],
    }


def nested_loss(p):
    s = np.sum(p["a"] ** 2) * np.sum(np.sin(p["b"][0]))
    return s + np.sum(np.tanh(p["c"].w) * p["c"].b[0] ** 3)


@pytest.mark.parametrize("mode", ["fwd", "rev", "auto"])
def test_jacobian_of_nested_containers_has_the_output_tree_of_input_trees(mode):
    p = nested_params(np.random.default_rng(10))
    J = jacobian(nested_f, mode=mode)(p)
    assert_same_tree(J, numeric_tree_jacobian(nested_f, p), rtol=1e-6, atol=1e-8)
    assert J["s"][1] is None and J["o"]["b"][1] is None and J["t"][0]["c"].b[1] is None
    assert isinstance(J["o"]["c"], Pair) and isinstance(J["o"]["c"].b, list)
    assert J["o"]["c"].w.shape == (2, 2, 2) and J["t"][0]["b"][0].shape == (2, 2, 3)
    assert np.shape(J["s"][0]["c"].b[0]) == ()
    # a tuple argnums: a tuple of input trees at each output leaf
    Jt = jacobian(lambda q, p, r: nested_f(p), argnums=(1, 2), mode=mode)(None, p, [1.0])
    assert_same_tree(Jt["o"][0], J["o"], rtol=1e-12, atol=0)
    assert Jt["s"][0][1] == [0.0] and np.shape(Jt["t"][0][1][0]) == (2, 2)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_jacobian_of_a_list_input_and_a_namedtuple_output_against_analytic(mode):
    def f(xs):
        a, b = xs
        return Pair(w=a * b, b=np.sum(a) * b**2)

    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    J = jacobian(f, mode=mode)([a, b])
    assert isinstance(J, Pair) and isinstance(J.w, list)
    np.testing.assert_allclose(J.w[0], np.diag(b))
    np.testing.assert_allclose(J.w[1], np.diag(a))
    np.testing.assert_allclose(J.b[0], np.outer(b**2, np.ones(2)))
    np.testing.assert_allclose(J.b[1], np.diag(2 * np.sum(a) * b))


def test_hessian_of_a_dict_is_a_dict_of_dicts():
    def f(p):
        return p["a"] ** 2 * np.sum(p["b"] ** 3) + np.sum(np.sin(p["b"]))

    a, b = np.array(1.5), np.array([0.3, -0.7, 1.1])
    H = hessian(f)({"a": a, "b": b, "none": None})
    assert list(H) == ["a", "b", "none"] and H["none"] is None
    assert list(H["a"]) == ["a", "b", "none"] and H["a"]["none"] is None
    assert H["a"]["b"].shape == (3,) and H["b"]["a"].shape == (3,) and H["b"]["b"].shape == (3, 3)
    np.testing.assert_allclose(H["a"]["a"], 2 * np.sum(b**3))
    np.testing.assert_allclose(H["a"]["b"], 6 * a * b**2)
    np.testing.assert_allclose(H["b"]["a"], 6 * a * b**2)
    np.testing.assert_allclose(H["b"]["b"], np.diag(6 * a**2 * b - np.sin(b)))


def test_hessian_of_nested_containers_against_differences_of_the_gradient():
    p = nested_params(np.random.default_rng(11))
    H = hessian(nested_loss)(p)
    expected = numeric_tree_jacobian(lambda q: grad(nested_loss)(q)[0], p)
    assert_same_tree(H, expected, rtol=1e-6, atol=1e-8)
    assert H["b"][1] is None and H["a"]["b"][1] is None and isinstance(H["c"], Pair)
    assert H["c"].w["c"].w.shape == (2, 2, 2, 2) and H["c"].w["a"].shape == (2, 2, 2)
    # symmetric: the block [k1][k2] is the transpose of [k2][k1]
    np.testing.assert_allclose(H["a"]["c"].w, np.moveaxis(H["c"].w["a"], -1, 0), rtol=1e-12)


def test_hessian_with_a_tuple_argnums_of_containers():
    def f(p, q):
        return np.sum(p["x"] ** 2 * q[0]) + q[1] ** 3 * np.sum(p["x"])

    p, q = {"x": np.array([1.0, 2.0]), "n": None}, (np.array([0.5, -1.0]), 2.0)
    H = hessian(f, argnums=(0, 1))(p, q)
    # JAX's structure: H[i] has argument i's structure, a tuple over argnums at each leaf
    assert isinstance(H, tuple) and list(H[0]) == ["x", "n"] and H[0]["n"] is None
    (Hxp, Hxq), (Hq0, Hq1) = H[0]["x"], H[1]
    assert Hxp["n"] is None
    np.testing.assert_allclose(Hxp["x"], np.diag(2 * q[0]))
    np.testing.assert_allclose(Hxq[0], np.diag(2 * p["x"]))
    np.testing.assert_allclose(Hxq[1], 3 * q[1] ** 2 * np.ones(2))
    np.testing.assert_allclose(Hq0[0]["x"], np.diag(2 * p["x"]))
    np.testing.assert_allclose(Hq1[1][1], 6 * q[1] * np.sum(p["x"]))
    # each column j against central differences of the gradients in argument j
    grads = grad(f, argnums=(0, 1))
    defs = [tree_flatten(p)[1], tree_flatten(q)[1]]
    for j, arg in enumerate((p, q)):
        column = numeric_tree_jacobian(lambda a, j=j: grads(*((a, q) if j == 0 else (p, a))), arg)
        for i in (0, 1):
            got = [None if h is None else h[j] for h in tree_leaves_like(H[i], defs[i])]
            assert_same_tree(tree_unflatten(defs[i], got), column[i], rtol=1e-6, atol=1e-8)


def test_hvp_of_containers_is_the_hessian_contracted_with_v():
    rng = np.random.default_rng(12)
    p = nested_params(rng)
    v = tree_map(lambda x: rng.standard_normal(np.shape(x)), p)
    H = hessian(nested_loss)(p)
    xs, xdef = tree_flatten(p)
    vs = tree_leaves_like(v, xdef)
    rows = tree_leaves_like(H, xdef)
    expected = []
    for x, row in zip(xs, rows):
        if x is None:
            expected.append(None)
            continue
        blocks = tree_leaves_like(row, xdef)
        expected.append(
            sum(np.tensordot(b, w, axes=np.ndim(w)) for b, w in zip(blocks, vs) if w is not None)
        )
    got = hvp(nested_loss)(p, v)
    assert_same_tree(got, tree_unflatten(xdef, expected), rtol=1e-10, atol=1e-12)
    assert got["b"][1] is None and got["c"].b[1] is None


def test_jvp_and_vjp_pass_none_leaves_through():
    p = nested_params(np.random.default_rng(13))
    v = tree_map(np.ones_like, p)
    y, ydot = jvp(nested_f, (p,), (v,))
    assert y["s"][1] is None and ydot["s"][1] is None
    # J v, block by block
    J = jacobian(nested_f)(p)
    xdef = tree_flatten(p)[1]
    vs = tree_leaves_like(v, xdef)
    ys, ydef = tree_flatten(y)
    rows = tree_leaves_like(J, ydef)
    expected = [
        None
        if row is None
        else sum(
            np.tensordot(b, w, axes=np.ndim(w))
            for b, w in zip(tree_leaves_like(row, xdef), vs)
            if w is not None
        )
        for row in rows
    ]
    assert_same_tree(ydot, tree_unflatten(ydef, expected), rtol=1e-12, atol=1e-12)
    _, pullback = vjp(nested_f, p)
    u = tree_map(np.ones_like, y)
    (g,) = pullback(u)
    assert g["b"][1] is None and g["c"].b[1] is None and isinstance(g["c"], Pair)

    def total(q):
        out = nested_f(q)
        return np.sum(out["o"]) + out["s"][0] + np.sum(out["t"][0])

    assert_same_tree(g, grad(total)(p)[0], rtol=1e-12, atol=1e-12)
    # a None cotangent for an output is zero there
    (g_o,) = pullback({"o": np.ones(2), "s": (None, None), "t": [None]})
    assert_same_tree(g_o, grad(lambda q: np.sum(nested_f(q)["o"]))(p)[0], rtol=1e-12, atol=1e-12)


def test_mismatched_tangents_cotangents_and_v_are_value_errors():
    p = {"a": np.ones(2), "b": None}
    f = lambda p: np.sum(p["a"] ** 2)  # noqa: E731
    with pytest.raises(ValueError, match="primal has None"):
        jvp(f, (p,), ({"a": np.ones(2), "b": np.ones(2)},))
    with pytest.raises(ValueError, match="primal's structure"):
        jvp(f, (p,), ({"a": np.ones(2)},))
    with pytest.raises(ValueError, match="primal's structure"):
        hvp(f)(p, {"a": np.ones(2), "c": None})
    with pytest.raises(ValueError, match="primal has None"):
        hvp(f)(p, {"a": np.ones(2), "b": 1.0})
    with pytest.raises(ValueError, match="tuple of 2 parts"):
        hvp(lambda a, b: np.sum(a * b), argnums=(0, 1))(np.ones(2), np.ones(2), np.ones(2))
    _, pullback = vjp(lambda p: (p["a"] * 2, None), p)
    with pytest.raises(ValueError, match="output has None"):
        pullback((np.ones(2), np.ones(2)))
    with pytest.raises(ValueError, match="another structure"):
        pullback([np.ones(2)])
    (g,) = pullback((np.ones(2), None))
    assert g["b"] is None
    np.testing.assert_allclose(g["a"], [2.0, 2.0])


def test_vmap_passes_none_leaves_through():
    X = np.arange(6.0).reshape(3, 2)
    out = vmap(lambda q: {"y": q[0] * 2, "n": None, "m": q[1]})((X, None))
    assert out["n"] is None and out["m"] is None
    np.testing.assert_allclose(out["y"], 2 * X)
    out = vmap(lambda q: (np.sum(q["x"]), q["skip"]), in_axes=({"x": 1, "skip": 0},))(
        {"x": X.T, "skip": None}
    )
    np.testing.assert_allclose(out[0], X.sum(1))
    assert out[1] is None
    per_example = vmap(grad(lambda q: np.sum(np.sin(q[0]))))((X, None))
    assert per_example[0][1] is None
    np.testing.assert_allclose(per_example[0][0], np.cos(X))


def test_float32_stays_float32_in_container_jacobians_hessians_and_hvps():
    p = nested_params(np.random.default_rng(14), np.float32)
    p["c"] = Pair(p["c"].w, [np.float32(0.7), None])
    for mode in ("fwd", "rev"):
        J = jacobian(nested_f, mode=mode)(p)
        assert {d for d in tree_dtypes(J) if d is not None} == {np.dtype(np.float32)}
    H = hessian(nested_loss)(p)
    assert {d for d in tree_dtypes(H) if d is not None} == {np.dtype(np.float32)}
    hv = hvp(nested_loss)(p, tree_map(np.ones_like, p))
    assert tree_dtypes(hv) == tree_dtypes(p)
    (g,) = grad(nested_loss)(p)
    assert tree_dtypes(g) == tree_dtypes(p)
    assert [np.shape(x) for x in tree_flatten(g)[0]] == [np.shape(x) for x in tree_flatten(p)[0]]


def _trees(depth=2):
    leaf = st.one_of(
        st.none(), hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3).flatmap(
            lambda shape: arrays(shape, -1.0, 1.0))
    )  # fmt: skip
    if depth == 0:
        return leaf
    child = _trees(depth - 1)
    return st.one_of(
        leaf,
        st.lists(child, min_size=1, max_size=2),
        st.lists(child, min_size=1, max_size=2).map(tuple),
        st.dictionaries(st.sampled_from("abc"), child, min_size=1, max_size=2),
        st.tuples(child, child).map(lambda t: Pair(*t)),
    )


@settings(max_examples=25, deadline=None)
@given(tree=_trees(), mode=st.sampled_from(["fwd", "rev", "auto"]))
def test_jacobian_of_random_trees_matches_finite_differences(tree, mode):
    assume(any(x is not None for x in tree_flatten(tree)[0]))

    def f(p):
        leaves = [x for x in tree_flatten(p)[0] if x is not None]
        s = sum(np.sum(np.sin(x) * (k + 1)) for k, x in enumerate(leaves))
        return {"each": tree_map(lambda x: np.cos(x) * s, p), "total": s**2}

    J = jacobian(f, mode=mode)(tree)
    assert_same_tree(J, numeric_tree_jacobian(f, tree), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x[1:] * x[:-1],  # getitem's in-place update rule
        lambda x: np.concatenate([x, np.sin(x)]),
        lambda x: np.repeat(x, 2) ** 2,
        lambda x: np.diagonal(np.outer(x, x)),
        lambda x: np.tanh(np.outer(x, x) @ x),
    ],
)
def test_reverse_jacobians_agree_with_forward_ones_batched_or_not(f):
    # the reverse Jacobian runs the pullback under vmap, or where a rule cannot run
    # batched, as the directions of a forward pass: the same answer either way
    x = np.array([0.3, -1.2, 0.8])
    J = jacobian(f, mode="rev")(x)
    np.testing.assert_allclose(J, jacobian(f, mode="fwd")(x), rtol=1e-12)
    np.testing.assert_allclose(J, numeric_jacobian(f, x), rtol=1e-6, atol=1e-8)


# -- jacobian's reverse mode: the pullback under vmap, forward mode where it cannot run ----


def test_jacobian_rev_falls_back_only_where_a_rule_cannot_run_batched():
    from sensitivities import primitive, sensitivity
    from sensitivities.batching import batching

    scaled_back = primitive(lambda g: g * 2.0)
    sensitivity(scaled_back, 0)(lambda y, ybar, g: ybar * 2.0)

    @primitive
    def doubled(x):
        return 2.0 * x

    @sensitivity(doubled, 0)
    def _(y, ybar, x):
        return scaled_back(ybar)

    @batching(scaled_back)
    def _(args, batched):
        raise ValueError("a mistake in a batching rule")

    # a batching rule's own error is the program's: raised, not hidden by forward mode
    with pytest.raises(ValueError, match="a mistake in a batching rule"):
        jacobian(doubled, mode="rev")(np.ones(3))

    @primitive
    def signed(x):
        return 2.0 * x

    @sensitivity(signed, 0)
    def _(y, ybar, x):
        # control flow on the cotangent: no single answer for a batch of them
        return 2.0 * ybar if ybar[0] > 0.5 else ybar + ybar

    # a rule that cannot run batched (BatchingError) goes to forward mode, which is exact
    np.testing.assert_allclose(jacobian(signed, mode="rev")(np.ones(3)), 2.0 * np.eye(3))
