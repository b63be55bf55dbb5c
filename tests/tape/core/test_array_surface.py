"""tape.core.array_surface: one sweep over every method, property and operator of a node.

The names come from the class (``dir(Node)``), not from a list written here: each one
that works on a node is called under ``vmap`` on a batch and compared with NumPy applied
to each example, and under ``grad``, where its result is differentiable, with central
finite differences. A name added to the surface without a call below fails the sweep.
"""

import copy

import numpy as np
import pytest

from tape import Leaf, Tape, vmap
from tape.core.array_surface import ArraySurface
from tape.core.errors import NodeConversionError
from tape.core.node import Node
from tape.transforms.batching import Batched
from tests.fd import check_grads

rng = np.random.default_rng(0)
A = rng.uniform(0.5, 1.5, (3, 4))  # an operand the same for every example
W = rng.uniform(-1.0, 1.0, (4, 2))
SQUARE = rng.uniform(-1.0, 1.0, (4, 4))
LEFT = rng.uniform(-1.0, 1.0, (2, 3))


def _copied(method, *args, **kwargs):
    """A method that writes in place, called on a copy, which is the result."""

    def call(x):
        y = x.copy()
        getattr(y, method)(*args, **kwargs)
        return y

    return call


def _augmented(op, other):
    def call(x):
        y = x.copy()
        return op(y, other)

    return call


