"""checkpoint (tape/transforms/checkpoint.py) means what the same program means without it,
under every transform: writes into its arguments, state changed before the recomputation,
and containers as outputs. The references are the program without ``checkpoint``, its
eager gradient checked against central differences of the NumPy program."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tape import Tape, checkpoint, compile_grad, grad, hessian, jacobian, jvp, vjp, vmap
from tape.transforms import checkpoint as checkpoint_module
from tests.fd import numeric_grad
from tests.strategies import arrays

TRANSFORMS = ["grad", "vjp", "hessian", "jacobian_fwd", "jacobian_rev", "jvp", "vmap_grad",
              "compile_grad"]  # fmt: skip
X = np.array([0.3, -0.5, 1.2])


def plain(f):
    return f


def batch_of(x):
    return np.stack([x, 0.5 * x + 0.1])


def direction(x):
    return np.linspace(0.5, 1.5, x.size).reshape(x.shape)


def transformed(transform, loss, x):
    """What ``transform`` computes of scalar ``loss`` at ``x`` (at a batch made from ``x``
    for ``vmap_grad``): a gradient, a Hessian, a directional derivative, or per-example
    gradients."""
    if transform == "grad":
        return grad(loss)(x)[0]
    if transform == "vjp":
        return vjp(loss, x)[1](1.0)[0]
    if transform == "hessian":
        return hessian(loss)(x)
    if transform == "jacobian_fwd":
        return jacobian(loss, mode="fwd")(x)
    if transform == "jacobian_rev":
        return jacobian(loss, mode="rev")(x)
    if transform == "jvp":
        return jvp(loss, (x,), (direction(x),))[1]
    if transform == "vmap_grad":
        return vmap(grad(loss))(batch_of(x))[0]
    compiled = compile_grad(loss, x.copy())
    np.testing.assert_allclose(compiled(x + 0.25)[0], grad(loss)(x + 0.25)[0], rtol=1e-12)
    return compiled(x)[0]  # a replay, after one on other values


def expected(transform, loss, x, eps=1e-6):
    """The same, from the eager gradient of ``loss`` (a program without ``checkpoint``):
    the Hessian by central differences of it, with step ``eps``."""

    def gradient(x):
        return grad(loss)(x.copy())[0]

    if transform == "hessian":
        steps = eps * np.eye(x.size)
        return np.stack([(gradient(x + s) - gradient(x - s)) / (2 * eps) for s in steps], -1)
    if transform == "jvp":
        return np.sum(gradient(x) * direction(x))
    if transform == "vmap_grad":
        return np.stack([gradient(example) for example in batch_of(x)])
    return gradient(x)


def check_like_the_plain_program(transform, program, x, eps=1e-6, fd_tolerance=1e-6):
    """``program(wrap)``, a scalar loss with its blocks wrapped in ``wrap``: under
    ``checkpoint`` it gives what it gives without, and leaves the caller's array as
    that does (unchanged: its writes land on the transform's nodes)."""
    reference = program(plain)
    np.testing.assert_allclose(  # the reference itself, against NumPy
        grad(reference)(x.copy())[0],
        numeric_grad(reference, (x,), 0, eps),
        rtol=fd_tolerance,
        atol=fd_tolerance,
    )
    held = x.copy()
    got = transformed(transform, program(checkpoint), held)
    # exact but for rounding, except a Hessian by differences, as exact as those are
    tolerance = max(fd_tolerance, 1e-5) if transform == "hessian" else 1e-9
    np.testing.assert_allclose(
        got, expected(transform, reference, x, eps), rtol=tolerance, atol=tolerance
    )
    assert np.array_equal(held, x) and held.flags.writeable


# -- writes into the arguments -------------------------------------------------------------


def doubled(x):
    x *= 2.0
    return np.sin(x)


def first_zeroed(x):
    x[0] = 0.0
    return np.sin(x)


def out_into_argument(x):
    np.add(x, 1.0, out=x)
    return np.sin(x)


def written_through_a_view(x):
    tail = x[1:]
    tail *= 3.0  # writes x, as NumPy does
    return np.tanh(x)


def centred(h):
    h -= np.mean(h)
    return h  # the argument itself, written


BLOCKS = [doubled, first_zeroed, out_into_argument, written_through_a_view, centred]


def on_the_input(block):
    """A loss that hands its input to ``block`` and reads it again afterwards, when it
    holds what ``block`` wrote."""

    def program(wrap):
        step = wrap(block)
        return lambda x: np.sum(step(x) ** 2) + np.sum(x * np.arange(1.0, 1.0 + x.size))

    return program


def on_an_intermediate(block):
    """A loss that hands ``block`` an array the tape computed (read-only underneath)."""

    def program(wrap):
        step = wrap(block)

        def loss(x):
            h = x * 2.0
            y = step(h)
            return np.sum(y**2) + np.sum(h * np.arange(1.0, 1.0 + x.size))

        return loss

    return program


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("program", [on_the_input, on_an_intermediate])
def test_a_write_into_an_argument_is_the_plain_programs(program, block, transform):
    if transform == "vmap_grad" and block is out_into_argument:
        pytest.skip("vmap refuses out= into a batch, with and without checkpoint")
    check_like_the_plain_program(transform, program(block), X)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_write_into_a_view_argument_reaches_its_base(transform):
    def program(wrap):
        step = wrap(doubled)

        def loss(x):
            y = step(x[1:])  # writes x's tail
            return np.sum(y**2) + np.sum(x * np.arange(1.0, 1.0 + x.size))

        return loss

    check_like_the_plain_program(transform, program, X)


def test_a_write_into_an_argument_another_argument_views_is_refused():
    def block(a, b):
        a *= 2.0  # b sees it, as a view of a; each run's inputs are apart
        return np.sum(a[1:] * b)

    with pytest.raises(TypeError, match=r"checkpoint\(block\) writes into an argument whose"):
        grad(lambda x: checkpoint(block)(x, x[1:]))(X.copy())


def test_a_write_into_a_constant_argument_lands_once_as_in_numpy():
    def scaled(x, w):
        w *= 2.0
        return np.sin(x) * w

    def gradient_and_constant(wrap):
        w = np.array([1.0, 2.0, 3.0])
        step = wrap(scaled)
        return grad(lambda x: np.sum(step(x, w) ** 2))(X.copy())[0], w

    g_plain, w_plain = gradient_and_constant(plain)
    g_checkpointed, w_checkpointed = gradient_and_constant(checkpoint)
    np.testing.assert_array_equal(w_plain, [2.0, 4.0, 6.0])  # once, not again backwards
    np.testing.assert_array_equal(w_checkpointed, w_plain)
    np.testing.assert_allclose(g_checkpointed, g_plain, rtol=1e-12)
    numeric = numeric_grad(lambda x: np.sum(scaled(x, np.array([1.0, 2.0, 3.0])) ** 2), (X,), 0)
    np.testing.assert_allclose(g_checkpointed, numeric, rtol=1e-6)


def test_a_constant_argument_changed_before_the_recomputation_is_refused():
    w = np.array([1.0, 2.0, 3.0])

    def loss(x):
        y = checkpoint(lambda x, w: x * w)(x, w)
        w[0] = 100.0  # the recomputation would read it
        return np.sum(y)

    with pytest.raises(checkpoint_module.MutationError, match=r"checkpoint\(<lambda>\)"):
        grad(loss)(np.zeros(3))


def test_an_output_that_is_an_argument_or_a_view_of_one_aliases_it_as_in_numpy():
    def passthrough(x):
        return {"same": x, "tail": x[1:], "new": np.tanh(x)}

    def program(wrap):
        step = wrap(passthrough)

        def loss(x):
            out = step(x)
            out["tail"][0] = 5.0  # writes x, and so out["same"]
            return np.sum(out["same"] ** 2 * np.arange(3.0)) + np.sum(out["new"])

        return loss

    check_like_the_plain_program("grad", program, X)
    x = np.ones(3)
    out = checkpoint(passthrough)(x)  # no node: NumPy's own program
    assert out["same"] is x and np.shares_memory(out["tail"], x)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_writes_of_any_values_and_shapes(data):
    x = data.draw(arrays((data.draw(st.integers(2, 5)),), low=-1.5, high=1.5))
    block = data.draw(st.sampled_from(BLOCKS))
    program = data.draw(st.sampled_from([on_the_input, on_an_intermediate]))
    check_like_the_plain_program("grad", program(block), x)


# -- state changed between the forward pass and the recomputation --------------------------


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("changed", ["global", "closure array"])
def test_state_changed_before_the_recomputation_is_refused_or_followed(changed, transform):
    settings_ = {"scale": 1.0}
    scale = np.ones(3)

    def scaled(x):
        return np.sin(x) * (settings_["scale"] if changed == "global" else scale)

    def program(wrap, change=True):
        step = wrap(scaled)

        def loss(x):
            y = step(x)
            if change:  # after the forward run, before the reverse pass
                settings_["scale"] = 2.0
                scale[...] = 2.0
            return np.sum(y**2)

        return loss

    settings_["scale"] = 1.0
    try:
        got = transformed(transform, program(checkpoint), X.copy())
    except RuntimeError as error:  # refused, naming the function and why
        assert "checkpoint(scaled)" in str(error) and "another value" in str(error)
        return
    except ValueError as error:  # compile_grad refuses state changed while it runs
        assert transform == "compile_grad" and "changes" in str(error)
        return
    # or followed: the derivative of the function the forward pass ran
    settings_["scale"] = 1.0
    scale[...] = 1.0
    reference = program(plain, change=False)
    np.testing.assert_allclose(got, expected(transform, reference, X), rtol=1e-5, atol=1e-7)


def test_under_vmap_a_changed_global_is_refused_too():
    state = {"scale": 1.0}

    def loss(x):
        y = checkpoint(lambda x: np.sin(x) * state["scale"])(x)
        state["scale"] += 1.0
        return np.sum(y**2)

    with pytest.raises(RuntimeError, match=r"checkpoint\(<lambda>\).*another value"):
        vmap(grad(loss))(batch_of(X))


# -- containers as outputs ---------------------------------------------------------------


def several(x):
    return {
        "sin": np.sin(x),
        "pair": (np.cos(x) * 2.0, np.sum(x**2)),  # an array and a scalar
        "single": x[:2].astype(np.float32) * np.float32(3.0),  # float32 stays float32
        "absent": None,
    }


def on_a_container(wrap):
    step = wrap(several)

    def loss(x):
        out = step(x)
        assert out["absent"] is None and out["single"].dtype == np.float32
        return (
            np.sum(out["sin"] ** 2)
            + np.sum(out["pair"][0] * x)
            + out["pair"][1] ** 2
            + np.sum(out["single"] * x[:2])
        )

    return loss


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_container_output_is_the_plain_programs(transform):
    # a wider step for the differences: float32 rounding over 1e-6 would swamp them
    check_like_the_plain_program(transform, on_a_container, X, eps=1e-3, fd_tolerance=1e-3)


def test_a_container_output_under_vmap_and_one_branch_per_batch_kind():
    X3 = np.stack([X, X + 0.5, -X])
    got = vmap(checkpoint(several))(X3)  # no node: the function itself, batched
    for k, x in enumerate(X3):
        np.testing.assert_allclose(got["pair"][1][k], np.sum(x**2))
        np.testing.assert_allclose(got["sin"][k], np.sin(x))

    def block(x, w):
        return {"y": np.tanh(x * w), "penalty": np.sum(w**2)}  # batched, and not

    def loss(x, w):
        out = checkpoint(block)(x, w)
        if out["penalty"] > 1.0:  # control flow on the unbatched output, as without checkpoint
            return np.sum(out["y"]) + out["penalty"]
        return np.sum(out["y"])

    w = np.array([0.5, -1.0, 2.0])
    gx, gw = vmap(grad(loss), in_axes=(0, None))(X3, w)
    for k, x in enumerate(X3):
        np.testing.assert_allclose(gx[k], numeric_grad(loss, (x, w), 0), rtol=1e-6)
        np.testing.assert_allclose(gw[k], numeric_grad(loss, (x, w), 1), rtol=1e-6)


def test_each_run_records_on_its_own_tape_and_runs_batched_under_vmap():
    seen = []

    def block(x):
        seen.append(type(x).__name__)
        return np.sin(x) * x

    t = Tape()
    from tape import Leaf

    checkpoint(block)(Leaf(t, X))
    assert len(t) == 2  # the Leaf and one Branch: the run's own records are gone
    seen.clear()
    vmap(grad(lambda x: np.sum(checkpoint(block)(x))))(batch_of(X))
    assert seen == ["Leaf", "Leaf"]  # one batched run forwards, one backwards
