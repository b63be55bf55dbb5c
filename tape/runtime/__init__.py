"""The runtime: what ``tape`` does to the process beyond its tapes, in one layer.

A transform enters it through one pass context, ``passes.run_pass(convert, body,
*args)``; nothing else here is called by the transforms. While a pass runs:

- ``warning_sites``: NumPy's floating-point warnings are told at the user's line, through
  the context's NumPy error state (a context variable, set and reset by the pass);
- ``conversions`` (forward passes): ``np.asarray(node)`` and NumPy's other conversions
  inside library code are recorded in the thread that runs the pass. Their wrappers are
  installed once and kept: outside a recording thread they call NumPy's own function.
  Other packages add wrappers there (``tape.scipy`` sends SciPy's functions with a
  counterpart to it);
- ``passes``: the collector runs at a slower pace (never off).

The engine (``tape.core``) never imports this layer; it lends it two hooks through
``tape.core.recording.extend`` (``stacked``, ``is_converting``). No signal handler and no
name is ever changed and put back, and what a pass changes is undone where no signal
can land.
"""

from .conversions import is_converting, library_code, on_scan, wrap, wrap_method
from .passes import run_pass

__all__ = ["run_pass", "library_code", "is_converting", "wrap", "wrap_method", "on_scan"]
