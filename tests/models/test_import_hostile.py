"""Hostile and unusual checkpoints: every config field is implemented or refused in one line.

Tiny random transformers models are built and saved in each test's tmp dir, then their
``config.json``, index or GGUF file is edited. A field the import implements is checked against
transformers' logits for the same directory; one it does not implement must be refused with a
one-line error naming the field, never served as a quietly different function.
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

from safetensors.torch import save_model  # noqa: E402

from landscape.models import forward  # noqa: E402
from landscape.models.importers import import_checkpoint  # noqa: E402
from tests.conftest import copy_with_config, refused_import  # noqa: E402

transformers.logging.set_verbosity_error()

VOCAB = 20


def _perturb(model):
    # non-trivial gains and biases, so a wrong field shows in the logits
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model.eval()


def _llama_model(**overrides):
    kw = dict(
        num_hidden_layers=2,
        hidden_size=16,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=24,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        attn_implementation="eager",
    )
    return _perturb(transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**kw, **overrides})))


def _gpt2_model(**overrides):
    kw = dict(n_layer=2, n_embd=16, n_head=2, vocab_size=VOCAB, n_positions=8)
    cfg = transformers.GPT2Config(**{**kw, **overrides}, attn_implementation="eager")
    return _perturb(transformers.GPT2LMHeadModel(cfg))


def _vit_model():
    cfg = transformers.ViTConfig(
        num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=24,
        image_size=8, patch_size=4, num_channels=3, num_labels=5, attn_implementation="eager",
    )  # fmt: skip
    return _perturb(transformers.ViTForImageClassification(cfg))


BUILD = {"llama": _llama_model, "gpt2": _gpt2_model, "vit": _vit_model}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name → directory of a saved tiny model, built once per module."""
    torch.manual_seed(0)
    out = {}
    for name, build in BUILD.items():
        d = tmp_path_factory.mktemp(name)
        build().save_pretrained(d, safe_serialization=True)
        out[name] = d
    return out


def _copy(saved, name: str, tmp_path: Path, **config) -> Path:
    """A copy of the saved model ``name`` with ``config`` merged into its config.json."""
    return copy_with_config(saved[name], tmp_path / name, **config)


def _tokens(n: int = 12) -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, n), generator=torch.Generator().manual_seed(1))


def _reference(d: Path, x: torch.Tensor) -> torch.Tensor:
    """Logits transformers computes for directory ``d`` as written."""
    model = transformers.AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager")
    with torch.no_grad():
        return model.eval()(x).logits


def _gap(d: Path, x: torch.Tensor) -> float:
    ckpt = import_checkpoint(d)
    return (forward(ckpt.cfg, ckpt.params, x) - _reference(d, x)).abs().max().item()


# ----------------------------------------------------------------------------- rotary positions


ROPE_CASES = {
    "scaling-type-linear": (
        {"rope_scaling": {"type": "linear", "factor": 2.0}},
        "rope_scaling.type",
    ),
    "scaling-rope-type-dynamic": (
        {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
        "rope_scaling.rope_type",
    ),
    # the kind under the older key inside the newer dict
    "parameters-type-linear": (
        {"rope_parameters": {"type": "linear", "factor": 2.0, "rope_theta": 1e4}},
        "rope_parameters.type",
    ),
    # the older dict wins over a default in the newer one
    "scaling-over-default-parameters": (
        {
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
            "rope_scaling": {"rope_type": "linear", "factor": 2.0},
        },
        "rope_scaling.rope_type",
    ),
    "parameters-yarn": (
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
        "rope_parameters.rope_type",
    ),
    "factor-without-kind": ({"rope_scaling": {"factor": 2.0}}, "rope_scaling.factor"),
    "per-layer-type": (
        {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}},
        "rope_parameters.full_attention",
    ),
    "two-bases": (
        {"rope_theta": 5e5, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}},
        "rope_theta",
    ),
    "base-not-a-number": (
        {"rope_parameters": {"rope_type": "default", "rope_theta": "big"}},
        "rope_parameters.rope_theta",
    ),
    "not-an-object": ({"rope_scaling": [2.0]}, "rope_scaling"),
}


