"""Conversions inside code the user does not own (``tape.runtime.conversions``):
np.asarray, np.array, np.r_, np.c_, np.append and np.full of nodes inside grad and the
transforms, NumPy's own results in a thread that is not recording, and no thread left
recording on any exit. References: central differences, or NumPy's values on ndarrays."""

from __future__ import annotations

import pickle
import signal
import sys
import threading
import time

import numpy as np
import pytest

import tape
from tape import (
    NodeConversionError,
    grad,
    hessian,
    jacobian,
    jvp,
    library_code,
    value_and_grad,
    vjp,
)
from tape.runtime.conversions import converting_threads, is_converting
from tests.fd import numeric_grad

RNG = np.random.default_rng(25)
NUMPYS_ASARRAY = np._core.multiarray.asarray  # NumPy's own, never wrapped


def _check(f, *args, argnum=0, rtol=1e-6):
    g = grad(f, argnum)(*args)
    np.testing.assert_allclose(g, numeric_grad(f, args, argnum), rtol=rtol, atol=1e-8)
    return g


def _restored():
    return not converting_threads and not is_converting()


# -- the conversions ---------------------------------------------------------------------

IDIOMS = {
    "asarray": lambda x: np.sum(np.sin(np.asarray(x)) * np.arange(3.0)),
    "asanyarray": lambda x: np.sum(np.asanyarray(x) ** 3),
    "array": lambda x: np.sum(np.array(x) ** 2 * x),
    "ascontiguousarray": lambda x: np.sum(np.ascontiguousarray(x[::-1]) * np.arange(3.0)),
    "asfortranarray": lambda x: np.sum(np.asfortranarray(np.outer(x, x))),
    "asarray_chkfinite": lambda x: np.sum(np.asarray_chkfinite(x) ** 2),
    "list of scalars": lambda x: np.sum(np.array([x[0], x[1] * x[2], 3.0]) ** 2),
    "tuple": lambda x: np.prod(np.array((x[0], 2.0 * x[1]))),
    "nested lists": lambda x: np.sum(np.array([[x[0], 1.0], [x[1], x[2]]]) @ x[:2]),
    "list of vectors": lambda x: np.sum(np.array([x, x**2]) * np.arange(6.0).reshape(2, 3)),
    "list of an array and a node": lambda x: np.sum(np.array([np.ones(3), x]) ** 2),
    "ndmin": lambda x: np.sum(np.array(x, ndmin=3)[0, 0] ** 2),
    "r_": lambda x: np.sum(np.r_[x, 1.0, x[:2]] * np.arange(6.0)),
    "r_ of scalars": lambda x: np.sum(np.r_[x[0], x[1]] ** 2),
    "c_": lambda x: np.sum(np.c_[x, x**2] * np.arange(6.0).reshape(3, 2)),
    "append of lists": lambda x: np.sum(np.append([x[0], x[1]], [x[2], 1.0]) ** 2),
    "append with axis": lambda x: np.sum(np.append([x], [x**2], axis=0) ** 2),
    "full": lambda x: np.sum(np.full((2, 3), x[0]) * x),
    "full of a vector": lambda x: np.sum(np.full((2, 3), x) ** 2),
    "full_like of an ndarray": lambda x: np.sum(np.full_like(np.ones(3), x[1]) * x),
    "hstack of a list": lambda x: np.sum(np.hstack([[x[0]], [x[1], x[2]]]) ** 2),
}


@pytest.mark.parametrize("name", list(IDIOMS))
def test_conversions_of_nodes_are_recorded(name):
    f = IDIOMS[name]
    x = RNG.normal(size=3)
    assert np.isclose(value_and_grad(f)(x)[0], f(x))  # the value is NumPy's
    _check(f, x)
    assert _restored()


def test_a_copy_is_a_copy_and_asarray_is_the_node_itself():
    # as in NumPy: writing to np.array(x) leaves x alone, writing to np.asarray(x) is
    # writing to x
    def copied(x):
        y = np.array(x)
        y[0] = 10.0
        return np.sum(x * y)

    def aliased(x):
        y = np.asarray(x)
        y[0] = 10.0
        return np.sum(x * y)

    x = np.array([1.0, 2.0, 3.0])
    for f in (copied, aliased):
        value, (g,) = value_and_grad(f)(x)
        assert value == f(x.copy())
        np.testing.assert_allclose(g, numeric_grad(f, (x,), 0), atol=1e-6)
    assert grad(aliased)(x)[0][0] == 0.0  # x[0] was overwritten by a constant


