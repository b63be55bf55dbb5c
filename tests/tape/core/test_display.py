"""How values, records and tapes read in the REPL: dtype and shape, then a short preview,
against strings written out by hand."""

import numpy as np

from tape import Leaf, Tape
from tape.core.display import dtype_name, preview


def test_dtype_names_add_the_shape_of_arrays_only():
    assert dtype_name(0.5) == "float64"
    assert dtype_name(np.float32(0.5)) == "float32"
    assert dtype_name(np.complex128(1j)) == "complex128"
    assert dtype_name(np.zeros((3, 4))) == "float64[3,4]"
    assert dtype_name(np.zeros(5, dtype=np.float32)) == "float32[5]"
    assert dtype_name(Leaf(Tape(), np.ones(2, dtype=complex))) == "complex128[2]"


def test_scalars_read_as_themselves_without_numpys_wrapper():
    assert preview(0.5) == "0.5"
    assert preview(np.float64(0.1)) == "0.1"
    assert preview(np.float32(0.25)) == "0.25"
    assert preview(np.array(2.5)) == "2.5"
    assert preview(3) == "3"


def test_arrays_read_on_one_line_with_the_middle_cut():
    assert preview(np.arange(3.0)) == "[0., 1., 2.]"
    assert preview(np.array([[1.0, 0.0], [0.0, 1.0]])) == "[[1., 0.], [0., 1.]]"
    assert preview(np.arange(10.0)) == "[0., 1., ..., 8., 9.]"
    assert preview(np.array([0.123456, 0.654321])) == "[0.1235, 0.6543]"


def test_a_node_among_arguments_reads_as_its_place_on_its_tape():
    t = Tape()
    x = Leaf(t, 0.5)
    y = np.sin(x)
    assert preview(x) == f"<Leaf of tape {t.level} at [0]>"
    assert preview(y) == f"<Branch of tape {t.level} at [1]>"


def test_arrays_show_dtype_shape_and_a_short_preview():
    t = Tape()
    a = Leaf(t, np.arange(12.0).reshape(3, 4))
    b = Leaf(t, np.ones((4, 4), dtype=np.float32))
    c = a @ b
    assert repr(a) == "Leaf{float64[3,4]} [[0., 1., 2., 3.], [4., 5., 6., 7.], [8., 9., 10., 11.]]"
    assert repr(c).startswith("Branch{float64[3,4]} [[") and repr(c).endswith(" f=matmul")
    big = Leaf(t, np.zeros(1000))
    assert repr(big) == "Leaf{float64[1000]} [0., 0., ..., 0., 0.]"
    assert repr(Leaf(t, np.float32(0.1))) == "Leaf{float32} 0.1"
    assert "np.float" not in repr(t)