@pytest.mark.parametrize("name", list(ROPE_CASES))
def test_rotary_scaling_is_refused_wherever_it_is_written(saved, tmp_path, name):
    config, field = ROPE_CASES[name]
    d = _copy(saved, "llama", tmp_path, **{"rope_parameters": None, **config})
    refused_import(d, "config.json", field)


def test_refused_linear_scaling_does_change_transformers_logits(saved, tmp_path):
    # the refusal is needed: transformers reads the older dict over the newer default one
    config = ROPE_CASES["scaling-over-default-parameters"][0]
    d = _copy(saved, "llama", tmp_path, **config)
    x = _tokens()
    assert (_reference(d, x) - _reference(saved["llama"], x)).abs().max() > 1e-3


@pytest.mark.parametrize(
    "where", ["top-level", "rope_parameters"], ids=["top-level", "rope-parameters"]
)
def test_partial_rotary_factor_follows_llama(saved, tmp_path, where):
    """Llama rotates whole heads whatever the factor says; the import matches and records it."""
    if where == "top-level":
        d = _copy(saved, "llama", tmp_path, partial_rotary_factor=0.5)
    else:
        rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
        d = _copy(saved, "llama", tmp_path, rope_parameters=rope)
    assert _gap(d, _tokens()) < 1e-4
    ckpt = import_checkpoint(d)
    assert ckpt.cfg.rot_dim == ckpt.cfg.d_head
    assert ckpt.meta["ignored_config"] == ["partial_rotary_factor"]


def test_explicit_head_dim_matches_transformers(tmp_path):
    torch.manual_seed(2)
    _llama_model(head_dim=4, num_key_value_heads=2).save_pretrained(tmp_path)
    assert import_checkpoint(tmp_path).cfg.d_head == 4
    assert _gap(tmp_path, _tokens()) < 1e-4


# ----------------------------------------------------------------------------- config fields


FIELD_CASES = [
    # layer counts that disagree with the file: fewer would silently drop blocks
    ("gpt2", {"n_layer": 1}, "n_layer is 1 but the weights hold 2 layers"),
    ("llama", {"num_hidden_layers": 1}, "num_hidden_layers is 1 but the weights hold 2 layers"),
    ("vit", {"num_hidden_layers": 3}, "num_hidden_layers is 3 but the weights hold 1 layers"),
    ("gpt2", {"n_layer": True}, "n_layer must be an integer"),
    ("gpt2", {"n_head": 0}, "n_head must be an integer >= 1, got 0"),
    ("gpt2", {"n_head": "4"}, "n_head must be an integer"),
    ("gpt2", {"n_head": 5}, "n_head 5 does not divide the width 16"),
    ("gpt2", {"n_embd": 16.0}, "n_embd must be an integer"),
    ("gpt2", {"hidden_size": 32}, "hidden_size 32 disagrees with n_embd 16"),
    ("gpt2", {"layer_norm_epsilon": "tiny"}, "layer_norm_epsilon must be a positive number"),
    ("gpt2", {"activation_function": ["gelu"]}, "unsupported activation_function"),
    ("gpt2", {"scale_attn_weights": "no"}, "scale_attn_weights must be true or false"),
    ("gpt2", {"tie_word_embeddings": 1}, "tie_word_embeddings must be true or false"),
    ("llama", {"rms_norm_eps": "tiny"}, "rms_norm_eps must be a positive number"),
    ("llama", {"rms_norm_eps": -1e-6}, "rms_norm_eps must be a positive number"),
    ("llama", {"num_attention_heads": 2.0}, "num_attention_heads must be an integer"),
    ("llama", {"num_key_value_heads": 3}, "num_key_value_heads 3 does not divide"),
    ("llama", {"attention_bias": "false"}, "attention_bias must be true or false"),
    ("llama", {"mlp_bias": 0}, "mlp_bias must be true or false"),
    ("llama", {"hidden_act": {"name": "silu"}}, "unsupported hidden_act"),
    ("llama", {"head_dim": 4}, "q_proj.weight has shape"),
    ("llama", {"vocab_size": 0}, "vocab_size must be an integer >= 1"),
    ("llama", {"max_position_embeddings": -1}, "max_position_embeddings must be an integer"),
    ("llama", {"sliding_window": 4}, "sliding_window 4 is shorter than"),
    ("llama", {"sliding_window": 4, "use_sliding_window": True}, "sliding_window 4"),
    ("llama", {"sliding_window": 4, "use_sliding_window": "no"}, "use_sliding_window must be"),
    ("llama", {"layer_types": ["sliding_attention"] * 2}, "layer_types"),
    ("llama", {"model_type": ["llama"]}, "unsupported model_type"),
    ("vit", {"image_size": [8, 8]}, "image_size must be an integer"),
    ("vit", {"qkv_bias": None, "layer_norm_eps": 0}, "layer_norm_eps must be a positive number"),
]


