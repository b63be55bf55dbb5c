"""tape.scipy is laid out as SciPy is, imports without tape's engine, and hands out
SciPy's own for every name it has no counterpart for."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")

MODULES = ["stats", "linalg", "special", "signal", "integrate", "interpolate", "optimize",
           "sparse", "spatial"]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", [*MODULES, "linalg.blas"])
def test_every_module_imports_and_falls_through_to_scipy(name):
    ours = importlib.import_module(f"tape.scipy.{name}")
    theirs = importlib.import_module(f"scipy.{name}")
    for public in ours.__all__:
        assert hasattr(theirs, public), f"scipy.{name} has no {public}"
        assert getattr(ours, public) is not None
    assert ">>>" in (ours.__doc__ or "") or not ours.__all__
    uncovered = next(n for n in sorted(dir(theirs)) if not n.startswith("_")
                     and n not in ours.__all__)  # fmt: skip
    assert getattr(ours, uncovered) is getattr(theirs, uncovered)
    with pytest.raises(AttributeError):
        ours.__no_such_name__  # noqa: B018


@pytest.mark.parametrize("name", [*MODULES[:-1], "sparse.linalg", "linalg.blas"])
def test_dir_lists_the_counterparts_and_scipys_names_not_the_modules_own(name):
    ours = importlib.import_module(f"tape.scipy.{name}")
    theirs = importlib.import_module(f"scipy.{name}")
    listed = dir(ours)
    assert set(ours.__all__) <= set(listed)
    assert {n for n in dir(theirs) if not n.startswith("_")} <= set(listed)
    for internal in ("np", "importlib", "forward", "listing", "annotations", "Any"):
        if not hasattr(theirs, internal):
            assert internal not in listed, internal
    assert not [n for n in listed if n.startswith("_")]


def test_the_package_loads_its_modules_lazily():
    import tape.scipy

    assert tape.scipy.stats is importlib.import_module("tape.scipy.stats")
    assert sorted(tape.scipy.__all__) == sorted(MODULES)


def test_the_public_face_imports_no_engine_module():
    # the redirection of SciPy's functions talks to the runtime layer's public face only
    for path in (ROOT / "tape" / "scipy").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith("tape"), (path.name, node.module)
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                allowed = (path.name, node.level, node.module) == ("redirect.py", 2, "runtime")
                assert allowed, f"{path.name} reaches into tape's engine"


def test_importing_tape_does_not_import_scipy_signal():
    code = "import sys, tape; print('scipy.signal' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout  # fmt: skip
    assert out.strip() == "False"
