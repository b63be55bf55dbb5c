"""``scipy.spatial``: ``distance`` holds the differentiable counterparts of ``pdist``,
``cdist`` and ``squareform``; every other name is SciPy's own.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy import spatial
>>> grad(lambda X: np.sum(spatial.distance.cdist(X, np.zeros((1, 2)))))(np.array([[3.0, 4.0]]))
(array([[0.6, 0.8]]),)
"""

from .._forward import forward
from . import distance

__all__ = ["distance"]

__getattr__ = forward("scipy.spatial")
