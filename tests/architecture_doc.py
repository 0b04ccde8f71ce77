"""What docs/architecture.md says about the modules, read as data: its "tier by tier" list is the
one statement of the layers (``tests/test_layers.py`` enforces it, ``tests/test_docs_layout.py``
checks it against the files)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
README = REPO / "README.md"
PACKAGES = ("landscape", "app")  # the trees whose every module the list names

SECTION = "## The modules, tier by tier"
_HEADING = re.compile(r"^### Tier (\d+): (.+)$")
_ENTRY = re.compile(r"^- `([^`]+)`")


@dataclass(frozen=True)
class Tier:
    number: int
    units: tuple[str, ...]  # top-level modules or packages of ``landscape`` (or ``app``)
    paths: tuple[str, ...]  # the modules listed under it: ``pkg/mod.py``, or ``pkg/`` for a package


def section(text: str, heading: str) -> list[str]:
    """The lines of a markdown section, from its heading to the next heading of its level."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    level = heading.split()[0] + " "
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(level)), len(lines))
    return lines[start:end]


def tiers(text: str | None = None) -> list[Tier]:
    """The tiers of the architecture doc, lowest first."""
    text = ARCHITECTURE.read_text(encoding="utf-8") if text is None else text
    found: list[Tier] = []
    for line in section(text, SECTION):
        if heading := _HEADING.match(line):
            units = tuple(re.findall(r"`([^`]+)`", heading.group(2)))
            found.append(Tier(int(heading.group(1)), units, ()))
        elif (entry := _ENTRY.match(line)) and found:
            last = found[-1]
            found[-1] = Tier(last.number, last.units, last.paths + (entry.group(1),))
    return found


def unit_of(path: str) -> str:
    """The unit a listed module belongs to: ``landscape/models/zoo.py`` → ``models``,
    ``landscape/errors.py`` → ``errors``, ``landscape/`` → ``__init__``, ``app/…`` → ``app``."""
    parts = path.rstrip("/").split("/")
    if parts[0] != "landscape":
        return parts[0]
    if len(parts) == 1:
        return "__init__"
    return parts[1].removesuffix(".py")


def module_paths(repo: Path = REPO) -> set[str]:
    """Every module of the packages as the list names it: a package by its folder."""
    found = set()
    for package in PACKAGES:
        for f in (repo / package).rglob("*.py"):
            rel = f.relative_to(repo)
            found.add(f"{rel.parent.as_posix()}/" if f.name == "__init__.py" else rel.as_posix())
    return found
