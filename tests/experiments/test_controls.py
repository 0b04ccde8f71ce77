"""Controls (issue #9): variants train deterministically, the table agrees with ``barrier``,
learned matching never sees the test split, and the unfolded path keeps both functions."""

import dataclasses
import json

import pytest
import torch

from landscape import experiments
from landscape.cli import main
from landscape.experiments import Aligned, align, barrier, eval_split, load
from landscape.experiments.barriers.controls import (
    CONTROLS,
    ControlsOptions,
    control_pair,
    controls_table,
    function_distance,
    original_coordinates,
)
from landscape.matching import match
from landscape.models import forward, init_params
from landscape.models.train import checkpoint_inputs
from landscape.models.training_data import variant_train
from landscape.models.zoo import VARIANTS, ZOO, Checkpoint, TrainConfig, split_for
from landscape.store.cache import Cache
from tests.conftest import tiny_config, tiny_inputs


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def short_recipe(monkeypatch):
    """mlp-digits with a 60-step recipe: seconds to train, never the shipped weights."""
    zm = ZOO["mlp-digits"]
    tc = TrainConfig(steps=60, batch_size=64, lr=3e-3, warmup=10, eval_every=30)
    monkeypatch.setitem(ZOO, "mlp-digits", dataclasses.replace(zm, train=tc))
    return "mlp-digits"


def test_default_cache_key_has_no_variant():
    zm = ZOO["mlp-digits"]
    plain = checkpoint_inputs(zm, 3)
    assert set(plain) == {"name", "config", "train", "seed", "data", "version"}
    assert checkpoint_inputs(zm, 3, variant=None) == plain
    keys = {Cache.key("checkpoint", checkpoint_inputs(zm, 3, variant=v)) for v in VARIANTS}
    assert Cache.key("checkpoint", plain) not in keys and len(keys) == len(VARIANTS)
    assert checkpoint_inputs(zm, 3, variant="ln")["config"]["norm"] == "ln"


def test_variant_training_data():
    zm = ZOO["mlp-digits"]
    split = split_for(zm, "train")
    perm = variant_train(zm, VARIANTS["permuted-labels"], split)
    assert torch.equal(perm.targets, (split.targets + 1) % 10)
    shuffled = variant_train(zm, VARIANTS["shuffled-labels"], split)
    assert torch.equal(shuffled.inputs, split.inputs)
    assert torch.equal(shuffled.targets.sort().values, split.targets.sort().values)
    assert (shuffled.targets != split.targets).double().mean() > 0.5
    a, b = (variant_train(zm, VARIANTS[h], split) for h in ("half-a", "half-b"))
    assert len(a) + len(b) == len(split)
    rows = {tuple(x.tolist()) for x in a.inputs}
    assert not rows & {tuple(x.tolist()) for x in b.inputs}


def test_control_pair_is_deterministic(short_recipe, tmp_path):
    a1, b1 = control_pair(short_recipe, "disjoint-halves", (0, 1), cache=Cache(tmp_path / "one"))
    a2, b2 = control_pair(short_recipe, "disjoint-halves", (0, 1), cache=Cache(tmp_path / "two"))
    assert a1.meta["digest"] == a2.meta["digest"] and b1.meta["digest"] == b2.meta["digest"]
    assert a1.meta["variant"] == "half-a" and b1.meta["variant"] == "half-b"
    _, early = control_pair(short_recipe, "barely-trained", (0, 1), cache=Cache(tmp_path / "one"))
    assert early.meta["steps_run"] == 1  # 2% of 60 steps, rounded


def test_table_rows_describe_controls_and_match_barrier(short_recipe):
    rows = (("naive", "perm"), ("weight", "orth"))
    t = controls_table(short_recipe, 2,
                       ControlsOptions(controls=("real", "permuted-labels"), rows=rows, points=5))
    assert t["pairs"] == [[0, 1], [2, 3]]
    by = {(r["control"], r["method"], r["group"]): r for r in t["rows"]}
    for (method, group), row in ((k[1:], v) for k, v in by.items() if k[0] == "real"):
        singles = [barrier(short_recipe, p, method, group, points=5) for p in t["pairs"]]
        assert row["per_pair_loss"] == [s["barrier_loss"] for s in singles]
        assert row["split"] == "test" and all(s["split"] == "test" for s in singles)
    assert by[("real", "naive", "perm")]["fraction_removed"] == 0.0
    controls = {c["control"]: c for c in t["controls"]}
    assert controls["permuted-labels"]["description"] == CONTROLS["permuted-labels"].description
    # B learned its own (permuted) task; on the normal task it disagrees with A almost always.
    assert controls["permuted-labels"]["disagreement"] > controls["real"]["disagreement"]
    assert controls["permuted-labels"]["own_task_accuracy_b"] > 0.5
    assert controls["permuted-labels"]["endpoint_accuracy_b"] < 0.2
    # Folding changes the path, not the endpoints: the naive line is the same in both.
    naive = by[("real", "naive", "perm")]
    assert naive["barrier_loss_original"] == pytest.approx(naive["barrier_loss"], abs=1e-5)


