"""NumPy's floating-point warnings name the user's line, as plain NumPy's do; a warning
of the reverse pass says which record's rule raised it."""

import _warnings
import warnings

import numpy as np
import pytest

from tape import Leaf, Tape, debug, grad, jvp, propagate, reverse_tape, value_and_grad, vjp

HERE = __file__


def log_sum(x):
    return np.sum(np.log(x))  # LOG_LINE


def line_of(marker):
    with open(HERE) as source:
        lines = enumerate(source, 1)
        return next(i for i, line in lines if marker in line and "line_of" not in line)


def caught(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return seen


@pytest.mark.parametrize("transform", [grad, value_and_grad, lambda f: lambda x: vjp(f, x)])
def test_a_forward_warning_names_the_users_line(transform):
    seen = caught(lambda: transform(log_sum)(np.array([0.0, 1.0])))
    forward = [w for w in seen if "reverse pass" not in str(w.message)]
    assert [str(w.message) for w in forward] == ["divide by zero encountered in log"]
    assert forward[0].filename == HERE and forward[0].lineno == line_of("LOG_LINE")
    assert forward[0].category is RuntimeWarning


def test_the_same_warnings_as_plain_numpy():
    def f(x):
        return np.sum(np.sqrt(x) + x / 0.0 + np.exp(x * 1000.0))

    x = np.array([-1.0, 1.0])
    plain = caught(lambda: f(x))
    taped = caught(lambda: grad(f)(x))
    got = [(w.filename, w.lineno, str(w.message)) for w in taped]
    assert [(w.filename, w.lineno, str(w.message)) for w in plain] == got[: len(plain)]
    assert all(w.filename == HERE for w in taped)


def test_within_pytest_warns_and_under_the_default_filters():
    with pytest.warns(RuntimeWarning, match="invalid value encountered in sqrt") as seen:
        grad(lambda x: np.sqrt(x))(-1.0)  # SQRT_LINE
    assert all(w.filename == HERE for w in seen)
    assert seen[0].lineno == line_of("SQRT_LINE")
    # "default": once per line of the user's code, not once per line of the engine
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        for _ in range(3):
            grad(lambda x: np.sum(np.log(x)))(np.zeros(2))  # FIRST
            grad(lambda x: np.sum(np.log(x)))(np.zeros(2))  # SECOND
    forward = [w.lineno for w in seen if str(w.message) == "divide by zero encountered in log"]
    assert forward == [line_of("FIRST"), line_of("SECOND")]


def test_a_reverse_pass_warning_names_the_record_and_under_debug_its_line():
    seen = caught(lambda: grad(lambda x: np.sum(np.sqrt(x)))(np.zeros(2)))  # GRAD_LINE
    (reverse,) = [w for w in seen if "reverse pass" in str(w.message)]
    message = str(reverse.message)
    assert message.startswith("divide by zero encountered in divide, in the reverse pass")
    assert "f=sqrt" in message and "tape.debug()" in message
    assert reverse.filename == HERE and reverse.lineno == line_of("GRAD_LINE")
    with debug():
        seen = caught(lambda: grad(lambda x: np.sum(np.sqrt(x)))(np.zeros(2)))  # DEBUG_LINE
    (reverse,) = [w for w in seen if "reverse pass" in str(w.message)]
    assert f'recorded at File "{HERE}", line {line_of("DEBUG_LINE")}' in str(reverse.message)


def test_manual_reverse_pass_and_forward_mode():
    t = Tape()
    x = Leaf(t, 0.0)
    y = np.sqrt(x)
    seen = caught(lambda: propagate(t, reverse_tape(y)))  # PROPAGATE_LINE
    assert [w.lineno for w in seen] == [line_of("PROPAGATE_LINE")]
    assert "record [1]" in str(seen[0].message)
    seen = caught(lambda: jvp(np.log, (0.0,), (1.0,)))  # JVP_LINE
    assert seen and all(w.filename == HERE for w in seen)


def test_the_users_own_error_state_is_kept():
    with np.errstate(divide="ignore"):
        assert caught(lambda: grad(log_sum)(np.array([0.0, 1.0]))) == []
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        grad(log_sum)(np.array([0.0, 1.0]))
    calls = []
    with np.errstate(divide="call", call=lambda kind, flag: calls.append(kind)):
        grad(log_sum)(np.array([0.0, 1.0]))
    assert calls and calls[0] == "divide by zero"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="divide by zero encountered in log"):
            grad(log_sum)(np.array([0.0, 1.0]))
    assert np.geterr()["divide"] == "warn"  # and nothing is left changed


def test_a_compiled_replay_warns_at_the_callers_line():
    from tape import compile_grad

    g = compile_grad(log_sum, np.ones(2))
    seen = caught(lambda: g(np.array([0.0, 1.0])))  # REPLAY_LINE
    assert seen and all(w.filename == HERE for w in seen)
    assert {w.lineno for w in seen} == {line_of("REPLAY_LINE")}


def test_a_script_without_a_source_file_warns_too():
    import subprocess
    import sys

    code = "import numpy as np, tape\ntape.grad(lambda x: np.sum(np.log(x)))(np.zeros(1))\n"
    result = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "<string>:2: RuntimeWarning: divide by zero encountered in log" in result.stderr


def empty_slices(x):
    # NumPy's Python code warns here with warnings.warn(stacklevel=2), from an entered function
    spread = np.nanvar(np.where(np.isnan(x), x, np.nan), axis=0)  # NANVAR_LINE
    return np.sum(x) + np.sum(np.nan_to_num(spread))


@pytest.mark.parametrize("transform", [grad, value_and_grad, lambda f: lambda x: vjp(f, x)])
def test_numpys_python_warnings_name_the_users_line_as_plain_numpy(transform):
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    plain = [(w.filename, w.lineno, str(w.message)) for w in caught(lambda: empty_slices(x))]
    assert plain == [(HERE, line_of("NANVAR_LINE"), "Degrees of freedom <= 0 for slice.")]
    ours = caught(lambda: transform(empty_slices)(x))
    ours = [(w.filename, w.lineno, str(w.message)) for w in ours if "slice" in str(w.message)]
    assert ours == plain


def test_other_warnings_pass_through_during_a_pass():
    def f(x):
        warnings.warn("the user's own", UserWarning, stacklevel=1)  # OWN_LINE
        warnings.warn(DeprecationWarning("an instance"), stacklevel=1)  # INSTANCE_LINE
        # the caller of f: grad's call, where plain Python names the line calling f
        warnings.warn("to the caller", UserWarning, stacklevel=2)
        return np.sum(x * x)

    seen = caught(lambda: grad(f)(np.ones(2)))  # CALLER_LINE
    assert [(w.filename, w.lineno, w.category, str(w.message)) for w in seen] == [
        (HERE, line_of("OWN_LINE"), UserWarning, "the user's own"),
        (HERE, line_of("INSTANCE_LINE"), DeprecationWarning, "an instance"),
        (HERE, line_of("CALLER_LINE"), UserWarning, "to the caller"),
    ]
    # the wrapper kept after the first pass: Python's own, named as Python's own, outside
    assert getattr(warnings.warn, "__wrapped__", warnings.warn) is _warnings.warn
    assert warnings.warn.__module__ == "warnings" and warnings.warn.__name__ == "warn"
    outside = caught(lambda: warnings.warn("outside", UserWarning, stacklevel=1))  # OUTSIDE_LINE
    assert [(w.filename, w.lineno) for w in outside] == [(HERE, line_of("OUTSIDE_LINE"))]
