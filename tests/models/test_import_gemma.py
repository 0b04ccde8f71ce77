"""Gemma, Gemma 2 and Gemma 3 text against transformers: (1 + w) gains and √d embeddings folded,
sandwich norms, softcaps, sliding windows shorter than the input, q/k norms and per-layer rotary
bases; the symmetry table, weight matching and the export back to each format."""

import json
import shutil

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import align
from landscape.experiments.context import RunContext
from landscape.models import ModelConfig, forward
from landscape.models.circuits import check_circuit_form
from landscape.models.exporters import export_hf
from landscape.models.importers import import_checkpoint
from landscape.store.cache import Cache
from landscape.symmetry import apply, check_transform, random_transform, spec_for, symmetry_table
from landscape.symmetry.processing import embed_width, fold_norm_gains, prepare, rescale_norm
from tests.conftest import perturbed, refused_import

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=64, max_position_embeddings=32,
             head_dim=16)  # fmt: skip
WINDOW = 4  # shorter than the 12 positions of the test input
KINDS = ["gemma", "gemma2", "gemma3_text"]
CLASSES = {"gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM",
           "gemma3_text": "Gemma3ForCausalLM"}  # fmt: skip


def _build(kind: str, seed: int = 0, **extra):
    """A seeded random tiny model of ``kind``, weights perturbed so that no gain is 1."""
    torch.manual_seed(seed)
    small = {**SMALL, **extra}
    if kind == "gemma":
        cfg = transformers.GemmaConfig(**small)
    elif kind == "gemma2":  # caps small enough to bend this model's scores and logits
        cfg = transformers.Gemma2Config(
            **small,
            sliding_window=WINDOW,
            query_pre_attn_scalar=12,
            attn_logit_softcapping=2.0,
            final_logit_softcapping=3.0,
        )
    else:  # transformers' Gemma 3 ignores attn_logit_softcapping: so must the import
        rope = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
            "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
        }
        cfg = transformers.Gemma3TextConfig(
            **small, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
            rope_parameters=rope, final_logit_softcapping=3.0, attn_logit_softcapping=2.0,
        )  # fmt: skip
    return perturbed(getattr(transformers, CLASSES[kind])(cfg)).eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """kind → directory of the saved model ``_build(kind)``."""
    out = {}
    for kind in KINDS:
        out[kind] = tmp_path_factory.mktemp(kind)
        _build(kind).save_pretrained(out[kind], safe_serialization=True)
    return out


def _tokens(batch: int = 2, positions: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 64, (batch, positions), generator=torch.Generator().manual_seed(seed))


def _hf_logits(path, x: torch.Tensor) -> torch.Tensor:
    config = json.loads((path / "config.json").read_text())
    model = getattr(transformers, CLASSES[config["model_type"]]).from_pretrained(path).eval()
    with torch.no_grad():
        return model(x).logits


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


@pytest.mark.parametrize("kind", KINDS)
def test_logits_equal_transformers_in_both_forward_paths(saved, kind):
    ckpt = import_checkpoint(saved[kind])
    x = _tokens()
    ref = _hf_logits(saved[kind], x)
    with torch.no_grad():
        slow = forward(ckpt.cfg, ckpt.params, x, fast=False)
        fast = forward(ckpt.cfg, ckpt.params, x, fast=True)
    assert _diff(slow, ref) < 1e-4 and _diff(fast, ref) < 1e-4
    assert _diff(slow, fast) < 1e-5
    cfg = ckpt.cfg
    assert ckpt.meta["model_type"] == kind and ckpt.meta["tied_embeddings"]
    assert cfg.mlp == "gated" and cfg.act == "gelu_tanh" and cfg.kv_heads == 2 and not cfg.bias
    assert cfg.block == ("pre" if kind == "gemma" else "sandwich")
    assert cfg.qk_norm == ("head" if kind == "gemma3_text" else "none")
    ignored = ["attn_logit_softcapping"] if kind == "gemma3_text" else []
    assert ckpt.meta["ignored_config"] == ignored
    # W_E carries √d (float32-rounded, as transformers keeps it); W_U the unscaled table
    scale = torch.tensor(32**0.5, dtype=torch.float32)
    assert torch.equal(ckpt.params["embed.W_E"], ckpt.params["unembed.W_U"].T * scale)
    if kind == "gemma":
        return
    # every option the family has is exercised: without it the logits move
    changes = {"windows": (), "logit_softcap": 0.0}
    changes.update({"attn_softcap": 0.0} if kind == "gemma2" else {"rotary_bases": ()})
    assert cfg.windows == (WINDOW, 0)
    for field, off in changes.items():
        assert getattr(cfg, field) != off
        assert _diff(forward(cfg.replace(**{field: off}), ckpt.params, x), ref) > 1e-3, field


