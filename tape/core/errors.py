"""The engine's exceptions, and the messages that explain them.

Every error names what the user wrote and what to write instead; the long texts live
here so that the engine's code reads as code.
"""

from __future__ import annotations

import dis
import linecache
import re
import sys
from typing import Any

import numpy as np

from sensitivities.registry import function_name, holds_node, qualified_name, value_of

from .display import dtype_name
from .duck_arrays import is_duck_array

__all__ = [
    "NodeConversionError",
    "MissingRuleError",
    "MutationError",
    "AnomalyError",
    "missing_rule",
    "how_to_register",
    "describe",
    "format_site",
]


class NodeConversionError(TypeError):
    """A node was asked to turn into a plain number or ndarray, which would drop it off the tape.

    >>> from tape import Tape, Leaf
    >>> float(Leaf(Tape(), 1.0))
    Traceback (most recent call last):
        ...
    tape.core.errors.NodeConversionError: a Node cannot be turned into a Python number ...
    """


class MissingRuleError(TypeError, NotImplementedError):
    """A function met a node and has no sensitivity for it (and could not be entered).

    It is a ``NotImplementedError`` too, what Python code catches for "not supported".

    >>> from tape import Tape, Leaf, primitive
    >>> @primitive
    ... def halve(x):
    ...     return x / 2
    >>> halve(Leaf(Tape(), 1.0))
    Traceback (most recent call last):
        ...
    tape.core.errors.MissingRuleError: the primitive halve has no sensitivity; register one with ...
    """


class MutationError(RuntimeError):
    """An array recorded on a tape was changed in place before the reverse pass read it.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate, MutationError
    >>> t = Tape()
    >>> w = np.array([1.0, 2.0])
    >>> x = Leaf(t, np.array([3.0, 4.0]))
    >>> y = np.sum(x * w)
    >>> w[0] = 10.0  # the reverse pass of x * w needs the old w
    >>> try:
    ...     propagate(t, reverse_tape(y))
    ... except MutationError as e:
    ...     print(str(e).split(" was changed")[0])
    argument 1 of [1] Branch{float64[2]} [3., 8.] f=multiply
    """


class AnomalyError(FloatingPointError):
    """Under ``detect_anomaly()``: a record's value or adjoint turned NaN or infinite.

    >>> import numpy as np
    >>> from tape import grad, detect_anomaly, AnomalyError
    >>> with detect_anomaly(), np.errstate(all="ignore"):
    ...     try:
    ...         grad(lambda x: np.log(x - 1.0))(1.0)
    ...     except AnomalyError as e:
    ...         print(str(e).splitlines()[0])
    log returned -inf from finite inputs, at [2] Branch{float64} -inf f=log
    """


TO_ARRAY = (
    "a Node cannot be turned into an ndarray or a NumPy number (np.asarray(node), "
    "np.float64(node)): its value would be cut off the tape "
    "and its gradient silently lost. Build arrays from nodes with np.stack, "
    "np.concatenate or np.where; instead of a[i] = node into an ndarray make the "
    "buffer a node (a = np.zeros_like(x) with x a node) or write a = tape.at(a)[i]"
    ".set(node); use node.value for a constant copy; or register a "
    "sensitivity for the function that needs an ndarray (see tape.sensitivity)"
)

TO_NUMBER = (
    "a Node cannot be turned into a Python number (float(), int(), math.*): its gradient "
    "would be silently lost. Use NumPy functions instead of math (np.sin, np.exp), or "
    "take node.value for a constant"
)

BUFFER = (
    "a[i] = node stores a node into an ndarray, which would keep its value and lose its "
    "gradient. Make the buffer a node, from a node x:\n"
    "    a = np.zeros_like(x)                # x's shape\n"
    "    a = np.zeros_like(x, shape=(n, 2))  # any shape; then a[i] = node records\n"
    "or build the array with np.stack or np.concatenate, or write a = tape.at(a)[i].set(node)"
)

_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]


