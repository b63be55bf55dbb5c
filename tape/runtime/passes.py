"""The one pass context: what a transform asks of the process while its passes run.

Every transform runs its forward and reverse passes through ``run_pass(convert, body,
*args)``, which gives the body three things and takes them back when it returns or
raises, Ctrl-C and any signal handler's exception included:

- NumPy's floating-point warnings told at the user's line (``warning_sites``): the
  context's NumPy error state logs its ``"warn"`` modes to a teller while the body runs;
- with ``convert=True`` (a forward pass), conversions of nodes inside library code
  recorded in this thread (``conversions``; wrappers installed once, stateless);
- the cyclic garbage collector at a slower pace (a collection every 50,000 allocations
  instead of 700, never off): records form cycles with their tape, and at the usual pace
  the collector scans a long tape again and again for nothing (a third of the time per
  operation at 10^6 records, ``scripts/measure_robustness.py``).

Nothing else in the process is touched: no signal handler, and no name put back. The
changes are made inside the ``try``; the ``finally`` undoes them with a store and then
one call, ``list(restoring)``, whose C code runs every restore without returning to
Python: Python runs a signal's handler only after an instruction that calls (or at a
function's start), so no handler can land before the state is whole again. A setting the
body makes itself (``np.seterr``, ``gc.set_threshold``) stays, as it does without tape.
The collector is slowed by the first pass in the process and put back by it; a pass that
finds it slowed already (another thread's) leaves it alone, so concurrent passes can only
end it early, never leave it slowed.
"""

from __future__ import annotations

import gc
import os
from functools import partial
from operator import methodcaller
from typing import Any, Callable

from .conversions import _ident, converting_threads, explain, forget_sites, install
from .warning_sites import extobj, ours, theirs

__all__ = ["run_pass", "DURING_A_PASS"]

DURING_A_PASS = (50_000, 20, 10)  # the collector's thresholds while a pass runs
_call = methodcaller("__call__")  # (C code calling C code: no handler runs in between)
_program_pace = gc.get_threshold()  # what the last slowing pass found: a forked child's


def run_pass(convert: bool, body: Callable, /, *args: Any, **kwargs: Any) -> Any:
    """``body(*args, **kwargs)`` as a pass: NumPy's warnings at the user's line, the
    collector at a slower pace and, with ``convert`` (a forward pass), library conversions
    of nodes recorded in this thread. Nests: an inner pass inside an outer one changes only
    what the outer did not.

    >>> import gc
    >>> import numpy as np
    >>> with np.errstate(divide="warn"):
    ...     run_pass(False, np.geterr)["divide"], np.geterr()["divide"]
    ('log', 'warn')
    >>> run_pass(False, gc.get_threshold) == DURING_A_PASS != gc.get_threshold()
    True
    """
    global _program_pace
    ident = _ident()
    open_here = converting_threads.get(ident, 0)
    if convert and open_here == 0:
        install()  # wraps the names of modules loaded since the last pass
        forget_sites()
    outer = extobj.get() if extobj is not None else None
    pace = gc.get_threshold()
    try:
        inner, restores = _PLANS[pace, outer]
    except KeyError:
        inner, restores = _plan(pace, outer)
    slow = pace != DURING_A_PASS
    if slow:
        _program_pace = pace
    restoring = map(_call, restores)
    try:
        converting_threads[ident] = open_here + convert
        if slow:
            gc.set_threshold(*DURING_A_PASS)
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
        # a store, then the one call that restores the rest: no signal lands before them
        converting_threads[ident] = open_here
        restored = list(restoring)
        if not open_here:
            converting_threads.pop(ident, None)  # (a 0 left by a signal here is harmless)
        if restored and (
            (slow and restored[0] != DURING_A_PASS)
            or (inner is not None and restored[-1].old_value is not inner)
        ):
            _keep_their_settings(restored, slow, inner)


_PLANS: dict = {}  # (pace, error state) -> (our error state or None, the restores)


def _plan(pace: tuple, outer: Any) -> tuple:
    """What a pass that finds ``pace`` and NumPy's error state ``outer`` sets, and the C
    callables that put them back, run in one C call: [what f left, a restore, ...]."""
    inner = ours(outer) if extobj is not None else None
    restores: list = []
    if pace != DURING_A_PASS:
        restores += (gc.get_threshold, partial(gc.set_threshold, *pace))
    if inner is not None:
        restores.append(partial(extobj.set, outer))
    if len(_PLANS) > 64:
        _PLANS.clear()
    _PLANS[pace, outer] = inner, tuple(restores)
    return _PLANS[pace, outer]


def _keep_their_settings(restored: list, slow: bool, inner: Any) -> None:
    """Where the body made a setting of its own (``gc.set_threshold``, ``np.seterr``),
    keep it, in the program's own terms, as the program run without tape would."""
    if slow and restored[0] != DURING_A_PASS:
        gc.set_threshold(*restored[0])
    if inner is not None and restored[-1].old_value is not inner:
        extobj.set(theirs(restored[-1].old_value))


def _in_a_forked_child() -> None:
    # A child of fork has one thread: another's entry would be taken by a new thread
    # that got its id, and the forking thread's pass is not the child's to finish; nor
    # are the pass's error state and collector pace (a pool's worker forked inside f
    # lives on in them).
    converting_threads.clear()
    if extobj is not None:
        extobj.set(theirs(extobj.get()))
    if gc.get_threshold() == DURING_A_PASS:
        gc.set_threshold(*_program_pace)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_a_forked_child)
