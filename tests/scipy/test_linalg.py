"""tape.scipy.linalg against scipy.linalg: SciPy's values and return types, gradients
against central differences, second order in both modes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sla = pytest.importorskip("scipy.linalg")

from sensitivities.scipy import linalg as rules  # noqa: E402
from tape import check_grad, grad, hessian, jacobian, library_code  # noqa: E402
from tape.scipy import linalg  # noqa: E402
from tests.fd import numeric_grad  # noqa: E402
from tests.sensitivities.cases import Case, rule_test  # noqa: E402
from tests.strategies import arrays  # noqa: E402

SIZES = st.integers(2, 4)


def near_identity(data, n=None, spread=0.3):
    """A matrix close to a multiple of the identity: real roots and logarithms."""
    n = n or data.draw(SIZES)
    return 2.0 * np.eye(n) + data.draw(arrays((n, n), -spread, spread))


def sylvester_draw(data):
    n, m = data.draw(SIZES), data.draw(SIZES)
    # eigenvalues of a and -b apart: a near 2 I, b near I
    return near_identity(data, n), near_identity(data, m) - np.eye(m), data.draw(arrays((n, m)))


def banded_draw(data):
    n = data.draw(st.integers(3, 6))
    lower, upper = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    ab = data.draw(arrays((lower + upper + 1, n), -0.5, 0.5))
    ab[upper] += 3.0  # a dominant diagonal
    b = data.draw(arrays(data.draw(st.sampled_from([(n,), (n, 2)]))))
    return (lower, upper), ab, b


def null_space_draw(data):
    m = data.draw(st.integers(1, 3))
    a = data.draw(arrays((m, m + data.draw(st.integers(1, 2)))))
    a[:, :m] += 3.0 * np.eye(m)  # full row rank: the null space keeps its dimension
    return (a,)


def projector(basis):
    return basis @ basis.T  # does not depend on the basis chosen


def rotated(m):
    """``q m q'`` for a fixed orthogonal ``q``: a matrix that is not already triangular (at
    a triangular one LAPACK returns it as is, while a perturbation may reorder the
    eigenvalues: SciPy's Schur form jumps there)."""
    q = np.linalg.qr(np.random.default_rng(len(m)).standard_normal(np.shape(m)))[0]
    return q @ m @ q.T


def schur_draw(data):
    n = data.draw(SIZES)  # real eigenvalues, well apart: a triangular Schur form
    return (rotated(np.diag(np.arange(n) * 1.5 - 1.0) + data.draw(arrays((n, n), -0.3, 0.3))),)


def schur_invariant(a):
    t, z = linalg.schur(a)  # Z diag(k) Z' and T: free of the signs of Z's columns
    weights = np.arange(1.0, np.shape(a)[0] + 1)
    return projector(z * weights) + np.triu(t) ** 2


CASES = [
    Case(rules.sqrtm, lambda d: (near_identity(d),)),
    Case(rules.logm, lambda d: (near_identity(d, 2),)),  # SciPy's logm is slow: small
    Case(rules.solve_sylvester, sylvester_draw, argnums=(0, 1, 2)),
    Case(rules.solve_banded, banded_draw, argnums=(1, 2)),
    Case(rules.null_space, null_space_draw, lambda a: projector(linalg.null_space(a))),
    Case(rules.schur_packed, schur_draw, schur_invariant),
]

test_rules_match_finite_differences = rule_test(CASES, max_examples=5)


@pytest.mark.parametrize("name, args", [
    ("sqrtm", lambda d: (near_identity(d),)), ("logm", lambda d: (near_identity(d),)),
    ("solve_sylvester", sylvester_draw), ("solve_banded", banded_draw),
    ("null_space", null_space_draw),
])  # fmt: skip
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_values_are_scipys(name, args, data):
    values = args(data)
    np.testing.assert_allclose(getattr(linalg, name)(*values), getattr(sla, name)(*values),
                               rtol=1e-10, atol=1e-12)  # fmt: skip


