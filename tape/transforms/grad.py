"""``grad`` and ``value_and_grad``: one forward pass on a fresh tape, one reverse pass."""

from __future__ import annotations

import functools
import inspect
import operator
from typing import Any, Callable, Sequence

import numpy as np

from sensitivities.registry import value_of

from ..core.duck_arrays import is_duck_array
from ..core.gradients import Gradients
from ..core.node import Node
from ..core.recording import current
from ..core.records import Leaf, Tape
from ..core.reverse import ReverseTape, reverse_pass
from ..core.reverse import propagate as _propagate
from ..core.trees import tree_flatten, tree_unflatten
from ..runtime import run_pass

__all__ = [
    "grad",
    "value_and_grad",
    "argnums_spec",
    "normalise_argnums",
    "check_input",
    "check_output",
    "record_inputs",
    "trace",
    "pull_back",
    "input_gradients",
    "as_input_type",
    "zeros_like_input",
    "own_array",
    "split_aux",
    "output_value",
    "propagate",
]


# -- grad -------------------------------------------------------------------------------


def _argument_name(f: Callable, i: int) -> str:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return f"argument {i}"
    if i < len(params) and params[i].kind in (
        params[i].POSITIONAL_ONLY,
        params[i].POSITIONAL_OR_KEYWORD,
    ):
        return f"argument {i} ({params[i].name!r})"
    return f"argument {i}"


def check_input(f: Callable, i: int, leaf: Any) -> None:
    """A clear TypeError unless ``leaf`` of argument ``i`` of ``f`` can be differentiated."""
    if type(leaf) is float or (type(leaf) is np.ndarray and leaf.dtype.kind in "fc"):
        return  # the common cases, without the questions below
    value = value_of(leaf)
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        _check_subclass(f, i, value)
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        if isinstance(value, (bool, int)):
            dtype = np.dtype(bool) if isinstance(value, bool) else np.dtype(int)
        elif isinstance(value, (float, complex)):
            return
        else:
            raise TypeError(
                f"cannot differentiate with respect to {_argument_name(f, i)} of "
                f"{getattr(f, '__name__', 'f')}: it is a {type(value).__name__}, not a float, "
                "an ndarray, or a tuple, list or dict of them"
            )
    if dtype.kind not in "fc":
        raise TypeError(
            f"cannot differentiate with respect to {_argument_name(f, i)} of "
            f"{getattr(f, '__name__', 'f')}: it has dtype {dtype}, and gradients need "
            "floating-point inputs; pass it as floats (np.asarray(x, dtype=float)) or "
            "leave it out with argnums"
        )


def _check_subclass(f: Callable, i: int, value: np.ndarray) -> None:
    # subclasses that change what NumPy's operations mean would be differentiated under
    # ndarray's meaning and give another program's gradient: refused, with the way out
    what = f"{_argument_name(f, i)} of {getattr(f, '__name__', 'f')}"
    if isinstance(value, np.matrix):
        raise TypeError(
            f"cannot differentiate with respect to {what}: it is an np.matrix, whose * and ** "
            "are matrix products, and tape follows ndarray semantics. Pass np.asarray(m) "
            "and write @ for the matrix product"
        )
    if type(value).__module__.startswith("numpy.ma"):
        raise TypeError(
            f"cannot differentiate with respect to {what}: it is a masked array, whose mask "
            "changes what sums and means count, and tape follows ndarray semantics. Pass "
            "the data and use the mask explicitly: np.where(mask, 0.0, x), x[~mask], or "
            "np.average(x, weights=~mask)"
        )


