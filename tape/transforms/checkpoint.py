"""``checkpoint`` and ``stop_gradient``: what a function's gradient keeps of its inside.

``checkpoint(f)`` records ``f`` as one Branch and runs it again when its derivatives are
needed (the rule is ``sensitivities.checkpoint``; ``_Rerun`` is what it asks of the
engine); ``stop_gradient`` makes a value a constant at every level of nesting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from sensitivities import checkpointed
from sensitivities.registry import value_of

from ..core.duck_arrays import is_duck_array
from ..core.node import Node
from ..core.recording import plain
from ..core.records import Tape
from ..core.trees import tree_flatten, tree_map, tree_unflatten
from ..runtime import run_pass
from .forward import push_forward
from .grad import pull_back, trace

__all__ = ["checkpoint", "stop_gradient"]


def stop_gradient(x: Any) -> Any:
    """``x``'s value as a constant: no gradient flows through it, at any level of nesting,
    in either mode. Works on arrays, floats and containers of them.

    An array comes back as a copy of its own, as ``np.copy`` would give it: a write into
    the result never reaches the caller's array, nor the node's value.

    >>> from tape import grad, stop_gradient
    >>> grad(lambda x: x * stop_gradient(x))(3.0)  # d/dx [x * c] with c = x = 3
    (3.0,)
    """
    return tree_map(_stopped, x)


def _stopped(x: Any) -> Any:
    # a node's value is a plain result computed from the tape (plain tells the tape, and
    # a compiled replay then computes it again from its new inputs rather than keep it)
    return plain(_constant, (x,)) if isinstance(x, Node) else _constant(x)


def _constant(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.copy()
    return np.copy(x) if is_duck_array(x) else x


# -- checkpointing -------------------------------------------------------------------------


def _differentiable(x: Any) -> bool:
    x = value_of(x)
    return isinstance(x, (float, complex, np.inexact)) or (
        (isinstance(x, np.ndarray) or is_duck_array(x)) and x.dtype.kind in "fc"
    )


class _Rerun:
    """What the checkpoint rule (``sensitivities.checkpoint``) needs of the engine: ``fn``
    run again on a fresh tape, for its adjoints or its tangent. The records live only
    while one Branch's derivatives are computed."""

    @staticmethod
    def pullback(fn: Callable, leaves: tuple, ybar: Any) -> list:
        tape = Tape()
        nums = tuple(i for i, x in enumerate(leaves) if _differentiable(x))
        out, inputs = trace(fn, tape, leaves, {}, nums)
        try:
            adjoints = run_pass(False, pull_back, tape, [out], [ybar])
            if adjoints is None:
                return [None] * len(leaves)
            nodes = [inputs[i][2][0] if i in inputs else None for i in range(len(leaves))]
            return [None if n is None else adjoints[n.pos] for n in nodes]
        finally:
            tape.release()

    @staticmethod
    def pushforward(fn: Callable, leaves: tuple, xdots: list) -> Any:
        k = next(np.shape(t)[0] for t in xdots if t is not None)
        out, tape = push_forward(fn, leaves, {}, xdots, k)
        try:
            return tape.tangent(out) if tape.owns(out) else None
        finally:
            tape.release()


_STREAMS = (np.random.Generator, np.random.RandomState)


def _stream_states(generators: list) -> list:
    legacy = np.random.get_state()  # noqa: NPY002 (NumPy's global stream)
    return [legacy] + [
        g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state()
        for g in generators
    ]


def _set_stream_states(generators: list, states: list) -> None:
    np.random.set_state(states[0])  # noqa: NPY002
    for g, state in zip(generators, states[1:]):
        if isinstance(g, np.random.Generator):
            g.bit_generator.state = state
        else:
            g.set_state(state)


