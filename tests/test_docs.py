"""The documentation: it builds in strict mode, its examples run, and it covers the API."""

import doctest
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tape

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# pages generated or kept elsewhere, with their own tests
OWN_TESTS = {"errors.md", "rules.md"}
GUIDE = sorted(
    p for p in DOCS.rglob("*.md") if p.name not in OWN_TESTS and "_ext" not in p.parts
)


def test_every_public_name_has_a_docstring_with_an_example():
    missing = [
        name for name in tape.__all__ if ">>>" not in (getattr(tape, name).__doc__ or "")
    ]
    assert not missing, f"public names whose docstring has no >>> example: {missing}"


def test_every_public_name_is_in_the_api_reference():
    api = (DOCS / "api.md").read_text()
    documented = set(re.findall(r"^::: (?:tape|sensitivities)\.(?:\w+\.)*?(\w+)$", api, re.M))
    documented |= set(re.findall(r"^      heading: (\w+)$", api, re.M))
    missing = sorted(set(tape.__all__) - documented)
    assert not missing, f"add these to docs/api.md: {missing}"


@pytest.mark.parametrize("page", GUIDE, ids=[str(p.relative_to(DOCS)) for p in GUIDE])
def test_the_examples_in_the_guide_run(page):
    if ">>>" in page.read_text() and "scipy" in page.read_text():
        pytest.importorskip("scipy")
    result = doctest.testfile(
        str(page),
        module_relative=False,
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS,
        verbose=False,
        report=True,
    )
    assert result.failed == 0, f"{result.failed} example(s) failed in {page.name}"


# -- how the pages read: every session fenced as pycon, every program runs as a file --------

MARKDOWN = [*(p for p in sorted(DOCS.rglob("*.md")) if "_ext" not in p.parts), ROOT / "README.md"]
MARKDOWN_IDS = [str(p.relative_to(ROOT)) for p in MARKDOWN]
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def fenced_blocks(text):
    """The page's fenced blocks as ``(language, line number, body)``, and its lines
    outside any fence as ``(line number, line)``."""
    blocks, outside = [], []
    opening = None  # (fence, language, line number, body lines) of the block we are in
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if opening is None and match:
            opening = (match.group(2), match.group(3), number, [])
        elif opening is not None and line.strip() == opening[0]:
            _, language, start, body = opening
            blocks.append((language, start, "\n".join(body)))
            opening = None
        elif opening is not None:
            opening[3].append(line)
        else:
            outside.append((number, line))
    return blocks, outside


def test_fenced_blocks_reads_fences_as_mkdocs_does():
    text = "a\n>>> bare\n```pycon\n>>> 1\n1\n```\n  ```python\n  x = 1\n  ```\n"
    blocks, outside = fenced_blocks(text)
    assert blocks == [("pycon", 3, ">>> 1\n1"), ("python", 7, "  x = 1")]
    assert outside == [(1, "a"), (2, ">>> bare")]


@pytest.mark.parametrize("page", MARKDOWN, ids=MARKDOWN_IDS)
def test_every_session_is_inside_a_fence(page):
    # Markdown reads a bare >>> line as three nested block quotes
    _, outside = fenced_blocks(page.read_text())
    bare = [number for number, line in outside if line.lstrip().startswith(">>>")]
    assert not bare, f"{page.name}: >>> outside a ```pycon fence on lines {bare}"


@pytest.mark.parametrize("page", MARKDOWN, ids=MARKDOWN_IDS)
def test_every_session_is_fenced_as_pycon(page):
    # only pycon tells the copy button which lines are prompts and output
    blocks, _ = fenced_blocks(page.read_text())
    wrong = [n for lang, n, body in blocks if lang != "pycon" and body.lstrip().startswith(">>>")]
    assert not wrong, f"{page.name}: sessions fenced as other than pycon on lines {wrong}"


def programs():
    """Every ```python block that imports tape: a program a reader saves to a file and runs."""
    found = []
    for page in MARKDOWN:
        for language, number, body in fenced_blocks(page.read_text())[0]:
            if language == "python" and re.search(r"^\s*(import tape|from tape)\b", body, re.M):
                found.append(pytest.param(textwrap.dedent(body), id=f"{page.name}:{number}"))
    return found


@pytest.mark.parametrize("program", programs())
def test_every_program_in_the_pages_runs_as_a_file(program, tmp_path):
    imported = re.findall(r"^\s*(?:import|from) (\w+)", program, re.M)
    for module in dict.fromkeys(imported):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}, which is not installed")
    if "cupy" in imported:
        import cupy

        try:
            cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError:
            pytest.skip("needs a GPU for CuPy")
    script = tmp_path / "program.py"
    script.write_text(program)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*.md"):
        if "_ext" not in page.parts:
            assert str(page.relative_to(DOCS)) in nav, f"{page} is not in mkdocs.yml's nav"


