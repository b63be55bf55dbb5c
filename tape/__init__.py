"""tape: reverse-mode automatic differentiation of plain NumPy code on a Wengert list.

>>> import numpy as np
>>> from tape import grad
>>> grad(lambda x: np.sum(np.sin(x) ** 2))(np.array([0.0, np.pi / 4]))
(array([0., 1.]),)

The package is three layers over the rules, each importing only the layers below it:

- ``sensitivities`` (a package of its own): the rules, plain NumPy, and their registry.
  It never imports ``tape``.
- ``tape.core``: the engine. Tapes and records (``records``), how a call becomes a
  Branch (``recording``), the reverse pass (``reverse``), ``Node``'s operator surface,
  in-place writes and views, the checks and errors, conversions inside library code,
  trees. It imports ``sensitivities``' public names and other core modules only: no
  transform and no tool, not even inside a function. Where a layer above has to plug
  in, core offers a documented hook that the layer above fills in: ``Tape.add`` and
  ``Tape.plain`` (overridden by a transform's tape), the context's observer
  (``core.observing``), ``core.records.PICTURES`` (filled by ``tools.graph``) and
  the runtime's ``wrap`` (used by ``tape.scipy.redirect``).
- ``tape.transforms``: what turns a function into another one. ``grad`` and
  ``value_and_grad`` (``grad``), ``vjp``/``jvp``/``jacobian``/``hessian``/``hvp``
  (``derivatives``), ``checkpoint``/``stop_gradient`` (``checkpoint``), forward mode
  (``forward``, ``pushforward``), ``vmap`` (``vmap``) and compiled replay
  (``compiled``). A transform imports core, the rules, and other transforms' public
  names (no name with a leading underscore); never a tool.
- ``tape.tools``: what helps a user look at or check a program: ``check_grad``
  (``checking``), the debug modes (``debugging``), pictures of a tape (``graph``). A
  tool may import anything public.

``tape.scipy`` (SciPy's differentiable counterparts) stands beside the tools and uses
the public ``tape`` API only. A new transform goes in ``tape/transforms/`` (see
docs/guide/how-it-works.md); no module is over about 600 lines of code unless a comment
names the measured speed that it buys. ``tests/tape/test_layers.py`` checks these rules.
"""

from sensitivities import (
    at,
    implementation,
    nondifferentiable,
    preprocess,
    primitive,
    sensitivity,
)

from .core.errors import AnomalyError, MissingRuleError, MutationError, NodeConversionError
from .core.gradients import Gradients
from .core.node import Node
from .core.records import Branch, Leaf, Tape
from .core.reverse import ReverseTape, reverse_tape
from .core.trees import ravel, tree_flatten, tree_map, tree_unflatten
from .runtime import library_code
from .scipy import redirect  # noqa: F401  (SciPy's functions meeting nodes go to tape.scipy)
from .tools import graph  # noqa: F401  (fills in Tape.to_dot, Tape.draw, a notebook's picture)
from .tools.checking import check_grad
from .tools.debugging import debug, detect_anomaly, recorded_at
from .transforms.checkpoint import checkpoint, stop_gradient
from .transforms.compiled import CompiledGrad, TapeMismatchError, compile_grad
from .transforms.derivatives import hessian, hvp, jacobian, jvp, vjp
from .transforms.grad import grad, propagate, value_and_grad
from .transforms.pushforward import pushforward
from .transforms.vmap import vmap

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
