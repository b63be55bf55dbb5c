"""Write docs/rules.md: every function tape differentiates, by family, from the registry.

python scripts/rules_doc.py          # rewrite docs/rules.md
python scripts/rules_doc.py --check  # exit 1 if docs/rules.md is out of date
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

import sensitivities
from sensitivities.registry import (
    function_name,
    implementation_of,
    is_primitive,
    lookup,
    registered_functions,
)

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "rules.md"
FAMILIES = {
    "elementwise": "Elementwise functions",
    "reductions": "Reductions and scans",
    "shape": "Shape and indexing",
    "linalg": "Products and linear algebra",
    "stats": "Statistics helpers",
    "special": "SciPy special functions",
    "fft": "Fourier transforms",
    "numpy_extra": "Array creation",
    "internal": "Helper primitives of the rules (not counted)",
}
SCIPY_COUNTERPARTS = {}
try:
    import scipy.linalg
    import scipy.special

    SCIPY_COUNTERPARTS = {"linalg": scipy.linalg, "special": scipy.special}
except ImportError:  # without SciPy its counterparts are not registered either
    pass


def qualified_name(f) -> str:
    """``np.sin``, ``np.add.reduce``, ``np.linalg.inv``, ``scipy.special.gammaln``."""
    name = function_name(f)
    head = name.split(".")[0]
    if isinstance(f, np.ufunc) and getattr(np, name, None) is not f:
        return f"scipy.special.{name}"
    if head in ("special",) or (head == "linalg" and "scipy" in str(getattr(f, "__module__", ""))):
        return f"scipy.{name}"
    module = str(getattr(f, "__module__", "") or "")
    if module.startswith("sensitivities"):
        short = name.rpartition(".")[2]
        family = module.rpartition(".")[2]
        if family in SCIPY_COUNTERPARTS and hasattr(SCIPY_COUNTERPARTS[family], short):
            return f"scipy.{family}.{short} (as {module}.{short})"
        return f"{module}.{short}"
    if module.startswith("scipy"):
        return f"scipy.{name}"
    if head in ("operator",) or name == "getitem":
        return "x[index] (operator.getitem)"
    return f"np.{name}"


def describe(f) -> tuple[str, str]:
    rules = lookup(f)
    impl = implementation_of(f)
    if rules is None or (not rules.argnums and not rules.nondiff):
        return (impl.__module__.rpartition(".")[2] if impl else "other"), "implementation"
    if rules.nondiff:
        return rules.family or "other", "non-differentiable"
    return rules.family or "other", f"rule (arguments {_ranges(sorted(rules.argnums))})"


def _ranges(numbers: list) -> str:
    """``0, 1, 2, 5`` as ``0-2, 5``."""
    runs: list[list] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def is_internal(f) -> bool:
    """A helper primitive of the rules (``scatter_add``, ``eigh_packed``), not a function
    users call: defined in ``sensitivities`` without a SciPy function of its name."""
    module = str(getattr(f, "__module__", "") or "")
    if not module.startswith("sensitivities"):
        return False
    family = module.rpartition(".")[2]
    name = function_name(f).rpartition(".")[2]
    return not (family in SCIPY_COUNTERPARTS and hasattr(SCIPY_COUNTERPARTS[family], name))


def is_private(f) -> bool:
    """A private function of NumPy or SciPy (``scipy.special._lambertw``, which the public
    ``lambertw`` calls): it has its rule, but users never call it by name."""
    return function_name(f).rpartition(".")[2].startswith("_") and not is_internal(f)


def functions_by_family() -> dict:
    """``{family: [(qualified name, kind)]}`` of every function users call that has rules,
    an implementation or is non-differentiable; ``"internal"``: the rules' own helpers."""
    by_family = defaultdict(list)
    for f in registered_functions():
        module = str(getattr(f, "__module__", ""))
        if module.startswith(("tests", "tape")):
            continue  # rules tests define, and the engine's own primitives (at, checkpoint)
        if is_primitive(f) and not module.startswith("sensitivities"):
            continue  # a user's own primitive (the guide's examples define some)
        if is_private(f):
            continue
        family, kind = describe(f)
        if is_internal(f):
            family = "internal"
        by_family[family].append((qualified_name(f), kind))
    return {family: sorted(set(entries)) for family, entries in by_family.items()}


