"""No path returns a wrong number without a word: compiled replays guard what ``f`` reads
from outside its arguments and refuse random draws; a user's rule can write into nothing
another rule reads or the caller owns; every transform checks a rule's result alike; and
valid programs compile. Each test compares with eager ``grad`` on the same program or
with central differences."""

from __future__ import annotations

import functools
import random
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
from tape import (
    checkpoint,
    compile_grad,
    grad,
    hessian,
    jacobian,
    jvp,
    primitive,
    sensitivity,
    vjp,
    vmap,
)
from tape.transforms.compiled import TapeMismatchError
from tests.fd import numeric_grad

W = np.array([0.1, 0.2, 0.3])


def _replays_as_eager(loss, change, *extra):
    """Compile ``loss``'s gradient, call it, ``change`` what it reads, and check the next
    call against eager ``grad`` and central differences on the changed program."""
    g = compile_grad(loss, W, *extra, argnums=0)
    g(W, *extra)
    change()
    expected = numeric_grad(lambda w: loss(w, *extra), (W,), 0)
    np.testing.assert_allclose(grad(loss, argnums=0)(W, *extra), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g(W, *extra), expected, rtol=1e-6, atol=1e-8)
    return g


# -- 1. what f reads from outside its arguments ---------------------------------------------

DATA = np.ones(3)
SCALE = 2.0
TABLE = {"X": np.ones(3)}


def _helper(w):
    return SCALE * np.sum(w**2)


class _Model:
    def __init__(self):
        self.X = np.ones(3)
        self.scale = 2.0

    def loss(self, w):
        return self.scale * np.sum((self.X * w) ** 2)


def test_a_rebound_global_is_seen():
    global DATA
    DATA = np.ones(3)

    def rebind():
        global DATA
        DATA = 2 * DATA

    _replays_as_eager(lambda w: np.sum((DATA * w) ** 2), rebind)


def test_a_copy_derived_from_a_global_written_in_place_is_seen():
    DATA[:] = 1.0

    def centred_loss(w):
        centred = DATA - DATA.mean() + DATA[0]
        return np.sum((centred * w) ** 2)

    try:
        _replays_as_eager(centred_loss, lambda: DATA.__setitem__(0, 5.0))
    finally:
        DATA[:] = 1.0


def test_a_helpers_module_level_number_is_seen():
    global SCALE

    def change():
        global SCALE
        SCALE = 7.0

    try:
        _replays_as_eager(lambda w: _helper(w), change)
    finally:
        SCALE = 2.0


def test_a_dict_entry_is_seen():
    TABLE["X"] = np.ones(3)
    _replays_as_eager(
        lambda w: np.sum((TABLE["X"] * w) ** 2), lambda: TABLE.__setitem__("X", np.full(3, 3.0))
    )


@pytest.mark.parametrize("attribute, value", [("scale", 3.0), ("X", np.full(3, 4.0))])
def test_an_attribute_of_a_bound_methods_object_is_seen(attribute, value):
    model = _Model()
    _replays_as_eager(model.loss, lambda: setattr(model, attribute, value))


def test_an_attribute_written_in_place_is_seen():
    model = _Model()
    _replays_as_eager(model.loss, lambda: model.X.__setitem__(1, -2.0))


def test_closure_cells_rebound_and_written_are_seen():
    scale, data = 1.0, np.ones(3)

    def loss(w):
        return scale * np.sum((data * w) ** 2)

    def change():
        nonlocal scale
        scale = 4.0
        data[2] = 3.0

    _replays_as_eager(loss, change)


def test_a_partial_and_a_callable_object_are_seen():
    class Scaled:
        def __init__(self):
            self.c = 1.0

        def __call__(self, w, X):
            return self.c * np.sum((X * w) ** 2)

    scaled = Scaled()
    loss = functools.partial(scaled, X=np.ones(3))
    _replays_as_eager(loss, lambda: setattr(scaled, "c", 5.0))
    loss.keywords["X"][:] = 2.0  # an argument bound in the partial, written in place
    _replays_as_eager(loss, lambda: loss.keywords["X"].__setitem__(0, 7.0))


