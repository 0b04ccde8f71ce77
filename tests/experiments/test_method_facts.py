"""What a method is comes from its registry entry, never from its name: the settings every
method declares (name, type, default, help), the facts read in its place (``aligns``,
``fixed_batch``), and the ``aligns`` every barrier result carries.

A toy method that moves nothing (``aligns=False``) under a name that is not ``naive`` is read
as naive wherever a result or a figure asks: what would have been a comparison with the name
``"naive"`` fails here.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, fields, replace

import pytest
import torch

from landscape.cli.summaries import show
from landscape.data import Split
from landscape.errors import LandscapeError
from landscape.experiments import barrier
from landscape.matching import (
    METHODS_BY_NAME,
    MatchingMethod,
    NoOptions,
    declaring,
    matching_key,
    matching_keys,
    method_of,
    register,
    result_aligns,
    unregister,
)
from landscape.matching.methods import declared_settings, setting
from landscape.matching.result import NAIVE
from landscape.plots.curves import figure_spawn
from landscape.plots.interpolation import above_naive, series_aligns
from landscape.plots.tidy import tidy_interpolation
from landscape.sources.data import DataSpec, SplitData
from landscape.store.cache import Cache
from tests.conftest import tiny_config


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


# ---------------------------------------------------------------- declared settings


def undeclared(entry: MatchingMethod) -> list[str]:
    """What is wrong with the settings ``entry`` declares: a field without a default, without
    help, or of a type ``--option`` cannot read (its default, written as text, must read back
    as itself)."""
    wrong = []
    for f, s in zip(fields(entry.options), entry.declared(), strict=True):
        if f.default is MISSING:
            wrong.append(f"{entry.name}.{s.name}: no default")
        if not s.help.strip():
            wrong.append(f"{entry.name}.{s.name}: no help")
        text = "none" if s.default is None else str(s.default)
        try:
            back = entry.text_settings({s.name: text})[s.name]
        except LandscapeError as err:
            wrong.append(f"{entry.name}.{s.name}: {err}")
            continue
        if back != s.default or type(back) is not type(s.default):
            wrong.append(f"{entry.name}.{s.name}: {text!r} reads as {back!r}")
    return wrong


@pytest.mark.parametrize("name", list(METHODS_BY_NAME))
def test_every_method_declares_its_settings(name):
    entry = method_of(name)
    assert undeclared(entry) == []
    declared = entry.declared()
    assert [s.name for s in declared] == [f.name for f in fields(entry.options)]
    for s in declared:  # the kind in words, as --option help and the errors say it
        assert s.kind() and not s.kind().startswith("a <")


def test_the_declarations_are_those_each_method_runs_with():
    assert [s.name for s in method_of("weight").declared()] == ["max_rounds", "tol",
                                                                  "within_heads"]  # fmt: skip
    assert [s.name for s in method_of("activation").declared()] == ["batch", "drop_first",
                                                                      "within_heads"]  # fmt: skip
    assert method_of("naive").declared() == ()
    steps = {s.name: s for s in method_of("learned").declared()}["steps"]
    assert (steps.type, steps.default) == (int, 300) and steps.help
    assert [m.name for m in declaring("max_rounds")] == ["weight"]
    assert [m.name for m in declaring("within_heads")] == ["activation", "weight", "learned"]
    assert declaring("rounds") == []


def test_a_setting_declared_without_help_or_a_default_is_caught():
    @dataclass(frozen=True)
    class Loose:
        rounds: int = 3  # a comment is no declaration
        start: str = setting("zero", "where the descent starts")

    loose = MatchingMethod("loose", "loose matching", Loose, NAIVE.run)
    assert undeclared(loose) == ["loose.rounds: no help"]
    assert [(s.name, s.type, s.default) for s in declared_settings(Loose)] == [
        ("rounds", int, 3), ("start", str, "zero")]  # fmt: skip
    assert undeclared(MatchingMethod("none", "no settings", NoOptions, NAIVE.run)) == []


def test_the_fixed_batch_follows_the_entry_not_the_name():
    """A language model's data sizes the fixed batch of a method that declares one (activation
    matching's ``batch``; here also a toy's ``rows``) from its positions: 2,048 positions in
    windows of 16 tokens are 128 rows. A method without one gets nothing."""
    cfg = tiny_config("gpt")
    windows = torch.zeros(40, 16, dtype=torch.long)
    split = Split(windows, windows)
    data = SplitData({"train": split, "test": split}, {"note": "windows"},
                     DataSpec(activation_tokens=2048))  # fmt: skip
    assert data.match_options(cfg, "activation") == {"batch": 128}
    assert data.match_options(cfg, "weight") == {} and data.match_options(cfg, "learned") == {}

    @dataclass(frozen=True)
    class Rows:
        rows: int = setting(256, "rows of A's training split, one fixed batch")

    register(MatchingMethod("rows", "fixed rows", Rows, NAIVE.run, fixed_batch="rows"))
    try:
        assert data.match_options(cfg, "rows") == {"rows": 128}
    finally:
        unregister("rows")
    assert [m.name for m in METHODS_BY_NAME.values() if m.fixed_batch] == ["activation"]


# ---------------------------------------------------------------- aligns, from the entry


STILL = replace(NAIVE, name="still", title="standing still")  # aligns=False, not called naive


@pytest.fixture
def still():
    register(STILL)
    yield STILL
    unregister(STILL.name)


@pytest.mark.parametrize("method", ["naive", "weight"])
def test_a_barrier_result_carries_whether_its_method_aligns(method):
    r = barrier("mlp-digits", (0, 1), method, "perm", points=3)
    assert r["aligns"] is method_of(method).aligns
    assert result_aligns(r) is r["aligns"]
    # derived when the result is written, never stored: the cached entry holds no such field,
    # and its key is the one it had before results carried it
    entry = Cache().get("barrier", r["cache_key"])
    assert entry is not None and "aligns" not in json.dumps(entry.meta)
    again = barrier("mlp-digits", (0, 1), method, "perm", points=3)
    assert again["cached"] and again["cache_key"] == r["cache_key"]


def test_a_method_that_moves_nothing_is_read_as_naive_whatever_its_name(still):
    r = barrier("mlp-digits", (0, 1), "still", "orth", points=3)
    assert r["aligns"] is False and not result_aligns(r)
    # keys and styles: no group, naive's marker
    assert matching_key("still", "orth") == "still"
    assert matching_key("weight", "orth") == "weight/orth"
    assert matching_keys(["still", "weight"], ["perm", "orth"]) == ["still", "weight/perm",
                                                                    "weight/orth"]  # fmt: skip
    # the interpolation figure's baseline and its CSV: the series of the method that moves
    # nothing is the one the others are held against (here a line made 1 nat higher than it),
    # and its rows have no group
    weight = barrier("mlp-digits", (0, 1), "weight", "orth", points=3)
    higher = {**weight, "barrier_loss": r["barrier_loss"] + 1.0}
    series = [{"label": "standing still", "results": [r]}, {"label": "w", "results": [higher]}]
    assert [series_aligns(s) for s in series] == [False, True]
    (above,) = above_naive(series)
    assert above["label"] == "w" and above["naive_loss"] == pytest.approx(r["barrier_loss"])
    rows = tidy_interpolation(series)
    assert set(rows[rows["method"] == "still"]["group"]) == {""}
    assert set(rows[rows["method"] == "weight"]["group"]) == {"orth"}
    # the command line's summary says it aligns nothing
    assert "none (still): B as trained" in show("barrier", r)
    # a record that names only its method (a spawn row) is read through the registry
    spawn = {"steps": 10, "children": 2, "split": "test", "rows": [
        {"step": 1, "method": "still", "group": "orth", "barrier_loss": 0.3,
         "barrier_accuracy": 0.1},
        {"step": 1, "method": "weight", "group": "orth", "barrier_loss": 0.1,
         "barrier_accuracy": 0.0}]}  # fmt: skip
    names = {t.name for t in figure_spawn(spawn).data}
    assert names == {"still", "weight/orth"}
    dashes = {t.name: t.line.dash for t in figure_spawn(spawn).data}
    assert dashes["still"] == "dash" and dashes["weight/orth"] == "solid"
