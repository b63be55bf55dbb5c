"""Sensitivities of products and linear algebra: matmul, dot, tensordot, einsum and the
other products; inverses, solves, determinants and factorisations of ``numpy.linalg``;
differentiable counterparts of ``scipy.linalg`` functions.

Conventions:

- Stacks of matrices broadcast as in NumPy (leading axes), and so do the rules.
- Products are holomorphic: their rules transpose without conjugating, as the complex
  convention of ``sensitivities.elementwise`` has it; ``vdot``, ``vecdot`` and ``vecmat``
  conjugate their first argument as NumPy does, and their rules follow.
- ``einsum`` takes any subscripts NumPy does (traces ``ii->``, diagonals ``ii->i``, sums
  over an operand's own index, ellipses, implicit output, the interleaved form); the
  adjoint of each operand is an ``einsum`` again. ``cross`` has rules for 3-vectors (NumPy
  deprecates 2-vectors).
- ``norm`` has one rule for every ``ord``, ``axis`` and ``keepdims``: at the origin the
  2-norm's subgradient is 0; ties of ``inf``-type norms (and of the ``1``/``inf`` matrix
  norms' column or row sums) share the adjoint, as ``max`` does; ``ord=0`` has none.
- Functions of a symmetric input that read only one triangle of it (``cholesky``,
  ``eigh``, ``eigvalsh``, ``pinv``/``svd`` with ``hermitian=True``, SciPy's ``cho_factor``
  and symmetric ``solve``) get the symmetric gradient, as in JAX and PyTorch: the input
  stands for the symmetric matrix, so both triangles share the gradient. (TensorFlow gives
  the same gradient folded onto the triangle read; autograd 1.9 differentiates the
  triangle NumPy reads, as if the other were not there.) Through a symmetric input built
  from other values (``B @ B.T``) all of these agree.
- Eigenvectors and singular vectors are defined up to sign (phase), and up to a rotation
  within a degenerate eigenspace. Their gradients are meaningful for losses invariant under
  that gauge (``v**2``, projectors ``v @ v.T``); at degenerate eigenvalues the coupling
  terms are dropped (taken as zero) rather than infinite, which is exact for losses that
  depend on the eigenvalues only.
- ``svd`` with vectors needs ``full_matrices=False`` for non-square input (the extra
  columns are not determined by the input); ``qr`` supports the modes ``reduced``, ``r``,
  and ``complete`` where it equals ``reduced``.
- ``inv``, ``det`` and ``solve`` take complex input (holomorphic, as the products), and so
  do ``slogdet``, ``pinv``, ``lstsq``, ``qr``, the singular values, and ``cholesky``,
  ``eigh`` and ``eigvalsh`` of Hermitian matrices (whose gradient is the Hermitian part, as
  JAX's), and ``svd`` (for losses that do not depend on the phases of the singular
  vectors). ``svd`` and ``pinv`` with ``hermitian=True`` are real: complex input is
  refused in the reverse pass rather than given a wrong gradient.
- Functions returning several arrays (``eigh``, ``svd``, ``qr``, ``slogdet``, ``lstsq``)
  are implementations over one primitive that returns the results packed in one array,
  unpacked by indexing: one factorisation per call, and each result a node.

SciPy's ``scipy.linalg`` functions convert their inputs with ``np.asarray``, which nodes
refuse (SciPy's array-API dispatch would need ``SCIPY_ARRAY_API=1`` before SciPy is
imported, and a node that is a complete array-API array). Their differentiable
counterparts here have SciPy's names and signatures, each recorded as one step:
``solve_triangular``, ``cho_factor``, ``cho_solve``, ``expm``, ``inv``, ``solve``,
``det``, ``cholesky``, ``lu_factor`` and ``lu_solve`` (with SciPy installed). On plain
arrays they are SciPy's functions.

>>> import numpy as np
>>> from sensitivities.linalg import solve_triangular
>>> from tape import grad
>>> a = np.array([[2.0, 0.0], [1.0, 4.0]])
>>> grad(lambda b: np.sum(solve_triangular(a, b, lower=True)))(np.array([1.0, 1.0]))
(array([0.375, 0.25 ]),)
"""

import functools
import importlib.util
import inspect
import string

import numpy as np

from .reductions import broadcast_to
from .registry import (
    implementation,
    nondifferentiable,
    preprocess,
    primitive,
    sensitivity,
    value_of,
)


class _ScipyLinalg:
    """``scipy.linalg``, imported the first time a counterpart runs: importing the rules
    does not import SciPy."""

    def __getattr__(self, name):
        import scipy.linalg

        return getattr(scipy.linalg, name)


# SciPy is optional: without it the counterparts are not defined
_sla = _ScipyLinalg() if importlib.util.find_spec("scipy") is not None else None


def _mT(a):
    # the method costs a quarter of the function, which matmul's rule calls every time
    return a.swapaxes(-1, -2) if type(a) is np.ndarray else np.swapaxes(a, -1, -2)


def _eye_like(x, n=None):
    """A constant identity of ``x``'s last size (or ``n``) and dtype, in ``x``'s library
    (NumPy, Dask, CuPy): a plain zero of ``x``'s kind lends ``like=`` its type."""
    eye = np.eye(np.shape(x)[-1] if n is None else n, dtype=np.result_type(x))
    if type(x) is np.ndarray:
        return eye
    return np.asarray(eye, like=np.zeros_like(x, shape=()))


def _diagonal(m):
    return np.einsum("...ii->...i", m)


def _diag_embed(v):
    return np.expand_dims(v, -1) * _eye_like(v)


def _mH(a):
    """The conjugate transpose: the transpose of a real array."""
    return np.conjugate(_mT(a)) if np.iscomplexobj(a) else _mT(a)


def _conj(a):
    return np.conjugate(a) if np.iscomplexobj(a) else a


def _fold(h, lower=True):
    """The gradient with respect to a symmetric (Hermitian) input, from the gradient ``h``
    at it: its symmetric (Hermitian) part, as JAX and PyTorch give (autograd 1.9 instead
    differentiates the triangle NumPy reads; TensorFlow folds the symmetric part onto it).
    NumPy reads one triangle (``lower``), but the input stands for the symmetric matrix,
    so both triangles share the gradient; through ``B @ B.T`` the result is the same
    either way."""
    return (h + _mH(h)) / 2


def _over_gaps(x, w):
    """``x[..., i, j] / (w_j - w_i)`` off the diagonal, zero on it. Where ``w_i == w_j``
    (a repeated eigenvalue or singular value) the vectors have no derivative, and a loss
    that reads them there (``x_ij`` or ``x_ji`` not zero) has no gradient this rule can
    know: NaN, as PyTorch's, rather than a finite wrong number (a spectral function
    computed through eigh needs its divided differences, which a rule seen from eigh
    cannot know). A loss of the values alone gets its exact gradient."""
    d = w[..., None, :] - w[..., :, None]
    same = np.equal(d, 0)
    quotient = np.where(same, 0.0, x / np.where(same, 1.0, d))
    return quotient + _undefined(same, x)


def _repeated(w):
    return np.equal(w[..., None, :], w[..., :, None])


def _undefined(same, *couplings):
    """NaN where ``same`` pairs two distinct positions that one of ``couplings`` (matrices
    of the vectors' adjoints) couples, zero elsewhere."""
    off_diagonal = ~np.eye(np.shape(same)[-1], dtype=bool)
    read = np.zeros(np.shape(same), dtype=bool)
    for c in couplings:
        read = read | np.not_equal(c, 0) | np.not_equal(_mT(c), 0)
    return np.where(same & off_diagonal & read, np.nan, 0.0)


def _real_only(name, *xs):
    if any(np.iscomplexobj(x) for x in xs):
        raise NotImplementedError(f"the sensitivity of {name} is implemented for real input only")


# -- matmul, dot, tensordot ---------------------------------------------------------------


# An adjoint that repeats along a matrix axis (zero stride: what a sum's rule sends back)
# is an outer product, so the two products of matmul's rule reduce to sums and products
# of a matrix with a vector: O(n^2) work instead of O(n^3), and the repetition is kept for
# the rules further back. Rows that repeat: ybar = 1 v^T; columns: ybar = u 1^T.


def _repeats(ybar, axis):
    return type(ybar) is np.ndarray and ybar.ndim >= 2 and ybar.strides[axis] == 0


def _ndims(a, b):
    # np.ndim asks through NumPy's dispatch, 0.3 µs a call that an ndarray answers itself
    return (
        a.ndim if type(a) is np.ndarray else np.ndim(a),
        b.ndim if type(b) is np.ndarray else np.ndim(b),
    )