SECOND_ORDER = [
    ("sqrtm", lambda a: linalg.sqrtm(a), lambda r: (near(r),)),
    ("logm", lambda a: linalg.logm(a), lambda r: (near(r)[:2, :2],)),
    ("solve_sylvester", linalg.solve_sylvester, lambda r: (near(r), near(r) - np.eye(3),
                                                           r.standard_normal((3, 3)))),
    ("solve_continuous_lyapunov", linalg.solve_continuous_lyapunov,
     lambda r: (near(r), r.standard_normal((3, 3)))),
    ("solve_banded", lambda ab, b: linalg.solve_banded((1, 1), ab, b),
     lambda r: (r.uniform(-0.5, 0.5, (3, 4)) + [[0], [3], [0]], r.standard_normal((4, 2)))),
    ("null_space", lambda a: projector(linalg.null_space(a)),
     lambda r: (r.standard_normal((2, 4)),)),
    ("expm_frechet", lambda a, e: linalg.expm_frechet(a, e),
     lambda r: (0.3 * r.standard_normal((3, 3)), r.standard_normal((3, 3)))),
]  # fmt: skip


def near(rng):
    return 2.0 * np.eye(3) + rng.uniform(-0.3, 0.3, (3, 3))


@pytest.mark.parametrize("name, f, args", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_second_order_in_both_modes(name, f, args):
    check_grad(f, *args(np.random.default_rng(0)), order=2, rtol=1e-4, atol=1e-6)


# -- complex roots, logarithms and Sylvester equations -------------------------------------


def symmetrized(a):
    return (a + a.T) / 2


def test_sqrtm_of_a_real_matrix_with_a_complex_root_in_both_modes_to_second_order():
    # autograd's test: the square root of a random symmetric matrix (negative eigenvalues,
    # so a complex root), forward and reverse, to second order
    r = np.random.default_rng(11).standard_normal((3, 3))
    assert np.iscomplexobj(sla.sqrtm(symmetrized(r)))
    check_grad(lambda a: linalg.sqrtm(symmetrized(a)), r, order=2, rtol=1e-4, atol=1e-6)

    def loss(a):
        return np.real(np.sum(linalg.sqrtm(symmetrized(a)) * np.arange(1.0, 10.0).reshape(3, 3)))

    fd = numeric_grad(loss, (r,), 0)
    np.testing.assert_allclose(grad(loss)(r)[0], fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jacobian(loss, mode="fwd")(r), fd, rtol=1e-6, atol=1e-7)
    h = hessian(loss)(r).reshape(9, 9)
    fd2 = _jacobian_by_differences(lambda a: grad(loss)(a)[0], r).reshape(9, 9)
    np.testing.assert_allclose(h, fd2, rtol=1e-5, atol=1e-6)


def _jacobian_by_differences(f, x, eps=1e-6):
    columns = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        columns.append((f(x + e) - f(x - e)) / (2 * eps))
    return np.stack(columns, axis=-1)


ROOT_LIBRARY = """
import numpy as np
from scipy.linalg import sqrtm


def root_trace(a):
    return np.real(np.trace(sqrtm((a + a.T) / 2) @ np.diag([1.0, 2.0, 3.0])))
"""


def test_library_code_calling_sqrtm_in_forward_mode_and_to_second_order():
    import sys
    import types

    lib = types.ModuleType("matrix_root_library")
    sys.modules[lib.__name__] = lib
    exec(ROOT_LIBRARY, lib.__dict__)
    r = np.random.default_rng(13).standard_normal((3, 3))  # a complex root
    fd = numeric_grad(lib.root_trace, (r,), 0)
    np.testing.assert_allclose(jacobian(lib.root_trace, mode="fwd")(r), fd, rtol=1e-6, atol=1e-7)
    h = hessian(lib.root_trace)(r).reshape(9, 9)
    np.testing.assert_allclose(h, _jacobian_by_differences(lambda a: grad(lib.root_trace)(a)[0],
                                                           r).reshape(9, 9), rtol=1e-5,
                               atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("name", ["sqrtm", "logm", "solve_sylvester"])
def test_complex_matrices_in_both_modes_to_second_order(name):
    rng = np.random.default_rng(12)
    c = near(rng) + 0.3j * rng.standard_normal((3, 3))
    q = rng.standard_normal((3, 3)) + 1j
    args = {"sqrtm": (c,), "logm": (c,), "solve_sylvester": (c, c.T - np.eye(3), q)}[name]
    np.testing.assert_allclose(getattr(linalg, name)(*args), getattr(sla, name)(*args),
                               rtol=1e-10, atol=1e-12)  # fmt: skip
    check_grad(getattr(linalg, name), *args, order=2, rtol=1e-4, atol=1e-6)


# -- compositions: SciPy's values and return types, and their gradients -------------------


def spd(rng, n=4):
    b = rng.standard_normal((n, n))
    return b @ b.T + n * np.eye(n), b


def test_expm_frechet_and_lyapunov_values():
    rng = np.random.default_rng(1)
    a, e = 0.5 * rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    for compute in (True, False):
        got, want = linalg.expm_frechet(a, e, compute_expm=compute), sla.expm_frechet(
            a, e, compute_expm=compute)  # fmt: skip
        assert type(got) is type(want)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    q = rng.standard_normal((3, 3))
    np.testing.assert_allclose(linalg.solve_continuous_lyapunov(a - 2 * np.eye(3), q),
                               sla.solve_continuous_lyapunov(a - 2 * np.eye(3), q))  # fmt: skip


@pytest.mark.parametrize("options", [{}, {"permute_l": True}, {"p_indices": True}])
def test_lu(options):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 4))
    got, want = linalg.lu(a, **options), sla.lu(a, **options)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-12)
    check_grad(lambda a: linalg.lu(a, **options)[-2:], a, order=2)