def test_on_change_raise_names_what_changed():
    global DATA
    DATA = np.ones(3)
    g = compile_grad(lambda w: np.sum((DATA * w) ** 2), W, on_change="raise")
    DATA = 2 * DATA
    with pytest.raises(TapeMismatchError, match="DATA"):
        g(W)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.intp])
def test_an_integer_index_argument_written_in_place_counts_as_changed(dtype):
    index = np.array([0, 1], dtype=dtype)
    _replays_as_eager(lambda w, i: np.sum(w[i] ** 2 * np.arange(1.0, 4.0)[i]),
                      lambda: index.__setitem__(0, 2), index)


def test_an_array_inside_a_namespace_argument_counts_as_changed():
    ns = types.SimpleNamespace(X=np.ones(3))
    _replays_as_eager(lambda w, n: np.sum((n.X * w) ** 2), lambda: ns.X.__setitem__(0, 9.0), ns)


def test_an_array_passed_by_keyword_counts_as_changed():
    def loss(w, X=None):
        return np.sum(((1.0 if X is None else X) * w) ** 2)

    X = np.ones(3)
    g = compile_grad(loss, W)
    g(W, X=X)
    X[:] = 3.0
    np.testing.assert_allclose(g(W, X=X)[0], 2 * 9.0 * W)


_rng = np.random.default_rng(0)
_legacy = np.random.RandomState(0)


@pytest.mark.parametrize(
    "draw, name",
    [
        (lambda: np.random.rand(3) > 0.5, "np.random"),  # noqa: NPY002 (the global stream)
        (lambda: np.random.normal(size=3), "np.random"),  # noqa: NPY002
        (lambda: _rng.random(3) > 0.5, "_rng"),
        (lambda: _rng.binomial(1, 0.5, 3), "_rng"),
        (lambda: _legacy.uniform(size=3), "_legacy"),
        (lambda: np.full(3, random.random()), "random"),
    ],
)
def test_random_draws_inside_f_are_refused_naming_the_generator(draw, name):
    with pytest.raises(ValueError, match=f"draws random numbers from .*{name}"):
        compile_grad(lambda w: np.sum(draw() * w**2), W)


def test_a_generator_argument_that_is_drawn_from_is_refused():
    with pytest.raises(ValueError, match="an argument"):
        compile_grad(lambda w, r: np.sum((r.random(3) > 0.5) * w**2), W,
                     np.random.default_rng(1), argnums=0)


def test_a_seeded_generator_made_inside_f_replays_exactly():
    def loss(w):
        mask = np.random.default_rng(7).random(3) > 0.5
        return np.sum(mask * w**2)

    _replays_as_eager(loss, lambda: None)


def test_state_that_f_changes_while_it_runs_is_refused():
    state = {"step": 0}

    def counting(w):
        state["step"] += 1
        return state["step"] * np.sum(w**2)

    with pytest.raises(ValueError, match="changes state"):
        compile_grad(counting, W)


# -- 3. a user's rule cannot change what another rule reads or the caller owns ---------------


@primitive
def _cube(x):
    return x**3


@sensitivity(_cube, 0)
def _(y, ybar, x):
    ybar *= 3 * x**2  # the mistake: ybar is shared with np.sin's rule through add
    return ybar


@primitive
def _scaled(x, c):
    return x * c


@sensitivity(_scaled, 0)
def _(y, ybar, x, c):
    c *= 2  # the mistake: c is the caller's
    return ybar * c / 2


@primitive
def _copied(x):
    return x.copy()


@sensitivity(_copied, 0)
def _(y, ybar, x):
    return ybar.reshape(ybar.shape)  # a view of ybar: legal, as long as nobody writes it