# (Axes are added by indexing, ``ybar[..., None]``: np.expand_dims costs ten times as much.)
@sensitivity(np.matmul, 0)
def _(y, ybar, a, b, **kwargs):
    a_ndim, b_ndim = _ndims(a, b)
    if b_ndim == 1:
        return ybar * b if a_ndim == 1 else ybar[..., None] * b
    if a_ndim == 1:
        # a vector times a matrix: ybar b^T, one product (a batch of them under vmap too)
        return np.matmul(ybar, _mT(b)) if b_ndim == 2 else np.matmul(b, ybar[..., None])[..., 0]
    # (rows that repeat first: a constant ybar, a sum's, repeats both ways, and its
    # adjoint then repeats in turn instead of being an array of its own: 8 MB and 2 ms
    # fewer at 1000², python benchmarks/run.py --workloads matmul)
    if _repeats(ybar, -2):  # ybar @ b^T = 1 (b v)^T, repeating in turn
        row = np.matmul(b, ybar[..., 0, :, None])[..., None, :, 0]
        return broadcast_to(row, np.shape(ybar)[:-1] + row.shape[-1:])
    if _repeats(ybar, -1):  # ybar @ b^T = u (b 1)^T
        return ybar[..., :1] * np.sum(b, axis=-1)[..., None, :]
    return np.matmul(ybar, _mT(b))


@sensitivity(np.matmul, 1)
def _(y, ybar, a, b, **kwargs):
    a_ndim, b_ndim = _ndims(a, b)
    if b_ndim == 1:
        return ybar * a if a_ndim == 1 else np.matmul(ybar[..., None, :], a)[..., 0, :]
    if a_ndim == 1:
        # a vector times a matrix: the outer product of a and ybar (one call under vmap too)
        return np.outer(a, ybar) if b_ndim == 2 else a[..., :, None] * ybar[..., None, :]
    if _repeats(ybar, -1):  # a^T ybar = (a^T u) 1^T, repeating in turn (first, as above)
        column = np.matmul(_mT(a), ybar[..., :, :1])
        return broadcast_to(column, column.shape[:-1] + np.shape(ybar)[-1:])
    if _repeats(ybar, -2):  # a^T ybar = (a^T 1) v^T
        return np.sum(a, axis=-2)[..., :, None] * ybar[..., :1, :]
    return np.matmul(_mT(a), ybar)


def tensordot_axes(a, b, axes):
    """``axes`` of ``np.tensordot`` as two lists of non-negative axes."""
    if isinstance(axes, int):
        return list(range(np.ndim(a) - axes, np.ndim(a))), list(range(axes))
    axes_a, axes_b = axes
    axes_a = [axes_a] if isinstance(axes_a, int) else list(axes_a)
    axes_b = [axes_b] if isinstance(axes_b, int) else list(axes_b)
    return [i % np.ndim(a) for i in axes_a], [i % np.ndim(b) for i in axes_b]


def _tensordot_adjoint(ybar, other, own_axes, other_axes, own_ndim, other_ndim, first):
    """The adjoint of one factor of a tensordot, in that factor's own axis order."""
    own_free = [i for i in range(own_ndim) if i not in own_axes]
    other_free = [i for i in range(other_ndim) if i not in other_axes]
    n_own_free = len(own_free)
    if first:  # y = own_free + other_free
        y_other = list(range(n_own_free, n_own_free + len(other_free)))
        g = np.tensordot(ybar, other, axes=(y_other, other_free))
        order = own_free + [own_axes[other_axes.index(j)] for j in sorted(other_axes)]
    else:  # y = other_free + own_free
        y_other = list(range(len(other_free)))
        g = np.tensordot(other, ybar, axes=(other_free, y_other))
        order = [own_axes[other_axes.index(j)] for j in sorted(other_axes)] + own_free
    return np.transpose(g, tuple(int(k) for k in np.argsort(order)))  # ints: Dask wants them


@sensitivity(np.tensordot, 0)
def _(y, ybar, a, b, axes=2):
    axes_a, axes_b = tensordot_axes(a, b, axes)
    return _tensordot_adjoint(ybar, b, axes_a, axes_b, np.ndim(a), np.ndim(b), True)


@sensitivity(np.tensordot, 1)
def _(y, ybar, a, b, axes=2):
    axes_a, axes_b = tensordot_axes(a, b, axes)
    return _tensordot_adjoint(ybar, a, axes_b, axes_a, np.ndim(b), np.ndim(a), False)


def _dot_axes(a, b):
    return [np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]


