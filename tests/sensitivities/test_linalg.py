"""Product and linear-algebra rules against central differences: batched and 1-D operands,
einsum subscripts of every kind, factorisations on well-conditioned inputs with losses
invariant under the eigenvector and singular-vector gauge."""

import numpy as np
import pytest
from hypothesis import strategies as st

from sensitivities import linalg
from tape import grad
from tests.fd import check_grads, numeric_grad
from tests.sensitivities.cases import Case, implementation_test, rule_test
from tests.strategies import arrays

dims = st.integers(1, 4)
BATCHES = st.sampled_from([(), (2,), (2, 1)])


def sym(a):
    """The symmetric matrix a one-triangle function of ``a`` stands for."""
    return (a + np.swapaxes(a, -1, -2)) / 2


def weights(shape, seed=1):
    """A fixed random array: losses weighted by it see every element."""
    return np.random.default_rng(seed).standard_normal(shape)


# -- products -----------------------------------------------------------------------------


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


# (subscripts, operand shapes with single letters standing for drawn sizes)
EINSUMS = {
    1: ["ii->", "ii->i", "ij->", "ij->i", "ji", "iii->i", "i...i", "...ij->...ji", "ij->ij"],
    2: [
        "ij,jk->ik",
        "ij,ij->",
        "i,j->ij",
        "...ij,...jk->...ik",
        "...ij,...jk",
        "iij,jk",
        "ij,ij->ij",
        "ba,ab",
        "i...,...->i...",
        "ab,cd->",
        "ij,j",
        "ii,i->i",
    ],  # fmt: skip
    3: ["ij,jk,kl->il", "i,i,i->", "ij,jk,ki", "bij,bjk,bk->bi"],
}


def einsum_draw(n_operands):
    def draw(data):
        spec = data.draw(st.sampled_from(EINSUMS[n_operands]))
        inputs = spec.split("->")[0].split(",")
        size = {c: data.draw(dims) for c in set(spec) if c.isalpha()}
        ellipsis = data.draw(st.sampled_from([(), (2,), (3, 2)]))
        operands = []
        for s in inputs:
            shape = []
            for c in s.replace("...", "."):
                if c == ".":
                    # a shorter or size-1 ellipsis in some operands: broadcasting
                    kept = data.draw(st.integers(0, len(ellipsis)))
                    shape += [n if data.draw(st.booleans()) else 1 for n in ellipsis[kept:]]
                else:
                    shape.append(size[c])
            operands.append(data.draw(arrays(tuple(shape))))
        return (spec, *operands)

    return draw


def einsum_interleaved_draw(data):
    a, b = data.draw(arrays((2, 3))), data.draw(arrays((3, 4)))
    form = data.draw(st.sampled_from([[0, 1], [Ellipsis, 1], [1, 2], [2]]))
    return a, b, form


def einsum_interleaved(a, b, form):
    if form == [2]:
        return np.einsum(a, [0, 1], b, [1, 2], [2])
    if form == [Ellipsis, 1]:
        return np.einsum(a, [Ellipsis, 0], b, [0, 1], [Ellipsis, 1])
    return np.einsum(a, [0, 1], b, [1, 2], form)


def cross_draw(data):
    batch_a, batch_b = data.draw(
        st.sampled_from([((), ()), ((2,), ()), ((2,), (1,)), ((3, 1), (2,))])
    )
    a, b = data.draw(arrays(batch_a + (3,))), data.draw(arrays(batch_b + (3,)))
    axes = data.draw(st.sampled_from([{}, {"axisa": 0, "axisc": 0}, {"axisb": 0}]))
    if "axisa" in axes:
        a = np.moveaxis(a, -1, 0)
    if "axisb" in axes:
        b = np.moveaxis(b, -1, 0)
    return a, b, axes


def vec_draw(data):
    n, batch = data.draw(dims), data.draw(BATCHES)
    return data.draw(arrays(batch + (n,))), data.draw(arrays((n,)))


def matvec_draw(data):
    n, m, batch = data.draw(dims), data.draw(dims), data.draw(BATCHES)
    return data.draw(arrays(batch + (m, n))), data.draw(arrays((n,)))


def vecmat_draw(data):
    n, m, batch = data.draw(dims), data.draw(dims), data.draw(BATCHES)
    return data.draw(arrays((n,))), data.draw(arrays(batch + (n, m)))


# -- well-conditioned matrices --------------------------------------------------------------


def general(data, n=None, batch=None):
    """Diagonally dominant: entries in [-1, 1] plus (n + 1) I."""
    n = data.draw(dims) if n is None else n
    batch = data.draw(BATCHES) if batch is None else batch
    return data.draw(arrays(batch + (n, n), -1.0, 1.0)) + (n + 1) * np.eye(n)


def spd(data, n=None):
    """A @ A.T + n I, over a batch."""
    a = general(data, n)
    return a @ np.swapaxes(a, -1, -2) / 4 + a.shape[-1] * np.eye(a.shape[-1])


def separated(data, n=None, m=None, batch=None):
    """A (batch of) m x n matrices whose singular values (or, square, eigenvalues of its
    lower triangle read symmetrically) are at least 6 apart: small entries plus a spread
    diagonal."""
    n = data.draw(dims) if n is None else n
    m = n if m is None else m
    batch = data.draw(BATCHES) if batch is None else batch
    spread = np.zeros((m, n))
    k = min(m, n)
    spread[np.arange(k), np.arange(k)] = 10.0 * np.arange(1, k + 1)
    return data.draw(arrays(batch + (m, n), -0.5, 0.5)) + spread


def rectangular(data):
    m, n = data.draw(dims), data.draw(dims)
    return (separated(data, n, m),)


def solve_draw(data):
    a = general(data)
    n = a.shape[-1]
    b_shape = data.draw(st.sampled_from([(n,), (n, 2), (2, n, 1)]))
    if len(b_shape) == 3 and a.ndim == 4:
        b_shape = (n, 1)
    return a, data.draw(arrays(b_shape))


def eigh_loss(a, uplo):
    # invariant under eigenvector signs: squares of the vectors, and the values
    w, v = np.linalg.eigh(a, uplo)
    return np.sum(v * v * weights(np.shape(v))) + np.sum(w * weights(np.shape(w), 2))


