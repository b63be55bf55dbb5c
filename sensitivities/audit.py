"""The classification of NumPy's public API: every public function of ``numpy``,
``numpy.linalg``, ``numpy.fft`` and ``numpy.lib.stride_tricks`` is differentiable (a rule,
an implementation, or NumPy's own Python code entered as it is), non-differentiable
(registered as such), or unsupported, with the reason kept here. ``scripts/rules_doc.py``
writes the table into ``docs/rules.md``; ``tests/sensitivities/test_coverage.py`` fails
when NumPy gains a function nobody classified.
"""

from __future__ import annotations

import numpy as np

from .registry import canonical, implementation_of, lookup

MODULES = (np, np.linalg, np.fft, np.lib.stride_tricks)

# NumPy's own Python code runs on nodes: each is tested against central differences as
# it is (the ENTERED cases of the family tests)
ENTERED = {
    "np.logspace", "np.polyadd", "np.polysub", "np.row_stack", "np.rollaxis",
    "np.take_along_axis", "np.union1d", "np.fromfunction", "np.linalg.diagonal",
    "np.linalg.matmul", "np.linalg.matrix_transpose", "np.linalg.tensordot", "np.linalg.trace",
    "np.linalg.vecdot", "np.fft.fftfreq", "np.fft.rfftfreq", "np.fill_diagonal",
    "np.put_along_axis",
}  # fmt: skip

_CONVERTS = (
    "converts its input to an ndarray, which a node refuses (its gradient would be lost): "
    "use the node itself"
)
# Not dispatched by NumPy, they are replaced while a forward pass runs (tape.runtime.conversions):
# a node, or a list holding nodes, becomes the node or the stacked node
CONVERTED = {
    "np.array", "np.asarray", "np.asanyarray", "np.ascontiguousarray", "np.asfortranarray",
    "np.asarray_chkfinite", "np.full", "np.lib.stride_tricks.as_strided",
}  # fmt: skip
_IN_PLACE = (
    "writes into its argument in place, which the tape cannot record yet: build the result "
    "with at(x)[index].set(values), np.where or np.concatenate"
)
_IO = "reads or writes files: save x.value (the plain array) outside the differentiated code"
_TEXT = "formats numbers as text: no numeric result to differentiate"
_NOT_NUMERIC = "configuration, introspection or type query: takes or returns no array values"
_SETS = (
    "a set operation whose result is a data-dependent selection of values: use np.unique, "
    "np.isin masks or np.union1d (differentiable) on the node"
)

UNSUPPORTED = {
    **dict.fromkeys(
        ["np.asmatrix", "np.bmat", "np.require", "np.from_dlpack", "np.frombuffer",
         "np.fromiter", "np.fromstring"], _CONVERTS),
    **dict.fromkeys(
        ["np.load", "np.loadtxt", "np.save", "np.savetxt", "np.savez", "np.savez_compressed",
         "np.genfromtxt", "np.fromfile", "np.fromregex"], _IO),
    **dict.fromkeys(
        ["np.array2string", "np.array_repr", "np.array_str", "np.base_repr", "np.binary_repr",
         "np.format_float_positional", "np.format_float_scientific", "np.get_printoptions",
         "np.set_printoptions", "np.printoptions"], _TEXT),
    **dict.fromkeys(
        ["np.get_include", "np.info", "np.show_config", "np.show_runtime", "np.test",
         "np.geterr", "np.seterr", "np.geterrcall", "np.seterrcall", "np.getbufsize",
         "np.setbufsize", "np.isdtype", "np.issubdtype", "np.promote_types",
         "np.min_scalar_type", "np.common_type", "np.mintypecode", "np.typename",
         "np.datetime_data", "np.broadcast_shapes", "np.isscalar", "np.iterable",
         "np.isfortran", "np.nested_iters"], _NOT_NUMERIC),
    **dict.fromkeys(["np.intersect1d", "np.setdiff1d", "np.setxor1d"], _SETS),
    "np.frompyfunc": (
        "calls a Python function element by element on object arrays: write the function "
        "with NumPy operations instead"
    ),
    "np.kaiser": (
        "NumPy does not dispatch np.kaiser (no __array_function__), so a node never reaches an "
        "implementation; it converts beta with np.array: write "
        "np.i0(beta * np.sqrt(1 - (2 * n / (M - 1) - 1) ** 2)) / np.i0(beta), differentiable "
        "in beta"
    ),
}  # fmt: skip


def public_callables() -> list:
    """``(qualified name, function)`` for every public function (not class, not module) of
    the audited modules, in order."""
    found = {}
    for module in MODULES:
        names = getattr(module, "__all__", None) if module is not np else None
        for name in sorted(names or dir(module)):
            f = getattr(module, name, None)
            if name.startswith("_") or not callable(f) or isinstance(f, type):
                continue
            prefix = {np: "np", np.linalg: "np.linalg", np.fft: "np.fft"}.get(
                module, "np.lib.stride_tricks"
            )
            found.setdefault(f"{prefix}.{name}", canonical(f))
    return list(found.items())


def classify(name: str, f) -> tuple[str, str]:
    """``(kind, detail)``: kind one of rule, implementation, entered, converted,
    non-differentiable, unsupported, or unclassified (which the coverage test refuses)."""
    f = canonical(f)
    rules = lookup(f)
    if implementation_of(f) is not None:
        return "implementation", ""
    if rules is not None and rules.nondiff:
        return "non-differentiable", ""
    if rules is not None and rules.argnums:
        return "rule", ""
    if name in ENTERED:
        return "entered", "NumPy's own code, entered"
    if name in CONVERTED:
        return "converted", "recorded inside grad and the transforms (tape.runtime.conversions)"
    if name in UNSUPPORTED:
        return "unsupported", UNSUPPORTED[name]
    return "unclassified", ""
