"""GPT-NeoX / Pythia and Phi-3: same logits as transformers, gauges keep them, matching and the
written checkpoints keep the function, unimplemented fields fail in one line.

Tiny random-weight models are built with transformers' own config classes in the test (no
downloads), perturbed so that no gain is 1 and no bias 0, saved as safetensors and imported.
The reference is always transformers reading the same directory, so a config field we read
differently from transformers shows as a logit gap.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from landscape.errors import LandscapeError  # noqa: E402
from landscape.experiments.barriers.alignment import align  # noqa: E402
from landscape.experiments.context import RunContext  # noqa: E402
from landscape.models import forward  # noqa: E402
from landscape.models.exporters import export_hf  # noqa: E402
from landscape.models.importers import describe, import_checkpoint  # noqa: E402
from landscape.store.cache import Cache  # noqa: E402
from landscape.symmetry import symmetry_table  # noqa: E402
from landscape.symmetry.processing import PROCESSING_ORDER, STEPS  # noqa: E402
from tests.conftest import copy_with_config, perturbed, refused_import  # noqa: E402

transformers.logging.set_verbosity_error()

VOCAB = 64
SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=24,
             vocab_size=VOCAB, max_position_embeddings=32,
             attn_implementation="eager")  # fmt: skip


def _neox(seed: int = 0, **extra):
    torch.manual_seed(seed)
    cfg = transformers.GPTNeoXConfig(**SMALL, **extra)
    return perturbed(transformers.GPTNeoXForCausalLM(cfg)).eval()


def _phi3(seed: int = 0, **extra):
    torch.manual_seed(seed)
    extra = {"num_key_value_heads": 2, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
             **extra}  # fmt: skip
    cfg = transformers.Phi3Config(**SMALL, **extra)
    return perturbed(transformers.Phi3ForCausalLM(cfg)).eval()


# name → (model, block, rotated dimensions of the 8 in a head, tied embeddings)
MODELS = {
    "neox-parallel": (lambda: _neox(), "parallel", 2, False),  # NeoX's default rotary_pct 0.25
    "neox-sequential": (lambda: _neox(use_parallel_residual=False), "pre", 2, False),
    "neox-rotary-half-no-attn-bias": (
        lambda: _neox(rotary_pct=0.5, attention_bias=False),
        "parallel",
        4,
        False,
    ),  # fmt: skip
    "neox-full-rotary-tied": (
        lambda: _neox(rotary_pct=1.0, tie_word_embeddings=True),
        "parallel",
        8,
        True,
    ),  # fmt: skip
    "phi3-gqa": (lambda: _phi3(), "pre", 8, False),
    "phi3-mha-partial-tied": (
        lambda: _phi3(num_key_value_heads=4, partial_rotary_factor=0.5, tie_word_embeddings=True),
        "pre",
        4,
        True,
    ),  # fmt: skip
}
# the second, independent model of each family that matching aligns to the first
PAIRS = {"neox-parallel": lambda: _neox(1), "phi3-gqa": lambda: _phi3(1)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name → directory of a saved tiny model (PAIRS' second models as ``{name}-b``)."""
    out = {}
    builds = {**{n: m[0] for n, m in MODELS.items()}, **{f"{n}-b": b for n, b in PAIRS.items()}}
    for name, build in builds.items():
        out[name] = tmp_path_factory.mktemp(name)
        build().save_pretrained(out[name], safe_serialization=True)
    return out


def _tokens(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(seed))


def _reference(d: Path, x: torch.Tensor) -> torch.Tensor:
    """The logits transformers computes for directory ``d`` as written."""
    model = transformers.AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager")
    with torch.no_grad():
        return model.eval()(x).logits


def _copy(saved, name: str, tmp_path: Path, **config) -> Path:
    """A copy of the saved model ``name`` with ``config`` merged into its config.json."""
    return copy_with_config(saved[name], tmp_path / name, **config)


# ----------------------------------------------------------------------------- logits


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_equal_transformers_in_both_forward_paths(saved, name):
    _, block, rotated, tied = MODELS[name]
    ckpt = import_checkpoint(saved[name])
    x = _tokens()
    ref = _reference(saved[name], x)
    slow = forward(ckpt.cfg, ckpt.params, x, fast=False)
    fast = forward(ckpt.cfg, ckpt.params, x, fast=True)
    assert (slow - ref).abs().max() < 1e-4
    assert (fast - ref).abs().max() < 1e-4
    assert (fast - slow).abs().max() < 1e-5
    cfg = ckpt.cfg
    assert (cfg.block, cfg.rot_dim, cfg.d_head) == (block, rotated, 8)
    assert ckpt.meta["tied_embeddings"] == tied and ckpt.meta["ignored_tensors"] == []
    line = describe(cfg, ckpt.meta["model_type"])
    assert ("parallel attention and MLP" in line) == (block == "parallel")
    if name.startswith("neox"):
        assert cfg.norm == "ln" and cfg.bias
        no_attn_bias = "no-attn-bias" in name
        assert bool(ckpt.params["blocks.0.attn.b_Q"].abs().max() == 0) == no_attn_bias
    else:
        assert cfg.norm == "rms" and cfg.gated and not cfg.bias
        assert cfg.kv_heads == (4 if "mha" in name else 2)