def svd_loss(a, hermitian=False):
    u, s, vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    return (np.sum(u * u * weights(np.shape(u))) + np.sum(s * weights(np.shape(s), 2))
            + np.sum(vh * vh * weights(np.shape(vh), 3)))  # fmt: skip


def qr_loss(a, mode):
    # invariant under the signs of Q's columns and R's rows, which Householder
    # reflections flip where a subdiagonal entry crosses zero
    if mode == "r":
        r = np.linalg.qr(a, mode="r")
        return r * r
    q, r = np.linalg.qr(a)
    q_r = np.expand_dims(q[..., :, 0], -1) * np.expand_dims(r[..., 0, :], -2)
    return (np.sum(q * q * weights(np.shape(q))) + np.sum(r * r * weights(np.shape(r), 2))
            + np.sum(q_r * weights(np.shape(q_r), 3)))  # fmt: skip


def slogdet_loss(a):
    sign, logdet = np.linalg.slogdet(a)
    return logdet * sign


def lstsq_draw(data):
    m, n = data.draw(dims), data.draw(dims)
    m = max(m, n)  # full column rank
    a = separated(data, n, m, batch=())
    return a, data.draw(arrays(data.draw(st.sampled_from([(m,), (m, 2)]))))


def norm_base(shape):
    """A fixed matrix away from every kink of a norm: entries away from 0 and from each
    other, no ties among row or column sums, distinct nonzero singular values."""
    rng = np.random.default_rng(5)
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)


def norm_draw(data):
    shape = data.draw(st.sampled_from([(4,), (3, 4), (2, 3, 4)]))
    x = norm_base(shape) + data.draw(arrays(shape, -5e-4, 5e-4))
    nd = len(shape)
    kind = data.draw(st.sampled_from(["vector", "matrix", "all"]))
    if kind == "all" or nd == 1:
        ords = [None] if nd > 2 else [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]
        if nd == 1:
            ords = [None, 0, 1, 2, 3, 0.5, -1.5, np.inf, -np.inf]
        return x, data.draw(st.sampled_from(ords)), None, data.draw(st.booleans())
    if kind == "vector":
        axis = data.draw(st.integers(-nd, nd - 1))
        ord_ = data.draw(st.sampled_from([None, 0, 1, 2, 3, 0.5, np.inf, -np.inf]))
        return x, ord_, axis, data.draw(st.booleans())
    axis = tuple(data.draw(st.permutations(range(nd)))[:2])
    ord_ = data.draw(st.sampled_from([None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]))
    return x, ord_, axis, data.draw(st.booleans())


def norm(x, ord, axis, keepdims):
    return np.linalg.norm(x, ord, axis, keepdims)


CASES = [
    Case(np.matmul, matmul_draw, argnums=(0, 1)),
    Case(np.dot, dot_draw, argnums=(0, 1)),
    Case(np.tensordot, tensordot_draw, argnums=(0, 1)),
    Case(np.einsum, einsum_draw(1), argnums=(1,), name="einsum-1"),
    Case(np.einsum, einsum_draw(2), argnums=(1, 2), name="einsum-2"),
    Case(np.einsum, einsum_draw(3), argnums=(1, 2, 3), name="einsum-3"),
    Case(
        np.einsum,
        einsum_interleaved_draw,
        einsum_interleaved,
        argnums=(0, 1),
        name="einsum-interleaved",
    ),  # fmt: skip
    Case(np.cross, cross_draw, lambda a, b, axes: np.cross(a, b, **axes), argnums=(0, 1)),
    Case(np.vecdot, vec_draw, argnums=(0, 1)),
    Case(np.matvec, matvec_draw, argnums=(0, 1)),
    Case(np.vecmat, vecmat_draw, argnums=(0, 1)),
    Case(np.linalg.inv, lambda d: (general(d),)),
    Case(np.linalg.det, lambda d: (general(d),)),
    Case(np.linalg.solve, solve_draw, argnums=(0, 1)),
    Case(np.linalg.pinv, rectangular, rtol=1e-4),
    Case(
        np.linalg.pinv,
        lambda d: (separated(d),),
        lambda a: np.linalg.pinv(sym(a), hermitian=True),
        rtol=1e-4,
        name="pinv-hermitian",
    ),  # fmt: skip
    Case(
        np.linalg.cholesky,
        lambda d: (spd(d), d.draw(st.booleans())),
        lambda a, upper: np.linalg.cholesky(sym(a), upper=upper),
    ),  # fmt: skip
    Case(
        np.linalg.eigvalsh,
        lambda d: (separated(d), d.draw(st.sampled_from("LU"))),
        lambda a, uplo: np.linalg.eigvalsh(sym(a), uplo),
    ),  # fmt: skip
    Case(
        linalg.eigh_packed,
        lambda d: (separated(d), d.draw(st.sampled_from("LU"))),
        lambda a, uplo: eigh_loss(sym(a), uplo),
        name="eigh",
    ),  # fmt: skip
    Case(np.linalg.svdvals, rectangular),
    Case(linalg.svd_packed, rectangular, svd_loss, rtol=1e-4, name="svd"),
    Case(
        linalg.svd_packed,
        lambda d: (separated(d),),
        lambda a: svd_loss(sym(a), hermitian=True),
        rtol=1e-4,
        name="svd-hermitian",
    ),  # fmt: skip
    Case(
        linalg.qr_packed,
        lambda d: (
            separated(d, d.draw(dims), d.draw(dims)),
            d.draw(st.sampled_from(["reduced", "r"])),
        ),
        qr_loss,
        name="qr",
    ),  # fmt: skip
    Case(linalg.slogdet_packed, lambda d: (general(d),), slogdet_loss, name="slogdet"),
    Case(
        linalg.lstsq_solution,
        lstsq_draw,
        lambda a, b: np.linalg.lstsq(a, b)[0],
        argnums=(0, 1),
        rtol=1e-4,
        name="lstsq",
    ),  # fmt: skip
    Case(np.linalg.norm, norm_draw, norm, rtol=1e-4),
]

test_product_and_linalg_rules = rule_test(CASES)


