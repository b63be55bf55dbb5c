"""``scipy.linalg.blas``, differentiable: the BLAS routines library code calls on arrays
(``dgemm``, ``dsyrk``, ``dgemv``, ``ddot``, ``dsymm``, ... for each precision SciPy
has; ``__all__`` lists them) as NumPy expressions with SciPy's meaning, arguments and
defaults, where a call meets a node; SciPy's own routines on plain values. Every other
name is SciPy's own.

>>> import numpy as np
>>> from tape import grad
>>> from tape.scipy.linalg import blas
>>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
>>> grad(lambda a: blas.dsyrk(1.0, a)[0, 1])(a)[0]  # the upper triangle of a a': a0 . a1
array([[3., 4.],
       [1., 2.]])
"""

from sensitivities.scipy import blas as _ours

from .._forward import forward, listing

__all__ = list(_ours.__all__)
globals().update({name: getattr(_ours, name) for name in __all__})

__getattr__ = forward("scipy.linalg.blas")
__dir__ = listing("scipy.linalg.blas", __all__)
