"""The Llama-style zoo entry (three seeds shipped and verified, its symmetry table exact, a
barrier on it) and the paper-scale entries (defined and trainable, never shipped)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from landscape.models.params import init_params
from landscape.models.zoo import ZOO
from landscape.sources.zoo import load_shipped, read_manifest, shipped_seeds

LLAMA = "llama-shakespeare-d128"
SCALE = ("vit-fashion-d256-l6", "gpt-shakespeare-d256-l6")
MOE = "moe-shakespeare-d64"


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    """An empty cache; fetched data stay where they are."""
    from landscape.store.paths import data_root

    monkeypatch.setenv("LANDSCAPE_DATA", str(data_root()))
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_llama_entry_is_llama_style():
    cfg = ZOO[LLAMA].config
    assert (cfg.arch, cfg.d_model, cfg.n_layers) == ("gpt", 128, 4)
    assert cfg.pos == "rotary" and cfg.rot_dim == cfg.d_head  # RoPE on every head dimension
    assert (cfg.n_heads, cfg.kv_heads) == (8, 2)  # grouped-query attention
    assert cfg.gated and cfg.act == "silu"  # SwiGLU
    assert cfg.norm == "rms" and not cfg.bias
    p = init_params(cfg, 0)
    assert "W_pos" not in p and "blocks.0.mlp.W_gate" in p
    assert p["blocks.0.attn.W_K"].shape == (2, 128, 16)


def test_the_llama_entry_ships_three_verified_seeds():
    assert shipped_seeds(LLAMA) == [0, 1, 2]
    records = [r for r in read_manifest() if r["name"] == LLAMA]
    for rec in records:
        ckpt = load_shipped(LLAMA, rec["seed"])  # current recipe, digest verified
        assert ckpt is not None, rec["seed"]
        assert ckpt.cfg == ZOO[LLAMA].config and ckpt.meta["digest"] == rec["digest"]
        assert rec["metrics"]["test_loss"] < 2.0  # trained: the uniform guess is ln 84 ≈ 4.4
        # untied: the unembedding is its own matrix, not the embedding's transpose
        assert (ckpt.params["unembed.W_U"] - ckpt.params["embed.W_E"].T).abs().max() > 0.1
    assert len({r["digest"] for r in records}) == 3


def test_the_llama_entry_admits_its_declared_groups_exactly():
    from landscape.symmetry.table import symmetry_table

    ckpt = load_shipped(LLAMA, 0)
    rows = {r["group"]: r for r in symmetry_table(ckpt.cfg, ckpt.params)}
    valid = [r for r in rows.values() if r["valid"]]
    assert {"perm", "signed-perm", "orth after fold_norm_gains"} <= {r["group"] for r in valid}
    assert all(r["max_abs_dlogits"] < 1e-8 for r in valid)
    assert rows["orth"]["max_abs_dlogits"] > 1e-3  # trained gains block rotations until folded


def test_a_rotation_barrier_runs_on_the_llama_entry(cache_env):
    from landscape.experiments import barrier
    from landscape.store.paths import data_root

    if not (data_root() / "shakespeare.txt").is_file():
        pytest.skip("needs the Shakespeare text (landscape data fetch shakespeare)")
    assert shipped_seeds(LLAMA)[:2] == [0, 1]  # read from the assets, not trained here
    naive = barrier(LLAMA, (0, 1), "naive", "perm", points=5)
    aligned = barrier(LLAMA, (0, 1), "weight", "orth", points=5)
    assert naive["function_ok"] and aligned["function_ok"] and aligned["space"] == "weights"
    assert math.isfinite(aligned["barrier_loss"]) and naive["barrier_loss"] > 0.5
    # measured: rotations do not lower it here (3.21 against naive 2.62 nats on 0–1); the
    # query/key maps of rotary heads are not matched yet (only value/output maps are), a likely
    # cause that this test does not establish


def test_paper_scale_entries_are_defined_and_not_shipped(capsys, cache_env):
    from landscape.assets.checkpoints import DEFAULT_SEEDS
    from landscape.cli import main

    vit, gpt = (ZOO[n] for n in SCALE)
    assert (vit.config.n_layers, vit.config.d_model, vit.dataset) == (6, 256, "fashion")
    assert (gpt.config.n_layers, gpt.config.d_model, gpt.dataset) == (6, 256, "shakespeare")
    assert vit.config == ZOO["vit-fashion-d256"].config.replace(n_layers=6)  # reused, not copied
    for name in SCALE:
        assert not ZOO[name].ships and name not in DEFAULT_SEEDS and shipped_seeds(name) == []
    assert all(m.ships == (name in DEFAULT_SEEDS) for name, m in ZOO.items())
    assert main(["zoo", "--json"]) == 0
    rows = {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert [rows[n]["ships"] for n in SCALE] == [False, False] and rows[LLAMA]["ships"]
    assert main(["zoo"]) == 0
    out = capsys.readouterr().out
    for name in SCALE:
        line = next(ln for ln in out.splitlines() if ln.startswith(name + " "))
        assert "not shipped" in line


def test_the_mixture_entry_is_gpt_shakespeare_with_experts():
    """moe-shakespeare-d64: the smallest character GPT with 4 experts of half its FFN's width,
    2 routed per position, its recipe unchanged; defined, never shipped."""
    from landscape.assets.checkpoints import DEFAULT_SEEDS

    m, dense = ZOO[MOE], ZOO["gpt-shakespeare"]
    assert m.config == dense.config.replace(d_mlp=128, n_experts=4, top_k=2)
    assert m.train == dense.train and (m.dataset, m.eval_windows) == ("shakespeare", 512)
    assert not m.ships and MOE not in DEFAULT_SEEDS and shipped_seeds(MOE) == []
    assert init_params(m.config, 0)["blocks.0.mlp.W_router"].shape == (64, 4)


def _fake_fashion(directory):
    """Four small IDX files in Fashion-MNIST's layout (random pixels and labels): the entry's
    data path runs where the real data set is not installed."""
    import numpy as np

    from landscape import data
    from tests.idx_files import write_idx

    rng = np.random.default_rng(0)
    for img, lab in data.FASHION_FILES.values():
        write_idx(directory / img, rng.integers(0, 256, (64, 28, 28)))
        write_idx(directory / lab, rng.integers(0, 10, (64,)))


@pytest.mark.parametrize("name", [*SCALE, MOE])
def test_paper_scale_entries_train_a_few_steps(name, monkeypatch, tmp_path):
    """Three steps of the zoo's training path at a small batch (its evaluation on 64 examples),
    so the entry builds, reads its data and moves its weights on the CPU. The ViT reads four
    small files in Fashion-MNIST's format, so the test needs no installed data set."""
    from landscape import data
    from landscape.models import runs, training_data

    if ZOO[name].dataset == "fashion":
        _fake_fashion(tmp_path)
        monkeypatch.setenv("LANDSCAPE_FASHION_MNIST", str(tmp_path))
    full = training_data.split_for

    def small(*args, **kwargs):
        s = full(*args, **kwargs)
        return data.Split(s.inputs[:64], s.targets[:64])

    monkeypatch.setattr(training_data, "split_for", small)
    model = ZOO[name]
    quick = dataclasses.replace(model.train, steps=3, warmup=1, eval_every=3, batch_size=4)
    ckpt = runs.train_model(dataclasses.replace(model, train=quick, eval_windows=4), 0)
    start = init_params(model.config, 0)
    assert set(ckpt.params) == set(start)
    assert all(ckpt.params[k].shape == v.shape for k, v in start.items())
    assert any(not torch.equal(ckpt.params[k], v) for k, v in start.items())
    assert math.isfinite(ckpt.meta["metrics"]["test_loss"])
    assert ckpt.meta["curves"]["step"] == [3]


