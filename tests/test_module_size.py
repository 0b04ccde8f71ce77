"""No module of ``landscape/`` or ``app/`` is over 600 lines: a module that long holds more than
one responsibility, and is split by responsibility (each new module named in
docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 600
CHECKED = ("landscape", "app")  # every module below these folders, subpackages included


def long_modules(root: Path = REPO, trees: tuple[str, ...] = CHECKED,
                 limit: int = LIMIT) -> list[str]:  # fmt: skip
    """``path: lines`` of every module below ``trees`` over ``limit`` lines."""
    found = []
    for tree in trees:
        for f in sorted((root / tree).rglob("*.py")):
            n = len(f.read_text(encoding="utf-8").splitlines())
            if n > limit:
                found.append(f"{f.relative_to(root).as_posix()}: {n}")
    return found


def test_the_checked_trees_hold_modules() -> None:
    """A folder renamed or moved would leave nothing to check and the size test green."""
    for tree in CHECKED:
        assert len(list((REPO / tree).rglob("*.py"))) > 10, tree


def test_no_module_is_over_the_limit() -> None:
    assert long_modules() == []


def test_a_long_module_is_caught(tmp_path: Path) -> None:
    (tmp_path / "landscape" / "models" / "deep").mkdir(parents=True)
    (tmp_path / "app" / "views").mkdir(parents=True)
    (tmp_path / "landscape" / "models" / "short.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "landscape" / "models" / "deep" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "landscape" / "cli.py").write_text("x = 1\n" * (LIMIT + 2))
    (tmp_path / "app" / "views" / "page.py").write_text("x = 1\n" * (LIMIT + 3))
    assert long_modules(tmp_path) == [
        f"landscape/cli.py: {LIMIT + 2}",
        f"landscape/models/deep/long.py: {LIMIT + 1}",
        f"app/views/page.py: {LIMIT + 3}",
    ]
