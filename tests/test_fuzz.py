"""Random programs against finite differences, and forward mode against reverse mode.

hypothesis draws a program: inputs of random shapes, then a sequence of steps, each a
registered NumPy function (elementwise, broadcasting binary, reduction, shape change,
indexing with slices, masks and repeated integer arrays, matmul, concatenation, the
functional update ``at``) or a piece of control flow (a branch on a value, a loop). The
program is built by running it once on plain arrays, so each step's parameters fit the
shapes it meets and steps whose values would leave a safe range are dropped; then it is
replayed on nodes. ``grad`` must match central differences (for a quarter of the
programs, the gradient of a gradient too), and where forward mode exists,
``<u, jvp(v)>`` must equal ``<vjp(u), v>``.

``scripts/fuzz.py`` runs the same check for as long as it is asked to.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tape import at, grad
from tests.fd import numeric_grad

try:  # forward mode and vjp, where they exist
    from tape import jvp, vjp
except ImportError:  # pragma: no cover - checked once they are importable
    jvp = vjp = None

LIMIT = 50.0  # values beyond this make central differences too coarse to compare

UNARY = {
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "exp_tanh": lambda a: np.exp(np.tanh(a)),
    "log": lambda a: np.log(1.5 + np.sin(a)),
    "sqrt": lambda a: np.sqrt(1.1 + np.cos(a)),
    "square": np.square,
    "affine": lambda a: a * 0.5 - 1.0,
    "negative": np.negative,
    "arctan": np.arctan,
    "reciprocal": lambda a: 1.0 / (1.5 + np.tanh(a)),
    "cube": lambda a: a**3,
    "sinh": np.sinh,
}
BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": lambda a, b: a / (1.5 + np.tanh(b)),
    "power": lambda a, b: (1.2 + np.sin(a)) ** np.cos(b),
    "hypot_like": lambda a, b: np.sqrt(a * a + b * b + 0.5),
}


def _draw_step(draw, vals):
    """One step fitted to the current values: (name, function, argument positions)."""
    kind = draw(
        st.sampled_from(
            ["unary"] * 4 + ["binary"] * 3
            + ["reduce", "shape", "index", "matmul", "join", "at", "branch", "loop"]
        ),
        label="kind",
    )  # fmt: skip
    i = draw(st.integers(0, len(vals) - 1), label="operand")
    a = vals[i]
    nd = np.ndim(a)
    if kind == "unary":
        name = draw(st.sampled_from(sorted(UNARY)), label="unary")
        return name, UNARY[name], (i,)
    if kind == "binary":
        j = draw(st.integers(0, len(vals) - 1), label="operand 2")
        try:
            np.broadcast_shapes(np.shape(a), np.shape(vals[j]))
        except ValueError:
            return None
        name = draw(st.sampled_from(sorted(BINARY)), label="binary")
        return name, BINARY[name], (i, j)
    if kind == "reduce":
        name = draw(st.sampled_from(["sum", "mean", "var", "prod_small"]), label="reduction")
        axis = draw(st.sampled_from([None] + list(range(-nd, nd))), label="axis")
        keep = draw(st.booleans(), label="keepdims")
        if name == "prod_small":
            return "prod", lambda a: np.prod(np.tanh(a) * 0.5 + 1.0, axis=axis, keepdims=keep), (i,)
        f = getattr(np, name)
        return f"{name}(axis={axis})", lambda a: f(a, axis=axis, keepdims=keep), (i,)
    if kind == "shape":
        choice = draw(
            st.sampled_from(["T", "ravel", "expand", "flip", "reshape_col"]), label="shape op"
        )
        if choice == "T":
            return "transpose", np.transpose, (i,)
        if choice == "ravel":
            return "ravel", np.ravel, (i,)
        if choice == "expand":
            return "expand_dims", lambda a: np.expand_dims(a, 0), (i,)
        if choice == "flip" and nd:
            return "flip", lambda a: np.flip(a, -1), (i,)
        return "reshape", lambda a: np.reshape(a, (-1, 1)), (i,)
    if kind == "index":
        if nd == 0:
            return None
        n = np.shape(a)[0]
        choice = draw(st.sampled_from(["int", "slice", "array", "mask", "negative"]), label="index")
        if choice == "int":
            k = draw(st.integers(0, n - 1), label="int index")
            return f"[{k}]", lambda a: a[k], (i,)
        if choice == "slice":
            start = draw(st.integers(0, n - 1), label="start")
            step = draw(st.sampled_from([1, 2, -1]), label="step")
            s = slice(start, None, step)
            return f"[{s}]", lambda a: a[s], (i,)
        if choice == "array":
            idx = np.array(
                draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5), label="indices")
            )
            return f"[{idx.tolist()}]", lambda a: a[idx], (i,)
        if choice == "mask":
            mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n), label="mask"))
            return "[mask]", lambda a: a[mask], (i,)
        return "[..., -1]", lambda a: a[..., -1], (i,)
    if kind == "matmul":
        j = draw(st.integers(0, len(vals) - 1), label="operand 2")
        b = vals[j]
        if nd == 0 or np.ndim(b) == 0:
            return None
        inner = np.shape(b)[0] if np.ndim(b) == 1 else np.shape(b)[-2]
        if np.shape(a)[-1] != inner:
            return None
        return "matmul", np.matmul, (i, j)
    if kind == "join":
        j = draw(st.integers(0, len(vals) - 1), label="operand 2")
        if np.shape(a) != np.shape(vals[j]):
            return None
        if nd and draw(st.booleans(), label="concatenate"):
            return "concatenate", lambda a, b: np.concatenate([a, b]), (i, j)
        return "stack", lambda a, b: np.stack([a, b], axis=-1), (i, j)
    if kind == "at":
        if nd == 0:
            return None
        n = np.shape(a)[0]
        idx = np.array(
            draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4), label="at index")
        )
        op = draw(st.sampled_from(["set", "add", "multiply"]), label="at op")
        j = draw(st.integers(0, len(vals) - 1), label="value")
        return f"at[{idx.tolist()}].{op}", lambda a, v: getattr(at(a)[idx], op)(np.mean(v)), (i, j)
    if kind == "branch":
        threshold = 0.123456  # away from the zeros and round numbers hypothesis likes
        return "branch", lambda a: np.sin(a) * 2.0 if np.sum(a) > threshold else np.cos(a) - a, (i,)
    k = draw(st.integers(1, 3), label="loop count")

    def loop(a):
        for _ in range(k):
            a = np.tanh(a) + 0.5 * a
        return a

    return f"loop({k})", loop, (i,)


def _safe(value) -> bool:
    v = np.asarray(value)
    return (
        v.size > 0 and bool(np.all(np.isfinite(v))) and float(np.max(np.abs(v), initial=0)) < LIMIT
    )


def _far_from_branch(steps, inputs) -> bool:
    """Whether every branch's condition is far from its threshold, so that finite
    differences stay on the same side."""
    vals = list(inputs)
    for name, f, idx in steps:
        if name == "branch" and abs(float(np.sum(vals[idx[0]])) - 0.123456) < 1e-3:
            return False
        vals.append(f(*[vals[i] for i in idx]))
    return True


@st.composite
def programs(draw, max_steps=8):
    """(f, inputs, description): f maps the inputs to an array, built step by step."""
    n_inputs = draw(st.integers(1, 3), label="inputs")
    shapes = [
        draw(st.sampled_from([(), (3,), (2, 3), (3, 1), (1, 3), (4,), (3, 3)]), label="shape")
        for _ in range(n_inputs)
    ]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    inputs = [rng.uniform(-1.5, 1.5, s) for s in shapes]
    inputs = [float(x) if np.ndim(x) == 0 else x for x in inputs]
    vals = list(inputs)
    steps = []
    for _ in range(draw(st.integers(1, max_steps), label="steps")):
        step = _draw_step(lambda strategy, label=None: draw(strategy), vals)
        if step is None:
            continue
        name, f, idx = step
        with np.errstate(all="ignore"):
            value = f(*[vals[i] for i in idx])
        if not _safe(value):
            continue
        vals.append(value)
        steps.append(step)
    n = len(inputs)

    def program(*xs):
        vs = list(xs)
        for _, f, idx in steps:
            vs.append(f(*[vs[i] for i in idx]))
        # every value feeds the output, so no step goes unchecked
        return vs[-1] if len(vs) == n else vs[-1] + 0.1 * sum(np.sum(v) for v in vs[n:-1])

    description = [f"inputs {shapes}"] + [f"{name}{tuple(idx)}" for name, _, idx in steps]
    return program, inputs, steps, description


def check_program(program, inputs, steps, rng=None, second_order=False):
    """grad against central differences, and jvp against vjp where they exist; with
    ``second_order``, also the gradient of a gradient against central differences of it."""
    if not _far_from_branch(steps, inputs):
        return False
    rng = rng or np.random.default_rng(0)
    out = program(*inputs)
    w = rng.standard_normal(np.shape(out))

    def scalar(*xs):
        return np.sum(program(*xs) * w)

    argnums = tuple(range(len(inputs)))
    got = grad(scalar, argnums=argnums)(*inputs)
    for k, g in enumerate(got):
        expected = numeric_grad(scalar, inputs, k)
        scale = 1.0 + float(np.max(np.abs(expected), initial=0))
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5 * scale, err_msg=f"input {k}")
    if jvp is not None and vjp is not None:
        tangents = tuple(
            float(rng.standard_normal()) if np.ndim(x) == 0 else rng.standard_normal(np.shape(x))
            for x in inputs
        )
        _, ydot = jvp(program, tuple(inputs), tangents)
        _, pullback = vjp(program, *inputs)
        xbars = pullback(w)
        if not isinstance(xbars, tuple):
            xbars = (xbars,)
        forward = float(np.sum(np.asarray(ydot) * w))
        reverse = sum(float(np.sum(np.asarray(xb) * t)) for xb, t in zip(xbars, tangents))
        assert abs(forward - reverse) <= 1e-8 * (1.0 + abs(forward) + abs(reverse)), (
            forward,
            reverse,
        )
    if second_order:
        v = rng.standard_normal(np.shape(inputs[0]))

        def first(*xs):  # <v, d scalar / d x0>, itself a function to differentiate
            return np.sum(grad(scalar, argnums=0)(*xs) * v)

        (h,) = grad(first, argnums=(0,))(*inputs)
        expected = numeric_grad(first, inputs, 0)
        scale = 1.0 + float(np.max(np.abs(expected), initial=0))
        np.testing.assert_allclose(h, expected, rtol=1e-3, atol=1e-4 * scale, err_msg="2nd order")
    return True


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_random_programs_match_finite_differences_and_forward_mode(data):
    program, inputs, steps, description = data.draw(programs(), label="program")
    second_order = data.draw(st.integers(0, 3), label="second order") == 0
    note = "\n".join(description)
    try:
        check_program(program, inputs, steps, second_order=second_order)
    except AssertionError as error:
        raise AssertionError(f"{error}\nprogram:\n{note}") from None