@primitive
def _doubled(x):
    return 2 * x


@sensitivity(_doubled, 0)
def _(y, ybar, x):
    ybar[...] = 2 * ybar  # writes what _copied's rule handed on: a view of a shared adjoint
    return ybar


_WEIGHTS = np.array([1.0, 2.0, 3.0])
_X = np.array([0.3, 0.7, 1.1])

_TRANSFORMS = {
    "grad": lambda f: grad(f)(_X),
    "vjp": lambda f: vjp(f, _X)[1](1.0),
    "hessian": lambda f: hessian(f)(_X),
    "compile_grad": lambda f: compile_grad(f, _X)(_X),
    "vmap(grad)": lambda f: vmap(grad(f))(np.stack([_X, _X])),
    "jacobian rev": lambda f: jacobian(f, mode="rev")(_X),
}


@pytest.mark.parametrize("transform", list(_TRANSFORMS))
@pytest.mark.parametrize(
    "loss",
    [
        lambda x: np.sum((np.sin(x) + _cube(x)) * _WEIGHTS),
        lambda x: np.sum(_doubled(_copied(x) + np.cos(x)) * _WEIGHTS),
    ],
)
def test_a_rule_writing_into_its_ybar_is_stopped_at_the_rule(transform, loss):
    with pytest.raises(ValueError, match="writes into"):
        _TRANSFORMS[transform](loss)


@pytest.mark.parametrize("transform", list(_TRANSFORMS))
def test_a_rule_writing_into_an_argument_leaves_the_callers_array(transform):
    c = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="writes into"):
        _TRANSFORMS[transform](lambda x: np.sum(_scaled(x, c) ** 2))
    np.testing.assert_array_equal(c, [1.0, 2.0, 3.0])


def test_a_rule_handing_on_a_view_of_ybar_gives_the_right_gradient():
    loss = lambda x: np.sum((_copied(x) + np.sin(x)) * _WEIGHTS)  # noqa: E731
    expected = numeric_grad(loss, (_X,), 0)
    for transform in ("grad", "vjp", "compile_grad", "jacobian rev"):
        got = _TRANSFORMS[transform](loss)
        got = got if transform == "jacobian rev" else got[0]
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    g = grad(loss)(_X)[0]
    g *= 2  # a gradient handed back is the caller's own, writeable array
    assert g.flags.writeable


def test_forward_mode_through_a_rule_that_writes_into_its_ybar_is_right():
    # forward mode hands the rule a fresh node per direction, whose writes are recorded
    loss = lambda x: np.sum((np.sin(x) + _cube(x)) * _WEIGHTS)  # noqa: E731
    expected = _WEIGHTS * (np.cos(_X) + 3 * _X**2)
    np.testing.assert_allclose(jacobian(loss, mode="fwd")(_X), expected, rtol=1e-12)


# -- 4. one check of a rule's result on every path -------------------------------------------

_BAD_RULES = {
    "None": (lambda y, ybar, x: None, TypeError, "returned None"),
    "list": (lambda y, ybar, x: [1.0] * np.size(x), TypeError, "returned list"),
    "shape": (lambda y, ybar, x: np.ones(4) * np.sum(ybar), ValueError, "does not sum back"),
    "str dtype": (lambda y, ybar, x: np.full(np.shape(x), "a"), TypeError, "<U1"),
    "bool dtype": (lambda y, ybar, x: np.ones(np.shape(x), bool), TypeError, "bool"),
}

_EVERY_TRANSFORM = {
    **_TRANSFORMS,
    "jacobian fwd": lambda f: jacobian(f, mode="fwd")(_X[:1]),
    "jacobian rev": lambda f: jacobian(f, mode="rev")(_X[:1]),
    "jvp": lambda f: jvp(f, (_X[:1],), (np.ones(1),)),
    "checkpoint": lambda f: grad(checkpoint(f))(_X[:1]),
    "compile_grad": lambda f: compile_grad(f, _X[:1])(_X[:1]),
    "grad": lambda f: grad(f)(_X[:1]),
}


