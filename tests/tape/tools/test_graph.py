"""Pictures of the tape: DOT source always, SVG where graphviz can render it."""

import re
import shutil

import numpy as np
import pytest

from tape import Leaf, Tape, grad, primitive, propagate, reverse_tape, sensitivity
from tape.tools import graph

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


def nodes_and_edges(dot):
    nodes = dict(re.findall(r'^\s*(\w+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M))
    edges = re.findall(r"^\s*(\w+) -> (\w+)", dot, re.M)
    return nodes, edges


def small_tape():
    t = Tape()
    x = Leaf(t, np.ones((2, 3)))
    w = Leaf(t, 0.5)
    y = np.sum(np.sin(x) * w, axis=0)
    z = np.sum(y**2)
    return t, x, w, z


def test_leaves_branches_and_an_edge_from_every_argument():
    t, x, w, z = small_tape()
    nodes, edges = nodes_and_edges(t.to_dot(constants=False))
    assert set(nodes) == {f"n{i}" for i in range(len(t))}
    assert nodes["n0"] == "[0] Leaf\\nfloat64[2,3]"
    assert nodes["n1"] == "[1] Leaf\\nfloat64 0.5"
    assert nodes["n2"] == "[2] sin\\nfloat64[2,3]"
    assert nodes["n4"] == "[4] sum(axis=0)\\nfloat64[3]"
    expected = [
        (f"n{a.pos}", f"n{b.pos}")
        for b in t
        if hasattr(b, "f")
        for a in b.args
        if hasattr(a, "tape") and a.tape is t
    ]
    assert sorted(edges) == sorted(expected)
    assert 'shape=ellipse' in t.to_dot().split("n0 [", 1)[1].split("\n", 1)[0]


def test_constants_are_drawn_apart_and_can_be_left_out():
    t = Tape()
    x = Leaf(t, np.ones(3))
    x * np.arange(3.0) + 2.0
    with_constants, _ = nodes_and_edges(t.to_dot())
    assert {"c1_1", "c2_1"} <= set(with_constants)
    assert with_constants["c1_1"] == "float64[3]" and with_constants["c2_1"] == "2.0"
    assert not [n for n in nodes_and_edges(t.to_dot(constants=False))[0] if n.startswith("c")]


def test_list_arguments_get_one_edge_per_node_element():
    t = Tape()
    a, b = Leaf(t, np.ones(2)), Leaf(t, np.zeros(3))
    np.concatenate([a, b, np.ones(1)])
    dot = t.to_dot()
    assert 'n0 -> n2 [label="0[0]"]' in dot and 'n1 -> n2 [label="0[1]"]' in dot


def test_the_reverse_tape_is_drawn_beside_with_its_adjoints():
    t = Tape()
    x = Leaf(t, 3.0)
    unused = Leaf(t, 1.0)  # never reaches the output: its adjoint stays unset
    y = x * x
    rt = propagate(t, reverse_tape(y))
    dot = t.to_dot(rt)
    nodes, edges = nodes_and_edges(dot)
    assert "subgraph cluster_tape" in dot and "subgraph cluster_reverse" in dot
    assert nodes["r0"] == "[0] adjoint\\nfloat64 6"  # d(x*x)/dx at 3, independent of tape
    assert nodes[f"r{unused.pos}"] == "[1] unset"
    assert edges.count(("r0", "r2")) == 2  # x is both arguments of multiply
    for pos in range(len(t)):
        assert f"{{rank=same; n{pos}; r{pos};}}" in dot


def test_a_reverse_tape_of_another_tape_is_refused():
    t1, *_ = small_tape()
    t2, _, _, z2 = small_tape()
    with pytest.raises(ValueError, match="another tape"):
        t1.to_dot(propagate(t2, reverse_tape(z2)))


def test_labels_are_quoted_for_dot():
    @primitive
    def tagged(x, tag):
        return x * 2.0

    @sensitivity(tagged, 0)
    def _(y, ybar, x, tag):
        return 2.0 * ybar

    t = Tape()
    tagged(Leaf(t, 1.0), 'say "hi" \\ bye')
    nodes, _ = nodes_and_edges(t.to_dot())
    assert nodes["c1_1"] == "'say \\\"hi\\\" \\\\\\\\ bye'"


def test_nodes_of_an_outer_tape_are_constants_on_the_inner_one():
    pictures = []

    def f(x):
        def inner(y):
            out = x * y
            pictures.append(out.tape.to_dot())
            return out

        return grad(inner)(1.0)[0]

    grad(f)(2.0)
    nodes, edges = nodes_and_edges(pictures[0])
    assert nodes["c1_0"].startswith("<Leaf of tape")
    assert edges == [("c1_0", "n1"), ("n0", "n1")]


def test_long_labels_are_cut():
    t = Tape()
    x = Leaf(t, np.ones(2))
    np.sum(x, axis=0, keepdims=True, where=np.array([True, False]))
    nodes, _ = nodes_and_edges(t.to_dot())
    assert len(nodes["n1"].split("\\n")[0]) <= len("[1] ") + graph._LABEL_CHARS


@needs_dot
def test_dot_source_renders_and_a_tape_shows_as_svg_in_notebooks():
    pytest.importorskip("graphviz")
    t, x, w, z = small_tape()
    svg = t._repr_svg_()
    assert svg is not None and "<svg" in svg and "sin" in svg
    rt = propagate(t, reverse_tape(z))
    assert "adjoint" in graph.svg(t, rt)


def test_no_picture_without_dot_or_for_long_tapes(monkeypatch):
    t = Tape()
    x = Leaf(t, 1.0)
    for _ in range(graph.MAX_AUTO_RECORDS):
        x = x + 1.0
    assert t._repr_svg_() is None  # the text repr stays, rather than a huge drawing
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert Tape()._repr_svg_() is None


def test_draw_without_the_graphviz_package_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_graphviz(name, *args, **kwargs):
        if name == "graphviz":
            raise ImportError("no graphviz")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_graphviz)
    with pytest.raises(ImportError, match="pip install graphviz"):
        Tape().draw()


@needs_dot
def test_jupyter_shows_the_tape_as_a_picture_beside_its_text():
    pytest.importorskip("graphviz")
    formatters = pytest.importorskip("IPython.core.formatters")
    t, *_ = small_tape()
    data, _ = formatters.DisplayFormatter().format(t)
    assert data["text/plain"] == repr(t)
    assert "<svg" in data["image/svg+xml"]


def test_records_can_be_given_names():
    t = Tape()
    W = Leaf(t, np.ones((3, 2)))
    x = Leaf(t, np.ones(3))
    h = np.tanh(x @ W)
    y = np.sum(h)
    dot = t.to_dot(names={W: "W", x: "x", h: "hidden", 2: "z"})
    assert 'n0 [label="[0] W\\nfloat64[3,2]"' in dot
    assert 'n1 [label="[1] x\\nfloat64[3]"' in dot
    assert 'n3 [label="[3] hidden = tanh\\nfloat64[2]"' in dot
    assert 'n4 [label="[4] sum\\nfloat64' in dot and y.pos == 4
    assert 'n2 [label="[2] z = matmul\\nfloat64[2]"' in dot  # by position
    assert t.to_dot() == graph.to_dot(t, names=None)  # no names, the labels as before
    with pytest.raises(ValueError, match="not on this tape"):
        t.to_dot(names={Leaf(Tape(), 1.0): "z"})
    with pytest.raises(ValueError, match="neither a node of this tape nor a position"):
        t.to_dot(names={99: "z"})
