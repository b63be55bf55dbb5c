"""Every row of docs/errors.md: a bad input, the error it gets, and that nothing is left
behind. Gradients that still work are compared with central differences."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

import tape
from tape import (
    AnomalyError,
    Leaf,
    MissingRuleError,
    MutationError,
    NodeConversionError,
    Tape,
    debug,
    detect_anomaly,
    grad,
    library_code,
    primitive,
    propagate,
    reverse_tape,
    sensitivity,
    value_and_grad,
)
from tests.fd import numeric_grad

DOC = Path(__file__).resolve().parents[3] / "docs" / "errors.md"
INPLACE = Path(__file__).with_name("test_inplace.py")


@primitive
def _no_rule(x):
    return x * 2.0


@primitive
def _wrong_shape(x):
    return x * 2.0


@sensitivity(_wrong_shape, 0)
def _(y, ybar, x):
    return np.ones(np.shape(x)[0] + 1)


@primitive
def _failing(x):
    return x + 1.0


@sensitivity(_failing, 0)
def _(y, ybar, x):
    raise ZeroDivisionError("this rule is broken")


def _still_works():
    (g,) = grad(lambda x: np.sum(np.sin(x) * x))(np.array([0.3, 0.7]))
    x = np.array([0.3, 0.7])
    np.testing.assert_allclose(g, np.sin(x) + x * np.cos(x))


# -- inputs to grad ---------------------------------------------------------------------


def test_int_input():
    with pytest.raises(TypeError, match=r"argument 0 \('x'\).*dtype int64.*floating-point"):
        grad(lambda x: x * 2.0)(np.arange(3))
    with pytest.raises(TypeError, match=r"argument 0 \('x'\).*int"):
        grad(lambda x: x * 2.0)(3)


def test_bool_input():
    with pytest.raises(TypeError, match=r"argument 1 \('m'\).*dtype bool"):
        grad(lambda x, m: x * m)(1.0, np.array([True, False]))


def test_int_input_left_out_with_argnums_is_fine():
    assert grad(lambda x, n: x**n, argnums=0)(2.0, 3) == pytest.approx(12.0)


def test_non_scalar_output():
    with pytest.raises(TypeError, match=r"return a scalar.*shape \(2,\).*jacobian or vjp"):
        grad(lambda x: x * 2.0)(np.ones(2))


def test_one_element_output_of_any_shape_is_a_scalar():
    x = np.array([1.0, 2.0])
    for f in (
        lambda x: np.sum(x**2, keepdims=True),
        lambda x: np.sum(x**2).reshape(1, 1),
        lambda x: x[:1] ** 2 + x[1:] ** 2,
    ):
        value, (g,) = value_and_grad(f)(x)
        np.testing.assert_allclose(np.ravel(value), [5.0])
        np.testing.assert_allclose(g, 2 * x)  # d/dx sum(x^2), by hand


@pytest.mark.parametrize(
    "f, says",
    [
        (lambda x: None, r"returned None: does it end without `return`"),
        (lambda x: "loss", r"returned a str"),
        (lambda x: {"loss": x}, r"returned a dict"),
        (lambda x: (y for y in [x]), r"returned a generator"),
        (lambda x: np.allclose(x, x), r"returned the bool True.*return the quantity itself"),
        (lambda x: [x, x], r"returned a list of 2.*has_aux=True"),
        (lambda x: (x, x), r"returned a tuple of 2.*has_aux=True"),
    ],
)
def test_what_f_returned_that_is_not_a_scalar(f, says):
    with pytest.raises(TypeError, match=says):
        grad(f)(np.ones(2))
    _still_works()


def test_grad_of_grad_of_a_one_argument_function_says_how():
    with pytest.raises(TypeError, match=r"grad\(grad\(f, argnums=0\), argnums=0\)"):
        grad(grad(lambda x: x**3))(1.0)
    assert grad(grad(lambda x: x**3, argnums=0), argnums=0)(1.0) == 6.0  # 6 x


def test_argnums_of_any_integer_type_and_no_bools():
    f = lambda x, y: x * y  # noqa: E731
    assert grad(f, argnums=np.int64(1))(2.0, 3.0) == 2.0
    assert grad(f, argnums=(np.int32(0), 1))(2.0, 3.0) == (3.0, 2.0)
    once = grad(f, argnums=(i for i in [1]))  # a generator is read once, when grad is called
    assert once(2.0, 3.0) == once(2.0, 3.0) == (2.0,)
    for bad in (True, (0, False), "0", 1.0):
        with pytest.raises(TypeError, match="argnums"):
            grad(f, argnums=bad)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_np_matrix_input():
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    assert np.sum(m * m) == 54.0  # NumPy: a matrix product; tape would mean elementwise
    with pytest.raises(TypeError, match=r"np\.matrix.*np\.asarray\(m\).*@"):
        value_and_grad(lambda m: np.sum(m * m))(m)
    _still_works()


def test_masked_array_input():
    x = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(TypeError, match=r"masked array.*np\.where"):
        value_and_grad(np.mean)(x)
    _still_works()


def test_complex_output():
    with pytest.raises(TypeError, match="real scalar"):
        grad(lambda x: x * 1j)(1.0)


def test_argnums_out_of_range():
    with pytest.raises(ValueError, match="argnums 2 is out of range"):
        grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)


def test_leaf_of_ints():
    with pytest.raises(TypeError, match="floating-point"):
        Leaf(Tape(), np.arange(3))


# -- nodes turned into plain values -----------------------------------------------------


def test_node_stored_into_an_ndarray():
    a = np.zeros(3)

    def f(x):
        a[0] = x
        return np.sum(a)

    with pytest.raises(ValueError, match="sequence") as info:
        grad(f)(1.0)
    assert isinstance(info.value.__cause__, NodeConversionError)
    assert "at(a)[i].set(node)" in str(info.value.__cause__)

    def g(x):
        a[:] = x
        return np.sum(a)

    with pytest.raises(NodeConversionError, match=r"at\(a\)\[i\]\.set"):
        grad(g)(np.ones(3))
    _still_works()


def test_math_on_nodes():
    with pytest.raises(NodeConversionError, match=r"math\.\*.*np\.sin"):
        grad(lambda x: math.sin(x))(1.0)


def test_float_int_item_on_nodes():
    for convert in (float, int, lambda x: x.item()):
        with pytest.raises(NodeConversionError):
            grad(lambda x, convert=convert: convert(x) * 1.0)(1.0)


def test_np_asarray_on_nodes():
    # inside grad np.asarray(node) is the node (tests/tape/core/test_conversions.py); with the
    # mechanism off it is the conversion error, which says what to write instead
    with library_code(False), pytest.raises(NodeConversionError, match="np.stack"):
        grad(lambda x: np.sum(np.asarray(x)))(np.ones(2))


# -- writing in place -------------------------------------------------------------------


def test_setitem_on_a_node():
    def f(x):
        x[0] = 5.0
        return np.sum(x)

    assert grad(f)(np.ones(3))[0].tolist() == [0.0, 1.0, 1.0]  # as NumPy: see test_inplace

    def scalar(x):
        x[0] = 5.0  # a float, or a NumPy scalar, has no items, in NumPy too
        return x

    with pytest.raises(TypeError, match="'float' object does not support item assignment"):
        grad(scalar)(1.0)


def test_out_argument_of_a_ufunc():
    with pytest.raises(TypeError, match=r"sin\(\.\.\., out=a\) writes .* ndarray a.*drop out="):
        grad(lambda x: np.sum(np.sin(x, out=np.empty(2))))(np.ones(2))


def test_ndarray_updated_in_place_with_a_node():
    def f(x):
        a = np.ones(2)
        a += x
        return np.sum(a)

    with pytest.raises(TypeError, match=r"^`a \+= x` writes .* ndarray a .* write a = a \+ x$"):
        grad(f)(np.ones(2))


def test_out_argument_of_a_numpy_function():
    with pytest.raises(TypeError, match=r"sum\(\.\.\., out=a\) writes .* ndarray a.*drop out="):
        grad(lambda x: np.sum(x, out=np.empty(())))(np.ones(2))


def test_ufunc_at_on_a_node():
    def f(x):
        np.add.at(x, [0], 1.0)
        return np.sum(x)

    with pytest.raises(TypeError, match=r"np\.add\.at.*in place.*at\(x\)\[index\]\.add"):
        grad(f)(np.ones(2))


def test_in_place_mutation_of_a_constant_after_use():
    def f(x):
        w = np.array([1.0, 2.0])
        y = np.sum(x * w)
        w *= 10.0  # the reverse pass of x * w needs the old w
        return y

    with pytest.raises(
        MutationError, match=r"argument 1 of \[\d+\] Branch.*f=multiply.*changed in place"
    ):
        grad(f)(np.ones(2))


def test_in_place_mutation_of_an_input_array():
    x = np.array([0.5, 1.5])
    t = Tape()
    leaf = Leaf(t, x)
    y = np.sum(np.sin(leaf))
    x[1] = 3.0
    with pytest.raises(MutationError, match=r"input held by \[0\] Leaf"):
        propagate(t, reverse_tape(y))


def test_in_place_mutation_of_a_large_array_and_of_a_view():
    big = np.random.default_rng(0).standard_normal(20_000)  # past the byte-copy size

    def f(x):
        y = np.sum(x * big)
        big[[3, 7]] = big[[7, 3]]  # a rearrangement leaves the sum of the bits alone
        return y

    with pytest.raises(MutationError):
        grad(f)(np.ones(20_000))

    base = np.ones(4)

    def g(x):
        y = np.sum(x * base[1:3])  # a view of base
        base[2] = 7.0
        return y

    with pytest.raises(MutationError):
        grad(g)(np.ones(2))


def test_in_place_mutation_of_a_branch_value_is_refused_where_it_is_tried():
    t = Tape()
    x = Leaf(t, np.array([0.5, 1.5]))
    y = np.exp(x)  # exp's rule reads y
    z = np.sum(y)
    with pytest.raises(ValueError, match="read-only"):
        y.value[0] = 0.0
    rt = propagate(t, reverse_tape(z))
    np.testing.assert_allclose(rt[x], np.exp([0.5, 1.5]))


def test_mutation_of_an_index_array():
    def f(x):
        idx = np.array([0, 0, 1])
        y = np.sum(x[idx] * np.array([1.0, 2.0, 3.0]))
        idx[:] = 2
        return y

    with pytest.raises(MutationError, match=r"argument 1 of \[\d+\] Branch.*f=getitem"):
        grad(f)(np.ones(3))


def test_mutation_after_the_pass_is_harmless_and_copies_are_fine():
    w = np.array([1.0, 2.0])

    def f(x):
        y = np.sum(x * w.copy())
        return y

    (g,) = grad(f)(np.ones(2))
    w[0] = 5.0
    np.testing.assert_array_equal(g, [1.0, 2.0])


def test_in_place_mutation_of_a_subclass_constant(tmp_path):
    m = np.memmap(tmp_path / "w.dat", dtype=float, mode="w+", shape=(2,))
    m[:] = [1.0, 2.0]

    def f(x):
        y = np.sum(x * m)
        m[0] = 10.0
        return y

    with pytest.raises(MutationError, match=r"argument 1 of \[\d+\] Branch.*f=multiply"):
        grad(f)(np.ones(2))
    _still_works()


def test_matrix_or_masked_constant_meeting_a_node():
    masked = np.ma.array([1.0, 2.0], mask=[False, True])
    with pytest.raises(TypeError, match="masked array.*use the mask explicitly"):
        grad(lambda x: np.sum(x * masked))(np.ones(2))
    with pytest.raises(TypeError, match="masked array.*use the mask explicitly"):
        grad(lambda x: np.sum(masked * x))(np.ones(2))
    _still_works()


def test_in_place_methods_of_a_node():
    def f(x):
        y = x * 1.0
        y.sort()
        y[:1].fill(2.0)
        y.put([2], [y[1] * 3.0])
        return np.sum(y * np.array([1.0, 2.0, 3.0]))

    x = np.array([0.3, -0.2, 0.1])
    value, (g,) = value_and_grad(f)(x)
    assert value == f(x.copy())  # NumPy's program on the ndarray
    np.testing.assert_allclose(g, numeric_grad(f, (x,), 0), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:you are shuffling")
def test_compiled_shuffle_of_a_node_with_rows():
    rng = np.random.default_rng(0)
    with pytest.raises(TypeError, match=r"duplicate rows.*x\[rng\.permutation\(len\(x\)\)\]"):
        grad(lambda x: np.sum((y := x * 1.0, rng.shuffle(y))[0] * x))(np.ones((3, 2)))
    _still_works()


# -- rules ------------------------------------------------------------------------------


def test_missing_rule():
    with pytest.raises(
        MissingRuleError, match=r"(?s)_no_rule has no sensitivity.*@tape\.sensitivity"
    ):
        grad(lambda x: _no_rule(x))(1.0)
    ufunc = np.frompyfunc(lambda v: v, 1, 1)
    with pytest.raises(MissingRuleError, match="cannot be entered"):
        grad(lambda x: ufunc(x))(1.0)
    _still_works()


def test_rule_returning_the_wrong_shape():
    def f(x):
        return np.sum(_wrong_shape(np.sin(x)))

    with pytest.raises(ValueError, match=r"returned shape \(4,\).*argument's shape \(3,\)") as info:
        grad(f)(np.ones(3))
    note = "\n".join(info.value.__notes__)
    assert "f=_wrong_shape" in note and "tape.debug()" in note


def test_error_in_a_rule_names_the_branch_and_under_debug_the_line():
    def f(x):
        y = np.cos(x)
        z = _failing(y)  # the line the note must show
        return np.sum(z)

    with pytest.raises(ZeroDivisionError) as info:
        grad(f)(np.ones(2))
    assert re.search(r"\[2\] Branch.*f=_failing", info.value.__notes__[0])
    with debug(), pytest.raises(ZeroDivisionError) as info:
        grad(f)(np.ones(2))
    note = info.value.__notes__[0]
    assert f'File "{__file__}"' in note and "z = _failing(y)  # the line" in note
    _still_works()


def test_node_as_keyword_argument_without_a_place_among_the_positional_ones():
    # np.pad's constant_values= travels in **kwargs: no position for a rule to be keyed by
    with pytest.raises(TypeError, match="keyword argument 'constant_values'.*positionally"):
        grad(lambda x: np.sum(np.pad(x, 1, constant_values=x[0])))(np.ones(2))
    _still_works()


# -- tapes ------------------------------------------------------------------------------


def test_a_node_leaked_from_a_finished_grad_is_a_constant():
    kept = []

    def f(x):
        kept.append(x)
        return x * 2.0

    grad(f)(1.0)
    # its pass has ended: it is a constant, its value, in a new pass and outside one
    assert grad(lambda y: y * kept[0] * y)(3.0) == (2 * 3.0 * 1.0,)
    assert np.sin(kept[0]) == np.sin(1.0) and type(np.sin(kept[0])) is np.float64


def test_nodes_of_another_live_tape_are_constants():
    outer, inner = Tape(), Tape()
    a = Leaf(outer, 2.0)
    b = Leaf(inner, 3.0)
    y = a * b  # recorded on inner (made later); a is a constant there
    rt = propagate(inner, reverse_tape(y))
    assert rt[b] == 2.0
    with pytest.raises(KeyError, match="not on the reverse tape"):
        rt[a]


def test_reverse_tape_of_another_tape():
    t1, t2 = Tape(), Tape()
    y = Leaf(t1, 1.0) * 2.0
    Leaf(t2, 1.0)
    with pytest.raises(ValueError, match="made for another tape"):
        propagate(t2, reverse_tape(y))


def test_seed_of_the_wrong_shape():
    t = Tape()
    y = Leaf(t, np.ones(2)) * 2.0
    with pytest.raises(ValueError, match=r"seed ybar has shape \(3,\)"):
        reverse_tape(y, np.ones(3))


def test_records_added_after_the_reverse_tape():
    t = Tape()
    x = Leaf(t, 1.0)
    y = x * 2.0
    rt = reverse_tape(y)
    np.sin(x)
    with pytest.raises(ValueError, match="make the reverse tape after recording"):
        propagate(t, rt)


# -- failures leave nothing behind --------------------------------------------------------


def test_exception_inside_f_leaves_no_state():
    import gc

    def f(x):
        np.sin(x)
        raise KeyError("user bug")

    with pytest.raises(KeyError, match="user bug"):
        grad(f)(1.0)
    assert gc.isenabled()
    assert tape.core.observing.observing.get() is None
    _still_works()


def test_exception_inside_a_rule_leaves_no_state():
    import gc

    with pytest.raises(ZeroDivisionError):
        grad(lambda x: _failing(x))(1.0)
    with pytest.raises(ZeroDivisionError), detect_anomaly():
        grad(lambda x: _failing(x))(1.0)
    assert gc.isenabled()
    assert tape.core.observing.observing.get() is None
    _still_works()


# -- NaN and infinity -------------------------------------------------------------------


def test_nan_gradient_found_by_detect_anomaly():
    def f(x):
        safe = np.where(x > 0, x, 1.0)
        return np.sum(np.where(x > 0, np.log(x), 0.0) + safe)  # log(0) = -inf, masked

    x = np.array([0.0, 2.0])
    with np.errstate(all="ignore"):
        (g,) = grad(f)(x)  # the classic: a NaN from 0 * inf in where's masked branch
        assert np.isnan(g[0])
        with detect_anomaly(forward=False), pytest.raises(AnomalyError) as info:
            grad(f)(x)
        assert "sensitivity of log" in str(info.value)
        assert "np.where(x > 0, np.log(x), 0.0)" in str(info.value)
        with (
            detect_anomaly(),
            pytest.raises(AnomalyError, match=r"log returned -?inf from finite inputs"),
        ):
            grad(f)(x)


def test_no_false_alarm_on_finite_programs():
    def f(x):
        return np.sum(np.tanh(x) ** 2)

    x = np.array([0.2, -1.3])
    with detect_anomaly():
        (g,) = grad(f)(x)
    np.testing.assert_allclose(g, numeric_grad(f, (x,), 0), rtol=1e-6)


# -- the table --------------------------------------------------------------------------


def test_every_row_of_the_table_names_a_test_that_exists():
    rows = [
        line for line in DOC.read_text().splitlines() if line.startswith("| ") and "`test_" in line
    ]
    assert len(rows) >= 20
    names = set(globals())  # and the tests of the modules that raise, which the table names
    for path in INPLACE.parents[2].rglob("test_*.py"):
        names |= set(re.findall(r"^def (test_\w+)", path.read_text(), re.MULTILINE))
    for row in rows:
        for name in re.findall(r"`(test_\w+)`", row):
            assert name in names, name


def test_a_reverse_pass_error_in_grad_runs_f_once_and_under_debug_names_the_line():
    import inspect

    from tape import primitive, sensitivity

    @primitive
    def fragile(x):
        return x * 2

    sensitivity(fragile, 0)(lambda y, ybar, x: 1 // 0)
    calls = []

    def loss(x):
        calls.append(1)  # a side effect: it must happen once per call of grad
        y = np.sin(x)
        z = fragile(y)  # the line the error must point at
        return np.sum(z)

    with pytest.raises(ZeroDivisionError) as info:
        grad(loss)(np.ones(3))
    assert len(calls) == 1
    notes = "\n".join(info.value.__notes__)
    assert "f=fragile" in notes and "tape.debug()" in notes
    with debug(), pytest.raises(ZeroDivisionError) as info:
        grad(loss)(np.ones(3))
    assert len(calls) == 2
    line = inspect.getsourcelines(loss)[1] + 3
    notes = "\n".join(info.value.__notes__)
    assert f"line {line}, in loss" in notes and "z = fragile(y)" in notes
    _still_works()


def test_rule_returning_an_extra_leading_axis():
    @primitive
    def doubled(x):
        return x * 2.0

    sensitivity(doubled, 0)(lambda y, ybar, x: np.ones((4,) + np.shape(x)))
    # the output has the argument's shape (3,): no axis in front was broadcast away
    with pytest.raises(ValueError, match=r"returned shape \(4, 3\).*argument's shape \(3,\)"):
        grad(lambda x: np.sum(doubled(x)))(np.ones(3))
    # where the output has that axis, summing it is undoing broadcasting: d/dx sum(x + z)
    gx, gz = grad(lambda x, z: np.sum(x + z))(np.ones(3), np.ones((4, 3)))
    np.testing.assert_array_equal(gx, [4.0, 4.0, 4.0])
    _still_works()


def test_rule_returning_a_string():
    @primitive
    def stringly(x):
        return x * 2.0

    sensitivity(stringly, 0)(lambda y, ybar, x: "3.0")
    with pytest.raises(TypeError, match="stringly for argument 0 returned str '3.0'"):
        grad(stringly)(1.0)
    _still_works()


def test_registering_a_rule_that_could_never_be_used():
    def square(x):
        return x**2

    with pytest.raises(TypeError, match=r"square is a plain Python function.*primitive"):
        sensitivity(square, 0)
    with pytest.raises(TypeError, match="needs a function f, got int 42"):
        sensitivity(42, 0)
    with pytest.raises(TypeError, match="sin takes 1 positional argument"):
        sensitivity(np.sin, 1)
    with pytest.raises(TypeError, match="argnum must be a non-negative int"):
        sensitivity(np.sin, -1)
    _still_works()


def test_replacing_a_rule_warns_unless_override():
    from sensitivities.registry import RuleReplacedWarning, lookup

    @primitive
    def tripled(x):
        return x * 3.0

    sensitivity(tripled, 0)(lambda y, ybar, x: 3.0 * ybar)
    with pytest.warns(RuleReplacedWarning, match="replacing the rule of tripled for argument 0"):
        sensitivity(tripled, 0)(lambda y, ybar, x: 3.0 * ybar)
    built_in = lookup(np.sin).plain[0]
    with pytest.warns(RuleReplacedWarning, match="rule of sin"):
        sensitivity(np.sin, 0)(built_in)  # the same rule again: still a replacement, said so
    sensitivity(np.sin, 0, override=True)(built_in)  # no warning: said to be meant
    assert grad(np.sin)(0.5) == (np.cos(0.5),)
    _still_works()


def test_numpy_scalar_and_tolist_of_a_node():
    with pytest.raises(NodeConversionError, match=r"np\.float64\(node\)"):
        grad(lambda x: np.float64(x) * x)(1.0)
    with pytest.raises(NodeConversionError, match=r"node\.tolist\(\)"):
        grad(lambda x: np.sum(np.array(x.tolist())))(np.ones(2))
    _still_works()


def test_the_preallocated_buffer_error_leads_with_the_fix():
    def scalar(x):
        a = np.zeros(3)
        a[0] = x[0]
        return np.sum(a)

    def rows(x):
        a = np.zeros((3, 2))
        a[1] = x[:2]
        return np.sum(a)

    def augmented(x):
        a = np.zeros(3)
        a[2] += x[0]
        return np.sum(a)

    for f in (scalar, rows, augmented):
        with pytest.raises((ValueError, TypeError)) as info:
            grad(f)(np.ones(3))
        error = info.value if isinstance(info.value, NodeConversionError) else info.value.__cause__
        assert isinstance(error, NodeConversionError)
        message = str(error)
        assert message.startswith("a[i] = node stores a node into an ndarray")
        assert "a = np.zeros_like(x)  " in message
        assert "a = np.zeros_like(x, shape=(n, 2))" in message
        assert "a = tape.at(a)[i].set(node)" in message
        assert len(message) < 400 and len(message.splitlines()) == 4
    with pytest.raises(NodeConversionError, match="Python number") as info:
        grad(lambda x: float(x))(1.0)
    assert "a[i] = node" not in str(info.value)

    def fixed(x):  # the fix the message shows, in 2-D, records
        a = np.zeros_like(x, shape=(3, 2))
        a[1] = x[:2]
        a[2, 0] = x[2]
        return np.sum(a**2)

    np.testing.assert_allclose(grad(fixed)(np.array([1.0, 2.0, 3.0]))[0], [2.0, 4.0, 6.0])


def test_pickling_a_node():
    import pickle

    with pytest.raises(TypeError, match="cannot pickle a node.*cannot leave"):
        grad(lambda x: pickle.loads(pickle.dumps(x)) * x)(1.0)
    _still_works()


def test_exact_numbers_bytes_and_memory_of_a_node():
    import statistics

    with pytest.raises(NodeConversionError, match=r"as_integer_ratio.*np\.mean"):
        grad(lambda x: statistics.mean(list(x)))(np.ones(3))
    with pytest.raises(NodeConversionError, match=r"tobytes"):
        grad(lambda x: np.sum(x.tobytes() and x))(np.ones(3))
    with pytest.raises(TypeError, match=r"view\(dtype\).*astype"):
        grad(lambda x: np.sum(x.view(np.int64)))(np.ones(3))
    with pytest.raises(AttributeError, match=r"node\.value\.flags"):
        grad(lambda x: x.flags and np.sum(x))(np.ones(3))
    _still_works()


def test_isscalar_of_a_node_answers_for_its_value_and_ndim_too():
    def branch(x):
        scalar = np.isscalar(x)  # NumPy's answer for the node's value
        return (x * 2.0 if scalar else x * 3.0), np.ndim(x) == 0

    assert branch(1.5) == (3.0, True) and branch(np.float64(1.5))[0] == 3.0
    assert branch(np.array(1.5))[0] == 4.5  # a 0-d array is no scalar to NumPy
    assert grad(lambda x: branch(x)[0])(1.5) == (2.0,)  # the scalar path, as NumPy takes
    assert grad(lambda x: branch(x)[0])(np.array(1.5)) == (3.0,)  # the array path
    assert value_and_grad(lambda x: branch(x)[1] and x)(1.5) == (1.5, (1.0,))
