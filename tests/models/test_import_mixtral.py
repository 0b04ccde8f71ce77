"""Mixtral: the Llama layout with every MLP a sparse mixture of experts, against transformers."""

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.matching import weight_matching
from landscape.models import forward
from landscape.models.importers import describe, import_checkpoint
from landscape.symmetry import apply, random_transform, spec_for, symmetry_table
from tests.conftest import copy_with_config, perturbed

transformers = pytest.importorskip("transformers")

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=64, max_position_embeddings=32,
             num_local_experts=4, num_experts_per_tok=2, tie_word_embeddings=False)  # fmt: skip


def _saved(path, **extra):
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(transformers.MixtralConfig(**SMALL, **extra))
    model = perturbed(model).eval()
    model.save_pretrained(path, safe_serialization=True)
    return model


@pytest.mark.parametrize("window", [None, 5])
def test_logits_equal_transformers(tmp_path, window):
    model = _saved(tmp_path, sliding_window=window)
    ckpt = import_checkpoint(tmp_path)
    cfg = ckpt.cfg
    assert (cfg.n_experts, cfg.top_k, cfg.d_mlp, cfg.gated, cfg.bias) == (4, 2, 24, True, False)
    assert cfg.windows == ((5, 5) if window else ())
    assert ckpt.params["blocks.0.mlp.W_in"].shape == (4, 32, 24)
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    model.config._experts_implementation = "eager"  # the per-expert loop, which runs float64
    with torch.no_grad():  # both in float64, so no near-tie of the router is decided by rounding
        ref = model.double()(x).logits
    ours = forward(cfg, {k: v.double() for k, v in ckpt.params.items()}, x)
    assert (ours - ref).abs().max() < 1e-5
    assert ckpt.meta["model_type"] == "mixtral" and ckpt.meta["ignored_tensors"] == []
    assert describe(cfg, "mixtral").startswith("Mixtral, d=32")
    assert "mixture of 4 experts (top 2)" in describe(cfg, "mixtral")


def test_admitted_gauges_keep_the_logits_and_matching_finds_them(tmp_path):
    _saved(tmp_path)
    ckpt = import_checkpoint(tmp_path)
    params = {k: v.double() for k, v in ckpt.params.items()}
    rows = symmetry_table(ckpt.cfg, params)
    assert all(r["max_abs_dlogits"] < 1e-10 for r in rows if r["valid"])
    spec = spec_for(ckpt.cfg)
    moved = apply(spec, random_transform(spec, "signed-perm", 3), params)
    r = weight_matching(ckpt.cfg, params, moved, "signed-perm")
    assert max(float((r.params_b[k] - params[k]).abs().max()) for k in params) < 1e-10


def test_more_routed_experts_than_experts_is_refused(tmp_path):
    _saved(tmp_path / "a")
    bad = copy_with_config(tmp_path / "a", tmp_path / "b", num_experts_per_tok=5)
    with pytest.raises(LandscapeError, match="num_experts_per_tok 5 exceeds num_local_experts 4"):
        import_checkpoint(bad)


def test_writing_a_mixture_is_refused(tmp_path):
    from landscape.models.exporters import export_hf, hf_tensors, llama_config
    from tests.conftest import tiny_moe

    _saved(tmp_path / "src")
    ckpt = import_checkpoint(tmp_path / "src")
    with pytest.raises(LandscapeError, match="writing model_type 'mixtral' is not supported"):
        export_hf(ckpt.cfg, ckpt.params, tmp_path / "src", tmp_path / "out")
    llama_like = tiny_moe(pos="rotary", mlp="gated", act="silu", bias=False)
    with pytest.raises(LandscapeError, match="no mixture of experts"):
        llama_config(llama_like)
    with pytest.raises(LandscapeError, match="writing a mixture of experts"):
        hf_tensors(ckpt.cfg, ckpt.params, {"model_type": "llama"})
    assert not (tmp_path / "out").exists()