@pytest.mark.parametrize(
    ("name", "config", "fragment"),
    [pytest.param(n, c, f, id=f"{n}-{'-'.join(c)}-{i}") for i, (n, c, f) in enumerate(FIELD_CASES)],
)
def test_bad_config_fields_are_one_line_naming_the_field(saved, tmp_path, name, config, fragment):
    msg = refused_import(_copy(saved, name, tmp_path, **config), fragment)
    assert "config.json" in msg or "model.safetensors" in msg  # names the file it read


@pytest.mark.parametrize(
    "config",
    [{"sliding_window": 4, "use_sliding_window": False}, {"sliding_window": 64}],
    ids=["window-off", "window-beyond-context"],
)
def test_sliding_window_that_never_applies_is_accepted(saved, tmp_path, config):
    assert _gap(_copy(saved, "llama", tmp_path, **config), _tokens()) < 1e-4


# ----------------------------------------------------------------------------- tied embeddings


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_tied_embedding_stored_under_the_head_name(tmp_path, name):
    """A deduplicating saver keeps the shared tensor as ``lm_head.weight`` only."""
    torch.manual_seed(3)
    model = _llama_model(tie_word_embeddings=True) if name == "llama" else _gpt2_model()
    save_model(model, str(tmp_path / "model.safetensors"))
    model.config.to_json_file(tmp_path / "config.json")
    ckpt = import_checkpoint(tmp_path)
    assert ckpt.meta["tied_embeddings"] and ckpt.meta["ignored_tensors"] == []
    x = _tokens(8)
    with torch.no_grad():
        ref = model(x).logits
    assert (forward(ckpt.cfg, ckpt.params, x) - ref).abs().max() < 1e-4
    assert (forward(ckpt.cfg, ckpt.params, x) - _reference(tmp_path, x)).abs().max() < 1e-4


@pytest.mark.parametrize("tie", [True, None], ids=["tied", "silent"])
def test_tied_config_with_a_different_stored_head_is_refused(saved, tmp_path, tie):
    # readers disagree here (the head overwritten by the embedding, or both kept untied), and
    # GPT2Config ties when the config is silent
    from safetensors.torch import load_file, save_file

    d = _copy(saved, "gpt2", tmp_path, tie_word_embeddings=tie)
    tensors = load_file(d / "model.safetensors")
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].clone()
    save_file(tensors, d / "model.safetensors")
    assert import_checkpoint(d).meta["tied_embeddings"]  # equal copies are a tie
    assert _gap(d, _tokens(8)) < 1e-4
    tensors["lm_head.weight"] = torch.randn(VOCAB, 16)
    save_file(tensors, d / "model.safetensors")
    refused_import(d, "config.json", "tie_word_embeddings is true but lm_head.weight differs")


# ----------------------------------------------------------------------------- shard indexes