@pytest.mark.parametrize("mode", ["full", "economic", "r"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 4), (4, 3)])
def test_qr(mode, shape):
    a = np.random.default_rng(3).standard_normal(shape)
    got, want = linalg.qr(a, mode=mode), sla.qr(a, mode=mode)
    assert type(got) is tuple and len(got) == len(want)
    for g, w in zip(got, want):  # up to the signs of q's columns and r's rows
        np.testing.assert_allclose(np.abs(g), np.abs(w), atol=1e-12)
    if mode != "full" or shape[0] <= shape[1]:
        check_grad(lambda a: linalg.qr(a, mode=mode)[-1] ** 2, a, order=2)


def test_svd_and_pinv():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 5))
    np.testing.assert_allclose(linalg.svd(a, compute_uv=False), sla.svd(a, compute_uv=False))
    u, s, vh = linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(u * s @ vh, a)
    check_grad(lambda a: linalg.svd(a, compute_uv=False), a, order=2)
    low_rank = np.outer([1.0, 2.0, 3.0], [1.0, 1.0])
    for m in (a, low_rank):
        for kwargs in ({}, {"atol": 0.5}, {"rtol": 0.1}):
            got, rank = linalg.pinv(m, return_rank=True, **kwargs)
            want, want_rank = sla.pinv(m, return_rank=True, **kwargs)
            np.testing.assert_allclose(got, want, atol=1e-12)
            assert rank == want_rank
    check_grad(lambda a: linalg.pinv(a), a, order=2)


@pytest.mark.parametrize("kind", [None, 1, 2, 3])
def test_eigh(kind):
    rng = np.random.default_rng(5)
    s, c = spd(rng)
    b = None if kind is None else spd(rng)[0]
    options = {} if kind is None else {"type": kind}
    w, v = linalg.eigh(s, b, **options)
    ww, vv = sla.eigh(s, b, **options)
    np.testing.assert_allclose(w, ww)
    np.testing.assert_allclose(np.abs(v), np.abs(vv), atol=1e-12)

    def f(c, d):  # symmetric matrices through factors; vectors up to sign
        w, v = linalg.eigh(c @ c.T + 4 * np.eye(4), None if kind is None else d @ d.T + np.eye(4),
                           **options)  # fmt: skip
        return w, v**2

    check_grad(f, c, rng.standard_normal((4, 4)), order=2, rtol=1e-4)


