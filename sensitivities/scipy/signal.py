"""Differentiable counterparts of ``scipy.signal``'s convolutions and linear filter.

``convolve`` and ``lfilter`` are primitives, each one call of SciPy's own code, with
rules that are again convolutions and filters:

- the adjoint of each factor of a convolution is the convolution of the output's
  adjoint (set into the ``'full'`` result, whichever ``mode`` was asked) with the other
  factor flipped, in ``'valid'`` mode;
- ``lfilter(b, a, x)`` solves ``sum_j a[j] y[n - j] = sum_k b[k] x[n - k]``; with ``u``
  the adjoint ``ybar`` filtered by ``1 / A`` backwards in time, ``xbar`` is ``ybar``
  filtered by ``B / A`` backwards, ``bbar[k] = sum_n u[n] x[n - k]`` and
  ``abar[j] = -sum_n u[n] y[n - j]``.

``correlate`` is ``convolve`` with the second factor flipped (and conjugated),
``fftconvolve`` is ``convolve(..., method='fft')``, and ``convolve2d``/``correlate2d``
(with ``boundary='fill'`` and ``fillvalue=0``) are the 2-D cases of the two.

>>> import numpy as np
>>> from sensitivities.scipy.signal import convolve
>>> from tape import grad
>>> grad(lambda k: np.sum(convolve(np.array([1.0, 2.0, 3.0]), k, mode="same")))(np.ones(2))
(array([6., 3.]),)
"""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np

from ..registry import is_node, preprocess, primitive, sensitivity

# scipy.signal takes a second to import: it is imported at the first call, not with tape
_HAS_SCIPY = importlib.util.find_spec("scipy") is not None


def _sp():
    return importlib.import_module("scipy.signal")

__all__ = ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d", "lfilter"]


if _HAS_SCIPY:

    @primitive
    def convolve(in1, in2, mode="full", method="auto"):
        """``scipy.signal.convolve(in1, in2, mode='full', method='auto')``, differentiable
        in both inputs."""
        return _sp().convolve(in1, in2, mode=mode, method=method)

    def _as_full(ybar, in1, in2):
        """``ybar`` set into the ``'full'`` result: SciPy centres ``'same'`` and
        ``'valid'`` results in it."""
        full = [a + b - 1 for a, b in zip(np.shape(in1), np.shape(in2))]
        widths = []
        for size, out in zip(full, np.shape(ybar)):
            start = (size - out) // 2
            widths.append((start, size - out - start))
        return np.pad(ybar, widths) if any(w != (0, 0) for w in widths) else ybar

    def _convolve_rule(argnum):
        def rule(y, ybar, in1, in2, mode="full", method="auto"):
            other = in2 if argnum == 0 else in1
            return convolve(_as_full(ybar, in1, in2), np.flip(other), "valid", method)

        return rule

    sensitivity(convolve, 0)(_convolve_rule(0))
    sensitivity(convolve, 1)(_convolve_rule(1))

    def correlate(in1, in2, mode="full", method="auto"):
        """``scipy.signal.correlate(in1, in2, mode='full', method='auto')``,
        differentiable in both inputs."""
        if mode == "valid" and _swapped(in1, in2):
            # SciPy correlates the larger with the smaller, then reverses
            return np.flip(np.conjugate(convolve(in2, np.flip(np.conjugate(in1)), mode, method)))
        return convolve(in1, np.flip(np.conjugate(in2)), mode, method)

    def _swapped(in1, in2):
        s1, s2 = np.shape(in1), np.shape(in2)
        return all(b >= a for a, b in zip(s1, s2)) and s1 != s2

    def fftconvolve(in1, in2, mode="full", axes=None):
        """``scipy.signal.fftconvolve(in1, in2, mode='full')``, differentiable in both
        inputs (``axes`` other than all of them is not supported)."""
        if axes is not None and sorted(np.atleast_1d(axes) % max(np.ndim(in1), 1)) != list(
            range(np.ndim(in1))
        ):
            raise NotImplementedError("fftconvolve is differentiable here over all axes")
        return convolve(in1, in2, mode, "fft")

    def _two_d(name, in1, in2, boundary, fillvalue):
        if np.ndim(in1) != 2 or np.ndim(in2) != 2:
            raise ValueError(f"{name} inputs must both be 2-D arrays")
        if boundary not in ("fill", "pad") or fillvalue != 0:
            raise NotImplementedError(
                f"{name} is differentiable here with boundary='fill' and fillvalue=0"
            )

    def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
        """``scipy.signal.convolve2d`` with ``boundary='fill'`` and ``fillvalue=0``,
        differentiable in both inputs."""
        _two_d("convolve2d", in1, in2, boundary, fillvalue)
        return convolve(in1, in2, mode, "direct")

    def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
        """``scipy.signal.correlate2d`` with ``boundary='fill'`` and ``fillvalue=0``,
        differentiable in both inputs."""
        _two_d("correlate2d", in1, in2, boundary, fillvalue)
        if mode != "same":
            return correlate(in1, in2, mode, "direct")
        # correlate2d centres its 'same' result half a sample later than correlate does
        full = correlate(in1, in2, "full", "direct")
        start = [(f - s + 1) // 2 for f, s in zip(np.shape(full), np.shape(in1))]
        return full[tuple(slice(b, b + s) for b, s in zip(start, np.shape(in1)))]

    # -- the linear filter ----------------------------------------------------------------

    @primitive
    def _lfilter(b, a, x, axis):
        return _sp().lfilter(b, a, x, axis=axis)

    _lfilter.__name__ = _lfilter.__qualname__ = "lfilter"

    def lfilter(b, a, x, axis=-1, zi=None):
        """``scipy.signal.lfilter(b, a, x, axis=-1, zi=None)``, differentiable in ``b``,
        ``a`` and ``x`` (without initial conditions ``zi``: with them SciPy returns the
        final state too, and only plain arrays are taken)."""
        if zi is not None:
            if any(is_node(v) for v in (b, a, x, zi)):
                raise NotImplementedError("lfilter is differentiable here without zi")
            return _sp().lfilter(b, a, x, axis=axis, zi=zi)
        return _lfilter(b, a, x, axis)

    def _backwards(b, a, signal, axis):
        return np.flip(_lfilter(b, a, np.flip(signal, axis), axis), axis)

    @preprocess(_lfilter)
    def _(y, ybar, b, a, x, axis):
        # u = (1/A)' ybar: the all-pole filter run backwards in time
        return _backwards(np.ones_like(a, shape=(1,)), a, ybar, axis)

    def _lags(u, signal, count, axis):
        """``[sum_n u[n] signal[n - k] for k < count]``, summed over every other axis."""
        u, signal = np.moveaxis(u, axis, -1), np.moveaxis(signal, axis, -1)
        n = np.shape(u)[-1]
        lags = [np.sum(u[..., k:] * signal[..., : n - k]) for k in range(min(count, n))]
        zero = 0.0 * np.sum(u)  # the lags beyond the signal's length
        return np.stack(lags + [zero] * (count - len(lags)))

    sensitivity(_lfilter, 0)(
        lambda y, ybar, b, a, x, axis, pre: _lags(pre, x * np.ones_like(y), np.shape(b)[0], axis)
    )
    sensitivity(_lfilter, 1)(
        lambda y, ybar, b, a, x, axis, pre: -_lags(pre, y, np.shape(a)[0], axis)
    )
    sensitivity(_lfilter, 2)(lambda y, ybar, b, a, x, axis, pre: _backwards(b, a, ybar, axis))