def as_input_type(g: Any, x: Any) -> Any:
    """The gradient ``g`` with the shape, dtype and kind (float or array) of input ``x``."""
    if type(x) is float and (type(g) is float or type(g) is np.float64):
        return float(g)  # a float's, the commonest, without the questions below (2 µs)
    if isinstance(g, Node):  # an outer tape's node, under nested differentiation
        if np.iscomplexobj(g) and not np.iscomplexobj(x):
            g = np.real(g)  # as below: recorded, so that the outer derivative is real too
        elif np.iscomplexobj(x) and not np.iscomplexobj(g):
            g = g + np.zeros_like(value_of(x))  # a complex input's gradient is complex
        if np.shape(g) != np.shape(x):
            g = np.broadcast_to(g, np.shape(x))
        return g
    if isinstance(x, Node):
        x = x.value
    if (
        type(g) is np.ndarray
        and type(x) is np.ndarray
        and g.dtype == x.dtype
        and g.shape == x.shape
        and g.flags.writeable
    ):
        return g  # the common case: already an array of the input's kind
    if (
        type(x) is np.ndarray
        and getattr(g, "dtype", None) == x.dtype
        and getattr(g, "shape", None) == x.shape
        and is_duck_array(g)
    ):
        return g  # under vmap, a batch of gradients of the input's kind (Dask's, CuPy's)
    dtype = x.dtype if is_duck_array(x) else np.result_type(x)
    if dtype.kind == "f" and np.iscomplexobj(g):
        g = np.real(g)  # a real input's gradient is real, also through complex intermediates
    if (type(g) is not np.ndarray and is_duck_array(g)) or (
        type(x) is not np.ndarray and is_duck_array(x)
    ):
        return _as_duck_array(g, x, dtype)
    if isinstance(x, np.generic):
        return dtype.type(g)
    if isinstance(x, (float, complex)):
        return type(x)(g)
    g = np.asarray(g, dtype=dtype)
    if g.shape != np.shape(x):
        g = np.broadcast_to(g, np.shape(x))
    if not g.flags.writeable:  # a broadcast view: hand the user an array of their own
        g = g.copy()
    return g


def _as_duck_array(g: Any, x: Any, dtype: np.dtype) -> Any:
    """The gradient where ``x`` or ``g`` is an array of another library (Dask, CuPy),
    never converted through an ndarray: a lazy gradient stays lazy, one on the GPU stays
    there. As in that library's promotion (ndarray op Dask array is a Dask array), a
    NumPy input whose gradient was computed from a Dask array gets a Dask array."""
    if not is_duck_array(g):  # a scalar or an ndarray (a rule's constant): into x's library
        g = np.asarray(g, like=x) if isinstance(g, np.ndarray) else np.full_like(x, g, dtype)
    if g.dtype != dtype:
        g = g.astype(dtype)
    shape = np.shape(x)
    if g.shape != shape:
        g = np.broadcast_to(g, shape).copy()  # a gradient of the user's own, not a view
    return g


def zeros_like_input(x: Any) -> Any:
    """The gradient of an input the output does not depend on."""
    x = value_of(x)
    if isinstance(x, (float, complex)):
        return type(x)(0)
    return np.zeros_like(x)


def argnums_spec(argnums: Any) -> Any:
    """``argnums`` as ``grad`` keeps it: None, one int, or a tuple of ints, checked when
    ``grad`` is called, so that a bool or a string is refused there and a generator is
    read once. Integers of any integer type (``np.int64``) are accepted."""
    if argnums is None:
        return None
    if isinstance(argnums, (bool, np.bool_)):
        raise TypeError(f"argnums must be an int or a sequence of ints, got the bool {argnums}")
    try:
        return operator.index(argnums)
    except TypeError:
        pass
    try:
        nums = tuple(argnums)
    except TypeError:
        raise TypeError(
            f"argnums must be an int or a sequence of ints, got {type(argnums).__name__}"
        ) from None
    for n in nums:
        if isinstance(n, (bool, np.bool_)) or not hasattr(type(n), "__index__"):
            raise TypeError(f"argnums must be ints, got {n!r} in {nums!r}")
    return tuple(operator.index(n) for n in nums)


def normalise_argnums(argnums: Any, nargs: int, fname: str) -> tuple[tuple[int, ...], bool]:
    """``argnums`` as a tuple of distinct non-negative positions, and whether it was one int."""
    argnums = argnums_spec(argnums)
    if argnums is None:
        return tuple(range(nargs)), False
    single = isinstance(argnums, int)
    nums = (argnums,) if single else argnums
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(
                f"argnums {n} is out of range: {fname} was called with {nargs} positional arguments"
            )
    nums = tuple(n % nargs for n in nums)
    if len(set(nums)) != len(nums):
        raise ValueError(f"argnums {argnums} names an argument more than once")
    return nums, single


