"""Gradients of Dask arrays: lazy, computed on a dask.distributed cluster, equal to NumPy's."""

import logging
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

from tape import Leaf, Tape, grad, value_and_grad  # noqa: E402

from .fd import numeric_grad  # noqa: E402


def _refuse(*args, **kwargs):
    raise AssertionError("a Dask array was computed")


@pytest.fixture
def lazy():
    """Inside it, computing any Dask array fails the test."""
    with dask.config.set(scheduler=_refuse):
        yield


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit="200MB",
        dashboard_address=None, silence_logs=logging.ERROR,
    )
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


RNG = np.random.default_rng(0)
A = RNG.standard_normal((8, 6))
B = RNG.standard_normal(6)
S = RNG.standard_normal((6, 6))

# functions whose gradients Dask computes lazily, each against the NumPy gradient
LAZY = {
    "elementwise": lambda x: np.sum(np.sin(x) * np.exp(-x) + np.tanh(x) ** 2),
    "logaddexp": lambda x: np.sum(np.logaddexp(0.0, x)),
    "matmul": lambda x: np.sum((x @ B) ** 2),
    "gram": lambda x: np.sum(x.T @ x),
    "einsum": lambda x: np.einsum("ij,ij->", x, x),
    "tensordot": lambda x: np.tensordot(x, A, axes=2),
    "broadcast": lambda x: np.sum(x * B[None, :] + B),
    "mean-axis": lambda x: np.sum(np.mean(x, axis=0) ** 2),
    "var-std": lambda x: np.var(x) + np.sum(np.std(x, axis=0)),
    "max": lambda x: np.sum(np.max(x, axis=1)),
    "prod-cumsum-cumprod": lambda x: np.sum(np.prod(x, axis=1))
    + np.sum(np.cumsum(x, axis=0) ** 2) + np.sum(np.cumprod(x, axis=1)),
    "softmax": lambda x: np.sum(np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True) * A),
    "norm": lambda x: np.linalg.norm(x),
    "where-clip-maximum": lambda x: np.sum(np.where(x > 0, x, 0.1 * x))
    + np.sum(np.clip(x, -0.5, 0.5) ** 2) + np.sum(np.maximum(np.abs(x), 0.3)),
    "slices": lambda x: np.sum(x[1:3, ::2] ** 2),
    "integer-index": lambda x: np.sum(x[[0, 0, 3]] ** 2) + np.sum(x[:, [1, 1, 2]] ** 3),
    "take-diagonal-trace": lambda x: np.sum(np.take(x, [1, 2, 2], axis=1) ** 2)
    + np.sum(np.diagonal(x)) + np.trace(x[:6]),
    "outer": lambda x: np.sum(np.outer(x[0], x[1])),
    "reshape-transpose": lambda x: np.sum(np.reshape(x.T, (-1,)) * np.arange(48.0)),
    "concatenate-stack": lambda x: np.sum(np.concatenate([x, 2 * x]) ** 2)
    + np.sum(np.stack([x, x * x]) ** 2),
    "pad-flip-roll-tile": lambda x: np.sum(np.pad(x, 1) ** 2)
    + np.sum(np.roll(np.flip(x, 0), 2, axis=1) * A) + np.sum(np.tile(x, (2, 1)) ** 2),
    "repeat-diff-triu": lambda x: np.sum(np.repeat(x, 2, axis=0) ** 2)
    + np.sum(np.diff(x, axis=0) ** 2) + np.sum(np.triu(x) ** 2),
    "astype": lambda x: np.sum(x.astype(np.float32) ** 2),
}

# linear algebra and FFTs, where Dask wants one chunk along the axes they work on
LAZY_ONE_CHUNK = {
    "inv": lambda x: np.sum(np.linalg.inv(x + 6 * np.eye(6))),
    "solve": lambda x: np.sum(np.linalg.solve(x + 6 * np.eye(6), B)),
    "qr": lambda x: np.sum(np.linalg.qr(x)[1]),
    "fft": lambda x: np.sum(np.abs(np.fft.fft(x, axis=1)) ** 2),
}