def stores_into_array(frame: Any) -> bool:
    """Whether ``frame`` is running ``a[i] = value``: a conversion asked for there is
    NumPy's, storing a node into an ndarray (read on the error path only)."""
    code, at = frame.f_code.co_code, frame.f_lasti
    return 0 <= at < len(code) and code[at] == _STORE_SUBSCR


CANNOT_PICKLE = (
    "cannot pickle a node: it is a record on a tape of this process, and cannot leave it "
    "(pickle, copyreg, multiprocessing, cloudpickle); pickle its value instead "
    "(tape.stop_gradient(x), or node.value), or return the arrays you need from the "
    "differentiated function"
)

COMPILED_SWAP = (
    "compiled code (np.random.Generator.shuffle, np.random.shuffle) wrote a view of a node "
    "into the node itself, x[i] = x[j]: it shuffles a node of two or more axes as a "
    "sequence of rows, which are views of it, and would duplicate rows where NumPy permutes "
    "an ndarray's. Shuffle by indexing instead: x = x[rng.permutation(len(x))] gives the "
    "rows rng.shuffle(x) would, from the same generator state, and the gradient flows back "
    "through the permutation"
)


def converted_in_library(frame: Any, converting: bool, into: str = "an ndarray") -> str:
    """What to say where library code (an installed package) converted a node: the
    function and line that did, and what to do about code the user does not own; ""
    for the user's own code, which the general advice fits."""
    if frame is None:
        return ""
    if into == "an ndarray" and _module_of(frame).startswith("numpy"):
        return _inside_numpy(frame)
    return _library_site(frame.f_code, frame.f_lineno, frame.f_globals, converting, into)


def _module_of(frame: Any) -> str:
    return frame.f_globals.get("__name__", "")


def _inside_numpy(frame: Any) -> str:
    """Where NumPy's own Python code hands a node to its compiled code (``np.sum`` of a
    list holding nodes reaches ``ufunc.reduce``): the NumPy function the user called, and
    the fix, which is nearly always to stack the sequence first."""
    outer = frame
    while frame is not None and _module_of(frame).startswith(("numpy", "tape.", "sensitivities.")):
        if _module_of(frame).startswith("numpy"):
            outer = frame
        frame = frame.f_back
    name = outer.f_code.co_name
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame else ""
    return (
        f"np.{name} hands a node to NumPy's compiled code, which would cut it off the tape"
        + (f" (at `{line}`)" if line else "")
        + f". NumPy does so with a list or tuple that holds nodes: make it one node first, "
        f"np.{name}(np.stack([...])) or np.{name}(np.array([...])). Otherwise give "
        f"np.{name} a rule (tape.sensitivity) or compute with functions that have rules"
    )


def _library_site(
    code: Any, lineno: int, namespace: dict, converting: bool, into: str = "an ndarray"
) -> str:
    filename = code.co_filename
    if not any(part in filename for part in ("site-packages", "dist-packages")):
        return ""
    function = getattr(code, "co_qualname", code.co_name)
    module = namespace.get("__name__", "?")
    line = linecache.getline(filename, lineno).strip()
    if into != "an ndarray":  # float(node), or a node stored into an ndarray
        why = (
            "a plain number cannot carry the gradient (an ndarray made with np.zeros holds "
            "numbers only; a buffer made with np.zeros_like(x) from a node x holds nodes)"
        )
    elif converting:
        why = (
            "the value goes on into compiled code there (or a name bound where tape cannot "
            "replace it)"
        )
    else:
        why = "no differentiation runs in this thread (or tape.library_code(False) is in force)"
    return (
        f"{line or 'a conversion'} in {module}.{function} (line {lineno}) turns a "
        f"node into {into}: inside grad and the transforms, np.asarray and np.array of "
        f"a node are recorded where Python code calls them, but here {why}, and the "
        "gradient would be lost. For library code you do not own, call its tape.scipy "
        "counterpart if it has one, or wrap the library call as a primitive with a "
        "sensitivity of your own:\n\n"
        "    @tape.primitive\n"
        "    def f(x):\n"
        f"        return ...  # the call that reaches {function}, on plain values\n\n"
        "    @tape.sensitivity(f, 0)\n"
        "    def _(y, ybar, x):\n"
        "        return ybar * ...  # its derivative, by hand\n"
    )


