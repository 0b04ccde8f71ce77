"""An interrupted training run goes on from its last evaluation, and ends where the
uninterrupted run ends, bit for bit (solo and batched, with dropout, over epochs of the data)."""

from __future__ import annotations

import dataclasses

import pytest

from landscape.models import train as T
from landscape.models.snapshots import RUN_STATE
from landscape.models.zoo import ZOO, TrainConfig
from landscape.store.cache import Cache

# 60 steps of 16 images: more than one epoch of a half split is not needed; the stream's
# permutations and the dropout generator both advance, and three evaluations keep state twice
RECIPE = TrainConfig(steps=60, batch_size=16, lr=3e-3, warmup=10, eval_every=20, dropout=0.2)


class Stop(Exception):
    """Stands for a run killed from outside."""


@pytest.fixture
def model(monkeypatch):
    m = dataclasses.replace(ZOO["vit-digits"], train=RECIPE)
    monkeypatch.setitem(ZOO, "vit-digits", m)
    return m


def _stop_after(step):
    seen = []

    def progress(stage, done, total):
        seen.append(stage)
        if done == step and stage.startswith("test loss"):
            raise Stop

    return progress, seen


def test_an_interrupted_solo_run_resumes_and_ends_as_the_whole_run(model, tmp_path):
    whole, _ = T.train("vit-digits", 0, cache=Cache(tmp_path / "a"))
    cache = Cache(tmp_path / "b")
    progress, _ = _stop_after(40)
    with pytest.raises(Stop):
        T.train("vit-digits", 0, cache=cache, progress=progress)
    key = cache.key("checkpoint", T.checkpoint_inputs(model, 0))
    assert cache.get(RUN_STATE, key).meta["step"] == 40
    stages = []
    again, hit = T.train("vit-digits", 0, cache=cache,
                         progress=lambda stage, done, total: stages.append((stage, done)))
    assert not hit and ("resumed at step 40", 40) in stages
    assert all(done > 40 for stage, done in stages if stage.startswith("test loss"))
    assert again.meta["digest"] == whole.meta["digest"]
    assert again.meta["curves"] == whole.meta["curves"]
    assert cache.get(RUN_STATE, key) is None  # kept only while the run is unfinished


def test_an_interrupted_batched_run_resumes_and_ends_as_the_whole_run(model, tmp_path):
    whole = T.train_seeds("vit-digits", [0, 1], cache=Cache(tmp_path / "a"))
    cache = Cache(tmp_path / "b")
    progress, _ = _stop_after(20)
    with pytest.raises(Stop):
        T.train_seeds("vit-digits", [0, 1], cache=cache, progress=progress)
    assert cache.info()["kinds"][RUN_STATE]["entries"] == 1
    again = T.train_seeds("vit-digits", [0, 1], cache=cache)
    assert again.batched and again.cached == [False, False]
    for a, b in zip(whole.checkpoints, again.checkpoints, strict=True):
        assert a.meta["digest"] == b.meta["digest"] and a.meta["curves"] == b.meta["curves"]
    assert RUN_STATE not in cache.info()["kinds"]


def test_a_run_without_a_kept_state_trains_from_the_start(model, tmp_path):
    cache = Cache(tmp_path / "c")
    stages = []
    T.train("vit-digits", 1, cache=cache, progress=lambda s, d, t: stages.append(s))
    assert not any(s.startswith("resumed") for s in stages)


def test_progress_says_accuracy_in_percent(model, tmp_path):
    """Accuracy is a percentage everywhere a person reads it, the progress bar included
    (it printed 0.9577 beside a page of percentages)."""
    import re

    solo, batched = [], []
    T.train("vit-digits", 2, cache=Cache(tmp_path / "s"), progress=lambda s, d, t: solo.append(s))
    T.train_seeds("vit-digits", [3, 4], cache=Cache(tmp_path / "b"),
                  progress=lambda s, d, t: batched.append(s))  # fmt: skip
    shown = [s for s in solo + batched if s.startswith("test loss")]
    assert shown
    for stage in shown:
        accuracy = stage.partition("test accuracy ")[2]
        assert re.fullmatch(r"\d{1,3}\.\d\d%(/\d{1,3}\.\d\d%)*", accuracy), stage
