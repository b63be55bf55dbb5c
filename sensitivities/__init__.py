"""The sensitivities (reverse-mode rules) of NumPy functions, one module per family,
and the registry they are kept in. Plain NumPy only: this package never imports ``tape``.
"""

from . import elementwise, linalg, reductions, shape, special  # noqa: F401  (registers the rules)
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
