"""Sensitivities of the discrete Fourier transforms in ``numpy.fft``, and the convention
for complex numbers that every rule follows.

Complex numbers: JAX's convention
---------------------------------
For a real-valued ``f`` of a complex argument ``z = x + iy``, ``grad(f)(z)`` is

    df/dx - i df/dy,

the convention of JAX's autodiff cookbook (``grad(lambda z: z.real**2 + z.imag**2)(3+4j)``
is ``6-8j``). It is the *conjugate* of the direction of steepest ascent: a
gradient-descent step is ``z - lr * np.conj(g)``. Inside the reverse pass this means that
the adjoint ``zbar`` of every complex intermediate is the one for which a real loss
changes by ``Re(zbar * dz)``, with no conjugate. Hence:

- a holomorphic function's rule is its real rule unchanged, ``ybar * f'(z)`` (``multiply``
  stays ``ybar * b``);
- a complex-linear map's rule is its transpose, not its conjugate transpose;
- ``conjugate``, ``real``, ``imag``, ``absolute`` and ``angle`` have rules of their own;
- a function with real inputs that passes through complex intermediates gets the real
  gradient an all-real implementation would give, and a complex input's gradient keeps
  its complex dtype.

The transforms
--------------
The DFT matrix is symmetric, so the rule of ``fft`` is ``fft`` and the rule of ``ifft``
is ``ifft``, with the same ``norm``; where ``n`` or ``s`` cut or zero-padded the input,
the adjoint is cut or zero-padded back. ``rfft`` keeps half of ``fft``'s output for real
input: its rule pads the adjoint with zeros to the full length, transforms it and keeps
the real part. ``irfft`` reads the half spectrum as a Hermitian one, counting each
coefficient but the first (and, for even ``n``, the last) twice and ignoring those two's
imaginary parts; its rule weighs the conjugated ``rfft`` of the adjoint by those counts.
The n-dimensional transforms compose these axis by axis, and ``hfft``/``ihfft`` are
``irfft``/``rfft`` of conjugates.
"""

import numpy as np

from .registry import sensitivity
from .shape import scatter_add

_SWAPPED = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _sizes(a, s, axes, half_spectrum=False):
    """The transformed axes (non-negative) and the output length along each, as NumPy's
    n-dimensional transforms read ``s`` and ``axes``."""
    shape = np.shape(a)
    if axes is None:
        axes = range(-len(s), 0) if s is not None else range(len(shape))
    axes = [ax % len(shape) for ax in axes]
    if s is None:
        s = [shape[ax] for ax in axes]
        if half_spectrum:
            s[-1] = (shape[axes[-1]] - 1) * 2
    return [shape[ax] if n == -1 else n for n, ax in zip(s, axes)], axes


def _one_axis(a, n, axis, half_spectrum=False):
    return _sizes(a, None if n is None else [n], [axis], half_spectrum)


def _fit(g, a):
    """The adjoint ``g`` of the transform's input, cut or zero-padded back to ``a``'s
    shape (where ``n`` or ``s`` changed it), and real where ``a`` is real."""
    if np.iscomplexobj(g) and not np.iscomplexobj(a):
        g = np.real(g)
    shape, have = np.shape(a), np.shape(g)
    if have == shape:
        return g
    index = tuple(slice(0, min(m, n)) for m, n in zip(have, shape))
    if any(m > n for m, n in zip(have, shape)):
        g = g[index]
    if np.shape(g) != shape:
        g = scatter_add(np.zeros_like(a), index, g)  # a plain template: a lends its shape
    return g


def _complex_vjp(transform, ybar, a, axes, norm):
    return _fit(transform(ybar, axes=axes, norm=norm), a)


def _rfft_vjp(ybar, a, s, axes, norm):
    # pad the half spectrum's adjoint with zeros to the full length, then as fftn
    return _fit(np.fft.fftn(ybar, s=s, axes=axes, norm=norm), a)