# name -> (input: "f" floats or "i" integers, one example of shape (3, 4); the call)
CALLS = {
    "T": ("f", lambda x: x.T),
    "mT": ("f", lambda x: x.mT),
    "real": ("f", lambda x: x.real),
    "imag": ("f", lambda x: x.imag),
    "shape": ("f", lambda x: x.shape),
    "ndim": ("f", lambda x: x.ndim),
    "size": ("f", lambda x: x.size),
    "dtype": ("f", lambda x: x.dtype),
    "itemsize": ("f", lambda x: x.itemsize),
    "nbytes": ("f", lambda x: x.nbytes),
    "strides": ("f", lambda x: x.copy().strides),
    "device": ("f", lambda x: x.device),
    "to_device": ("f", lambda x: x.to_device("cpu")),
    "flat": ("f", lambda x: x.flat[[1, 5]]),
    "all": ("f", lambda x: (x > 1.0).all(axis=0)),
    "any": ("f", lambda x: (x > 1.0).any(axis=1)),
    "argmax": ("f", lambda x: x.argmax(axis=1)),
    "argmin": ("f", lambda x: x.argmin()),
    "argpartition": ("f", lambda x: x.argpartition(1, axis=1)),
    "argsort": ("f", lambda x: x.argsort()),
    "astype": ("f", lambda x: x.astype(np.float32)),
    "choose": ("i", lambda k: (k % 2).choose([A, 2.0 * A])),
    "clip": ("f", lambda x: x.clip(0.8, 1.2)),
    "compress": ("f", lambda x: x.compress([True, False, True], axis=0)),
    "conj": ("f", lambda x: x.conj()),
    "conjugate": ("f", lambda x: x.conjugate()),
    "copy": ("f", lambda x: x.copy()),
    "cumprod": ("f", lambda x: x.cumprod(axis=1)),
    "cumsum": ("f", lambda x: x.cumsum()),
    "diagonal": ("f", lambda x: x.diagonal()),
    "dot": ("f", lambda x: x.dot(W)),
    "fill": ("f", _copied("fill", 2.0)),
    "flatten": ("f", lambda x: x.flatten()),
    "max": ("f", lambda x: x.max(axis=0)),
    "mean": ("f", lambda x: x.mean(axis=1)),
    "min": ("f", lambda x: x.min()),
    "nonzero": ("f", lambda x: x.nonzero()),
    "partition": ("f", _copied("partition", 1, axis=1)),
    "prod": ("f", lambda x: x.prod(axis=1)),
    "put": ("f", _copied("put", [0, 5], [1.0, 2.0])),
    "ravel": ("f", lambda x: x.ravel()),
    "repeat": ("f", lambda x: x.repeat(2, axis=0)),
    "reshape": ("f", lambda x: x.reshape(4, 3)),
    "round": ("f", lambda x: x.round(1)),
    "searchsorted": ("f", lambda x: x[0].searchsorted(A[0])),
    "sort": ("f", _copied("sort", axis=0)),
    "setflags": ("f", _copied("setflags", write=False)),
    "squeeze": ("f", lambda x: x.reshape(1, 3, 4).squeeze()),
    "std": ("f", lambda x: x.std(axis=0)),
    "sum": ("f", lambda x: x.sum(axis=1, keepdims=True)),
    "swapaxes": ("f", lambda x: x.swapaxes(0, 1)),
    "take": ("f", lambda x: x.take(0)),
    "trace": ("f", lambda x: x.trace()),
    "transpose": ("f", lambda x: x.transpose(1, 0)),
    "var": ("f", lambda x: x.var()),
    "view": ("f", lambda x: x.view()),
    "__abs__": ("f", lambda x: abs(x - 1.0)),
    "__neg__": ("f", lambda x: -x),
    "__pos__": ("f", lambda x: +x),
    "__invert__": ("i", lambda k: ~k),
    "__round__": ("f", lambda x: (round(x[0, 0]), round(x[1, 2], 1))),  # NumPy scalars
    "__bool__": ("f", lambda x: bool(x.sum() > -100.0)),  # the same for every example
    "__len__": ("f", lambda x: len(x)),
    "__iter__": ("f", lambda x: list(x)),
    "__contains__": ("f", lambda x: x[0, 0] in x),
    "__copy__": ("f", lambda x: copy.copy(x)),
    "__deepcopy__": ("f", lambda x: copy.deepcopy(x)),
    "__getitem__": ("f", lambda x: x[1:, [0, 2]]),
    "__setitem__": ("f", _copied("__setitem__", (0, slice(1, 3)), A[0, :2])),
    "__divmod__": ("f", lambda x: divmod(x, 0.3)),
    "__rdivmod__": ("f", lambda x: x.__rdivmod__(2.0)),
    "__matmul__": ("f", lambda x: x @ W),
    "__rmatmul__": ("f", lambda x: x.__rmatmul__(LEFT)),
    "__imatmul__": ("f", _augmented(lambda y, v: y.__imatmul__(v), SQUARE)),
}
for _name, _other in (("add", A), ("sub", A), ("mul", A), ("truediv", A), ("floordiv", 0.3),
                      ("mod", 0.3), ("pow", 1.5), ("lt", A), ("le", A), ("gt", A), ("ge", A),
                      ("eq", A), ("ne", A)):  # fmt: skip
    CALLS[f"__{_name}__"] = ("f", lambda x, n=_name, v=_other: getattr(x, f"__{n}__")(v))
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        CALLS[f"__r{_name}__"] = ("f", lambda x, n=_name: getattr(x, f"__r{n}__")(2.0))
        CALLS[f"__i{_name}__"] = (
            "f", _augmented(lambda y, v, n=_name: getattr(y, f"__i{n}__")(v), _other)
        )  # fmt: skip
for _name, _other in (("and", 3), ("or", 1), ("xor", 5), ("lshift", 1), ("rshift", 1)):
    CALLS[f"__{_name}__"] = ("i", lambda k, n=_name, v=_other: getattr(k, f"__{n}__")(v))
    CALLS[f"__r{_name}__"] = ("i", lambda k, n=_name, v=_other: getattr(k, f"__r{n}__")(v))
    CALLS[f"__i{_name}__"] = (
        "i", _augmented(lambda y, v, n=_name: getattr(y, f"__i{n}__")(v), _other)
    )  # fmt: skip

# Names that do not work on a node either: each turns it into plain values, bytes or a
# file, or resizes it in place, and raises (checked below) rather than lose the gradient.
REFUSED = {"item", "tolist", "as_integer_ratio", "tobytes", "tofile", "dump", "dumps",
           "resize", "__float__", "__int__", "__index__", "__complex__", "__array__"}  # fmt: skip
