"""An untied config whose file has no head is refused: transformers would build the model with
a randomly initialised head, so no import can give its logits (tying it would be a guess)."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from landscape.models.importers import import_checkpoint
from tests.conftest import refused_import

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=64, max_position_embeddings=32,
             pad_token_id=0)  # fmt: skip
HEADS = ("lm_head.weight", "embed_out.weight")


def _headless(tmp_path, model_type: str, tie: bool | None):
    """A tiny untied ``model_type`` saved without its head, config.json saying
    ``tie_word_embeddings: tie`` (None: the field removed, the family's default false)."""
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **SMALL, tie_word_embeddings=False)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    f = tmp_path / "model.safetensors"
    tensors = load_file(f)
    assert any(h in tensors for h in HEADS)
    save_file({k: v for k, v in tensors.items() if k not in HEADS}, f, metadata={"format": "pt"})
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("tie_word_embeddings", None)
    if tie is not None:
        config["tie_word_embeddings"] = tie
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


@pytest.mark.parametrize("tie", [False, None], ids=["untied", "silent"])
@pytest.mark.parametrize("model_type", ["llama", "qwen2", "mistral", "gpt_neox"])
def test_an_untied_config_without_a_head_is_refused(tmp_path, model_type, tie):
    path = _headless(tmp_path, model_type, tie)
    msg = refused_import(path, "config.json", "tie_word_embeddings", "no ", "random")
    assert ("is false" if tie is False else "absent") in msg


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_a_tied_config_without_a_head_still_imports(tmp_path, model_type):
    ckpt = import_checkpoint(_headless(tmp_path, model_type, True))
    assert ckpt.meta["tied_embeddings"]
