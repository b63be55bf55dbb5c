"""Gradients of CuPy arrays stay on the device and equal NumPy's.

The tests run on two array libraries: CuPy on a GPU (skipped where CuPy or a GPU is
missing), and everywhere a stand-in that behaves as CuPy does towards NumPy: it speaks
NumPy's protocols, refuses to be converted to an ndarray, and refuses ndarrays in its
calls. Whatever passes on the stand-in never took a device array through ``np.asarray``.
"""

import time
import types

import numpy as np
import pytest

from tape import Leaf, Tape, grad, value_and_grad

from .fd import numeric_grad


def _cupy():
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # not installed, or no driver or device
        return None


cp = _cupy()


# -- the stand-in ---------------------------------------------------------------------


class Device:
    """An array "on a device": NumPy's protocols, no way back to an ndarray."""

    __slots__ = ("a",)

    def __init__(self, a):
        self.a = np.asarray(a)

    @staticmethod
    def _in(x):
        if isinstance(x, Device):
            return x.a
        if type(x) is np.ndarray and x.ndim:
            raise TypeError(f"Unsupported type {type(x)}")  # as CuPy: no implicit copies
        if isinstance(x, (list, tuple)):
            return type(x)(Device._in(v) for v in x)
        return x

    @staticmethod
    def _out(x):
        if isinstance(x, (np.ndarray, np.generic)):  # as CuPy: 0-d arrays, not scalars
            return Device(x)
        if isinstance(x, tuple):
            return type(x)(*map(Device._out, x)) if hasattr(x, "_fields") else tuple(
                map(Device._out, x)
            )
        if isinstance(x, list):
            return [Device._out(v) for v in x]
        return x

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(hasattr(type(x), "__array_ufunc__") and not isinstance(x, (Device, np.ndarray,
               np.generic)) for x in inputs):  # fmt: skip
            return NotImplemented  # a node's turn, as CuPy leaves it
        inputs = [self._in(x) for x in inputs]
        kwargs = {k: self._in(v) for k, v in kwargs.items()}
        return self._out(getattr(ufunc, method)(*inputs, **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.asarray, np.array):  # an explicit copy to the device: allowed
            args = [x.a if isinstance(x, Device) else x for x in args]
            return Device(func(*args, **{k: v for k, v in kwargs.items() if k != "like"}))
        if any(not issubclass(t, (Device, np.ndarray)) for t in types):
            return NotImplemented  # a node's turn
        args = [self._in(x) for x in args]
        kwargs = {k: self._in(v) for k, v in kwargs.items() if k != "like"}
        return self._out(func(*args, **kwargs))

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)
    T = property(lambda self: Device(self.a.T))

    def __len__(self):
        return len(self.a)

    def __bool__(self):
        return bool(self.a)

    def __float__(self):
        return float(self.a)

    def __getitem__(self, index):
        return self._out(self.a[self._index(index)])

    def __setitem__(self, index, value):
        self.a[self._index(index)] = self._in(value) if isinstance(value, Device) else value

    @staticmethod
    def _index(index):
        if isinstance(index, tuple):
            return tuple(v.a if isinstance(v, Device) else v for v in index)
        return index.a if isinstance(index, Device) else index

    def astype(self, dtype, **kwargs):
        return Device(self.a.astype(dtype, **kwargs))

    def copy(self):
        return Device(self.a.copy())

    def reshape(self, *shape, **kwargs):
        return Device(self.a.reshape(*shape, **kwargs))

    def __repr__(self):
        return f"Device({self.a!r})"


def _binary(ufunc):
    return (
        lambda self, other: ufunc(self, other),
        lambda self, other: ufunc(other, self),
    )


for _name, _ufunc in [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
    ("pow", np.power), ("matmul", np.matmul), ("lt", np.less), ("gt", np.greater),
]:  # fmt: skip
    _forward, _reflected = _binary(_ufunc)
    setattr(Device, f"__{_name}__", _forward)
    setattr(Device, f"__r{_name}__", _reflected)
