"""The matching methods' registry: a method is one module and one registry line.

A toy method (the residual stream's element alone, from one weight similarity: the worked
example of docs/architecture.md, "Adding a matching method") is registered, run through
``match`` and one barrier end to end, and unregistered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import pytest

from landscape.errors import LandscapeError
from landscape.experiments import barrier
from landscape.experiments.curvature import CurvatureRequest
from landscape.experiments.merging.operators import check_merges_work
from landscape.matching import (
    METHODS_BY_NAME,
    LearnedOptions,
    MatchContext,
    MatchingMethod,
    MatchResult,
    WeightOptions,
    aligns,
    given_options,
    match,
    method_of,
    options_key,
    register,
    unregister,
)
from landscape.matching.methods import matching_kinds, prepare_pair, setting
from landscape.matching.result import aligned_distance, finish, weight_distance
from landscape.matching.solvers import solve
from landscape.matching.weight import weight_similarity
from landscape.models import ModelConfig, Params, init_params
from landscape.names import METHODS
from landscape.sources import Source
from landscape.symmetry import Transform, apply, random_transform, spec_for
from tests.conftest import tiny_config


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


# ---------------------------------------------------------------- the toy method's module


@dataclass(frozen=True)
class StreamOptions:
    gains: str = setting("unsigned", "norm gains in the score (unsigned) or left out (ignore)")


def stream_matching(cfg: ModelConfig, params_a: Params, params_b: Params, group: str,
                    options: StreamOptions, *, train_split: Any,
                    context: MatchContext) -> MatchResult:  # fmt: skip
    """The residual stream's element alone, from one weight similarity (FFN units and heads
    stay where they are)."""
    t0 = time.perf_counter()
    cfg_p, a, b = prepare_pair(cfg, params_a, params_b, group)
    spec = spec_for(cfg_p)
    kind = matching_kinds(spec, group)["resid"]
    others = set(spec.variables) - {"resid"}
    m, m_abs = weight_similarity(spec, "resid", a, b, unsolved=others, gains=options.gains)
    elements = {"resid": solve(kind, m, unsigned=m_abs)}
    objective = [weight_distance(a, b), aligned_distance(spec, elements, a, b)]
    return finish("stream", group, cfg, params_b, (cfg_p, a, b), Transform(elements), t0,
                  objective=objective, rounds=1)  # fmt: skip


STREAM = MatchingMethod("stream", "stream matching", StreamOptions, stream_matching)


@pytest.fixture
def stream():
    register(STREAM)  # the registry line of a method defined outside the package
    yield STREAM
    unregister(STREAM.name)
    assert "stream" not in METHODS_BY_NAME


# ---------------------------------------------------------------- tests


def test_the_offered_names_are_the_registered_methods():
    """landscape.names (torch-free: the CLI's choices) lists the built-in entries, in order."""
    assert METHODS == tuple(METHODS_BY_NAME)
    assert [m.name for m in METHODS_BY_NAME.values() if m.needs_data] == ["activation", "learned"]
    assert [m.name for m in METHODS_BY_NAME.values() if not m.aligns] == ["naive"]
    assert method_of("learned").learned and method_of("weight").consumes


@pytest.mark.parametrize("group", ["perm", "signed-perm"])
def test_a_registered_method_runs_through_match(stream, group):
    cfg = tiny_config("mlp")
    a = init_params(cfg, 0)
    planted = random_transform(spec_for(cfg), {"resid": "perm" if group == "perm" else
                                               "signed-perm"}, 3)  # fmt: skip
    b = apply(spec_for(cfg), planted, a)
    r = match(cfg, a, b, "stream", group)
    assert r.method == "stream" and set(r.transform.elements) == {"resid"}
    assert r.function_check < 1e-5 and r.function_check_a < 1e-5
    # B is A with its stream relabelled: the one solve undoes it exactly
    assert max((r.params_a[k] - r.params_b[k]).abs().max().item() for k in r.params_a) < 1e-6
    assert match(cfg, a, b, "stream", group, gains="ignore").function_check < 1e-5
    with pytest.raises(LandscapeError, match="unknown setting 'steps' of stream matching"):
        match(cfg, a, b, "stream", group, steps=3)


def test_a_registered_method_measures_a_barrier(stream):
    r = barrier("mlp-digits", (0, 1), "stream", "perm", points=3)
    assert r["method"] == "stream" and len(r["loss"]) == 3 and r["function_ok"]
    naive = barrier("mlp-digits", (0, 1), "naive", "perm", points=3)
    assert r["endpoint_loss"] == pytest.approx(naive["endpoint_loss"], abs=1e-6)
    # its default, said: the same entry
    said = barrier("mlp-digits", (0, 1), "stream", "perm", points=3, options={"gains": "unsigned"})
    assert said["cached"] and said["cache_key"] == r["cache_key"]


def test_whether_a_method_aligns_is_its_entry_not_its_name(stream):
    """A registered method that moves nothing (``aligns=False``, as naive) is read as such
    wherever a result asks whether it aligns: no aligned line beside naive's, one merge
    alignment, not two."""
    register(replace(STREAM, name="still", aligns=False))
    try:
        assert aligns("stream") and not aligns("still") and not aligns("naive")
        a, b = Source("mlp-digits", 0), Source("mlp-digits", 1)
        assert CurvatureRequest(a, b, "still").methods == ("naive",)
        assert CurvatureRequest(a, b, "stream").methods == ("naive", "stream")
        with pytest.raises(LandscapeError, match=r"× 1 alignment\(s\)"):
            check_merges_work(100, "still", ("linear",), 9)
        with pytest.raises(LandscapeError, match=r"× 2 alignment\(s\)"):
            check_merges_work(100, "stream", ("linear",), 9)
    finally:
        unregister("still")
    with pytest.raises(ValueError, match="unknown matching method 'still'"):
        aligns("still")


def test_an_unregistered_method_is_refused_in_one_line():
    with pytest.raises(LandscapeError, match="unknown method 'stream'; expected one of naive"):
        barrier("mlp-digits", (0, 1), "stream", "perm", points=3)
    with pytest.raises(ValueError, match="unknown matching method 'stream'"):
        method_of("stream")


def test_settings_are_typed_once_and_keyed_by_what_differs_from_the_defaults():
    learned = method_of("learned").settings({"steps": 300, "lr": 0.2})
    assert isinstance(learned, LearnedOptions) and learned.lr == 0.2
    assert method_of("learned").settings(learned) is learned  # a dataclass passes as it is
    assert options_key(learned) == {"lr": 0.2}
    assert options_key(WeightOptions(max_rounds=50, tol=1e-4)) == {}
    assert options_key(LearnedOptions(steps=300.0)) == {"steps": 300.0}  # another type: said
    # the dict form, kept for callers that key a cache themselves
    assert given_options("learned", {"steps": 300, "lr": 0.2}) == options_key(learned)
    with pytest.raises(LandscapeError, match="unknown setting 'step' of learned matching"):
        method_of("learned").settings({"step": 3})