@pytest.fixture
def sharded(tmp_path):
    torch.manual_seed(4)
    d = tmp_path / "sharded"
    _llama_model().save_pretrained(d, safe_serialization=True, max_shard_size="4KB")
    index = json.loads((d / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    return d, index


def _write_index(d: Path, index: dict) -> None:
    (d / "model.safetensors.index.json").write_text(json.dumps(index))


@pytest.mark.parametrize("where", ["parent", "absolute", "etc-passwd"])
def test_shard_paths_stay_inside_the_checkpoint(sharded, where):
    d, index = sharded
    name = "model.norm.weight"
    shard = index["weight_map"][name]
    outside = d.parent / "other"
    outside.mkdir()
    shutil.copy(d / shard, outside / shard)  # a valid shard, so only the path is wrong
    index["weight_map"][name] = {
        "parent": f"../other/{shard}",
        "absolute": str(outside / shard),
        "etc-passwd": "/etc/passwd",
    }[where]
    _write_index(d, index)
    refused_import(d, "model.safetensors.index.json", "outside the checkpoint directory")


def test_linked_shard_inside_the_checkpoint_still_loads(sharded):
    # download caches link shard names inside the directory to blobs elsewhere
    d, index = sharded
    shard = index["weight_map"]["model.norm.weight"]
    blobs = d.parent / "blobs"
    blobs.mkdir()
    (d / shard).rename(blobs / shard)
    (d / shard).symlink_to(blobs / shard)
    import_checkpoint(d)


def test_index_naming_a_tensor_its_shard_lacks(sharded):
    d, index = sharded
    shards = sorted(set(index["weight_map"].values()))
    name = "model.norm.weight"
    wrong = next(s for s in shards if s != index["weight_map"][name])
    index["weight_map"][name] = wrong
    _write_index(d, index)
    refused_import(d, wrong, f"shard lacks tensor {name}", "model.safetensors.index.json")


# ----------------------------------------------------------------------------- GGUF


def _write_gguf(path: Path, drop: str = "", widen: str = "") -> None:
    """A tiny one-block Llama GGUF; ``drop`` leaves a tensor out, ``widen`` grows its rows."""
    gguf = pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    import numpy as np

    d, f = 16, 24
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(16)
    w.add_embedding_length(d)
    w.add_block_count(1)
    w.add_feed_forward_length(f)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(d // 2)
    w.add_vocab_size(VOCAB)
    shapes = {"token_embd.weight": (VOCAB, d), "output_norm.weight": (d,),
              "output.weight": (VOCAB, d), "blk.0.attn_norm.weight": (d,),
              "blk.0.ffn_norm.weight": (d,), "blk.0.ffn_gate.weight": (f, d),
              "blk.0.ffn_up.weight": (f, d), "blk.0.ffn_down.weight": (d, f)}  # fmt: skip
    shapes |= {f"blk.0.attn_{m}.weight": (d, d) for m in ("q", "k", "v", "output")}
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        if name == drop:
            continue
        if name == widen:
            shape = (shape[0] + 2, *shape[1:])
        w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_complete_file_loads_the_same_every_time(tmp_path):
    f = tmp_path / "tiny.gguf"
    _write_gguf(f)
    a, b = import_checkpoint(f), import_checkpoint(f)
    assert a.meta["format"] == "gguf" and a.cfg.n_layers == 1
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)


def test_gguf_missing_tensor_is_refused(tmp_path):
    # the reader would fill it with random values, a different function on every load
    f = tmp_path / "tiny.gguf"
    _write_gguf(f, drop="blk.0.ffn_up.weight")
    refused_import(f, "tiny.gguf", "missing tensor model.layers.0.mlp.up_proj.weight")


def test_gguf_wrong_shape_is_one_quiet_line(tmp_path, caplog):
    f = tmp_path / "tiny.gguf"
    _write_gguf(f, widen="blk.0.ffn_up.weight")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_warning()  # as a fresh process has it
    try:
        refused_import(f, "tensor model.layers.0.mlp.up_proj.weight has shape (26, 16)", "(24, 16)")
    finally:
        transformers.logging.set_verbosity(verbosity)
    assert "LOAD REPORT" not in caplog.text  # the reader's multi-line report is silenced
    assert transformers.logging.get_verbosity() == verbosity
