"""Differentiable counterparts of ``scipy.linalg`` functions, with SciPy's names, arguments,
defaults and return types.

``scipy.linalg`` converts its inputs with ``np.asarray``, which nodes refuse, so each
function here is either

- an *implementation* over functions that have rules (``lu``, ``qr``, ``svd``, ``eigh``
  and its generalised problem through a Cholesky factor, ``pinv``, ``expm_frechet``
  through the block-triangular exponential, ``solve_continuous_lyapunov`` through
  ``solve_sylvester``, ``block_diag``, ``toeplitz``, ``circulant``), differentiable to any
  order for free; or
- a *primitive* with its own rule, where SciPy computes what no composition of NumPy can:
  ``sqrtm`` (its adjoint solves a Sylvester equation with the root),
  ``logm`` (the adjoint of a primary matrix function's Fréchet derivative at ``A`` is
  the Fréchet derivative at ``A'``, read off the corner of ``logm([[A', Ybar], [0, A']])``),
  ``solve_sylvester`` (its adjoint is another Sylvester solve), ``solve_banded`` (the
  transposed band), ``null_space`` and ``schur`` (through one packed primitive, for real,
  distinct eigenvalues: its adjoint solves a triangular Sylvester-type system one
  subdiagonal at a time). Every rule is written with functions that have
  rules, so these are differentiable again.

The counterparts ``solve_triangular``, ``cho_factor``, ``cho_solve``, ``expm``, ``inv``,
``solve``, ``det``, ``cholesky``, ``lu_factor`` and ``lu_solve`` live in
``sensitivities.linalg`` and are re-exported here. ``sqrtm``, ``logm`` and
``solve_sylvester`` take complex matrices too (and a real matrix whose root is complex);
the other primitives here real ones only. On plain arrays every function gives SciPy's
values.

>>> import numpy as np
>>> from sensitivities.scipy.linalg import sqrtm
>>> from tape import grad
>>> a = np.array([[4.0, 1.0], [0.0, 9.0]])
>>> np.round(sqrtm(a), 6)
array([[2. , 0.2],
       [0. , 3. ]])
>>> grad(lambda a: np.trace(sqrtm(a)))(a)[0]  # d tr(sqrt(A)) = tr(A^-1/2 dA) / 2
array([[ 0.25      ,  0.        ],
       [-0.01666667,  0.16666667]])
"""

from __future__ import annotations

import numpy as np

from ..linalg import _diagonal, _join, _mT, _real_only, _unpack
from ..registry import is_node, preprocess, primitive, pushforward, sensitivity, value_of

try:
    import scipy.linalg as _sla
except ImportError:  # SciPy is optional: without it there is nothing here
    _sla = None

_REEXPORTED = ("solve_triangular", "cho_factor", "cho_solve", "expm", "inv", "solve", "det",
               "cholesky", "lu_factor", "lu_solve")  # fmt: skip
_OWN = ("sqrtm", "logm", "expm_frechet", "solve_sylvester", "solve_continuous_lyapunov",
        "solve_banded", "lu", "qr", "svd", "eigh", "pinv", "null_space", "block_diag",
        "toeplitz", "circulant", "schur")  # fmt: skip
__all__ = list(_REEXPORTED + _OWN) if _sla is not None else []


def _zeros(like, shape, dtype=None):
    # a constant block built from an input, so that it follows the input's array library
    return np.zeros_like(like, shape=shape, dtype=dtype or np.result_type(like, 0.0))


def _block(a, b, c, d):
    """``[[a, b], [c, d]]`` of square blocks, through concatenations that have rules."""
    return np.concatenate([np.concatenate([a, b], axis=-1), np.concatenate([c, d], axis=-1)],
                          axis=-2)  # fmt: skip


def _upper_corner(big, n):
    return big[..., :n, n:]