# ndarray's attributes about memory and layout, which a node refuses (checked below).
# (setflags is accepted: test_setflags_on_a_node_is_accepted)
MEMORY = {"base", "byteswap", "ctypes", "data", "flags", "getfield", "setfield"}
# The record's own fields, NumPy's protocols, printing, pickling (refused), identity and
# the class machinery: not the array's surface.
NOT_SURFACE = {"alias", "pos", "seal", "tape", "value", "_apply", "__array_function__",
               "__array_namespace__", "__array_priority__", "__array_ufunc__",
               "__record_call__", "__getattr__", "__slots__", "__module__", "__annotations__",
               "__str__", "__format__", "__hash__", "__doc__", "__getstate__", "__reduce__",
               "__reduce_ex__", "__init_subclass__", "__subclasshook__"}  # fmt: skip


def _surface() -> list:
    return sorted(
        name
        for name in dir(Node)
        if getattr(Node, name, None) is not getattr(object, name, None)
        and name not in NOT_SURFACE
        and name not in REFUSED
        and name not in MEMORY
    )


SURFACE = _surface()


def test_every_name_of_the_surface_has_a_call():
    assert set(SURFACE) <= set(CALLS), sorted(set(SURFACE) - set(CALLS))
    assert {n for n in vars(ArraySurface) if not n.startswith("_")} <= set(SURFACE)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_names_left_out_do_not_work_on_a_node(name):
    x = Leaf(Tape(), A.copy())
    attribute = getattr(x, name)
    with pytest.raises((NodeConversionError, TypeError)):
        attribute()


@pytest.mark.parametrize("name", sorted(MEMORY))
def test_the_memory_attributes_left_out_are_refused_by_a_node(name):
    with pytest.raises(AttributeError, match="about an array's memory"):
        getattr(Leaf(Tape(), A.copy()), name)


def _examples(kind: str) -> np.ndarray:
    if kind == "i":
        return rng.integers(1, 8, (4, 3, 4))
    return rng.uniform(0.5, 1.5, (4, 3, 4))


def _stacked(results: list) -> object:
    first = results[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stacked([r[k] for r in results]) for k in range(len(first)))
    return np.stack([np.asarray(r) for r in results])


def _holds_batch(out) -> bool:
    if isinstance(out, (tuple, list)):
        return any(_holds_batch(o) for o in out)
    return isinstance(out, Batched)


def _close(got, expected) -> None:
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _close(g, e)
        return
    assert np.shape(got) == np.shape(expected)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("name", SURFACE)
def test_under_vmap_each_name_is_numpy_on_each_example(name):
    kind, call = CALLS[name]
    xs = _examples(kind)
    expected = [call(x.copy()) for x in xs]
    # what is not an array (a shape, a dtype, "cpu") is the same for every example
    metadata = []

    def batched(x):
        assert type(x) is Batched
        out = call(x)
        if not _holds_batch(out):
            metadata.append(out)
            return np.zeros(())
        return out

    got = vmap(batched)(xs.copy())
    if metadata:
        assert all(e == metadata[0] for e in expected), (metadata[0], expected[0])
    else:
        _close(got, _stacked(expected))


def _gives_a_float64_node(name: str) -> bool:
    """Whether the name's call on a node of floats gives a float64 node: a result with a
    gradient to check (not a shape, a mask, indices or a NumPy scalar)."""
    if name not in CALLS:
        return True  # the sweep above fails for it; here, a KeyError says the same
    kind, call = CALLS[name]
    if kind != "f":
        return False
    try:
        out = call(Leaf(Tape(), A.copy()))
    except Exception:
        return True  # the test shows the error
    return isinstance(out, Node) and out.dtype == np.float64


DIFFERENTIABLE = [name for name in SURFACE if _gives_a_float64_node(name)]


def test_the_differentiable_names_are_the_float_results():
    assert {"T", "sum", "__matmul__", "__iadd__"} <= set(DIFFERENTIABLE)
    assert not {"shape", "argmax", "__lt__", "__and__", "nonzero"} & set(DIFFERENTIABLE)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_under_grad_each_differentiable_name_matches_finite_differences(name):
    _, call = CALLS[name]
    x = _examples("f")[0]
    check_grads(call, x, rtol=1e-5, atol=1e-6)
