"""Custom rules, type-specialised rules, the update form, shared preprocessing, primitives:
each shown to be the one used, and each checked against finite differences."""

import numpy as np
import pytest

from tape import Leaf, Tape, grad, preprocess, primitive, propagate, reverse_tape, sensitivity
from tests.fd import check_grads, numeric_grad


def test_a_custom_rule_on_a_primitive_is_used_and_records_one_branch():
    calls = []

    @primitive
    def logcosh(x):
        return np.log(np.cosh(x))

    @sensitivity(logcosh, 0)
    def _(y, ybar, x):
        calls.append(1)
        return ybar * np.tanh(x)

    t = Tape()
    y = logcosh(Leaf(t, np.array([0.3, -1.2])))
    assert len(t) == 2 and y.f is logcosh  # np.cosh inside was not recorded
    x = np.array([0.3, -1.2, 2.0])
    check_grads(lambda v: np.sum(logcosh(v)), x)
    assert calls
    assert logcosh(0.5) == np.log(np.cosh(0.5))  # plain values: plain call


def test_type_specialised_rules_win_over_the_untyped_one():
    used = []

    @primitive
    def double(x):
        return 2 * x

    @sensitivity(double, 0)
    def _(y, ybar, x):
        used.append("any")
        return 2 * ybar

    @sensitivity(double, 0, np.ndarray)
    def _(y, ybar, x):
        used.append("ndarray")
        return 2 * ybar

    @sensitivity(double, 0, np.floating)
    def _(y, ybar, x):
        used.append("floating")
        return 2 * ybar

    grad(lambda x: np.sum(double(x)))(np.ones(3))
    grad(double)(1.5)  # a Python float: only the untyped rule fits
    grad(lambda x: double(x[0]))(np.ones(3))  # x[0] is an np.float64: np.floating beats any
    assert used == ["ndarray", "any", "floating"]


def test_the_most_specific_signature_is_chosen_on_several_arguments():
    used = []

    @primitive
    def combine(a, b):
        return a * b

    sensitivity(combine, 0)(lambda y, ybar, a, b: used.append("any") or ybar * b)
    sensitivity(combine, 0, np.ndarray)(lambda y, ybar, a, b: used.append("nd,*") or ybar * b)
    sensitivity(combine, 0, np.ndarray, np.ndarray)(
        lambda y, ybar, a, b: used.append("nd,nd") or ybar * b
    )
    sensitivity(combine, 1)(lambda y, ybar, a, b: ybar * a)
    grad(lambda a: np.sum(combine(a, np.ones(2))))(np.ones(2))
    grad(lambda a: np.sum(combine(a, 2.0)))(np.ones(2))
    grad(lambda a: combine(a, 2.0))(1.0)
    assert used == ["nd,nd", "nd,*", "any"]


def test_the_update_form_is_used_and_adds_in_place():
    seen = []

    @primitive
    def first_two(x):
        return x[:2]

    @sensitivity.update(first_two, 0)
    def _(xbar, y, ybar, x):
        seen.append(xbar)
        xbar[:2] += ybar
        return xbar

    x = np.array([1.0, 2.0, 3.0])
    (g,) = grad(lambda x: np.sum(first_two(x) ** 2) + np.sum(x))(x)
    np.testing.assert_array_equal(g, [3.0, 5.0, 1.0])
    assert seen and g is not None
    # the accumulator handed to the rule was the engine's own copy, not the sum rule's output
    assert all(a.flags.writeable for a in seen)


def test_the_update_form_never_mutates_an_array_the_user_holds():
    @primitive
    def head(x):
        return x[:1]

    @sensitivity.update(head, 0)
    def _(xbar, y, ybar, x):
        xbar[:1] += ybar
        return xbar

    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0]))
    y = x * 1.0
    # y's slot first holds the sum rule's read-only broadcast; the update form must get a copy
    z = np.sum(head(y)) + np.sum(y)
    rt = reverse_tape(z)
    propagate(t, rt)
    np.testing.assert_array_equal(rt[x], [2.0, 1.0])


def test_preprocess_runs_once_per_branch_and_feeds_every_rule():
    runs = []

    @primitive
    def solve(A, b):
        return np.linalg.solve(A, b)

    @preprocess(solve)
    def _(y, ybar, A, b):
        runs.append(1)
        return np.linalg.solve(A.T, ybar)  # shared by both rules

    sensitivity(solve, 0)(lambda y, ybar, A, b, pre: -np.outer(pre, y))
    sensitivity(solve, 1)(lambda y, ybar, A, b, pre: pre)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(3)
    f = lambda A, b: np.sum(np.sin(solve(A, b)))  # noqa: E731
    gA, gb = grad(f)(A, b)
    assert len(runs) == 1
    np.testing.assert_allclose(gA, numeric_grad(f, (A, b), 0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gb, numeric_grad(f, (A, b), 1), rtol=1e-5, atol=1e-7)


def test_a_rule_returning_the_wrong_shape_is_reported():
    @primitive
    def bad(x):
        return x * 2

    sensitivity(bad, 0)(lambda y, ybar, x: np.ones(5))
    with pytest.raises(
        ValueError, match=r"sensitivity of bad for argument 0 returned shape \(5,\)"
    ):
        grad(lambda x: np.sum(bad(x)))(np.ones(3))


def test_registration_checks_its_arguments():
    with pytest.raises(TypeError, match="argnum"):
        sensitivity(np.sin, -1)
    with pytest.raises(TypeError, match="types"):
        sensitivity(np.sin, 0, "ndarray")


def test_importing_tape_does_not_import_scipy_and_its_rules_come_when_it_is():
    import subprocess
    import sys

    pytest.importorskip("scipy")
    script = (
        "import sys, numpy as np, tape\n"
        "assert 'scipy' not in sys.modules, 'import tape imported SciPy'\n"
        "import scipy.special as sp\n"
        "(g,) = tape.grad(lambda x: np.sum(sp.gammaln(x)))(np.array([1.5, 2.5]))\n"
        "np.testing.assert_allclose(g, sp.digamma([1.5, 2.5]))\n"  # d/dx log Gamma = psi
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_shifted_axis_names_the_same_axis_past_a_leading_one(ndim):
    from sensitivities.registry import shifted_axis

    x = np.arange(float(2 * 3 ** ndim)).reshape((2,) + (3,) * ndim)  # a leading axis of 2
    for axis in [*range(-ndim, ndim), None, tuple(range(ndim)), (-1,)]:
        want = np.stack([np.sum(example, axis=axis) for example in x])
        for _ in range(2):  # computed, then kept
            assert np.array_equal(np.sum(x, axis=shifted_axis(axis, ndim)), want)
    assert shifted_axis([0, -1], ndim) == (1, ndim)  # a list, as a tuple
    with pytest.raises(np.exceptions.AxisError):
        shifted_axis(ndim, ndim)
    with pytest.raises(np.exceptions.AxisError):
        shifted_axis(-ndim - 1, ndim)


def test_lift_pads_after_the_leading_axis_so_that_it_broadcasts_as_the_value():
    from sensitivities.registry import lift

    t = np.arange(6.0).reshape(2, 3)  # two directions of a value of shape (3,)
    other = np.ones((4, 3))  # against which the value broadcasts
    lifted = lift(t, 3)
    assert lifted.shape == (2, 1, 3) and np.shares_memory(lifted, t)
    assert np.array_equal((lifted * other)[1], t[1] * other)
    assert lift(t, 2) is t and lift(t, 1) is t
    node = Leaf(Tape(), t)
    assert lift(node, 3).shape == (2, 1, 3) and node.tape.owns(lift(node, 3))  # recorded