@sensitivity(np.dot, 0)
def _(y, ybar, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return ybar * b
    axes_a, axes_b = _dot_axes(a, b)
    return _tensordot_adjoint(ybar, b, axes_a, axes_b, np.ndim(a), np.ndim(b), True)


@sensitivity(np.dot, 1)
def _(y, ybar, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return ybar * a
    axes_a, axes_b = _dot_axes(a, b)
    return _tensordot_adjoint(ybar, a, axes_b, axes_a, np.ndim(b), np.ndim(a), False)


# -- einsum ---------------------------------------------------------------------------------
#
# The adjoint of operand k is itself an einsum: of the output's adjoint and the other
# operands, producing operand k's subscripts. Three things need care: a label repeated in
# operand k (a trace or diagonal, 'ii->') is produced once and spread over the diagonal by
# an identity factor; a label only operand k has (summed away, 'ij->i') comes back through
# a factor of ones; a size-1 axis that broadcast against others is summed away and
# restored by the final reshape.

_LABELS = string.ascii_uppercase + string.ascii_lowercase  # NumPy's order for int labels
_EINSUM_MAX_OPERANDS = 64


def _einsum_parse(args):
    """(operand positions in ``args``, their subscripts, output subscripts), ellipses spelled
    out with unused labels, implicit output made explicit as NumPy would."""
    if isinstance(args[0], str):
        positions = list(range(1, len(args)))
        spec = args[0].replace(" ", "")
        inputs, arrow, output = spec.partition("->")
        inputs = inputs.split(",")
        output = output if arrow else None
    else:  # the interleaved form: op, sublist, op, sublist, ..., [output sublist]
        positions = list(range(0, len(args) - 1, 2))
        label = lambda s: "".join("..." if i is Ellipsis else _LABELS[i] for i in s)  # noqa: E731
        inputs = [label(args[p + 1]) for p in positions]
        output = label(args[-1]) if len(args) % 2 else None
    used = set("".join(inputs))
    spare = [c for c in _LABELS if c not in used]
    ndims = [np.ndim(args[p]) for p in positions]
    n_ellipsis = max(
        [nd - len(s.replace("...", "")) for s, nd in zip(inputs, ndims) if "..." in s] or [0]
    )
    ellipsis = "".join(spare[:n_ellipsis])
    subscripts = []
    for s, nd in zip(inputs, ndims):
        if "..." in s:
            s = s.replace("...", ellipsis[n_ellipsis - (nd - len(s.replace("...", ""))) :])
        subscripts.append(s)
    if output is None:
        counts = "".join(subscripts)
        output = ellipsis + "".join(sorted(c for c in used if c != "." and counts.count(c) == 1))
    else:
        output = output.replace("...", ellipsis)
    return positions, subscripts, output


@preprocess(np.einsum)
def _(y, ybar, *args, **kwargs):
    return _einsum_parse(args)


def _einsum_adjoint(k, ybar, args, parsed, kwargs):
    positions, subscripts, output = parsed
    x = args[positions[k]]
    own, shape = subscripts[k], np.shape(x)
    terms, operands = [output], [ybar]
    for j, p in enumerate(positions):
        if j != k:
            terms.append(subscripts[j])
            operands.append(args[p])
    sizes = {}
    for s, p in zip(subscripts, positions):
        for c, n in zip(s, np.shape(args[p])):
            sizes[c] = max(sizes.get(c, 1), n)
    dtype = np.result_type(ybar, *[args[p] for p in positions])
    spare = iter(c for c in _LABELS if c not in sizes)
    target = ""
    for c, n in zip(own, shape):
        if n == 1 and sizes[c] > 1:
            continue  # broadcast in the forward pass: summed here, restored by the reshape
        if c in target:  # a repeated label: a diagonal, spread by an identity factor
            fresh = next(spare)
            terms.append(c + fresh)
            operands.append(np.eye(n, dtype=dtype))
            c = fresh
        target += c
    present = set("".join(terms))
    for c in target:
        if c not in present:  # summed over in the forward pass: broadcast back
            terms.append(c)
            operands.append(np.ones(sizes[c], dtype=dtype))
    # the forward call's choice of optimisation, but never its path: that was for other operands
    optimize = kwargs.get("optimize", False)
    optimize = True if isinstance(optimize, (list, tuple)) else optimize or len(operands) > 2
    g = np.einsum(",".join(terms) + "->" + target, *operands, optimize=optimize)
    return np.reshape(g, shape)


def _einsum_rule(argnum):
    def rule(y, ybar, *args, pre, **kwargs):
        positions = pre[0]
        if argnum not in positions:
            return None
        return _einsum_adjoint(positions.index(argnum), ybar, args, pre, kwargs)

    return rule


for _argnum in range(_EINSUM_MAX_OPERANDS * 2):
    sensitivity(np.einsum, _argnum)(_einsum_rule(_argnum))


# -- the other products: implementations over the rules above where that is exact -----------


@implementation(np.vdot)
def _vdot(a, b):
    a = np.conj(a) if np.iscomplexobj(a) else a
    return np.dot(np.ravel(a), np.ravel(b))


@implementation(np.inner)
def _inner(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return np.tensordot(a, b, axes=(-1, -1))


@implementation(np.outer)
def _outer(a, b, out=None):
    if out is not None:
        raise TypeError("np.outer(..., out=...) cannot be recorded; drop out=")
    return np.multiply(np.reshape(a, (-1, 1)), np.reshape(b, (1, -1)))


@implementation(np.linalg.outer)
def _linalg_outer(x1, x2, /):
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError(
            f"Input arrays must be one-dimensional, got {np.ndim(x1)} and {np.ndim(x2)}"
        )
    return _outer(x1, x2)


@implementation(np.kron)
def _kron(a, b):
    # kron(a, b)[i*nb + k] = a[i] * b[k], axis by axis: interleave the axes, then merge
    nd = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + np.shape(a)
    sb = (1,) * (nd - np.ndim(b)) + np.shape(b)
    a = np.reshape(a, [n for m in sa for n in (m, 1)])
    b = np.reshape(b, [n for m in sb for n in (1, m)])
    return np.reshape(a * b, [m * n for m, n in zip(sa, sb)])


def _cross_axes(a, b, axisa, axisb, axisc, axis):
    if axis is not None:
        axisa = axisb = axisc = axis
    return axisa, axisb, axisc


def _cross_adjoint(ybar, other, own, axis_own, axis_other, axisc, first):
    """d <ybar, a x b> / d a = b x ybar, and d / d b = ybar x a (3-vectors)."""
    if np.shape(own)[axis_own] != 3 or np.shape(other)[axis_other] != 3:
        raise NotImplementedError("the sensitivity of cross is implemented for 3-vectors")
    other = np.moveaxis(other, axis_other, -1)
    ybar = np.moveaxis(ybar, axisc, -1)
    g = np.cross(other, ybar) if first else np.cross(ybar, other)
    return np.moveaxis(g, -1, axis_own % np.ndim(own) - np.ndim(own))


@sensitivity(np.cross, 0)
def _(y, ybar, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    axisa, axisb, axisc = _cross_axes(a, b, axisa, axisb, axisc, axis)
    return _cross_adjoint(ybar, b, a, axisa, axisb, axisc, True)


@sensitivity(np.cross, 1)
def _(y, ybar, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    axisa, axisb, axisc = _cross_axes(a, b, axisa, axisb, axisc, axis)
    return _cross_adjoint(ybar, a, b, axisb, axisa, axisc, False)


@implementation(np.linalg.cross)
def _linalg_cross(x1, x2, /, *, axis=-1):
    if np.shape(x1)[axis] != 3 or np.shape(x2)[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors")
    return np.cross(x1, x2, axis=axis)


def _chain_order(shapes):
    """The cheapest parenthesisation of a matrix chain: split[i][j] as in textbooks."""
    n = len(shapes)
    p = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = float("inf")
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


@implementation(np.linalg.multi_dot)
def _multi_dot(arrays, *, out=None):
    if out is not None:
        raise TypeError("np.linalg.multi_dot(..., out=...) cannot be recorded; drop out=")
    arrays = list(arrays)
    first, last = np.ndim(arrays[0]), np.ndim(arrays[-1])
    if first == 1:
        arrays[0] = np.reshape(arrays[0], (1, -1))
    if last == 1:
        arrays[-1] = np.reshape(arrays[-1], (-1, 1))
    split = _chain_order([np.shape(a) for a in arrays])

    def product(i, j):
        if i == j:
            return arrays[i]
        return np.dot(product(i, split[i][j]), product(split[i][j] + 1, j))

    result = product(0, len(arrays) - 1)
    if first == 1 and last == 1:
        return result[0, 0]
    return np.ravel(result) if first == 1 or last == 1 else result


# vecdot, matvec and vecmat are generalized ufuncs (NumPy 2.2+)


def _core_axis(x, axis):
    return axis % np.ndim(x) - np.ndim(x)


def _vecdot_rules(f):
    @sensitivity(f, 0)
    def _(y, ybar, a, b, axis=-1, **kwargs):
        _no_axes("vecdot", kwargs)
        g = np.expand_dims(ybar, -1) * np.moveaxis(b, _core_axis(b, axis), -1)
        g = np.conj(g) if np.iscomplexobj(g) else g
        return np.moveaxis(g, -1, _core_axis(a, axis))

    @sensitivity(f, 1)
    def _(y, ybar, a, b, axis=-1, **kwargs):
        _no_axes("vecdot", kwargs)
        a = np.conj(a) if np.iscomplexobj(a) else a
        g = np.expand_dims(ybar, -1) * np.moveaxis(a, _core_axis(a, axis), -1)
        return np.moveaxis(g, -1, _core_axis(b, axis))


def _no_axes(name, kwargs):
    if kwargs.get("axes") is not None or kwargs.get("keepdims"):
        raise NotImplementedError(
            f"the sensitivity of {name} supports axis= only, not axes= or keepdims="
        )


if hasattr(np, "vecdot"):
    _vecdot_rules(np.vecdot)

if hasattr(np, "matvec"):

    @sensitivity(np.matvec, 0)
    def _(y, ybar, a, x, **kwargs):
        _no_axes("matvec", kwargs)
        return np.expand_dims(ybar, -1) * np.expand_dims(x, -2)

    @sensitivity(np.matvec, 1)
    def _(y, ybar, a, x, **kwargs):
        _no_axes("matvec", kwargs)
        return np.matmul(np.expand_dims(ybar, -2), a)[..., 0, :]

    @sensitivity(np.vecmat, 0)
    def _(y, ybar, x, a, **kwargs):
        _no_axes("vecmat", kwargs)
        g = np.matmul(a, np.expand_dims(ybar, -1))[..., 0]
        return np.conj(g) if np.iscomplexobj(g) else g

    @sensitivity(np.vecmat, 1)
    def _(y, ybar, x, a, **kwargs):
        _no_axes("vecmat", kwargs)
        x = np.conj(x) if np.iscomplexobj(x) else x
        return np.expand_dims(x, -1) * np.expand_dims(ybar, -2)


# -- inverses, solves and determinants --------------------------------------------------------


@sensitivity(np.linalg.inv, 0)
def _(y, ybar, a):
    yT = _mT(y)
    return -np.matmul(yT, np.matmul(ybar, yT))


def _others_product(s):
    """``prod_{j != i} s_j`` along the last axis, by products from either side: no
    division, so exact where an ``s_i`` is zero."""
    ones = np.ones_like(s[..., :1])
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, np.flip(s[..., 1:], -1)], axis=-1), axis=-1)
    return left * np.flip(right, -1)


# Above this condition number the inverse leaves fewer than half the digits of det a^-T
_ILL_CONDITIONED = 1e8


def _inverse_if_well_conditioned(a):
    """The inverse of every matrix of ``a`` (a plain array), or None where one is singular
    or too near it for ``det a^-T`` to be accurate."""
    if np.shape(a)[-1] == 0:
        return np.linalg.inv(a)
    with np.errstate(all="ignore"):
        try:
            inverse = np.linalg.inv(a)
        except np.linalg.LinAlgError:
            return None
        cond = np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(inverse, axis=(-2, -1))
    return inverse if np.all(cond < _ILL_CONDITIONED) else None


def _cofactors(a, inv=np.linalg.inv):
    """The matrix of cofactors of ``a``, ``adj(a)^T``: the derivative of ``det a``.

    ``det(a) a^-T`` where every matrix is well conditioned; else from the SVD
    ``a = U diag(s) Vh``, as ``det(U) det(Vh) conj(U) diag(prod_{j != i} s_j) conj(Vh)``,
    exact and finite at a singular matrix too (zero where the rank is below n - 1)."""
    plain = value_of(a)
    inverse = _inverse_if_well_conditioned(plain)
    if inverse is not None:
        inverse = inverse if plain is a else inv(a)  # recorded where a is a node
        return np.expand_dims(np.linalg.det(a), (-2, -1)) * _mT(inverse)
    u, s, vh = np.linalg.svd(a)
    phase = np.linalg.det(u) * np.linalg.det(vh)  # +-1 for a real a: a constant
    if not np.iscomplexobj(plain):
        phase = value_of(phase)
    scaled = _conj(u) * np.expand_dims(_others_product(s), -2)
    return np.expand_dims(phase, (-2, -1)) * np.matmul(scaled, _conj(vh))


@sensitivity(np.linalg.det, 0)
def _(y, ybar, a):
    return np.expand_dims(ybar, (-2, -1)) * _cofactors(a)


@preprocess(np.linalg.solve)
def _(y, ybar, a, b):
    if np.ndim(b) == 1:  # NumPy 2: b is a vector only when it is 1-D
        return np.linalg.solve(_mT(a), np.expand_dims(ybar, -1))[..., 0]
    return np.linalg.solve(_mT(a), ybar)


@sensitivity(np.linalg.solve, 0)
def _(y, ybar, a, b, pre):
    if np.ndim(b) == 1:
        return -np.expand_dims(pre, -1) * np.expand_dims(y, -2)
    return -np.matmul(pre, _mT(y))


sensitivity(np.linalg.solve, 1)(lambda y, ybar, a, b, pre: pre)


def _pinv_adjoint(a, x, xbar):
    """The adjoint of ``x = pinv(a)``, for a matrix of constant rank (Golub & Pereyra):
    ``-x^T xbar x^T + conj((I - a x) xbar^T x x^H + x^H x xbar^T (I - x a))``; the two
    terms in conj come from the dA^H in dx, and for real matrices every ^H is a ^T."""
    xT, xH, xbarT = _mT(x), _mH(x), _mT(xbar)
    g = np.matmul(xbarT - np.matmul(a, np.matmul(x, xbarT)), np.matmul(x, xH))
    g = g + np.matmul(np.matmul(xH, x), xbarT - np.matmul(np.matmul(xbarT, x), a))
    return _conj(g) - np.matmul(xT, np.matmul(xbar, xT))


@sensitivity(np.linalg.pinv, 0)
def _(y, ybar, a, rcond=None, hermitian=False, **kwargs):
    if not hermitian:
        return _pinv_adjoint(a, y, ybar)
    _real_only("pinv(..., hermitian=True)", a)
    # NumPy reads the lower triangle: the pseudo-inverse is that of the symmetric matrix
    return _fold(_pinv_adjoint(np.tril(a) + _mT(np.tril(a, -1)), y, ybar))


# -- factorisations ----------------------------------------------------------------------------
#
# A function returning several arrays is an implementation over a primitive that returns
# them packed along the last axis (``_join``); the implementation unpacks them by indexing,
# which is recorded, so each result is a node and unused results get zero adjoints.


def _join(results, batch):
    return np.concatenate([np.reshape(r, batch + (-1,)) for r in results], axis=-1)


def _unpack(packed, core_shapes):
    """The results joined by ``_join``, each with its batch axes and its ``core_shapes``."""
    batch = np.shape(packed)[:-1]
    parts, start = [], 0
    for shape in core_shapes:
        size = int(np.prod(shape))
        parts.append(np.reshape(packed[..., start : start + size], batch + tuple(shape)))
        start += size
    return parts


def _result_type(f, *args, **kwargs):
    """The named tuple type NumPy returns from ``f`` (``EighResult``, ``SVDResult``...)."""
    return type(f(*args, **kwargs))


_EighResult = _result_type(np.linalg.eigh, np.eye(1))
_SVDResult = _result_type(np.linalg.svd, np.eye(1))
_QRResult = _result_type(np.linalg.qr, np.eye(1))
_SlogdetResult = _result_type(np.linalg.slogdet, np.eye(1))


# cholesky (Murray 2016): with L^-1 dA L^-H = Phi^-1(L^-1 dL), Phi taking the lower triangle
# with a halved diagonal, the adjoint at the Hermitian matrix is L^-T Phi(L^T Lbar) conj(L^-1)
# (for real matrices L^-T Phi(L' Lbar) L^-1).


def _cholesky_adjoint(factor, factor_bar, lower):
    """The adjoint of a Cholesky factor (lower L, or upper U = L^H) with respect to the
    symmetric (Hermitian) input."""
    low, lowbar = (factor, factor_bar) if lower else (_mH(factor), _mH(factor_bar))
    phi = np.tril(np.matmul(_mT(low), lowbar))
    phi = phi - 0.5 * _diag_embed(_diagonal(phi))
    inv = np.linalg.inv(low)
    return _fold(np.matmul(_mT(inv), np.matmul(phi, _conj(inv))), lower=lower)


@sensitivity(np.linalg.cholesky, 0)
def _(y, ybar, a, upper=False):
    if type(y).__module__.startswith("dask"):
        # Dask's cholesky returns the upper factor where NumPy's returns the lower one
        raise NotImplementedError(
            "np.linalg.cholesky on a Dask array returns Dask's upper factor, not NumPy's lower "
            "one: its gradient is not defined here; compute the factor with NumPy instead"
        )
    return _cholesky_adjoint(y, ybar, not upper)


# eigh: dw = diag(V^H dA V), dV = V (F o V^H dA V) with F_ij = 1 / (w_j - w_i); the
# adjoint is conj(V) (diag(wbar) + F o V^T Vbar) V^T (for real matrices V (...) V')


def _eigh_adjoint(w, v, wbar, vbar, uplo):
    w, wbar = np.real(w), np.real(wbar)  # real eigenvalues, even packed beside complex V
    inner = _diag_embed(wbar)
    if vbar is not None:
        inner = inner + _over_gaps(np.matmul(_mT(v), vbar), w)
    return _fold(np.matmul(_conj(v), np.matmul(inner, _mT(v))), lower=uplo.upper() == "L")


@primitive
def eigh_packed(a, UPLO="L"):
    """``np.linalg.eigh(a)``'s eigenvalues and eigenvectors packed as ``(..., n + n * n)``."""
    w, v = np.linalg.eigh(a, UPLO)
    return _join((w, v), np.shape(w)[:-1])


@sensitivity(eigh_packed, 0)
def _(y, ybar, a, UPLO="L"):
    n = np.shape(a)[-1]
    (w, v), (wbar, vbar) = _unpack(y, [(n,), (n, n)]), _unpack(ybar, [(n,), (n, n)])
    return _eigh_adjoint(w, v, wbar, vbar, UPLO)


@implementation(np.linalg.eigh)
def _eigh(a, UPLO="L"):
    n = np.shape(a)[-1]
    w, v = _unpack(eigh_packed(a, UPLO), [(n,), (n, n)])
    return _EighResult(np.real(w) if np.iscomplexobj(w) else w, v)  # packed with complex v


@sensitivity(np.linalg.eigvalsh, 0)
def _(y, ybar, a, UPLO="L"):
    return _eigh_adjoint(y, np.linalg.eigh(a, UPLO)[1], ybar, None, UPLO)


# eig of a general matrix, A = V diag(w) V^-1, with NumPy's unit-norm columns of V. With
# P = V^-1 dA V: dw = diag(P), and dV = V C with C_ij = P_ij / (w_j - w_i) off the diagonal,
# and Re C_jj = -Re (V^H V C)_jj keeping |v_j| = 1 (Im C_jj, the phase, is left free). The
# adjoint, the transpose of that (PyTorch's linalg_eig_backward, conjugated to this
# convention), is
#     Abar = V^-T (diag(wbar) + F o (V^T Vbar - (V^H V)^T diag(Re diag(V^T Vbar)))) V^T
# with F_ij = 1 / (w_j - w_i). It is meaningful for losses that do not depend on each
# eigenvector's phase (|v|^2, V diag(w) V^-1, projectors), as JAX's and PyTorch's; at
# repeated eigenvalues the coupling terms are dropped, as for eigh. For a real matrix only
# the real part is a gradient (the real matrices are what it moves along).


def _eig_adjoint(a, w, v, wbar, vbar):
    vt = _mT(v)
    inner = _diag_embed(wbar)
    if vbar is not None:
        g = np.matmul(vt, vbar)
        gram = _mT(np.matmul(_mH(v), v))
        correction = gram * np.expand_dims(np.real(_diagonal(g)), -2)
        # V is not even unique where w repeats (V V^-1 cancels the adjoint of V): NaN
        # there whenever the vectors are read, as PyTorch's
        inner = inner + _over_gaps(g - correction, w) + _undefined(_repeated(w), np.ones_like(g))
    abar = np.linalg.solve(vt, np.matmul(inner, vt))
    return abar if np.iscomplexobj(a) else np.real(abar)


@primitive
def eig_packed(a):
    """``np.linalg.eig(a)``'s eigenvalues and eigenvectors packed as ``(..., n + n * n)``."""
    w, v = np.linalg.eig(a)
    return _join((w, v), np.shape(w)[:-1])


@sensitivity(eig_packed, 0)
def _(y, ybar, a):
    n = np.shape(a)[-1]
    (w, v), (wbar, vbar) = _unpack(y, [(n,), (n, n)]), _unpack(ybar, [(n,), (n, n)])
    return _eig_adjoint(a, w, v, wbar, vbar)


_EigResult = _result_type(np.linalg.eig, np.eye(1))


@implementation(np.linalg.eig)
def _eig(a):
    n = np.shape(a)[-1]
    return _EigResult(*_unpack(eig_packed(a), [(n,), (n, n)]))


@sensitivity(np.linalg.eigvals, 0)
def _(y, ybar, a):
    # dw = diag(V^-1 dA V): Abar = V^-T diag(wbar) V^T, with V computed again (eigvals has
    # none); differentiated again, that eig is recorded too
    return _eig_adjoint(a, y, np.linalg.eig(a)[1], ybar, None)


# svd (Townsend 2016), with S = diag(s), F_ij = 1 / (s_j^2 - s_i^2):
# Abar = U [(F o (U'Ubar - Ubar'U)) S + diag(sbar) + S (F o (V'Vbar - Vbar'V))] V'
#        + (I - UU') Ubar S^-1 V' + U S^-1 Vbar' (I - VV')
# For complex matrices the same in the conjugated adjoints G = conj(bar), with ^H for ',
# one more diagonal term i Im(diag(U^H G_U)) / s, and the result conjugated back. As for
# eigh, it is meaningful for losses invariant under u_i, v_i -> e^{it} u_i, e^{it} v_i.


def _svd_adjoint(u, s, vh, ubar, sbar, vhbar):
    s = np.real(s)  # real singular values, even packed beside complex U and V
    gu, gvh = _conj(ubar), _conj(vhbar)
    v, gv = _mH(vh), _mH(gvh)
    uu, vv = np.matmul(_mH(u), gu), np.matmul(vh, gv)
    gaps = s[..., None, :] ** 2 - s[..., :, None] ** 2
    same = np.equal(gaps, 0)
    f = np.where(same, 0.0, 1.0 / np.where(same, 1.0, gaps))
    inner = (f * (uu - _mH(uu))) * np.expand_dims(s, -2) + _undefined(same, uu, vv)
    inner = inner + np.expand_dims(s, -1) * (f * (vv - _mH(vv)))
    inner = inner + _diag_embed(np.real(sbar))
    if np.iscomplexobj(uu):
        inner = inner + _diag_embed(1j * np.imag(_diagonal(uu)) / s)
    g = np.matmul(u, np.matmul(inner, vh))
    m, n, k = np.shape(u)[-2], np.shape(vh)[-1], np.shape(s)[-1]
    if m > k:  # the part of ubar outside the column space of u
        gu_s = gu / np.expand_dims(s, -2)
        g = g + np.matmul(gu_s - np.matmul(u, np.matmul(_mH(u), gu_s)), vh)
    if n > k:
        gv_s = gv / np.expand_dims(s, -2)
        g = g + np.matmul(u, _mH(gv_s - np.matmul(v, np.matmul(vh, gv_s))))
    return _conj(g)


@primitive
def svd_packed(a, hermitian=False):
    """``np.linalg.svd(a, full_matrices=False)`` packed as ``(..., m*k + k + k*n)``."""
    u, s, vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    return _join((u, s, vh), np.shape(s)[:-1])


def _svd_shapes(a):
    m, n = np.shape(a)[-2:]
    k = min(m, n)
    return [(m, k), (k,), (k, n)]


@sensitivity(svd_packed, 0)
def _(y, ybar, a, hermitian=False):
    if hermitian:
        _real_only("svd(..., hermitian=True)", a)
    shapes = _svd_shapes(a)
    g = _svd_adjoint(*_unpack(y, shapes), *_unpack(ybar, shapes))
    return _fold(g) if hermitian else g


@implementation(np.linalg.svd)
def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if not compute_uv:
        return np.linalg.svdvals(a) if not hermitian else _svdvals_hermitian(a)
    m, n = np.shape(a)[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(
            "svd(a, full_matrices=True) of a non-square matrix is not differentiable: the "
            "extra singular vectors are not determined by a; pass full_matrices=False"
        )
    u, s, vh = _unpack(svd_packed(a, hermitian), _svd_shapes(a))
    return _SVDResult(u, np.real(s) if np.iscomplexobj(s) else s, vh)  # packed with complex u


def _svdvals_hermitian(a):
    s = _unpack(svd_packed(a, True), _svd_shapes(a))[1]
    return np.real(s) if np.iscomplexobj(s) else s


if hasattr(np.linalg, "svdvals"):

    @sensitivity(np.linalg.svdvals, 0)
    def _(y, ybar, x):
        # ds_i = Re(u_i^H dA v_i): the adjoint conj(U diag(sbar) Vh) (U diag(sbar) Vh if real)
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        return _conj(np.matmul(u * np.expand_dims(np.real(ybar), -2), vh))


# qr (Walter & Lehmann 2018; Liao et al. 2019 for wide matrices): for m >= n,
# Abar = (Qbar + Q copyltu(M)) R^-T, M = R Rbar' - Qbar' Q; a wide A = [X | Y] is
# differentiated through its square part X = Q U, with Y = Q V.


def _copyltu(m):
    """The Hermitian (symmetric) matrix with ``m``'s lower triangle: a real diagonal."""
    low, diagonal = np.tril(m, -1), _diagonal(m)
    return low + _mH(low) + _diag_embed(np.real(diagonal) if np.iscomplexobj(m) else diagonal)


def _qr_square_adjoint(q, r, qbar, rbar):
    # for complex matrices, as the real formula with conj(Q) in Q's place: Q^H Q = I
    m = np.matmul(r, _mT(rbar)) - np.matmul(_mT(qbar), q)
    b = qbar + _conj(np.matmul(q, _copyltu(m)))
    return _mT(np.linalg.solve(r, _mT(b)))  # b R^-T


@primitive
def qr_packed(a):
    """``np.linalg.qr(a)``'s reduced Q and R packed as ``(..., m*k + k*n)``."""
    q, r = np.linalg.qr(a)
    return _join((q, r), np.shape(r)[:-2])


def _qr_shapes(a):
    m, n = np.shape(a)[-2:]
    k = min(m, n)
    return [(m, k), (k, n)]


@sensitivity(qr_packed, 0)
def _(y, ybar, a):
    (q, r), (qbar, rbar) = _unpack(y, _qr_shapes(a)), _unpack(ybar, _qr_shapes(a))
    m, n = np.shape(a)[-2:]
    if m >= n:
        return _qr_square_adjoint(q, r, qbar, rbar)
    # [X | Y] = A: Xbar from the square factorisation, Ybar = Q Vbar; joined by products
    # with constant selections instead of a concatenation (conj(Q), conj(Y) if complex)
    first, rest = _eye_like(a, n)[:m], _eye_like(a, n)[m:]
    vbar = np.matmul(rbar, _mT(rest))
    ybar_part = np.matmul(_conj(q), vbar)
    qbar = qbar + np.matmul(_conj(np.matmul(a, _mT(rest))), _mH(vbar))
    xbar = _qr_square_adjoint(q, np.matmul(r, _mT(first)), qbar, np.matmul(rbar, _mT(first)))
    return np.matmul(xbar, first) + np.matmul(ybar_part, rest)


@implementation(np.linalg.qr)
def _qr(a, mode="reduced"):
    m, n = np.shape(a)[-2:]
    if mode not in ("reduced", "r", "complete") or (mode == "complete" and m > n):
        raise NotImplementedError(
            f"qr(a, mode={mode!r}) is not differentiable here"
            + (": the extra columns of Q are not determined by a" if mode == "complete" else "")
            + "; use mode='reduced' or mode='r'"
        )
    q, r = _unpack(qr_packed(a), _qr_shapes(a))
    return r if mode == "r" else _QRResult(q, r)


# slogdet: d log|det A| = Re tr(A^-1 dA); the sign is a constant of a real A


@primitive
def slogdet_packed(a):
    """``np.linalg.slogdet(a)``'s sign and log-determinant packed as ``(..., 2)``."""
    sign, logdet = np.linalg.slogdet(a)
    return _join((sign, logdet), np.shape(logdet))


@sensitivity(slogdet_packed, 0)
def _(y, ybar, a):
    # d log|det a| = Re tr(a^-1 da); for complex a the sign moves too:
    # d sign = i sign Im tr(a^-1 da), which reaches a as i Im(signbar sign) a^-T
    scale = np.real(ybar[..., 1])
    if np.iscomplexobj(a):
        scale = scale + 1j * np.imag(ybar[..., 0] * y[..., 0])
    scale = np.expand_dims(scale, (-2, -1))
    if _inverse_if_well_conditioned(value_of(a)) is not None:
        return scale * _mT(np.linalg.inv(a))
    # a^-T = adj(a)^T / det a: infinite or NaN at a singular a, as JAX's; nothing where the
    # loss reads only the sign, which is constant
    det = np.expand_dims(np.linalg.det(a), (-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(np.equal(scale, 0), 0.0, np.true_divide(scale, det))
    return weight * _cofactors(a)


@implementation(np.linalg.slogdet)
def _slogdet(a):
    sign, logdet = _unpack(slogdet_packed(a), [(), ()])
    return _SlogdetResult(sign, np.real(logdet) if np.iscomplexobj(logdet) else logdet)


# lstsq: the solution is pinv(a) @ b, differentiated as such (constant rank)


@primitive
def lstsq_solution(a, b, rcond=None):
    """The solution ``x`` of ``np.linalg.lstsq(a, b, rcond)``."""
    return np.linalg.lstsq(a, b, rcond=rcond)[0]


@preprocess(lstsq_solution)
def _(y, ybar, a, b, rcond=None):
    return np.linalg.pinv(a) if rcond is None else np.linalg.pinv(a, rcond)


@sensitivity(lstsq_solution, 0)
def _(y, ybar, a, b, rcond=None, *, pre):
    if np.ndim(b) == 1:
        xbar = np.expand_dims(ybar, -1) * np.expand_dims(b, -2)
    else:
        xbar = np.matmul(ybar, _mT(b))
    return _pinv_adjoint(a, pre, xbar)


@sensitivity(lstsq_solution, 1)
def _(y, ybar, a, b, rcond=None, *, pre):
    return np.matmul(_mT(pre), ybar)


@implementation(np.linalg.lstsq)
def _lstsq(a, b, rcond=None):
    x = lstsq_solution(a, b, rcond)
    s = np.linalg.svd(a, compute_uv=False)
    m, n = np.shape(a)
    cutoff = (np.finfo(np.result_type(a)).eps * max(m, n) if rcond is None else rcond) * s[0]
    rank = np.sum(s > cutoff)
    if rank == n and m > n:
        r = b - np.matmul(a, x)
        r2 = np.real(r * np.conjugate(r)) if np.iscomplexobj(r) else r * r  # |r|^2, as NumPy's
        residuals = np.sum(r2, axis=0) if np.ndim(b) == 2 else np.reshape(np.sum(r2), (1,))
    else:
        residuals = np.zeros((0,), dtype=np.result_type(a))
    return x, residuals, rank, s


# -- functions of matrices written with the rules above ---------------------------------------


@implementation(np.linalg.matrix_power)
def _matrix_power(a, n):
    if n == 0:
        return np.array(np.broadcast_to(_eye_like(a), np.shape(a)))  # a constant
    if n < 0:
        a, n = np.linalg.inv(a), -n
    z = result = None
    while n > 0:  # binary powering, as NumPy does it
        z = a if z is None else np.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else np.matmul(result, z)
    return result


@implementation(np.linalg.tensorinv)
def _tensorinv(a, ind=2):
    shape = np.shape(a)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    rows = int(np.prod(shape[:ind]))
    inverse = np.linalg.inv(np.reshape(a, (rows, -1)))
    return np.reshape(inverse, shape[ind:] + shape[:ind])


@implementation(np.linalg.tensorsolve)
def _tensorsolve(a, b, axes=None):
    nd = np.ndim(a)
    if axes is not None:
        order = [i for i in range(nd) if i not in [k % nd for k in axes]]
        a = np.transpose(a, order + [k % nd for k in axes])
    x_shape = np.shape(a)[np.ndim(b) :]
    size = int(np.prod(x_shape))
    x = np.linalg.solve(np.reshape(a, (size, size)), np.ravel(b))
    return np.reshape(x, x_shape)


@implementation(np.linalg.cond)
def _cond(x, p=None):
    if p is None or p in (2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    return np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(x), p, axis=(-2, -1))


nondifferentiable(np.linalg.matrix_rank)


# -- norms: one rule for every order NumPy accepts ------------------------------------------------


def _unit(x):
    """d|x| / dx, as the rule of ``absolute`` has it: sign(x), or conj(x) / |x| if complex."""
    if not np.iscomplexobj(x):
        return np.sign(x)
    size = np.absolute(x)
    zero = np.equal(size, 0)
    return np.conjugate(x) / np.where(zero, 1.0, size)


def _share(hits, axes):
    """Ties of a max or min share its adjoint equally, as in the rule of ``max``."""
    return hits / np.sum(hits, axis=axes, keepdims=True)


@sensitivity(np.linalg.norm, 0)
def _(y, ybar, x, ord=None, axis=None, keepdims=False):
    nd = np.ndim(x)
    if axis is None:
        axes = tuple(range(nd))
        matrix = ord is not None and nd == 2
    else:
        axes = tuple(a % nd for a in (axis if isinstance(axis, tuple) else (axis,)))
        matrix = len(axes) == 2
    kept = tuple(1 if i in axes else n for i, n in enumerate(np.shape(x)))
    y = np.reshape(y, kept)
    ybar = np.reshape(np.real(ybar) if np.iscomplexobj(ybar) else ybar, kept)
    if ord is None or ord == "fro" or (ord == 2 and not matrix):
        zero = np.equal(y, 0)  # the subgradient 0 at the origin
        return ybar * (np.conjugate(x) if np.iscomplexobj(x) else x) / np.where(zero, 1.0, y)
    if matrix and ord in ("nuc", 2, -2):
        xm = np.moveaxis(x, axes, (-2, -1))
        u, s, vh = np.linalg.svd(xm, full_matrices=False)
        if ord == 2:
            u, vh = u[..., :1], vh[..., :1, :]
        elif ord == -2:
            u, vh = u[..., -1:], vh[..., -1:, :]
        return ybar * np.moveaxis(np.conjugate(np.matmul(u, vh)), (-2, -1), axes)
    size = np.absolute(x)
    if matrix:  # ord 1 / -1: columns summed over axes[0]; inf / -inf: rows over axes[1]
        summed, over = (axes[0], axes[1]) if ord in (1, -1) else (axes[1], axes[0])
        sums = np.sum(size, axis=summed, keepdims=True)
        return ybar * _unit(x) * _share(np.equal(sums, y), over)
    if ord in (np.inf, -np.inf):
        return ybar * _unit(x) * _share(np.equal(size, y), axes)
    if ord == 0:
        return np.zeros_like(x)  # a count of nonzeros
    if ord == 1:
        return ybar * _unit(x)
    zero = np.equal(size, 0)
    ratio = np.where(zero, 0.0, size) / np.where(np.equal(y, 0), 1.0, y)
    return ybar * _unit(x) * np.where(zero, 0.0, ratio ** (ord - 1))


if hasattr(np.linalg, "vector_norm"):

    @implementation(np.linalg.vector_norm)
    def _vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
        shape = np.shape(x)
        axes = tuple(range(len(shape))) if axis is None else axis
        axes = tuple(a % len(shape) for a in (axes if isinstance(axes, tuple) else (axes,)))
        rest = [i for i in range(len(shape)) if i not in axes]
        size = 1  # not -1 in the reshape: the kept axes may be empty
        for a in axes:
            size *= shape[a]
        moved = np.transpose(x, list(axes) + rest)
        flat = np.reshape(moved, (size,) + tuple(shape[i] for i in rest))
        result = np.linalg.norm(flat, ord=ord, axis=0)
        if keepdims:
            result = np.reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))
        return result

    @implementation(np.linalg.matrix_norm)
    def _matrix_norm(x, /, *, keepdims=False, ord="fro"):
        return np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# -- SciPy: differentiable counterparts of scipy.linalg functions -------------------------------
#
# scipy.linalg converts its inputs with np.asarray, so its functions cannot be recorded on
# nodes. These take the same arguments (overwrite_* are accepted and ignored: inputs are
# never written) and are recorded as one record each.


def _outer_or_matmul(u, v, vector):
    """``u v'`` for stacks of matrices, or the outer product of vectors."""
    if vector:
        return np.expand_dims(u, -1) * np.expand_dims(v, -2)
    return np.matmul(u, _mT(v))


def _triangle(g, lower, unit_diagonal=False):
    k = -1 if unit_diagonal else 0
    return np.tril(g, k) if lower else np.triu(g, -k)


@primitive
def _permutation(piv):
    """The rows ``perm`` of LAPACK's row interchanges ``piv``: ``a[perm] = l @ u``. A
    primitive (a loop over the pivots, one by one), so that a batch of pivots under
    ``vmap`` runs it once per example."""
    perm = np.arange(len(piv))
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


nondifferentiable(_permutation)


if _sla is not None:

    @primitive
    def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                         check_finite=True):  # fmt: skip
        """``scipy.linalg.solve_triangular``, differentiable in ``a`` (the triangle it
        reads) and ``b``."""
        return _sla.solve_triangular(a, b, trans, lower, unit_diagonal, False, check_finite)

    def _transposed(trans):
        return trans in (1, 2, "T", "C")

    @preprocess(solve_triangular)
    def _(y, ybar, a, b, trans=0, lower=False, unit_diagonal=False, *args, **kwargs):
        _real_only("solve_triangular", a, b)
        return solve_triangular(a, ybar, 0 if _transposed(trans) else 1, lower, unit_diagonal)

    @sensitivity(solve_triangular, 0)
    def _(y, ybar, a, b, trans=0, lower=False, unit_diagonal=False, *args, pre, **kwargs):
        vector = np.ndim(b) < np.ndim(a)
        g = (
            _outer_or_matmul(y, pre, vector)
            if _transposed(trans)
            else _outer_or_matmul(pre, y, vector)
        )
        return -_triangle(g, lower, unit_diagonal)

    sensitivity(solve_triangular, 1)(lambda y, ybar, a, b, *args, pre, **kwargs: pre)

    @primitive
    def cho_factor_matrix(a, lower=False, check_finite=True):
        """The matrix ``c`` of ``scipy.linalg.cho_factor(a, lower)``: the Cholesky factor in
        one triangle; the other triangle carries no gradient."""
        return _sla.cho_factor(a, lower, False, check_finite)[0]

    @sensitivity(cho_factor_matrix, 0)
    def _(y, ybar, a, lower=False, check_finite=True):
        _real_only("cho_factor", a)
        return _cholesky_adjoint(_triangle(y, lower), _triangle(ybar, lower), lower)

    def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
        """``scipy.linalg.cho_factor``, differentiable: ``(c, lower)`` with ``c`` a node."""
        return cho_factor_matrix(a, lower, check_finite), lower

    @primitive
    def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
        """``scipy.linalg.cho_solve``, differentiable in the factor ``c`` and in ``b``."""
        return _sla.cho_solve(c_and_lower, b, False, check_finite)

    @preprocess(cho_solve)
    def _(y, ybar, c_and_lower, b, *args, **kwargs):
        _real_only("cho_solve", c_and_lower[0], b)
        return cho_solve(c_and_lower, ybar)

    @sensitivity(cho_solve, 0)
    def _(y, ybar, c_and_lower, b, *args, pre, **kwargs):
        c, lower = c_and_lower
        factor = _triangle(c, lower)
        abar = -_outer_or_matmul(pre, y, np.ndim(b) < np.ndim(c))
        abar = abar + _mT(abar)  # a = l l' (or u' u): through both factors
        cbar = np.matmul(abar, factor) if lower else np.matmul(factor, abar)
        return [_triangle(cbar, lower), None]

    sensitivity(cho_solve, 1)(lambda y, ybar, c_and_lower, b, *args, pre, **kwargs: pre)

    @primitive
    def expm(A):
        """``scipy.linalg.expm``, differentiable."""
        return _sla.expm(A)

    @sensitivity(expm, 0)
    def _(y, ybar, A):
        # The adjoint of the Frechet derivative at A is the Frechet derivative at A',
        # read off the corner of expm([[A', ybar], [0, A']]) (Mathias 1996).
        n = np.shape(A)[-1]
        diagonal = np.eye(2, dtype=np.result_type(A))
        corner = np.array([[0.0, 1.0], [0.0, 0.0]], dtype=np.result_type(A, ybar))
        block = np.einsum("ij,...ab->...iajb", diagonal, _mT(A))
        block = block + np.einsum("ij,...ab->...iajb", corner, ybar)
        big = np.reshape(block, np.shape(block)[:-4] + (2 * n, 2 * n))
        return expm(big)[..., :n, n:]

    @primitive
    def inv(a, overwrite_a=False, check_finite=True, **kwargs):
        """``scipy.linalg.inv``, differentiable (a general matrix)."""
        if kwargs.get("assume_a") not in (None, "gen", "general"):
            raise NotImplementedError(
                "inv(..., assume_a=...) is differentiable for general matrices"
            )
        return _sla.inv(a, False, check_finite, **kwargs)

    @sensitivity(inv, 0)
    def _(y, ybar, a, *args, **kwargs):
        yT = _mT(y)
        return -np.matmul(yT, np.matmul(ybar, yT))

    @primitive
    def det(a, overwrite_a=False, check_finite=True):
        """``scipy.linalg.det``, differentiable."""
        return _sla.det(a, False, check_finite)

    @sensitivity(det, 0)
    def _(y, ybar, a, *args, **kwargs):
        return np.expand_dims(ybar, (-2, -1)) * _cofactors(a, inv)

    @primitive
    def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
        """``scipy.linalg.cholesky`` (upper by default, as SciPy), differentiable."""
        return _sla.cholesky(a, lower, False, check_finite)

    @sensitivity(cholesky, 0)
    def _(y, ybar, a, lower=False, *args, **kwargs):
        _real_only("cholesky", a)
        return _cholesky_adjoint(y, ybar, lower)

    _SYMMETRIC = ("sym", "symmetric", "her", "hermitian", "pos", "positive definite")
    _GENERAL = (None, "gen", "general")

    @primitive
    def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
              assume_a=None, transposed=False):  # fmt: skip
        """``scipy.linalg.solve``, differentiable for ``assume_a`` general, symmetric
        (Hermitian, positive definite: the symmetric gradient), triangular
        and diagonal."""
        if assume_a not in _GENERAL + _SYMMETRIC + (
            "lower triangular",
            "upper triangular",
            "diagonal",
        ):
            raise NotImplementedError(
                f"solve(..., assume_a={assume_a!r}) is not differentiable here"
            )
        return _sla.solve(a, b, lower, False, False, check_finite, assume_a, transposed)

    def _solve_options(args, kwargs):
        names = ("lower", "overwrite_a", "overwrite_b", "check_finite", "assume_a", "transposed")
        options = dict(zip(names, args), **kwargs)
        return (
            options.get("lower", False),
            options.get("assume_a"),
            options.get("transposed", False),
        )

    @preprocess(solve)
    def _(y, ybar, a, b, *args, **kwargs):
        _real_only("solve", a, b)
        lower, assume_a, transposed = _solve_options(args, kwargs)
        return solve(a, ybar, lower, assume_a=assume_a, transposed=not transposed)

    @sensitivity(solve, 0)
    def _(y, ybar, a, b, *args, pre, **kwargs):
        lower, assume_a, transposed = _solve_options(args, kwargs)
        vector = np.ndim(b) < np.ndim(a)
        g = -(_outer_or_matmul(y, pre, vector) if transposed else _outer_or_matmul(pre, y, vector))
        if assume_a in _SYMMETRIC:
            return _fold(g, lower)
        if assume_a == "diagonal":
            return _diag_embed(_diagonal(g))
        if assume_a in ("lower triangular", "upper triangular"):
            return _triangle(g, assume_a == "lower triangular")
        return g

    sensitivity(solve, 1)(lambda y, ybar, a, b, *args, pre, **kwargs: pre)

    # lu: a = p l u. With lbar, ubar read off the combined matrix,
    # abar = p l^-T (tril(l' lbar, -1) + triu(ubar u')) u^-T.

    def _lu_parts(lu):
        n = np.shape(lu)[-1]
        eye = _eye_like(lu, n)
        return np.tril(lu, -1) + eye, np.triu(lu)

    @primitive
    def lu_factor_packed(a, check_finite=True):
        """``scipy.linalg.lu_factor(a)``: the matrix ``lu`` and the pivots, as floats, in
        one array ``(n, n + 1)``."""
        lu, piv = _sla.lu_factor(a, False, check_finite)
        return np.concatenate([lu, piv[:, None].astype(lu.dtype)], axis=-1)

    @sensitivity(lu_factor_packed, 0)
    def _(y, ybar, a, check_finite=True):
        _real_only("lu_factor", a)
        n = np.shape(a)[-1]
        low, up = _lu_parts(y[:, :n])
        lubar = ybar[:, :n]
        m = np.tril(np.matmul(_mT(low), np.tril(lubar, -1)), -1) + np.triu(
            np.matmul(np.triu(lubar), _mT(up))
        )
        li, ui = np.linalg.inv(low), np.linalg.inv(up)
        g = np.matmul(_mT(li), np.matmul(m, _mT(ui)))
        perm = _permutation(np.rint(y[:, n]).astype(int))
        return g[np.argsort(perm)]

    def lu_factor(a, overwrite_a=False, check_finite=True):
        """``scipy.linalg.lu_factor``, differentiable: ``(lu, piv)`` with ``lu`` a node."""
        packed = lu_factor_packed(a, check_finite)
        n = np.shape(a)[-1]
        return packed[:, :n], np.rint(packed[:, n]).astype(np.int32)

    @primitive
    def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
        """``scipy.linalg.lu_solve``, differentiable in ``lu`` and ``b``."""
        return _sla.lu_solve(lu_and_piv, b, trans, False, check_finite)

    @preprocess(lu_solve)
    def _(y, ybar, lu_and_piv, b, trans=0, *args, **kwargs):
        _real_only("lu_solve", lu_and_piv[0], b)
        return lu_solve(lu_and_piv, ybar, 0 if trans in (1, 2, "T", "C") else 1)

    @sensitivity(lu_solve, 0)
    def _(y, ybar, lu_and_piv, b, trans=0, *args, pre, **kwargs):
        lu, piv = lu_and_piv
        vector = np.ndim(b) < np.ndim(lu)
        transposed = trans in (1, 2, "T", "C")
        abar = -(
            _outer_or_matmul(y, pre, vector) if transposed else _outer_or_matmul(pre, y, vector)
        )
        low, up = _lu_parts(lu)
        pabar = abar[_permutation(piv)]  # p' abar
        lubar = np.tril(np.matmul(pabar, _mT(up)), -1) + np.triu(np.matmul(_mT(low), pabar))
        return [lubar, None]

    sensitivity(lu_solve, 1)(lambda y, ybar, lu_and_piv, b, *args, pre, **kwargs: pre)


_COUNTERPART_NAMES = ("solve_triangular", "cho_factor", "cho_solve", "expm", "inv", "solve",
                      "det", "cholesky", "lu_factor", "lu_solve")  # fmt: skip
__all__ = [*_COUNTERPART_NAMES, "scipy_counterparts", "scipy_counterpart"] if _sla else []


def scipy_counterparts() -> dict:
    """SciPy's functions, each to its counterpart here (this imports ``scipy.linalg``)."""
    if _sla is None:
        return {}
    return {getattr(_sla, name): globals()[name] for name in _COUNTERPART_NAMES}


@functools.cache
def _counterpart_by_code() -> dict:
    # The code objects of SciPy's functions, so that a conversion error raised inside one
    # of them can name the counterpart to call instead. SciPy's batching decorator shares
    # one wrapper among many functions: its frame holds the wrapped function as ``f``.
    return {
        getattr(inspect.unwrap(f), "__code__", None): ours
        for f, ours in scipy_counterparts().items()
    }


def scipy_counterpart(frame):
    """The differentiable counterpart of the ``scipy.linalg`` function running in ``frame``
    or one of its callers, as ``"sensitivities.linalg.solve_triangular"``, or None.

    For the error a node raises when SciPy converts it to an ndarray: called from
    ``__array__`` with ``sys._getframe(1)``.
    """
    by_code = _counterpart_by_code()
    while frame is not None:
        ours = by_code.get(frame.f_code)
        if ours is None and frame.f_code.co_name == "wrapper":
            ours = by_code.get(getattr(frame.f_locals.get("f"), "__code__", None))
        if ours is not None:
            return f"{__name__}.{ours.__name__}"
        frame = frame.f_back
    return None


# -- polynomials as coefficient arrays (highest power first), written with the rules above ----
#
# NumPy's own convert with np.asarray (and return poly1d for poly1d input, which a node is
# not); these take and return arrays, as NumPy does for arrays.


@primitive
def _values(x):
    """``x`` itself; marked non-differentiable, so on a node it gives the plain values."""
    return x


nondifferentiable(_values)


@implementation(np.polymul)
def _polymul(a1, a2):
    return np.convolve(np.atleast_1d(a1), np.atleast_1d(a2))


@implementation(np.polyder)
def _polyder(p, m=1):
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = np.atleast_1d(p)
    for _ in range(m):
        n = np.shape(p)[0] - 1
        p = p[:-1] * np.arange(n, 0, -1) if n > 0 else np.zeros_like(p[:1])
    return p


@implementation(np.polyint)
def _polyint(p, m=1, k=None):
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = [0.0] * m if k is None else list(np.atleast_1d(k)) if np.ndim(k) else [k] * m
    if len(k) < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    p = np.atleast_1d(p)
    for i in range(m):
        c = np.reshape(k[i], (1,))
        p = np.concatenate([p / np.arange(np.shape(p)[0], 0, -1), c * np.ones_like(p[:1])])
    return p


@implementation(np.vander)
def _vander(x, N=None, increasing=False):
    powers = np.arange(len(x) if N is None else N)
    if not increasing:
        powers = powers[::-1]
    return np.power(np.reshape(x, (-1, 1)), powers)


@implementation(np.roots)
def _roots(p):
    # the eigenvalues of the companion matrix, as NumPy's, less leading and trailing zeros
    # (whose count is read from the values: piecewise constant)
    p = np.atleast_1d(p)
    nonzero = np.flatnonzero(np.not_equal(p, 0))
    if len(nonzero) == 0:
        return np.zeros_like(p[:0])
    trailing = len(p) - int(nonzero[-1]) - 1
    p = p[int(nonzero[0]) : int(nonzero[-1]) + 1]
    n = np.shape(p)[0]
    if n > 1:
        below = np.eye(n - 2, n - 1, dtype=float) if n > 2 else np.zeros((0, 1))
        top = np.reshape(-p[1:] / p[0], (1, -1))
        roots = np.linalg.eigvals(np.concatenate([top, below * np.ones_like(top)], axis=0))
    else:
        roots = np.zeros_like(p[:0])
    if trailing:
        roots = np.concatenate([roots, np.zeros_like(roots, shape=(trailing,))])
    return roots


@implementation(np.poly)
def _poly(seq_of_zeros):
    # NumPy's: the characteristic polynomial of a square matrix, or the product of (x - r)
    # over the roots (real where the complex roots come in conjugate pairs)
    seq = seq_of_zeros
    if np.ndim(seq) == 2 and np.shape(seq)[0] == np.shape(seq)[1] and np.shape(seq)[0] != 0:
        seq = np.linalg.eigvals(seq)
    elif np.ndim(seq) != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    a = np.ones_like(seq[:1])
    for k in range(np.shape(seq)[0]):
        a = np.convolve(a, np.concatenate([np.ones_like(seq[:1]), -seq[k : k + 1]]))
    if np.iscomplexobj(a):
        roots = _values(seq)
        pos = np.sort(roots[roots.imag > 0])
        neg = np.conjugate(np.sort(roots[roots.imag < 0]))
        if len(pos) == len(neg) and np.all(pos == neg):
            a = np.real(a)
    return a


@implementation(np.polydiv)
def _polydiv(u, v):
    # NumPy's long division, each step a new remainder rather than one written in place;
    # the leading zeros of the remainder are trimmed by their values (a constant choice)
    u = np.atleast_1d(u) + 0.0
    v = np.atleast_1d(v) + 0.0
    m, n = np.shape(u)[0] - 1, np.shape(v)[0] - 1
    scale = 1.0 / v[0]
    r = u.astype(np.result_type(_values(u[0]), _values(v[0])))
    q = []
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        shifted = np.concatenate([np.zeros_like(r[:k]), d * v, np.zeros_like(r[k + n + 1 :])])
        r = r - shifted
    q = np.stack(q) if q else np.zeros_like(r[:1])
    while np.allclose(_values(r[0]), 0, rtol=1e-14) and np.shape(r)[-1] > 1:
        r = r[1:]
    return q, r