# -- implementations: entered on nodes, checked against NumPy's values and differences -------


def kron_draw(data):
    shapes = data.draw(
        st.sampled_from([((2,), (3,)), ((2, 3), (2, 2)), ((2,), (3, 2)), ((1, 2, 2), (3,))])
    )
    return tuple(data.draw(arrays(s)) for s in shapes)


def multi_dot_draw(data):
    n = data.draw(st.integers(2, 5))
    sizes = [data.draw(dims) for _ in range(n + 1)]
    arrays_ = [data.draw(arrays((sizes[i], sizes[i + 1]))) for i in range(n)]
    if data.draw(st.booleans()):
        arrays_[0] = arrays_[0][0]
    if data.draw(st.booleans()):
        arrays_[-1] = arrays_[-1][:, 0]
    return tuple(arrays_)


def tensorsolve_draw(data):
    a = general(data, 6, ()).reshape(6, 2, 3)
    axes = data.draw(st.sampled_from([None, (0,)]))
    if axes == (0,):
        a = np.moveaxis(a, 2, 0).reshape(3, 6, 2)
        axes = (0,)
    return a, data.draw(arrays((6,))), axes


# (function, draw, what to differentiate, argnums: None for every float argument)
IMPLEMENTED = [
    Case(f, draw, fn=fn, argnums=argnums, rtol=1e-4)
    for f, draw, fn, argnums in [
        (np.vdot, lambda d: (d.draw(arrays((2, 3))), d.draw(arrays((3, 2)))), None, (0, 1)),
        (np.inner, lambda d: (d.draw(arrays((2, 3))), d.draw(arrays((4, 3)))), None, (0, 1)),
        (
            np.inner,
            lambda d: (
                d.draw(
                    arrays(()),
                ),
                d.draw(arrays((4, 3))),
            ),
            None,
            (0, 1),
        ),
        (np.outer, lambda d: (d.draw(arrays((2, 3))), d.draw(arrays((4,)))), None, (0, 1)),
        (np.linalg.outer, lambda d: (d.draw(arrays((2,))), d.draw(arrays((4,)))), None, (0, 1)),
        (np.kron, kron_draw, None, (0, 1)),
        (np.linalg.cross, lambda d: (d.draw(arrays((2, 3))), d.draw(arrays((3,)))), None, (0, 1)),
        (np.linalg.multi_dot, multi_dot_draw, lambda *a: np.linalg.multi_dot(list(a)), None),
        (np.linalg.matrix_power, lambda d: (general(d), d.draw(st.integers(-3, 5))), None, (0,)),
        (
            np.linalg.tensorinv,
            lambda d: d.draw(
                st.sampled_from(
                    [
                        (general(d, 6, ()).reshape(2, 3, 6), 2),
                        (general(d, 6, ()).reshape(6, 2, 3), 1),
                    ]
                )
            ),
            None,
            (0,),
        ),  # fmt: skip
        (np.linalg.tensorsolve, tensorsolve_draw, None, (0, 1)),
        (
            np.linalg.cond,
            lambda d: (
                separated(d) + 0.7,
                d.draw(st.sampled_from([None, 2, -2, 1, "fro", np.inf])),
            ),
            None,
            (0,),
        ),  # fmt: skip
        (
            np.linalg.vector_norm,
            lambda d: (
                d.draw(arrays((2, 3, 4), 0.5, 2.0)) + np.arange(24.0).reshape(2, 3, 4),
                d.draw(st.sampled_from([None, 0, -1, (0, 2), (1, 0)])),
                d.draw(st.booleans()),
                d.draw(st.sampled_from([1, 2, 3, np.inf])),
            ),
            lambda x, axis, keepdims, ord: np.linalg.vector_norm(
                x, axis=axis, keepdims=keepdims, ord=ord
            ),
            (0,),
        ),  # fmt: skip
        (
            np.linalg.matrix_norm,
            lambda d: (
                separated(d) + 0.7,
                d.draw(st.booleans()),
                d.draw(st.sampled_from(["fro", "nuc", 2, 1])),
            ),
            lambda x, keepdims, ord: np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord),
            (0,),
        ),
        (
            np.linalg.eigh,
            lambda d: (separated(d), "L"),
            lambda a, uplo: eigh_loss(sym(a), uplo),
            (0,),
        ),
        (np.linalg.svd, rectangular, svd_loss, (0,)),
        (
            np.linalg.qr,
            lambda d: (separated(d, d.draw(dims), d.draw(dims)), "reduced"),
            qr_loss,
            (0,),
        ),
        (np.linalg.slogdet, lambda d: (general(d),), slogdet_loss, (0,)),
        (np.linalg.lstsq, lstsq_draw, lambda a, b: np.linalg.lstsq(a, b)[1], (0, 1)),
    ]
]


# -- eig and eigvals of general matrices ------------------------------------------------------


def general_matrix(data, complex_input=False):
    """A batch of well-separated-eigenvalue matrices: a diagonal with gaps of at least 1
    (so no eigenvalues meet under FD steps), mixed by a well-conditioned similarity; real
    ones may have complex pairs."""
    batch = data.draw(st.sampled_from([(), (2,)]))
    n = data.draw(st.integers(1, 4))
    d = np.arange(n) * 1.7 + data.draw(arrays((), -1.0, 1.0))
    a = np.broadcast_to(np.diag(d), batch + (n, n)).copy()
    if n >= 2 and not complex_input and data.draw(st.booleans()):
        a[..., 0, 1], a[..., 1, 0] = 1.3, -1.3  # a rotation block: a complex pair
    # rounded: LAPACK's eig can miss an eigenvector of a matrix with entries of 1e-55 beside
    # ones of 1, which hypothesis likes to draw
    # (never exactly diagonal: there the second derivative of the eigenvectors' adjoint
    # disagrees with finite differences, an open question)
    m = np.eye(n) + 0.3 * np.round(data.draw(arrays(batch + (n, n), -1.0, 1.0)), 3)
    m = m + 0.2 * np.tri(n, k=-1) + 0.1 * np.tri(n, k=-1).T
    if complex_input:
        m = m + 0.3j * np.round(data.draw(arrays(batch + (n, n), -1.0, 1.0)), 3)
    a = m @ a @ np.linalg.inv(m)
    return a if complex_input else np.real(a)