if _sla is not None:
    from ..linalg import (  # noqa: F401  (re-exported: SciPy's names, in one place)
        cho_factor,
        cho_solve,
        cholesky,
        det,
        expm,
        inv,
        lu_factor,
        lu_solve,
        solve,
        solve_triangular,
    )

    # -- Sylvester and Lyapunov equations -------------------------------------------------

    @primitive
    def solve_sylvester(a, b, q):
        """``scipy.linalg.solve_sylvester(a, b, q)``: ``x`` with ``a x + x b = q``,
        differentiable in all three."""
        return _sla.solve_sylvester(a, b, q)

    @preprocess(solve_sylvester)
    def _(y, ybar, a, b, q):
        # the adjoint equation: a' lam + lam b' = ybar (transposes, not conjugates: the
        # solution is holomorphic in a, b and q, and tape's complex convention is JAX's)
        return solve_sylvester(_mT(a), _mT(b), ybar)

    sensitivity(solve_sylvester, 0)(lambda y, ybar, a, b, q, pre: -np.matmul(pre, _mT(y)))
    sensitivity(solve_sylvester, 1)(lambda y, ybar, a, b, q, pre: -np.matmul(_mT(y), pre))
    sensitivity(solve_sylvester, 2)(lambda y, ybar, a, b, q, pre: pre)

    def solve_continuous_lyapunov(a, q):
        """``scipy.linalg.solve_continuous_lyapunov(a, q)``: ``x`` with
        ``a x + x a^H = q``, as the Sylvester equation it is; differentiable in both."""
        return solve_sylvester(a, np.conjugate(_mT(a)), q)

    # -- matrix functions -----------------------------------------------------------------

    @primitive
    def sqrtm(A):
        """``scipy.linalg.sqrtm(A)``: the principal square root, differentiable.
        (SciPy's deprecated ``disp`` and ``blocksize`` are not taken.)"""
        return _sla.sqrtm(A)

    @sensitivity(sqrtm, 0)
    def _(y, ybar, A):
        # y y = A, so y dy + dy y = dA; the adjoint solves y' g + g y' = ybar. The root
        # is holomorphic: a real matrix with negative eigenvalues has a complex one, and
        # the same equation holds (the gradient of a real A is its real part)
        yt = _mT(y)
        return solve_sylvester(yt, yt, ybar)

    @primitive
    def logm(A):
        """``scipy.linalg.logm(A)``: the principal logarithm, differentiable.
        (SciPy's deprecated ``disp`` is not taken.)"""
        return _sla.logm(A)

    @sensitivity(logm, 0)
    def _(y, ybar, A):
        # f([[X, E], [0, X]]) = [[f(X), L_f(X, E)], [0, f(X)]] for a primary matrix
        # function, and the adjoint of L_f(A, .) is L_f(A', .) (Higham 2008, 3.2);
        # holomorphic, so for complex A too
        at = _mT(A)
        big = _block(at, ybar, _zeros(at, np.shape(at)), at)
        return _upper_corner(logm(big), np.shape(A)[-1])

    def expm_frechet(A, E, method=None, compute_expm=True, check_finite=True):
        """``scipy.linalg.expm_frechet``: ``(expm(A), L(A, E))`` or ``L(A, E)`` with
        ``compute_expm=False``, from the exponential of ``[[A, E], [0, A]]``;
        differentiable in ``A`` and ``E``."""
        if method not in (None, "SPS", "blockEnlarge"):
            raise ValueError(f"Unknown implementation {method}")
        n = np.shape(A)[-1]
        big = expm(_block(A, E, _zeros(A, np.shape(A), np.result_type(A, E)), A))
        frechet = _upper_corner(big, n)
        return (big[..., :n, :n], frechet) if compute_expm else frechet

    # -- banded systems -------------------------------------------------------------------

    def _band_gather(ab, rows, cols):
        """``ab[rows, cols]`` where ``cols`` is in range, 0 elsewhere (a constant)."""
        n = np.shape(ab)[-1]
        valid = (cols >= 0) & (cols < n)
        return np.where(valid, ab[rows, np.clip(cols, 0, n - 1)], 0.0)

    def _band_transposed(ab, lower, upper):
        # A'[i, j] = A[j, i]: row r of the transposed band is row l + u - r of ab, shifted
        r = np.arange(lower + upper + 1)[:, None]
        j = np.arange(np.shape(ab)[-1])[None, :]
        return _band_gather(ab, lower + upper - r, j + r - lower)

    @primitive
    def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
        """``scipy.linalg.solve_banded((l, u), ab, b)``, differentiable in the band ``ab``
        and in ``b``."""
        return _sla.solve_banded(l_and_u, ab, b, False, False, check_finite)

    @preprocess(solve_banded)
    def _(y, ybar, l_and_u, ab, b, *args, **kwargs):
        _real_only("solve_banded", ab, b)
        lower, upper = l_and_u
        return solve_banded((upper, lower), _band_transposed(ab, lower, upper), ybar)

    @sensitivity(solve_banded, 1)
    def _(y, ybar, l_and_u, ab, b, *args, pre, **kwargs):
        # abar = -pre y' on the band: ab[u + i - j, j] = A[i, j]
        lower, upper = l_and_u
        n = np.shape(ab)[-1]
        r = np.arange(lower + upper + 1)[:, None]
        j = np.arange(n)[None, :]
        i = r - upper + j
        valid = (i >= 0) & (i < n)
        rows = pre[np.clip(i, 0, n - 1)]  # (bands, n) or (bands, n, k)
        prod = rows * (y if np.ndim(b) == 1 else y[None, :, :])
        prod = prod if np.ndim(b) == 1 else np.sum(prod, axis=-1)
        return np.where(valid, -prod, 0.0)

    sensitivity(solve_banded, 2)(lambda y, ybar, l_and_u, ab, b, *args, pre, **kw: pre)

    # -- null space -----------------------------------------------------------------------

    @primitive
    def null_space(A, rcond=None, *, overwrite_a=False, check_finite=True,
                   lapack_driver="gesdd"):  # fmt: skip
        """``scipy.linalg.null_space``: an orthonormal basis of the null space.

        Differentiable for losses that do not depend on the choice of basis (the
        projector ``N N'``, norms of ``A``'s rows against it): a basis is defined up to a
        rotation within the space, and the rule moves it only out of the space."""
        return _sla.null_space(A, rcond, check_finite=check_finite, lapack_driver=lapack_driver)

    @sensitivity(null_space, 0)
    def _(y, ybar, A, *args, **kwargs):
        # A N = 0, so A dN = -dA N: dN = -pinv(A) dA N, and abar = -pinv(A)' Nbar N'
        _real_only("null_space", A)
        return -np.matmul(_mT(np.linalg.pinv(A)), np.matmul(ybar, _mT(y)))

    # -- decompositions, as implementations -----------------------------------------------

    def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
        """``scipy.linalg.lu``: ``(p, l, u)`` with ``a = p @ l @ u`` (or ``(p @ l, u)``
        with ``permute_l``), differentiable in ``a`` (square matrices)."""
        from ..linalg import lu_factor_packed

        n = np.shape(a)[-1]
        if np.ndim(a) != 2 or np.shape(a)[0] != n:
            raise NotImplementedError("lu is differentiable here for square matrices")
        packed = lu_factor_packed(a, check_finite)
        factors = packed[:, :n]
        low = np.tril(factors, -1) + np.eye(n, dtype=np.result_type(a, 0.0))
        up = np.triu(factors)
        piv = np.rint(_value(packed)[:, n]).astype(int)
        perm = np.arange(n)
        for i, k in enumerate(piv):  # LAPACK's row swaps: a[perm] = l @ u
            perm[i], perm[k] = perm[k], perm[i]
        order = np.argsort(perm)
        if permute_l:
            return low[order], up
        if p_indices:
            return order, low, up
        p = np.eye(n, dtype=np.result_type(a, 0.0))[order]  # (p @ l)[i] = l[order[i]]
        return p, low, up

    def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
        """``scipy.linalg.qr`` for ``mode`` ``'full'``, ``'economic'`` and ``'r'``,
        differentiable. ``'full'`` of a tall matrix has columns of ``q`` that ``a`` does
        not determine: there, use ``'economic'``."""
        if pivoting or mode not in ("full", "economic", "r"):
            raise NotImplementedError("qr is differentiable here without pivoting, for "
                                      "mode 'full', 'economic' or 'r'")  # fmt: skip
        if mode == "r":  # SciPy's r has the rows of the full factorisation: zeros below
            r = np.linalg.qr(a, mode="r")
            m, n = np.shape(a)[-2:]
            if m > n:
                r = np.concatenate([r, _zeros(r, np.shape(r)[:-2] + (m - n, n))], axis=-2)
            return (r,)
        return tuple(np.linalg.qr(a, mode="complete" if mode == "full" else "reduced"))

    def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
            lapack_driver="gesdd"):  # fmt: skip
        """``scipy.linalg.svd``, differentiable (as ``np.linalg.svd``: vectors of a
        non-square matrix need ``full_matrices=False``)."""
        out = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
        return tuple(out) if compute_uv else out

    def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False,
             overwrite_b=False, type=1, check_finite=True, subset_by_index=None,
             subset_by_value=None, driver=None):  # fmt: skip
        """``scipy.linalg.eigh``, differentiable in ``a`` and ``b``, for the standard
        and the generalised problems (``type`` 1, 2, 3, reduced to a standard one through
        the Cholesky factor of ``b``), with ``subset_by_index`` and ``subset_by_value``.
        ``a`` and ``b`` are taken as symmetric: the gradient is the symmetric one."""
        uplo = "L" if lower else "U"
        if b is None:
            w, v = np.linalg.eigh(a, UPLO=uplo)
        else:
            if type not in (1, 2, 3):
                raise ValueError(f"Unknown type {type}: type must be 1, 2 or 3")
            factor = np.linalg.cholesky(b if lower else _mT(b))  # b = L L'
            if type == 1:  # L^-1 a L^-T y = w y, x = L^-T y
                half = solve_triangular(factor, a, lower=True)
                c = _mT(solve_triangular(factor, _mT(half), lower=True))
            else:  # L' a L y = w y; x = L^-T y (type 2) or L y (type 3)
                c = np.matmul(_mT(factor), np.matmul(a, factor))
            w, y = np.linalg.eigh(c, UPLO=uplo)
            v = np.matmul(factor, y) if type == 3 else solve_triangular(factor, y, trans=1,
                                                                        lower=True)  # fmt: skip
        if subset_by_index is not None:
            lo, hi = subset_by_index
            w, v = w[..., lo : hi + 1], v[..., lo : hi + 1]
        elif subset_by_value is not None:
            lo, hi = subset_by_value
            keep = np.flatnonzero((_value(w) > lo) & (_value(w) <= hi))
            w, v = w[..., keep], v[..., keep]
        return w if eigvals_only else (w, v)

    def pinv(a, *, atol=None, rtol=None, return_rank=False, check_finite=True):
        """``scipy.linalg.pinv`` with SciPy's ``atol`` and ``rtol``, differentiable (as
        ``np.linalg.pinv``, for the rank SciPy finds)."""
        s = np.linalg.svd(_value(a), compute_uv=False)
        largest = np.max(s, axis=-1, initial=0.0)
        atol = 0.0 if atol is None else atol
        if rtol is None:
            rtol = max(np.shape(a)[-2:]) * np.finfo(np.result_type(_value(a), 0.0)).eps
        cutoff = atol + largest * rtol
        rcond = cutoff / np.where(largest > 0, largest, 1.0)
        out = np.linalg.pinv(a, rcond=rcond)
        if return_rank:
            return out, np.sum(s > np.expand_dims(cutoff, -1), axis=-1)
        return out

    # -- special matrices -----------------------------------------------------------------

    def block_diag(*arrs):
        """``scipy.linalg.block_diag``: the arrays along the diagonal, differentiable in
        each (scalars and vectors are 1-row blocks, as in SciPy)."""
        if not arrs:
            return _sla.block_diag()
        blocks = []
        for k, arr in enumerate(arrs):
            if np.ndim(arr) > 2:
                raise ValueError("arguments in the following positions have dimension "
                                 f"greater than 2: [{k}]")  # fmt: skip
            blocks.append(np.reshape(arr, (1, -1)) if np.ndim(arr) < 2 else arr)
        dtype = np.result_type(*[_value(b) for b in blocks])
        width = sum(np.shape(b)[1] for b in blocks)
        rows, left = [], 0
        for block in blocks:
            r, c = np.shape(block)
            parts = [_zeros(block, (r, left), dtype), block,
                     _zeros(block, (r, width - left - c), dtype)]  # fmt: skip
            rows.append(np.concatenate(parts, axis=1))
            left += c
        return np.concatenate(rows, axis=0)

    def toeplitz(c, r=None):
        """``scipy.linalg.toeplitz(c, r=None)``: first column ``c``, first row ``r``
        (``conjugate(c)`` when None; ``c[0]`` wins), differentiable in both; leading
        axes are a batch, as in SciPy."""
        if r is None:
            r = np.conjugate(c)
        c, r = np.atleast_1d(c), np.atleast_1d(r)
        m, n = np.shape(c)[-1], np.shape(r)[-1]
        values = np.concatenate([c[..., ::-1], r[..., 1:]], axis=-1)
        index = (m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]
        return values[..., index]

    def circulant(c):
        """``scipy.linalg.circulant(c)``: the circulant matrix with first column ``c``,
        differentiable; leading axes are a batch, as in SciPy."""
        c = np.atleast_1d(c)
        n = np.shape(c)[-1]
        return c[..., (np.arange(n)[:, None] - np.arange(n)[None, :]) % n]

    # -- the real Schur form ----------------------------------------------------------------
    #
    # A = Z T Z' with Z orthogonal and T upper triangular (real, distinct eigenvalues). Then
    # C = Z' dA Z = dT + W T - T W with W = Z' dZ antisymmetric: the strictly lower triangle
    # of dT is zero, and only the strictly lower entries L of W reach the strictly lower
    # triangle of W T - T W, so tril(L T - T L, -1) = tril(C, -1) =: M(L) is a triangular
    # system in L (entry (i, j) meets L only on subdiagonals further out, with coefficient
    # t_jj - t_ii), solved one subdiagonal at a time. dZ = Z W, dT = triu(C - W T + T W).
    # The adjoint: with U = triu(Tbar), Wbar = Z' Zbar - U T' + T' U, Lbar = tril(Wbar -
    # Wbar', -1) and G = M'^-1(Lbar) (M'(X) = tril(X T' - T' X, -1), solved the other way
    # round), Abar = Z (U + G) Z'.

    def _schur_solve(t, c, adjoint=False):
        """The strictly lower ``x`` with ``tril(x t - t x, -1) = tril(c, -1)`` (or, with
        ``adjoint``, ``tril(x t' - t' x, -1) = tril(c, -1)``), for upper triangular ``t``
        with distinct diagonal entries; ``c`` may have leading batch axes."""
        n = np.shape(t)[-1]
        d = _diagonal(t)
        gaps = np.expand_dims(d, -2) - np.expand_dims(d, -1)  # gaps[i, j] = t_jj - t_ii
        below = np.tri(n, k=-1, dtype=bool)
        inv_gaps = np.where(below, 1.0 / np.where(below, gaps, 1.0), 0.0)
        s = _mT(t) if adjoint else t
        x = np.zeros_like(c)
        for k in range(1, n) if adjoint else range(n - 1, 0, -1):
            rest = np.matmul(x, s) - np.matmul(s, x)
            x = x + np.eye(n, k=-k) * (c - rest) * inv_gaps
        return x

    @primitive
    def schur_packed(a):
        """``scipy.linalg.schur(a)``'s ``T`` and ``Z`` packed as ``(2 n n,)``."""
        t, z = _sla.schur(a)
        return _join((t, z), ())

    @sensitivity(schur_packed, 0)
    def _(y, ybar, a):
        _real_only("schur", a)
        n = np.shape(a)[-1]
        (t, z), (tbar, zbar) = _unpack(y, [(n, n), (n, n)]), _unpack(ybar, [(n, n), (n, n)])
        u = np.triu(tbar)
        wbar = np.matmul(_mT(z), zbar) - np.matmul(u, _mT(t)) + np.matmul(_mT(t), u)
        g = _schur_solve(t, np.tril(wbar - _mT(wbar), -1), adjoint=True)
        return np.matmul(z, np.matmul(u + g, _mT(z)))

    @pushforward(schur_packed, 0)
    def _(y, adot, a):
        n = np.shape(a)[-1]
        t, z = _unpack(y, [(n, n), (n, n)])
        c = np.matmul(_mT(z), np.matmul(adot, z))
        low = _schur_solve(t, np.tril(c, -1))
        w = low - _mT(low)
        tdot = np.triu(c - np.matmul(w, t) + np.matmul(t, w))
        return _join((tdot, np.matmul(z, w)), np.shape(adot)[:-2])

    def _schur_checked(a):
        t, z = _unpack(schur_packed(a), [(np.shape(a)[-1],) * 2] * 2)
        tv = np.asarray(value_of(t))
        if np.any(np.diagonal(tv, -1) != 0):
            raise NotImplementedError(
                "schur is differentiable where the eigenvalues are real and distinct; this "
                "matrix has complex eigenvalues (2x2 blocks in its real Schur form)"
            )
        ev = np.diagonal(tv)
        gaps = np.abs(ev[:, None] - ev[None, :])[np.triu_indices(len(ev), 1)]
        scale = max(1.0, float(np.max(np.abs(tv), initial=0.0)))
        if np.any(gaps <= 64 * np.finfo(float).eps * scale):
            raise NotImplementedError(
                "schur is differentiable where the eigenvalues are real and distinct; this "
                "matrix has repeated eigenvalues, where the Schur vectors are not determined"
            )
        return t, z

    def schur(a, output="real", lwork=None, overwrite_a=False, sort=None, check_finite=True):
        """``scipy.linalg.schur``: ``(T, Z)`` with ``a = Z T Z'``, differentiable in ``a``
        for a real matrix with real, distinct eigenvalues (``T`` upper triangular).

        The columns of ``Z`` have a sign freedom that SciPy fixes by LAPACK's choice: use
        losses that do not depend on it. The derivative holds the order of the eigenvalues
        along ``T``'s diagonal, which LAPACK keeps under small changes of a general matrix;
        at a matrix already triangular SciPy returns it as it is, and a change below the
        diagonal may reorder them: SciPy's result jumps there. On a node, ``sort`` (whose
        ``sdim`` and reordering are not differentiated), ``output='complex'``, complex
        eigenvalues and repeated ones raise; on plain arrays every option is SciPy's."""
        if not is_node(a):
            return _sla.schur(a, output, lwork, overwrite_a, sort, check_finite)
        if sort is not None:
            raise NotImplementedError("schur with sort= is not differentiable here: call it "
                                      "without sort, or on value_of(a)")  # fmt: skip
        if output not in ("real", "r"):
            if output not in ("complex", "c"):
                raise ValueError("argument must be 'real', or 'complex'")
            raise NotImplementedError("schur with output='complex' is not differentiable "
                                      "here: use output='real' (real, distinct "
                                      "eigenvalues)")  # fmt: skip
        if np.iscomplexobj(a) or np.ndim(a) != 2 or np.shape(a)[0] != np.shape(a)[1]:
            raise NotImplementedError("schur is differentiable here for real square matrices")
        if check_finite and not np.all(np.isfinite(np.asarray(value_of(a)))):
            raise ValueError("array must not contain infs or NaNs")
        return _schur_checked(a)


def _value(v):
    # the plain value inside nodes: for pivots, ranks and subsets, which carry no gradient
    while hasattr(v, "tape") and hasattr(v, "value") and hasattr(v, "pos"):
        v = v.value
    return np.asarray(v)
