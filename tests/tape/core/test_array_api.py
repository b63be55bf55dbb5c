"""tape.core.array_api: the array API namespace of nodes, through which SciPy's array-API code
paths (SCIPY_ARRAY_API=1) record on the tape."""

import subprocess
import sys

import numpy as np
import pytest

from tape import Leaf, Tape
from tape.core import array_api


def test_asarray_keeps_a_node_a_node_and_the_rest_is_numpy():
    t = Tape()
    x = Leaf(t, np.array([1.0, 2.0]))
    assert x.__array_namespace__() is array_api
    assert array_api.asarray(x) is x
    assert array_api.asarray(x, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(array_api.asarray([1, 2]), np.array([1, 2]))
    assert array_api.exp is np.exp and array_api.linalg is np.linalg
    assert x.device == "cpu" and x.to_device("cpu") is x
    with pytest.raises(ValueError, match="cpu"):
        x.to_device("cuda")


def test_scipy_array_api_functions_differentiate_unchanged():
    pytest.importorskip("scipy")
    # SciPy reads the variable when it is first imported: a process of its own
    script = """
import os
os.environ["SCIPY_ARRAY_API"] = "1"
import numpy as np, scipy.fft, scipy.special, scipy.stats
from tape import grad
x = np.array([0.3, -1.2, 2.0, 0.7])
w = np.arange(4.0)
for f in (lambda x: np.sum(scipy.special.softmax(x) * w), scipy.stats.skew, scipy.stats.sem,
          lambda x: scipy.stats.gmean(np.abs(x) + 1),
          lambda x: np.sum(np.abs(scipy.fft.fft(x)) ** 2)):
    (g,) = grad(f)(x)
    fd = [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