def test_dtype_ndmin_and_copy_follow_numpy():
    def f(x):
        a = np.array([x, x], dtype=np.float32, ndmin=3)
        assert a.dtype == np.float32 and a.shape == (1, 2, 3)
        b = np.asarray(x, dtype=np.complex128)
        assert b.dtype == np.complex128
        with pytest.raises(ValueError):
            np.array([x, x], copy=False)  # a stack is a copy, as NumPy says
        with pytest.raises(ValueError, match="inhomogeneous|sequence"):
            np.array([x, x[:2]])  # ragged, with NumPy's error
        ints = np.asarray(x, dtype=int)  # a cast to integers carries no gradient
        assert ints.dtype.kind == "i"
        return np.sum(a.astype(float)) + np.sum(np.real(b))

    np.testing.assert_allclose(grad(f)(np.ones(3))[0], 3.0 * np.ones(3))


def test_an_object_array_holds_the_nodes():
    def f(x):
        held = np.array([x[0], x[1]], dtype=object)
        assert held.dtype == object
        return held[0] * held[1]

    assert grad(f)(np.array([2.0, 3.0]))[0].tolist() == [3.0, 2.0]


def test_asarray_chkfinite_checks_the_value():
    with pytest.raises(ValueError, match="infs or NaNs"), pytest.warns(
        RuntimeWarning, match="divide by zero"
    ):
        grad(lambda x: np.sum(np.asarray_chkfinite(x / 0.0)))(np.ones(2))


def test_every_transform_converts():
    f = IDIOMS["list of scalars"]
    x = np.array([0.3, -1.2, 0.7])
    g = numeric_grad(f, (x,), 0)
    np.testing.assert_allclose(vjp(f, x)[1](1.0)[0], g, rtol=1e-6)
    np.testing.assert_allclose(jvp(f, (x,), (np.eye(3),))[1], g, rtol=1e-6)
    np.testing.assert_allclose(jacobian(f)(x), g, rtol=1e-6)
    H = hessian(f)(x)
    Hfd = np.array([numeric_grad(lambda x, i=i: grad(f)(x)[0][i], (x,), 0) for i in range(3)])
    np.testing.assert_allclose(H, Hfd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tape.compile_grad(f, x)(x)[0], g, rtol=1e-6)
    tape.check_grad(f, x)  # raises where the reverse pass and differences disagree
    assert _restored()


def test_nested_grad_converts_on_each_tape():
    # d/dx [x * d/dy sum(asarray([x, y]) ** 2)] = d/dx [x * 2y] at y = x: 2y = 2x... with
    # y held: d/dx (x * 2 y) = 2 y
    def inner(x, y):
        return np.sum(np.asarray([x, y]) ** 2)

    def outer(x):
        return x * grad(inner, 1)(x, 1.5)

    assert grad(outer)(0.7)[0] == pytest.approx(3.0)


# -- switched off, and out of reach -------------------------------------------------------


def test_library_code_false_switches_it_off_in_this_thread():
    f = IDIOMS["asarray"]
    with library_code(False):
        assert not is_converting()
        with pytest.raises(tape.NodeConversionError):
            grad(f)(np.ones(3))
        with library_code(True):
            _check(f, np.ones(3))
    _check(f, np.ones(3))
    assert _restored()


def test_the_thread_records_only_during_a_pass_and_not_after_errors():
    assert _restored()
    seen = []

    def f(x):
        seen.append(is_converting())
        raise KeyError("boom")

    with pytest.raises(KeyError):
        grad(f)(1.0)
    assert seen == [True]
    assert _restored() and not is_converting()


def test_restored_after_ctrl_c():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals go to the main thread")

    def f(x):
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.01)
        return x

    with pytest.raises(KeyboardInterrupt):
        grad(f)(1.0)
    assert _restored() and not is_converting()


