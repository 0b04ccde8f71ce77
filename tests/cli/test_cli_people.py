"""The command line for people: a fast --help, help and defaults on every option, suggestions
for misspelt names, same-seed pairs refused, and readable output without --json."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import landscape.cli as cli
from landscape.cli import parser as cli_parser
from landscape.cli import summaries
from landscape.cli.parser import arguments as cli_args
from landscape.cli.summaries import formatting
from landscape.numbers import mean_pm

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
    from landscape.experiments.merging.mergekit import MERGE_METHODS
    from landscape.experiments.merging.operators import DENSITY, OPERATORS, POINTS
    from landscape.experiments.sweeps import EXECUTORS

    # methods, groups and spaces are landscape.names's, read by the parser and the library alike
    assert cli_args.MERGE_METHODS == MERGE_METHODS
    assert cli_args.MERGE_OPERATORS == OPERATORS and cli_args.MERGE_DENSITY == DENSITY
    assert cli_args.MERGE_POINTS == POINTS
    assert cli_args.AUTO == threads.AUTO and cli_args.EXECUTORS == EXECUTORS


def test_the_learned_settings_help_says_the_librarys_defaults():
    import dataclasses

    from landscape.matching import learning

    defaults = {f.name: f.default for f in dataclasses.fields(learning.LearnedOptions)}
    assert set(cli_args.LEARNED_OPTIONS.values()) <= set(defaults)
    said = cli_args.LEARNED_DEFAULTS
    assert said == {k: defaults[k] for k in said}
    assert cli_args.LEARNED_BATCH == {"rows": learning.BATCH_ROWS, "tokens": learning.BATCH_TOKENS}
    assert cli_args.LEARNED_INITS == learning.INITS


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
            _commands(cli_parser.build_parser())]  # fmt: skip


@pytest.mark.parametrize("path", COMMANDS)
def test_every_option_has_help_and_shows_its_default(path, capsys):
    parser = dict(_commands(cli_parser.build_parser()))[path]
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
    parser = cli_parser.build_parser()
    args = parser.parse_args(["triangle", "mlp-digits", "--seeds", "0", "1", "2"])
    assert args.seeds == [0, 1, 2]
    args = parser.parse_args(["barrier", "mlp-digits", "--seeds", "1", "0"])
    assert args.seeds == [1, 0]


# ---------------------------------------------------------------- output for people


def _curve(n: int = 25) -> dict:
    lam = [i / (n - 1) for i in range(n)]
    loss = [0.1 + 0.5 * (1 - abs(2 * x - 1)) + 0.001 * i for i, x in enumerate(lam)]
    acc = [0.95 - 0.1 * (1 - abs(2 * x - 1)) for x in lam]
    return {"lambdas": lam, "loss": loss, "accuracy": acc}


BARRIER = {
    "model": "mlp-digits", "seeds": [0, 1], "method": "weight", "group": "orth", "split": "test",
    "space": "weights", **_curve(), "barrier_loss": 0.41234, "barrier_accuracy": 0.123456,
    "endpoint_accuracy": [0.95, 0.95], "endpoint_loss": [0.124, 0.1], "lambda_peak_accuracy": 0.5,
    "lambda_peak_loss": 0.5, "function_check": 3.3e-06, "function_check_a": 1.4e-06,
    "function_ok": True, "warnings": [], "matching_seconds": 0.0123, "seconds": 0.9575,
    "cached": False, "device": "cpu",
}  # fmt: skip


def _fits(text: str) -> None:
    long = [line for line in text.splitlines() if len(line) > formatting.WIDTH]
    assert not long, long


def test_the_barrier_summary_leads_with_the_barriers_in_units():
    text = summaries.show("barrier", BARRIER)
    lines = text.splitlines()
    assert lines[0].startswith("loss barrier") and "0.4123 nats" in lines[0]
    assert "λ = 0.5" in lines[0]
    assert lines[1].startswith("accuracy barrier") and "12.35%" in lines[1]
    assert "A 0.124, B 0.1 nats" in text and "A 95.00%, B 95.00%" in text
    assert "0.9575 s" in text and "0.0123 s" in text
    # the curve: a few rows, not 25 numbers; its endpoints and the peak among them
    curve = lines[lines.index("curve, 5 of 25 points (--json has all)") + 1 :]
    assert len(curve) == 6 and curve[0].split() == ["λ", "loss", "(nats)", "accuracy"]
    assert curve[1].split() == ["0", "0.1", "95.00%"]
    assert curve[3].split()[:3] == ["0.5", "0.612", "85.00%"] and "peak" in curve[3]
    assert curve[-1].split() == ["1", "0.124", "95.00%"]
    _fits(text)


def test_a_failed_function_check_is_said_in_the_summary():
    text = summaries.show("barrier", {**BARRIER, "function_ok": False})
    assert "FAILED" in text
    assert ": ok" in summaries.show("barrier", BARRIER)


def test_the_barrier_summary_matches_the_json(capsys, _stores):
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--group", "orth", "--points", "5"]
    assert cli.main([*argv, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["loss", "barrier", f"{r['barrier_loss']:.4g}", "nats,"]
    assert f"{100 * r['barrier_accuracy']:.2f}%" in lines[1]


def test_json_is_the_result_itself(capsys, monkeypatch):
    result = {"b": [1, 2.5, float("nan")], "a": {"x": float("inf"), "y": "z"}, "warnings": []}
    monkeypatch.setitem(cli.COMMANDS, "zoo", lambda args: result)
    assert cli.main(["zoo", "--json"]) == 0
    out = capsys.readouterr().out
    assert out == '{"b": [1, 2.5, null], "a": {"x": null, "y": "z"}, "warnings": []}\n'


def test_any_result_reads_with_units_and_summarised_lists():
    result = {"test_loss": 0.029655566, "test_accuracy": 0.993963782, "seconds": 1.0712,
              "bytes": 620932322, "parameters": 2126602, "warnings": ["said on stderr"],
              "values": [i / 7 for i in range(30)], "pair": [0.5, 0.25]}  # fmt: skip
    text = "\n".join(formatting.human(result))
    assert "test loss      0.02966 nats" in text and "test accuracy  99.40%" in text
    assert "1.071 s" in text and "620.9 MB" in text and "2,126,602" in text
    assert "said on stderr" not in text  # main prints warnings on stderr
    assert "30 values from 0 to 4.143" in text and "0.5, 0.25" in text


def test_wide_tables_fit_and_keep_every_word():
    prose = "a rotation keeps the norm but mixes coordinates, so a per-channel gain cannot follow"
    rows = [{"group": f"group-{i}", "acts_on": "resid O(d); FFN units S_f; heads S_H " * 2,
             "valid": i % 2 == 0, "max_abs_dlogits": 10.0**-i, "note": prose}
            for i in range(3)]  # fmt: skip
    lines = formatting.columns(rows)
    _fits("\n".join(lines))
    words = " ".join(lines).split()
    assert words.count("rotation") == 3 and "group-2" in words
    assert lines[0].split()[:3] == ["group", "acts", "on"]


def test_long_tables_show_their_ends():
    lines = formatting.columns([{"step": i, "loss": 1 / (i + 1)} for i in range(300)])
    assert len(lines) == 1 + formatting.MAX_ROWS - 5 + 1 + 5
    assert "260 more rows" in lines[formatting.MAX_ROWS - 4]
    assert lines[-1].split() == ["299", "0.003333"]


def test_zoo_fits_in_a_hundred_columns(capsys, _stores):
    assert cli.main(["zoo"]) == 0
    out = capsys.readouterr().out
    _fits(out)
    assert "mlp-digits" in out and "10,890" in out and "0–11" in out


TABLE_ROW = {"method": "weight", "group": "orth", "space": "weights", "barrier_loss": 0.02710,
             "barrier_loss_sem": 0.00123, "barrier_accuracy": 0.0080483,
             "barrier_accuracy_sem": 0.001, "per_pair_loss": [0.0271, 0.028],
             "function_check": 3.3e-06, "function_ok": True, "warnings": [],
             "matching_seconds": 0.0084, "paper": "0.34–0.69"}  # fmt: skip


def test_the_table_is_columns_of_barriers_with_their_errors():
    result = {"model": "mlp-digits", "split": "test", "space": "weights", "spaces": ["weights"],
              "paper": {"source": "a paper, Table 2"}, "pairs": [[0, 1], [2, 3]],
              "rows": [TABLE_ROW, {**TABLE_ROW, "method": "naive", "group": "perm",
                                   "barrier_loss": 0.7312, "paper": "1.69–2.84"}],
              "function_ok": True, "warnings": []}  # fmt: skip
    text = summaries.show("table", result)
    lines = text.splitlines()
    assert lines[0].startswith("mlp-digits: barriers over 2 pairs of seeds (0–1, 2–3)")
    head = next(i for i, line in enumerate(lines) if line.startswith("method"))
    assert "loss barrier (nats) ± s.e.m." in lines[head] and "accuracy barrier" in lines[head]
    row = lines[head + 1]
    assert row.split()[:5] == ["weight", "orth", "0.0271", "±", "0.0012"]
    assert "per pair" in lines[head] and "0.0271 0.028" in row
    assert "0.80% ± 0.10%" in row and row.endswith("0.34–0.69")
    assert "paper: a paper, Table 2" in text
    assert "left out" not in text
    _fits(text)
    moe = {**result, "left_out": [{"method": "activation", "group": "perm",
                                   "reason": "activation matching is not built for mixtures of "
                                             "experts"}]}  # fmt: skip
    said = summaries.show("table", moe)
    reason = "activation matching is not built for mixtures of experts"
    assert f"left out: activation/perm: {reason}" in said


@pytest.mark.parametrize("mean,sem,percent,text", [
    (1.5486, 0.01211, False, "1.549 ± 0.012"),
    (0.01156, 0.001459, False, "0.0116 ± 0.0015"),
    (3.182, 0.622, False, "3.18 ± 0.62"),
    (0.0044, 0.0005, True, "0.440% ± 0.050%"),
    (0.5, 0.0, False, "0.5 ± 0"),
    (float("nan"), 0.1, False, "nan ± 0.1"),
])  # fmt: skip
def test_a_mean_is_written_to_the_digits_its_error_leaves(mean, sem, percent, text):
    assert mean_pm(mean, sem, percent) == text


def test_controls_read_as_one_table_and_a_legend():
    rows = [
        {**TABLE_ROW, "control": c, "method": m, "fraction_removed": f}
        for c in ("real", "permuted-labels")
        for m, f in (("naive", 0.0), ("weight", 0.5))
    ]
    legend = [{"control": c, "description": "a normal model against one trained " * 4,
               "disagreement": 0.5} for c in ("real", "permuted-labels")]  # fmt: skip
    result = {"model": "mlp-digits", "split": "test", "space": "weights", "pairs": [[0, 1]],
              "path_task": "every path is scored on the normal task", "controls": legend,
              "rows": rows, "function_ok": True, "warnings": [], "seconds": 1.5}  # fmt: skip
    text = summaries.show("controls", result)
    _fits(text)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("control"))
    assert lines[head].split()[:6] == ["control", "method", "group", "loss", "barrier", "(nats)"]
    assert lines[head + 1].split() == ["real", "naive", "orth", "0.0271", "0.80%", "0.00%"]
    assert lines[head + 2].split() == ["weight", "orth", "0.0271", "0.80%", "50.00%"]  # once
    assert "Every path is scored on the normal task." in text and "1.5 s" in text


def test_the_triangle_leads_with_its_barrier_and_basin():
    points = [[1, 0, 0], [0.5, 0.5, 0], [0, 1, 0], [0.5, 0, 0.5], [0, 0.5, 0.5], [0, 0, 1]]
    result = {"model": "mlp-digits", "seeds": [0, 1, 2], "method": "weight", "group": "orth",
              "split": "test", "space": "weights", "joint": False, "points": points,
              "accuracy": [0.99, 0.97, 0.99, 0.96, 0.98, 0.99],
              "excess_loss": [0, 0.02, 0, 0.0880213, 0.01, 0], "basin_fraction": 5 / 6,
              "corner_loss": [0.03, 0.028, 0.031], "corner_accuracy": [0.99, 0.99, 0.99],
              "loss": [0.03] * 6, "resolution": 2, "tol": 0.05, "function_check": 3.8e-06,
              "function_check_a": 1.4e-06, "function_ok": True, "warnings": [],
              "seconds": 0.72, "cached": False, "device": "cpu"}  # fmt: skip
    lines = summaries.show("triangle", result).splitlines()
    assert lines[0].startswith("loss barrier") and "0.08802 nats" in lines[0]
    assert "(w_A, w_B, w_C) = (0.5, 0, 0.5)" in lines[0]
    assert lines[1].startswith("basin") and "83.33% of 6 points" in lines[1]
    assert lines[2].startswith("lowest accuracy") and "96.00%" in lines[2]


def test_eigenangles_are_a_table_of_rotations():
    summary = {"share_small": 0.15625, "median_abs": 1.5432887, "mean_abs": 1.51163, "n": 32,
               "small": 0.3}  # fmt: skip
    result = {"model": "mlp-digits", "seeds": [0, 1], "d_model": 32, "angles_wm": [0.1] * 32,
              "summary_wm": summary, "angles_haar": [0.2] * 32, "summary_haar": summary,
              "wm_objective": [284.945, 116.911], "lm_curve": [], "seconds": 0.01,
              "cached": True}  # fmt: skip
    lines = summaries.show("eigenangles", result).splitlines()
    assert "radians" in lines[0]
    head = next(i for i, line in enumerate(lines) if line.startswith("rotation"))
    assert "median |θ|" in lines[head] and "share |θ| < 0.3" in lines[head]
    assert lines[head + 1].split()[-3:] == ["1.543", "1.512", "15.62%"]
    assert "objective 284.9 → 116.9 over 2 rounds" in "\n".join(lines)


def test_the_pair_barrier_names_its_paths_and_data():
    result = {
        **BARRIER,
        "a": "ckpt/a",
        "b": "ckpt/b",
        "architecture": "GPT-2, d=64",
        "parameters": 124865,
        "data": {"tokens": "characters", "note": "65 characters"},
    }
    del result["model"], result["seeds"]
    text = summaries.show("pair-barrier", result)
    assert text.splitlines()[0].startswith("loss barrier") and "0.4123 nats" in text
    assert "ckpt/a, at λ = 1" in text and "ckpt/b, at λ = 0" in text
    assert "124,865" in text and "65 characters" in text and "{" not in text


# ---------------------------------------------------------------- learned matching's settings


def test_learned_settings_reach_the_matching_and_are_refused_elsewhere(capsys, _stores):
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "learned", "--group", "orth",
            "--points", "3", "--json"]  # fmt: skip
    settings = ["--learned-steps", "3", "--learned-batch", "32", "--learned-lr", "0.05",
                "--learned-init", "identity"]  # fmt: skip
    assert cli.main([*argv, *settings]) == 0
    short = json.loads(capsys.readouterr().out)
    assert short["options"] == {"steps": 3, "batch_size": 32, "lr": 0.05, "init": "identity"}
    assert not short["cached"]
    # a library default said explicitly is the default's run, not a new one
    assert cli.main([*argv, "--learned-steps", "4"]) == 0
    four = json.loads(capsys.readouterr().out)
    assert four["options"] == {"steps": 4} and four["cache_key"] != short["cache_key"]
    assert cli.main([*argv, "--learned-init", "weight"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert "options" not in default
    assert default["cache_key"] not in (four["cache_key"], short["cache_key"])
    assert cli.main(["barrier", "mlp-digits", "--seeds", "0", "1", "--learned-steps", "3"]) == 2
    assert "--learned-steps: for --method learned, not weight" in capsys.readouterr().err
    assert cli.main([*argv, "--learned-lr", "0"]) == 2


def test_the_tables_learned_rows_take_the_learned_settings(capsys, _stores):
    argv = ["table", "mlp-digits", "--pairs", "1", "--points", "3", "--learned-steps", "3"]
    assert cli.main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["learned_options"] == {"steps": 3}
    a, b = out["pairs"][0]
    rows = {(r["method"], r["group"]): r for r in out["rows"]}
    one = ["barrier", "mlp-digits", "--seeds", str(a), str(b), "--points", "3", "--json"]

    def cell(*extra):
        assert cli.main([*one, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    # the learned rows are the 3-step runs, read back from the cache; the others are unchanged
    short = cell("--method", "learned", "--group", "orth", "--learned-steps", "3")
    assert short["cached"] and short["barrier_loss"] == rows["learned", "orth"]["barrier_loss"]
    assert cell("--method", "weight", "--group", "orth")["cached"]
    assert not cell("--method", "learned", "--group", "perm")["cached"]  # the default's 300
    assert cli.main(argv) == 0
    assert "learned rows: steps 3" in capsys.readouterr().out
