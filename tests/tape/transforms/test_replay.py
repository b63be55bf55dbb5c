"""The source of a compiled tape: its inlined forms agree with the registered rules, and
the calls it lowers are those of vmap's one table, replayed equal to grad."""

import math

import numpy as np
import pytest

from sensitivities import registry
from tape import compile_grad, grad, vmap
from tape.transforms.batching import REDUCTIONS
from tape.transforms.replay import _SCALAR


@pytest.mark.parametrize("f", list(_SCALAR), ids=lambda f: f.__name__)
def test_scalar_forms_agree_with_the_registered_rules(f):
    x = [0.7, 1.3][: f.nin]
    y = f(*x)
    rules = registry.lookup(f)
    for i in range(f.nin):
        expected = rules.rule(i, x)(y, 0.9, *x)
        forward, adjoints = _SCALAR[f]
        env = {f"_{n}": getattr(math, n) for n in ("exp", "log", "sqrt", "sin", "cos", "tanh")}
        names = [f"a{j}" for j in range(f.nin)]
        env.update(dict(zip(names, x)), y=float(y), gy=0.9)
        assert eval(forward.format(*names), env) == pytest.approx(float(y), rel=1e-15)
        assert eval(adjoints[i].format(*names, y="y", g="gy"), env) == pytest.approx(
            float(expected), rel=1e-15
        )


@pytest.mark.parametrize("f", list(REDUCTIONS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": (0, -1), "keepdims": True}])
def test_each_reduction_of_the_shared_table_replays_as_grad_computes_it(f, kwargs):
    x = np.random.default_rng(3).standard_normal((2, 3, 4)) + 3.0

    def loss(x):
        return np.sum(np.sin(f(x, **kwargs)))

    compiled = compile_grad(loss, x)
    for v in (x, x[::-1] * 0.5):
        np.testing.assert_allclose(compiled(v)[0], grad(loss)(v)[0], rtol=1e-12)
    per_example = vmap(compile_grad(loss, x[0]))  # the batched lowering of the same call
    batch = np.stack([x, x * 0.5])
    for _ in range(2):  # recorded on the batch, then replayed
        got = per_example(batch)[0]
        np.testing.assert_allclose(got, np.stack([grad(loss)(v)[0] for v in batch]), rtol=1e-12)
