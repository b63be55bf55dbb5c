"""The layering rules of tape/ (stated in the docstring of tape/__init__.py), read from the
source with ``ast``: what each layer imports, anywhere in a module (an import inside a
function counts as much as one at the top), how long each module is, and that each
module has its test file."""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAPE = ROOT / "tape"
LAYERS = ("core", "runtime", "transforms", "tools")
MAX_CODE_LINES = 600

# Over the limit without a comment naming the speed their size buys: vmap's interpreter
# and compiled replay are being shrunk (their rules move to sensitivities/batching.py,
# their copies into one shared place). Each leaves this list once it is under the limit;
# nothing is added to it.
BEING_SHRUNK: set = set()


def _modules() -> list[Path]:
    return sorted(TAPE.rglob("*.py"))


def _name(path: Path) -> str:
    """``tape.core.records`` for tape/core/records.py, ``tape.core`` for its __init__."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for each name imported anywhere in the module, relative
    imports resolved (``name`` None for ``import module``)."""
    package = _name(path) if path.name == "__init__.py" else _name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found += [(node.lineno, module, alias.name) for alias in node.names]
    return found


def _targets(module: str, name: str | None) -> str:
    """The module an import reaches: ``from tape.core import records`` reaches
    tape.core.records, ``from tape.core.records import Tape`` tape.core.records."""
    folder = TAPE.parent / module.replace(".", "/")
    if name is not None and ((folder / f"{name}.py").exists() or (folder / name).is_dir()):
        return f"{module}.{name}"
    return module


def _layer(module: str) -> str | None:
    """``core``, ``transforms``, ``tools`` or ``scipy`` for a module of tape, ``tape`` for
    the package itself (its public names, which import every layer), None outside."""
    parts = module.split(".")
    if parts[0] != "tape":
        return None
    return parts[1] if len(parts) > 1 else "tape"


def violations(path: Path) -> list[str]:
    """Each import of the module at ``path`` that its layer forbids."""
    layer = _layer(_name(path))
    bad = []
    for line, module, name in _imports(path):
        target = _targets(module, name)
        reached = _layer(target)
        where = f"{path.relative_to(ROOT)}:{line}"
        if reached is None:
            continue
        if layer == "core" and reached != "core":
            bad.append(f"{where}: the engine imports {target} (core imports no layer above)")
        elif layer == "runtime" and reached not in ("core", "runtime"):
            bad.append(f"{where}: the runtime imports {target} (core and runtime only)")
        elif layer == "transforms":
            if reached not in ("core", "runtime", "transforms"):
                bad.append(
                    f"{where}: a transform imports {target} (core, runtime and transforms only)"
                )
            elif reached == "runtime" and target != "tape.runtime":
                bad.append(f"{where}: a transform enters the runtime other than by tape.runtime")
            elif (
                reached == "transforms"
                and target != _name(path)
                and name is not None
                and name.startswith("_")
            ):
                bad.append(f"{where}: a transform imports {target}.{name}, a private name")
    return bad


def circles() -> list[str]:
    """Each chain of modules of tape that imports back its first (the package itself, which
    imports every layer for its public names, left out)."""
    edges: dict[str, set[str]] = {}
    for path in _modules():
        edges[_name(path)] = {
            t
            for _, module, name in _imports(path)
            if _layer(t := _targets(module, name)) not in (None, "tape") and t != _name(path)
        }
    found, done = [], set()

    def visit(module: str, stack: list[str]) -> None:
        if module in stack:
            found.append(" -> ".join(stack[stack.index(module) :] + [module]))
            return
        if module in done:
            return
        for target in sorted(edges.get(module, ())):
            visit(target, stack + [module])
        done.add(module)

    for module in sorted(edges):
        visit(module, [])
    return found


