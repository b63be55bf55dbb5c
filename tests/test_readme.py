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


# -- every figure the README quotes comes from the registry or the benchmark results -------


def rules_doc():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rules_doc", ROOT / "scripts" / "rules_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_counts_are_the_registrys():
    generator = rules_doc()
    counts = generator.counts()
    differentiable = counts["rule"] + counts["implementation"]
    assert differentiable + counts["non-differentiable"] == counts["total"]
    text = " ".join((ROOT / "README.md").read_text().split())
    # the headline counts what a reader takes it for: functions with a derivative
    assert f"## {differentiable} differentiable functions, every rule checked" in text
    assert (
        f"differentiates **{differentiable} NumPy and SciPy functions** ({counts['rule']} with "
        f"dedicated rules, {counts['implementation']} as implementations in terms of other "
        f"NumPy calls), and knows {counts['non-differentiable']} more that are "
        "non-differentiable"
    ) in text
    assert f"lists all {counts['total']} by family" in text
    special = generator.functions_by_family()["special"]
    special_differentiable = sum(not kind.startswith("non-differentiable") for _, kind in special)
    assert f"FFTs; {special_differentiable} `scipy.special` functions." in text
    rules = (ROOT / "docs" / "rules.md").read_text()
    assert f"## SciPy special functions ({counts['special']})" in rules
    assert "_lambertw" not in rules and "## numpy_extra" not in rules


def test_the_readme_lists_every_example_and_the_transforms():
    text = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"python (examples/\w+\.py)", text))
    present = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}
    assert listed == present
    transforms = text.split("## Transforms", 1)[1].split("```", 1)[0]
    import tape

    for name in ("jvp", "vjp", "jacobian", "hessian", "hvp", "vmap", "checkpoint",
                 "stop_gradient", "check_grad", "compile_grad", "at"):  # fmt: skip
        assert f"`{name}`" in transforms and name in tape.__all__, name


def test_the_readme_describes_the_extras_the_tests_install():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    said = " ".join((ROOT / "README.md").read_text().split("## A tape by hand")[0].split())
    words = {"pytest": "pytest", "hypothesis": "hypothesis", "scipy": "SciPy", "ruff": "ruff",
             "ipython": "IPython", "scikit-learn": "scikit-learn", "statsmodels": "statsmodels",
             "lifelines": "lifelines", "matplotlib": "matplotlib", "tqdm": "tqdm",
             "graphviz": "graphviz",
             "dask": "Dask", "distributed": "Dask", "mkdocs": "mkdocs",
             "mkdocs-material": "Material", "mkdocstrings": "mkdocstrings"}  # fmt: skip
    for extra in ("test", "examples", "docs"):
        for requirement in extras[extra]:
            name = re.split(r"[\[<>=]", requirement)[0]
            assert words[name] in said, f"the README does not say that [{extra}] installs {name}"


UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "B": 1.0, "KiB": 1024.0}


def figures(cell):
    """The (number, unit) figures of a table cell, leaving out ratios (``1.37×``)."""
    return [
        (float(number), unit)
        for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(ns|µs|ms|KiB|B|s)\b", cell)
    ]


def table_rows(text):
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def agrees(short, full):
    """``short`` (the README's 3.5 µs) is ``full`` (the results' 3.45 µs) rounded to the
    digits the README shows."""
    (a, unit_a), (b, unit_b) = short, full
    if unit_a != unit_b:
        return False
    digits = len(re.sub(r"\D", "", f"{a:g}").lstrip("0")) or 1
    return float(f"{b:.{digits}g}") == a


README_ROWS = {
    "scalar chain, per op": "scalar chain, 12,000 ops: time per op",
    "length-10 chain, per op": "same chain on length-10 vectors: time per op",
    "MLP value and gradient": "MLP value and gradient (batch 64, 64-128-10)",
    "`sum(tanh(A @ B) @ C)`, 1000²": "`sum(tanh(A @ B) @ C)`, 1000×1000",
    "per-example MLP gradients, `vmap(grad)`, batch 64":
        "per-example gradients of the MLP, `vmap(grad)` (batch 64; hand-written: `einsum`)",
    "memory per recorded scalar op": "memory per recorded scalar op (RSS)",
}  # fmt: skip


def test_the_readme_benchmark_figures_are_the_latest_results():
    section = (ROOT / "README.md").read_text().split("## Performance", 1)[1].split("\n## ")[0]
    readme = table_rows(section)
    results = table_rows((ROOT / "benchmarks" / "results.md").read_text().split("Peak memory")[0])
    assert readme.pop("workload") == results.pop("workload")  # the same columns
    assert set(readme) == set(README_ROWS)
    for title, cells in readme.items():
        full = results[README_ROWS[title]]
        for column, (short_cell, full_cell) in enumerate(zip(cells, full)):
            short, long = figures(short_cell), figures(full_cell)
            assert len(short) <= len(long), (title, column, short_cell, full_cell)
            for s, f in zip(short, long):
                assert agrees(s, f), f"{title}, column {column + 1}: {short_cell} vs {full_cell}"
