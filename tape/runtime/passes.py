"""The one pass context: what a transform asks of the process while its passes run.

Every transform runs its forward and reverse passes through ``run_pass(convert, body,
*args)``, which gives the body two things and takes them back when it returns or
raises, Ctrl-C and any signal handler's exception included:

- NumPy's floating-point warnings told at the user's line (``warning_sites``): the
  context's NumPy error state logs its ``"warn"`` modes to a teller while the body runs;
- with ``convert=True`` (a forward pass), conversions of nodes inside library code
  recorded in this thread (``conversions``; wrappers installed once, stateless).

Nothing else in the process is touched: no signal handler, no collector setting, no name
put back. The two changes are single operations: the thread's count in
``conversions.converting_threads`` and NumPy's context variable. Each is made inside the
``try``, and the ``finally`` undoes them with a store and then its first call, so a signal
that lands at any instruction finds the state either unchanged or undone: Python runs a
signal's handler only after an instruction that calls (or at a function's start), and
the undoing call completes before it can.
A setting the body makes (``np.seterr`` inside ``f``) stays, as it does without tape.
"""

from __future__ import annotations

from typing import Any, Callable

from .conversions import _ident, converting_threads, explain, forget_sites, install
from .warning_sites import extobj, ours, theirs

__all__ = ["run_pass"]


def run_pass(convert: bool, body: Callable, /, *args: Any, **kwargs: Any) -> Any:
    """``body(*args, **kwargs)`` as a pass: NumPy's warnings at the user's line and, with
    ``convert`` (a forward pass), library conversions of nodes recorded in this thread.
    Nests: an inner pass inside an outer one changes only what the outer did not.

    >>> import numpy as np
    >>> with np.errstate(divide="warn"):
    ...     run_pass(False, np.geterr)["divide"], np.geterr()["divide"]
    ('log', 'warn')
    """
    ident = _ident()
    open_here = converting_threads.get(ident, 0)
    if convert:
        if open_here == 0:
            install()  # wraps the names of modules loaded since the last pass
            forget_sites()
    outer = extobj.get() if extobj is not None else None
    inner = ours(outer) if extobj is not None else None
    try:
        if convert:
            converting_threads[ident] = open_here + 1
        if inner is not None:
            extobj.set(inner)
        return body(*args, **kwargs)
    except BaseException as error:
        if convert and open_here == 0:
            explained = explain(error)
            if explained is not None:
                raise explained from error
        raise
    finally:
        # the first undoing a store and the second the first call: a signal cannot land
        # before either (Python runs a handler only after an instruction that calls)
        converting_threads[ident] = open_here
        if inner is not None:
            _keep_their_setting(extobj.set(outer).old_value, inner)
        if not open_here:
            converting_threads.pop(ident, None)  # (a 0 left by a signal here is harmless)


def _keep_their_setting(inside: Any, inner: Any) -> None:
    """The body set NumPy's error state itself (``np.seterr``): keep it, in the program's
    own terms, as plain NumPy would."""
    if inside is not inner:
        extobj.set(theirs(inside))