def code_lines(source: str) -> int:
    """Lines of code: lines holding a token that is no comment, leaving docstrings out."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines: set[int] = set()
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (*skipped, tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


# a comment that names what the size buys, with a measured figure: "# speed: the inlined
# fast paths make a per-example gradient 1.8x faster (benchmarks/per_example.py)"
SPEED = re.compile(r"^\s*# speed: .*\d", re.MULTILINE)


def too_long(path: Path) -> str | None:
    source = path.read_text()
    n = code_lines(source)
    if n <= MAX_CODE_LINES or SPEED.search(source):
        return None
    return f"{path.relative_to(ROOT)}: {n} lines of code, over {MAX_CODE_LINES}"


def expected_test_file(path: Path) -> Path:
    """The test file of a module: tape/core/node.py is tested in tests/tape/core/
    test_node.py; tape/scipy/stats.py in tests/scipy/test_stats.py, a subpackage
    tape/scipy/sparse/ in tests/scipy/test_sparse.py, tape.scipy itself in
    tests/scipy/test_namespace.py."""
    rel = path.relative_to(TAPE)
    if rel.parts[0] == "scipy":
        name = "namespace" if rel == Path("scipy/__init__.py") else rel.parts[1]
        return ROOT / "tests" / "scipy" / f"test_{Path(name).stem}.py"
    return ROOT / "tests" / "tape" / rel.parent / f"test_{path.stem}.py"


def _tested_modules() -> list[Path]:
    """Every module of the layers and of tape.scipy (a subpackage of it counting as one
    module), but package markers and private helpers (``_forward``), which are tested
    through the modules that use them."""
    out = []
    for path in _modules():
        rel = path.relative_to(TAPE)
        if rel.parts[0] in LAYERS and not rel.name.startswith("_"):
            out.append(path)
        elif rel.parts[0] == "scipy" and (
            (len(rel.parts) == 2 and not rel.name.startswith("_"))
            or rel.name == "__init__.py"  # tape.scipy itself, or one of its subpackages
        ):
            out.append(path)
    return out


# -- the rules hold for tape ----------------------------------------------------------------


def test_every_module_is_in_a_layer():
    loose = [p.name for p in TAPE.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside core/, transforms/ and tools/: {loose}"
    assert {p.name for p in TAPE.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        *LAYERS,
        "scipy",
    }


def test_the_engine_imports_no_transform_or_tool_and_a_transform_no_tool():
    bad = [v for path in _modules() for v in violations(path)]
    assert bad == [], "\n".join(bad)


def test_no_module_imports_one_that_imports_it_back():
    assert circles() == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_the_size_limit_without_naming_the_speed_it_buys(path):
    rel = str(path.relative_to(ROOT))
    if rel in BEING_SHRUNK:
        pytest.xfail(f"{rel} is being shrunk below {MAX_CODE_LINES} lines of code")
    assert too_long(path) is None


def test_modules_being_shrunk_are_still_too_long():
    # a module that is short enough leaves BEING_SHRUNK, so that the limit holds for it
    for rel in sorted(BEING_SHRUNK):
        assert too_long(ROOT / rel) is not None, f"{rel} is short enough: take it off the list"


def test_every_module_has_its_test_file():
    missing = [
        f"{p.relative_to(ROOT)}: {expected_test_file(p).relative_to(ROOT)}"
        for p in _tested_modules()
        if not expected_test_file(p).exists()
    ]
    assert missing == [], "\n".join(missing)


def test_every_test_file_of_tape_tests_a_module():
    modules = {expected_test_file(p) for p in _tested_modules()}
    strays = [
        str(t.relative_to(ROOT))
        for layer in LAYERS
        for t in (ROOT / "tests" / "tape" / layer).glob("test_*.py")
        if t not in modules
    ]
    assert strays == []


# -- the checks catch what they are meant to ---------------------------------------------


def _module(tmp_path: Path, rel: str, source: str) -> Path:
    """A module written at ``rel`` under a copy of tape's layout, with ROOT moved there."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


@pytest.fixture
def fake_tape(tmp_path, monkeypatch):
    for layer in LAYERS:
        _module(tmp_path, f"tape/{layer}/__init__.py", "")
    _module(tmp_path, "tape/core/records.py", "")
    _module(tmp_path, "tape/transforms/vmap.py", "")
    _module(tmp_path, "tape/tools/graph.py", "")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "TAPE", tmp_path / "tape")
    return tmp_path


@pytest.mark.parametrize(
    "rel, source",
    [
        ("tape/core/node.py", "from ..tools.graph import to_dot\n"),
        ("tape/core/node.py", "def f():\n    from ..transforms import vmap\n"),  # lazy
        ("tape/core/node.py", "def f():\n    import tape.tools.graph\n"),
        ("tape/core/node.py", "from tape import grad\n"),  # the public names: every layer
        ("tape/core/node.py", "from .. import scipy\n"),
        ("tape/transforms/grad.py", "from ..tools.checking import check_grad\n"),
        ("tape/transforms/grad.py", "def f():\n    from tape.tools import graph\n"),
        ("tape/transforms/grad.py", "from .vmap import _rules\n"),
        ("tape/transforms/grad.py", "from tape.transforms.vmap import _rules\n"),
    ],
)
def test_a_forbidden_import_is_found(fake_tape, rel, source):
    assert violations(_module(fake_tape, rel, source)) != []


@pytest.mark.parametrize(
    "rel, source",
    [
        ("tape/core/node.py", "from . import records\nfrom .records import Tape\n"),
        ("tape/core/node.py", "import numpy as np\nfrom sensitivities import registry\n"),
        ("tape/transforms/grad.py", "from ..core.records import Tape\nfrom .vmap import vmap\n"),
        ("tape/tools/checking.py", "from ..transforms.vmap import _rules\nimport tape\n"),
    ],
)
def test_an_allowed_import_passes(fake_tape, rel, source):
    assert violations(_module(fake_tape, rel, source)) == []


def test_a_circle_is_found(fake_tape):
    _module(fake_tape, "tape/core/node.py", "def f():\n    from .records import Tape\n")
    _module(fake_tape, "tape/core/records.py", "from .node import Node\n")
    assert circles() == ["tape.core.node -> tape.core.records -> tape.core.node"]


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    source = textwrap.dedent(
        '''\
        """A module.

        More."""

        # a comment
        x = (
            1,
        )


        def f():
            """Doc."""
            return """a
        b"""  # a string that is no docstring is code
        '''
    )
    assert code_lines(source) == 3 + 1 + 2  # x = (1,), def f, the two-line return


def test_a_long_module_needs_a_comment_naming_its_speed(fake_tape):
    body = "".join(f"x{i} = {i}\n" for i in range(MAX_CODE_LINES + 1))
    long = _module(fake_tape, "tape/core/long.py", body)
    assert too_long(long) is not None
    long.write_text("# speed: one loop inline, 1.4x faster (benchmarks/run.py)\n" + body)
    assert too_long(long) is None
    long.write_text("# speed: faster\n" + body)  # no figure: no measurement named
    assert too_long(long) is not None