def passed_to_compiled(error: BaseException, sites: list) -> NodeConversionError | None:
    """Where a TypeError from compiled code names a node (``a bytes-like object is
    required, not 'Branch'``) and the traceback runs through a library line that kept a
    node where it asked for an ndarray (``sites``: ``(code, line, globals)`` of each such
    conversion in this pass), the error that names that line; else None."""
    if not isinstance(error, TypeError) or isinstance(error, NodeConversionError):
        return None
    text = str(error)
    if not any(f"'{kind}'" in text for kind in ("Branch", "Leaf", "Node")):
        return None
    codes = {code: (lineno, namespace) for code, lineno, namespace in sites}
    tb, found = error.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code in codes:
            found = (code, *codes[code])
        tb = tb.tb_next
    if found is None:
        return None
    site = _library_site(*found, True)
    return NodeConversionError(site) if site else None


def scipy_conversion(scipy_name: str, ours: str, closure: bool = False) -> str:
    """What to write instead when SciPy's ``scipy_name`` converts a node: call ``ours``;
    for a solver met through a ``closure``, pass the parameters through ``args=``."""
    if closure and not ours:
        return (
            f"{scipy_name} met a node through the function it calls (a closure or a global "
            "holding a node), and converts what that function returns to an ndarray, which "
            f"would cut the node off the tape. tape.scipy has no counterpart of {scipy_name}: "
            "use one that has (tape.scipy.integrate: solve_ivp, odeint; tape.scipy.optimize: "
            "root, root_scalar, minimize, fixed_point, brentq, ...), passing the values to "
            "differentiate in through args=(...), or make the computation a primitive with "
            "its own rule (tape.primitive, tape.sensitivity)"
        )
    if closure:
        return (
            f"{scipy_name} met a node through the function it calls (a closure or a global "
            "holding a node), and converts what that function returns to an ndarray, which "
            f"would cut the node off the tape. Call its differentiable counterpart {ours} "
            "(same arguments), and pass the values to differentiate in through args=(...) "
            "instead of closing over them: fun(x, *args) receives them"
        )
    return (
        f"{scipy_name} converts its arguments to ndarrays, which would cut this node off the "
        f"tape; call its differentiable counterpart {ours} instead (same arguments)"
    )


_MASKED = (
    "a masked array, whose mask changes what its operations and reductions count; pass "
    "its data and use the mask explicitly: np.where(mask, 0.0, x), x[~mask], or "
    "np.average(x, weights=~mask)"
)
_SEMANTICS = (
    ". tape follows ndarray semantics, and would compute another program's value and gradient"
)
MASKED_CONVERSION = "a masked array's operation (np.ma) got a node and " + _MASKED + _SEMANTICS


def subclass_constant(f: Any, a: Any) -> str:
    """The message for an ``np.matrix`` or a masked array that meets a node in ``f``."""
    if isinstance(a, np.matrix):
        what = (
            "an np.matrix, whose * and ** are matrix products and whose results stay 2-D; "
            "pass np.asarray(m) and write @ for the matrix product"
        )
    else:
        what = _MASKED
    return f"{function_name(f)} got a node and {what}{_SEMANTICS}"


def in_place(name: str, instead: str) -> str:
    return (
        f"x.{name}() changes an array in place, which the tape cannot record; "
        f"use {instead} instead"
    )


def out_into_array(name: str) -> str:
    """The error for ``name(..., out=a)`` with ``a`` an ndarray and a node among the
    inputs; for ``a op= node`` written in the user's code (which NumPy turns into
    ``out=a``), the error names that line and the array, and says how to make it one that
    can hold nodes."""
    line = _augmented_line()
    if line:
        return _augmented_into_array(line)
    return (
        f"{name}(..., out=a) writes a result computed from a node into the ndarray a, "
        "which can hold numbers only (its gradient would be lost). Make the buffer a node "
        "(a = np.zeros_like(x) with x a node), or drop out= and use the returned value"
    )