def test_each_ablation_step_changes_one_thing_of_the_dropout_gpt():
    """The Llama ablation's entries: the dropout GPT with exactly one architectural change
    (the fields a knob needs, e.g. SwiGLU's gate, activation and width), its recipe unchanged;
    the last step is the whole Llama layout under the dropout GPT's recipe. None ships."""
    from landscape.assets.checkpoints import DEFAULT_SEEDS
    from landscape.models.zoo import ABLATION_BASE, ABLATION_STEPS

    base = ZOO[ABLATION_BASE]
    expected = {
        "gpt-shakespeare-d128-drop0.3-rotary": {"pos"},
        "gpt-shakespeare-d128-drop0.3-gqa": {"n_kv_heads"},
        "gpt-shakespeare-d128-drop0.3-h8": {"n_heads", "d_head"},
        "gpt-shakespeare-d128-drop0.3-swiglu": {"mlp", "act", "d_mlp"},
        "gpt-shakespeare-d128-drop0.3-nobias": {"bias"},
        "llama-shakespeare-d128-drop0.3": {"pos", "n_kv_heads", "n_heads", "d_head", "mlp",
                                           "act", "d_mlp", "bias"},
    }  # fmt: skip
    assert list(ABLATION_STEPS) == list(expected)
    for name, fields in expected.items():
        m = ZOO[name]
        changed = {f.name for f in dataclasses.fields(base.config)
                   if getattr(m.config, f.name) != getattr(base.config, f.name)}  # fmt: skip
        assert changed == fields, name
        assert m.train == base.train and m.train.dropout == 0.3, name
        assert not m.ships and name not in DEFAULT_SEEDS and shipped_seeds(name) == []
        assert (m.dataset, m.eval_windows) == (base.dataset, base.eval_windows)
    llama = ZOO["llama-shakespeare-d128-drop0.3"]
    assert llama.config == ZOO[LLAMA].config  # the layout itself, not a copy of it


