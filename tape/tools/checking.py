"""``check_grad``: derivatives of any order, in either mode, against finite differences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sensitivities.registry import function_name, value_of

from ..core.errors import MissingRuleError, describe
from ..core.node import Node
from ..core.recording import current
from ..core.records import Branch, Tape
from ..core.reverse import ReverseTape
from ..core.trees import tree_flatten, tree_unflatten
from ..runtime import run_pass
from ..transforms.derivatives import jvp
from ..transforms.grad import grad, input_gradients, pull_back, trace

__all__ = ["check_grad"]


def _inner(a: Any, b: Any) -> Any:
    """``Re <a, b>``: a real loss ``L`` changes by ``Re(xbar * dx)`` (JAX's convention)."""
    if a is None or b is None:  # a None leaf: no direction, no gradient
        return 0.0
    product = np.sum(a * b)
    return np.real(product) if np.iscomplexobj(product) else product


def _pair(out: Any, u: list) -> Any:
    """``<u, out>`` summed over the leaves of the output."""
    total = 0.0
    for o, w in zip(tree_flatten(out)[0], u):
        total = total + _inner(o, w)
    return total


def _random_like(rng, x: Any) -> Any:
    x = value_of(x)
    if x is None:
        return None
    r = rng.standard_normal(np.shape(x))
    return r + 1j * rng.standard_normal(np.shape(x)) if np.iscomplexobj(x) else r


def _reverse_gradients(f, args, nums, u):
    """The gradients of ``<u, f>`` with respect to the arguments in ``nums``: ``J^T u``."""
    return grad(lambda *a: _pair(f(*a), u), argnums=nums)(*args)


def _along(grads, nums, v):
    """``<grads, v>``, summed over the arguments in ``nums`` and their leaves."""
    total = 0.0
    for i, g in zip(nums, grads):
        for gl, vl in zip(tree_flatten(g)[0], v[i]):
            total = total + _inner(gl, vl)
    return total


def _directional(f, args, nums, v, u, mode):
    """``<u, J v>``: the derivative of ``f`` along ``v``, seen through the cotangent ``u``."""
    if mode == "rev":
        return _along(_reverse_gradients(f, args, nums, u), nums, v)
    if mode == "fwd":
        tangents = tuple(_rebuild(args[i], v[i]) if i in v else None for i in range(len(args)))
        return _pair(jvp(f, tuple(args), tangents)[1], u)
    raise ValueError(f"modes are 'rev' and 'fwd', got {mode!r}")


def _rebuild(x, leaves):
    return tree_unflatten(tree_flatten(x)[1], leaves)


def _moved(args, nums, v, t):
    """``args`` moved by ``t`` along ``v``, in float64."""
    out = list(args)
    for i in nums:
        leaves = [None if d is None else
                  np.asarray(value_of(x), dtype=np.result_type(value_of(x), np.float64)) + t * d
                  for x, d in zip(tree_flatten(args[i])[0], v[i])]  # fmt: skip
        leaves = [float(x) if isinstance(value_of(a), float) and np.ndim(x) == 0 else x
                  for x, a in zip(leaves, tree_flatten(args[i])[0])]  # fmt: skip
        out[i] = _rebuild(args[i], leaves)
    return out


def _floating(tree: Any) -> bool:
    leaves = [value_of(x) for x in tree_flatten(tree)[0] if x is not None]
    return bool(leaves) and all(
        not isinstance(x, (bool, int)) and np.result_type(x).kind in "fc" for x in leaves
    )


def _five_point(g, h):
    return (g(-2 * h) - 8 * g(-h) + 8 * g(h) - g(2 * h)) / (12 * h)


def _check_prefilled(f, args, nums, u, expected, rng):
    """The reverse pass again, with every input's adjoint already holding a random array
    that the pass owns: the update form of the rules then adds into it in place."""
    tape = Tape()
    out, inputs = trace(f, tape, args, {}, nums)
    try:
        outs = [current(o) for o in tree_flatten(out)[0]]  # nodes written in place: latest
        rtape = ReverseTape(tape)
        prefills = {}
        for i in nums:
            for node in inputs[i][2]:
                if node is None:  # a None leaf: nothing recorded
                    continue
                r = np.asarray(
                    _random_like(rng, node.value), dtype=np.result_type(value_of(node.value))
                )
                prefills[node.pos] = r.copy()
                rtape.adjoints[node.pos] = r
                rtape.owned[node.pos] = True
        run_pass(False, pull_back, tape, outs, [np.asarray(w) for w in u], rtape)
        adjoints = [
            None if rtape.adjoints[p] is None else rtape.adjoints[p] - prefills.get(p, 0.0)
            for p in range(len(rtape.adjoints))
        ]
        got = input_gradients(inputs, nums, adjoints)
    finally:
        tape.release()
    for i, g, e in zip(nums, got, expected):
        for gl, el in zip(tree_flatten(g)[0], tree_flatten(e)[0]):
            if gl is None:
                continue
            # an update rule that overwrites or double-counts is off by the pre-filled
            # values, of order 1; rounding (of ill-conditioned rules too) stays far below
            tol = np.sqrt(np.finfo(np.result_type(value_of(gl))).eps)
            if not np.allclose(value_of(gl), value_of(el), rtol=tol, atol=tol):
                raise AssertionError(
                    f"check_grad: with the adjoint of argument {i} pre-filled, the reverse pass "
                    f"added {gl!r} to it instead of {el!r}: an update-form rule overwrote "
                    "(or double-counted) the adjoint it was handed, or the adjoint is a sum of "
                    "terms so large that they cancel (an ill-conditioned rule)"
                )


def _missing_argnums(f: Callable, args: tuple, nums: tuple, error: Exception) -> str:
    """What to pass as ``argnums`` when a default one (every floating-point argument)
    reached an argument with no rule: a primitive's float hyperparameter, say."""
    with_rules = []
    for i in nums:
        try:
            grad(f, argnums=i)(*args)
            with_rules.append(i)
        except MissingRuleError:
            pass
        except Exception:
            with_rules.append(i)  # another failure: not this question's to answer
    suggestion = (
        f"argnums={with_rules[0]}" if len(with_rules) == 1 else f"argnums={tuple(with_rules)}"
    )
    return (
        f"check_grad differentiates every floating-point argument unless told otherwise (here "
        f"arguments {', '.join(map(str, nums))}), and one of them reaches a function with no "
        f"sensitivity for it; pass the arguments to check"
        + (f", here {suggestion}" if with_rules else ", e.g. argnums=0")
        + f", or register the missing rule. The error was: {error}"
    )


def _blame(f, args, nums, mode, eps, rtol, atol, rng) -> str:
    """Which rule is at fault, found by checking each record of ``f``'s tape on its own
    (one call of its function, along a random direction): the first one whose derivative
    differs from central differences, as text for the error, or ''."""
    tape = Tape()
    try:
        trace(f, tape, args, {}, nums)
        for record in list(tape.records):
            if not isinstance(record, Branch):
                continue
            for i in record.node_args:
                if not isinstance(record.args[i], Node):
                    continue  # a list of nodes: checked through the whole function only
                culprit = _check_one(record, i, mode, eps, rtol, atol, rng)
                if culprit:
                    return culprit
    except Exception:  # the diagnosis must not hide the mismatch it explains
        return ""
    finally:
        tape.release()
    return ""


def _check_one(record, i, mode, eps, rtol, atol, rng) -> str:
    fn, vals, kwargs = record.f, list(record.vals), dict(record.kwargs)
    call = lambda *a: fn(*a, **kwargs)  # noqa: E731
    v = {i: [_random_like(rng, vals[i])]}
    u = [_random_like(rng, record.value)]
    fd = _five_point(lambda t: float(value_of(_pair(call(*_moved(vals, (i,), v, t)), u))), eps)
    ad = float(value_of(_directional(call, vals, (i,), v, u, mode)))
    if abs(ad - fd) <= atol + rtol * abs(fd):
        return ""
    kind = "sensitivity" if mode == "rev" else "forward rule (pushforward)"
    return (
        f"; the {kind} of {function_name(fn)} for argument {i} is at fault: on its own, at "
        f"record {describe(record)}, it gives {ad!r} where central differences give {fd!r}"
    )


def check_grad(
    f: Callable,
    *args: Any,
    order: int = 1,
    modes: Sequence[str] = ("rev", "fwd"),
    argnums: int | Sequence[int] | None = None,
    eps: float = 1e-3,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    """Check the derivatives of ``f`` at ``args`` against finite differences; raise
    ``AssertionError`` on a mismatch.

    For a random direction ``v`` (in the arguments in ``argnums``; by default every
    floating-point one) and a random cotangent ``u`` of the output, the directional
    derivative ``<u, J v>`` from each mode in ``modes`` (``"rev"``: ``grad``; ``"fwd"``:
    ``jvp``) must match 5-point central differences of ``<u, f>`` along ``v``, to within
    ``atol + rtol * |fd|``. With reverse mode, a second reverse pass starts with random
    arrays already in the inputs' adjoints, so that the in-place update form of the
    rules runs and must add, not overwrite. For ``order=n``, the directional derivative
    computed in each mode is itself checked to order ``n - 1``: every combination of
    modes is compared with finite differences of the derivative below it.

    >>> import numpy as np
    >>> from tape import check_grad, stop_gradient
    >>> check_grad(lambda x: np.sum(np.sin(x) * x), np.array([0.1, 0.7]), order=2)
    >>> check_grad(lambda x: x * stop_gradient(x), 1.5)  # AD says 1.5, the truth is 3
    Traceback (most recent call last):
    AssertionError: check_grad: the rev directional derivative ... differs from ...
    """
    if order < 1:
        raise ValueError(f"order must be at least 1, got {order}")
    rng = np.random.default_rng(seed)
    if argnums is None:
        nums = tuple(i for i, a in enumerate(args) if _floating(a))
    else:
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise ValueError("check_grad needs at least one floating-point argument to differentiate")
    v = {i: [_random_like(rng, x) for x in tree_flatten(args[i])[0]] for i in nums}
    # the differences' runs of f give u the output's structure too: no run of its own on
    # plain values, which would warm a cache keyed by input value for the first mode
    moved = {t: f(*_moved(args, nums, v, t)) for t in (-2 * eps, -eps, eps, 2 * eps)}
    u = [_random_like(rng, o) for o in tree_flatten(moved[eps])[0]]

    fd = _five_point(lambda t: float(value_of(_pair(moved[t], u))), eps)
    expected = None  # reverse mode's J^T u, which the pass with pre-filled adjoints must add
    for mode in modes:
        try:
            if mode == "rev":
                expected = _reverse_gradients(f, args, nums, u)
                ad = float(value_of(_along(expected, nums, v)))
            else:
                ad = float(value_of(_directional(f, args, nums, v, u, mode)))
        except MissingRuleError as error:
            if argnums is not None:
                raise
            raise MissingRuleError(_missing_argnums(f, args, nums, error)) from error
        if not abs(ad - fd) <= atol + rtol * abs(fd):
            culprit = _blame(f, args, nums, mode, eps, rtol, atol, rng) if order == 1 else ""
            raise AssertionError(
                f"check_grad: the {mode} directional derivative {ad!r} differs from "
                f"5-point central differences {fd!r} (order {order} of the check){culprit}"
            )
    if expected is not None:
        _check_prefilled(f, args, nums, u, expected, rng)
    for mode in modes if order > 1 else ():
        derivative = lambda *a, mode=mode: _directional(f, a, nums, v, u, mode)  # noqa: E731
        check_grad(derivative, *args, order=order - 1, modes=modes, argnums=nums, eps=eps,
                   rtol=rtol, atol=atol, seed=seed + 1)  # fmt: skip