def test_eigh_subsets():
    s, _ = spd(np.random.default_rng(6))
    for kwargs in ({"subset_by_index": [1, 2]}, {"subset_by_value": [4.0, 30.0]}):
        np.testing.assert_allclose(linalg.eigh(s, eigvals_only=True, **kwargs),
                                   sla.eigh(s, eigvals_only=True, **kwargs))  # fmt: skip
    check_grad(lambda c: linalg.eigh(c @ c.T, subset_by_index=[2, 3])[0],
               np.random.default_rng(7).standard_normal((4, 4)))  # fmt: skip


def test_special_matrices():
    rng = np.random.default_rng(8)
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal(4)
    np.testing.assert_array_equal(linalg.block_diag(a, b, 3.0), sla.block_diag(a, b, 3.0))
    np.testing.assert_array_equal(linalg.block_diag(1, [2, 3]), sla.block_diag(1, [2, 3]))
    np.testing.assert_array_equal(linalg.toeplitz(c, b), sla.toeplitz(c, b))
    np.testing.assert_array_equal(linalg.toeplitz(c), sla.toeplitz(c))
    np.testing.assert_array_equal(linalg.circulant(a), sla.circulant(a))
    check_grad(lambda a, b: linalg.block_diag(a, b, 3.0), a, b, order=2)
    check_grad(lambda c, b: linalg.toeplitz(c, b), c, b, order=2)
    check_grad(linalg.circulant, a, order=2)


def test_reexported_counterparts_are_the_rules_ones():
    from sensitivities import linalg as numpy_linalg

    for name in ("solve_triangular", "cho_factor", "cho_solve", "expm", "inv", "solve", "det",
                 "cholesky", "lu_factor", "lu_solve"):  # fmt: skip
        assert getattr(linalg, name) is getattr(numpy_linalg, name)
    assert set(linalg.__all__) <= set(dir(sla))
    assert linalg.qz is sla.qz  # not covered: SciPy's own


def test_scipys_own_computes_the_counterpart_inside_grad():
    # sqrtm(I + E) = I + E / 2 to first order: d/dA sum(sqrtm(A)) at I is ones / 2
    g = grad(lambda a: np.sum(sla.sqrtm(a)))(np.eye(2))[0]
    np.testing.assert_allclose(g, np.ones((2, 2)) / 2)
    g = grad(lambda a: np.sum(sla.solve_triangular(a, np.ones(2))))(np.eye(2))[0]
    np.testing.assert_allclose(g, -np.triu(np.ones((2, 2))))  # -x x^T, upper triangle read


def test_scipys_own_names_the_counterpart():
    with library_code(False):
        with pytest.raises(TypeError, match=r"scipy.linalg.sqrtm .* tape.scipy.linalg.sqrtm"):
            grad(lambda a: np.sum(sla.sqrtm(a)))(np.eye(2))
        with pytest.raises(TypeError, match=r"counterpart tape.scipy.linalg.solve_triangular"):
            grad(lambda a: np.sum(sla.solve_triangular(a, np.ones(2))))(np.eye(2))


# -- schur: real, distinct eigenvalues ------------------------------------------------------


def real_spectrum(rng, n=4, spread=0.3):
    """A matrix with real, well separated eigenvalues (an upper triangular Schur form)."""
    return rotated(np.diag(np.arange(n) * 1.5 - 1.0) + spread * rng.standard_normal((n, n)))


def schur_losses(rng, n):
    w, c = rng.standard_normal((n, n)), np.sign(rng.standard_normal(n))

    def upper(a):  # T's upper triangle
        t, _ = linalg.schur(a)
        return np.sum(np.triu(t) ** 2 * w)

    def gauge(a):  # the sign of each column of Z cancels
        t, z = linalg.schur(a)
        zc = z * c
        return zc @ (t * w) @ zc.T

    def squares(a):
        t, z = linalg.schur(a)
        return np.diagonal(t), z**2

    return [upper, gauge, squares]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_schur_values_and_gradients(n):
    rng = np.random.default_rng(10 + n)
    a = real_spectrum(rng, n)
    t, z = linalg.schur(a)
    tt, zz = sla.schur(a)
    np.testing.assert_allclose(t, tt, atol=1e-12)
    np.testing.assert_allclose(z, zz, atol=1e-12)
    for f in schur_losses(rng, n):
        check_grad(f, a, rtol=1e-5, atol=1e-7)


