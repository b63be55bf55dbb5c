"""tape.scipy.sparse: a sparse constant beside a node, and sparse arrays differentiable in
their stored values (gradients shaped like the values), against central differences."""

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")

from sensitivities.scipy.sparse import (  # noqa: E402
    pattern_matmul,
    pattern_solve,
    sparse_matmul,
    sparse_solve,
)
from tape import grad, hessian, value_and_grad  # noqa: E402
from tape.scipy import sparse  # noqa: E402
from tests.fd import check_grads, numeric_grad  # noqa: E402
from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.strategies import arrays  # noqa: E402

S = sp.random(6, 5, density=0.4, random_state=1, format="csr")
SQUARE = (sp.random(5, 5, density=0.3, random_state=2) + 4 * sp.eye_array(5)).tocsr()
ROWS = np.array([0, 1, 1, 2, 2, 0, 1])  # (1, 1) twice: duplicates are summed
COLS = np.array([0, 0, 1, 2, 1, 2, 1])


def values_draw(data):
    return (data.draw(arrays((7,), 1.0, 3.0)), data.draw(arrays((3,))))


def with_values(values, x, format="coo"):
    A = sparse.coo_array((values, (ROWS, COLS)), shape=(3, 3)).asformat(format)
    return A @ x


def solve_with_values(values, b):
    A = sparse.coo_array((values + 3.0 * (ROWS == COLS), (ROWS, COLS)), shape=(3, 3))
    return sparse.linalg.spsolve(A.tocsc(), b)


CASES = [
    Case(sparse_matmul, lambda data: (data.draw(arrays((5,))),), lambda x: sparse.matmul(S, x)),
    Case(sparse_solve, lambda data: (data.draw(arrays((5,))),),
         lambda b: sparse.linalg.spsolve(SQUARE, b)),  # fmt: skip
    Case(pattern_matmul, values_draw, with_values, argnums=(0, 1)),
    Case(pattern_solve, values_draw, solve_with_values, argnums=(0, 1)),
]
test_sparse_rules_match_finite_differences = rule_test(CASES, max_examples=5)


def test_a_constant_beside_a_node_every_way():
    x = np.random.default_rng(0).standard_normal(5)
    y = np.random.default_rng(1).standard_normal(6)
    X = np.random.default_rng(2).standard_normal((5, 3))
    np.testing.assert_allclose(sparse.matmul(S, x), S @ x)
    for f in [lambda x: sparse.matmul(S, x),  # S @ x
              lambda x: sparse.dot(S, X * x[:, None]),  # S @ X, 2-D
              lambda x: sparse.matmul(S.T, y) * x,  # S.T @ y, a constant
              lambda x: sparse.matmul(S.T, sparse.matmul(S, x)),  # S.T @ (S @ x)
              lambda x: sparse.matmul(np.tile(x, (2, 1)), S.T),  # x @ S.T, 2-D
              lambda x: sparse.matmul(x, S.T),  # x @ S.T, 1-D
              lambda x: sparse.multiply(S, np.outer(y, x)).data,  # elementwise, sparse
              lambda x: sparse.linalg.spsolve(SQUARE, x)]:  # fmt: skip
        check_grads(f, x)
    assert sp.issparse(sparse.multiply(S, np.outer(y, x)))  # plain values: SciPy's own


@pytest.mark.parametrize("format", ["coo", "csr", "csc"])
def test_values_through_conversions_transposes_and_products(format):
    rng = np.random.default_rng(3)
    values, x = rng.uniform(1, 2, 7), rng.standard_normal(3)
    dense = np.zeros((3, 3))
    np.add.at(dense, (ROWS, COLS), values)

    def f(values, x):
        A = sparse.coo_array((values, (ROWS, COLS)), shape=(3, 3)).asformat(format)
        xA = sparse.matmul(x, A.tocsr())  # x @ A, for x a node (see tape.scipy.sparse)
        return (A @ x) + (A.T @ x) ** 2 + A.dot(x) * xA + A.tocsc().T.tocsr() @ x

    expected = dense @ x + (dense.T @ x) ** 2 + (dense @ x) * (x @ dense) + dense.T @ x
    np.testing.assert_allclose(f(values, x), expected, rtol=1e-12)
    check_grads(f, values, x)
    g = grad(lambda v: np.sum(f(v, x)))(values)[0]
    assert g.shape == values.shape