def _irfft_vjp(ybar, a, s, axes, norm):
    n, last = s[-1], axes[-1]
    h = np.fft.rfft(np.real(ybar) if np.iscomplexobj(ybar) else ybar, axis=last,
                    norm=_SWAPPED[norm])  # fmt: skip
    # each coefficient but the first and, for even n, the last stands for two
    counts = np.full(n // 2 + 1, 2.0, dtype=np.finfo(np.result_type(h)).dtype)
    counts[0] = 1.0
    if n % 2 == 0:
        counts[-1] = 1.0
    shape = [1] * np.ndim(h)
    shape[last] = counts.size
    h = np.conjugate(h) * np.reshape(counts, shape)
    if len(axes) > 1:
        h = np.fft.ifftn(h, axes=axes[:-1], norm=norm)
    return _fit(h, a)


# -- one-dimensional ------------------------------------------------------------------------


@sensitivity(np.fft.fft, 0)
def _(y, ybar, a, n=None, axis=-1, norm=None, out=None):
    return _complex_vjp(np.fft.fftn, ybar, a, [axis % np.ndim(a)], norm)


@sensitivity(np.fft.ifft, 0)
def _(y, ybar, a, n=None, axis=-1, norm=None, out=None):
    return _complex_vjp(np.fft.ifftn, ybar, a, [axis % np.ndim(a)], norm)


@sensitivity(np.fft.rfft, 0)
def _(y, ybar, a, n=None, axis=-1, norm=None, out=None):
    return _rfft_vjp(ybar, a, *_one_axis(a, n, axis), norm)


@sensitivity(np.fft.irfft, 0)
def _(y, ybar, a, n=None, axis=-1, norm=None, out=None):
    return _irfft_vjp(ybar, a, *_one_axis(a, n, axis, half_spectrum=True), norm)


@sensitivity(np.fft.hfft, 0)
def _(y, ybar, a, n=None, axis=-1, norm=None, out=None):
    # hfft(a) is irfft(conj(a)) with the opposite norm
    s, axes = _one_axis(a, n, axis, half_spectrum=True)
    return np.conjugate(_irfft_vjp(ybar, a, s, axes, _SWAPPED[norm]))


@sensitivity(np.fft.ihfft, 0)
def _(y, ybar, a, n=None, axis=-1, norm=None, out=None):
    # ihfft(a) is conj(rfft(a)) with the opposite norm
    return _rfft_vjp(np.conjugate(ybar), a, *_one_axis(a, n, axis), _SWAPPED[norm])


# -- n-dimensional --------------------------------------------------------------------------


def _nd_rules(complex_forward, complex_inverse, real_forward, real_inverse, default_axes):
    @sensitivity(complex_forward, 0)
    def _(y, ybar, a, s=None, axes=default_axes, norm=None, out=None):
        return _complex_vjp(np.fft.fftn, ybar, a, _sizes(a, s, axes)[1], norm)

    @sensitivity(complex_inverse, 0)
    def _(y, ybar, a, s=None, axes=default_axes, norm=None, out=None):
        return _complex_vjp(np.fft.ifftn, ybar, a, _sizes(a, s, axes)[1], norm)

    @sensitivity(real_forward, 0)
    def _(y, ybar, a, s=None, axes=default_axes, norm=None, out=None):
        return _rfft_vjp(ybar, a, *_sizes(a, s, axes), norm)

    @sensitivity(real_inverse, 0)
    def _(y, ybar, a, s=None, axes=default_axes, norm=None, out=None):
        return _irfft_vjp(ybar, a, *_sizes(a, s, axes, half_spectrum=True), norm)


_nd_rules(np.fft.fftn, np.fft.ifftn, np.fft.rfftn, np.fft.irfftn, None)
_nd_rules(np.fft.fft2, np.fft.ifft2, np.fft.rfft2, np.fft.irfft2, (-2, -1))


# -- shifts ---------------------------------------------------------------------------------

sensitivity(np.fft.fftshift, 0)(lambda y, ybar, x, axes=None: np.fft.ifftshift(ybar, axes))
sensitivity(np.fft.ifftshift, 0)(lambda y, ybar, x, axes=None: np.fft.fftshift(ybar, axes))
