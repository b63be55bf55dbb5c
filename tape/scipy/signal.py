"""``scipy.signal``, differentiable: ``convolve correlate fftconvolve`` (every ``mode``),
``convolve2d correlate2d`` (``boundary='fill'``, ``fillvalue=0``) and ``lfilter`` (in
``b``, ``a`` and ``x``, without ``zi``). Every other name is SciPy's own, for plain
values.

>>> import numpy as np
>>> from tape.scipy import signal
>>> from tape import grad
>>> grad(lambda x: np.sum(signal.lfilter([1.0], [1.0, -0.5], x)))(np.ones(3))
(array([1.75, 1.5 , 1.  ]),)
"""

from sensitivities.scipy.signal import (
    convolve,
    convolve2d,
    correlate,
    correlate2d,
    fftconvolve,
    lfilter,
)

from ._forward import forward, listing

__all__ = ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d", "lfilter"]

__getattr__ = forward("scipy.signal")
__dir__ = listing("scipy.signal", __all__)