def one_matrix(a):
    return a[(0,) * (np.ndim(a) - 2)]


def _eigenvalue_loss(w):
    # a function of each eigenvalue, summed: the same whatever order LAPACK returns them in
    return np.sum(np.real(w**2 * (0.3 - 0.7j)) + np.imag(w) ** 3 + np.real(w))


def eigvals_loss(a):
    return _eigenvalue_loss(np.linalg.eigvals(a))


def eig_loss(a):
    # gauge invariant: each eigenvector through |v|^2 (unit columns, any phase), paired with
    # its eigenvalue, and V diag(w) V^-1 (which is A again)
    w, v = np.linalg.eig(a)
    n = np.shape(a)[-1]
    rows = np.cos(np.arange(n) + 0.5)
    per_vector = np.sum(np.abs(v) ** 2 * rows[:, None], axis=-2)
    rebuilt = np.matmul(v * np.expand_dims(w, -2), np.linalg.inv(v))
    return (_eigenvalue_loss(w) + np.sum(per_vector * np.real(w))
            + np.real(np.sum(rebuilt * (0.4 - 0.2j))))  # fmt: skip


IMPLEMENTED += [
    Case(np.linalg.eig, lambda d: (general_matrix(d),), fn=eig_loss, rtol=1e-4, atol=1e-5),
]
W = np.linspace(-1.0, 1.0, 24)


def _inexact_division(u, v):
    # NumPy trims the remainder's leading zeros by value: where one is zero by coincidence
    # (v divides u, or 1 - 1), its length changes under any perturbation and no derivative
    # exists. Offsets by multiples of sqrt(2) keep the draws off those points.
    return u + np.sqrt(2.0) / 10 * np.arange(1, len(u) + 1) ** 2, v


def weighted(y):
    y = np.real(y)
    return np.sum(y * W[: np.size(y)].reshape(np.shape(y)))


def coefficients(data, n=3):
    return data.draw(arrays((n,), 0.5, 2.0))


IMPLEMENTED += [
    Case(np.polymul, lambda d: (coefficients(d), coefficients(d, 2)),
         fn=lambda a, b: weighted(np.polymul(a, b)), argnums=(0, 1)),
    Case(np.polyder, lambda d: (coefficients(d, 4), d.draw(st.integers(0, 2))),
         fn=lambda p, m: weighted(np.polyder(p, m))),
    Case(np.polyint, lambda d: (coefficients(d), coefficients(d, 2)),
         fn=lambda p, k: weighted(np.polyint(p, 2, k)), argnums=(0, 1)),
    Case(np.vander, lambda d: (coefficients(d), d.draw(st.booleans())),
         fn=lambda x, inc: weighted(np.vander(x, 4, increasing=inc))),
    # roots well apart: (x - r1)(x - r2)(x - r3) with gaps of at least 1, and a complex pair
    Case(np.roots, lambda d: (np.poly(np.arange(3.0) * 1.3 + coefficients(d) * 0.2),),
         fn=lambda p: np.sum(np.roots(p) ** 2)),
    Case(np.roots, lambda d: (np.array([1.0, 0.4, 2.0]) + coefficients(d) * 0.1,),
         fn=lambda p: np.sum(np.abs(np.roots(p)) ** 3), name="roots-complex"),
    Case(np.poly, lambda d: (coefficients(d),), fn=lambda r: weighted(np.poly(r))),
    Case(np.poly, lambda d: (np.reshape(general_matrix(d), (-1, 1, 1))[:1, 0, 0] + 1.0,),
         fn=lambda r: weighted(np.poly(r)), name="poly-of-one-root"),
    Case(np.poly, lambda d: (one_matrix(general_matrix(d)),),
         fn=lambda a: weighted(np.poly(a)),
         name="poly-of-a-matrix", rtol=1e-4, atol=1e-5),
    Case(np.polydiv, lambda d: _inexact_division(coefficients(d, d.draw(st.integers(1, 5))),
                                                 coefficients(d, d.draw(st.integers(1, 3)))),
         fn=lambda u, v: weighted(np.concatenate(np.polydiv(u, v))), argnums=(0, 1)),
]  # fmt: skip
EIG_CASES = [
    Case(linalg.eig_packed, lambda d: (general_matrix(d),), fn=eig_loss, rtol=1e-4, atol=1e-5),
    Case(np.linalg.eigvals, lambda d: (general_matrix(d),), fn=eigvals_loss, rtol=1e-4, atol=1e-5),
]

test_linalg_implementations = implementation_test(IMPLEMENTED, value_rtol=1e-10)
test_eig_rules = rule_test(EIG_CASES, max_examples=15)