@pytest.mark.parametrize("name", LAZY)
def test_gradient_is_lazy_and_equals_numpys(name, lazy):
    f = LAZY[name]
    g = grad(f, argnums=0)(da.from_array(A, chunks=(4, 3)))
    assert isinstance(g, da.Array) and g.shape == A.shape and g.dtype == A.dtype
    with dask.config.set(scheduler="sync"):
        got = g.compute()
    np.testing.assert_allclose(got, grad(f, argnums=0)(A), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", LAZY_ONE_CHUNK)
def test_linear_algebra_is_lazy_on_one_chunk(name, lazy):
    f = LAZY_ONE_CHUNK[name]
    g = grad(f, argnums=0)(da.from_array(S, chunks=6))
    assert isinstance(g, da.Array)
    with dask.config.set(scheduler="sync"):
        got = g.compute()
    np.testing.assert_allclose(got, numeric_grad(f, (S,), 0), rtol=1e-6, atol=1e-8)


def test_gradients_agree_with_central_differences(lazy):
    f = LAZY["softmax"]
    g = grad(f, argnums=0)(da.from_array(A, chunks=(4, 3)))
    with dask.config.set(scheduler="sync"):
        got = g.compute()
    np.testing.assert_allclose(got, numeric_grad(f, (A,), 0), rtol=1e-6, atol=1e-8)


def test_no_mutation_check_computes_a_dask_array(lazy):
    t = Tape()
    x = Leaf(t, da.from_array(A, chunks=4))
    assert x.seal is None  # fingerprints are of ndarrays only
    y = np.sum(x * A)  # the ndarray constant is fingerprinted, the Dask array is not
    assert isinstance(y.value, da.Array)
    value, g = value_and_grad(lambda x: np.sum(x * A))(da.from_array(A, chunks=4))
    assert isinstance(value, da.Array) and isinstance(g[0], da.Array)


def test_float32_stays_float32_and_integers_are_refused(lazy):
    x32 = da.from_array(A.astype(np.float32), chunks=4)
    g = grad(lambda x: np.sum(x**2), argnums=0)(x32)
    assert isinstance(g, da.Array) and g.dtype == np.float32
    with pytest.raises(TypeError, match="dtype int64"):
        grad(lambda x: np.sum(x))(da.arange(4))


def test_numpy_constants_follow_dasks_promotion(lazy):
    X = da.from_array(A, chunks=4)
    w = np.ones(6)

    def f(w, X):
        return np.sum(np.logaddexp(0.0, X @ w + A[:, 0]))

    gw, gX = grad(f)(w, X)
    # the NumPy input's gradient was computed from Dask arrays: a Dask array, as w + X is
    assert isinstance(gw, da.Array) and isinstance(gX, da.Array)
    assert gw.shape == w.shape and gw.dtype == w.dtype
    with dask.config.set(scheduler="sync"):
        got = dask.compute(gw, gX)
    for a, b in zip(got, grad(f)(w, A)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_an_impossible_mix_says_which_arrays_met():
    X = da.from_array(A, chunks=4)
    with pytest.raises(ValueError, match="could not be broadcast") as info:
        grad(lambda x: np.sum(x * np.ones(3)))(X)
    assert "dask.array.core.Array[8, 6], numpy.ndarray[3]" in "".join(info.value.__notes__)
    t = Tape()
    node = Leaf(t, np.ones((3, 2)))  # a node whose value is an ndarray of another shape
    with pytest.raises(ValueError, match="matmul") as info:
        X @ node
    assert "numpy.ndarray[3, 2]" in "".join(info.value.__notes__)


# -- what cannot run lazily, as the guide documents --------------------------------------


def test_sort_computes_its_argument():
    # Dask has no sort: NumPy's fallback turns the Dask array into an ndarray, with a warning
    X = da.from_array(A, chunks=4)
    with dask.config.set(scheduler=_refuse), pytest.raises(AssertionError, match="computed"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            grad(lambda x: np.sum(np.sort(x, axis=1) * B), argnums=0)(X)


def test_boolean_mask_of_unknown_size_fails_in_the_reverse_pass():
    X = da.from_array(A, chunks=4)
    with pytest.raises(ValueError, match="unknown until computed"):
        grad(lambda x: np.sum(x[x > 0] ** 2), argnums=0)(X)
    # np.where keeps the shape, and is lazy
    g = grad(lambda x: np.sum(np.where(x > 0, x, 0.0) ** 2), argnums=0)(X)
    np.testing.assert_allclose(g.compute(scheduler="sync"), 2 * np.maximum(A, 0), rtol=1e-12)


def test_take_along_axis_fails_in_the_forward_pass():
    X = da.from_array(A, chunks=4)
    with pytest.raises(NotImplementedError, match="nd fancy indexing"):
        grad(lambda x: np.sum(np.take_along_axis(x, np.argmax(x, axis=1)[:, None], 1)))(X)


def test_cholesky_refuses_a_gradient_rather_than_give_a_wrong_one():
    X = da.from_array(A.T @ A + 6 * np.eye(A.shape[1]), chunks=-1)
    with pytest.raises(NotImplementedError, match="upper factor"):
        grad(lambda x: np.sum(np.linalg.cholesky(x)), argnums=0)(X)


# -- on a cluster: a data set larger than a worker's memory -------------------------------


def _loss(w, b, X, y, l2):
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.sum(w**2)


def test_logistic_regression_on_a_cluster(client):
    rows, features, chunk = 1_500_000, 20, 75_000  # 240 MB of features; workers 200 MB each
    rng = da.random.default_rng(1)
    X = rng.standard_normal((rows, features), chunks=(chunk, features))
    y = (rng.random(rows, chunks=chunk) < 1.0 / (1.0 + np.exp(-X[:, 0]))).astype(float)
    assert X.nbytes > 200e6
    w, b = np.linspace(-0.5, 0.5, features), 0.1

    with dask.config.set(scheduler=_refuse):  # recording and the reverse pass compute nothing
        gw, gb = grad(_loss, argnums=(0, 1))(w, b, X, y, 1e-3)
    gw, gb = client.persist([gw, gb])  # the graph runs on the workers
    gw, gb = dask.compute(gw, gb)

    # NumPy, block by block on the same data: the mean over rows is the row-weighted mean
    expected_w, expected_b = 1e-3 * w, 0.0
    for Xb, yb in zip(X.blocks, y.blocks):
        Xb, yb = dask.compute(Xb, yb)
        bw, bb = grad(_loss, argnums=(0, 1))(w, b, Xb, yb, 0.0)
        expected_w, expected_b = expected_w + bw * len(yb) / rows, expected_b + bb * len(yb) / rows
    np.testing.assert_allclose(gw, expected_w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gb, expected_b, rtol=1e-9)

    # and on a sample that fits in memory, against NumPy directly
    Xs, ys = dask.compute(X[:5000], y[:5000])
    sample = dask.compute(*grad(_loss, argnums=(0, 1))(w, b, X[:5000], y[:5000], 1e-3))
    for a, e in zip(sample, grad(_loss, argnums=(0, 1))(w, b, Xs, ys, 1e-3)):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-15)


def test_second_order_is_lazy_too(lazy):
    def f(x):
        return np.sum(np.sin(x) ** 2)

    def g(x):
        return np.sum(grad(f, argnums=0)(x) ** 2)  # |d f / d x|^2

    got = grad(g, argnums=0)(da.from_array(A, chunks=4))
    assert isinstance(got, da.Array)
    with dask.config.set(scheduler="sync"):
        got = got.compute()
    np.testing.assert_allclose(got, grad(g, argnums=0)(A), rtol=1e-10)
    np.testing.assert_allclose(got, numeric_grad(g, (A,), 0), rtol=1e-6, atol=1e-8)
