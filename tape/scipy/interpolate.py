"""``scipy.interpolate``, differentiable: ``CubicSpline``, ``PPoly``, ``BSpline``,
``make_interp_spline`` and ``interp1d`` have SciPy's names, arguments, defaults and
values (they are subclasses of SciPy's classes), and are differentiable in the data ``y``
they are built from, in the points they are evaluated at (``nu`` derivatives too), and
in ``integrate``'s limits. Every other name is SciPy's own, for plain values.

Construction is affine in ``y`` for fixed positions ``x``, so the coefficients are
SciPy's own construction applied to the data's columns: every boundary condition
(``not-a-knot``, ``natural``, ``clamped``, ``periodic``, derivative values) and
``extrapolate`` mode is SciPy's. The positions ``x``, knots ``t`` and boundary values of
a constructed spline must be plain (a node there is a ``TypeError``); a ``PPoly`` or
``BSpline`` made from coefficients is differentiable in its breakpoints and knots too.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy import interpolate
>>> x = np.linspace(0.0, 1.0, 9)
>>> def area(y):  # the integral of the spline through (x, y)
...     return interpolate.CubicSpline(x, y).integrate(0.0, 1.0)
>>> w = grad(area)(x**3)[0]  # the quadrature weights the spline implies
>>> round(float(w @ x**3), 12)  # exact for a cubic: 1/4
0.25
"""

from sensitivities.scipy.interpolate import (  # noqa: F401  (METHODS, meets_node: the redirect's)
    METHODS,
    BSpline,
    CubicSpline,
    PPoly,
    interp1d,
    make_interp_spline,
    meets_node,
)

from ._forward import forward, listing

__all__ = ["CubicSpline", "PPoly", "BSpline", "make_interp_spline", "interp1d"]

__getattr__ = forward("scipy.interpolate")
__dir__ = listing("scipy.interpolate", __all__)
