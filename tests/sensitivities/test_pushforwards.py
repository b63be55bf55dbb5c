"""The explicit pushforwards of sensitivities/pushforwards.py: each equals the one forward
mode derives from the sensitivity, and tangents pushed through them, several directions
at once, match central differences."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sensitivities import registry
from tape import jvp
from tape.transforms.grad import tree_flatten
from tests.tape.sweeps import CASES, defined_at

RNG = np.random.default_rng(5)


def _real(tree):
    return not any(np.iscomplexobj(x) for x in tree_flatten(tree)[0])


def _central(f, args, tangents, h=1e-6):
    """The directional derivative of f along the tangents, by central differences."""
    plus = f(*(a + h * t for a, t in zip(args, tangents)))
    minus = f(*(a - h * t for a, t in zip(args, tangents)))
    return (plus - minus) / (2 * h)


EXAMPLES = {
    "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
    "matmul batched": (np.matmul, [(2, 3, 4), (4, 5)]),
    "einsum": (lambda a, b: np.einsum("ij,jk->ik", a, b), [(3, 4), (4, 2)]),
    "einsum trace": (lambda a, b: np.einsum("ii,i->i", a, b), [(3, 3), (3,)]),
    "sum over an axis": (lambda a, b: np.sum(a * b, axis=0), [(3, 4), (4,)]),
    "mean keepdims": (lambda a, b: np.mean(a, axis=1, keepdims=True) * b, [(3, 4), (3, 1)]),
    "cumsum": (lambda a, b: np.cumsum(a, axis=1) + b, [(3, 4), (4,)]),
    "tensordot": (lambda a, b: np.tensordot(a, b, axes=([1, 2], [0, 1])), [(2, 3, 4), (3, 4)]),
    "solve": (lambda a, b: np.linalg.solve(a + 4 * np.eye(3), b), [(3, 3), (3, 2)]),
    "transpose and reshape": (lambda a, b: np.transpose(a).reshape(-1) * b, [(3, 4), (12,)]),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_tangents_pushed_in_several_directions_match_central_differences(name):
    f, shapes = EXAMPLES[name]
    args = tuple(RNG.standard_normal(s) for s in shapes)
    directions = [tuple(RNG.standard_normal(s) for s in shapes) for _ in range(3)]
    batched = tuple(np.stack([d[i] for d in directions]) for i in range(len(shapes)))
    value, tangents = jvp(f, args, batched)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    assert tangents.shape == (3,) + np.shape(value)
    for k, d in enumerate(directions):
        np.testing.assert_allclose(tangents[k], _central(f, args, d), rtol=1e-6, atol=1e-8)


# (vmap's own primitives are left out: their values are batched, which the derived
# pushforward, pairing plain cotangents with them, cannot see; test_forward checks theirs)
EXPLICIT = [
    c
    for c in CASES
    if any(registry.pushforward_of(c.registered, i) for i in range(4))
    and not str(getattr(c.registered, "__module__", "")).startswith("tape.transforms.vmap")
]


@pytest.mark.parametrize("case", EXPLICIT, ids=[c.id for c in EXPLICIT])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_explicit_pushforwards_equal_the_ones_derived_from_sensitivities(
    case, data, monkeypatch_pushforwards
):
    args = tuple(case.draw(data))
    assume(defined_at(case, args) and _real(args) and _real(case.call(*args)))
    tangents = tuple(
        np.random.default_rng(1).standard_normal((2,) + np.shape(a)) if i in case.argnums else None
        for i, a in enumerate(args)
    )
    explicit = jvp(case.call, args, tangents)[1]
    with monkeypatch_pushforwards():
        derived = jvp(case.call, args, tangents)[1]
    for a, b in zip(tree_flatten(explicit)[0], tree_flatten(derived)[0]):
        tol = 100 * np.finfo(np.result_type(a)).eps  # the same sums, in another order
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def monkeypatch_pushforwards():
    """A context in which no explicit pushforward is registered: the derived ones run."""
    import contextlib

    @contextlib.contextmanager
    def hidden():
        saved = dict(registry._pushforwards)
        registry._pushforwards.clear()
        try:
            yield
        finally:
            registry._pushforwards.update(saved)

    return hidden