def test_a_name_bound_before_under_another_name_is_out_of_reach():
    from numpy import asarray as bound_elsewhere  # noqa: F401 - the module's own name

    aa = NUMPYS_ASARRAY

    with pytest.raises(tape.NodeConversionError):
        grad(lambda x: np.sum(aa(x)))(np.ones(2))


# -- threads ------------------------------------------------------------------------------


def test_another_thread_gets_numpys_own_results_while_one_records():
    started, done = threading.Event(), threading.Event()
    results = {}

    def recording(x):
        started.set()
        done.wait(10)
        return np.sum(np.asarray(x) ** 2)

    def other():
        started.wait(10)
        results["other"] = (
            np.array([1, 2], dtype=np.float32),
            np.asarray([[1.0], [2.0]]),
            np.full(2, 3),
            np.r_[1, 2.5],
        )
        # NumPy's call forms and pickling, and no recording in this thread
        results["bystander"] = (
            np.array(object=[1.0]).tolist(),
            pickle.loads(pickle.dumps(np.asarray)) is np.asarray,
            is_converting(),
        )
        # a node reaching a thread that is not recording is refused, as outside grad
        leaf = tape.Leaf(tape.Tape(), np.ones(2))
        try:
            np.asarray(leaf)
        except tape.NodeConversionError:
            results["refused"] = True
        done.set()

    worker = threading.Thread(target=other)
    worker.start()
    g = grad(recording)(np.array([1.0, 2.0]))[0]
    worker.join()
    a, b, c, d = results["other"]
    assert type(a) is np.ndarray and a.dtype == np.float32 and a.tolist() == [1.0, 2.0]
    assert b.shape == (2, 1) and c.dtype.kind == "i" and d.tolist() == [1.0, 2.5]
    assert results["refused"] and g.tolist() == [2.0, 4.0]
    assert results["bystander"] == ([1.0], True, False)
    assert _restored()


def test_passes_in_several_threads_leave_none_recording():
    from concurrent.futures import ThreadPoolExecutor

    f = IDIOMS["list of vectors"]
    xs = [RNG.normal(size=3) for _ in range(16)]
    with ThreadPoolExecutor(4) as pool:
        grads = list(pool.map(lambda x: grad(f)(x)[0], xs))
    for x, g in zip(xs, grads):
        np.testing.assert_allclose(g, numeric_grad(f, (x,), 0), rtol=1e-6, atol=1e-8)
    assert _restored()


# -- compiled code -------------------------------------------------------------------------


def test_a_node_handed_to_compiled_code_names_the_library_line():
    ndimage = pytest.importorskip("scipy.ndimage")  # compiled, with no counterpart
    with pytest.raises(tape.NodeConversionError) as info:
        grad(lambda x: np.sum(ndimage.gaussian_filter1d(x, 1.0)))(np.array([1.5, 2.5, 3.0]))
    text = str(info.value)
    assert "scipy.ndimage" in text and "correlate1d" in text and "(line " in text
    assert "@tape.primitive" in text and "@tape.sensitivity" in text
    assert _restored()


def test_the_scan_reaches_a_module_imported_after_a_pass():
    # a module that binds np.asarray under its own name, imported between two passes
    import types

    module = types.ModuleType("late_library")
    exec("from numpy import asarray\ndef f(x):\n    return asarray(x) ** 2\n", module.__dict__)
    sys.modules["late_library"] = module
    try:
        assert grad(lambda x: np.sum(module.f(x)))(np.array([1.0, 2.0]))[0].tolist() == [2.0, 4.0]
    finally:
        del sys.modules["late_library"]
    # the module keeps the wrapper, which hands plain values to NumPy
    assert module.asarray.__wrapped__ is NUMPYS_ASARRAY
    assert module.f([1.0, 2.0]).tolist() == [1.0, 4.0]


def test_under_vmap_of_grad_a_batch_converts_per_example():
    def f(x):
        return np.sum(np.array([x[0], 2.0 * x[1]]) ** 2) + np.sum(np.asarray(x, dtype=float))

    X = RNG.normal(size=(4, 2))
    g = tape.vmap(grad(f))(X)[0]
    np.testing.assert_allclose(g, np.stack([grad(f)(x)[0] for x in X]))


