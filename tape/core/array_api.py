"""The array API namespace of nodes: ``node.__array_namespace__()``.

Libraries written against the array API standard (SciPy and scikit-learn with
``SCIPY_ARRAY_API=1``) ask an array for its namespace and call its functions. For a node
that namespace is NumPy's own (NumPy 2 follows the standard), with the functions that
would turn a node into an ndarray replaced: ``asarray`` hands a node back as it is.
Every other call goes to NumPy, and reaches the node through NumPy's protocols, so it
is recorded as any ``np.*`` call is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__array_api_version__ = np.__array_api_version__


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Any:
    """``obj`` as an array of this namespace: a node stays a node (cast where ``dtype``
    asks for another), anything else is NumPy's ``asarray``."""
    if hasattr(type(obj), "__array_namespace__") and hasattr(obj, "tape"):  # a node
        if dtype is not None and np.dtype(dtype) != obj.dtype:
            return obj.astype(dtype)
        return obj
    return np.asarray(obj, dtype=dtype, copy=copy)


def __getattr__(name: str) -> Any:
    return getattr(np, name)  # the rest of the standard: NumPy's, recorded through nodes
