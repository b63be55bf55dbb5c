"""Pictures of a tape: Graphviz DOT source, and SVG where the ``graphviz`` package is installed.

``to_dot`` needs nothing beyond the standard library. Leaves are ellipses, branches are
boxes labelled with their function and the dtype and shape of their value (and the value
itself when it is a scalar), and each edge
runs from an argument to the call that used it, labelled with the argument's index when
the call took more than one. Constants (plain arrays, numbers, nodes of other tapes)
appear as small grey boxes. Given a reverse tape too, its adjoints are drawn beside the
tape, record for record, with the edges reversed: each adjoint flows from a call back to
its arguments.

>>> import numpy as np
>>> from tape import Tape, Leaf
>>> from tape.tools.graph import to_dot
>>> t = Tape()
>>> x = Leaf(t, 0.5)
>>> y = np.sin(x) * x
>>> print(to_dot(t))  # doctest: +ELLIPSIS
digraph tape {
  ...
  n0 [label="[0] Leaf\\nfloat64 0.5", shape=ellipse, ...];
  n1 [label="[1] sin\\nfloat64 0.4794", shape=box, ...];
  n0 -> n1;
  n2 [label="[2] multiply\\nfloat64 0.2397", shape=box, ...];
  n1 -> n2 [label="0"];
  n0 -> n2 [label="1"];
}
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np

from sensitivities.registry import function_name

from ..core.display import dtype_name, preview
from ..core.node import Node
from ..core.records import PICTURES, Tape
from ..core.reverse import ReverseTape

__all__ = ["to_dot", "draw", "svg"]

#: Tapes longer than this are not rendered automatically in a notebook (``to_dot`` and
#: ``draw`` still draw any length when asked).
MAX_AUTO_RECORDS = 300

_LABEL_CHARS = 32
_FONT = 'fontname="Helvetica", fontsize=10'
_LEAF_STYLE = 'shape=ellipse, style=filled, fillcolor="#dbe9f6"'
_BRANCH_STYLE = 'shape=box, style="rounded,filled", fillcolor="#fdf1d6"'


def to_dot(
    tape: Tape, rtape: ReverseTape | None = None, *, constants: bool = True, names: Any = None
) -> str:
    """Graphviz DOT source of ``tape``, and of the adjoints in ``rtape`` beside it.

    ``constants=False`` leaves out the arguments that are not nodes of this tape.
    ``names`` labels records by a name of their own instead of ``Leaf`` (or the function):
    a dict from a node or a position to its name, ``{W: "W", b: "b"}``.

    >>> import numpy as np
    >>> from tape import Tape, Leaf, reverse_tape, propagate
    >>> t = Tape()
    >>> x = Leaf(t, np.ones(3))
    >>> y = np.sum(x * 2.0)
    >>> rt = propagate(t, reverse_tape(y))
    >>> dot = to_dot(t, rt)
    >>> 'n1 [label="[1] multiply\\\\nfloat64[3]"' in dot
    True
    >>> "r1 -> r2 [dir=back]" in dot  # the adjoint of [2] flows back to [1]
    True
    >>> 'n0 [label="[0] x\\\\nfloat64[3]"' in to_dot(t, names={x: "x"})
    True
    """
    if rtape is not None and rtape.tape is not tape:
        raise ValueError("this reverse tape was made for another tape")
    labels = _names(tape, names)
    lines = [
        "digraph tape {",
        "  rankdir=TB;",
        f"  node [{_FONT}, height=0.3];",
        f"  edge [{_FONT}, arrowsize=0.6];",
    ]
    indent = "  "
    if rtape is not None:
        lines += ["  newrank=true;", "  subgraph cluster_tape {", '    label="tape";']
        indent = "    "
    for node in tape.records:
        lines += [indent + line for line in _record(node, tape, constants, labels)]
    if rtape is not None:
        lines += ["  }", "  subgraph cluster_reverse {", '    label="reverse tape";']
        lines += ["    " + line for line in _adjoints(tape, rtape)]
        lines.append("  }")
        for pos in range(len(tape.records)):
            lines.append(f"  {{rank=same; n{pos}; r{pos};}}")
    lines.append("}")
    return "\n".join(lines)


def draw(
    tape: Tape, rtape: ReverseTape | None = None, *, constants: bool = True, names: Any = None
) -> Any:
    """A ``graphviz.Source`` of the tape: it shows as SVG in Jupyter, and
    ``.render(filename, format="png")`` writes a file. Needs the ``graphviz`` package
    (``pip install graphviz``) and Graphviz's ``dot`` program.

    >>> import numpy as np
    >>> from tape import Tape, Leaf
    >>> t = Tape()
    >>> y = np.exp(Leaf(t, 1.0))
    >>> source = draw(t)  # doctest: +SKIP
    >>> source.render("tape", format="png")  # doctest: +SKIP
    'tape.png'
    """
    try:
        import graphviz
    except ImportError as error:
        raise ImportError(
            "drawing a tape needs the graphviz package: pip install graphviz "
            "(or pip install 'tape-ad[examples]'); tape.to_dot() needs nothing"
        ) from error
    return graphviz.Source(to_dot(tape, rtape, constants=constants, names=names))


def svg(tape: Tape, rtape: ReverseTape | None = None) -> str | None:
    """The tape as SVG text, or None where it cannot be rendered here: no ``graphviz``
    package, no ``dot`` program, or more than ``MAX_AUTO_RECORDS`` records. This is
    what a notebook shows for a ``Tape``.

    >>> from tape import Tape
    >>> svg(Tape()) is None or svg(Tape()).lstrip().startswith("<")
    True
    """
    if len(tape.records) > MAX_AUTO_RECORDS or shutil.which("dot") is None:
        return None
    try:
        return draw(tape, rtape).pipe(format="svg", encoding="utf-8")
    except Exception:  # noqa: BLE001 - a picture that fails must not break the REPL
        return None


# -- the pieces ----------------------------------------------------------------------------


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def _value_label(value: Any) -> str:
    if isinstance(value, (float, np.floating)) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind == "f"
    ):
        return f"{dtype_name(value)} {float(value):.4g}"  # a picture needs no 17 digits
    if np.ndim(value):
        return dtype_name(value)  # the shape says more than a preview that fits in a box
    return f"{dtype_name(value)} {_short(preview(value))}"


def _call_name(node: Node) -> str:
    name = function_name(node.f)
    simple = {k: v for k, v in node.kwargs.items() if isinstance(v, (int, float, str, tuple))}
    if simple:
        name += "(" + ", ".join(f"{k}={v!r}" for k, v in simple.items()) + ")"
    return _short(name)


def _names(tape: Tape, names: Any) -> dict:
    """``{position: name}`` from a dict keyed by nodes of ``tape`` or by positions."""
    labels = {}
    for key, name in (names or {}).items():
        if isinstance(key, Node):
            if key.tape is not tape:
                raise ValueError(f"the node named {name!r} is not on this tape")
            key = key.pos
        if not isinstance(key, int) or not 0 <= key < len(tape.records):
            raise ValueError(f"names: {key!r} is neither a node of this tape nor a position")
        labels[key] = str(name)
    return labels


def _record(node: Node, tape: Tape, constants: bool, labels: dict) -> list[str]:
    pos = node.pos
    if not _is_branch(node):
        label = f"[{pos}] {labels.get(pos, 'Leaf')}\n{_value_label(node.value)}"
        return [f"n{pos} [label={_quote(label)}, {_LEAF_STYLE}];"]
    call = _call_name(node) if pos not in labels else f"{labels[pos]} = {_call_name(node)}"
    label = f"[{pos}] {_short(call)}\n{_value_label(node.value)}"
    lines = [f"n{pos} [label={_quote(label)}, {_BRANCH_STYLE}];"]
    arguments = list(enumerate(node.args))
    many = len(arguments) > 1
    for i, arg in arguments:
        tag = f' [label="{i}"]' if many else ""
        if tape.owns(arg):
            lines.append(f"n{arg.pos} -> n{pos}{tag};")
        elif type(arg) in (list, tuple) and _on_tape(arg, tape):
            for j, element in enumerate(arg):
                if tape.owns(element):
                    lines.append(f'n{element.pos} -> n{pos} [label="{i}[{j}]"];')
        elif constants:
            name = f"c{pos}_{i}"
            text = _short(preview(arg)) if isinstance(arg, Node) else _constant_label(arg)
            lines.append(
                f"{name} [label={_quote(text)}, shape=box, fontsize=8, height=0.2, "
                "color=gray60, fontcolor=gray40, style=dashed];"
            )
            label = f', label="{i}"' if many else ""
            lines.append(f"{name} -> n{pos} [color=gray60, style=dashed{label}];")
    return lines


def _constant_label(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.ndim:
        return dtype_name(value)  # an array constant: its shape, not its values
    return _short(preview(value))


def _on_tape(arg: Any, tape: Tape) -> bool:
    if type(arg) in (list, tuple):
        return any(tape.owns(a) for a in arg)
    return tape.owns(arg)


def _adjoints(tape: Tape, rtape: ReverseTape) -> list[str]:
    lines = []
    for node in tape.records:
        pos = node.pos
        adjoint = rtape.adjoints[pos]
        if adjoint is None:
            label, style = f"[{pos}] unset", "style=dotted, fontcolor=gray50"
        else:
            label = f"[{pos}] adjoint\n{_value_label(adjoint)}"
            style = 'style="rounded,filled", fillcolor="#e3f4e1"'
        lines.append(f"r{pos} [label={_quote(label)}, shape=box, {style}];")
    for node in tape.records:
        if _is_branch(node):
            for arg in node.args:
                elements = arg if type(arg) in (list, tuple) else (arg,)
                for element in elements:
                    if tape.owns(element):
                        # drawn argument -> call so that ranks match the tape; the arrow
                        # points back, the way the adjoint flows
                        lines.append(f"r{element.pos} -> r{node.pos} [dir=back];")
    return lines


def _is_branch(node: Any) -> bool:
    return isinstance(node, Node) and hasattr(node, "f")  # a Leaf has no function


PICTURES.update(to_dot=to_dot, draw=draw, svg=svg)  # Tape.to_dot, Tape.draw, in Jupyter
