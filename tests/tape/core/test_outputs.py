"""``out=`` into a node (``tape.core.outputs``): the in-place write ``out[...] = f(inputs)``,
with ``where=`` masking it and an ``out`` that is also an input reading its old value. The
reference is the same program on ndarrays (values, and central differences)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

import tape
from tape import grad, value_and_grad
from tests.fd import numeric_grad

RNG = np.random.default_rng(2)

PROGRAMS = {
    "tanh into itself": lambda x: (np.tanh(x, out=x), np.sum(x**2))[1],
    "relu into itself": lambda x: (np.maximum(x, 0, out=x), np.sum(x**3))[1],
    "expit into itself": lambda x: (expit(x, out=x), np.sum(x * np.arange(4.0)))[1],
    "exp of another into it": lambda x: (np.exp(x[::-1] * 1.0, out=x), np.sum(x**2))[1],
    "into a fresh buffer": lambda x: (o := np.zeros_like(x), np.sin(x, out=o), np.sum(o * x))[-1],
    "where masks the write": lambda x: (
        o := np.ones_like(x),
        np.exp(x, out=o, where=x > 0),
        np.sum(o * x),
    )[-1],
    "two outputs": lambda x: (
        a := np.zeros_like(x),
        b := np.zeros_like(x),
        np.divmod(x * 3.0, 1.0, out=(a, b)),
        np.sum(b**2),
    )[-1],
    "into a view": lambda x: (np.negative(x[:2], out=x[2:]), np.sum(x**2 * np.arange(4.0)))[-1],
    "reduction with out": lambda x: (
        o := np.zeros_like(x[:1]),
        np.add.reduce(x**2, out=o, keepdims=True),
        o[0] * x[0],
    )[-1],
    "numpy function with out": lambda x: (
        o := np.zeros_like(x[:1]),
        np.sum(x**2, out=o, keepdims=True),
        np.clip(x, -0.5, 0.5, out=x),
        o[0] + np.sum(x),
    )[-1],
    "augmented": lambda x: (np.multiply(x, x, out=x), np.add(x, 1.0, out=x), np.sum(x**2))[-1],
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_out_into_a_node_is_the_in_place_write(name):
    f = PROGRAMS[name]
    x = RNG.normal(size=4)
    value, (g,) = value_and_grad(f)(x.copy())
    assert np.isclose(value, f(x.copy()))  # NumPy's own value on an ndarray
    np.testing.assert_allclose(g, numeric_grad(lambda x: f(x.copy()), (x,), 0), atol=1e-6)


def test_out_keeps_the_dtype_of_out():
    def f(x):
        o = np.zeros_like(x, dtype=np.float32)
        np.sin(x, out=o)
        assert o.dtype == np.float32
        return np.sum(o.astype(np.float64) * x)

    x = np.array([0.3, -1.1])
    np.testing.assert_allclose(grad(f)(x)[0], np.float32(np.sin(x)) + x * np.cos(x), rtol=1e-6)


def test_out_returns_the_out_node():
    def f(x):
        y = x * 1.0
        z = np.tanh(y, out=y)
        assert z is y
        return np.sum(z)

    grad(f)(np.ones(2))


def test_numpys_errors_for_out():
    def casting(x):
        np.exp(1j * x, out=x)  # complex into float: not a same_kind cast

    def shape(x):
        np.sin(x, out=x[:1])

    with pytest.raises(TypeError, match="[Cc]annot cast|casting"):
        grad(casting)(np.ones(2))
    with pytest.raises(ValueError):
        grad(shape)(np.ones(2))


def test_out_into_an_ndarray_with_a_node_input_says_what_to_do():
    with pytest.raises(TypeError, match=r"tanh\(\.\.\., out=a\).*zeros_like\(x\)"):
        grad(lambda x: np.sum(np.tanh(x, out=np.empty(2))))(np.ones(2))


_U0 = np.linspace(0.0, 1.0, 6)


def test_an_augmented_write_into_an_outer_array_names_the_line_and_the_fixes():
    def stepper(x):
        u = _U0.copy()  # a plain copy: no node
        u[1:-1] += 0.1 * x
        return np.sum(u**2)

    with pytest.raises(TypeError) as info:
        grad(stepper)(np.ones(4))
    text = str(info.value)
    assert text.startswith("`u[1:-1] += 0.1 * x` writes a value computed from a node")
    assert "u = u + np.zeros_like(x, shape=u.shape)" in text
    assert "u = tape.at(u)[1:-1].add(0.1 * x)" in text

    def with_node(x):  # the first fix the message gives
        u = _U0.copy()
        u = u + np.zeros_like(x, shape=u.shape)
        u[1:-1] += 0.1 * x
        return np.sum(u**2)

    def functional(x):  # the second
        u = _U0.copy()
        u = tape.at(u)[1:-1].add(0.1 * x)
        return np.sum(u**2)

    x = np.array([0.5, -1.0, 2.0, 0.25])
    plain = lambda x: np.sum(np.concatenate([_U0[:1], _U0[1:-1] + 0.1 * x, _U0[-1:]]) ** 2)  # noqa: E731
    for f in (with_node, functional):
        np.testing.assert_allclose(grad(f)(x)[0], numeric_grad(plain, (x,), 0), rtol=1e-6)
