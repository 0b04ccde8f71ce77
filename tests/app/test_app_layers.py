"""The pages reach the library through ``app/state`` (docs/architecture.md, tier ``app``): a
view, a section or a component imports from ``landscape`` only what draws or names (figures,
names, numbers, page defaults, errors, result fields), a library's constants, classes (options
dataclasses, exceptions) and a few pure helpers; every computation, load or download goes
through ``app.state``, where the app's caching, progress and failure handling live."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
PAGES = ("views", "sections", "components")  # everything of the app but app/state
# modules a page reads freely: they draw or name, and compute nothing
DRAWING = ("landscape.plots", "landscape.names", "landscape.numbers", "landscape.page_defaults",
           "landscape.errors", "landscape.fields")  # fmt: skip
# functions a page may call directly: pure facts and arithmetic on what it already holds
PURE = frozenset({
    "aligns",  # a method's declared fact
    "method_of",  # a method's registry entry
    "matching_key", "matching_keys",  # a method's key under a group, from its declared fact
    "worst_check",  # the worst of some function checks
    "within", "fraction",  # progress arithmetic
    "seeds_request",  # a frozen request, checked when made; nothing is loaded
    "expected_products",  # a count from a configuration
    "has_circuits", "architecture",  # facts of a configuration
})  # fmt: skip


def _allowed(module: str, name: str) -> bool:
    if module == "landscape" and name == "page_defaults":
        return True
    if any(module == m or module.startswith(m + ".") for m in DRAWING):
        return True
    return name.isupper() or name[:1].isupper() or name in PURE


def reaches_past_state(source: str) -> list[str]:
    """``module.name`` of every import of a page's source that goes past ``app.state``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "landscape" or node.module.startswith("landscape."):
                out += [f"{node.module}.{a.name}" for a in node.names
                        if not _allowed(node.module, a.name)]  # fmt: skip
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("landscape")]
    return out


def _pages() -> list[Path]:
    return sorted(p for part in PAGES for p in (APP / part).rglob("*.py"))


def test_the_pages_hold_modules() -> None:
    assert len(_pages()) > 20


@pytest.mark.parametrize("path", _pages(), ids=lambda p: p.relative_to(APP).as_posix())
def test_a_page_reaches_the_library_through_state(path: Path) -> None:
    assert reaches_past_state(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("source", [
    "from landscape.experiments import barrier",
    "from landscape.models.train import train",
    "from landscape.device import resolve_device",
    "import landscape.experiments",
    "def f():\n    from landscape.data import datasets\n",
])  # fmt: skip
def test_a_computation_imported_by_a_page_is_caught(source: str) -> None:
    assert reaches_past_state(source)


def test_what_draws_names_or_declares_passes() -> None:
    fine = ("from landscape.plots.curvature import figure_curvature\n"
            "from landscape.experiments import SurfaceOptions, PAPER_REFERENCE\n"
            "from landscape.matching import aligns\n"
            "from landscape import page_defaults as page\n")  # fmt: skip
    assert reaches_past_state(fine) == []
