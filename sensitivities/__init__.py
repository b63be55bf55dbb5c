"""The sensitivities (reverse-mode rules) of NumPy functions, one module per family,
and the registry they are kept in. Plain NumPy only: this package never imports ``tape``.
"""

from . import elementwise, fft, linalg, reductions, shape, special, stats  # noqa: F401  (registers)
from . import scipy as scipy  # the rules of SciPy's non-ufunc functions
from .registry import (
    implementation,
    lookup,
    nondifferentiable,
    preprocess,
    primitive,
    registered_functions,
    sensitivity,
)

__all__ = [
    "sensitivity",
    "preprocess",
    "primitive",
    "nondifferentiable",
    "implementation",
    "lookup",
    "registered_functions",
]
