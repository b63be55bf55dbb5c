"""Sensitivities of the discrete Fourier transforms in ``numpy.fft``."""
