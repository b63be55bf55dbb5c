"""tape: reverse-mode automatic differentiation of plain NumPy code on a Wengert list.

>>> import numpy as np
>>> from tape import grad
>>> grad(lambda x: np.sum(np.sin(x) ** 2))(np.array([0.0, np.pi / 4]))
(array([0., 1.]),)
"""

from sensitivities import (
    at,
    implementation,
    nondifferentiable,
    preprocess,
    primitive,
    sensitivity,
)

from . import array_api  # noqa: F401  (node.__array_namespace__)
from .checking import check_grad
from .compiled import CompiledGrad, TapeMismatchError, compile_grad
from .conversions import library_code
from .debugging import debug, detect_anomaly, recorded_at
from .errors import AnomalyError, MissingRuleError, MutationError, NodeConversionError
from .functional import grad, value_and_grad
from .gradients import Gradients
from .node import Node
from .pushforward import pushforward
from .records import Branch, Leaf, Tape
from .reverse import ReverseTape, propagate, reverse_tape
from .transforms import checkpoint, hessian, hvp, jacobian, jvp, stop_gradient, vjp
from .trees import ravel, tree_flatten, tree_map, tree_unflatten
from .vmapping import vmap

__version__ = "0.1.0"

__all__ = [
    "Tape",
    "Node",
    "Leaf",
    "Branch",
    "ReverseTape",
    "reverse_tape",
    "propagate",
    "grad",
    "value_and_grad",
    "Gradients",
    "sensitivity",
    "preprocess",
    "primitive",
    "nondifferentiable",
    "implementation",
    "NodeConversionError",
    "MissingRuleError",
    "compile_grad",
    "CompiledGrad",
    "TapeMismatchError",
    "MutationError",
    "AnomalyError",
    "at",
    "debug",
    "detect_anomaly",
    "recorded_at",
    "jvp",
    "vjp",
    "jacobian",
    "hessian",
    "hvp",
    "checkpoint",
    "stop_gradient",
    "check_grad",
    "tree_map",
    "tree_flatten",
    "tree_unflatten",
    "ravel",
    "pushforward",
    "vmap",
    "library_code",
]