def test_function_distance_of_a_model_with_itself_is_zero():
    a = load("mlp-digits", 0)
    d = function_distance(a, a)
    assert d == {"disagreement": 0.0, "tv_distance": 0.0, "l2_distance": 0.0}


def test_learned_matching_trains_on_the_training_split(monkeypatch):
    seen = {}
    real = experiments.barriers.alignment.match

    def spy(cfg, pa, pb, method, group, *, train_split=None, **kw):
        if method != "learned":  # its start, weight matching, needs no data
            return real(cfg, pa, pb, method, group, train_split=train_split, **kw)
        seen["split"] = train_split
        raise RuntimeError("stop here")

    monkeypatch.setattr(experiments.barriers.alignment, "match", spy)
    a, b = load("mlp-digits", 0), load("mlp-digits", 1)
    with pytest.raises(RuntimeError, match="stop here"):
        align(a, b, "learned", "orth")
    train, test = eval_split(a, "train"), eval_split(a, "test")
    assert torch.equal(seen["split"].inputs, train.inputs)
    assert len(seen["split"]) != len(test)


@pytest.mark.parametrize("split", ["test", "train"])
def test_every_barrier_states_its_split(split):
    r = barrier("mlp-digits", (0, 1), "naive", "perm", points=3, split=split)
    assert r["split"] == split
    request = experiments.BarrierRequest(load("mlp-digits", 0), load("mlp-digits", 1), "naive",
                                         points=3, split=split)  # fmt: skip
    assert experiments.measure_barrier(request).to_dict()["split"] == split


@pytest.mark.parametrize("norm", ["rms", "ln"])
@pytest.mark.parametrize("arch", ["mlp", "vit"])
@pytest.mark.parametrize("group", ["perm", "signed-perm", "orth"])
def test_original_coordinates_keep_both_functions(arch, norm, group):
    cfg = tiny_config(arch, norm)

    def model(seed):
        p = init_params(cfg, seed)
        g = torch.Generator().manual_seed(seed)
        # Random gains and biases: with all gains 1 folding is trivially undone.
        return {k: v + 0.3 * torch.randn(v.shape, generator=g) if k.endswith((".w", ".b"))
                else v for k, v in p.items()}  # fmt: skip

    pa, pb = model(1), model(2)
    r = match(cfg, pa, pb, "weight", group)
    al = Aligned(r.cfg, r.params_a, r.params_b, r.resid_matrix(), {}, False)
    c, oa, ob = original_coordinates(Checkpoint(cfg, pa), Checkpoint(cfg, pb), al)
    x = tiny_inputs(cfg, 8)
    assert (forward(c, oa, x) - forward(cfg, pa, x)).abs().max() < 1e-4
    assert (forward(c, ob, x) - forward(cfg, pb, x)).abs().max() < 1e-4
    folded = [k for k in pa if k not in r.params_a]
    assert all(k in ob for k in folded)  # gains/biases are parameters again
    if norm == "rms":
        n = naive_original(cfg, pa, pb, group)
        assert all(torch.allclose(n[k], pb[k], atol=1e-5) for k in n if k in pb)


def naive_original(cfg, pa, pb, group):
    """The naive alignment written back in original coordinates."""
    r = match(cfg, pa, pb, "naive", group)
    al = Aligned(r.cfg, r.params_a, r.params_b, r.resid_matrix(), {}, False)
    return original_coordinates(Checkpoint(cfg, pa), Checkpoint(cfg, pb), al)[2]


def test_cli_controls_bad_model(capsys):
    assert main(["controls", "no-such-model", "--json"]) == 2
    err = capsys.readouterr().err
    assert "unknown model" in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_controls_json(short_recipe, capsys):
    assert main(["controls", short_recipe, "--pairs", "1", "--points", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {c["control"] for c in out["controls"]} == set(CONTROLS)
    assert all(c["description"] for c in out["controls"])
    assert len(out["rows"]) == 6 * len(CONTROLS)
