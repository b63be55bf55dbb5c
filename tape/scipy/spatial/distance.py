"""``scipy.spatial.distance``, differentiable: ``pdist`` and ``cdist`` (metrics
``sqeuclidean euclidean cityblock chebyshev minkowski seuclidean cosine correlation
canberra braycurtis mahalanobis``, their weights, and a Python callable) and
``squareform``. Every other name is SciPy's own, for plain values.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy.spatial import distance
>>> X = np.array([[0.0, 0.0], [3.0, 4.0]])
>>> grad(lambda X: np.sum(distance.pdist(X)))(X)[0]
array([[-0.6, -0.8],
       [ 0.6,  0.8]])
"""

from sensitivities.scipy.spatial import cdist, pdist, squareform

from .._forward import forward

__all__ = ["pdist", "cdist", "squareform"]

__getattr__ = forward("scipy.spatial.distance")
