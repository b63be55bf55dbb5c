"""``scipy.sparse``: SciPy's own for now, on plain values. Differentiable sparse
products and solves are yet to come."""

from ._forward import forward

__all__: list = []

__getattr__ = forward("scipy.sparse")