def test_parallel_and_sequential_blocks_differ(saved):
    # the same weights read as the other block give other logits: the block is really read
    ckpt = import_checkpoint(saved["neox-parallel"])
    x = _tokens()
    other = forward(ckpt.cfg.replace(block="pre"), ckpt.params, x)
    assert (other - forward(ckpt.cfg, ckpt.params, x)).abs().max() > 1e-2


def test_legacy_neox_fields_and_the_ones_neox_does_not_read(saved, tmp_path):
    # Pythia's config.json: rotary_pct and rotary_emb_base, no rope_parameters; a top-level
    # rope_theta or partial_rotary_factor is not read by transformers' NeoX, nor here
    d = _copy(saved, "neox-parallel", tmp_path, rope_parameters=None, rotary_pct=0.5,
              rotary_emb_base=500, rope_theta=7.0, partial_rotary_factor=1.0)  # fmt: skip
    ckpt = import_checkpoint(d)
    assert ckpt.cfg.rot_dim == 4 and ckpt.cfg.rotary_base == 500.0
    assert ckpt.meta["ignored_config"] == ["rope_theta", "partial_rotary_factor"]
    x = _tokens()
    assert (forward(ckpt.cfg, ckpt.params, x) - _reference(d, x)).abs().max() < 1e-4


def test_unimplemented_buffers_of_older_neox_writers_are_recorded(saved, tmp_path):
    d = _copy(saved, "neox-sequential", tmp_path)
    tensors = load_file(d / "model.safetensors")
    tensors["gpt_neox.layers.0.attention.rotary_emb.inv_freq"] = torch.ones(1)
    save_file(tensors, d / "model.safetensors")
    ckpt = import_checkpoint(d)
    assert ckpt.meta["ignored_tensors"] == ["gpt_neox.layers.0.attention.rotary_emb.inv_freq"]
    x = _tokens()
    assert (forward(ckpt.cfg, ckpt.params, x) - _reference(d, x)).abs().max() < 1e-4


# ----------------------------------------------------------------------------- symmetries


@pytest.mark.parametrize("name", ["neox-parallel", "neox-sequential", "phi3-gqa",
                                  "phi3-mha-partial-tied"])  # fmt: skip
def test_every_valid_row_of_the_symmetry_table_keeps_logits(saved, name):
    ckpt = import_checkpoint(saved[name], dtype=torch.float64)
    rows = {r["group"]: r for r in symmetry_table(ckpt.cfg, ckpt.params)}
    for r in rows.values():
        if r["valid"]:
            assert r["max_abs_dlogits"] < 1e-8, r
    # rotary positions (partial in NeoX and phi3-mha-partial): QK maps commuting with RoPE are
    # exact, a general one is not; grouped queries share one map per key/value group
    assert rows["qk"]["valid"] and "rotary frequency pair" in rows["qk"]["acts_on"]
    mixing = rows["qk (general invertible M)"]
    assert not mixing["valid"] and mixing["max_abs_dlogits"] > 1e-3
    assert rows["ov"]["valid"]
    if name.startswith("neox"):  # LayerNorm: S_d × {±I} now, B_d and O(d) after processing
        assert rows["perm-global-sign"]["valid"]
        assert rows["signed-perm"]["needs"] == "center_writers"
        assert rows["orth"]["needs"] == "fold_norm_gains, center_writers"
        assert rows["orth after fold_norm_gains + center_writers"]["valid"]
        invalid = ("signed-perm", "orth", "scale")
    else:  # RMSNorm: B_d now, O(d) after folding the gains
        assert rows["signed-perm"]["valid"]
        assert rows["orth"]["needs"] == "fold_norm_gains"
        assert rows["signed-perm (gated FFN units)"]["valid"]
        invalid = ("orth",)
    for group in invalid:  # refused rows really change the function
        assert not rows[group]["valid"] and rows[group]["max_abs_dlogits"] > 1e-3


def test_every_processing_step_is_exact_on_parallel_blocks(saved):
    ckpt = import_checkpoint(saved["neox-parallel"], dtype=torch.float64)
    cfg, params = ckpt.cfg, ckpt.params
    x = _tokens()
    base = forward(cfg, params, x)
    for step in PROCESSING_ORDER:
        cfg, params = STEPS[step](cfg, params)
        assert cfg.block == "parallel"
        assert (forward(cfg, params, x) - base).abs().max() < 1e-9, step
    assert cfg.norm == "rms" and not any(k.startswith("blocks.0.ln1") for k in params)


# ----------------------------------------------------------------------------- matching, export

MATCHED = [("neox-parallel", "perm"), ("neox-parallel", "orth"), ("phi3-gqa", "signed-perm"),
           ("phi3-gqa", "orth")]  # fmt: skip


