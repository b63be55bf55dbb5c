"""Product rules against central differences, including batched and 1-D operands."""

import numpy as np
from hypothesis import strategies as st

from tests.sensitivities.cases import Case, rule_test
from tests.strategies import arrays

dims = st.integers(1, 4)


def matmul_draw(data):
    n, k, m = data.draw(dims), data.draw(dims), data.draw(dims)
    batch_a = data.draw(st.sampled_from([(), (2,), (1,), (3, 1)]))
    batch_b = data.draw(st.sampled_from([(), (2,), (1,)]))
    if batch_a == (3, 1) and batch_b == (2,):
        batch_b = ()
    a_shape = data.draw(st.sampled_from([(k,), batch_a + (n, k)]))
    b_shape = data.draw(st.sampled_from([(k,), batch_b + (k, m)]))
    return data.draw(arrays(a_shape)), data.draw(arrays(b_shape))


def dot_draw(data):
    k = data.draw(dims)
    a_shape = data.draw(st.sampled_from([(), (k,), (2, k), (3, 2, k)]))
    if a_shape == ():
        b_shape = data.draw(st.sampled_from([(), (3,), (2, 3)]))
    else:
        b_shape = data.draw(st.sampled_from([(k,), (k, 2), (2, k, 3)]))
    return data.draw(arrays(a_shape)), data.draw(arrays(b_shape))


def tensordot_draw(data):
    a = data.draw(arrays((2, 3, 4)))
    axes, b_shape = data.draw(st.sampled_from([
        (1, (4, 2)), (2, (3, 4, 2)), (0, (2,)), (([0, 2], [1, 0]), (4, 2, 3)), (([1], [0]), (3,)),
    ]))  # fmt: skip
    return a, data.draw(arrays(b_shape)), axes


CASES = [
    Case(np.matmul, matmul_draw, argnums=(0, 1)),
    Case(np.dot, dot_draw, argnums=(0, 1)),
    Case(np.tensordot, tensordot_draw, argnums=(0, 1)),
]

test_product_rules = rule_test(CASES)


def test_matmul_operator_and_method():
    from tape import grad

    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    gA, gB = grad(lambda A, B: np.sum(A @ B) + np.sum(A.dot(B)))(A, B)
    np.testing.assert_allclose(gA, 2 * np.ones((3, 2)) @ B.T)
    np.testing.assert_allclose(gB, 2 * A.T @ np.ones((3, 2)))
