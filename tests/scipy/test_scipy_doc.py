"""docs/guide/scipy.md is generated from tape.scipy and the registry, and kept current."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("scipy")

ROOT = Path(__file__).resolve().parents[2]


def test_scipy_guide_is_current():
    spec = importlib.util.spec_from_file_location("scipy_doc", ROOT / "scripts" / "scipy_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "guide" / "scipy.md").read_text() == module.render(), (
        "docs/guide/scipy.md is out of date: run python scripts/scipy_doc.py"
    )