def load_extension():
    path = DOCS / "_ext" / "doctest_blocks.py"
    spec = importlib.util.spec_from_file_location("doctest_blocks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_doctest_sessions_render_as_code_blocks():
    pytest.importorskip("griffe")
    fence = load_extension().fence
    text = "Words.\n\n>>> f(1)  # doctest: +SKIP\n2\n\nMore words.\n    >>> g()\n"
    assert fence(text) == (
        "Words.\n\n```pycon\n>>> f(1)\n2\n```\n\nMore words.\n    ```pycon\n    >>> g()\n    ```"
    )


def test_the_documentation_builds_in_strict_mode(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module)
    mkdocs = shutil.which("mkdocs") or shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    command = [mkdocs] if mkdocs else [sys.executable, "-m", "mkdocs"]
    result = subprocess.run(
        [*command, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("grad", "Tape", "to_dot"):
        assert f'id="tape.{name}"' in api or f'id="tape.tools.graph.{name}"' in api
    assert "&gt;&gt;&gt;" in api  # the docstrings' examples are there, as code
    # the engine's hooks in a section of their own, after everything users call
    assert api.find('id="tape.Tape.add"') > api.find('id="extending-the-engine"') > api.find(
        'id="tape.Tape.text"'
    )
    # the grad guide's table of other transforms renders as one table, vmap in it
    guide = (tmp_path / "site" / "guide" / "grad" / "index.html").read_text()
    (table,) = re.findall(r"<table>.*?</table>", guide, re.S)
    for name in ("vjp(f, *args)", "vmap(f, in_axes=0, out_axes=0)", "stop_gradient(x)",
                 "at(x)[i].set(v)"):  # fmt: skip
        assert f"<code>{name}</code>" in table, name
    assert table.count("<tr>") == 11 and "| <code>" not in guide
    # the copy button leaves out the prompts and output of a session
    assert guide.count('class="gp"') > 10 and "stylesheets/copy.css" in guide
    css = (tmp_path / "site" / "stylesheets" / "copy.css").read_text()
    assert "[data-md-copying] .gp" in css and "[data-md-copying] .go" in css


def test_the_performance_guide_quotes_the_latest_results():
    guide = (DOCS / "guide" / "performance.md").read_text()
    small = (ROOT / "benchmarks" / "results-small-arrays.md").read_text()
    section = guide.split("## Loops over small arrays", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) == 5 and all(row in small.splitlines() for row in rows)
    text = " ".join(section.split())
    ratios = {}
    compiles = []
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for column, cell in zip(("hand", "tape", "compiled", "autograd", "torch", "jax", "jit"),
                                cells[1:]):  # fmt: skip
            found = re.search(r"\((\d+\.\d+)×\)", cell)
            if found:
                ratios.setdefault(column, []).append(float(found.group(1)))
        compiles += [float(c) for c in re.findall(r"\+ (\d+(?:\.\d+)?) s compile", cells[-1])]
    compiled = ratios["compiled"]
    assert f"({min(compiled):.1f} to {max(compiled):.1f} times here)" in text
    assert f"about {round(statistics.mean(ratios['tape']))} times" in text
    assert f"{round(statistics.mean(ratios['tape']))} times the hand-written gradient" in text
    faster = 1 / max(ratios["jit"])
    assert f"about {round(faster, -1):.0f} times faster than the hand-written NumPy" in text
    assert f"({min(compiles):.0f} to {max(compiles):.0f} s here" in text
    results = (ROOT / "benchmarks" / "results.md").read_text()
    (matmul,) = [line for line in results.splitlines() if line.startswith("| `sum(tanh(A @ B)")]
    ratio = re.search(r"\((\d+\.\d+)×\)", matmul.split("|")[3]).group(1)
    assert f"about {ratio} times the hand-written gradient at 1000 × 1000" in " ".join(
        guide.split()
    )


def test_the_index_points_to_every_guide_page():
    index = (DOCS / "index.md").read_text().split("## Where to go next", 1)[1]
    for page in sorted((DOCS / "guide").glob("*.md")):
        assert f"(guide/{page.name})" in index, f"docs/index.md does not point to {page.name}"
    assert "(glossary.md)" in index


def results_row(prefix):
    results = (ROOT / "benchmarks" / "results.md").read_text()
    (row,) = [line for line in results.splitlines() if line.startswith(prefix)]
    return [c.strip() for c in row.strip().strip("|").split("|")]


def ratio_in(cell):
    return float(re.search(r"\((\d+\.\d+)×\)", cell).group(1))


def test_the_guides_mlp_and_per_example_figures_hold_the_latest_results():
    guide = " ".join((DOCS / "guide" / "performance.md").read_text().split())
    mlp = results_row("| MLP value and gradient")
    assert f"`tape` about {ratio_in(mlp[2]):.1f} times" in guide
    assert f"`compile_grad` (about {ratio_in(mlp[3]):.2f} times)" in guide
    vmap = (DOCS / "guide" / "vmap.md").read_text()
    per_example = results_row("| per-example gradients of the MLP")
    ranges = {
        "NumPy by hand": (per_example[1], None),
        "tape `vmap(compile_grad(loss, ...))`": (per_example[3], ratio_in(per_example[3])),
        "tape `vmap(grad(loss))`": (per_example[2], ratio_in(per_example[2])),
    }
    for title, (cell, ratio) in ranges.items():
        (line,) = [row for row in vmap.splitlines() if row.startswith(f"| {title}")]
        low, high = map(float, re.search(r"(\d+\.\d+)–(\d+\.\d+) ms", line).groups())
        value, unit = re.match(r"(\d+(?:\.\d+)?) (µs|ms)", cell).groups()
        ms = float(value) / (1000 if unit == "µs" else 1)
        assert low <= round(ms, 2) <= high, (title, cell, line)
        if ratio is not None:
            rlow, rhigh = map(float, re.search(r"\| (\d+\.\d+)–(\d+\.\d+) \|", line).groups())
            assert rlow <= ratio <= rhigh, (title, ratio, line)
