"""Gauge sweep: B_d matching undoes a B_d scramble exactly, sign-marginalised assignment
recovers every coordinate, trajectories beat endpoints, coordinate claims collapse."""

from __future__ import annotations

import pytest
import torch

from landscape import data
from landscape.experiments.gauge.parts import (
    claim_check,
    coordinate_accuracy,
    recover,
    recovery_under_drift,
    resid_only,
    scramble_test,
    trajectory_transport,
)
from landscape.models import forward, init_params
from landscape.optim import adamw_steps
from landscape.sources import split_sampler
from landscape.symmetry import SIGNED_PERM, apply, spec_for
from landscape.tasks import Task
from tests.conftest import tiny_config, tiny_inputs


def synthetic_task(arch: str = "mlp", seed: int = 0, n: int = 256, d_model: int = 16) -> Task:
    """A tiny model with trained-like gains and its own argmax labels as data (a teacher)."""
    cfg = tiny_config(arch).replace(d_model=d_model, d_norm=0)
    params = init_params(cfg, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    for name in params:
        if name.endswith(".w"):
            params[name] = params[name] + 0.3 * torch.randn(params[name].shape, generator=gen)
        if name.endswith("W_U"):
            params[name] = 4 * params[name]  # confident labels: a low-loss teacher
    x = tiny_inputs(cfg, batch=n, seed=seed + 2)
    with torch.no_grad():
        y = forward(cfg, params, x).argmax(-1)
    split = data.Split(x, y)
    half = n // 2
    return Task(f"tiny-{arch}", seed, cfg, params, split_sampler(split), x[:half], y[:half],
                data.Split(x[half:], y[half:]), lr=3e-3, batch_size=32)  # fmt: skip


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_scramble_bd_matching_is_exact_and_sd_is_not(arch):
    result = scramble_test(synthetic_task(arch), draws=1, lambdas=5)
    by_group = {r["group"]: r for r in result["rows"]}
    bd = by_group["signed-perm"]
    assert bd["max_abs_dlogits"] < 1e-9
    assert bd["matched_signed-perm"] < 1e-6
    assert bd["matched_perm"] > 1e-2  # flipped coordinates cannot be matched by S_d
    assert bd["naive"] > 1e-2
    assert by_group["perm"]["matched_perm"] < 1e-6
    assert by_group["orth"]["max_abs_dlogits"] < 1e-4  # a rotation of float32 weights rounds
    assert by_group["orth"]["matched_orth"] < 1e-5


def test_recovery_at_zero_drift():
    task = synthetic_task("mlp", d_model=32)
    result = recovery_under_drift(task, steps_grid=(0,), draws=3)
    for row in result["rows"]:
        unflipped = 1 - row["flipped"]
        for source in ("activations", "weights"):
            assert row[f"{source}_marginalised_coord"] == 1.0
            # signed-correlation assignment keeps the unflipped coordinates, loses the rest
            assert row[f"{source}_signed_coord"] <= unflipped + 2 / 32
            assert row[f"{source}_signed_coord"] >= unflipped - 4 / 32


def test_recovery_survives_small_drift_from_weights():
    task = synthetic_task("mlp")
    result = recovery_under_drift(task, steps_grid=(0, 20), draws=1)
    last = result["curve"][-1]
    assert last["drift"] > 0
    assert last["weights_marginalised_coord"] == 1.0


def test_adamw_commutes_with_signed_permutations():
    # float64: in float32 Adam's m/√v amplifies summation-order round-off where v is tiny
    task = synthetic_task("gpt")
    spec = spec_for(task.cfg)
    params = {k: v.double() for k, v in task.params.items()}
    g = resid_only(spec, SIGNED_PERM, 3)
    a, _ = adamw_steps(task.cfg, (params, None), task.batches(0), 5)
    b, _ = adamw_steps(task.cfg, (apply(spec, g, params), None), task.batches(0), 5)
    back = apply(spec, g.inverse(), b)
    assert max((back[k] - a[k]).abs().max().item() for k in a) < 1e-10


def test_recover_returns_inverse_gauge():
    task = synthetic_task("vit")
    spec = spec_for(task.cfg)
    g = resid_only(spec, SIGNED_PERM, 5)
    pb = apply(spec, g, task.params)
    est = recover(task.cfg, task.params, pb, task.act_inputs, source="weights",
                  method="marginalised")  # fmt: skip
    assert coordinate_accuracy(est, g.inverse().elements["resid"])["coord"] == 1.0


@pytest.mark.slow
def test_trajectory_composition_beats_endpoint_matching():
    # the digits data and the mlp-digits config; the run starts from a fresh initialisation
    from landscape.models.zoo import split_for, zoo_model

    zm = zoo_model("mlp-digits")
    train = split_for(zm, "train")
    cfg = zm.config
    task = Task("mlp-digits", 0, cfg, init_params(cfg, 0), split_sampler(train),
                train.inputs[:512], train.targets[:512], split_for(zm, "test"))  # fmt: skip
    result = trajectory_transport(task, steps=800, every=10, sources=("activations",))
    far = [r for r in result["rows"] if r["steps"] >= 600]
    local = sum(r["local_coord"] for r in far) / len(far)
    endpoint = sum(r["endpoint_coord"] for r in far) / len(far)
    assert local > 0.95
    assert endpoint < local - 0.15


def test_claims_collapse_under_gauge_and_return_after_transport():
    task = synthetic_task("mlp", d_model=32)
    result = claim_check(task, draws=2, k=4, classes=[0, 1])
    for row in result["summary"]:
        assert row["transported"] == 1.0
        assert row["accuracy_delta"] == pytest.approx(0.0, abs=1e-6)
    summary = {r["group"]: r for r in result["summary"]}
    assert summary["signed-perm"]["raw"] < 0.75
    assert summary["orth"]["raw"] < 0.75
    assert summary["signed-perm"]["perm_only"] < 1.0 or summary["signed-perm"]["raw"] < 1.0


def test_recovery_fine_tunes_at_the_task_lr_unless_given():
    """The drift of the recovery part comes from the model's own learning rate (a family's
    record, a zoo recipe), or the one given; the result says which (formerly a fixed 1e-3)."""
    from dataclasses import replace

    task = synthetic_task("mlp")
    slow = recovery_under_drift(replace(task, lr=1e-5), steps_grid=(0, 3), draws=1)
    fast = recovery_under_drift(replace(task, lr=1e-1), steps_grid=(0, 3), draws=1)
    assert (slow["lr"], slow["lr_from"]) == (1e-5, "task")
    assert (fast["lr"], fast["lr_from"]) == (1e-1, "task")
    assert fast["curve"][-1]["drift"] > 100 * slow["curve"][-1]["drift"] > 0
    given = recovery_under_drift(task, steps_grid=(0, 3), draws=1, lr=1e-1)
    assert (given["lr"], given["lr_from"]) == (1e-1, "given")
    assert given["curve"] == fast["curve"]
    same = recovery_under_drift(task, steps_grid=(0,), draws=1, lr=task.lr)
    assert (same["lr"], same["lr_from"]) == (task.lr, "task")  # the model's own, said so


def test_the_sweep_recovers_at_the_recipe_lr_and_keys_the_cache_by_it(tmp_path):
    from landscape.experiments.context import RunContext
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep
    from landscape.models.zoo import ZOO
    from landscape.store.cache import Cache

    at = RunContext(cache=Cache(tmp_path / "cache"))
    kw = {"draws": 1, "steps_grid": (0, 2), "parts": ("recovery",)}
    own = gauge_sweep("mlp-digits", 0, GaugeOptions(**kw), context=at)["recovery"]
    assert (own["lr"], own["lr_from"]) == (ZOO["mlp-digits"].train.lr, "zoo recipe")
    given = gauge_sweep("mlp-digits", 0, GaugeOptions(lr=0.3, **kw), context=at)["recovery"]
    assert (given["lr"], given["lr_from"]) == (0.3, "given")
    assert given["curve"][-1]["drift"] != own["curve"][-1]["drift"]  # its own entry
    assert gauge_sweep("mlp-digits", 0, GaugeOptions(**kw), context=at)["recovery"] == own


def test_the_sweeps_cache_keys_are_the_ones_they_always_had(monkeypatch):
    """The inputs of each part's entry, as they were when ``gauge_sweep`` took its options as
    keywords: sweeps cached before are still read back."""
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep
    from landscape.sources import Source
    from landscape.store.cache import Cache, digest_tensors

    seen = []

    def spy(self, kind, inputs, compute):
        assert kind == "gauge-sweep"
        seen.append(inputs)
        return type("Entry", (), {"meta": {}})(), None

    monkeypatch.setattr(Cache, "get_or_compute", spy)
    options = GaugeOptions(draws=1, steps_grid=(0, 2), trajectory_steps=20, trajectory_every=10,
                           lr=0.3)  # fmt: skip
    gauge_sweep("mlp-digits", 0, options)
    ckpt = Source("mlp-digits", 0).load()
    for inputs in seen:
        assert inputs.pop("config") == ckpt.cfg.to_dict()
        assert inputs.pop("weights") == digest_tensors(ckpt.params)
    base = {"model": "mlp-digits", "seed": 0, "version": 2}
    assert seen == [
        {**base, "part": "table"},
        {**base, "part": "scramble", "draws": 1},
        {**base, "part": "recovery", "draws": 1, "steps_grid": [0, 2], "lr": 0.3},
        {**base, "part": "trajectory", "steps": 20, "every": 10},
        {**base, "part": "claims", "draws": 1},
    ]


def test_the_transport_tables_cache_key_is_the_one_it_always_had(monkeypatch):
    """The inputs of the table's entry, as they were when ``transport_table`` took its options
    as keywords: tables cached before (the shipped ones among them) are still read back."""
    from landscape.experiments.transport import TransportOptions, transport_table
    from landscape.sources import Source
    from landscape.store.cache import Cache, digest_tensors

    seen = []

    def spy(self, kind, inputs, compute):
        seen.append((kind, inputs))
        return type("Entry", (), {"meta": {"rows": []}})(), None

    monkeypatch.setattr(Cache, "get_or_compute", spy)
    options = TransportOptions(gauge_seed=3, lora_steps=2, adamw_steps_before=2,
                               adamw_steps_after=1)  # fmt: skip
    transport_table("mlp-digits", 1, options)
    ckpt = Source("mlp-digits", 1).load()
    ((kind, inputs),) = seen
    assert inputs.pop("config") == ckpt.cfg.to_dict()
    assert inputs.pop("weights") == digest_tensors(ckpt.params)
    assert (kind, inputs) == ("transport", {"version": 2, "model": "mlp-digits", "seed": 1,
                                            "gauge_seed": 3, "layer": None, "lora": 2,
                                            "adamw": [2, 1]})  # fmt: skip


def test_a_stored_part_is_read_without_reading_the_data(tmp_path, monkeypatch):
    """The parts' keys come from the checkpoint alone: a stored part (and a stored transport
    table) is served without the data being read, which takes seconds for the zoo's images."""
    from landscape import sources
    from landscape.experiments.context import RunContext
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep
    from landscape.experiments.transport import TransportOptions, transport_table
    from landscape.store.cache import Cache

    cache = Cache(tmp_path / "cache", shipped=False)
    kw = {"options": GaugeOptions(draws=1, parts=("table", "claims")),
          "context": RunContext(cache=cache)}
    stored = gauge_sweep("mlp-digits", 0, **kw)
    small = TransportOptions(lora_steps=2, adamw_steps_before=1, adamw_steps_after=1)
    table = transport_table("mlp-digits", 0, small, context=RunContext(cache=cache))

    def refuse(self, *args, **kwargs):
        raise AssertionError("the data was read")

    monkeypatch.setattr(sources.ZooData, "task_splits", refuse)
    assert gauge_sweep("mlp-digits", 0, **kw) == stored
    assert transport_table("mlp-digits", 0, small, context=RunContext(cache=cache)) == table
    with pytest.raises(AssertionError, match="the data was read"):  # a miss computes
        gauge_sweep("mlp-digits", 1, **kw)
