"""Sensitivities of statistics helpers: covariance, polynomials, integration, convolution."""