Device.__le__ = lambda self, other: np.less_equal(self, other)
Device.__ge__ = lambda self, other: np.greater_equal(self, other)
Device.__neg__ = lambda self: np.negative(self)
Device.__abs__ = lambda self: np.absolute(self)

stand_in = types.SimpleNamespace(
    asarray=Device,
    asnumpy=lambda x: x.a,
    ndarray=Device,
    eye=lambda n: Device(np.eye(n)),
    ones=lambda n: Device(np.ones(n)),
    arange=lambda n: Device(np.arange(n)),
    float32=np.float32,
    synchronize=lambda: None,
)
if cp is not None:
    cp.asnumpy, cp.synchronize = cp.asnumpy, cp.cuda.Device().synchronize

LIBRARIES = [
    pytest.param(stand_in, id="stand-in"),
    pytest.param(cp, id="cupy", marks=pytest.mark.skipif(cp is None, reason="no CuPy or GPU")),
]

RNG = np.random.default_rng(0)
A = RNG.standard_normal((8, 6))
B = RNG.standard_normal(6)

# each takes the array library xp, so that its constants are built beside its input
FUNCTIONS = {
    "elementwise": lambda x, xp: np.sum(np.sin(x) * np.exp(-x) + np.tanh(x) ** 2),
    "logaddexp": lambda x, xp: np.sum(np.logaddexp(0.0, x)),
    "matmul": lambda x, xp: np.sum((x @ x.T) ** 2),
    "reductions": lambda x, xp: np.var(x) + np.sum(np.max(x, 1)) + np.sum(np.mean(x, 0) ** 2),
    "softmax": lambda x, xp: np.sum(np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True) * x),
    "slices": lambda x, xp: np.sum(x[1:3, ::2] ** 2),
    "integer-index": lambda x, xp: np.sum(x[[0, 0, 3]] ** 2) + np.sum(x[:, [1, 1, 2]] ** 3),
    "boolean-mask": lambda x, xp: np.sum(x[x > 0] ** 2),
    "sort": lambda x, xp: np.sum(np.sort(x, axis=1) * xp.arange(6.0)),
    "concatenate-reshape": lambda x, xp: np.sum(np.reshape(np.concatenate([x, 2 * x]), -1) ** 2),
    "norm": lambda x, xp: np.linalg.norm(x),
    "inv": lambda x, xp: np.sum(np.linalg.inv(x[:6] + 6 * xp.eye(6))),
    "solve": lambda x, xp: np.sum(np.linalg.solve(x[:6] + 6 * xp.eye(6), xp.ones(6))),
    "slogdet": lambda x, xp: np.linalg.slogdet(x[:6] @ x[:6].T + xp.eye(6))[1],
    "cholesky": lambda x, xp: np.sum(np.linalg.cholesky(x[:6] @ x[:6].T + 6 * xp.eye(6))),
}


