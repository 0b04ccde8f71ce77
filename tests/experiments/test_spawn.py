"""Spawning: snapshots leave the run as it was, a run resumed from one goes on exactly as the
parent did, and children spawned at the last step are the parent (barrier 0)."""

from __future__ import annotations

import pytest
import torch

import landscape.models.runs as runs
from landscape.errors import LandscapeError
from landscape.experiments.spawn import SpawnOptions, spawn
from landscape.models.train import train, train_from, train_snapshots

MODEL, EVERY, LAST = "mlp-digits", 250, 1000


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_snapshots_keep_the_run_and_a_resumed_run_goes_on_as_the_parent(monkeypatch):
    snaps, hit = train_snapshots(MODEL, 0, EVERY)
    assert not hit and [s.step for s in snaps] == [0, 250, 500, 750, 1000]
    assert _same(snaps[-1].params, train(MODEL, 0)[0].params)  # the zoo run, bit for bit
    assert all(float(v.abs().sum()) == 0 for v in snaps[0].exp_avg.values())
    again, hit = train_snapshots(MODEL, 0, EVERY)
    assert hit and _same(again[2].exp_avg_sq, snaps[2].exp_avg_sq)
    # fed the parent's own remaining batches, a run resumed at step 500 ends where the parent
    # ended: parameters, moments and the schedule's step all came back
    real = runs.batches

    def parents_rest(model, seed, *args, **kwargs):
        batches = real(model, 0, *args, **kwargs)
        for _ in range(500 if seed == -1 else 0):
            next(batches)
        return batches

    monkeypatch.setattr(runs, "batches", parents_rest)
    resumed, _ = train_from(MODEL, 0, snaps[2], -1)
    assert _same(resumed.params, snaps[-1].params)
    assert resumed.meta["spawn"] == {"parent": 0, "step": 500, "order": -1}


def test_children_at_the_last_step_are_the_parent_and_earlier_ones_differ():
    r = spawn(MODEL, [750, LAST], SpawnOptions(every=EVERY, method="weight", points=5))
    assert r["at"] == [750, LAST] and r["steps"] == LAST
    assert [(x["step"], x["method"]) for x in r["rows"]] == [
        (750, "naive"), (750, "weight"), (LAST, "naive"), (LAST, "weight")]  # fmt: skip
    snaps, _ = train_snapshots(MODEL, 0, EVERY)
    kids = [train_from(MODEL, 0, snaps[-1], 100_000 + c)[0] for c in range(2)]
    assert _same(kids[0].params, kids[1].params) and _same(kids[0].params, snaps[-1].params)
    for x in r["rows"][2:]:
        assert x["barrier_loss"] == pytest.approx(0.0, abs=1e-6)
        assert x["barrier_accuracy"] == pytest.approx(0.0, abs=1e-9)
    early = [train_from(MODEL, 0, snaps[3], 100_000 + c)[0] for c in range(2)]
    assert not _same(early[0].params, early[1].params)  # their own data orders
    assert len(r["members"]) == 4 and r["function_ok"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"at": [7]}, "must be a multiple of --every 250"),
        ({"at": [1250]}, "between 0 and the run's 1000 steps"),
        ({"at": []}, "at least one spawn step"),
        ({"children": 1}, "--children must be at least 2"),
        ({"model": "no-such-model"}, "not one"),
        ({"every": 0}, "snapshots every 0 steps"),
    ],
    ids=["not a snapshot", "past the end", "no step", "one child", "not zoo", "every"],
)
def test_bad_requests_are_one_line_before_anything_trains(kwargs, match):
    args = {"model": MODEL, "at": [0], "every": EVERY, **kwargs}
    with pytest.raises(LandscapeError, match=match):
        spawn(args.pop("model"), args.pop("at"), SpawnOptions(**args))
