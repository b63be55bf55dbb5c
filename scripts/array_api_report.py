"""Which SciPy and scikit-learn functions differentiate unchanged through their array-API
code paths (SCIPY_ARRAY_API=1): each is run under grad and checked against central
differences.

    python scripts/array_api_report.py
"""

import os

os.environ["SCIPY_ARRAY_API"] = "1"  # before SciPy is imported

import numpy as np
import scipy.fft as sfft
import scipy.signal as sg
import scipy.special as sp
import scipy.stats as st

from tape import grad

x = np.array([0.3, -1.2, 2.0, 0.7])
tries = {
 "special.logsumexp": lambda x: sp.logsumexp(x),
 "special.softmax": lambda x: np.sum(sp.softmax(x) * np.arange(4.0)),
 "special.log_softmax": lambda x: np.sum(sp.log_softmax(x) * np.arange(4.0)),
 "special.entr": lambda x: np.sum(sp.entr(np.abs(x))),
 "stats.zscore": lambda x: np.sum(st.zscore(x) * np.arange(4.0)),
 "stats.skew": lambda x: st.skew(x),
 "stats.kurtosis": lambda x: st.kurtosis(x),
 "stats.moment": lambda x: st.moment(x, order=3),
 "stats.variation": lambda x: st.variation(np.abs(x) + 1),
 "stats.gmean": lambda x: st.gmean(np.abs(x) + 1),
 "stats.hmean": lambda x: st.hmean(np.abs(x) + 1),
 "stats.pmean": lambda x: st.pmean(np.abs(x) + 1, 2.0),
 "stats.tmean": lambda x: st.tmean(x),
 "stats.sem": lambda x: st.sem(x),
 "stats.entropy": lambda x: st.entropy(np.abs(x) + 1),
 "signal.detrend": lambda x: np.sum(sg.detrend(x) ** 2),
 "fft.fft": lambda x: np.sum(np.abs(sfft.fft(x)) ** 2),
 "fft.rfft": lambda x: np.sum(np.abs(sfft.rfft(x)) ** 2),
 "fft.dct": lambda x: np.sum(sfft.dct(x) ** 2),
}
try:
    import sklearn.metrics as skm
    y = np.array([0.0, 1.0, 1.0, 0.0])
    tries["sklearn.metrics.mean_squared_error"] = lambda x: skm.mean_squared_error(y, x)
    tries["sklearn.metrics.r2_score"] = lambda x: skm.r2_score(y, x)
    tries["sklearn.metrics.log_loss"] = lambda x: skm.log_loss(y, 1/(1+np.exp(-x)))
except ImportError:
    pass


def _why(error):
    text = str(error)
    if "immutable" in text:
        return "writes into an array in place"
    if "Multiple namespaces" in text:
        return "mixes the node with NumPy arrays of its own"
    if "cannot be turned into an ndarray" in text:
        return "converts its input with np.asarray"
    return f"{type(error).__name__}: {text[:60]}"


print("| function | with SCIPY_ARRAY_API=1 |")
print("| --- | --- |")
for name, f in tries.items():
    try:
        (g,) = grad(f)(x)
        h = 1e-6
        fd = np.array([(f(x + h*e) - f(x - h*e)) / (2*h) for e in np.eye(4)])
        ok = np.allclose(g, fd, rtol=1e-5, atol=1e-6)
        print(f"| `{name}` | {'differentiates' if ok else 'a wrong gradient'} |")
    except Exception as e:
        print(f"| `{name}` | fails: {_why(e)} |")