@pytest.mark.parametrize("kind", KINDS)
def test_symmetry_table_valid_rows_keep_logits_and_orth_says_why(saved, kind):
    ckpt = import_checkpoint(saved[kind])
    rows = {r["group"]: r for r in symmetry_table(ckpt.cfg, ckpt.params)}
    assert all(r["max_abs_dlogits"] < 1e-8 for r in rows.values() if r["valid"])
    for group in ("perm", "signed-perm", "signed-perm (gated FFN units)"):
        assert rows[group]["valid"]
    orth, folded = rows["orth"], rows["orth after fold_norm_gains"]
    assert not orth["valid"] and orth["max_abs_dlogits"] > 1e-3
    if kind == "gemma":  # pre-norm: folding the gains makes rotations exact
        assert orth["needs"] == "fold_norm_gains" and folded["valid"]
        assert any(g.startswith("semi-orth") and r["valid"] for g, r in rows.items())
        return
    assert "ln1_post" in orth["note"] and orth["needs"] == "not exact in any processing state"
    assert not folded["valid"] and folded["max_abs_dlogits"] > 1e-3
    assert "ln2_post" in folded["note"]
    assert not any(g.startswith("semi-orth") for g in rows)  # no exact embedding exists


@pytest.mark.parametrize("kind", ["gemma2", "gemma3_text"])
def test_processing_keeps_the_function_or_refuses(saved, kind):
    ckpt = import_checkpoint(saved[kind], dtype=torch.float64)
    cfg, params, x = ckpt.cfg, ckpt.params, _tokens()
    base = forward(cfg, params, x)
    c1, p1 = fold_norm_gains(cfg, params)  # the pre-norm gains fold; post and q/k gains stay
    assert "blocks.0.ln1.w" not in p1 and "blocks.0.ln1_post.w" in p1
    assert _diff(forward(c1, p1, x), base) < 1e-10
    c2, p2 = rescale_norm(cfg, params, 48)  # post norms see c·y and give c·N(y)
    assert _diff(forward(c2, p2, x), base) < 1e-10
    with pytest.raises(ValueError, match="ln1_post"):
        prepare(cfg, params, "orth")
    with pytest.raises(ValueError, match="ln1_post"):
        embed_width(c1, p1, 48, seed=0)
    spec = spec_for(c1)
    with pytest.raises(ValueError, match="ln1_post"):
        check_transform(spec, random_transform(spec, "orth", 0), p1)


def test_config_options_serialise_and_keep_old_cache_keys():
    base = dict(d_model=8, d_mlp=12, n_layers=2, n_out=7, n_heads=2, d_head=4, d_vocab=7,
                n_ctx=6, pos="rotary")  # fmt: skip
    plain = ModelConfig("gpt", **base)
    assert set(plain.to_dict()).isdisjoint({"qk_norm", "windows", "rotary_bases", "block",
                                            "attn_softcap", "logit_softcap"})  # fmt: skip
    # windows and bases that change nothing are the defaults
    assert ModelConfig("gpt", **base, windows=[0, 0], rotary_bases=[1e4, 1e4]) == plain
    cfg = ModelConfig("gpt", **base, block="sandwich", qk_norm="head", attn_softcap=50,
                      windows=[3, 0], rotary_bases=[1e4, 1e6])  # fmt: skip
    again = ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and hash(again) == hash(cfg) and again.windows == (3, 0)
    assert cfg.window_of(0) == 3 and cfg.rotary_base_of(1) == 1e6
    with pytest.raises(LandscapeError, match="q/k norm"):  # no single QKᵀ between them
        check_circuit_form(cfg.replace(pos="learned"))
    for bad in ({"windows": [3]}, {"windows": [-1, 0]}, {"attn_softcap": -1.0},
                {"qk_norm": "layer"}, {"block": "sandwich", "norm": "ln"}):  # fmt: skip
        with pytest.raises(ValueError):
            ModelConfig("gpt", **{**base, **bad})