@pytest.mark.parametrize("loss", [eigvals_loss, eig_loss], ids=["eigvals", "eig"])
def test_eig_of_complex_matrices(loss):
    from tests.sensitivities.test_complex import check_complex_grads

    rng = np.random.default_rng(8)
    for batch in [(), (2,)]:
        shape = batch + (3, 3)
        m = np.eye(3) + 0.3 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
        a = m @ np.diag([1.0, 2.5 + 1j, -1.5j]) @ np.linalg.inv(m)
        check_complex_grads(loss, a, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("loss", [eigvals_loss, eig_loss], ids=["eigvals", "eig"])
def test_eig_in_forward_mode_and_to_second_order(loss):
    from tape import jvp

    rng = np.random.default_rng(9)
    m = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
    a = m @ np.array([[1.0, 1.3, 0.0], [-1.3, 1.0, 0.0], [0.0, 0.0, 3.0]]) @ np.linalg.inv(m)
    da = rng.standard_normal((3, 3))
    h = 1e-6
    _, tangent = jvp(loss, (a,), (da,))
    np.testing.assert_allclose(tangent, (loss(a + h * da) - loss(a - h * da)) / (2 * h), rtol=1e-5)
    first = lambda a: np.sum(grad(loss)(a)[0] * da)  # noqa: E731
    expected = numeric_grad(first, (a,), 0)
    np.testing.assert_allclose(grad(first)(a)[0], expected, rtol=1e-4, atol=1e-6)
    _, tangent = jvp(lambda a: grad(loss)(a)[0], (a,), (da,))
    expected = (grad(loss)(a + h * da)[0] - grad(loss)(a - h * da)[0]) / (2 * h)
    np.testing.assert_allclose(tangent, expected, rtol=1e-4, atol=1e-6)


def test_eig_values_and_types_are_numpys():
    from tape import Leaf, Tape

    a = np.array([[2.0, 1.0], [-1.0, 2.0]])  # eigenvalues 2 +- 1j
    result = np.linalg.eig(Leaf(Tape(), a))
    expected = np.linalg.eig(a)
    assert type(result).__name__ == "EigResult"
    np.testing.assert_array_equal(result.eigenvalues.value, expected.eigenvalues)
    np.testing.assert_array_equal(result.eigenvectors.value, expected.eigenvectors)
    np.testing.assert_array_equal(np.linalg.eigvals(Leaf(Tape(), a)).value, np.linalg.eigvals(a))
    # a real spectrum stays real, as in NumPy
    assert np.linalg.eig(Leaf(Tape(), np.diag([1.0, 2.0]))).eigenvalues.value.dtype == np.float64


# -- the array-API names and results shaped like NumPy's -------------------------------------


def test_array_api_aliases_are_recorded_through_the_rules():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3))
    for f, args in [
        (np.linalg.matmul, (a, b)),
        (np.linalg.tensordot, (a, np.swapaxes(b, 0, 1))),
        (np.linalg.vecdot, (a, rng.standard_normal(4))),
        (np.linalg.svdvals, (a,)),
    ]:
        check_grads(f, *args, argnums=tuple(range(len(args))))


def test_tuple_results_unpack_like_numpys():
    from tape import Leaf, Tape

    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 3))
    t = Tape()
    x = Leaf(t, a)
    for f, args in [(np.linalg.svd, (False,)), (np.linalg.qr, ())]:
        got, want = f(x, *args), f(a, *args)
        assert type(got) is type(want) and got._fields == want._fields
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.value, w, atol=1e-12)
    s = a[0].T @ a[0] + np.eye(3)
    w, v = np.linalg.eigh(Leaf(t, s))
    np.testing.assert_allclose(w.value, np.linalg.eigvalsh(s))
    sign, logdet = np.linalg.slogdet(Leaf(t, s))
    assert type(np.linalg.slogdet(Leaf(t, s))).__name__ == "SlogdetResult"
    np.testing.assert_allclose(logdet.value, np.log(np.linalg.det(s)))
    x, residuals, rank, sv = np.linalg.lstsq(Leaf(t, a[0]), Leaf(t, a[1, :, 0]))
    want = np.linalg.lstsq(a[0], a[1, :, 0])
    assert rank == want[2]
    np.testing.assert_allclose(residuals.value, want[1])


def test_eigenvalue_gradients_are_finite_at_degenerate_eigenvalues():
    # the identity has one eigenvalue of multiplicity 3: sum(w) = trace is still smooth
    a = np.eye(3) * 2.0
    (g,) = grad(lambda a: np.sum(np.linalg.eigh(a)[0] ** 2))(a)
    np.testing.assert_allclose(g, 4.0 * np.eye(3))
    (g,) = grad(lambda a: np.sum(np.linalg.eigvalsh(a)))(a)
    np.testing.assert_allclose(g, np.eye(3))


def test_symmetric_inputs_get_the_symmetric_gradient():
    # NumPy reads one triangle; the gradient is the symmetric one, as in JAX and PyTorch:
    # the same as through an explicit symmetrisation of the input
    rng = np.random.default_rng(2)
    b = rng.standard_normal((3, 3))
    s = b @ b.T + 3 * np.eye(3)
    losses = [
        lambda a: np.sum(np.linalg.cholesky(a) * weights((3, 3))),
        lambda a: np.sum(np.linalg.eigvalsh(a, UPLO="U") ** 3),
        lambda a: eigh_loss(a, "L"),
        lambda a: np.sum(np.linalg.pinv(a, hermitian=True) * weights((3, 3))),
    ]
    for loss in losses:
        (g,) = grad(loss)(s)
        np.testing.assert_allclose(g, g.T, rtol=1e-12, atol=1e-12)
        expected = numeric_grad(lambda a, loss=loss: loss(sym(a)), (s,), 0)
        np.testing.assert_allclose(g, expected, rtol=1e-5)
    # d tr(S^3)/dS = 3 S^2, and through S = B B': 6 S^2 B
    (g,) = grad(lambda a: np.sum(np.linalg.eigvalsh(a) ** 3))(s)
    np.testing.assert_allclose(g, 3 * s @ s, rtol=1e-10)
    (gb,) = grad(lambda b: np.sum(np.linalg.eigvalsh(b @ b.T) ** 3))(b)
    np.testing.assert_allclose(gb, 2 * 3 * (b @ b.T) @ (b @ b.T) @ b, rtol=1e-10)


def test_float32_stays_float32():
    a = (np.eye(3) * 4 + 0.1).astype(np.float32)
    for f in (np.linalg.inv, np.linalg.det, lambda a: np.linalg.eigh(a)[0], np.linalg.svdvals,
              lambda a: np.einsum("ii->", a), lambda a: np.linalg.norm(a, "nuc")):  # fmt: skip
        (g,) = grad(lambda a, f=f: np.sum(f(a)))(a)
        assert g.dtype == np.float32


def test_unsupported_gauges_are_refused_in_the_forward_pass():
    from tape import Leaf, Tape

    t = Tape()
    x = Leaf(t, np.ones((3, 2)))
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        np.linalg.svd(x)
    with pytest.raises(NotImplementedError, match="mode='reduced'"):
        np.linalg.qr(x, mode="complete")


