"""Hypothesis strategies for rule tests: arrays in a domain, broadcastable shapes."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def arrays(shape, low=-2.0, high=2.0, avoid=None):
    """float64 arrays of ``shape`` with values in [low, high], at least 0.1 from ``avoid``."""
    elements = st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    if avoid is not None:
        elements = elements.filter(lambda v: all(abs(v - a) > 0.1 for a in np.atleast_1d(avoid)))
    return hnp.arrays(np.float64, shape, elements=elements)


def broadcastable(n=2, max_dims=3):
    """Shapes of ``n`` arrays that broadcast together."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=n, min_dims=0, max_dims=max_dims, min_side=1, max_side=4
    ).map(lambda s: s.input_shapes)
