"""Several seeds trained at once (``train --seeds``): each seed as its solo run, its own entry."""

import dataclasses
import json

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.models import batched
from landscape.models.batched import batching_problem, clip_per_seed_
from landscape.models.checkpoint import load_checkpoint_dir
from landscape.models.runs import train_model, train_models
from landscape.models.train import checkpoint_inputs, train, train_seeds
from landscape.models.zoo import ZOO, TrainConfig, text_model
from landscape.sources.zoo import REPRODUCIBLE_METRICS, available_seeds, get_checkpoint
from landscape.store.cache import Cache
from tests.conftest import tiny_config

SEEDS = [0, 1, 2]
RECIPE = TrainConfig(steps=30, batch_size=32, lr=3e-3, warmup=10, eval_every=15)
# Batched and solo weights of every model below were bit-identical (max |Δw| = 0, equal digests)
# under ATEN_CPU_CAPABILITY=default, =avx2 and the machine's own kernels (AMD EPYC, torch 2.13),
# at 30 and 60 steps and over mlp-digits' whole recipe (1,000 steps: the shipped digests). The
# batched kernels may sum in another order elsewhere; one last-bit difference per step moves a
# weight by about 1e-7·lr per step, so 1e-5 bounds what rounding can leave after 30 steps and
# still fails any real difference (a wrong batch or dropout draw moves weights by ~1e-3 at once).
WEIGHT_TOL = 1e-5
# The reported training losses are the mean cross-entropy, which vmap reduces in another order:
# measured up to 7e-8 apart (the weights' gradients are equal).
LOSS_TOL = 1e-6
GPT = dict(d_model=16, d_mlp=32, n_layers=2, n_heads=2, d_head=8, n_ctx=16)


@pytest.fixture
def text(tmp_path):
    """A small UTF-8 text with a vocabulary of its own (for a GPT trained with ``--text``)."""
    g = torch.Generator().manual_seed(0)
    words = ["the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. "]
    idx = torch.randint(0, len(words), (800,), generator=g).tolist()
    path = tmp_path / "text.txt"
    path.write_text("".join(words[i] for i in idx), encoding="utf-8")
    return path


def _model(name, text_path=None, dropout=0.0):
    recipe = dataclasses.replace(RECIPE, dropout=dropout)
    if text_path is None:
        return dataclasses.replace(ZOO[name], train=recipe)
    m = text_model(text_path, name)
    return dataclasses.replace(m, config=m.config.replace(**GPT), train=recipe, eval_windows=64)


def _max_dw(a, b):
    return max((a.params[k] - b.params[k]).abs().max().item() for k in a.params)


@pytest.mark.slow
@pytest.mark.parametrize("name,dropout", [("mlp-digits", 0.0), ("vit-digits", 0.1),
                                          ("gpt-shakespeare", 0.1)])  # fmt: skip
def test_batched_seeds_train_as_their_solo_runs(name, dropout, text):
    model = _model(name, text if name.startswith("gpt") else None, dropout)
    solo = [train_model(model, s) for s in SEEDS]
    together = train_models(model, SEEDS)
    assert [c.seed for c in together] == SEEDS
    for a, b in zip(solo, together, strict=True):
        assert b.meta["batch"] == SEEDS and "batch" not in a.meta
        assert _max_dw(a, b) <= WEIGHT_TOL
        for k, tol in REPRODUCIBLE_METRICS.items():
            assert abs(a.meta["metrics"][k] - b.meta["metrics"][k]) <= tol / 100
        ca, cb = a.meta["curves"], b.meta["curves"]
        assert ca["step"] == cb["step"]
        pairs = zip(ca["train_loss"], cb["train_loss"], strict=True)
        assert max(abs(u - v) for u, v in pairs) <= LOSS_TOL
    # the seeds differ from each other: each slice read its own seed's data, init and dropout
    assert _max_dw(together[0], together[1]) > 1e-2


def test_a_diverging_run_names_its_seeds_and_steps():
    model = _model("mlp-digits")
    model = dataclasses.replace(model, train=dataclasses.replace(model.train, lr=1e30))
    with pytest.raises(LandscapeError, match="seed 0 diverged between steps 0 and 14"):
        train_model(model, 0)
    with pytest.raises(LandscapeError, match="seeds 0 1 diverged between steps 0 and 14"):
        train_models(model, [0, 1])


def test_clipping_is_per_seed_as_clip_grad_norm():
    g = torch.Generator().manual_seed(0)
    shapes = [(3, 4), (4,), (2, 2, 3)]
    seeds = [[torch.randn(s, generator=g) * scale for s in shapes] for scale in (0.01, 5.0)]
    stacked = [torch.stack([seeds[0][i], seeds[1][i]]) for i in range(len(shapes))]
    norms = clip_per_seed_(stacked, 1.0)
    for s, grads in enumerate(seeds):
        params = [torch.zeros(x.shape, requires_grad=True) for x in grads]
        for p, x in zip(params, grads, strict=True):
            p.grad = x.clone()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        assert torch.equal(norms[s], norm)
        assert all(torch.equal(p.grad, x[s]) for p, x in zip(params, stacked, strict=True))
    assert norms[0] < 1 < norms[1]  # one seed left as it was, the other scaled down


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_every_trainable_architecture_batches(arch):
    cfg = tiny_config(arch)
    assert batching_problem(cfg) is None
    if arch != "mlp":
        assert batching_problem(cfg, dropout=0.2) is None


def test_an_operation_vmap_cannot_batch_is_named(monkeypatch):
    def host_sync(cfg, params, x, **kwargs):
        float(x.sum())  # .item() has no batching rule under vmap
        return x

    monkeypatch.setattr(batched, "forward", host_sync)
    problem = batching_problem(tiny_config("mlp"))
    assert problem is not None and problem.startswith("RuntimeError")


