"""``scipy.spatial.distance``'s ``pdist``, ``cdist`` and ``squareform`` as NumPy code, so
that every step is recorded: pairwise differences, then the metric's reduction along the
last axis. The metrics are those scikit-learn's kernels, t-SNE and clustering use."""

from __future__ import annotations

import numpy as np

__all__ = ["pdist", "cdist", "squareform", "METRICS"]


def _minkowski(d, p=2.0, w=None):
    a = np.abs(d) ** p
    return np.sum(a if w is None else w * a, axis=-1) ** (1.0 / p)


def _correlation(u, v, w=None):
    u = u - np.mean(u, axis=-1, keepdims=True)
    v = v - np.mean(v, axis=-1, keepdims=True)
    return _cosine(u, v, w)


def _cosine(u, v, w=None):
    w = 1.0 if w is None else w
    uv = np.sum(w * u * v, axis=-1)
    return 1.0 - uv / np.sqrt(np.sum(w * u * u, axis=-1) * np.sum(w * v * v, axis=-1))


# metric(u, v, **kwargs) over the last axis of broadcast pairs of rows
METRICS = {
    "sqeuclidean": lambda u, v, w=None: np.sum((1.0 if w is None else w) * (u - v) ** 2, axis=-1),
    "euclidean": lambda u, v, w=None: np.sqrt(
        np.sum((1.0 if w is None else w) * (u - v) ** 2, axis=-1)
    ),
    "cityblock": lambda u, v, w=None: np.sum((1.0 if w is None else w) * np.abs(u - v), axis=-1),
    "chebyshev": lambda u, v: np.max(np.abs(u - v), axis=-1),
    "minkowski": lambda u, v, p=2.0, w=None: _minkowski(u - v, p, w),
    "seuclidean": lambda u, v, V=None: np.sqrt(np.sum((u - v) ** 2 / V, axis=-1)),
    "cosine": _cosine,
    "correlation": _correlation,
    "canberra": lambda u, v, w=None: np.sum(
        (1.0 if w is None else w)
        * np.abs(u - v)
        / np.where(np.abs(u) + np.abs(v) == 0, 1.0, np.abs(u) + np.abs(v)),
        axis=-1,
    ),
    "braycurtis": lambda u, v, w=None: np.sum((1.0 if w is None else w) * np.abs(u - v), axis=-1)
    / np.sum((1.0 if w is None else w) * np.abs(u + v), axis=-1),
    "mahalanobis": lambda u, v, VI=None: np.sqrt(
        np.sum(((u - v) @ VI) * (u - v), axis=-1)
    ),
}
_ALIASES = {"sqe": "sqeuclidean", "euclid": "euclidean", "eu": "euclidean", "e": "euclidean",
            "manhattan": "cityblock", "cblock": "cityblock", "cb": "cityblock", "c": "cityblock",
            "chebychev": "chebyshev", "cheby": "chebyshev", "cheb": "chebyshev", "ch": "chebyshev",
            "mi": "minkowski", "minkowsky": "minkowski", "pnorm": "minkowski", "cos": "cosine",
            "co": "correlation", "se": "seuclidean"}  # fmt: skip


def _metric(metric):
    if callable(metric):
        return None
    name = _ALIASES.get(str(metric).lower(), str(metric).lower())
    if name not in METRICS:
        raise ValueError(
            f"tape's pdist and cdist differentiate the metrics {sorted(METRICS)}, not "
            f"{metric!r}; compute the distance with NumPy on the differences instead"
        )
    return METRICS[name]


def pdist(X, metric="euclidean", *, out=None, **kwargs):
    """``scipy.spatial.distance.pdist``: the condensed distances of the rows of ``X``."""
    if out is not None:
        raise TypeError("pdist(..., out=) of a node: use the returned distances")
    if np.ndim(X) != 2:
        raise ValueError("A 2-dimensional array must be passed.")
    n = np.shape(X)[0]
    i, j = np.triu_indices(n, 1)
    if callable(metric):
        return np.stack([metric(X[a], X[b]) for a, b in zip(i, j)]) if n > 1 else X[:0, 0]
    f = _metric(metric)
    kwargs = _with_defaults(metric, kwargs, X)
    return f(X[i], X[j], **kwargs)


def cdist(XA, XB, metric="euclidean", *, out=None, **kwargs):
    """``scipy.spatial.distance.cdist``: the distances between each row of ``XA`` and
    each row of ``XB``."""
    if out is not None:
        raise TypeError("cdist(..., out=) of a node: use the returned distances")
    if np.ndim(XA) != 2 or np.ndim(XB) != 2:
        raise ValueError("XA and XB must be 2-dimensional arrays.")
    if np.shape(XA)[1] != np.shape(XB)[1]:
        raise ValueError("XA and XB must have the same number of columns (i.e. feature dimension.)")
    if callable(metric):
        return np.stack([np.stack([metric(a, b) for b in XB]) for a in XA])
    f = _metric(metric)
    kwargs = _with_defaults(metric, kwargs, np.concatenate([XA, XB]))
    return f(XA[:, None, :], XB[None, :, :], **kwargs)


def _with_defaults(metric, kwargs, X):
    name = _ALIASES.get(str(metric).lower(), str(metric).lower())
    X = np.asarray(_plain(X))
    if name == "seuclidean" and kwargs.get("V") is None:
        kwargs = {**kwargs, "V": np.var(X, axis=0, ddof=1)}
    if name == "mahalanobis" and kwargs.get("VI") is None:
        kwargs = {**kwargs, "VI": np.linalg.inv(np.cov(X.T)).T}
    return kwargs


def _plain(X):
    from sensitivities.registry import value_of

    return value_of(X)


def squareform(X, force="no", checks=True):
    """``scipy.spatial.distance.squareform``: a condensed distance vector as the square
    matrix, or a square distance matrix as the condensed vector."""
    ndim = np.ndim(X)
    if ndim == 1 and force.lower() != "tovector" or force.lower() == "tomatrix":
        m = np.shape(X)[0]
        n = int(np.ceil(np.sqrt(m * 2)))
        if n * (n - 1) != m * 2:
            raise ValueError(
                "Incompatible vector size. It must be a binomial coefficient n choose 2 for "
                "some integer n >= 2."
            )
        # the matrix gathers from [0, v...]: position 0 on the diagonal
        index = np.zeros((n, n), dtype=np.intp)
        i, j = np.triu_indices(n, 1)
        index[i, j] = index[j, i] = np.arange(1, m + 1)
        return np.concatenate([np.zeros_like(X, shape=(1,)), X])[index]
    if ndim == 2:
        n = np.shape(X)[0]
        if np.shape(X)[1] != n:
            raise ValueError("The matrix argument must be square.")
        if checks:
            plain = np.asarray(_plain(X))
            if np.any(np.diag(plain) != 0):
                raise ValueError("The distance matrix array must have zeros along the diagonal.")
            if not np.allclose(plain, plain.T):
                raise ValueError("Distance matrix 'X' must be symmetric.")
        i, j = np.triu_indices(n, 1)
        return X[i, j]
    raise ValueError(
        "The first argument must be one or two dimensional array. "
        f"A {ndim}-dimensional array is not permitted"
    )