def test_schur_matches_central_differences_by_hand():
    rng = np.random.default_rng(20)
    a = real_spectrum(rng)
    f = schur_losses(rng, 4)[1]
    loss = lambda a: np.sum(f(a) * np.arange(16.0).reshape(4, 4))  # noqa: E731
    g = grad(loss)(a)[0]
    h, fd = 1e-6, np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = h
        fd[idx] = (loss(a + e) - loss(a - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_schur_second_order():
    rng = np.random.default_rng(30)
    a = real_spectrum(rng, 3)
    for f in schur_losses(rng, 3):
        check_grad(f, a, order=2, rtol=1e-4, atol=1e-6)
    loss = schur_losses(rng, 3)[0]
    from tape import hessian

    hess = np.reshape(hessian(loss)(a), (9, 9))
    np.testing.assert_allclose(hess, hess.T, rtol=1e-6, atol=1e-8)


def test_schur_plain_options_are_scipys():
    a = real_spectrum(np.random.default_rng(40))
    for kwargs in ({"output": "complex"}, {"sort": "lhp"}):
        for g, w in zip(linalg.schur(a, **kwargs), sla.schur(a, **kwargs)):
            np.testing.assert_allclose(g, w)


def test_schur_refuses_what_it_cannot_differentiate():
    rng = np.random.default_rng(50)
    a = real_spectrum(rng)
    rotation = np.array([[0.0, -1.0, 0.2], [1.0, 0.0, 0.1], [0.0, 0.0, 3.0]])
    cases = [
        (lambda a: linalg.schur(a, sort="lhp")[0], a, "sort="),
        (lambda a: linalg.schur(a, output="complex")[0], a, "output='complex'"),
        (lambda a: linalg.schur(a)[0], rotation, "real and distinct.*complex eigenvalues"),
        (lambda a: linalg.schur(a)[0], np.eye(3), "real and distinct.*repeated"),
    ]
    for f, x, message in cases:
        with pytest.raises(NotImplementedError, match=message):
            grad(lambda x, f=f: np.sum(f(x)))(x)
    with pytest.raises(ValueError, match="argument must be"):
        grad(lambda x: np.sum(linalg.schur(x, output="x")[0]))(a)


# -- scipy.linalg.blas: NumPy expressions with SciPy's meaning -----------------------------

blas_scipy = pytest.importorskip("scipy.linalg.blas")

from tape import Leaf, Tape  # noqa: E402
from tape.scipy.linalg import blas  # noqa: E402

# (routine without its precision, call with the arrays, the arrays' shapes)
BLAS = [
    ("gemm", lambda f, a, b: f(0.7, a, b), [(3, 4), (4, 2)]),
    ("gemm", lambda f, a, b, c: f(0.7, a, b, -0.4, c, trans_a=1, trans_b=2),
     [(4, 3), (2, 4), (3, 2)]),
    ("gemm", lambda f, a, b, c: f(1.0, a, b, beta=0.5, c=c, trans_a=2), [(4, 3), (4, 2), (3, 2)]),
    ("gemv", lambda f, a, x: f(1.3, a, x), [(3, 4), (4,)]),
    ("gemv", lambda f, a, x, y: f(1.3, a, x, 0.5, y, trans=1), [(4, 3), (4,), (3,)]),
    ("gemv", lambda f, a, x, y: f(1.3, a, x, 0.5, y, trans=2), [(4, 3), (4,), (3,)]),
    ("symm", lambda f, a, b: f(0.9, a, b), [(3, 3), (3, 2)]),
    ("symm", lambda f, a, b, c: f(0.9, a, b, 0.3, c, side=1, lower=1), [(3, 3), (2, 3), (2, 3)]),
    ("hemm", lambda f, a, b, c: f(0.9, a, b, 0.3, c, side=0, lower=0), [(3, 3), (3, 2), (3, 2)]),
    ("hemm", lambda f, a, b: f(0.9, a, b, side=1, lower=1), [(3, 3), (2, 3)]),
    ("syrk", lambda f, a: f(1.0, a), [(3, 4)]),
    ("syrk", lambda f, a, c: f(0.6, a, 0.4, c, trans=1, lower=1), [(4, 3), (3, 3)]),
    ("syrk", lambda f, a, c: f(0.6, a, c=c, lower=0), [(3, 4), (3, 3)]),
    ("herk", lambda f, a, c: f(0.6, a, 0.4, c, trans=2, lower=0), [(4, 3), (3, 3)]),
    ("herk", lambda f, a: f(1.0, a, lower=1), [(3, 4)]),
    ("syr", lambda f, x: f(0.8, x), [(4,)]),
    ("syr", lambda f, x, a: f(0.8, x, lower=1, a=a), [(4,), (4, 4)]),
    ("ger", lambda f, x, y, a: f(0.8, x, y, a=a), [(3,), (4,), (3, 4)]),
    ("geru", lambda f, x, y, a: f(0.8, x, y, a=a), [(3,), (4,), (3, 4)]),
    ("gerc", lambda f, x, y: f(0.8, x, y), [(3,), (4,)]),
    ("axpy", lambda f, x, y: f(x, y, a=0.3), [(4,), (4,)]),
    ("scal", lambda f, x: f(1.7, x), [(4,)]),
    ("nrm2", lambda f, x: f(x), [(4,)]),
    ("dot", lambda f, x, y: f(x, y), [(4,), (4,)]),
    ("dotu", lambda f, x, y: f(x, y), [(4,), (4,)]),
    ("dotc", lambda f, x, y: f(x, y), [(4,), (4,)]),
]  # fmt: skip
PRECISIONS = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
BLAS_CASES = [(p + name, call, shapes) for p in PRECISIONS for name, call, shapes in BLAS
              if hasattr(blas_scipy, p + name)]  # fmt: skip


def blas_arrays(name, shapes, seed=0):
    rng = np.random.default_rng(seed)
    dtype = PRECISIONS[name[0]]
    arrays = [rng.standard_normal(s) for s in shapes]
    if np.issubdtype(dtype, np.complexfloating):
        arrays = [x + 1j * rng.standard_normal(x.shape) for x in arrays]
    return [x.astype(dtype) for x in arrays]


def on_nodes(fn, *arrays):
    tape = Tape()
    return fn(*[Leaf(tape, a) for a in arrays]).value


@pytest.mark.parametrize("name, call, shapes", BLAS_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BLAS_CASES)])  # fmt: skip
def test_blas_routines_on_nodes_give_scipys_values_and_gradients(name, call, shapes):
    arrays = blas_arrays(name, shapes)
    theirs = call(getattr(blas_scipy, name), *[a.copy() for a in arrays])  # axpy writes in y
    ours = on_nodes(lambda *a: call(getattr(blas, name), *a), *arrays)
    assert np.result_type(ours) == np.result_type(theirs)
    single = name[0] in "sc"
    np.testing.assert_allclose(ours, theirs, rtol=1e-5 if single else 1e-12,
                               atol=1e-5 if single else 1e-12)  # fmt: skip
    if single:
        return
    w = np.random.default_rng(1).standard_normal(np.shape(theirs)) * (1 + 0.5j)

    def loss(*a):  # on copies: axpy and scal write into their vector, as SciPy's do
        return np.real(np.sum(call(getattr(blas, name), *map(np.copy, a)) * w))

    grads = grad(loss, argnums=tuple(range(len(arrays))))(*arrays)
    for i, g in enumerate(grads):  # complex arguments: JAX's convention, as tape's
        np.testing.assert_allclose(g, numeric_grad(loss, arrays, i), rtol=1e-6, atol=1e-7)


