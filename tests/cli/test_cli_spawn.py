"""``landscape spawn``: --json, the summary, --figure, and one-line errors before any training."""

from __future__ import annotations

import json

import pytest

from landscape.cli import main
from landscape.cli.parser import arguments as cli_args
from landscape.experiments import spawn
from landscape.plots.curves import figure_spawn


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_the_parsers_children_are_the_librarys():
    assert cli_args.SPAWN_CHILDREN == spawn.CHILDREN


def test_spawn_json_summary_and_figure(capsys, tmp_path):
    argv = ["spawn", "mlp-digits", "--at", "1000", "--every", "500", "--points", "5"]
    figure = tmp_path / "spawn.html"
    assert main([*argv, "--json", "--figure", str(figure)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["at"] == [1000] and r["every"] == 500 and r["children"] == 2
    assert [x["method"] for x in r["rows"]] == ["naive", "weight"]
    assert all(x["barrier_loss"] == pytest.approx(0.0, abs=1e-6) for x in r["rows"])
    assert "<html>" in figure.read_text() and r["figures"] == [str(figure)]
    assert len(figure_spawn(r, presentation=True).data) == 4  # 2 alignments × 2 panels
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "children spawned from seed 0" in out and "naive (nats)" in out


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--at", "7"], "must be a multiple of --every"),
        (["--at", "-1"], "must be non-negative"),
        (["--at", "0", "--children", "1"], "must be at least 2"),
        (["--at", "0", "--every", "0"], "must be at least 1"),
    ],
    ids=["not a snapshot", "negative", "one child", "every"],
)
def test_spawn_bad_input_is_one_line(capsys, argv, match):
    assert main(["spawn", "mlp-digits", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert match in err and "Traceback" not in err


def test_spawn_snapshots_past_the_memory_budget_are_refused_before_training(monkeypatch, capsys):
    import landscape.models.train as training

    def never(*args, **kwargs):
        raise AssertionError("trained before the budget was checked")

    monkeypatch.setattr(training, "run_seed", never)
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.05")
    # 1,001 snapshots of parameters and both AdamW moments: far past 50 MB
    assert main(["spawn", "mlp-digits", "--at", "0", "--every", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--every 1" in err and "1001 snapshots" in err and "LANDSCAPE_MEMORY_GB" in err
    # the default spacing (a fiftieth of the run) fits the same budget: refused only when it
    # does not fit
    from landscape.experiments.spawn import check_spawn

    assert check_spawn("mlp-digits", [0], 2, None) == 20
