"""A model with no Hugging Face source but Llama's layout (the zoo's llama-shakespeare-d128)
written as a Llama directory: transformers computes its logits, and the importer reads back its
configuration and parameters."""

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig
from landscape.models.exporters import export_hf, llama_config
from landscape.models.functional import forward
from landscape.models.importers import import_checkpoint
from landscape.models.params import init_params
from landscape.models.zoo import ZOO
from tests.conftest import tiny_config, tiny_inputs

transformers = pytest.importorskip("transformers")

LLAMA_LAYOUT = ModelConfig("gpt", d_model=16, d_mlp=24, n_layers=2, n_out=11, n_heads=4,
                           d_head=4, d_vocab=11, n_ctx=8, act="silu", pos="rotary",
                           n_kv_heads=2, mlp="gated", bias=False)  # fmt: skip


def test_a_llama_layout_model_is_written_as_llama(tmp_path):
    cfg = LLAMA_LAYOUT
    g = torch.Generator().manual_seed(1)
    # gains away from 1, so that a gain written in the wrong place shows
    params = {k: v + 0.1 * torch.randn(v.shape, generator=g) if k.endswith(".w") else v
              for k, v in init_params(cfg, 0).items()}  # fmt: skip
    out = tmp_path / "llama"
    written = export_hf(cfg, params, None, out, config=llama_config(cfg))
    assert written["model_type"] == "llama" and written["tokenizer_files"] == []
    x = tiny_inputs(cfg, batch=3)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        theirs = model(x).logits
    ours = forward(cfg, params, x)
    assert (theirs - ours).abs().max() < 1e-5
    back = import_checkpoint(out)
    assert back.cfg == cfg
    assert all(torch.equal(back.params[k], params[k]) for k in params)


def test_the_zoo_llama_has_llamas_layout():
    assert llama_config(ZOO["llama-shakespeare-d128"].config)["num_key_value_heads"] == 2


@pytest.mark.parametrize(("cfg", "says"), [
    (ZOO["gpt-shakespeare-d128"].config, "rotary positions"),
    (ZOO["vit-fashion-d256"].config, "causal language model"),
    (tiny_config("gpt", norm="ln"), "RMSNorm"),
    (LLAMA_LAYOUT.replace(bias=True), "no biases"),
    (LLAMA_LAYOUT.replace(mlp="plain", act="gelu"), "SiLU-gated"),
], ids=["zoo-gpt", "zoo-vit", "layernorm", "biases", "plain-mlp"])  # fmt: skip
def test_other_layouts_are_refused_with_the_reason(cfg, says):
    with pytest.raises(LandscapeError, match=says):
        llama_config(cfg)
