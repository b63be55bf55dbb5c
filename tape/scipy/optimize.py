"""``scipy.optimize``: SciPy's own for now. Pass ``tape.value_and_grad(f)`` with
``jac=True`` to ``minimize``; derivatives of a solution with respect to the problem's
parameters (implicit differentiation) are yet to come."""

from ._forward import forward

__all__: list = []

__getattr__ = forward("scipy.optimize")