def _augmented_into_array(line: str) -> str:
    """The error for the user's ``line``, ``a[i] op= value``, ``a`` an ndarray and the
    value computed from a node."""
    match = re.match(r"\s*([\w.]+)(\[.*\])?\s*([-+*/@%&|^<>]+)=\s*(.+)", line)
    if match is None:
        return f"`{line}`: {out_into_array.__doc__}"
    name, index, op, value = match.groups()
    method = {"+": "add", "-": "add", "*": "multiply", "/": "divide"}.get(op)
    functional = ""
    if index is None:  # the whole array: its new value is NumPy's a op b
        functional = f"; or write {name} = {name} {op} {value}"
    elif method is not None:
        argument = f"-({value})" if op == "-" else value
        functional = (
            f"; or update it functionally, {name} = tape.at({name})[{index[1:-1]}]"
            f".{method}({argument})"
        )
    return (
        f"`{line}` writes a value computed from a node into the ndarray {name} in place, "
        f"which can hold numbers only (its gradient would be lost): {name} was made "
        "outside the differentiated code, or from plain values (such as a copy of an array "
        "from outside), so it is no node. Make it one with the same values before the "
        f"write, from a node x: {name} = {name} + np.zeros_like(x, shape={name}.shape)"
        + functional
    )


_BINARY_OP = dis.opmap.get("BINARY_OP")
_INPLACE = {i for i, (name, _) in enumerate(getattr(dis, "_nb_ops", ())) if "INPLACE" in name}


def _augmented_line() -> str:
    """The source of the user's line where it runs ``a op= b`` (the first frame outside
    the engine and NumPy); "" where it does not."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
        "tape", "sensitivities", "numpy",
    ):  # fmt: skip
        frame = frame.f_back
    if frame is None:
        return ""
    code, at = frame.f_code.co_code, frame.f_lasti
    if not (0 <= at < len(code) - 1 and code[at] == _BINARY_OP and code[at + 1] in _INPLACE):
        return ""
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()


def how_to_register(f: Any, argnum: int) -> str:
    """The lines a user writes to give argument ``argnum`` of ``f`` a sensitivity."""
    qual = qualified_name(f)
    if not qual.startswith(("np.", "scipy.")):
        qual = function_name(f)  # the user's own function: the name they have in scope
    return (
        f"register one with\n\n    @tape.sensitivity({qual}, {argnum})\n"
        "    def _(y, ybar, *args, **kwargs):\n"
        f"        return ...  # the adjoint of argument {argnum}\n"
    )


def missing_rule(f: Any, i: int) -> MissingRuleError:
    return MissingRuleError(
        f"{function_name(f)} has no sensitivity for argument {i}, which is a node "
        f"here; {how_to_register(f, i)}"
    )


def not_differentiable_in(f: Any, keyword: str, position: int) -> MissingRuleError:
    return MissingRuleError(
        f"{function_name(f)} is not differentiable with respect to {keyword!r}, "
        f"which is a node here; {how_to_register(f, position)}"
    )


def cannot_enter(f: Any, is_primitive: bool) -> MissingRuleError:
    if is_primitive:
        return MissingRuleError(
            f"the primitive {function_name(f)} has no sensitivity; {how_to_register(f, 0)}"
        )
    return MissingRuleError(
        f"{function_name(f)} has no sensitivity and cannot be entered; {how_to_register(f, 0)}"
    )


def converts_nodes(f: Any) -> MissingRuleError:
    return MissingRuleError(
        f"np.{function_name(f)} has no sensitivity, and NumPy's implementation of it "
        f"cannot run on nodes (it converts them to ndarrays); {how_to_register(f, 0)}"
    )


def caused_by_conversion(error: BaseException | None) -> bool:
    """Whether ``error`` came, at most 20 causes down, from converting a node."""
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, NodeConversionError):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def keyword_node(f: Any, name: str) -> TypeError:
    return TypeError(
        f"{function_name(f)} got a node as keyword argument {name!r}; "
        "pass differentiable arguments positionally"
    )


def describe(node: Any) -> str:
    """``[pos] Branch{...} f=name``, with the line that recorded it where known."""
    text = f"[{node.pos}] {node!r}"
    sites = node.tape.sites
    site = sites.get(node.pos) if sites else None
    if site is not None:
        text += "\n" + format_site(site)
    return text


def format_site(site: tuple) -> str:
    """A ``(file, line, function)`` triple as a traceback shows it."""
    filename, lineno, function = site
    line = linecache.getline(filename, lineno).strip()
    return f'  recorded at File "{filename}", line {lineno}, in {function}' + (
        f"\n    {line}" if line else ""
    )


def explain_mix(error: Exception, f: Any, vals: tuple) -> None:
    """Where a call that mixes array libraries (NumPy and Dask, NumPy and CuPy) fails,
    say which arrays met: the library's own message may not mention the mix."""
    kinds = [_kind(v) for v in vals]
    libraries = {k.split(".")[0] for k in kinds if k}
    if len(libraries) > 1:
        error.add_note(
            f"while recording {function_name(f)} on {', '.join(k or 'a scalar' for k in kinds)}"
            ": arrays of different libraries meet here, and the one that is not NumPy decides "
            "(the error above is its own). Check the shapes, or where it refuses ndarrays, "
            "convert them first (dask.array.from_array, cupy.asarray)"
        )