@pytest.mark.parametrize("transform", list(_EVERY_TRANSFORM))
@pytest.mark.parametrize("mistake", list(_BAD_RULES))
def test_a_wrong_rule_result_is_one_clear_error_naming_the_rule(transform, mistake):
    rule, error, message = _BAD_RULES[mistake]

    @primitive
    def bad(x):
        return x**3

    sensitivity(bad, 0)(rule)
    with pytest.raises(error, match=f"sensitivity of .*bad for argument 0 .*{message}|{message}"):
        _EVERY_TRANSFORM[transform](lambda x: np.sum(bad(x) * 2.0))


def test_an_in_place_rule_without_return_is_an_error_not_a_wiped_gradient():
    @primitive
    def doubled(x):
        return 2 * x

    @sensitivity.update(doubled, 0)
    def _(xbar, y, ybar, x):
        xbar += 2 * ybar  # forgets return xbar

    with pytest.raises(TypeError, match="returned None"):
        grad(lambda x: np.sum(doubled(x) + doubled(x)))(_X)


def test_an_in_place_rule_may_write_its_accumulator():
    @primitive
    def doubled(x):
        return 2 * x

    @sensitivity.update(doubled, 0)
    def _(xbar, y, ybar, x):
        xbar += 2 * ybar
        return xbar

    loss = lambda x: np.sum((doubled(x) + doubled(x) * x) * _WEIGHTS)  # noqa: E731
    np.testing.assert_allclose(grad(loss)(_X)[0], numeric_grad(loss, (_X,), 0), rtol=1e-6)


def test_a_pushforward_writing_its_tangent_is_stopped():
    @tape.primitive
    def cubed(x):
        return x**3

    @tape.pushforward(cubed, 0)
    def _(y, xdot, x):
        xdot *= 3 * x**2
        return xdot

    with pytest.raises(ValueError, match="writes into"):
        jvp(lambda x: cubed(x) + np.sin(x), (_X,), (np.ones(3),))


# -- 6. valid programs every transform accepts ------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([(1,), (1, 1), (1, 1, 1)]), st.integers(0, 2))
def test_outputs_of_one_element_compile(shape, which):
    x = np.array([0.5, 1.5, 2.5])
    loss = [
        lambda x: np.reshape(x[:1] * 2.0, shape),
        lambda x: np.reshape(np.sin(x[1:2]) * x[2:], shape),
        lambda x: np.reshape(np.sum(x**2, keepdims=True), shape),
    ][which]
    expected = numeric_grad(lambda x: float(np.ravel(loss(x))[0]), (x,), 0)
    np.testing.assert_allclose(grad(loss)(x)[0], expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(compile_grad(loss, x)(x)[0], expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x.reshape(1),
        lambda x: x[np.newaxis],
        lambda x: x[...],
        lambda x: np.atleast_1d(x),
        lambda x: x.reshape(1, 1),
        lambda x: np.ravel(x),
    ],
)
def test_writing_through_a_view_of_a_0d_array(view):
    def f(x):
        y = x.copy()  # a 0-d array, which the view shares
        v = view(y)
        v[...] = 3.0 * v + x  # y becomes 4 x, written through the view
        return y * x

    x = np.array(2.0)
    expected = numeric_grad(lambda x: float(f(np.array(x))), (x,), 0)  # 0-d arrays, as x
    np.testing.assert_allclose(float(f(x)), 16.0)  # NumPy's own value
    np.testing.assert_allclose(float(tape.value_and_grad(f)(x)[0]), 16.0)
    np.testing.assert_allclose(grad(f)(x)[0], expected, rtol=1e-6)
    np.testing.assert_allclose(compile_grad(f, x)(x)[0], expected, rtol=1e-6)
