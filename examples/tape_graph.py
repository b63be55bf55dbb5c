"""Draw the tape of a small model, and its reverse tape of adjoints beside it.

Records one forward pass of a one-hidden-layer network's loss, propagates the adjoints,
and writes the picture as Graphviz DOT source (no dependency), plus PNG and SVG where
the ``graphviz`` package and Graphviz's ``dot`` program are installed. In Jupyter, a
``Tape`` shows as this picture by itself.

    python examples/tape_graph.py            # writes examples/output/tape_graph.{dot,png,svg}
    python examples/tape_graph.py --quick    # the DOT source only
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np

from tape import Leaf, Tape, propagate, reverse_tape

HERE = Path(__file__).resolve().parent


def record(rng):
    """A tape of ``mean((tanh(X W + b) v - y)^2)`` with W, b and v as its leaves."""
    X = rng.standard_normal((8, 3))
    y = rng.standard_normal(8)
    t = Tape()
    W = Leaf(t, rng.standard_normal((3, 4)))
    b = Leaf(t, np.zeros(4))
    v = Leaf(t, rng.standard_normal(4))
    hidden = np.tanh(X @ W + b)
    loss = np.mean((hidden @ v - y) ** 2)
    return t, loss, {W: "W", b: "b", v: "v", hidden: "hidden", loss: "loss"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="write the DOT source only")
    parser.add_argument("--out", type=Path, default=HERE / "output", help="where files go")
    args = parser.parse_args(argv)

    t, loss, names = record(np.random.default_rng(0))
    rt = propagate(t, reverse_tape(loss, 1.0))
    print(t)
    print(rt)

    args.out.mkdir(parents=True, exist_ok=True)
    dot = args.out / "tape_graph.dot"
    dot.write_text(t.to_dot(rt, names=names))
    print(f"DOT source written to {dot}")
    if args.quick:
        print("--quick: no PNG or SVG drawn (run without --quick to draw them)")
        return t
    try:
        import graphviz  # noqa: F401
    except ImportError:
        print("no PNG or SVG drawn: the graphviz package is missing (pip install graphviz)")
        return t
    if shutil.which("dot") is None:
        print(
            "no PNG or SVG drawn: Graphviz's dot program is not installed (apt-get install "
            "graphviz, brew install graphviz, or conda install graphviz); the DOT source "
            "written above renders with it: dot -Tpng tape_graph.dot -o tape_graph.png"
        )
        return t
    for fmt in ("png", "svg"):
        path = t.draw(rt, names=names).render(args.out / "tape_graph", format=fmt, cleanup=True)
        print(f"picture written to {path}")
    return t


if __name__ == "__main__":
    main()
