"""The command line for people: a fast --help, help and defaults on every option, suggestions
for misspelt names, same-seed pairs refused, and readable output without --json."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import landscape.cli as cli

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)  # fmt: skip


# ---------------------------------------------------------------- --help without torch

HEAVY = ("torch", "numpy", "scipy")


def test_building_the_parser_imports_no_torch():
    done = _python(
        "import sys, landscape.cli\n"
        "landscape.cli.build_parser()\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_help_of_a_command_imports_no_torch():
    done = _python(
        "import sys, landscape.cli\n"
        "try:\n"
        "    landscape.cli.main(['barrier', '--help'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    assert done.returncode == 0, done.stderr
    assert "--seeds" in done.stdout and done.stderr.strip() == "[]"


def test_the_parsers_choices_are_the_librarys():
    from landscape import threads
    from landscape.matching import GROUPS, METHODS, MONOMIAL_GROUPS
    from landscape.models.circuits import SPACES

    assert cli.METHODS == METHODS and cli.GROUPS == GROUPS
    assert cli.MONOMIAL_GROUPS == MONOMIAL_GROUPS and cli.SPACES == SPACES
    assert cli.AUTO == threads.AUTO
