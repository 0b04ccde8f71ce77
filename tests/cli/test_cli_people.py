"""The command line for people: a fast --help, help and defaults on every option, suggestions
for misspelt names, same-seed pairs refused, and readable output without --json."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


# ---------------------------------------------------------------- help and defaults


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (sub)command's parser, with the words that reach it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helped.get(name), f"landscape {' '.join((*path, name))} has no help"
                yield from _commands(sub, (*path, name))


COMMANDS = [pytest.param(path, id=" ".join(path) or "landscape") for path, _ in
            _commands(cli.build_parser())]  # fmt: skip


@pytest.mark.parametrize("path", COMMANDS)
def test_every_option_has_help_and_shows_its_default(path, capsys):
    parser = dict(_commands(cli.build_parser()))[path]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{name} of landscape {' '.join(path)} has no help"
        meaningful = action.default is not None and action.default is not False  # 0 is one
        if meaningful and action.option_strings:
            assert "default" in formatter._get_help_string(action), name
    with pytest.raises(SystemExit) as done:
        cli.main([*path, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: landscape")


def test_help_shows_defaults_but_not_for_flags(capsys):
    with pytest.raises(SystemExit):
        cli.main(["barrier", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "(default: 25)" in out and "(default: weight)" in out and "(default: perm)" in out
    assert "(default: False)" not in out and "(default: None)" not in out
    with pytest.raises(SystemExit):
        cli.main(["gauge-sweep", "--help"])
    assert "(default: 0 10 30 100 300)" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------- suggestions


@pytest.fixture
def _stores(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


@pytest.mark.parametrize(
    "argv,hint",
    [
        pytest.param(
            ["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "wieght"],
            "did you mean weight?",
            id="method",
        ),
        pytest.param(
            ["barrier", "mlp-digits", "--seeds", "0", "1", "--group", "ortho"],
            "did you mean orth?",
            id="group",
        ),
        pytest.param(
            ["table", "mlp-digits", "--space", "circuit"], "did you mean circuits?", id="space"
        ),
        pytest.param(["barier"], "did you mean barrier?", id="command"),
        pytest.param(
            ["train", "mlp-digit", "--seed", "0"], "did you mean mlp-digits?", id="zoo-model"
        ),
        pytest.param(
            ["symmetries", "vit-digts", "--seed", "0"],
            "did you mean vit-digits?",
            id="model-or-path",
        ),
    ],
)
def test_a_misspelt_name_gets_the_nearest_one_on_one_line(capsys, _stores, argv, hint):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("landscape: error:"), err
    assert err.endswith(hint), err


def test_the_barrier_of_a_misspelt_model_suggests_the_zoo_name(capsys, _stores):
    assert cli.main(["barrier", "mlp-digit", "--seeds", "0", "1"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("landscape: error: mlp-digit is not a zoo model")
    assert last.endswith("did you mean mlp-digits?")


def test_nothing_near_is_no_suggestion(capsys, _stores):
    assert cli.main(["barrier", "mlp-digits", "--seeds", "0", "1", "--group", "xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err and "did you mean" not in err


# ---------------------------------------------------------------- same-seed pairs


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["barrier", "mlp-digits", "--seeds", "0", "0"], id="barrier"),
        pytest.param(["barrier", "nope", "--seeds", "3", "3", "--json"], id="barrier-unknown"),
        pytest.param(["triangle", "mlp-digits", "--seeds", "0", "1", "0"], id="triangle-a-c"),
        pytest.param(["triangle", "mlp-digits", "--seeds", "2", "1", "1"], id="triangle-b-c"),
        pytest.param(["eigenangles", "mlp-digits", "--seeds", "1", "1"], id="eigenangles"),
    ],
)
def test_a_model_against_itself_is_refused_while_parsing(capsys, _stores, argv):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and not captured.out, captured.err  # nothing loaded, no status line
    assert "argument --seeds: seeds must differ" in lines[0]
    assert "a model against itself has no" in lines[0]


def test_distinct_seeds_still_parse():
    args = cli.build_parser().parse_args(["triangle", "mlp-digits", "--seeds", "0", "1", "2"])
    assert args.seeds == [0, 1, 2]
    args = cli.build_parser().parse_args(["barrier", "mlp-digits", "--seeds", "1", "0"])
    assert args.seeds == [1, 0]