def check_output(value: Any, fname: str, who: str) -> None:
    """A clear TypeError unless ``value``, what ``fname`` returned, is a real scalar (or
    an array of one element, taken as that scalar, as autograd does)."""
    if type(value) is np.float64 or type(value) is float:
        return  # the common case, surely fine
    value = value_of(value)  # under an outer derivative, a node of the outer tape
    wrong = _not_a_scalar(value, fname, who)
    if wrong:
        raise TypeError(f"{who} needs {fname} to return a real scalar, but it returned {wrong}")
    shape = np.shape(value)
    if shape != () and np.size(value) != 1:
        raise TypeError(
            f"{who} needs {fname} to return a scalar, but it returned shape {shape}; "
            "use jacobian or vjp for non-scalar outputs, or reduce the output (np.sum)"
        )
    if np.iscomplexobj(value):
        raise TypeError(f"{who} needs {fname} to return a real scalar, got a complex one")


def _not_a_scalar(value: Any, fname: str, who: str) -> str:
    """What is wrong with an output that is not a number or an array, or ''."""
    if value is None:
        return "None: does it end without `return`?"
    if isinstance(value, (bool, np.bool_)):
        return (
            f"the bool {value}: a comparison (np.allclose, x > 0) has no gradient; "
            "return the quantity itself"
        )
    if isinstance(value, (tuple, list)):
        return (
            f"a {type(value).__name__} of {len(value)}. If it is (value, aux), pass "
            f"has_aux=True; if {fname} is itself a gradient (grad returns a tuple, one entry "
            "per argument), ask for one entry: grad(grad(f, argnums=0), argnums=0)"
        )
    if isinstance(value, (str, bytes, dict)) or inspect.isgenerator(value):
        return f"a {type(value).__name__} ({value!r:.40})"
    if isinstance(value, np.ndarray) and value.dtype.kind not in "biufc":
        return f"an array of dtype {value.dtype}"
    if not isinstance(value, (int, float, complex, np.number, np.ndarray)):
        return "" if is_duck_array(value) else f"a {type(value).__name__}"
    return ""


def record_inputs(f: Callable, tape: Tape, args: tuple, nums: tuple) -> tuple[list, dict]:
    """``args`` with the leaves of ``args[i]`` (i in ``nums``) recorded on ``tape``, and
    for each such i the leaves, their structure and their nodes (None for a None leaf)."""
    args = list(args)
    inputs = {}
    for i in nums:
        leaves, treedef = tree_flatten(args[i])
        for leaf in leaves:
            if leaf is not None:
                check_input(f, i, leaf)
        # a None leaf is an empty part (an absent bias): nothing recorded, None back
        nodes = [None if leaf is None else Leaf(tape, leaf) for leaf in leaves]
        inputs[i] = (leaves, treedef, nodes)
        args[i] = tree_unflatten(treedef, nodes)
    return args, inputs


def trace(f: Callable, tape: Tape, args: tuple, kwargs: dict, nums: tuple) -> tuple[Any, dict]:
    """Record ``f(*args, **kwargs)`` on ``tape``, a fresh one: the leaves of ``args[i]``
    (i in ``nums``) first, as its inputs (``record_inputs``), then ``f``'s calls, with
    library conversions followed. Returns ``f``'s output and the inputs; where ``f``
    raises, the tape is released first, so that no record outlives the error.

    >>> import numpy as np
    >>> t = Tape()
    >>> out, inputs = trace(lambda x, c: np.sin(x) * c, t, (0.0, 2.0), {}, (0,))
    >>> len(t), t.owns(out), t.owns(inputs[0][2][0])
    (3, True, True)
    """
    try:
        args, inputs = record_inputs(f, tape, args, nums)
        return run_pass(True, f, *args, **kwargs), inputs
    except BaseException:
        tape.release()
        raise


