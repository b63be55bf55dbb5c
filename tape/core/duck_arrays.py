"""Arrays of other libraries that speak NumPy's protocols (Dask, CuPy), which a tape
records as it records ndarrays: how the engine tells them apart."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_duck_array"]


def is_duck_array(value: Any) -> bool:
    """Whether ``value`` is an array of another library that speaks NumPy's protocols
    (a Dask or CuPy array): it has ``__array_function__``, ``__array_ufunc__``, ``shape``
    and ``dtype``. Nodes and ndarrays are not duck arrays here.

    >>> import numpy as np
    >>> from tape.core.duck_arrays import is_duck_array
    >>> is_duck_array(np.ones(2)), is_duck_array(1.0)
    (False, False)
    """
    cls = type(value)
    return (
        cls is not np.ndarray
        and not (hasattr(cls, "__record_call__") and hasattr(value, "tape"))  # a node
        and not isinstance(value, np.generic)
        and hasattr(cls, "__array_function__")
        and hasattr(cls, "__array_ufunc__")
        and hasattr(value, "shape")
        and hasattr(value, "dtype")
    )