def _kind(v: Any) -> str:
    if type(v) is np.ndarray:
        return f"numpy.ndarray{list(v.shape)}"
    if is_duck_array(v):
        return f"{type(v).__module__}.{type(v).__name__}{list(v.shape)}"
    return ""


def note_reverse_failure(error: Exception, records: list, pos: int) -> None:
    """Add to ``error`` which record the reverse pass was working on, and where it was
    recorded: the rule's own traceback ends inside the rule, far from the user's code."""
    if isinstance(error, (MutationError, AnomalyError)) or not 0 <= pos < len(records):
        return  # these name their record already
    node = records[pos]
    note = f"while propagating the adjoint through {describe(node)}"
    if not node.tape.sites:
        note += "\n  (under `with tape.debug():` every record keeps the line that made it)"
    error.add_note(note)
    try:
        error.tape_position = pos  # grad uses it to find the user's line
    except AttributeError:  # an exception type without a __dict__
        pass


def check_leaf_value(value: Any) -> None:
    """A clear TypeError unless ``value`` can be a Leaf's: floating-point or complex."""
    if type(value) is float or (type(value) is np.ndarray and value.dtype.kind in "fc"):
        return  # the common cases, without the questions below
    value = value_of(value)
    if isinstance(value, (bool, int, np.bool_, np.integer)) or (
        (isinstance(value, np.ndarray) or is_duck_array(value))
        and np.dtype(value.dtype).kind not in "fc"
    ):
        raise TypeError(
            f"a Leaf needs a floating-point or complex value, got {dtype_name(value)}: "
            "convert it first, e.g. np.asarray(x, dtype=float)"
        )
    if not (isinstance(value, (float, complex, np.inexact, np.ndarray)) or is_duck_array(value)):
        raise TypeError(
            f"a Leaf holds a float, a complex number, an ndarray or an array of a library "
            f"that speaks NumPy's protocols (Dask, CuPy), got {type(value).__name__}"
        )


def rank(y: Any, vals: tuple) -> int:
    """At least the most axes among a record's value and its arguments."""
    return max(_ndim(v) for v in (y, *vals))


def _ndim(v: Any) -> int:
    if isinstance(v, (np.ndarray, np.generic)) or hasattr(type(v), "__record_call__"):
        return v.ndim
    if is_duck_array(v):
        return v.ndim
    if type(v) is list or type(v) is tuple:  # a list of arrays, or one spelled as nested lists
        return 1 + max(map(_ndim, v), default=0)
    return 0