def pull_back(
    tape: Tape, outs: Sequence, cotangents: Sequence, rtape: Any = None, free: bool = False
) -> list | None:
    """The reverse pass of ``tape`` from cotangents of its outputs: each of ``outs`` that
    is a node of ``tape`` gets its cotangent added into its slot, at its latest version
    (a node written in place); another output, or a None cotangent, adds nothing. The
    adjoints, slot for slot, or None where nothing was seeded (every input's gradient is
    then zero). ``rtape``: a reverse tape made for ``tape`` after recording, whose slots
    may hold adjoints already; ``free``: as for ``propagate``. The caller slows the
    collector and locates warnings (``fewer_collections``, ``located_warnings``), as
    ``grad`` does once around both passes.

    >>> t = Tape()
    >>> out, inputs = trace(lambda x: x * x, t, (3.0,), {}, (0,))
    >>> pull_back(t, [out], [1.0])[inputs[0][2][0].pos]
    6.0
    """
    outs = [current(out) for out in outs]  # may record: before the reverse tape is made
    if rtape is None:
        rtape = ReverseTape(tape)
    adjoints = rtape.adjoints
    seeded = False
    for out, ybar in zip(outs, cotangents):
        if ybar is not None and tape.owns(out):
            held = adjoints[out.pos]
            adjoints[out.pos] = ybar if held is None else held + ybar
            seeded = True
    return reverse_pass(tape, rtape, free).adjoints if seeded else None


def input_gradients(inputs: dict, nums: tuple, adjoint: Any) -> list:
    """One gradient per entry of ``nums``, read off the adjoints (None: all zeros); a
    None leaf's gradient is None."""
    grads = []
    handed: set = set()
    for i in nums:
        leaves, treedef, nodes = inputs[i]
        gs = []
        for x, node in zip(leaves, nodes):
            if node is None:
                gs.append(None)
                continue
            g = None if adjoint is None else adjoint[node.pos]
            g = zeros_like_input(x) if g is None else as_input_type(g, x)
            gs.append(own_array(g, handed))
        grads.append(tree_unflatten(treedef, gs))
    return grads


def own_array(g: Any, handed: set) -> Any:
    """``g``, or a copy where an earlier gradient of the same call is that very array (one
    adjoint can reach several inputs, ``x + y``, and each input gets an array of its own)
    or where it is read-only (a user's rule returned the view of ``ybar`` it was handed)."""
    if type(g) is np.ndarray:
        if id(g) in handed or not g.flags.writeable:
            g = g.copy()
        handed.add(id(g))  # the gradients are alive until returned: ids are not reused
    return g