def test_blas_plain_values_are_scipys_own():
    a = np.random.default_rng(2).standard_normal((3, 4))
    assert blas.ddot(a[0], a[1]) == blas_scipy.ddot(a[0], a[1])
    assert type(blas.ddot(a[0], a[1])) is type(blas_scipy.ddot(a[0], a[1]))
    np.testing.assert_array_equal(blas.dsyrk(1.0, a), blas_scipy.dsyrk(1.0, a))
    assert blas.dtrmm is blas_scipy.dtrmm  # not covered: SciPy's own


def test_blas_ignores_c_where_beta_is_zero_and_keeps_its_other_triangle():
    rng = np.random.default_rng(3)
    a, c = rng.standard_normal((3, 2)), rng.standard_normal((3, 3))
    c[0, 1] = np.nan  # in the triangle syrk computes: never read with beta = 0
    theirs = blas_scipy.dsyrk(1.0, a, 0.0, c.copy())
    np.testing.assert_array_equal(on_nodes(lambda a: blas.dsyrk(1.0, a, 0.0, c), a), theirs)
    theirs = blas_scipy.dgemm(1.0, a, a.T, 0.0, c.copy())
    np.testing.assert_array_equal(on_nodes(lambda a: blas.dgemm(1.0, a, a.T, 0.0, c), a), theirs)


