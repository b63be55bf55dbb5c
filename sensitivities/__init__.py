"""The sensitivities (reverse-mode rules) of NumPy functions, one module per family,
and the registry they are kept in. Plain NumPy only: this package never imports ``tape``.
"""

from . import (  # noqa: F401
    elementwise,
    fft,
    linalg,
    numpy_extra,
    pushforwards,
    reductions,
    registry,
    shape,
    stats,
)
from .batching import batching_rule_of
from .checkpoint import checkpointed
from .reductions import broadcast_to, expand_reduced
from .registry import (
    function_name,
    implementation,
    lift,
    lookup,
    nondifferentiable,
    preprocess,
    primitive,
    registered_functions,
    sensitivity,
    value_of,
)
from .shape import astype, full_like_node, strided_view
from .update import at, set_at

# SciPy's special functions (ufuncs) and the counterparts of its other functions: imported
# once the program imports SciPy, so that importing tape does not
registry.defer("sensitivities.special", "sensitivities.scipy")

# What the engine (tape/) uses of this package: the registry's public names, the one unwrap
# (value_of), and the few array helpers it shares with the rules.
__all__ = [
    "sensitivity",
    "preprocess",
    "primitive",
    "nondifferentiable",
    "implementation",
    "lookup",
    "registered_functions",
    "value_of",
    "function_name",
    "astype",
    "full_like_node",
    "strided_view",
    "set_at",
    "broadcast_to",
    "expand_reduced",
    "lift",
    "at",
    "checkpointed",
    "batching_rule_of",
]
