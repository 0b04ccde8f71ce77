"""Time is bounded like memory: a request whose work (evaluations, pairs, mergekit runs) is past
a limit is refused before it starts, in one line naming the limit, unless ``--yes`` is given."""

from __future__ import annotations

import pytest

from landscape.budget import MAX_ALIGNMENTS, MAX_EVALUATIONS, MAX_MERGEKIT_RUNS
from landscape.cli import main
from landscape.experiments.barriers import curved, matrix
from landscape.experiments.merging import operators


@pytest.fixture(autouse=True)
def _no_work(tmp_path, monkeypatch):
    """Any measurement fails the test with a mark: the refusal must come before it."""
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))

    def started(*args, **kwargs):
        raise AssertionError("the work started")

    monkeypatch.setattr(curved, "measure_barrier", started)
    monkeypatch.setattr(matrix, "measure_barrier", started)
    monkeypatch.setattr(operators, "pair_merges", started)


CASES = [
    pytest.param(["curve", "mlp-digits", "--seeds", "0", "1", "--points", "2000000"],
                 ("--points 2000000", f"limit is {MAX_EVALUATIONS} without --yes"), id="curve"),
    pytest.param(["matrix", "mlp-digits", "--seeds", *map(str, range(301))],
                 ("301 seeds ask for 45150 pairs", f"limit is {MAX_ALIGNMENTS} without --yes"),
                 id="matrix"),
    pytest.param(["merges", "mlp-digits", "--seeds", "0", "1", "--points", "100000"],
                 ("600000 mergekit runs", f"limit is {MAX_MERGEKIT_RUNS} without --yes"),
                 id="merges"),
    pytest.param(["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--resolution", "1000"],
                 ("--resolution 1000", f"limit is {MAX_EVALUATIONS} without --yes"),
                 id="triangle"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "fragments"), CASES)
def test_work_past_the_limit_is_refused_before_it_starts(capsys, argv, fragments):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("landscape: error:") and "give --yes" in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


@pytest.mark.parametrize("argv", [CASES[0].values[0], CASES[1].values[0]], ids=["curve", "matrix"])
def test_yes_lets_the_work_start(capsys, argv):
    assert main([*argv, "--yes"]) == 1  # the mark of the stand-in measurement: it started
    assert "the work started" in capsys.readouterr().err