@pytest.mark.parametrize("kind", KINDS)
def test_weight_matching_of_two_models_and_their_merge_export(tmp_path, kind):
    ckpts = []
    for seed in (0, 1):
        _build(kind, seed).save_pretrained(tmp_path / f"m{seed}", safe_serialization=True)
        ckpts.append(import_checkpoint(tmp_path / f"m{seed}"))
    al = align(ckpts[0], ckpts[1], "weight", "signed-perm",
               context=RunContext(cache=Cache(tmp_path / "cache")))
    assert al.cfg == ckpts[0].cfg and al.info["function_check"] < 1e-4
    x = _tokens()
    assert _diff(forward(al.cfg, al.params_b, x), forward(ckpts[1].cfg, ckpts[1].params, x)) < 1e-4
    merged = {k: 0.5 * (al.params_a[k] + al.params_b[k]) for k in al.params_a}
    info = export_hf(al.cfg, merged, tmp_path / "m0", tmp_path / "merged")
    assert not info["tied_embeddings"]  # the merged table and head differ by rounding
    assert _diff(_hf_logits(tmp_path / "merged", x), forward(al.cfg, merged, x)) < 1e-4


@pytest.mark.parametrize("kind", KINDS)
def test_export_after_a_signed_permutation_loads_in_transformers(saved, tmp_path, kind):
    ckpt = import_checkpoint(saved[kind])
    spec = spec_for(ckpt.cfg)
    moved = apply(spec, random_transform(spec, "signed-perm", 3), ckpt.params)
    assert _diff(moved["embed.W_E"], ckpt.params["embed.W_E"]) > 1e-2  # not the identity
    info = export_hf(ckpt.cfg, moved, saved[kind], tmp_path / "out")
    assert info["tied_embeddings"]  # signs and permutations keep W_Uᵀ·√d = W_E bit for bit
    x = _tokens()
    reloaded = _hf_logits(tmp_path / "out", x)
    assert _diff(reloaded, forward(ckpt.cfg, moved, x)) < 1e-4
    assert _diff(reloaded, _hf_logits(saved[kind], x)) < 1e-4
    again = import_checkpoint(tmp_path / "out")
    for name in ("blocks.0.ln1.w", "blocks.1.ln2.w", "ln_final.w"):  # gain − 1 written, 1 + w read
        assert _diff(again.params[name], moved[name]) < 1e-6


@pytest.mark.parametrize("kind", ["gemma", "gemma3_text"])
def test_attention_biases_and_one_key_value_head_per_query_head(tmp_path, kind):
    # attention_bias: q, k, v and o biases; every head its own keys and values: ov maps exist
    _build(kind, num_key_value_heads=4, attention_bias=True).save_pretrained(tmp_path / "src")
    ckpt = import_checkpoint(tmp_path / "src")
    assert ckpt.cfg.bias and ckpt.cfg.kv_heads == 4
    assert bool(ckpt.params["blocks.0.attn.b_O"].abs().max() > 0)
    x = _tokens()
    assert _diff(forward(ckpt.cfg, ckpt.params, x), _hf_logits(tmp_path / "src", x)) < 1e-4
    rows = {r["group"]: r for r in symmetry_table(ckpt.cfg, ckpt.params)}
    # rotary positions: QK maps commuting with RoPE, unless a q/k norm blocks them
    assert rows["ov"]["valid"] and ("qk" in rows) == (ckpt.cfg.qk_norm == "none")
    assert all(r["max_abs_dlogits"] < 1e-8 for r in rows.values() if r["valid"])
    spec = spec_for(ckpt.cfg)
    moved = apply(spec, random_transform(spec, "signed-perm", 3), ckpt.params)
    export_hf(ckpt.cfg, moved, tmp_path / "src", tmp_path / "out")
    assert _diff(_hf_logits(tmp_path / "out", x), forward(ckpt.cfg, moved, x)) < 1e-4