def test_blas_strided_forms_are_refused_on_nodes():
    with pytest.raises(NotImplementedError, match="incx"):
        grad(lambda x: blas.ddot(x, x, incx=2))(np.ones(4))


def test_blas_second_order_forward_mode_and_vmap():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((2, 3))
    check_grad(lambda a, b: blas.dgemm(0.5, a, b, trans_a=0), a, b, order=2)
    check_grad(lambda a: blas.dsyrk(1.0, a, lower=1), a, order=2)
    check_grad(lambda a, x: blas.dgemv(1.0, a, x, trans=1), a, rng.standard_normal(3), order=2)
    from tape import vmap

    batch = rng.standard_normal((4, 3, 2))
    got = vmap(grad(lambda a: np.sum(blas.dsyrk(1.0, a) ** 2)))(batch)[0]
    for i in range(4):
        np.testing.assert_allclose(got[i], grad(lambda a: np.sum(blas.dsyrk(1.0, a) ** 2))(
            batch[i])[0], rtol=1e-12)  # fmt: skip


GPY_LINALG = '''
import numpy as np
from scipy.linalg import blas


def symmetrify(A, upper=False):
    """GPy's: copy one triangle of A onto the other, in place."""
    triu = np.triu_indices_from(A, k=1)
    if upper:
        A.T[triu] = A[triu]
    else:
        A[triu] = A.T[triu]


def tdot(mat, out=None):
    """GPy's tdot_blas: np.dot(mat, mat.T), through dsyrk."""
    if (mat.dtype != "float64") or (len(mat.shape) != 2):
        return np.dot(mat, mat.T)
    nn = mat.shape[0]
    if out is None:
        out = np.zeros((nn, nn))
    mat = np.asfortranarray(mat)
    out = blas.dsyrk(alpha=1.0, a=mat, beta=0.0, c=out, overwrite_c=1, trans=0, lower=0)
    symmetrify(out, upper=True)
    return np.ascontiguousarray(out)


def quadratic(mat, v):
    return blas.ddot(v, blas.dgemv(1.0, tdot(mat), v)) + blas.dgemm(1.0, mat, mat.T)[0, 1]
'''


def test_library_code_calling_blas_is_differentiated():
    import sys
    import types

    lib = types.ModuleType("gpy_like_linalg")
    sys.modules[lib.__name__] = lib  # library code is imported: tape finds its names
    exec(GPY_LINALG, lib.__dict__)
    rng = np.random.default_rng(5)
    mat, v = rng.standard_normal((3, 4)), rng.standard_normal(3)
    np.testing.assert_allclose(lib.tdot(mat), mat @ mat.T)
    g = grad(lambda m: np.sum(lib.tdot(m) * np.arange(9.0).reshape(3, 3)))(mat)[0]
    w = np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(g, (w + w.T) @ mat, rtol=1e-12)  # d tr(W' M M') = (W + W') M
    gm, gv = grad(lib.quadratic, argnums=(0, 1))(mat, v)
    np.testing.assert_allclose(gm, numeric_grad(lib.quadratic, (mat, v), 0), rtol=1e-6)
    np.testing.assert_allclose(gv, numeric_grad(lib.quadratic, (mat, v), 1), rtol=1e-6)
