"""Bias fields are read per family as transformers reads them: a checkpoint whose config.json
says ``attention_bias`` and ``mlp_bias`` and whose file holds a bias for every projection
imports with exactly the biases transformers' model of that family has, the logits equal
transformers', and the fields and tensors the family does not read are listed as ignored."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from landscape.models import forward
from landscape.models.exporters import export_hf
from landscape.models.importers import import_checkpoint
from landscape.models.importers.defaults import BIASES, read_biases
from tests.conftest import perturbed

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=64, max_position_embeddings=32)  # fmt: skip
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "olmo2", "phi3", "gemma", "gemma2",
            "gemma3_text", "gpt_neox")  # fmt: skip
# the projections whose bias a checkpoint may store (Llama's names, Phi-3's fused ones, NeoX's)
PROJECTIONS = ("_proj.weight", "query_key_value.weight", "dense.weight", "dense_h_to_4h.weight",
               "dense_4h_to_h.weight")  # fmt: skip


def _saved(tmp_path, model_type: str, attention_bias: bool):
    """A tiny model of ``model_type`` saved with a bias stored for every projection (random
    where transformers' model has none) and config.json saying ``attention_bias`` and
    ``mlp_bias: true``: (directory, names of the stored biases the model does not have)."""
    torch.manual_seed(0)
    extra = {"head_dim": 8} if model_type != "gpt_neox" else {}
    extra["pad_token_id"] = 0  # Phi-3's default lies outside this vocabulary
    cfg = transformers.AutoConfig.for_model(model_type, **SMALL, **extra,
                                            attention_bias=attention_bias, mlp_bias=True,
                                            attn_implementation="eager")  # fmt: skip
    model = perturbed(transformers.AutoModelForCausalLM.from_config(cfg))
    model.save_pretrained(tmp_path, safe_serialization=True)
    f = tmp_path / "model.safetensors"
    tensors = load_file(f)
    added = []
    for name, w in list(tensors.items()):
        bias = name[: -len("weight")] + "bias"
        if name.endswith(PROJECTIONS) and bias not in tensors:
            tensors[bias] = torch.randn(w.shape[0])
            added.append(bias)
    save_file(tensors, f, metadata={"format": "pt"})
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(attention_bias=attention_bias, mlp_bias=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path, sorted(added)


@pytest.mark.parametrize("attention_bias", [True, False], ids=["attn-bias", "no-attn-bias"])
@pytest.mark.parametrize("model_type", FAMILIES)
def test_bias_fields_are_read_as_transformers_reads_them(tmp_path, model_type, attention_bias):
    path, added = _saved(tmp_path, model_type, attention_bias)
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ckpt = import_checkpoint(path)
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = ref_model(x).logits
    got = forward(ckpt.cfg, ckpt.params, x)
    assert (got - ref).abs().max() < 1e-4, (got - ref).abs().max()
    # what transformers' model has no place for is listed, field and tensor
    unread = sorted(f for f in ("attention_bias", "mlp_bias") if f not in BIASES[model_type].read)
    assert sorted(ckpt.meta["ignored_config"]) == unread
    assert set(added) <= set(ckpt.meta["ignored_tensors"]), ckpt.meta["ignored_tensors"]
    has = {n for n in ref_model.state_dict() if n.endswith(".bias")}
    assert not has & set(ckpt.meta["ignored_tensors"])


@pytest.mark.parametrize("model_type", FAMILIES)
def test_written_back_with_the_same_biases(tmp_path, model_type):
    # the writer reads the bias fields from the same table: a Mistral saying mlp_bias is written
    # without MLP biases, and transformers computes the source's logits from the written files
    path, _ = _saved(tmp_path / "src", model_type, True)
    ckpt = import_checkpoint(path)
    export_hf(ckpt.cfg, ckpt.params, path, tmp_path / "out")
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    logits = []
    for d in (path, tmp_path / "out"):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            d, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        with torch.no_grad():
            logits.append(model(x).logits)
    assert (logits[0] - logits[1]).abs().max() < 1e-5


# (q/k/v, output, MLP) projections of layer 0, by their names in transformers' modules
_MODULES = {
    "phi3": ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj"),
    "gpt_neox": ("attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h"),
}
_LLAMA_MODULES = ("self_attn.q_proj", "self_attn.o_proj", "mlp.up_proj")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_the_table_is_what_transformers_builds(model_type):
    # every combination of the two fields: the table's reading is the modules transformers makes
    for attention_bias, mlp_bias in [(False, False), (True, False), (False, True), (True, True)]:
        fields = {"attention_bias": attention_bias, "mlp_bias": mlp_bias}
        extra = {"head_dim": 8} if model_type != "gpt_neox" else {}
        cfg = transformers.AutoConfig.for_model(model_type, **SMALL, **extra, **fields,
                                                pad_token_id=0)  # fmt: skip
        layer = transformers.AutoModelForCausalLM.from_config(cfg).base_model.layers[0]
        built = tuple(layer.get_submodule(m).bias is not None
                      for m in _MODULES.get(model_type, _LLAMA_MODULES))  # fmt: skip
        assert read_biases({"model_type": model_type, **fields}, "t", model_type)[:3] == built
