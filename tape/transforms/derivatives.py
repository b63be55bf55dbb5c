"""The derivatives beyond ``grad``: ``jvp``, ``vjp``, ``jacobian``, ``hessian`` and ``hvp``.

Each is a few lines over two passes: the reverse pass of ``tape.core.reverse`` and the
forward pass of ``tape.transforms.forward``. They nest freely, because every tape has its
own level.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sensitivities.registry import value_of

from ..core.duck_arrays import is_duck_array
from ..core.errors import describe
from ..core.node import Node
from ..core.recording import current
from ..core.records import Branch, Leaf, Tape
from ..core.trees import tree_flatten, tree_leaves_like, tree_map, tree_unflatten
from ..runtime import run_pass
from .forward import ForwardTape, push_forward
from .grad import (
    check_input,
    grad,
    input_gradients,
    normalise_argnums,
    output_value,
    pull_back,
    trace,
)
from .vmap import BatchingError, vmap

__all__ = ["jvp", "vjp", "jacobian", "hessian", "hvp"]


def _like(t: Any, *values: Any) -> Any:
    """A plain derivative in the dtype of the values it relates (float32 stays float32)."""
    if not isinstance(t, (np.ndarray, np.generic)):
        return t
    dtypes = [np.result_type(value_of(v)) for v in values]
    if not all(d.kind in "fc" for d in dtypes):
        return t
    return t.astype(np.result_type(*dtypes), copy=False)


def _readable(t: Any) -> Any:
    """A plain float64 scalar reads as a Python float, as ``grad``'s results do."""
    if isinstance(t, np.float64) or (
        type(t) is np.ndarray and t.shape == () and t.dtype == np.float64
    ):
        return float(t)
    return t


# -- forward mode -----------------------------------------------------------------------


def _directions(primals: list, tangents: list) -> tuple[int, bool]:
    """How many directions the tangents hold, and whether they come batched (with a
    leading axis of directions) rather than as one direction of the primal's shape."""
    kinds = set()
    counts = set()
    for x, t in zip(primals, tangents):
        if t is None:
            continue
        xs, ts = np.shape(x), np.shape(t)
        if ts == xs:
            kinds.add(False)
        elif len(ts) == len(xs) + 1 and ts[1:] == xs:
            kinds.add(True)
            counts.add(ts[0])
        else:
            raise ValueError(
                f"a tangent of shape {ts} does not fit a primal of shape {xs}: give the "
                f"primal's shape, or (k,) + {xs} for k directions at once"
            )
    if len(kinds) > 1:
        raise ValueError(
            "either every tangent is batched (a leading axis of directions) or none is"
        )
    if len(counts) > 1:
        raise ValueError(f"batched tangents disagree on the number of directions: {sorted(counts)}")
    return (counts.pop() if counts else 1), kinds == {True}


def _as_tangent(t: Any, x: Any, batched: bool) -> Any:
    if not isinstance(t, Node):
        dtype = np.result_type(value_of(x))
        dtype = dtype if dtype.kind in "fc" else np.dtype(np.float64)
        if is_duck_array(t):  # a batched tangent (under vmap), a Dask or CuPy array
            t = t if t.dtype == dtype else t.astype(dtype)
        else:
            t = np.array(t, dtype=dtype)  # a copy: no result may be the caller's array
    return t if batched else t[None]


