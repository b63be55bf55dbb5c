"""Tests of tape.scipy, one module per SciPy submodule."""
