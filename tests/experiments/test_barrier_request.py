"""The barrier request: frozen, hashable, checked when made, and the disk-cache key of before."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.experiments import (
    BARRIER_VERSION,
    BarrierRequest,
    RunContext,
    align,
    load,
    measure_barrier,
    seeds_request,
)
from landscape.matching import LearnedOptions, WeightOptions
from landscape.sources import Source, data_of
from landscape.store.cache import Cache, digest_tensors


def test_a_request_is_frozen_hashable_and_equal_to_its_twin() -> None:
    r = seeds_request("mlp-digits", (0, 1), "weight", "orth", points=5)
    twin = BarrierRequest(Source("mlp-digits", 0), Source("mlp-digits", 1), "weight", "orth",
                          options={"max_rounds": 50}, points=5)  # fmt: skip
    assert r == twin and hash(r) == hash(twin) and {r: 1}[twin] == 1
    assert r != dataclasses.replace(r, points=7)
    # the pipeline's choice of where the matching is stored does not change the result
    assert r == dataclasses.replace(r, store_matching=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.points = 9  # type: ignore[misc]


def test_options_are_read_into_the_methods_dataclass() -> None:
    r = seeds_request("mlp-digits", (0, 1), "learned", "orth", options={"steps": 5})
    assert r.options == LearnedOptions(steps=5)
    assert seeds_request("mlp-digits", (0, 1)).options == WeightOptions()
    given = WeightOptions(max_rounds=3)
    assert seeds_request("mlp-digits", (0, 1), options=given).options is given


def test_checkpoints_as_endpoints_hash_by_identity() -> None:
    a, b = load("mlp-digits", 0), load("mlp-digits", 1)
    r = BarrierRequest(a, b, "naive", points=3)
    assert r == BarrierRequest(a, b, "naive", points=3) and hash(r) == hash(r)
    assert r != BarrierRequest(load("mlp-digits", 0), b, "naive", points=3)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"method": "wieght"}, "unknown method 'wieght'; expected one of"),
        ({"group": "rot"}, "unknown group 'rot'; expected one of"),
        ({"split": "val"}, "unknown split 'val'; expected train or test"),
        ({"space": "both"}, "unknown space 'both'"),
        ({"points": 1}, "--points must be at least 2"),
        ({"points": 10**9}, "--points 1000000000 exceeds the limit"),
        ({"dtype": "float16"}, "unknown dtype 'float16'; expected one of float32, bfloat16"),
        ({"options": {"stepz": 3}}, "unknown setting 'stepz' of weight matching"),
    ],
    ids=["method", "group", "split", "space", "points", "budget", "dtype", "option"],
)
def test_a_bad_request_is_one_line_when_made(bad, message) -> None:
    with pytest.raises(LandscapeError, match=message) as err:
        seeds_request("mlp-digits", (0, 1), **bad)
    assert "\n" not in str(err.value)


def test_two_seeds_are_needed() -> None:
    with pytest.raises(LandscapeError, match="barrier needs two seeds: --seeds A B"):
        seeds_request("mlp-digits", (0, 1, 2))


def test_bfloat16_on_the_cpu_is_refused_before_loading(monkeypatch) -> None:
    def never(*args, **kw):
        raise AssertionError("loaded")

    monkeypatch.setattr(Source, "load", never)
    request = seeds_request("mlp-digits", (0, 1), dtype="bfloat16")
    with pytest.raises(LandscapeError, match="bfloat16 evaluation is for CUDA"):
        measure_barrier(request, device=torch.device("cpu"))


def test_the_key_is_the_cache_key_of_before(tmp_path) -> None:
    """The inputs of a barrier entry, field by field, as they were before requests: shipped
    results are found by them (tests/store/test_shipped_results.py reads them back)."""
    a, b = load("mlp-digits", 0), load("mlp-digits", 1)
    data = data_of(a)
    r = seeds_request("mlp-digits", (0, 1), "weight", "orth", points=3,
                      options={"max_rounds": 7, "tol": 1e-4})  # fmt: skip
    assert r.key(a, b, data) == {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "cfg": a.cfg.to_dict(),
        "method": "weight",
        "group": "orth",
        "seed": 0,
        "options": {"max_rounds": 7},  # a default said explicitly keys as one left out
        "points": 3,
        "split": "test",
        "coordinates": "processed",
        "data": data.key,
        "dtype": "float32",
        "version": BARRIER_VERSION,
    }
    assert (
        seeds_request("mlp-digits", (0, 1), space="circuits").key(a, b, data)["coordinates"]
        == "processed/circuits"
    )
    cache = Cache(tmp_path)
    run = measure_barrier(r, cache=cache)
    assert run.key == Cache.key("barrier", r.key(a, b, data)) and run.request is r
    assert measure_barrier(r, cache=cache).cached


@pytest.mark.parametrize(("method", "options"), [("weight", None), ("learned", {"steps": 2})])
def test_one_request_hashes_each_endpoint_once(tmp_path, monkeypatch, method, options) -> None:
    """The request's key, its matching's key and learned matching's weight-matching start all
    read the endpoints' weights: each model is hashed once per request, on a miss and on a hit,
    and the keys are those of a request hashing its own (the entries stored before are found)."""
    import landscape.experiments.barriers.alignment as alignment
    import landscape.experiments.barriers.pipeline as pipeline
    import landscape.experiments.barriers.request as request

    hashed: list[int] = []

    def counted(tensors):
        hashed.append(id(tensors))
        return digest_tensors(tensors)

    for module in (alignment, pipeline, request):
        monkeypatch.setattr(module, "digest_tensors", counted)
    r = seeds_request("mlp-digits", (0, 1), method, "orth", points=3, options=options)
    cache = Cache(tmp_path)
    miss = measure_barrier(r, cache=cache)
    assert not miss.cached and len(hashed) == 2 and len(set(hashed)) == 2
    hashed.clear()
    hit = measure_barrier(r, cache=cache)
    assert hit.cached and len(hashed) == 2
    a, b = load("mlp-digits", 0), load("mlp-digits", 1)
    assert miss.key == Cache.key("barrier", r.key(a, b, data_of(a)))
    # the matching entry is the one align() stores and finds without the pipeline
    hashed.clear()
    got = align(a, b, method, "orth", options=r.options, context=RunContext(cache=cache))
    assert got.cached and len(hashed) == 2