def jvp(f: Callable, primals: Sequence, tangents: Sequence) -> tuple[Any, Any]:
    """``(f(*primals), J v)``: the Jacobian-vector product along ``tangents``, in one
    forward pass of dual numbers.

    ``tangents`` matches ``primals`` (same structure; a ``None`` tangent makes that
    argument or leaf a constant, and a ``None`` leaf of a primal takes a ``None``
    tangent; a ``None`` output gets a ``None`` tangent). A tangent of shape
    ``(k,) + x.shape`` holds ``k`` directions at once: the result then has a leading
    axis of ``k``, and a whole Jacobian is one pass (see ``jacobian``).

    >>> import numpy as np
    >>> from tape import jvp
    >>> jvp(np.sin, (0.0,), (1.0,))
    (0.0, 1.0)
    >>> x = np.array([1.0, 2.0])
    >>> y, ydot = jvp(lambda x: x ** 2, (x,), (np.eye(2),))  # two directions at once
    >>> ydot
    array([[2., 0.],
           [0., 4.]])
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            "jvp(f, primals, tangents) takes a tuple of primals and a tuple of tangents"
        )
    if len(primals) != len(tangents):
        raise ValueError(f"jvp got {len(primals)} primals but {len(tangents)} tangents")
    leaves, treedefs, tleaves = [], [], []
    for i, (x, t) in enumerate(zip(primals, tangents)):
        xl, xd = tree_flatten(x)
        tl = [None] * len(xl) if t is None else tree_leaves_like(t, xd)
        if tl is None:
            raise ValueError(
                f"the tangent of argument {i} does not have the primal's structure {xd!r}"
            )
        for leaf, tangent in zip(xl, tl):
            if tangent is None:
                continue
            if leaf is None:
                raise ValueError(
                    f"the tangent of argument {i} has a value where the primal has None: "
                    "give None there"
                )
            check_input(f, i, leaf)
        leaves += xl
        tleaves += tl
        treedefs.append((len(xl), xd))
    k, batched = _directions(leaves, tleaves)
    tleaves = [None if t is None else _as_tangent(t, x, batched) for x, t in zip(leaves, tleaves)]

    def flat_f(*flat):
        args, start = [], 0
        for count, treedef in treedefs:
            args.append(tree_unflatten(treedef, flat[start : start + count]))
            start += count
        return f(*args)

    out, tape = push_forward(flat_f, leaves, {}, tleaves, k)
    try:
        outs, out_def = tree_flatten(out)
        ys = [output_value(o, tape) for o in outs]
        ydots = [None if o is None else tape.tangent(o) for o in outs]  # None: None
    finally:
        tape.release()
    if not batched:
        ydots = [None if t is None else t[0] for t in ydots]
    ydots = [None if t is None else _readable(_like(t, y)) for t, y in zip(ydots, ys)]
    ys = [_readable(y) for y in ys]
    return tree_unflatten(out_def, ys), tree_unflatten(out_def, ydots)


# -- reverse mode -----------------------------------------------------------------------


class _Pullback:
    """The linear map ``ybar -> J^T ybar`` of one recorded call; it keeps the tape, so
    it can be applied any number of times without running ``f`` again."""

    __slots__ = ("tape", "outs", "out_def", "inputs", "nums", "__weakref__")

    def __init__(self, tape, outs, out_def, inputs, nums):
        self.tape, self.outs, self.out_def, self.inputs, self.nums = (
            tape,
            outs,
            out_def,
            inputs,
            nums,
        )

    def __del__(self) -> None:
        # break the tape <-> record cycles, so the memory goes back with the pullback
        self.tape.release()

    def __call__(self, ybar: Any) -> tuple:
        ybars = tree_leaves_like(ybar, self.out_def)
        if ybars is None:
            raise ValueError(
                f"the cotangent has {len(tree_flatten(ybar)[0])} parts but the output has "
                f"{len(self.outs)}, or another structure: give one of the output's structure"
            )
        for out, yb in zip(self.outs, ybars):
            if yb is None:  # no cotangent: zero there
                continue
            if out is None:
                raise ValueError(
                    "the cotangent has a value where the output has None: give None there"
                )
            shape = np.shape(value_of(out))
            if np.shape(yb) != shape:
                raise ValueError(
                    f"a cotangent of shape {np.shape(yb)} was given for an output of shape {shape}"
                )
        # a rule may hand a cotangent on to an input's gradient: the caller's stays theirs
        ybars = [yb.copy() if type(yb) is np.ndarray else yb for yb in ybars]
        adjoint = run_pass(False, pull_back, self.tape, self.outs, ybars)
        return tuple(input_gradients(self.inputs, self.nums, adjoint))


def _vjp(f, nums, args, kwargs):
    tape = Tape()
    out, inputs = run_pass(False, trace, f, tape, args, kwargs, nums)
    outs, out_def = tree_flatten(out)
    y = tree_unflatten(out_def, [output_value(o, tape) for o in outs])
    return y, _Pullback(tape, outs, out_def, inputs, nums)


def vjp(f: Callable, *args: Any) -> tuple[Any, Callable]:
    """``(f(*args), pullback)``, where ``pullback(ybar)`` is the tuple of the gradients of
    ``<ybar, f(*args)>`` with respect to each argument: ``J^T ybar``.

    ``f`` runs once; the pullback keeps its tape, and may be called again and again with
    other cotangents (of the output's shape and structure; ``None`` where the output is
    ``None``). A ``None`` leaf of an argument gets ``None`` back.

    >>> import numpy as np
    >>> from tape import vjp
    >>> y, pullback = vjp(lambda x: x ** 2, np.array([1.0, 2.0, 3.0]))
    >>> pullback(np.array([1.0, 0.0, 0.0]))
    (array([2., 0., 0.]),)
    >>> pullback(np.ones(3))
    (array([2., 4., 6.]),)
    """
    return _vjp(f, tuple(range(len(args))), args, {})


# -- Jacobians --------------------------------------------------------------------------


def _identity_blocks(xs: list, k: int) -> list:
    """For each input, its slice of the identity in ``k`` directions: input ``i`` gets
    the directions ``offset_i .. offset_i + size_i`` (a None input gets None)."""
    tangents, offset = [], 0
    for x in xs:
        if x is None:
            tangents.append(None)
            continue
        value = value_of(x)
        n = int(np.size(value))
        dtype = np.result_type(value)
        t = np.zeros((k, n), dtype=dtype if dtype.kind in "fc" else np.float64)
        t[offset : offset + n] = np.eye(n, dtype=t.dtype)
        tangents.append(t.reshape((k,) + np.shape(value)))
        offset += n
    return tangents


def _blocks(t: Any, sizes: list, lead_shape: tuple, shapes: list) -> list:
    """Split a tangent with ``sum(sizes)`` directions first into one block per input,
    each reshaped to ``lead_shape + shape`` (directions last, as JAX orders them)."""
    out, offset = [], 0
    rest = np.shape(t)[1:]
    for n, shape in zip(sizes, shapes):
        block = t[offset : offset + n]
        block = np.moveaxis(block, 0, -1) if rest else block
        out.append(np.reshape(block, lead_shape + shape))
        offset += n
    return out


# The transforms below differentiate with respect to the leaves of the arguments in
# ``argnums``: each argument is flattened into its leaves (``None`` leaves left out), the
# passes run on the flat list of arrays, and the results are put back into the trees.


def _tree_inputs(f: Callable, nums: tuple, args: Sequence) -> tuple[list, list]:
    """The leaves of ``args[i]`` (i in ``nums``) that are not None, in order, checked;
    and per such argument ``(i, treedef, leaves)``, to put them back."""
    xs, parts = [], []
    for i in nums:
        leaves, treedef = tree_flatten(args[i])
        for leaf in leaves:
            if leaf is not None:
                check_input(f, i, leaf)
                xs.append(leaf)
        parts.append((i, treedef, leaves))
    return xs, parts


def _on_leaves(f: Callable, args: Sequence, parts: list, kwargs: dict) -> Callable:
    """``f`` as a function of the leaves that ``_tree_inputs`` took out of ``args``."""

    def flat_f(*xs: Any) -> Any:
        new, k = list(args), 0
        for i, treedef, leaves in parts:
            rebuilt = []
            for leaf in leaves:
                rebuilt.append(None if leaf is None else xs[k])
                k += leaf is not None
            new[i] = tree_unflatten(treedef, rebuilt)
        return f(*new, **kwargs)

    flat_f.__name__ = getattr(f, "__name__", "f")
    return flat_f


def _grouped(values: list, parts: list, single: bool) -> Any:
    """One value per leaf that ``_tree_inputs`` took out, put in its argument's tree
    (None where the leaf is None): that tree for an int ``argnums``, else a tuple of them."""
    trees, k = [], 0
    for _, treedef, leaves in parts:
        here = []
        for leaf in leaves:
            here.append(None if leaf is None else values[k])
            k += leaf is not None
        trees.append(tree_unflatten(treedef, here))
    return trees[0] if single else tuple(trees)


def _jacobian_fwd(f, nums, args, kwargs, recording=None):
    """The Jacobian by forward mode: ``f`` run once on a forward tape, one direction per
    input element; or, given ``recording`` (``_vjp``'s pair, ``f`` recorded already on
    ``args``, each of ``args[nums]`` a leaf), pushed over it without running ``f``."""
    xs = [args[i] for i in nums]
    if recording is not None:
        return _jacobian_fwd_over(recording[1], xs)
    sizes = [int(np.size(value_of(x))) for x in xs]
    k = sum(sizes)
    seeds = dict(zip(nums, _identity_blocks(xs, k)))
    tangents = [seeds.get(i) for i in range(len(args))]
    out, tape = push_forward(f, args, kwargs, tangents, k)
    try:
        outs, out_def = tree_flatten(out)
        ydots = [None if o is None else tape.tangent(o) for o in outs]
    finally:
        tape.release()
    return out_def, _forward_blocks(ydots, outs, xs)


def _forward_blocks(ydots: list, outs: list, xs: list) -> list:
    """Per output, its Jacobian blocks (one per input) from its tangent along the
    directions of ``_identity_blocks(xs, k)``; None for a None output."""
    sizes = [int(np.size(value_of(x))) for x in xs]
    shapes = [np.shape(value_of(x)) for x in xs]
    jacs = [None if t is None else _blocks(t, sizes, np.shape(t)[1:], shapes) for t in ydots]
    return [
        None if js is None else [_like(j, o, x) for j, x in zip(js, xs)]
        for js, o in zip(jacs, outs)
    ]


def _jacobian_fwd_over(recording: _Pullback, xs: list) -> tuple[Any, list]:
    """``_jacobian_fwd`` without running ``f`` again: the records of ``recording`` (``f``
    recorded once, on ``xs``, as ``vjp`` does) copied in order onto a forward tape whose
    inputs are seeded with the identity, which pushes their tangents as it takes them."""
    k = sum(int(np.size(value_of(x))) for x in xs)
    tape = recording.tape
    # a node written in place stands for its latest version, which may have to be
    # recorded still (a view whose root was written): before the records are copied
    outs = [current(o) for o in recording.outs]
    inputs = [recording.inputs[i][2][0] for i in recording.nums]
    seeds = {node.pos: t for node, t in zip(inputs, _identity_blocks(xs, k))}
    ftape = ForwardTape(k)
    try:
        copies = run_pass(True, _copy_records, tape, ftape, seeds)
        # an output that is no record of f's (a constant) stays itself: a zero tangent
        copied_outs = [copies[o.pos] if tape.owns(o) else o for o in outs]
        ydots = [None if o is None else ftape.tangent(o) for o in copied_outs]
        return recording.out_def, _forward_blocks(ydots, outs, xs)
    finally:
        ftape.release()
        tape.release()


def _copy_records(tape: Tape, ftape: ForwardTape, seeds: dict) -> dict:
    """Each record of ``tape`` copied onto ``ftape`` in order, each Branch's arguments
    being the copies of its arguments, and the Leaf at each position of ``seeds`` seeded
    with its tangent: ``ftape`` pushes the tangents through the calls as it takes them,
    as it does when ``f`` is recorded on it. Returns the copies by position on ``tape``.
    The records are read by position: a written node's first value is the copy that
    stands there (``tape.core.versions.keep_record``), as the reverse pass reads it."""

    def copied(a: Any) -> Any:
        if isinstance(a, Node):
            return copies[a.pos]
        return type(a)(copies[b.pos] if tape.owns(b) else b for b in a)  # a list of nodes

    copies: dict[int, Node] = {}
    for pos in range(len(tape.records)):
        record = tape.records[pos]
        if isinstance(record, Branch):
            args = list(record.args)
            for i in record.node_args:
                args[i] = copied(args[i])
            try:
                copy = Branch(
                    ftape, record.value, record.f, tuple(args), record.kwargs, record.vals,
                    record.node_args,
                )  # fmt: skip
            except Exception as error:
                # f has returned: the traceback no longer shows the line of the call
                error.add_note(f"while pushing tangents forward through {describe(record)}")
                raise
        else:
            copy = Leaf(ftape, record.value)
            if pos in seeds:
                ftape.seed(copy, seeds[pos])
        copies[pos] = copy
    return copies


def _jacobian_rev(f, nums, args, kwargs, recording=None):
    """The Jacobian by reverse mode: ``f`` recorded once (or ``recording``, ``_vjp``'s
    pair, where given) and its pullback run on one cotangent per output element."""
    y, pullback = _vjp(f, nums, args, kwargs) if recording is None else recording
    outs, out_def = tree_flatten(y)
    sizes = [0 if o is None else int(np.size(o)) for o in outs]
    k = sum(sizes)
    blocks = _identity_blocks(outs, k)
    # A real input's gradient keeps Re(ybar J): for a complex output, the cotangents
    # -i e_k give Im(J), pushed as k more directions of the same pass.
    real_inputs = [not np.iscomplexobj(value_of(args[i])) for i in nums]
    split = any(real_inputs) and any(np.iscomplexobj(o) for o in outs)
    if split:
        blocks = [None if t is None else np.concatenate([t, -1j * t]) for t in blocks]
    cotangents = tree_unflatten(out_def, blocks)
    jts = _batched_pullback(pullback, cotangents) if _REV_BY_VMAP else None
    if jts is None:
        jts = _forward_over_pullback(pullback, cotangents, out_def, 2 * k if split else k)
    if split:
        jts = [jt[:k] + 1j * jt[k:] if real else jt[:k] for jt, real in zip(jts, real_inputs)]
    # jts[i] is (k, *x_i.shape), the directions of all outputs in turn: split per output
    jacs: list = [None if o is None else [] for o in outs]
    for jt, i in zip(jts, nums):
        offset = 0
        for j, (n, o) in enumerate(zip(sizes, outs)):
            if o is None:
                continue
            block = np.reshape(jt[offset : offset + n], np.shape(o) + np.shape(jt)[1:])
            jacs[j].append(_like(block, o, args[i]))
            offset += n
    return out_def, jacs


_REV_BY_VMAP = True


def _batched_pullback(pullback: _Pullback, cotangents: Any) -> list | None:
    """J^T for the k cotangents at once, the pullback run on them as one batch (vmap of
    the reverse pass; ``benchmarks/jacobian_paths.py`` finds it up to a quarter faster
    than forward mode over the pullback, which pays for the primal values of the reverse
    pass too). None where some rule cannot run batched (``BatchingError``: it needs one
    value where the batch holds one per example), and forward mode over the pullback,
    which every rule supports, gives the answer; any other error is raised."""
    try:
        return list(vmap(pullback)(cotangents))
    except BatchingError:
        return None


def _forward_over_pullback(pullback: _Pullback, cotangents: Any, out_def: Any, k: int) -> list:
    """J^T for the k cotangents at once: the pullback is linear, so the cotangents go
    through it as the k directions of one forward pass (forward mode over the reverse
    pass)."""
    ftape = ForwardTape(k)
    try:
        seeds = []
        for t in tree_leaves_like(cotangents, out_def):
            if t is None:  # a None output: no cotangent
                seeds.append(None)
                continue
            seeds.append(Leaf(ftape, np.zeros(np.shape(t)[1:], dtype=t.dtype)))
            ftape.seed(seeds[-1], t)
        return [ftape.tangent(g) for g in pullback(tree_unflatten(out_def, seeds))]
    finally:
        ftape.release()


def jacobian(f: Callable, argnums: int | Sequence[int] = 0, mode: str = "auto") -> Callable:
    """The Jacobian of ``f``: ``jacobian(f)(x)[i..., j...] = d f(x)[i...] / d x[j...]``,
    of shape ``out.shape + in.shape``.

    ``mode="fwd"`` pushes one direction per input element through a single forward pass;
    ``mode="rev"`` records ``f`` once and runs its pullback on one cotangent per output
    element, all at once (the pullback under ``vmap``; forward mode over the pullback,
    which is linear, where a rule cannot run batched). ``"auto"``
    picks forward mode when the input has fewer elements than the output. ``f`` runs
    once per call in every mode: ``"auto"`` records it, as reverse mode does, and with
    fewer inputs than outputs pushes the tangents over those records, so a function that
    caches by input value or keeps state gets the derivative of that one run. An int
    ``argnums`` gives one Jacobian, a tuple a tuple of them. For complex inputs it is the
    Jacobian of a holomorphic function (both modes agree); a real-valued function of a
    complex input has none, and its gradient is ``grad``'s (``∂f/∂x − i ∂f/∂y``).

    Arguments and outputs may be containers (tuples, lists, dicts, namedtuples, nested),
    as in JAX: the result has the output's structure, and in place of each output array
    the argument's structure (a tuple of them for a tuple ``argnums``), whose leaves are
    the blocks ``d out_leaf / d in_leaf`` of shape ``out_leaf.shape + in_leaf.shape``.
    A ``None`` leaf, in an argument or the output, has ``None`` in its place.

    >>> import numpy as np
    >>> from tape import jacobian
    >>> f = lambda x: np.array([1.0, 2.0, 3.0]) * np.sum(x ** 2)
    >>> jacobian(f, mode="fwd")(np.array([1.0, 2.0]))
    array([[ 2.,  4.],
           [ 4.,  8.],
           [ 6., 12.]])
    >>> jacobian(f, mode="rev")(np.array([1.0, 2.0])).shape
    (3, 2)
    >>> p = {"w": np.ones((2, 3)), "b": np.zeros(2), "skip": None}
    >>> J = jacobian(lambda p: {"y": p["w"] @ np.ones(3) + p["b"]})(p)
    >>> {k: None if v is None else v.shape for k, v in J["y"].items()}
    {'w': (2, 2, 3), 'b': (2, 2), 'skip': None}
    """
    if mode not in ("auto", "fwd", "rev"):
        raise ValueError(f"mode must be 'auto', 'fwd' or 'rev', got {mode!r}")

    @functools.wraps(f)
    def jacobian_of(*args: Any, **kwargs: Any):
        nums, single = normalise_argnums(argnums, len(args), getattr(f, "__name__", "f"))
        xs, parts = _tree_inputs(f, nums, args)
        flat_f = _on_leaves(f, args, parts, kwargs)
        flat_nums = tuple(range(len(xs)))
        if mode == "fwd":
            out_def, jacs = _jacobian_fwd(flat_f, flat_nums, xs, {})
        elif mode == "rev":
            out_def, jacs = _jacobian_rev(flat_f, flat_nums, xs, {})
        else:
            out_def, jacs = _jacobian_auto(flat_f, flat_nums, xs)
        jacs = [None if js is None else _grouped(js, parts, single) for js in jacs]
        return tree_unflatten(out_def, jacs)

    return jacobian_of


def _jacobian_auto(f: Callable, nums: tuple, xs: list) -> tuple[Any, list]:
    """The Jacobian in the cheaper mode, which the output's size decides: ``f`` is
    recorded once, as for reverse mode, and forward mode, where the inputs are fewer,
    pushes its tangents over that recording. Running ``f`` once more to size its output
    would hand a function that caches by input value its cached plain result in the
    recorded run (a zero Jacobian), and a stateful one another run's derivative."""
    recording = _vjp(f, nums, xs, {})
    n_out = sum(int(np.size(o)) for o in tree_flatten(recording[0])[0] if o is not None)
    n_in = sum(int(np.size(value_of(x))) for x in xs)
    mode = _jacobian_fwd if n_in < n_out else _jacobian_rev
    return mode(f, nums, xs, {}, recording)