def check_adjoint(xbar: Any, f: Any, argnum: int, rule: str = "sensitivity") -> None:
    """A TypeError naming the rule unless ``xbar``, what it returned, is a number or an
    array of numbers (of NumPy, of another library, or a node of an outer tape)."""
    if xbar is None:
        returns = "a tangent" if rule == "pushforward" else "its argument's adjoint"
        raise TypeError(
            f"the {rule} of {function_name(f)} for argument {argnum} returned None: a rule "
            f"returns {returns} (is its return statement missing?)"
        )
    if not (
        isinstance(xbar, (int, float, complex, np.number, np.ndarray))
        or hasattr(type(xbar), "__record_call__")
        or is_duck_array(xbar)
    ):
        raise TypeError(
            f"the {rule} of {function_name(f)} for argument {argnum} returned "
            f"{type(xbar).__name__} {xbar!r:.40}: a rule returns a number or an array"
        )
    kind = getattr(getattr(xbar, "dtype", None), "kind", "f")
    if kind not in "iufc":
        raise TypeError(
            f"the {rule} of {function_name(f)} for argument {argnum} returned an array "
            f"of {xbar.dtype}: it must hold numbers (real or complex)"
        )


def check_adjoints(xbars: Any, f: Any, argnum: int, elements: int) -> None:
    """``check_adjoint`` for the rule of a list argument of ``elements`` arrays: a list
    or tuple of as many adjoints, None for an element that gets none."""
    if not (type(xbars) is list or type(xbars) is tuple) or len(xbars) != elements:
        raise TypeError(
            f"the sensitivity of {function_name(f)} for argument {argnum}, a list of "
            f"{elements} arrays, returned {type(xbars).__name__} {xbars!r:.40}: a rule for a "
            "list argument returns a list with one adjoint (or None) per element"
        )
    for xbar in xbars:
        if xbar is not None:
            check_adjoint(xbar, f, argnum)


def writes_its_inputs(f: Any, argnum: int, in_place: bool, kind: str = "sensitivity") -> ValueError:
    """The error for a user's rule (a ``kind``) that wrote into an array it was handed."""
    handed = "its tangent xdot" if kind == "pushforward" else "its adjoint ybar"
    what = f"{handed}, its result y or an argument" + (
        " (an in-place rule may write only into the xbar it is handed first)" if in_place else ""
    )
    return ValueError(
        f"the {kind} of {function_name(f)} for argument {argnum} writes into {what}: "
        "those arrays are shared (one array reaches several rules, and the arguments are "
        "the caller's), so a rule computes a new array (return ybar * 2 * x, not ybar *= "
        "2 * x)"
    )


def not_summable(xshape: tuple, shape: tuple, f: Any, argnum: int) -> ValueError:
    if any(n != n for n in shape + tuple(xshape)):  # nan: a size known only once computed
        return ValueError(
            f"an adjoint of shape {xshape} for an argument of shape {shape}: sizes that are "
            "unknown until computed (a Dask array indexed by a boolean mask) cannot be "
            "differentiated lazily. Keep the shape with np.where(mask, x, 0), or compute "
            "the sizes first (x.compute_chunk_sizes())"
        )
    where = f"the sensitivity of {function_name(f)} for argument {argnum}" if f else "an adjoint"
    return ValueError(
        f"{where} returned shape {xshape}, which does not sum back to the argument's shape "
        f"{shape}: a rule must return its argument's shape or the broadcast shape"
    )


def bad_seed(y: Any, ybar: Any) -> Exception:
    """The error for a reverse tape asked for anything but a node ``y`` and a seed
    ``ybar`` of its shape."""
    if type(y) is list or type(y) is tuple or not holds_node(y):
        return TypeError(f"reverse_tape needs a node of a tape, got {type(y).__name__}")
    return ValueError(
        f"the seed ybar has shape {np.shape(ybar)}, but the output y has shape "
        f"{np.shape(y.value)}; they must match"
    )


def check_reverse_tape(tape: Any, rtape: Any) -> None:
    """A clear error unless ``rtape`` was made for ``tape`` after recording."""
    if rtape.tape is not tape:
        raise ValueError("this reverse tape was made for another tape")
    if len(rtape.adjoints) != len(tape.records):
        raise ValueError(
            f"the reverse tape has {len(rtape.adjoints)} slots but the tape now has "
            f"{len(tape.records)} records; make the reverse tape after recording"
        )