def test_each_seed_is_its_own_batched_cache_entry(monkeypatch, tmp_path):
    monkeypatch.setitem(ZOO, "mlp-digits", _model("mlp-digits"))
    zm, cache = ZOO["mlp-digits"], Cache(tmp_path)
    run = train_seeds("mlp-digits", [25, 26, 27], cache=cache)
    assert run.batched and run.note is None and run.cached == [False] * 3
    keys = {k for k, _ in cache.metas("checkpoint")}
    for s, ckpt in zip([25, 26, 27], run.checkpoints, strict=True):
        assert ckpt.seed == s and ckpt.meta["batch"] == [25, 26, 27]
        assert cache.key("checkpoint", checkpoint_inputs(zm, s, batched=True)) in keys
        assert cache.key("checkpoint", checkpoint_inputs(zm, s)) not in keys
    assert len(keys) == 3
    digests = {c.seed: c.meta["digest"] for c in run.checkpoints}

    again = train_seeds("mlp-digits", [27, 28, 25], cache=cache)  # 28 trains, 25 and 27 are read
    assert again.cached == [True, False, True] and again.checkpoints[1].meta["batch"] == [28]
    assert again.checkpoints[0].meta["digest"] == digests[27]

    # barrier and the other commands find a batched seed that nothing else has
    assert get_checkpoint("mlp-digits", 26, cache=cache, train_if_missing=False).meta[
        "digest"] == digests[26]  # fmt: skip
    rows = {r["seed"]: r["source"] for r in available_seeds("mlp-digits", cache)}
    assert {s: rows[s] for s in (25, 26, 27, 28)} == dict.fromkeys((25, 26, 27, 28), "batched")

    # a solo entry is never served for a batched one, nor the other way round; solo wins a lookup
    solo, hit = train("mlp-digits", 26, cache=cache)
    assert not hit and "batch" not in solo.meta
    assert get_checkpoint("mlp-digits", 26, cache=cache).meta["digest"] == solo.meta["digest"]
    assert {r["seed"]: r["source"] for r in available_seeds("mlp-digits", cache)}[26] == "cache"
    assert train_seeds("mlp-digits", [26, 25], cache=cache).checkpoints[0].meta["batch"]


def test_a_model_that_cannot_batch_trains_seed_by_seed(monkeypatch, tmp_path):
    monkeypatch.setitem(ZOO, "mlp-digits", _model("mlp-digits"))
    monkeypatch.setattr("landscape.models.train.batching_problem", lambda cfg, p: "no rule")
    cache = Cache(tmp_path)
    run = train_seeds("mlp-digits", [3, 4], cache=cache)
    assert not run.batched and "no rule" in run.note and "one at a time" in run.note
    assert all("batch" not in c.meta for c in run.checkpoints)
    solo = {cache.key("checkpoint", checkpoint_inputs(ZOO["mlp-digits"], s)) for s in (3, 4)}
    assert {k for k, _ in cache.metas("checkpoint")} == solo


def test_one_seed_is_solo_and_repeated_seeds_are_refused(monkeypatch, tmp_path):
    monkeypatch.setitem(ZOO, "mlp-digits", _model("mlp-digits"))
    cache = Cache(tmp_path)
    run = train_seeds("mlp-digits", [4], cache=cache)
    assert not run.batched and run.note is None and "batch" not in run.checkpoints[0].meta
    assert run.checkpoints[0].meta["digest"] == train("mlp-digits", 4, cache=cache)[0].meta[
        "digest"]  # fmt: skip
    with pytest.raises(LandscapeError, match="repeat"):
        train_seeds("mlp-digits", [1, 2, 1], cache=cache)
    with pytest.raises(LandscapeError, match="at least one"):
        train_seeds("mlp-digits", [], cache=cache)


def test_cli_train_seeds(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(ZOO, "mlp-digits", _model("mlp-digits"))
    out_dir = tmp_path / "out"
    argv = ["train", "mlp-digits", "--seeds", "23", "24", "--save", str(out_dir), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == [23, 24] and out["batched"] and out["note"] is None
    rows = out["checkpoints"]
    assert [r["seed"] for r in rows] == [23, 24] and not any(r["cached"] for r in rows)
    for r in rows:
        assert load_checkpoint_dir(r["saved"]).meta["digest"] == r["digest"]
        assert r["saved"].endswith(f"seed-{r['seed']}") and r["shipped"] is None
    assert main(["train", "mlp-digits", "--seeds", "24", "23", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["checkpoints"]
    assert [r["cached"] for r in again] == [True, True]
    assert [r["digest"] for r in again] == [rows[1]["digest"], rows[0]["digest"]]
    assert main(["train", "mlp-digits", "--seeds", "23", "--json"]) == 0  # one seed: solo
    one = json.loads(capsys.readouterr().out)
    assert one["seed"] == 23 and not one["cached"]  # the solo entry, not the batched one


@pytest.mark.parametrize(
    "argv,match",
    [
        pytest.param(["--seed", "0", "--seeds", "1", "2"], "not allowed with", id="both"),
        pytest.param(["--seeds", "1", "2", "1"], "repeat", id="repeated"),
        pytest.param(["--seeds"], "expected at least one", id="none"),
        pytest.param(["--seeds", "1", "2", "--save", "FILE"], "not a directory", id="save-file"),
    ],
)
def test_cli_train_seeds_refusals(monkeypatch, tmp_path, capsys, argv, match):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "file").write_text("x")
    argv = [str(tmp_path / "file") if a == "FILE" else a for a in argv]
    assert main(["train", "mlp-digits", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1
    assert not (tmp_path / "cache").exists()  # refused before anything was trained
