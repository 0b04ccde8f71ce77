"""Barriers against narrower models: the embedding keeps B's function in A's configuration, a
planted width change is recovered with zero barrier, every aligned narrow model keeps its
function, and bad factors are refused in one line before anything is trained."""

import dataclasses
import json

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments import (
    RunContext,
    WidthOptions,
    align,
    check_factors,
    default_factors,
    embed_checkpoint,
    narrow_checkpoint,
    narrow_model,
    width_barriers,
    width_rows,
)
from landscape.matching import function_check, weight_distance
from landscape.models.zoo import ZOO, Checkpoint, TrainConfig
from landscape.store.cache import Cache
from landscape.symmetry import apply, random_transform, spec_for

MODEL = "vit-digits"  # d_model 32, 4 heads of d_head 8


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def short_recipe(monkeypatch):
    """vit-digits with a 40-step recipe: a second to train, never the shipped weights."""
    tc = TrainConfig(steps=40, batch_size=64, lr=3e-3, warmup=10, eval_every=20)
    monkeypatch.setitem(ZOO, MODEL, dataclasses.replace(ZOO[MODEL], train=tc))
    return MODEL


def test_narrow_model_divides_only_the_width():
    wide = ZOO[MODEL].config
    cfg = narrow_model(MODEL, 4).config
    assert (cfg.d_model, cfg.d_norm) == (8, 8)
    assert cfg.replace(d_model=wide.d_model, d_norm=0) == wide  # heads, d_head, d_mlp kept
    assert narrow_model(MODEL, 1) is ZOO[MODEL]


def test_embedding_keeps_logits_in_the_wide_config(short_recipe):
    narrow = narrow_checkpoint(short_recipe, 2, 1)
    assert narrow.cfg.d_model == 16 and narrow.meta["width_factor"] == 2
    b = embed_checkpoint(narrow, 32, seed=3)
    assert b.cfg == ZOO[MODEL].config  # exactly the configuration of a width-32 zoo model
    assert function_check(narrow.cfg, narrow.params, b.cfg, b.params) < 1e-4
    # deterministic: the same seed trains the same narrow model again from the cache
    again = narrow_checkpoint(short_recipe, 2, 1)
    assert all(torch.equal(again.params[k], narrow.params[k]) for k in narrow.params)


def test_planted_width_change_has_zero_barrier(short_recipe):
    """A = B (width 16) embedded by a random semi-orthogonal G, its stream, FFN units and heads
    then permuted; weight matching finds A again and the line has no barrier."""
    narrow = narrow_checkpoint(short_recipe, 2, 1)
    emb = embed_checkpoint(narrow, 32, seed=11)
    spec = spec_for(emb.cfg)
    moved = apply(spec, random_transform(spec, "perm", 5), emb.params)
    a = Checkpoint(emb.cfg, moved, {"name": MODEL, "seed": 99})
    rows, warnings = width_rows(a, narrow, ("naive", "weight"), points=5)
    assert not warnings
    by = {r["method"]: r for r in rows}
    assert abs(by["weight"]["barrier_loss"]) < 1e-5 and abs(by["weight"]["barrier_accuracy"]) < 1e-9
    assert by["naive"]["barrier_loss"] > 100 * abs(by["weight"]["barrier_loss"])
    al = align(a, embed_checkpoint(narrow, 32), "weight", "orth")  # the cached alignment
    assert weight_distance(al.params_a, al.params_b) < 1e-8 * weight_distance(al.params_a, {
        k: torch.zeros_like(v) for k, v in al.params_a.items()})  # fmt: skip
    for r in rows:
        assert r["factor"] == 2 and r["width"] == 16 and r["function_check"] < 1e-4


def test_weight_matching_does_not_depend_on_the_embedding(short_recipe):
    """Every embedding G0 reaches the same aligned B: O(d) matching of the embedded B is the
    semi-orthogonal matching of B itself (experiments/barriers/widths.py)."""
    a = narrow_checkpoint(short_recipe, 1, 0)
    narrow = narrow_checkpoint(short_recipe, 2, 1)
    embedded = [embed_checkpoint(narrow, 32, seed).params for seed in (0, 1)]
    aligned = [align(a, embed_checkpoint(narrow, 32, seed), "weight", "orth").params_b
               for seed in (0, 1)]  # fmt: skip

    def gap(x, y):
        return max(float((x[k] - y[k]).abs().max()) for k in x)

    assert gap(*embedded) > 0.1 and gap(*aligned) < 1e-5  # float32 round-off


def test_width_barriers_rows_keep_every_function_and_cache(short_recipe):
    kw = WidthOptions(factors=(2, 8), methods=("naive", "weight"), points=5)  # d/8: below d_head
    r = width_barriers(short_recipe, 0, 1, kw)
    assert [(x["factor"], x["width"], x["method"]) for x in r["rows"]] == [
        (2, 16, "naive"), (2, 16, "weight"), (8, 4, "naive"), (8, 4, "weight")]  # fmt: skip
    assert r["function_ok"] and not r["warnings"] and r["group"] == "orth"
    for row in r["rows"]:
        assert row["function_check"] < 1e-4 and row["function_check_embedded"] < 1e-4
        assert len(row["lambdas"]) == 5 and row["lambdas"][-1] == 1.0
        # λ = 1 is A itself in every row
        assert row["endpoint_loss"][0] == pytest.approx(r["rows"][0]["endpoint_loss"][0], abs=1e-6)
    assert [n["width"] for n in r["narrow"]] == [16, 4]
    assert r["rows"][0]["within_head_cond"] is None and r["rows"][1]["within_head_cond"] >= 1
    json.dumps(r)
    again = width_barriers(short_recipe, 0, 1, kw)
    assert again["cached"] and again["rows"] == r["rows"]


@pytest.mark.parametrize(
    "factors,fragment",
    [
        pytest.param((3,), "does not divide d_model = 32", id="not-a-divisor"),
        pytest.param((64,), "does not divide", id="wider-than-the-model"),
        pytest.param((0,), "at least 1", id="zero"),
        pytest.param((2.0,), "whole number", id="float"),
        pytest.param((True,), "whole number", id="bool"),
        pytest.param((2, 2), "given twice", id="twice"),
        pytest.param((), "at least one", id="none"),
    ],
)
def test_bad_factors_are_refused_before_training(factors, fragment, tmp_path):
    cache = Cache(tmp_path / "c")
    with pytest.raises(LandscapeError, match=fragment) as err:
        width_barriers(MODEL, 0, 1, WidthOptions(factors=factors), context=RunContext(cache=cache))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "c").exists() or not list((tmp_path / "c").rglob("*.safetensors"))


def test_factors_allowed_and_by_default():
    # 1: the same-width reference; 8 and 32 leave widths below d_head = 8, which are allowed
    assert check_factors(ZOO[MODEL].config, [1, 2, 8, 32]) == (1, 2, 8, 32)
    assert default_factors(ZOO[MODEL].config) == (2, 4, 8, 16)
    assert default_factors(ZOO[MODEL].config.replace(d_model=24)) == (2, 4, 8)


def test_cli_widths_json(short_recipe, capsys):
    argv = ["widths", short_recipe, "--seeds", "0", "1", "--factors", "4", "--points", "3",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["factors"] == [4] and {r["method"] for r in out["rows"]} == {"naive", "weight"}


def test_cli_widths_refuses_a_bad_factor(capsys):
    assert main(["widths", MODEL, "--seeds", "0", "1", "--factors", "5", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "does not divide" in err
