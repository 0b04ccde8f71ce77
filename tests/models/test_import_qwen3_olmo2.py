"""Qwen3 (per-head q/k norm) and OLMo 2 (post-norm blocks, q/k norm over all heads) against
transformers: import, the symmetry table, matching, and the way back out."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from landscape.errors import LandscapeError
from landscape.models import forward
from landscape.models.exporters import export_hf
from landscape.models.importers import import_checkpoint
from landscape.symmetry import apply, random_transform, spec_for, symmetry_table
from tests.conftest import perturbed, refused_import

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=256, max_position_embeddings=32)  # fmt: skip
KINDS = ["qwen3", "olmo2"]
TEXT = "To be, or not to be, that is the question. Whether tis nobler in the mind. " * 40


def _build(kind: str, seed: int = 0, **extra):
    """A seeded random transformers model, perturbed so that no gain is 1 and no bias 0:
    Qwen3 with tied embeddings and head_dim 8 (not 32 / 4), OLMo 2 untied."""
    torch.manual_seed(seed)
    if kind == "qwen3":
        cfg = transformers.Qwen3Config(**{**SMALL, "head_dim": 8, "tie_word_embeddings": True,
                                          **extra})  # fmt: skip
        model = transformers.Qwen3ForCausalLM(cfg)
    else:
        cfg = transformers.Olmo2Config(**{**SMALL, **extra})
        model = transformers.Olmo2ForCausalLM(cfg)
    return perturbed(model).eval()


def _saved(tmp_path, kind: str, seed: int = 0, **extra):
    d = tmp_path / f"{kind}{seed}"
    _build(kind, seed, **extra).save_pretrained(d, safe_serialization=True)
    return d


def _tokens(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(seed))


def _logits(path, x):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    with torch.no_grad():
        return model.eval()(x).logits


CASES = [
    pytest.param("qwen3", {}, id="qwen3"),
    pytest.param("qwen3", dict(attention_bias=True, num_key_value_heads=4), id="qwen3-bias-mha"),
    pytest.param("olmo2", {}, id="olmo2"),
    pytest.param("olmo2", dict(attention_bias=True, tie_word_embeddings=True), id="olmo2-bias"),
]


@pytest.mark.parametrize(("kind", "extra"), CASES)
def test_logits_equal_transformers_on_both_forward_paths(tmp_path, kind, extra):
    model = _build(kind, **extra)
    model.save_pretrained(tmp_path, safe_serialization=True)
    ckpt = import_checkpoint(tmp_path)
    cfg, p = ckpt.cfg, ckpt.params
    x = _tokens()
    with torch.no_grad():
        ref = model(x).logits
    fast, reference = forward(cfg, p, x, fast=True), forward(cfg, p, x, fast=False)
    assert (fast - ref).abs().max() < 1e-4 and (reference - ref).abs().max() < 1e-4
    assert (fast - reference).abs().max() < 1e-5
    assert ckpt.meta["model_type"] == kind and ckpt.meta["ignored_tensors"] == []
    if kind == "qwen3":
        assert (cfg.qk_norm, cfg.block, cfg.d_head) == ("head", "pre", 8)
        assert p["blocks.0.attn.q_norm.w"].shape == (8,)
    else:
        assert (cfg.qk_norm, cfg.block, cfg.eps) == ("full", "post", 1e-5)
        assert p["blocks.0.attn.q_norm.w"].shape == (4, 8)
        assert p["blocks.0.attn.k_norm.w"].shape == (cfg.kv_heads, 8)
        assert "blocks.0.ln1.w" not in p and "blocks.1.ln2_post.w" in p
    assert cfg.bias == bool(extra.get("attention_bias"))


@pytest.mark.parametrize("kind", KINDS)
def test_symmetry_table_keeps_logits_where_valid_and_says_why_orth_is_not(tmp_path, kind):
    ckpt = import_checkpoint(_saved(tmp_path, kind))
    rows = {r["group"]: r for r in symmetry_table(ckpt.cfg, ckpt.params)}
    assert all(r["max_abs_dlogits"] < 1e-8 for r in rows.values() if r["valid"]), rows
    assert rows["signed-perm"]["valid"] and rows["perm"]["valid"]
    assert rows["signed-perm (gated FFN units)"]["valid"]
    assert "qk" not in rows  # the q/k norm: not declared (rotary positions alone would be)
    orth = rows["orth"]
    assert not orth["valid"] and orth["max_abs_dlogits"] > 1e-3
    after = rows["orth after fold_norm_gains"]
    if kind == "qwen3":  # the q/k norm sits after W_Q/W_K: the stream rotates once folded
        assert orth["needs"] == "fold_norm_gains" and "gain" in orth["note"]
        assert after["valid"] and after["max_abs_dlogits"] < 1e-8
    else:  # OLMo 2's post-norm gains: no processing makes a rotation exact
        assert "ln1_post" in orth["note"] and "ln2_post" in orth["note"]
        assert not after["valid"] and after["max_abs_dlogits"] > 1e-3
        assert not any(g.startswith("semi-orth") for g in rows)


def test_inspect_audit_of_olmo2_names_the_blocking_norm(tmp_path, capsys):
    from landscape.cli import main

    d = _saved(tmp_path, "olmo2")
    assert main(["inspect", str(d), "--audit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "post-norm blocks" in out["architecture"] and "q/k norm" in out["architecture"]
    rows = {r["group"]: r for r in out["audit"]}
    assert rows["signed-perm"]["valid"] and rows["signed-perm"]["max_abs_dlogits"] < 1e-8
    assert not rows["orth"]["valid"] and "post-norm gains" in rows["orth"]["note"]
    resid_orth = next(s for s in out["symmetries"] if s.get("group") == "orth")
    assert not resid_orth["exact"] and "ln1_post" in resid_orth["note"]


@pytest.mark.parametrize("kind", KINDS)
def test_weight_matching_two_random_models_keeps_the_function(tmp_path, kind):
    from landscape.experiments.barriers.alignment import align
    from landscape.experiments.context import RunContext
    from landscape.store.cache import Cache

    a, b = (import_checkpoint(_saved(tmp_path, kind, seed)) for seed in (0, 1))
    cache = Cache(tmp_path / "cache")
    al = align(a, b, "weight", "signed-perm", context=RunContext(cache=cache))
    assert al.info["function_check"] < 1e-4 and al.info["kinds"]["resid"] == "signed-perm"
    x = _tokens()
    assert (forward(al.cfg, al.params_b, x) - forward(b.cfg, b.params, x)).abs().max() < 1e-4
    assert not torch.equal(al.params_b["embed.W_E"], b.params["embed.W_E"])  # B was moved
    if kind == "olmo2":  # rotations are refused before any work, naming the norm
        with pytest.raises(ValueError, match="ln1_post"):
            align(a, b, "weight", "orth", context=RunContext(cache=cache))


@pytest.mark.parametrize(("kind", "group"), [("qwen3", "signed-perm"), ("qwen3", "orth"),
                                             ("olmo2", "signed-perm")])  # fmt: skip
def test_export_after_an_admitted_gauge_loads_in_transformers(tmp_path, kind, group):
    from landscape.symmetry.processing import prepare

    src = _saved(tmp_path, kind)
    ckpt = import_checkpoint(src)
    cfg, params = prepare(ckpt.cfg, ckpt.params, group)
    spec = spec_for(cfg)
    moved = apply(spec, random_transform(spec, group, 2), params)
    out = tmp_path / "out"
    written = export_hf(cfg, moved, src, out)
    assert written["model_type"] == kind
    x = _tokens()
    got = _logits(out, x)
    assert (got - forward(cfg, moved, x)).abs().max() < 1e-4
    assert (got - _logits(src, x)).abs().max() < 1e-4  # the function is the source's
    back = import_checkpoint(out)
    assert not torch.equal(back.params["embed.W_E"], ckpt.params["embed.W_E"])


@pytest.mark.parametrize("kind", KINDS)
def test_aligned_merge_is_written_and_loaded_as_computed(tmp_path, monkeypatch, kind):
    from landscape.experiments.merging.export import AlignedOptions, write_aligned
    from landscape.sources import DataSpec, add_family

    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    paths = [_saved(tmp_path, kind, seed) for seed in (0, 1)]
    (tmp_path / "text.txt").write_text(TEXT)
    add_family(f"{kind}-pair", paths, DataSpec(text=tmp_path / "text.txt", n_ctx=16, max_windows=8))
    out = tmp_path / "merged"
    r = write_aligned(f"{kind}-pair", [0, 1], out, "weight", "signed-perm",
                      AlignedOptions(merge=0.3))
    assert r["function_ok"] and r["loss"] == pytest.approx(r["curve_loss"], abs=1e-5)
    merged = import_checkpoint(out)
    x = _tokens(2)
    assert (_logits(out, x) - forward(merged.cfg, merged.params, x)).abs().max() < 1e-4


def test_export_refuses_another_layout(tmp_path):
    olmo = import_checkpoint(_saved(tmp_path, "olmo2"))
    with pytest.raises(LandscapeError, match="block 'pre' and qk_norm 'head'"):
        export_hf(olmo.cfg, olmo.params, _saved(tmp_path, "qwen3"), tmp_path / "out")


def _edit_config(d, **changes):
    f = d / "config.json"
    f.write_text(json.dumps({**json.loads(f.read_text()), **changes}))
    return d


def _edit_tensors(d, edit):
    f = d / "model.safetensors"
    tensors = load_file(f)
    edit(tensors)
    save_file(tensors, f, metadata={"format": "pt"})
    return d


REFUSED = [
    pytest.param("qwen3", lambda d: _edit_config(d, rope_parameters={
        "rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}),
        ("config.json", "rope_parameters.rope_type", "linear"), id="qwen3-rope-scaling"),
    pytest.param("qwen3", lambda d: _edit_config(d, layer_types=["sliding_attention"]),
                 ("config.json", "layer_types"), id="qwen3-layer-types-count"),
    pytest.param("olmo2", lambda d: _edit_config(d, sliding_window=8),
                 ("config.json", "sliding_window 8"), id="olmo2-sliding-window"),
    pytest.param("qwen3", lambda d: _edit_config(d, head_dim=True),
                 ("config.json", "head_dim must be an integer"), id="qwen3-head-dim-bool"),
    pytest.param("qwen3", lambda d: _edit_tensors(
        d, lambda t: t.pop("model.layers.1.self_attn.k_norm.weight")),
        ("missing tensor model.layers.1.self_attn.k_norm.weight",), id="qwen3-no-k-norm"),
    pytest.param("olmo2", lambda d: _edit_config(d, rms_norm_eps="small"),
                 ("config.json", "rms_norm_eps must be a positive number"), id="olmo2-eps"),
    pytest.param("olmo2", lambda d: _edit_config(d, rope_scaling={"rope_type": "yarn"}),
                 ("config.json", "rope_scaling.rope_type", "yarn"), id="olmo2-rope-scaling"),
    pytest.param("olmo2", lambda d: _edit_tensors(d, lambda t: t.update({
        "model.layers.0.self_attn.q_norm.weight": torch.ones(8)})),
        ("model.layers.0.self_attn.q_norm.weight has shape (8,), expected (32,)",),
        id="olmo2-per-head-q-norm"),
    pytest.param("olmo2", lambda d: _edit_tensors(
        d, lambda t: t.pop("model.layers.0.post_feedforward_layernorm.weight")),
        ("missing tensor model.layers.0.post_feedforward_layernorm.weight",),
        id="olmo2-no-post-norm"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "edit", "fragments"), REFUSED)
def test_a_bad_or_unimplemented_field_is_one_line(tmp_path, kind, edit, fragments):
    refused_import(edit(_saved(tmp_path, kind)), *fragments)


def test_gauge_sweep_of_a_post_norm_family_refuses_the_rotating_parts_and_runs_the_rest(
    tmp_path, monkeypatch
):
    from landscape.errors import GroupNotAdmitted
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep
    from landscape.sources import DataSpec, add_family

    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "text.txt").write_text(TEXT)
    add_family("olmo-one", [_saved(tmp_path, "olmo2")],
               DataSpec(text=tmp_path / "text.txt", n_ctx=16, max_windows=8))  # fmt: skip
    with pytest.raises(GroupNotAdmitted, match="scramble part compares S_d.*ln1_post"):
        gauge_sweep("olmo-one", 0, GaugeOptions(parts=["table", "scramble"], draws=1))
    out = gauge_sweep("olmo-one", 0, GaugeOptions(parts=["table", "recovery"], draws=1,
                                                steps_grid=[0]))
    assert all(r["max_abs_dlogits"] < 1e-8 for r in out["table"]["rows"] if r["valid"])
    assert out["recovery"]["rows"], out["recovery"]
