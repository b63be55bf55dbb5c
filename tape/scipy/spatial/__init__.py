"""``scipy.spatial``: ``distance`` holds the differentiable counterparts; every other name
is SciPy's own."""

from . import distance
from .._forward import forward

__all__ = ["distance"]

__getattr__ = forward("scipy.spatial")
