"""The layers of ``landscape/`` (docs/architecture.md, "What may import what"): every import of a
``landscape`` module, at module level or inside a function, goes to a lower tier or stays in its
own package; no module imports streamlit or the app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.architecture_doc import tiers

ROOT = Path(__file__).resolve().parents[1] / "landscape"

# the tiers, lowest first, as docs/architecture.md states them ("The modules, tier by tier"): a
# unit (top-level module or package of ``landscape``) may import its own modules and those of
# lower tiers. The doc's last tier, ``app``, has no module here; nothing may import it (NEVER).
TIERS: list[tuple[str, ...]] = [tier.units for tier in tiers()]
RANK = {unit: i for i, tier in enumerate(TIERS) for unit in tier}
# imports that still go up, each with where it is to go; one that disappears must leave the list
KNOWN_UPWARD: set[tuple[str, str]] = set()
NEVER = ("streamlit", "app")


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def modules(root: Path = ROOT) -> dict[str, str]:
    """Every module of the package: dotted name → source."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        name = ".".join(f.relative_to(root.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f.read_text(encoding="utf-8")
    return out


def imports(source: str) -> list[str]:
    """The absolute imports of a module, wherever they stand (module level or in a function)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "landscape":
            found += [f"landscape.{a.name}" for a in node.names]  # a subpackage, or the root's
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def violations(mods: dict[str, str]) -> set[tuple[str, str]]:
    """(importer, imported) pairs that break the layers."""
    bad = set()
    for name, source in mods.items():
        unit = _unit(name)
        if unit not in RANK:
            bad.add((name, "<a unit without a tier: add it to TIERS>"))
            continue
        for target in imports(source):
            if target.split(".")[0] in NEVER:
                bad.add((name, target))
            if not (target == "landscape" or target.startswith("landscape.")):
                continue
            other = _unit(target)
            if other != unit and RANK.get(other, len(TIERS)) >= RANK[unit]:
                bad.add((name, target))
    return bad


def test_every_import_goes_down_the_layers() -> None:
    found = violations(modules())
    assert found - KNOWN_UPWARD == set()
    assert KNOWN_UPWARD - found == set(), "a known upward import is gone: remove it from the list"


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("landscape.models.config", "from landscape.experiments import measure_barrier"),
        ("landscape.matching.weight", "import landscape.sources"),
        ("landscape.symmetry.spec", "def late():\n    from landscape.matching import match\n"),
        ("landscape.experiments.evaluation", "import streamlit as st"),
        ("landscape.store.cache", "from landscape.models import ModelConfig"),
    ],
    ids=[
        "models-up-to-experiments",
        "matching-up-to-sources",
        "inside-a-function",
        "streamlit",
        "store-up-to-models",
    ],  # fmt: skip
)
def test_a_planted_upward_import_is_caught(module: str, planted: str) -> None:
    mods = modules()
    mods[module] = mods[module] + "\n" + planted + "\n"
    assert any(importer == module for importer, _ in violations(mods) - KNOWN_UPWARD)


def test_lateral_imports_inside_a_tier_are_refused_between_units() -> None:
    mods = modules()
    mods["landscape.symmetry.spec"] += "\nimport landscape.optim\n"
    assert ("landscape.symmetry.spec", "landscape.optim") in violations(mods)


def test_no_package_hides_a_module_behind_a_name_it_exports():
    """A package that re-exports a function named as one of its modules (``merging.merges``
    the function over ``merging/merges.py``) makes ``from package import name`` and a
    monkeypatch of the module reach different things."""
    import importlib
    import pkgutil

    hidden = []
    for name in sorted(modules()):
        if not (ROOT.parent / name.replace(".", "/") / "__init__.py").is_file():
            continue
        package = importlib.import_module(name)
        for sub in pkgutil.iter_modules(package.__path__):
            found = getattr(package, sub.name, None)
            if found is not None and not isinstance(found, type(package)):
                hidden.append(f"{name}.{sub.name}")
    assert hidden == []