def test_export_writes_a_separate_head_when_the_tensors_no_longer_tie(tmp_path):
    # a rotated Gemma (pre-norm: exact once its gains are folded, the final one into W_U)
    _build("gemma").save_pretrained(tmp_path / "src", safe_serialization=True)
    ckpt = import_checkpoint(tmp_path / "src")
    cfg, params = prepare(ckpt.cfg, ckpt.params, "orth")
    spec = spec_for(cfg)
    rotated = apply(spec, random_transform(spec, "orth", 2), params)
    info = export_hf(cfg, rotated, tmp_path / "src", tmp_path / "out")
    assert not info["tied_embeddings"]
    x = _tokens()
    assert _diff(_hf_logits(tmp_path / "out", x), forward(cfg, rotated, x)) < 1e-4
    # an untied Gemma 2 source keeps its own head through import and export
    _build("gemma2", tie_word_embeddings=False).save_pretrained(tmp_path / "untied")
    ckpt = import_checkpoint(tmp_path / "untied")
    assert not ckpt.meta["tied_embeddings"]
    export_hf(ckpt.cfg, ckpt.params, tmp_path / "untied", tmp_path / "untied_out")
    assert _diff(_hf_logits(tmp_path / "untied_out", x), _hf_logits(tmp_path / "untied", x)) < 1e-4


def test_export_refuses_a_width_change(saved, tmp_path):
    ckpt = import_checkpoint(saved["gemma"])
    wide_cfg, wide = embed_width(*prepare(ckpt.cfg, ckpt.params, "orth"), 48, seed=0)
    with pytest.raises(LandscapeError, match="width"):
        export_hf(wide_cfg, wide, saved["gemma"], tmp_path / "out")


def _edited(saved, tmp_path, kind: str, **changes):
    """A copy of the saved ``kind`` model with ``changes`` written into its config.json."""
    out = tmp_path / "edited"
    shutil.copytree(saved[kind], out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, **changes}))
    return out


@pytest.mark.parametrize(
    "kind, changes, fragments",
    [
        pytest.param("gemma3_text", {"model_type": "gemma3"}, ("gemma3", "gemma3_text"),
                     id="multimodal-gemma3"),
        pytest.param("gemma2", {"use_bidirectional_attention": True},
                     ("use_bidirectional_attention",), id="bidirectional"),
        pytest.param("gemma3_text", {"rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
                     ("rope_parameters.full_attention.rope_type", "linear"), id="rope-scaling"),
        pytest.param("gemma3_text", {"rope_theta": 5.0}, ("rope_theta", "disagrees"),
                     id="rope-bases-disagree"),
        pytest.param("gemma2", {"layer_types": ["chunked_attention", "full_attention"]},
                     ("layer type", "chunked_attention"), id="layer-type"),
        pytest.param("gemma2", {"sliding_window": None}, ("sliding_window is null",),
                     id="null-window"),
        pytest.param("gemma", {"hidden_act": "gelu", "hidden_activation": "gelu"},
                     ("hidden_activation", "hidden_act"), id="activations-disagree"),
        pytest.param("gemma2", {"hidden_activation": "tanh"}, ("hidden_activation", "tanh"),
                     id="activation"),
    ],
)  # fmt: skip
def test_unimplemented_fields_are_refused_in_one_line(saved, tmp_path, kind, changes, fragments):
    refused_import(_edited(saved, tmp_path, kind, **changes), "config.json", *fragments)


def test_inspect_audit_names_the_post_norms(saved, capsys):
    assert main(["inspect", str(saved["gemma2"]), "--audit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["architecture"].startswith("Gemma 2, d=32")
    assert "norms before and after each sublayer" in out["architecture"]
    assert "sliding windows of 4 on 1 of 2 layers" in out["architecture"]
    rows = {r["group"]: r for r in out["audit"]}
    assert rows["signed-perm"]["valid"] and rows["signed-perm"]["max_abs_dlogits"] < 1e-8
    assert not rows["orth"]["valid"] and "ln1_post" in rows["orth"]["note"]
    resid = {s["group"]: s for s in out["symmetries"] if s["variable"] == "resid"}
    assert not resid["orth"]["exact"] and "ln1_post" in resid["orth"]["note"]