SECOND_ORDER = [
    ("einsum", lambda a: np.einsum("ij,jk,ki->", a, a, a)),
    ("inv", lambda a: np.sum(np.linalg.inv(a) * weights((3, 3)))),
    ("det", np.linalg.det),
    ("solve", lambda a: np.sum(np.linalg.solve(a, np.arange(3.0)) ** 2)),
    ("cholesky", lambda a: np.sum(np.linalg.cholesky(a @ a.T) * weights((3, 3)))),
    ("eigh", lambda a: eigh_loss(sym(a), "L")),
    ("svd", svd_loss),
    ("qr", lambda a: qr_loss(a, "reduced")),
    ("norm-nuc", lambda a: np.linalg.norm(a, "nuc")),
    ("norm-3", lambda a: np.linalg.norm(a[0], 3)),
]


@pytest.mark.parametrize("name, f", SECOND_ORDER, ids=[n for n, _ in SECOND_ORDER])
def test_second_order_matches_differences_of_the_first(name, f):
    rng = np.random.default_rng(3)
    a = rng.uniform(-0.5, 0.5, (3, 3)) + np.diag([10.0, 20.0, 30.0])
    w = weights((3, 3), 4)
    first = lambda a: np.sum(grad(f)(a)[0] * w)  # noqa: E731
    (got,) = grad(first)(a)
    np.testing.assert_allclose(got, numeric_grad(first, (a,), 0), rtol=1e-5, atol=1e-7)


# -- SciPy counterparts ---------------------------------------------------------------------

try:
    import scipy.linalg as sla
except ImportError:  # SciPy is optional
    sla = None


def square(data, n=None):
    """A well-conditioned matrix, rows permuted so that LU pivots."""
    a = general(data, n, batch=())
    return a[list(data.draw(st.permutations(range(a.shape[0]))))]


def with_rhs(data, a):
    n = a.shape[-1]
    return data.draw(arrays(data.draw(st.sampled_from([(n,), (n, 2)]))))


def solve_triangular_draw(data):
    a = general(data, batch=())
    options = (
        data.draw(st.sampled_from([0, 1, "T"])),
        data.draw(st.booleans()),
        data.draw(st.booleans()),
    )
    return (a, with_rhs(data, a), *options)


def scipy_solve_draw(data):
    a = general(data, batch=())
    structures = [None, "sym", "pos", "lower triangular", "upper triangular", "diagonal"]
    assume_a = data.draw(st.sampled_from(structures))
    return a, with_rhs(data, a), data.draw(st.booleans()), assume_a, data.draw(st.booleans())


def cho_draw(data):
    a = spd(data)
    a = a[(0,) * (a.ndim - 2)]  # SciPy's: one matrix
    return a, with_rhs(data, a), data.draw(st.booleans())


def lu_draw(data):
    a = square(data)
    return a, with_rhs(data, a), data.draw(st.sampled_from([0, 1]))


if sla is not None:
    SCIPY_CASES = [
        Case(linalg.solve_triangular, solve_triangular_draw, argnums=(0, 1)),
        Case(
            linalg.cho_solve,
            cho_draw,
            lambda a, b, lower: linalg.cho_solve(linalg.cho_factor(sym(a), lower), b),
            argnums=(0, 1),
        ),  # fmt: skip
        Case(
            linalg.cho_factor_matrix,
            lambda d: cho_draw(d)[::2],
            lambda a, lower: (np.tril if lower else np.triu)(linalg.cho_factor(sym(a), lower)[0]),
        ),
        Case(
            linalg.expm,
            lambda d: (d.draw(arrays(d.draw(BATCHES) + (d.draw(dims),) * 2, -1.0, 1.0)),),
            rtol=1e-4,
        ),  # fmt: skip
        Case(linalg.inv, lambda d: (general(d, batch=()),)),
        Case(linalg.det, lambda d: (general(d, batch=()),)),
        Case(
            linalg.cholesky,
            lambda d: cho_draw(d)[::2],
            lambda a, lower: linalg.cholesky(sym(a), lower),
        ),  # fmt: skip
        Case(
            linalg.solve,
            scipy_solve_draw,
            lambda a, b, lower, assume_a, transposed: linalg.solve(
                sym(a) if assume_a in ("sym", "pos") else a,
                b,
                lower,
                assume_a=assume_a,
                transposed=transposed,
            ),
            argnums=(0, 1),
        ),  # fmt: skip
        Case(
            linalg.lu_solve,
            lu_draw,
            lambda a, b, trans: linalg.lu_solve(linalg.lu_factor(a), b, trans),
            argnums=(0, 1),
        ),  # fmt: skip
        Case(
            linalg.lu_factor_packed,
            lambda d: (square(d),),
            lambda a: linalg.lu_factor(a)[0],
            name="lu_factor",
        ),
    ]
    CASES = CASES + SCIPY_CASES
    test_scipy_counterparts = rule_test(SCIPY_CASES, max_examples=10)

    def test_scipy_counterparts_give_scipys_values():
        rng = np.random.default_rng(0)
        a = rng.standard_normal((3, 3)) + 4 * np.eye(3)
        b = rng.standard_normal(3)
        s = a @ a.T
        np.testing.assert_allclose(
            linalg.solve_triangular(a, b, lower=True), sla.solve_triangular(a, b, lower=True)
        )
        np.testing.assert_allclose(
            linalg.cho_solve(linalg.cho_factor(s), b), sla.cho_solve(sla.cho_factor(s), b)
        )
        np.testing.assert_allclose(linalg.expm(a / 4), sla.expm(a / 4))
        lu, piv = linalg.lu_factor(a[::-1])
        want_lu, want_piv = sla.lu_factor(a[::-1])
        np.testing.assert_allclose(lu, want_lu)
        np.testing.assert_array_equal(piv, want_piv)
        assert set(linalg.scipy_counterparts()) == {
            getattr(sla, f.__name__) for f in linalg.scipy_counterparts().values()
        }

    def test_scipy_counterparts_on_nodes_unpack_like_scipy():
        from tape import Leaf, Tape

        rng = np.random.default_rng(0)
        a = rng.standard_normal((3, 3)) + 4 * np.eye(3)
        t = Tape()
        lu, piv = linalg.lu_factor(Leaf(t, a[::-1]))
        np.testing.assert_array_equal(piv, sla.lu_factor(a[::-1])[1])
        assert piv.dtype == np.int32 and not hasattr(piv, "tape")
        c, lower = linalg.cho_factor(Leaf(t, a @ a.T), lower=True)
        assert lower is True
        np.testing.assert_allclose(np.tril(c.value), np.linalg.cholesky(a @ a.T))

    def test_second_order_through_expm():
        rng = np.random.default_rng(4)
        a = rng.uniform(-0.5, 0.5, (3, 3))
        w = weights((3, 3), 5)
        f = lambda a: np.sum(linalg.expm(a) * w)  # noqa: E731
        first = lambda a: np.sum(grad(f)(a)[0] * w)  # noqa: E731
        (got,) = grad(first)(a)
        np.testing.assert_allclose(got, numeric_grad(first, (a,), 0), rtol=1e-5, atol=1e-7)

    def test_a_conversion_inside_scipy_can_name_the_counterpart():
        import sys

        seen = []

        class Refuses:  # converts like a node would, remembering what it could suggest
            shape, ndim, dtype = (2, 2), 2, np.dtype(float)

            def __array__(self, dtype=None, copy=None):
                seen.append(linalg.scipy_counterpart(sys._getframe(1)))
                raise TypeError("no")

        for f in (sla.solve_triangular, sla.cho_factor, sla.expm, sla.lu_factor):
            with pytest.raises(TypeError):
                f(Refuses(), np.ones(2)) if f is sla.solve_triangular else f(Refuses())
        assert seen == [
            f"sensitivities.linalg.{n}"
            for n in ("solve_triangular", "cho_factor", "expm", "lu_factor")
        ]
        assert linalg.scipy_counterpart(sys._getframe()) is None