def test_csr_and_csc_from_data_indices_indptr():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(5)
    for make, M in [(sparse.csr_array, S.T.tocsr()), (sparse.csc_array, S.tocsc())]:
        data = M.data.copy()

        def f(data, make=make, M=M):
            A = make((data, M.indices, M.indptr), shape=M.shape)
            return np.sum(np.sin(A @ x if M.shape[1] == 5 else A.T @ x))

        plain = M.T @ x if M.shape[1] != 5 else M @ x
        assert f(data) == pytest.approx(np.sum(np.sin(plain)))
        g = grad(f)(data)[0]
        assert g.shape == data.shape
        np.testing.assert_allclose(g, numeric_grad(f, (data,), 0), rtol=1e-6, atol=1e-8)


def test_plain_values_give_scipys_own_types():
    A = sparse.csr_array((np.ones(7), (ROWS, COLS)), shape=(3, 3))
    assert isinstance(A, sp.csr_array) and A[1, 1] == 2.0
    assert isinstance(sparse.coo_matrix(S), sp.coo_matrix)
    assert sparse.eye_array is sp.eye_array
    assert sparse.linalg.cg is sp.linalg.cg


def test_second_derivative_through_a_sparse_solve():
    b = np.array([1.0, -1.0, 0.5])

    def f(values):
        return np.sum(solve_with_values(values, b) ** 2)

    values = np.linspace(1.0, 2.0, 7)
    h = hessian(f)(values)
    expected = np.stack([numeric_grad(lambda v, i=i: grad(f)(v)[0][i], (values,), 0)
                         for i in range(7)])  # fmt: skip
    np.testing.assert_allclose(h, expected, rtol=1e-5, atol=1e-8)


def grid_laplacian_loss(n_side):
    """A resistor grid: (L(w) + I/10) u = f for edge conductances w, loss sum(u^2)."""
    n = n_side * n_side
    ids = np.arange(n).reshape(n_side, n_side)
    i = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    j = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    rows = np.concatenate([i, j, i, j, np.arange(n)])
    cols = np.concatenate([i, j, j, i, np.arange(n)])
    f = np.sin(np.arange(n) * 0.01)

    def loss(w):
        values = np.concatenate([w, w, -w, -w, np.full(n, 0.1)])
        L = sparse.coo_array((values, (rows, cols)), shape=(n, n)).tocsc()
        return np.sum(sparse.linalg.spsolve(L, f) ** 2)

    return loss, len(i)


def test_graph_laplacian_gradient_is_shaped_like_the_edges():
    loss, n_edges = grid_laplacian_loss(30)
    w = np.random.default_rng(5).uniform(0.5, 1.5, n_edges)
    g = grad(loss)(w)[0]
    assert g.shape == (n_edges,)
    for k in (0, 17, n_edges - 1):
        e = np.zeros(n_edges)
        e[k] = 1e-4  # the loss is ~2e4: a smaller step is lost in its rounding
        assert g[k] == pytest.approx((loss(w + e) - loss(w - e)) / 2e-4, rel=1e-5, abs=1e-9)


def test_errors_name_what_to_do():
    with pytest.raises(TypeError, match="pattern"):
        grad(lambda r: np.sum(sparse.coo_array((np.ones(2), (r, r)), shape=(3, 3)) @ np.ones(3)))(
            np.array([0.0, 1.0]))  # fmt: skip
    with pytest.raises(TypeError, match="dense node"):
        grad(lambda x: np.sum(sparse.csr_array(x)))(np.ones((2, 2)))


@pytest.mark.parametrize(
    "kind", ["csr_array", "csc_array", "coo_array", "csr_matrix", "csc_matrix"]
)
def test_scipys_own_operators_with_a_node(kind):
    sp = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(3)
    A = rng.normal(size=(4, 4))
    A[A < 0.2] = 0.0
    S = getattr(sp, kind)(A)
    x, y = rng.normal(size=4), rng.normal(size=4)
    # d/dx |A x|^2 = 2 A'A x, by hand; the values are SciPy's own on plain arrays
    for f, at, expected in [
        (lambda x: np.sum((S @ x) ** 2), x, 2 * A.T @ A @ x),
        (lambda y: np.sum((y @ S) ** 2), y, 2 * A @ A.T @ y),
        (lambda y: np.sum((S.T @ y) ** 2), y, 2 * A @ A.T @ y),
    ]:
        value, (g,) = value_and_grad(f)(at)
        np.testing.assert_allclose(value, f(at))
        np.testing.assert_allclose(g, expected)
    X = rng.normal(size=(4, 4))
    product = lambda X: (S * X).sum()  # noqa: E731
    value, (g,) = value_and_grad(product)(X)
    np.testing.assert_allclose(value, product(X))
    # sparse arrays: S * X elementwise, gradient A; *_matrix types: a matrix product
    matrix = kind.endswith("matrix")
    np.testing.assert_allclose(g, A.T @ np.ones((4, 4)) if matrix else A)
