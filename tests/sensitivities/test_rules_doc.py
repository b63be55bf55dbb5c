"""docs/rules.md is generated from the registry and kept current."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_generator():
    spec = importlib.util.spec_from_file_location("rules_doc", ROOT / "scripts" / "rules_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rules_doc_is_current():
    generator = load_generator()
    assert (ROOT / "docs" / "rules.md").read_text() == generator.render(), (
        "docs/rules.md is out of date: run python scripts/rules_doc.py"
    )


def test_readme_states_the_current_count():
    count = load_generator().render().split("**")[1]
    readme = (ROOT / "README.md").read_text()
    assert f"differentiates **{count} NumPy and SciPy functions**" in readme


def test_the_count_says_how_many_are_rules_implementations_and_non_differentiable():
    header = load_generator().render().split("\n\n")[1]
    differentiable = int(header.split("**")[1])
    numbers = [int(w) for w in header.replace(",", " ").replace(";", " ").split() if w.isdigit()]
    rules, implementations, nondifferentiable = numbers[-3:]
    assert "dedicated rules" in header and "implementations" in header
    assert "more that are non-differentiable" in header
    assert rules + implementations == differentiable and nondifferentiable > 0


def test_every_unsupported_function_is_listed_with_its_reason():
    from sensitivities.audit import UNSUPPORTED

    text = (ROOT / "docs" / "rules.md").read_text()
    for name, reason in UNSUPPORTED.items():
        assert f"| `{name}` | {reason} |" in text, name