class _Replayed:
    """A checkpointed function that draws the same random numbers when it is run again:
    each later call on the same inputs (a recomputation in the reverse pass, or for a
    tangent) starts from the random states of the first call, NumPy's global stream and
    the generators passed to it, and puts them back afterwards, so that the streams stand
    where the forward pass left them (PyTorch's ``preserve_rng_state``). A recomputed
    value that differs from the recorded one raises: its derivative would be another's."""

    __slots__ = ("fn", "generators", "states", "inputs", "value")

    def __init__(self, fn: Callable, generators: list) -> None:
        self.fn, self.generators, self.states = fn, generators, None

    def __call__(self, *xs: Any) -> Any:
        if self.states is None:  # the forward pass
            self.states = _stream_states(self.generators)
            out = self.fn(*xs)
            self.inputs, self.value = xs, out
            return out
        if not (
            len(xs) == len(self.inputs) and all(map(_same_input, xs, self.inputs))
        ):
            return self.fn(*xs)
        now = _stream_states(self.generators)
        _set_stream_states(self.generators, self.states)
        try:
            out = self.fn(*xs)
        finally:
            _set_stream_states(self.generators, now)
        recorded, again = _plain(self.value), _plain(out)
        if np.shape(recorded) != np.shape(again) or not np.array_equal(
            recorded, again, equal_nan=True
        ):
            raise RuntimeError(
                f"checkpoint({getattr(self.fn, '__name__', 'f')}): run again for its "
                "derivative, the function gave another value than in the forward pass, so "
                "the derivative would be another function's. Randomness from NumPy's global "
                "stream and from generators passed as arguments is replayed; pass any other "
                "generator (one the function closes over) as an argument, and keep the "
                "function free of other state (time, counters, data it changes)"
            )
        return out


def _plain(x: Any) -> Any:
    while isinstance(x, Node):
        x = x.value
    return value_of(x)


def _same_input(a: Any, b: Any) -> bool:
    return a is b or _plain(a) is _plain(b)


def checkpoint(f: Callable) -> Callable:
    """``f`` recorded as one Branch: its inner records are dropped after the forward pass
    and recomputed from its inputs in the reverse pass (Griewank's trade of time for
    memory). Gradients are the same as without it.

    ``f`` takes arrays, floats, or containers of them, and returns one array or float.
    Pass everything it differentiates as an argument: a node it closes over would be
    recorded inside it. Splitting a chain of ``n`` steps into about ``sqrt(n)``
    checkpointed segments keeps peak memory near ``sqrt(n)`` steps' worth
    (``benchmarks/checkpoint_memory.py``).

    >>> import numpy as np
    >>> from tape import Tape, Leaf, grad, checkpoint
    >>> block = checkpoint(lambda x, w: np.tanh(x * w) + x)
    >>> t = Tape()
    >>> y = block(Leaf(t, np.ones(3)), 0.5)
    >>> len(t)  # the Leaf and one Branch: tanh, multiply and add are not kept
    2
    >>> grad(lambda x: np.sum(block(x, 0.5)))(np.zeros(3))
    (array([1.5, 1.5, 1.5]),)
    """

    @functools.wraps(f)
    def checkpointed_f(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = tree_flatten(list(args))

        def fn(*xs):
            return f(*tree_unflatten(treedef, list(xs)), **kwargs)

        generators = [x for x in (*leaves, *kwargs.values()) if isinstance(x, _STREAMS)]
        out = checkpointed(_Replayed(fn, generators), tuple(leaves), _Rerun)
        if isinstance(out, Node):
            inner = out.value
            if out.tape.owns(inner):
                raise TypeError(
                    f"checkpoint({getattr(f, '__name__', 'f')}) uses a node of the same tape "
                    "that it was not given as an argument (a closure or a global): pass it "
                    "as an argument, so that the recomputation can differentiate it"
                )
            plain = value_of(inner)
            if not (
                isinstance(plain, (float, complex, np.generic, np.ndarray)) or is_duck_array(plain)
            ):
                raise TypeError(
                    f"checkpoint({getattr(f, '__name__', 'f')}) returns "
                    f"{type(value_of(inner)).__name__}: a checkpointed function returns one array"
                )
        return out

    return checkpointed_f
