"""Plain NumPy code is recorded through NumPy's own protocols, with no wrapped module;
NumPy scalars take the operators' fast path and give NumPy's own values and types (a
node passed by keyword: tests/tape/core/test_keywords.py)."""

import warnings

import numpy as np
import pytest

import tape
from tape import Leaf, MissingRuleError, Tape, grad
from tests.fd import check_grads

X = np.random.default_rng(1).uniform(0.5, 1.5, (3, 4))
A = np.random.default_rng(0).uniform(0.5, 1.5, (3, 4))


def test_ufuncs_and_array_functions_are_recorded():
    t = Tape()
    x = Leaf(t, X)
    y = np.sum(np.sin(x) @ np.ones((4, 2)), axis=0)
    assert [r.f for r in list(t)[1:]] == [np.sin, np.matmul, np.sum]
    assert y.kwargs == {"axis": 0}


def test_ufunc_reduce_and_accumulate_are_recorded_as_bound_methods():
    t = Tape()
    x = Leaf(t, X)
    np.add.reduce(x, axis=1)
    np.maximum.accumulate(x, axis=0)
    assert t[1].f == np.add.reduce and t[2].f == np.maximum.accumulate


def test_scipy_special_ufuncs_are_recorded():
    special = pytest.importorskip("scipy.special")
    t = Tape()
    y = special.gammaln(Leaf(t, X))
    assert y.f is special.gammaln
    check_grads(lambda x: special.expit(x) * special.gammaln(x), X)


def test_a_function_without_a_rule_is_entered_when_numpy_implements_it_in_python():
    # np.ptp is maximum.reduce - minimum.reduce in Python; np.unstack is a tuple of index operations
    t = Tape()
    np.ptp(Leaf(t, X), axis=0)
    assert np.subtract in {r.f for r in list(t)[1:]} and len(t) == 4
    check_grads(lambda x: np.ptp(x + 0.01 * np.arange(12).reshape(3, 4), axis=1), X)
    check_grads(lambda x: np.unstack(x)[1] * np.unstack(x)[2], X)


def test_a_function_that_cannot_be_entered_fails_in_the_forward_pass_naming_it():
    t = Tape()
    x = Leaf(t, X[0, :3])
    # a set operation: NumPy's code sorts with np.asarray, which a node refuses
    with pytest.raises(MissingRuleError, match=r"(?s)setdiff1d.*@tape\.sensitivity") as info:
        np.setdiff1d(x, X[1, :2])
    assert isinstance(info.value, TypeError)
    assert len(t) == 1  # a failed call leaves no records behind


def test_a_ufunc_without_a_rule_fails_in_the_forward_pass():
    halve = np.frompyfunc(lambda v: v / 2, 1, 1)  # a ufunc that no rule knows
    t = Tape()
    with pytest.raises(MissingRuleError, match=r"no sensitivity(?s:.*)tape\.sensitivity\("):
        halve(Leaf(t, 2.5))
    special = pytest.importorskip("scipy.special")
    with pytest.raises(MissingRuleError, match=r"sensitivity\(scipy\.special\.agm, 0\)"):
        special.agm(Leaf(t, 2.5), 1.0)


def test_an_argument_without_a_rule_fails_in_the_forward_pass():
    def scale(x, s):
        return x * s

    wrapped = tape.primitive(scale)
    tape.sensitivity(wrapped, 0)(lambda y, ybar, x, s: ybar * s)
    t = Tape()
    assert wrapped(Leaf(t, 2.0), 3.0).value == 6.0
    with pytest.raises(MissingRuleError, match="argument 1"):
        wrapped(2.0, Leaf(t, 3.0))


def test_out_arguments_are_refused():
    t = Tape()
    x = Leaf(t, X)
    with pytest.raises(TypeError, match="out="):
        np.sin(x, out=np.empty_like(X))
    with pytest.raises(TypeError, match="in place"):
        np.add.at(x, [0], 1.0)


def test_nodes_of_another_tape_are_constants():
    t1, t2 = Tape(), Tape()
    a = Leaf(t1, 2.0)
    b = Leaf(t2, 3.0)
    c = a * b  # recorded on t2, the newer tape, with a as a constant...
    assert c.tape is t2 and c.args[0] is a and c.value.tape is t1  # ...and its value on t1
    rt = tape.propagate(t2, tape.reverse_tape(c))
    assert rt[b] == 2.0 and len(rt) == 2


def test_non_differentiable_functions_give_plain_results_and_zero_gradient():
    t = Tape()
    x = Leaf(t, X)
    for result in (
        np.floor(x),
        np.argmax(x),
        np.sign(x),
        np.isnan(x),
        np.shape(x),
        np.zeros_like(x, dtype=bool),  # a float buffer made from a node is a node
    ):
        assert not isinstance(result, tape.Node)
    assert len(t) == 1
    (g,) = grad(lambda x: np.sum(np.floor(x) * 0 + np.round(x)))(X)
    np.testing.assert_array_equal(g, 0.0)


SCALARS = [np.float64(0.7), np.float32(0.7), np.complex128(0.7 - 0.2j), 0.7]


@pytest.mark.parametrize("f", [np.add, np.subtract, np.multiply, np.true_divide])
@pytest.mark.parametrize("a", SCALARS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("b", [*SCALARS, 3, np.float64(0.0)], ids=lambda v: type(v).__name__)
def test_recorded_scalar_arithmetic_gives_numpys_value_and_type(f, a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # x / 0.0
        expected = f(a, b)
        got = f(Leaf(Tape(), a), b).value
    assert type(got) is type(expected)
    np.testing.assert_array_equal(got, expected)


def test_python_floats_divide_by_zero_as_numpy_does():
    with np.errstate(divide="ignore"):
        y = Leaf(Tape(), 1.0) / 0.0
    assert np.isinf(y.value)