def hessian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of scalar-valued ``f``, forward mode over reverse mode: one batched
    forward pass through ``grad(f)``. Its shape is ``in.shape + in.shape``; a tuple
    ``argnums`` gives the blocks ``H[i][j]``.

    For an argument that is a container, the structure is JAX's, the Jacobian's of the
    gradient: ``hessian(f)(params)[k1][k2]``, for a dict, is the block
    ``d^2 f / d params[k1] d params[k2]``, of shape
    ``params[k1].shape + params[k2].shape`` (a dict of dicts); for a tuple ``argnums``,
    ``H[i]`` has argument ``i``'s structure with a tuple over ``argnums`` at each leaf.
    ``None`` leaves have ``None`` in their place.

    >>> import numpy as np
    >>> from tape import hessian
    >>> hessian(lambda x: x[0] ** 2 * x[1] + np.sin(x[1]))(np.array([1.0, 0.0]))
    array([[0., 2.],
           [2., 0.]])
    >>> H = hessian(lambda p: p["a"] ** 2 * np.sum(p["b"]))({"a": 3.0, "b": np.ones(2)})
    >>> H["a"]["a"], H["a"]["b"], H["b"]["b"].shape
    (array(4.), array([6., 6.]), (2, 2))
    """
    @functools.wraps(f)
    def hessian_of(*args: Any, **kwargs: Any):
        nums, single = normalise_argnums(argnums, len(args), getattr(f, "__name__", "f"))
        xs, parts = _tree_inputs(f, nums, args)
        flat_f = _on_leaves(f, args, parts, kwargs)
        flat_nums = tuple(range(len(xs)))
        if not xs:  # nothing to differentiate: every block is None
            return _grouped([], parts, single)
        _, rows = _jacobian_fwd(grad(flat_f, argnums=flat_nums), flat_nums, xs, {})
        # the inputs' dtype: a gradient computed through float64 constants is cast back
        rows = [
            _grouped([_like(b, xa, xb) for b, xb in zip(row, xs)], parts, single)
            for row, xa in zip(rows, xs)
        ]
        return _grouped(rows, parts, single)

    return hessian_of


def hvp(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian-vector product of scalar-valued ``f``: ``hvp(f)(*args, v)`` is
    ``H v`` (``v`` shaped like ``args[argnums]``; a tuple of them for a tuple
    ``argnums``), as the forward derivative of ``grad(f)`` along ``v``. The Hessian is
    never formed: it costs a small multiple of one gradient.

    An argument may be a container: ``v`` then has its structure (``None`` where it has a
    ``None`` leaf), and so has ``H v``.

    >>> import numpy as np
    >>> from tape import hvp
    >>> A = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> hvp(lambda x: 0.5 * x @ A @ x)(np.array([1.0, -1.0]), np.array([1.0, 0.0]))
    array([2., 1.])
    >>> p, v = {"x": np.array([1.0, 2.0]), "s": 3.0}, {"x": np.array([1.0, 0.0]), "s": 0.0}
    >>> hvp(lambda p: p["s"] * np.sum(p["x"] ** 2))(p, v)
    {'x': array([6., 0.]), 's': 2.0}
    """
    gradient = grad(f, argnums=argnums)

    @functools.wraps(f)
    def product(*args: Any, **kwargs: Any):
        if not args:
            raise TypeError("hvp(f)(*args, v) needs the arguments of f and then v")
        *args, v = args
        nums, single = normalise_argnums(argnums, len(args), getattr(f, "__name__", "f"))
        if not single and not (isinstance(v, (tuple, list)) and len(v) == len(nums)):
            raise ValueError(
                f"hvp with argnums={argnums!r} takes v as a tuple of {len(nums)} parts, one "
                "per entry of argnums"
            )
        tangents: list = [None] * len(args)
        for i, vi in zip(nums, (v,) if single else v):
            tangents[i] = vi
        product = jvp(lambda *a: gradient(*a, **kwargs), tuple(args), tuple(tangents))[1]
        casts = [
            tree_map(_like_input, p, args[i])
            for p, i in zip((product,) if single else product, nums)
        ]
        return casts[0] if single else tuple(casts)

    return product


def _like_input(p: Any, x: Any) -> Any:
    """``p`` in the dtype of input ``x``; a Python float that ``jvp`` made readable too,
    where ``x`` is a float32 (or other non-double) scalar."""
    if isinstance(p, (float, complex)) and np.result_type(value_of(x)) not in _DOUBLES:
        p = np.complex128(p) if isinstance(p, complex) else np.float64(p)
    return _like(p, x)


_DOUBLES = (np.dtype(np.float64), np.dtype(np.complex128))