def counts() -> dict:
    """The figures the README and the docs quote: ``total``, ``rule``,
    ``implementation``, ``non-differentiable``, and one per family."""
    by_family = functions_by_family()
    public = [kind for k, v in by_family.items() if k != "internal" for _, kind in v]
    kinds = Counter(kind.split(" ")[0] for kind in public)
    out = {"total": len(public), **kinds}
    out.update({family: len(v) for family, v in by_family.items()})
    return out


def render() -> str:
    by_family = functions_by_family()
    kinds = counts()
    differentiable = kinds["rule"] + kinds["implementation"]
    lines = [
        "# Supported functions",
        "",
        f"tape differentiates **{differentiable}** NumPy and SciPy functions: {kinds['rule']}",
        f"with dedicated rules and {kinds['implementation']} implementations; it knows",
        f"{kinds['non-differentiable']} more that are non-differentiable. *rule*: a sensitivity",
        "for the listed arguments; *implementation*: entered as other NumPy calls;",
        "*non-differentiable*: plain results and zero gradient. Generated by",
        "`python scripts/rules_doc.py`.",
        "",
    ]
    lines += audit_section()
    order = list(FAMILIES) + sorted(set(by_family) - set(FAMILIES))
    for family in order:
        entries = by_family.get(family, [])
        if not entries:
            continue
        lines += [
            f"## {FAMILIES.get(family, family)} ({len(entries)})",
            "",
            "| function | kind |",
            "| --- | --- |",
        ]
        lines += [f"| `{name}` | {kind} |" for name, kind in entries]
        lines.append("")
    return "\n".join(lines)


def audit_section() -> list:
    """How every public function of numpy, numpy.linalg, numpy.fft and
    numpy.lib.stride_tricks is classified, with the reasons for those left unsupported."""
    from sensitivities.audit import classify, public_callables

    by_kind = defaultdict(list)
    for name, f in public_callables():
        kind, detail = classify(name, f)
        by_kind[kind].append((name, detail))
    count = sum(len(v) for v in by_kind.values())
    order = ["rule", "implementation", "entered", "converted", "non-differentiable", "unsupported"]
    lines = [
        "## NumPy's public API",
        "",
        f"Of the **{count}** public names of functions in `numpy`, `numpy.linalg`, `numpy.fft`",
        "and `numpy.lib.stride_tricks` (classes and submodules aside; an alias such as "
        "`np.acos` of `np.arccos` counts as a name of its own): "
        + ", ".join(f"{len(by_kind[k])} {_KIND_WORDS[k]}" for k in order)
        + ". The reasons are kept in `sensitivities/audit.py`.",
        "",
        "| function | unsupported because |",
        "| --- | --- |",
    ]
    lines += [f"| `{name}` | {reason} |" for name, reason in sorted(by_kind["unsupported"])]
    lines += ["", "Entered as they are (NumPy's own Python code runs on nodes): "]
    lines[-1] += ", ".join(f"`{name}`" for name, _ in sorted(by_kind["entered"])) + "."
    lines += ["", "Conversions, recorded inside `grad` and the transforms (see Library code): "]
    lines[-1] += ", ".join(f"`{name}`" for name, _ in sorted(by_kind["converted"])) + "."
    lines.append("")
    return lines


_KIND_WORDS = {
    "rule": "have dedicated rules",
    "implementation": "are implementations",
    "entered": "are NumPy's own code entered as it is",
    "converted": "are conversions recorded inside grad",
    "non-differentiable": "are non-differentiable",
    "unsupported": "are unsupported",
}


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print("docs/rules.md is out of date: run python scripts/rules_doc.py")
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(text)
    print(text.splitlines()[2])
    return 0


if __name__ == "__main__":
    assert sensitivities  # the import registers every family
    sys.exit(main())