@pytest.mark.parametrize("xp", LIBRARIES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_gradient_stays_on_the_device_and_equals_numpys(name, xp):
    f = FUNCTIONS[name]
    g = grad(f, argnums=0)(xp.asarray(A), xp)
    assert isinstance(g, xp.ndarray) and g.shape == A.shape and g.dtype == A.dtype
    expected = grad(f, argnums=0)(A, np)
    np.testing.assert_allclose(xp.asnumpy(g), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(expected, numeric_grad(f, (A, np), 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("xp", LIBRARIES)
def test_float32_stays_float32(xp):
    g = grad(lambda x: np.sum(x**2), argnums=0)(xp.asarray(A.astype(np.float32)))
    assert isinstance(g, xp.ndarray) and g.dtype == np.float32
    np.testing.assert_allclose(xp.asnumpy(g), 2 * A.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("xp", LIBRARIES)
def test_no_mutation_check_touches_a_device_array(xp):
    t = Tape()
    x = Leaf(t, xp.asarray(A))
    assert x.seal is None  # fingerprints are of ndarrays only
    value, (g,) = value_and_grad(lambda x: np.sum(x * x))(xp.asarray(A))
    assert isinstance(g, xp.ndarray)
    np.testing.assert_allclose(xp.asnumpy(g), 2 * A, rtol=1e-12)


@pytest.mark.parametrize("xp", LIBRARIES)
def test_numpy_constant_beside_a_device_array(xp):
    # CuPy refuses ndarrays in its calls: the error names the arrays that met
    with pytest.raises((TypeError, ValueError)) as info:
        grad(lambda x: np.sum(x * B))(xp.asarray(A))
    assert "numpy.ndarray[6]" in "".join(info.value.__notes__)
    # a device constant is fine, and so is a Python scalar
    g = grad(lambda x: np.sum(x * xp.asarray(B) + 2.0))(xp.asarray(A))[0]
    np.testing.assert_allclose(xp.asnumpy(g), np.broadcast_to(B, A.shape), rtol=1e-12)


def _mlp_loss(params, X, onehot):
    h = np.tanh(X @ params["W0"] + params["b0"])
    logits = h @ params["W1"] + params["b1"]
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    return -np.mean(np.sum(onehot * (shifted - np.log(np.sum(np.exp(shifted), axis=1,
                                                                  keepdims=True))), axis=1))


def _mlp(sizes, batch, seed=0):
    rng = np.random.default_rng(seed)
    params = {}
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = rng.standard_normal((m, n)) / np.sqrt(m)
        params[f"b{i}"] = np.zeros(n)
    X = rng.standard_normal((batch, sizes[0]))
    onehot = np.eye(sizes[-1])[rng.integers(0, sizes[-1], batch)]
    return params, X, onehot


@pytest.mark.parametrize("xp", LIBRARIES)
def test_mlp_on_the_device_equals_numpy(xp):
    params, X, onehot = _mlp([16, 32, 10], 64)
    expected = grad(_mlp_loss, argnums=0)(params, X, onehot)
    on_device = {k: xp.asarray(v) for k, v in params.items()}
    got = grad(_mlp_loss, argnums=0)(on_device, xp.asarray(X), xp.asarray(onehot))
    for k in params:
        assert isinstance(got[k], xp.ndarray)
        np.testing.assert_allclose(xp.asnumpy(got[k]), expected[k], rtol=1e-10, atol=1e-12)
    f = lambda W: _mlp_loss({**params, "W1": W}, X, onehot)  # noqa: E731
    np.testing.assert_allclose(
        expected["W1"], numeric_grad(f, (params["W1"],), 0), rtol=1e-5, atol=1e-8
    )


@pytest.mark.skipif(cp is None, reason="no CuPy or GPU")
def test_mlp_timing_on_the_gpu_against_numpy(capsys):
    params, X, onehot = _mlp([784, 1024, 1024, 10], 4096)
    step = grad(_mlp_loss, argnums=0)
    timings = {}
    for name, xp in (("numpy", np), ("cupy", cp)):
        args = ({k: xp.asarray(v) for k, v in params.items()}, xp.asarray(X), xp.asarray(onehot))
        step(*args)  # warm up (CuPy compiles its kernels on first use)
        if xp is cp:
            cp.cuda.Device().synchronize()
        start = time.perf_counter()
        for _ in range(5):
            step(*args)
        if xp is cp:
            cp.cuda.Device().synchronize()
        timings[name] = (time.perf_counter() - start) / 5
    with capsys.disabled():
        print(f"\nMLP 784-1024-1024-10, batch 4096, one gradient: NumPy {timings['numpy']:.4f} s, "
              f"CuPy {timings['cupy']:.4f} s ({timings['numpy'] / timings['cupy']:.1f}x)")
