"""``scipy.integrate``: SciPy's own for now, on plain values. Differentiable counterparts
(quadrature and ODE solutions differentiated through their adjoint equations) are yet
to come; ``np.trapezoid`` is differentiable already."""

from ._forward import forward

__all__: list = []

__getattr__ = forward("scipy.integrate")