def split_aux(out: Any, tape: Tape, fname: str, who: str) -> tuple[Any, Any]:
    """``(value, aux)`` from the pair ``f`` returned under ``has_aux=True``; the
    auxiliary data's nodes of ``tape`` become their values (it is not differentiated)."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(
            f"{who}(..., has_aux=True) needs {fname} to return a pair (value, aux), "
            f"got {type(out).__name__}"
        )
    value, aux = out
    leaves, treedef = tree_flatten(aux)
    return value, tree_unflatten(treedef, [output_value(a, tape) for a in leaves])


def output_value(out: Any, tape: Tape) -> Any:
    """The plain value of an output ``out`` of the differentiated function: a node of
    ``tape`` gives its value, as NumPy would have returned it, writeable (a copy of an
    array the tape froze, which its records still read); anything else as it is."""
    if tape.owns(out):
        out = out.value
        if type(out) is np.ndarray and not out.flags.writeable:
            return out.copy()
    return out


def _forward_and_reverse(
    f: Callable, argnums: Any, args: tuple, kwargs: dict, who: str, has_aux: bool = False
):
    fname = getattr(f, "__name__", "f")
    nums, single = normalise_argnums(argnums, len(args), fname)
    if not nums:
        raise ValueError(
            f"{who} needs at least one argument to differentiate {fname} with respect to"
        )
    tape = Tape()
    try:
        value, grads, aux = run_pass(
            True, _both_passes, f, tape, args, kwargs, nums, fname, who, has_aux
        )
    finally:
        tape.release()  # memory back at once; a node the caller keeps holds its value only
    return value, (grads[0] if single else Gradients(grads)), aux


def _both_passes(f, tape, args, kwargs, nums, fname, who, has_aux):
    # one pass for both (conversions on in the reverse pass too: its rules see plain
    # values, or an outer tape's nodes, whose own forward pass converts them anyway)
    args, inputs = record_inputs(f, tape, args, nums)
    out = f(*args, **kwargs)
    return _reverse(out, tape, inputs, nums, fname, who, has_aux)


def propagate(tape: Tape, rtape: ReverseTape, *, free: bool = False) -> ReverseTape:
    """The reverse pass of a tape built by hand (``tape.core.reverse.propagate``), run as
    a pass: the rules' NumPy warnings are told at the caller's line.

    >>> from tape import Tape, Leaf, reverse_tape, propagate
    >>> t = Tape()
    >>> x = Leaf(t, 3.0)
    >>> propagate(t, reverse_tape(x * x))[x]
    6.0
    """
    return run_pass(False, _propagate, tape, rtape, free=free)


def _reverse(out, tape, inputs, nums, fname, who, has_aux):
    """The value of ``f``'s output ``out``, the gradients of the inputs and the auxiliary
    data: the reverse pass from ``out``."""
    aux = None
    if has_aux:
        out, aux = split_aux(out, tape, fname, who)
    value = out.value if tape.owns(out) else out
    check_output(value, fname, who)
    adjoint = pull_back(tape, [out], [seed_of(value)], free=True)
    return value, input_gradients(inputs, nums, adjoint), aux


def seed_of(value: Any) -> Any:
    """The adjoint a scalar output ``value`` is seeded with: 1.0 for a NumPy scalar, ones
    of its shape and type for an array of one element (seeded in its own library for a
    Dask or CuPy output, so that no rule broadcasts a NumPy 1.0 to a data set's shape)."""
    if type(value) is np.float64 or type(value) is float:
        return 1.0  # the commonest, without NumPy's dispatch (1 µs)
    return 1.0 if np.shape(value) == () and not is_duck_array(value) else np.ones_like(value)


def value_and_grad(
    f: Callable, argnums: int | Sequence[int] | None = None, has_aux: bool = False
) -> Callable:
    """``value_and_grad(f)(*args)`` is ``(f(*args), grad(f)(*args))`` from one forward
    and one reverse pass.

    With ``has_aux=True``, ``f`` returns a pair ``(value, aux)``: ``aux`` is carried
    along, not differentiated, and the result is ``((value, aux), grads)``.

    >>> from tape import value_and_grad
    >>> value_and_grad(lambda x, y: x * y)(3.0, 4.0)
    (12.0, (4.0, 3.0))
    >>> value_and_grad(lambda x: (x ** 2, {"input": x}), has_aux=True)(3.0)
    ((9.0, {'input': 3.0}), (6.0,))
    """

    argnums = argnums_spec(argnums)

    @functools.wraps(f)
    def value_and_gradient(*args: Any, **kwargs: Any):
        who = "value_and_grad"
        value, grads, aux = _forward_and_reverse(f, argnums, args, kwargs, who, has_aux)
        if isinstance(value, np.float64):
            value = float(value)
        elif type(value) is np.ndarray and not value.flags.writeable:
            value = value.copy()  # the tape froze it: the caller gets an array of its own
        return ((value, aux) if has_aux else value), grads

    return value_and_gradient


def grad(
    f: Callable, argnums: int | Sequence[int] | None = None, has_aux: bool = False
) -> Callable:
    """The gradient of scalar-valued ``f``.

    ``grad(f)(x, y)`` returns a tuple with one gradient per positional argument, or per
    entry of ``argnums``; an int ``argnums`` returns that one gradient alone. The tuple
    (a ``Gradients``) raises a ``TypeError`` that shows how to take the gradients out
    where NumPy would turn it into an array (``x - grad(f)(x)``). Each
    gradient has its argument's shape, dtype and container structure (tuple, list, dict,
    namedtuple); an argument that the output does not depend on gets zeros.

    With ``has_aux=True``, ``f`` returns a pair ``(value, aux)`` and the result is
    ``(grads, aux)``: ``aux`` (anything: predictions, a dict of metrics) is carried along
    and not differentiated.

    >>> import numpy as np
    >>> from tape import grad
    >>> grad(lambda x, y: x * y + np.sin(x))(0.6791074260357777, 0.8284134829000359)
    (1.6065471361170487, 0.6791074260357777)
    >>> grad(lambda w: np.sum(w ** 2), argnums=0)(np.array([1.0, 2.0]))
    array([2., 4.])
    >>> grad(lambda w: (np.sum(w ** 2), w * 10), argnums=0, has_aux=True)(np.array([1.0, 2.0]))
    (array([2., 4.]), array([10., 20.]))
    """

    argnums = argnums_spec(argnums)

    @functools.wraps(f)
    def gradient(*args: Any, **kwargs: Any):
        _, grads, aux = _forward_and_reverse(f, argnums, args, kwargs, "grad", has_aux)
        return (grads, aux) if has_aux else grads

    return gradient
