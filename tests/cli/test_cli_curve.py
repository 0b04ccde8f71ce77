"""``landscape curve``: --json, the summary, --figure, and one-line errors before any work."""

from __future__ import annotations

import json

import pytest

from landscape.cli import main
from landscape.cli.parser import arguments as cli_args
from landscape.experiments.barriers import curved
from landscape.plots.curves import figure_curve
from landscape.plots.tidy import tidy_curve


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_the_parsers_curve_settings_are_the_librarys():
    assert cli_args.CURVE_KINDS == curved.KINDS
    assert cli_args.CURVE_STEPS == curved.STEPS and cli_args.CURVE_BENDS == curved.BENDS
    assert cli_args.CURVE_MAX_BENDS == curved.MAX_BENDS


def test_curve_json_summary_and_figure(capsys, tmp_path):
    argv = ["curve", "mlp-digits", "--seeds", "0", "1", "--method", "weight", "--kind", "chain",
            "--steps", "60", "--points", "5"]  # fmt: skip
    figure = tmp_path / "curve.html"
    assert main([*argv, "--json", "--figure", str(figure)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [a["method"] for a in r["alignments"]] == ["naive", "weight"]
    assert r["kind"] == "chain" and r["steps"] == 60 and len(r["lambdas"]) == 5
    assert len(r["rows"]) == 4 and r["function_ok"]
    for al in r["alignments"]:
        assert al["curve"]["barrier_loss"] < al["line"]["barrier_loss"]
    assert "<html>" in figure.read_text() and r["figures"] == [str(figure)]
    fig = figure_curve(r, presentation=True)
    assert len(fig.data) == 8  # 2 alignments × 2 paths × 2 panels
    frame = tidy_curve(r)
    assert len(frame) == 2 * 2 * 2 * 5 and set(frame["path"]) == {"line", "chain"}
    assert main(argv) == 0  # the summary, from the cache
    out = capsys.readouterr().out
    assert "polygonal chain" in out and "straight line" in out and "read from the cache" in out


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--kind", "spline"], "invalid choice: 'spline'"),
        (["--bends", "0"], "must be at least 1"),
        (["--bends", "99"], "must be at most 8"),
        (["--steps", "-3"], "must be non-negative"),
        (["--lr", "0"], "must lie in (0, 1]"),
        (["--method", "magic"], "invalid choice: 'magic'"),
    ],
    ids=["kind", "no bends", "too many bends", "steps", "lr", "method"],
)
def test_curve_bad_input_is_one_line(capsys, argv, match):
    assert main(["curve", "mlp-digits", "--seeds", "0", "1", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err and "Traceback" not in err


def test_curve_same_seeds_and_unknown_model_are_one_line(capsys):
    assert main(["curve", "mlp-digits", "--seeds", "1", "1"]) == 2
    assert "seeds must differ" in capsys.readouterr().err
    assert main(["curve", "no-such-model", "--seeds", "0", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no-such-model is not a zoo model" in err