def test_each_reverse_step_undoes_one_change_of_the_llama_layout():
    """The reverse steps: the Llama layout under the dropout GPT's recipe with the GPT's value
    of one change's fields put back, and no other field moved."""
    from landscape.models.zoo import ABLATION_BASE, ABLATION_REVERSE

    base, layout = ZOO[ABLATION_BASE], ZOO["llama-shakespeare-d128-drop0.3"]
    expected = {
        "llama-shakespeare-d128-drop0.3-learnedpos": {"pos"},
        "llama-shakespeare-d128-drop0.3-gelu": {"mlp", "act", "d_mlp"},
        "llama-shakespeare-d128-drop0.3-mha": {"n_kv_heads"},
    }  # fmt: skip
    assert list(ABLATION_REVERSE) == list(expected)
    for name, fields in expected.items():
        m = ZOO[name]
        changed = {f.name for f in dataclasses.fields(layout.config)
                   if getattr(m.config, f.name) != getattr(layout.config, f.name)}  # fmt: skip
        assert changed == fields, name
        assert all(getattr(m.config, f) == getattr(base.config, f) for f in fields), name
        assert m.train == layout.train and not m.ships and shipped_seeds(name) == []
        assert init_params(m.config, 0)  # each is a model the library builds


def test_each_quality_control_is_a_rotary_entry_under_the_base_recipe_stopped_short():
    """The quality controls: a rotary entry of the ablation (configuration unchanged) trained
    with the dropout GPT's recipe with fewer steps and nothing else changed."""
    from landscape.models.zoo import ABLATION_BASE, ABLATION_QUALITY, QUALITY_STEPS

    base = ZOO[ABLATION_BASE]
    expected = {"gpt-shakespeare-d128-drop0.3-rotary-s700": "gpt-shakespeare-d128-drop0.3-rotary",
                "llama-shakespeare-d128-drop0.3-s700": "llama-shakespeare-d128-drop0.3"}
    assert list(ABLATION_QUALITY) == list(expected)
    for name, full in expected.items():
        m = ZOO[name]
        assert m.config == ZOO[full].config and m.config.pos == "rotary", name
        assert m.train == dataclasses.replace(base.train, steps=QUALITY_STEPS), name
        assert QUALITY_STEPS < base.train.steps
        assert not m.ships and shipped_seeds(name) == []
        assert (m.dataset, m.eval_windows) == (base.dataset, base.eval_windows)
