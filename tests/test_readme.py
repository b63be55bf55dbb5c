"""The README's commands are the ones CI and users run."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_opens_with_the_demo_and_the_test_command():
    demo, tests = readme_commands()[:2]
    assert "examples/quickstart.py" in demo and demo.startswith("pip install")
    assert tests.startswith("pip install -e") and tests.endswith("python -m pytest")
    extras = tests.split('".[', 1)[1].split(']"', 1)[0].split(",")
    assert {"test", "examples", "docs"} <= set(extras)  # every test can run, none skips


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_the_examples_the_readme_names_exist():
    for name in re.findall(r"python (examples/\w+\.py)", (ROOT / "README.md").read_text()):
        assert (ROOT / name).is_file(), name


def test_the_quickstart_runs_and_shows_the_worked_example(monkeypatch):
    import contextlib
    import io
    import runpy

    monkeypatch.setattr(sys, "argv", ["quickstart.py"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(ROOT / "examples" / "quickstart.py"), run_name="__main__")
    text = out.getvalue()
    assert "(1.6065471361170487, 0.6791074260357777)" in text
    assert "f=log1pexp" in text and "np.float64" not in text