@pytest.fixture(scope="module")
def aligned(saved, tmp_path_factory):
    """(family, group) → (A, B, the alignment of B to A by weight matching)."""
    cache = Cache(tmp_path_factory.mktemp("cache"))
    out = {}
    for name, group in MATCHED:
        a, b = import_checkpoint(saved[name]), import_checkpoint(saved[f"{name}-b"])
        out[name, group] = (a, b, align(a, b, "weight", group, context=RunContext(cache=cache)))
    return out


@pytest.mark.parametrize(("name", "group"), MATCHED)
def test_weight_matching_of_two_random_models_keeps_b(aligned, name, group):
    a, b, al = aligned[name, group]
    assert al.info["function_check"] < 1e-4 and al.info["function_check_a"] < 1e-4
    x = _tokens(2)
    assert (forward(al.cfg, al.params_b, x) - forward(b.cfg, b.params, x)).abs().max() < 1e-4
    moved = al.params_b["blocks.0.mlp.W_out"]
    assert not torch.allclose(moved, b.params["blocks.0.mlp.W_out"].to(moved.dtype))
    assert al.cfg.norm == ("ln" if group == "perm" else "rms")
    assert al.cfg.block == a.cfg.block


EXPORTED = [("neox-parallel", "perm"), ("phi3-gqa", "orth")]


@pytest.mark.parametrize(("name", "group"), EXPORTED)
def test_aligned_and_merged_models_load_in_transformers(saved, aligned, tmp_path, name, group):
    _, b, al = aligned[name, group]
    x = _tokens(3)
    export_hf(al.cfg, al.params_b, saved[f"{name}-b"], tmp_path / "aligned")
    got = _reference(tmp_path / "aligned", x)
    assert (got - forward(al.cfg, al.params_b, x)).abs().max() < 1e-4
    assert (got - _reference(saved[f"{name}-b"], x)).abs().max() < 1e-4
    lam = 0.3
    merged = {k: lam * al.params_a[k] + (1 - lam) * al.params_b[k] for k in al.params_b}
    export_hf(al.cfg, merged, saved[f"{name}-b"], tmp_path / "merged")
    got = _reference(tmp_path / "merged", x)
    assert (got - forward(al.cfg, merged, x)).abs().max() < 1e-4
    back = import_checkpoint(tmp_path / "merged")  # and it reads back as the same architecture
    assert back.cfg.block == b.cfg.block and back.cfg.rot_dim == b.cfg.rot_dim


def test_neox_refuses_to_write_a_stream_turned_into_rmsnorm(saved, aligned, tmp_path):
    _, _, al = aligned["neox-parallel", "orth"]
    with pytest.raises(LandscapeError, match="LayerNorm only.*--group perm") as err:
        export_hf(al.cfg, al.params_b, saved["neox-parallel-b"], tmp_path / "out")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- refused


REFUSED = {
    "neox-rope-scaling": (
        "neox-parallel",
        {"rope_scaling": {"type": "linear", "factor": 2.0}},
        "rope_scaling.type",
    ),  # fmt: skip
    "neox-odd-rotary": (
        "neox-parallel",
        {"rope_parameters": None, "rotary_pct": 0.375},
        "rotary_pct 0.375 rotates 3 of 8",
    ),  # fmt: skip
    "neox-rotary-disagree": (
        "neox-parallel",
        {"rotary_pct": 0.5},
        "rotary_pct 0.5 disagrees with rope_parameters.partial_rotary_factor",
    ),
    "neox-head-dim": ("neox-parallel", {"head_dim": 4}, "head_dim 4"),
    "phi3-longrope": (
        "phi3-gqa",
        {"rope_scaling": {"type": "su", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4}},
        'rope_scaling.type "su"',
    ),  # fmt: skip
    "phi3-activation": ("phi3-gqa", {"hidden_act": "quick_gelu"}, "unsupported hidden_act"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_unimplemented_fields_are_refused_in_one_line(saved, tmp_path, case):
    name, config, fragment = REFUSED[case]
    refused_import(_copy(saved, name, tmp_path, **config), "config.json", fragment)


def test_fused_tensors_are_named_in_errors(saved, tmp_path):
    d = _copy(saved, "phi3-gqa", tmp_path)
    tensors = load_file(d / "model.safetensors")
    tensors["model.layers.1.mlp.gate_up_proj.weight"] = torch.zeros(24, 32)
    save_file(tensors, d / "model.safetensors")
    refused_import(d, "tensor model.layers.1.mlp.gate_up_proj.weight has shape (24, 32)",
                   "expected (48, 32)")  # fmt: skip
    d = _copy(saved, "neox-parallel", tmp_path / "two-heads")
    tensors = load_file(d / "model.safetensors")
    tensors["lm_head.weight"] = tensors["embed_out.weight"].clone()
    save_file(tensors, d / "model.safetensors")
    refused_import(d, "both embed_out.weight and lm_head.weight")
