"""No module of ``landscape/models/`` or ``landscape/matching/`` is over 600 lines: a module that
long holds more than one responsibility, and is split by responsibility (each new module named in
docs/architecture.md). Other packages still hold longer modules; each joins ``CHECKED`` once its
modules are split."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "landscape"
LIMIT = 600
CHECKED = ("models", "matching")  # packages of ``landscape/``, their subpackages included


def long_modules(root: Path = ROOT, packages: tuple[str, ...] = CHECKED,
                 limit: int = LIMIT) -> list[str]:  # fmt: skip
    """``path: lines`` of every module of ``packages`` over ``limit`` lines."""
    found = []
    for package in packages:
        for f in sorted((root / package).rglob("*.py")):
            n = len(f.read_text(encoding="utf-8").splitlines())
            if n > limit:
                found.append(f"{f.relative_to(root.parent)}: {n}")
    return found


def test_no_module_of_the_checked_packages_is_over_the_limit() -> None:
    assert long_modules() == []


def test_a_long_module_is_caught(tmp_path: Path) -> None:
    (tmp_path / "landscape" / "models" / "deep").mkdir(parents=True)
    (tmp_path / "landscape" / "models" / "short.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "landscape" / "models" / "deep" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    assert long_modules(tmp_path / "landscape") == [f"landscape/models/deep/long.py: {LIMIT + 1}"]