def test_norm_with_keepdims_under_broadcasting():
    x = norm_base((3, 4))
    w = weights((2, 3, 4))
    for ord_, axis in [(None, 1), (3, 0), (np.inf, 1), ("nuc", (0, 1)), (1, (1, 0))]:
        check_grads(lambda x, o=ord_, a=axis: np.linalg.norm(x, o, a, keepdims=True) * w, x)


def test_norm_at_the_origin_has_the_subgradient_zero():
    (g,) = grad(lambda x: np.linalg.norm(x))(np.zeros(3))
    np.testing.assert_array_equal(g, np.zeros(3))


def test_matrix_rank_is_a_constant():
    from tape import Leaf, Tape

    t = Tape()
    rank = np.linalg.matrix_rank(Leaf(t, np.eye(3)))
    assert rank == 3 and not hasattr(rank, "tape")


# -- complex input: the adjoint zbar with dL = Re(zbar dz), as the elementwise rules have it ---


def check_complex_grads(f, *args, argnums=(0,)):
    w = np.random.default_rng(7).standard_normal(np.shape(f(*args))) * (1 + 0.5j)
    loss = lambda *a: np.real(np.sum(f(*a) * w))  # noqa: E731
    got = grad(loss, argnums=argnums)(*args)
    for g, i in zip(got, argnums):
        np.testing.assert_allclose(g, numeric_grad(loss, args, i), atol=1e-6)


_rng = np.random.default_rng(8)
CA = _rng.standard_normal((3, 3)) + 1j * _rng.standard_normal((3, 3)) + 3 * np.eye(3)
CB = _rng.standard_normal((3, 2)) + 1j * _rng.standard_normal((3, 2))
CV = _rng.standard_normal(3) + 1j * _rng.standard_normal(3)
COMPLEX = [
    ("matmul", lambda a, b: a @ b, (CA, CB)),
    ("einsum", lambda a, b: np.einsum("ij,jk->ik", a, b), (CA, CB)),
    ("einsum-trace", lambda a: np.einsum("ii->", a), (CA,)),
    ("inv", np.linalg.inv, (CA,)),
    ("det", np.linalg.det, (CA,)),
    ("solve", np.linalg.solve, (CA, CB)),
    ("vdot", np.vdot, (CV, CV[::-1].copy())),
    ("vecdot", np.vecdot, (CA, CV)),
    ("vecmat", np.vecmat, (CV, CA)),
    ("matvec", np.matvec, (CA, CV)),
    ("cross", np.cross, (CV, CV[::-1].copy())),
    ("kron", np.kron, (CA, CB)),
    ("norm", np.linalg.norm, (CA,)),
    ("norm-3", lambda a: np.linalg.norm(a, 3), (CV,)),
]


@pytest.mark.parametrize("name, f, args", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_products_follow_the_convention(name, f, args):
    check_complex_grads(f, *args, argnums=tuple(range(len(args))))


@pytest.mark.parametrize("optimize", [False, True, "greedy", "path"])
def test_einsum_adjoints_take_any_optimize_setting(optimize):
    rng = np.random.default_rng(6)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 2))
    if optimize == "path":  # a contraction path of the forward call's operands
        optimize = np.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")[0]
    f = lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c, optimize=optimize)  # noqa: E731
    check_grads(f, a, b, c, argnums=(0, 1, 2))


if sla is not None:
    _brng = np.random.default_rng(10)
    _BA = _brng.uniform(-1, 1, (2, 3, 3)) + 4 * np.eye(3)
    _BB = _brng.standard_normal((2, 3, 2))
    SCIPY_BATCHED = [
        ("inv", linalg.inv, (_BA,)),
        ("det", linalg.det, (_BA,)),
        (
            "cholesky",
            lambda s: linalg.cholesky(sym(s), lower=True),
            (_BA @ np.swapaxes(_BA, -1, -2),),
        ),
        ("solve_triangular", lambda a, b: linalg.solve_triangular(a, b, lower=True), (_BA, _BB)),
        ("solve", linalg.solve, (_BA, _BB)),
        ("expm", linalg.expm, (_BA / 4,)),
    ]

    @pytest.mark.parametrize("name, f, args", SCIPY_BATCHED, ids=[c[0] for c in SCIPY_BATCHED])
    def test_scipy_counterparts_over_batches(name, f, args):
        check_grads(f, *args, argnums=tuple(range(len(args))))


@pytest.mark.parametrize("u, v", [([3.0, 5.0, 2.0], [2.0, 1.0]), ([1.0, 2.0], [1.0, 0.5, 3.0]),
                                  ([2.0, 1.0, 1.0], [1.0, 0.5]), (4.0, [2.0]),
                                  ([1.0, 2j, 3.0], [1j, 1.0])])  # fmt: skip