@pytest.mark.parametrize("dtype", [int, np.int8, np.uint16, np.int64, bool])
def test_a_conversion_to_integers_is_a_constant(dtype):
    # NumPy's int(x) is piecewise constant: no gradient flows through the cast
    def f(x):
        held = np.array(x, dtype=dtype)
        listed = np.asarray([x[0], x[1]], dtype=dtype)
        assert type(held) is np.ndarray and held.dtype == np.dtype(dtype)
        return np.sum(held * x) + np.sum(listed) * x[2]

    x = np.array([0.5, -1.2, 2.0])
    expected = np.array(x, dtype=dtype).astype(float)
    expected[2] += float(np.sum(np.asarray(x[:2], dtype=dtype)))
    np.testing.assert_allclose(grad(f)(x)[0], expected)


def test_a_node_stored_into_an_ndarray_in_library_code_names_its_line(tmp_path):
    # a module installed as a library is: the error names its function and line
    import importlib.util

    path = tmp_path / "site-packages" / "stores_a_node.py"
    path.parent.mkdir()
    path.write_text(
        "import numpy as np\n\ndef f(x):\n    a = np.zeros(2)\n    a[0] = x[0]\n    return a\n"
    )
    spec = importlib.util.spec_from_file_location("stores_a_node", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ValueError) as info:  # NumPy's own error, the node's as its cause
        grad(lambda x: np.sum(module.f(x)))(np.ones(2))
    cause = str(info.value.__cause__)
    assert "stores_a_node.f (line 5)" in cause and "a[0] = x[0]" in cause
    assert "np.zeros_like" in cause and "@tape.primitive" in cause


@pytest.mark.parametrize(
    "name, call",
    [
        ("interp", lambda x: np.interp(1.5, [1.0, 2.0], [x[0], x[1]])),
        ("convolve", lambda x: np.sum(np.convolve([1.0, 2.0], [x[0], x[1]]))),
    ],
)
def test_a_list_holding_nodes_that_numpy_converts_says_to_stack_it(name, call):
    # (the reductions stack such a list themselves: test_reductions_of_a_list_...)
    x = np.array([1.0, 2.0])
    with pytest.raises(NodeConversionError, match=rf"np\.{name} hands a node .*np\.stack"):
        grad(call)(x)


_A, _B = np.array([1.0, 2.0, -0.5]), np.array([3.0, 0.5, 1.5])


@pytest.mark.parametrize(
    "reduce",
    [
        lambda a, b: np.sum([a, 2 * b]),
        lambda a, b: np.mean((a, b)),
        lambda a, b: np.std([a, b]),
        lambda a, b: np.sum(np.var([a, b], axis=0)),
        lambda a, b: np.sum(np.cumsum([a, b])),
        lambda a, b: np.prod([a, b]),
        lambda a, b: np.max([a, b]),
        lambda a, b: np.average([a, b], axis=0, weights=[0.25, 0.75]).sum(),
        lambda a, b: np.median((a, b)),
        lambda a, b: np.linalg.norm([a, b]),
        lambda a, b: np.sum(np.sort([a, b], axis=0)[0]),
        lambda a, b: np.sum([a[0], b[1], 2.0]),  # 0-d nodes and a number
    ],
)
def test_reductions_of_a_list_holding_nodes_record(reduce):
    expected = [numeric_grad(reduce, (_A, _B), k) for k in (0, 1)]
    value, got = tape.value_and_grad(reduce, argnums=(0, 1))(_A, _B)
    np.testing.assert_allclose(value, reduce(_A, _B), rtol=1e-15)  # NumPy's own value
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-9)


def test_isscalar_answers_for_a_nodes_value():
    def f(x):
        seen.append((np.isscalar(x[0]), np.isscalar(x), np.isscalar(np.sum(x))))
        return np.sum(x)

    seen = []
    grad(f)(_A)
    assert seen == [(np.isscalar(_A[0]), np.isscalar(_A), np.isscalar(np.sum(_A)))]


def test_setflags_on_a_node_is_accepted():
    def f(x):
        y = x * 2.0
        y.setflags(write=False)  # library code freezing what it hands on
        return np.sum(y**2)

    np.testing.assert_allclose(grad(f)(_A)[0], numeric_grad(f, (_A,), 0), rtol=1e-6)
