"""The docs say where things are, truly: docs/architecture.md names every module of
``landscape/`` and ``app/``, each under its unit's tier, and nothing that does not exist; every
path the README's Layout names exists."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.architecture_doc import (
    ARCHITECTURE,
    README,
    REPO,
    module_paths,
    section,
    tiers,
    unit_of,
)

# a path-like word: folders end in "/", files in a known suffix
_PATH = re.compile(r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)*(?:/|\.py|\.md|\.json|\.toml))(?![\w/])")
# named in the doc as an example to write, not as a file of the tree
EXAMPLES = {"matching/stream.py"}


def listing_problems(text: str, files: set[str]) -> list[str]:
    """What is wrong with the doc's list of modules, one line each."""
    found = tiers(text)
    listed = [p for t in found for p in t.paths]
    problems = [f"listed twice: {p}" for p, n in Counter(listed).items() if n > 1]
    problems += [f"not in {ARCHITECTURE.name}: {p}" for p in sorted(files - set(listed))]
    problems += [f"listed but no such module: {p}" for p in sorted(set(listed) - files)]
    if [t.number for t in found] != list(range(1, len(found) + 1)):
        problems.append(f"tiers not numbered 1, 2, …: {[t.number for t in found]}")
    units = [u for t in found for u in t.units]
    problems += [f"unit in two tiers: {u}" for u, n in Counter(units).items() if n > 1]
    for t in found:
        problems += [
            f"{p} listed under tier {t.number} {t.units}, its unit is {unit_of(p)}"
            for p in t.paths
            if unit_of(p) not in t.units
        ]
    return problems


def test_the_architecture_names_every_module_under_its_tier() -> None:
    assert listing_problems(ARCHITECTURE.read_text(encoding="utf-8"), module_paths()) == []


def _tree() -> set[str]:
    """Every file and folder of the repository's own trees, as repo-relative paths."""
    out = set()
    for top in ("landscape", "app", "tests", "bench", "docs", "assets"):
        for f in (REPO / top).rglob("*"):
            if "__pycache__" not in f.parts:
                out.add(f.relative_to(REPO).as_posix() + ("/" if f.is_dir() else ""))
        out.add(f"{top}/")
    return out | {f.name for f in REPO.iterdir() if f.is_file()}


def test_every_path_the_architecture_names_exists() -> None:
    """Outside the list too (the contracts, how to add things), a path in backquotes names a
    file or folder of the tree, written whole or as its trailing part (`models/registry.py`)."""
    tree = _tree()
    named = set(re.findall(r"`([\w./-]+(?:/|\.py|\.md|\.json))`", ARCHITECTURE.read_text("utf-8")))
    missing = {
        p
        for p in named - EXAMPLES
        if p != "/" and not any(t == p or t.endswith("/" + p) for t in tree)
    }
    assert missing == set()


def layout_paths(text: str) -> list[str]:
    """The paths the README's Layout names. Each entry starts at the block's left edge with a
    top-level folder; a path in its description is inside that folder, or else at the root."""
    paths, entry = [], ""
    for line in section(text, "## Layout"):
        if not line.startswith("    "):
            continue
        body = line[4:]
        if not body.startswith(" "):
            entry, _, body = body.partition(" ")
            paths.append(entry)
        for p in _PATH.findall(body):
            at_root = (REPO / p).exists() and not (REPO / entry / p).exists()
            paths.append(p if at_root else entry + p)
    return paths


def test_every_path_in_the_readme_layout_exists() -> None:
    named = layout_paths(README.read_text(encoding="utf-8"))
    assert len(named) > 10
    assert [p for p in named if not (REPO / p).exists()] == []


PLANTED = {
    "module-unlisted": (("- `landscape/threads.py`", "- threads"), "not in"),
    "module-gone": (("### Tier 2:", "- `landscape/sources.py`: gone\n\n### Tier 2:"), "no such"),
    "module-moved": (("- `landscape/optim.py`", "- `landscape/models/optim.py`"), "no such"),
    "listed-twice": (
        ("- `landscape/errors.py`", "- `landscape/errors.py`: x\n- `landscape/errors.py`"),
        "listed twice",
    ),
    "wrong-tier": (
        ("### Tier 6: `optim`, `symmetry`", "### Tier 6: `symmetry`"),
        "its unit is optim",
    ),
}


@pytest.mark.parametrize(("edit", "expected"), PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_mistake_in_the_list_is_caught(edit: tuple[str, str], expected: str) -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert edit[0] in text
    assert any(expected in p for p in listing_problems(text.replace(*edit), module_paths()))


def test_a_stale_layout_path_is_caught() -> None:
    text = README.read_text(encoding="utf-8").replace("tasks.py", "sources.py (gone) tasks.py")
    assert "landscape/sources.py" in layout_paths(text)
    assert not (REPO / "landscape/sources.py").exists()
