"""check_grad: passes right rules to any order and catches wrong ones, in either mode,
and update rules that overwrite instead of adding."""

import numpy as np
import pytest

from sensitivities.registry import primitive, pushforward, sensitivity
from tape import MissingRuleError, check_grad, stop_gradient


@primitive
def _cube(x):
    return x**3


sensitivity(_cube, 0)(lambda y, ybar, x: ybar * 3 * x**2)


@primitive
def _cube_wrong_backwards(x):
    return x**3


sensitivity(_cube_wrong_backwards, 0)(lambda y, ybar, x: ybar * 3 * x)


@primitive
def _cube_wrong_forwards(x):
    return x**3


sensitivity(_cube_wrong_forwards, 0)(lambda y, ybar, x: ybar * 3 * x**2)
pushforward(_cube_wrong_forwards, 0)(lambda y, xdot, x: xdot * 2 * x**2)


@primitive
def _cube_not_differentiable(x):
    return x**3


# right first derivative, but the rule's x**2 is taken as a constant: wrong second one
sensitivity(_cube_not_differentiable, 0)(lambda y, ybar, x: ybar * 3 * stop_gradient(x) ** 2)


@primitive
def _scaled_copy(x):
    return x * 2.0


sensitivity(_scaled_copy, 0)(lambda y, ybar, x: ybar * 2.0)


@sensitivity.update(_scaled_copy, 0)
def _(xbar, y, ybar, x):
    xbar[...] = ybar * 2.0  # overwrites what was there instead of adding to it
    return xbar


def test_check_grad_passes_right_rules_to_any_order():
    x = np.array([0.5, -1.2])
    check_grad(lambda x: np.sum(_cube(x)), x, order=3)
    check_grad(_cube, np.float32(0.7), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "f, order, mode",
    [(_cube_wrong_backwards, 1, "rev"), (_cube_wrong_forwards, 1, "fwd"),
     (_cube_not_differentiable, 2, "rev")],
)  # fmt: skip
def test_check_grad_catches_wrong_rules(f, order, mode):
    x = np.array([0.5, -1.2])
    with pytest.raises(AssertionError, match=f"the {mode} directional derivative"):
        check_grad(f, x, order=order)


def test_check_grad_catches_an_update_rule_that_overwrites():
    with pytest.raises(AssertionError, match="pre-filled"):
        check_grad(lambda x: _scaled_copy(x), np.array([1.0, 2.0]))


def test_check_grad_takes_containers_with_none_leaves():
    params = {"w": np.array([0.5, -1.2]), "bias": None, "scale": (np.array([2.0]), None)}
    check_grad(lambda p: np.sum(np.sin(p["w"]) * p["scale"][0]), params, order=2)
    with pytest.raises(AssertionError, match="directional derivative"):
        check_grad(lambda p: np.sum(_cube_wrong_backwards(p["w"])), params)


@primitive
def _softplus(x, beta):
    return np.logaddexp(0.0, beta * x) / beta


@sensitivity(_softplus, 0)
def _(y, ybar, x, beta):
    return ybar / (1 + np.exp(-beta * x))


def test_a_float_hyperparameter_without_a_rule_points_to_argnums():
    loss = lambda x, beta: np.sum(_softplus(x, beta) ** 2)  # noqa: E731
    x = np.array([0.3, -0.2])
    with pytest.raises(MissingRuleError) as info:
        check_grad(loss, x, 2.0)
    message = str(info.value)
    assert message.startswith("check_grad differentiates every floating-point argument")
    assert "(here arguments 0, 1)" in message and "here argnums=0," in message
    assert "_softplus has no sensitivity for argument 1" in message
    check_grad(loss, x, 2.0, argnums=0)  # the fix it names
    with pytest.raises(MissingRuleError, match="_softplus has no sensitivity for argument 1"):
        check_grad(loss, x, 2.0, argnums=(0, 1))  # asked for: the rule's own error


@primitive
def _wrong_sin(x, y):
    return np.sin(x) * y


@sensitivity(_wrong_sin, 0)
def _(z, zbar, x, y):
    return zbar * np.cos(x) * y


@sensitivity(_wrong_sin, 1)
def _(z, zbar, x, y):
    return zbar * np.cos(x)  # should be sin(x)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_a_mismatch_names_the_rule_at_fault(mode):
    f = lambda x, y: np.sum(np.exp(_wrong_sin(x, y)) * x)  # noqa: E731
    with pytest.raises(AssertionError) as info:
        check_grad(f, np.array([0.3, -0.2]), np.array([1.5, 0.5]), modes=(mode,))
    message = str(info.value)
    assert f"the {mode} directional derivative" in message
    assert "of _wrong_sin for argument 1 is at fault" in message
    assert "f=_wrong_sin" in message
    check_grad(f, np.array([0.3, -0.2]), np.array([1.5, 0.5]), argnums=0, modes=(mode,))


@pytest.mark.parametrize(
    "f",
    [lambda x: x, lambda x: (x, 2.0 * x), lambda x: {"same": x, "sum": np.sum(x)}],
    ids=["identity", "pair", "dict"],
)
def test_check_grad_of_a_function_that_returns_its_input(f):
    # the output's cotangent and the pre-filled adjoint meet in the input's own slot:
    # the check adds one to the other (it once overwrote the cotangent and failed)
    assert check_grad(f, np.array([1.0, 2.0])) is None