def test_polydiv_values_are_numpys(u, v):
    from tape import Leaf, Tape

    want = np.polydiv(u, v)
    got = np.polydiv(Leaf(Tape(), np.asarray(u)), v)
    assert len(got) == 2
    for g, w in zip(got, want):
        g = getattr(g, "value", g)  # a quotient of zeros is a constant
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_repeated_eigenvalues_and_singular_values_never_give_a_finite_wrong_gradient():
    # the vectors have no derivative where values repeat: a loss that reads them gets NaN
    # (the true gradient of sqrtm at 4I is C / 4, of U S V^T at I is C; the coupling terms
    # that carry their off-diagonal parts cannot be known from the vectors' adjoints)
    C = np.array([[1.0, 2.0], [-3.0, 0.5]])

    def sqrtm_through_eigh(a):
        w, v = np.linalg.eigh(a)
        return np.sum(C * (v @ np.diag(np.sqrt(w)) @ v.T))

    def usv(a):
        u, s, vt = np.linalg.svd(a)
        return np.sum(C * (u @ np.diag(s) @ vt))

    def through_eig(a):
        w, v = np.linalg.eig(a)
        return np.sum(C * np.real(v @ np.diag(w) @ np.linalg.inv(v)))

    with np.errstate(invalid="ignore"):
        cases = ((sqrtm_through_eigh, 4 * np.eye(2)), (usv, np.eye(2)), (through_eig, np.eye(2)))
        for f, at in cases:
            g = grad(f)(at)[0]
            assert np.all(np.isnan(g)), (f.__name__, g)  # not a finite wrong number
    # away from the repeated values, the same losses are exact
    a = np.array([[2.0, 0.3], [0.3, 1.0]])
    sym = lambda f: lambda b: f((b + b.T) / 2)  # noqa: E731  (eigh reads one triangle)
    for f in (sqrtm_through_eigh, usv):
        np.testing.assert_allclose(grad(sym(f))(a)[0], numeric_grad(sym(f), (a,), 0), atol=1e-7)
    # losses of the values alone keep their exact gradient where values repeat
    np.testing.assert_allclose(
        grad(lambda a: np.sum(np.linalg.eigh(a)[0] ** 2))(4 * np.eye(2))[0], 8 * np.eye(2)
    )
    np.testing.assert_allclose(
        grad(lambda a: np.sum(np.linalg.svd(a)[1] ** 3))(np.eye(3))[0], 3 * np.eye(3)
    )

# -- det at singular matrices: the gradient is the matrix of cofactors, adj(a)^T -----------


def _cofactor_matrix(a):
    """adj(a)^T entry by entry, from the minors: the analytic reference."""
    n = a.shape[-1]
    c = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return c


_rng = np.random.default_rng(24)
SINGULAR = [
    np.array([[1.0, 2.0], [2.0, 4.0]]),  # rank n - 1
    np.outer([1.0, 2.0, 3.0], [4.0, -5.0, 6.0]),  # rank n - 2: cofactors all zero
    np.zeros((3, 3)),
    np.array([[0.0]]),
    _rng.standard_normal((4, 3)) @ _rng.standard_normal((3, 4)),  # rank n - 1
    np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
]


@pytest.mark.parametrize("a", SINGULAR, ids=lambda a: f"{a.shape[0]}x{a.shape[0]}")
def test_det_gradient_at_a_singular_matrix_is_the_adjugate(a):
    (g,) = grad(np.linalg.det)(a)
    np.testing.assert_allclose(g, _cofactor_matrix(a), atol=1e-12)
    np.testing.assert_allclose(g, numeric_grad(np.linalg.det, (a,), 0), atol=1e-8)


def test_det_gradient_of_a_stack_with_singular_and_regular_matrices():
    a = np.stack([SINGULAR[0], 3.0 * np.eye(2), np.zeros((2, 2))])
    w = np.array([1.0, 2.0, -1.0])
    (g,) = grad(lambda a: np.sum(np.linalg.det(a) * w))(a)
    expected = w[:, None, None] * np.stack([_cofactor_matrix(m) for m in a])
    np.testing.assert_allclose(g, expected, atol=1e-12)


def test_det_at_a_singular_matrix_complex_forward_mode_and_second_order():
    from tape import hessian, jvp

    a = np.array([[1.0 + 1.0j, 2.0], [1.0 + 1.0j, 2.0]])
    loss = lambda a: np.real(np.linalg.det(a) * (0.3 - 0.7j))  # noqa: E731
    np.testing.assert_allclose(grad(loss)(a)[0], numeric_grad(loss, (a,), 0), atol=1e-8)
    s = SINGULAR[0]
    direction = np.array([[0.5, -1.0], [2.0, 0.25]])
    _, tangent = jvp(np.linalg.det, (s,), (direction,))
    np.testing.assert_allclose(tangent, np.sum(_cofactor_matrix(s) * direction), atol=1e-12)
    # d2 det / da2 of a 2x2 matrix is constant: ad - bc
    expected = np.zeros((4, 4))
    expected[0, 3] = expected[3, 0] = 1.0
    expected[1, 2] = expected[2, 1] = -1.0
    np.testing.assert_allclose(hessian(np.linalg.det)(s).reshape(4, 4), expected, atol=1e-12)


def test_scipy_det_gradient_at_a_singular_matrix_is_the_adjugate():
    pytest.importorskip("scipy.linalg")
    a = SINGULAR[4]
    (g,) = grad(linalg.det)(a)
    np.testing.assert_allclose(g, _cofactor_matrix(a), atol=1e-12)


def test_slogdet_at_a_singular_matrix():
    a = SINGULAR[0]
    # log|det| has no finite derivative there: infinities, as adj(a)^T / det a (JAX's too)
    (g,) = grad(lambda a: np.linalg.slogdet(a)[1])(a)
    assert not np.any(np.isfinite(g))
    np.testing.assert_array_equal(np.sign(g), np.sign(_cofactor_matrix(a)))
    # the sign is constant: zero, not NaN
    (g,) = grad(lambda a: np.linalg.slogdet(a)[0])(a)
    np.testing.assert_array_equal(g, np.zeros((2, 2)))
