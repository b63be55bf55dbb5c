"""``scipy.spatial``: ``distance`` holds the differentiable counterparts; every other name
is SciPy's own."""

from .._forward import forward
from . import distance

__all__ = ["distance"]

__getattr__ = forward("scipy.spatial")
