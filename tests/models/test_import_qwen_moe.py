"""Qwen3-MoE: Qwen3's layout with every MLP a sparse mixture of experts, against transformers;
the routed weights renormalised over the top k or not (``norm_topk_prob``); dense layers and
Qwen2-MoE (a shared expert) refused."""

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.matching import weight_matching
from landscape.models import forward
from landscape.models.importers import describe, import_checkpoint
from landscape.symmetry import apply, random_transform, spec_for, symmetry_table
from tests.conftest import copy_with_config, perturbed, refused_import

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

# moe_intermediate_size (the experts' width) differs from intermediate_size (dense layers')
SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, moe_intermediate_size=16, vocab_size=64,
             max_position_embeddings=32, num_experts=4, num_experts_per_tok=2,
             tie_word_embeddings=False)  # fmt: skip


def _saved(path, **extra):
    torch.manual_seed(0)
    model = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(**{**SMALL, **extra}))
    model = perturbed(model).eval()
    model.save_pretrained(path, safe_serialization=True)
    return model


def _both_in_float64(model, ckpt, x):
    """(transformers' logits, ours), both in float64, so that no near-tie of the router is
    decided by rounding (transformers' router softmax still runs in float32)."""
    model.config._experts_implementation = "eager"  # the per-expert loop, which runs float64
    with torch.no_grad():
        ref = model.double()(x).logits
    return ref, forward(ckpt.cfg, {k: v.double() for k, v in ckpt.params.items()}, x)


CASES = [
    pytest.param(dict(norm_topk_prob=True), id="renormalised"),
    pytest.param(dict(norm_topk_prob=False), id="not-renormalised"),
    pytest.param(dict(norm_topk_prob=False, attention_bias=True, head_dim=16,
                      use_sliding_window=True, sliding_window=5), id="bias-head16-window"),
]  # fmt: skip


@pytest.mark.parametrize("extra", CASES)
def test_logits_equal_transformers(tmp_path, extra):
    model = _saved(tmp_path, **extra)
    ckpt = import_checkpoint(tmp_path)
    cfg = ckpt.cfg
    assert (cfg.n_experts, cfg.top_k, cfg.d_mlp, cfg.gated) == (4, 2, 16, True)
    assert cfg.norm_top_k == extra["norm_topk_prob"] and cfg.qk_norm == "head"
    assert cfg.bias == extra.get("attention_bias", False)
    assert cfg.d_head == extra.get("head_dim", 8)  # hidden_size / heads unless set
    assert cfg.windows == ((5, 5) if "sliding_window" in extra else ())
    assert ckpt.params["blocks.0.mlp.W_in"].shape == (4, 32, 16)
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    ref, ours = _both_in_float64(model, ckpt, x)
    assert (ours - ref).abs().max() < 1e-5
    # the other routing is another function: the test tells them apart
    other = cfg.replace(norm_top_k=not cfg.norm_top_k)
    params = {k: v.double() for k, v in ckpt.params.items()}
    assert (forward(other, params, x) - ref).abs().max() > 1e-3
    assert ckpt.meta["model_type"] == "qwen3_moe" and ckpt.meta["ignored_tensors"] == []
    assert describe(cfg, "qwen3_moe").startswith("Qwen3-MoE, d=32")
    top = "top 2" if extra["norm_topk_prob"] else "top 2 of a softmax over all"
    assert f"mixture of 4 experts ({top})" in describe(cfg, "qwen3_moe")


def test_missing_fields_take_qwen3moeconfig_defaults_and_either_count_name(tmp_path):
    _saved(tmp_path / "a", norm_topk_prob=True)
    base = import_checkpoint(tmp_path / "a").cfg
    # transformers writes num_local_experts; older files say num_experts
    renamed = copy_with_config(tmp_path / "a", tmp_path / "b", num_local_experts=None,
                               num_experts=4)  # fmt: skip
    assert import_checkpoint(renamed).cfg == base
    # without norm_topk_prob, Qwen3MoeConfig does not renormalise
    bare = copy_with_config(tmp_path / "a", tmp_path / "c", norm_topk_prob=None,
                            decoder_sparse_step=None, mlp_only_layers=None)  # fmt: skip
    assert import_checkpoint(bare).cfg == base.replace(norm_top_k=False)
    built = transformers.AutoConfig.from_pretrained(bare)
    assert built.norm_topk_prob is False
    both = copy_with_config(tmp_path / "a", tmp_path / "d", num_experts=6)
    refused_import(both, "num_experts 6 disagrees with num_local_experts 4")


def test_fields_transformers_does_not_read_are_listed(tmp_path):
    _saved(tmp_path / "a")
    # a released file's window fields: max_window_layers is not read, and without
    # use_sliding_window no window applies
    edited = copy_with_config(tmp_path / "a", tmp_path / "b", max_window_layers=1,
                              sliding_window=5)  # fmt: skip
    ckpt = import_checkpoint(edited)
    assert ckpt.cfg.windows == ()
    assert sorted(ckpt.meta["ignored_config"]) == ["max_window_layers", "sliding_window"]
    assert transformers.AutoConfig.from_pretrained(edited).sliding_window is None


@pytest.mark.parametrize("norm", [True, False], ids=["renormalised", "not-renormalised"])
def test_admitted_gauges_keep_the_logits_and_matching_finds_them(tmp_path, norm):
    _saved(tmp_path, norm_topk_prob=norm)
    ckpt = import_checkpoint(tmp_path)
    params = {k: v.double() for k, v in ckpt.params.items()}
    rows = symmetry_table(ckpt.cfg, params)
    assert all(r["max_abs_dlogits"] < 1e-10 for r in rows if r["valid"])
    spec = spec_for(ckpt.cfg)
    t = random_transform(spec, "signed-perm", 3)
    # the experts are permuted with their router columns, in both blocks
    for layer in (0, 1):
        assert spec.variables[f"experts{layer}"].family == "experts"
        assert not torch.equal(t.elements[f"experts{layer}"].perm, torch.arange(4))
    moved = apply(spec, t, params)
    assert max(float((moved[k] - params[k]).abs().max()) for k in params) > 1e-2
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    assert (forward(ckpt.cfg, moved, x) - forward(ckpt.cfg, params, x)).abs().max() < 1e-10
    r = weight_matching(ckpt.cfg, params, moved, "signed-perm")
    assert max(float((r.params_b[k] - params[k]).abs().max()) for k in params) < 1e-10


REFUSALS = [
    pytest.param(dict(mlp_only_layers=[1]), ("mlp_only_layers [1]", "layers [1] dense"),
                 id="mlp-only-layers"),
    pytest.param(dict(decoder_sparse_step=2), ("decoder_sparse_step 2", "layers [0] dense"),
                 id="sparse-step"),
    pytest.param(dict(mlp_only_layers=[True]), ("mlp_only_layers must be a list",),
                 id="mlp-only-layers-not-indices"),
    pytest.param(dict(num_local_experts=4, num_experts_per_tok=5),
                 ("num_experts_per_tok 5 exceeds num_local_experts 4",), id="top-k"),
    pytest.param(dict(norm_topk_prob="yes"), ("norm_topk_prob must be true or false",),
                 id="norm-not-a-flag"),
    pytest.param(dict(rope_parameters={"rope_type": "yarn", "factor": 4.0}),
                 ("rope_parameters.rope_type",), id="rope-scaling"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "fragments"), REFUSALS)
def test_dense_layers_and_unimplemented_fields_are_refused(tmp_path, edit, fragments):
    _saved(tmp_path / "a")
    refused_import(copy_with_config(tmp_path / "a", tmp_path / "b", **edit), "config.json",
                   *fragments)  # fmt: skip


def test_layer_indices_outside_the_model_make_no_layer_dense(tmp_path):
    # transformers builds a mixture in every layer whose index is not listed
    model = _saved(tmp_path, mlp_only_layers=[5])
    assert all(hasattr(layer.mlp, "gate") for layer in model.model.layers)
    assert import_checkpoint(tmp_path).cfg.n_experts == 4


def test_qwen2_moe_is_refused_for_its_shared_expert(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.Qwen2MoeConfig(**SMALL, shared_expert_intermediate_size=16)
    transformers.Qwen2MoeForCausalLM(cfg).save_pretrained(tmp_path, safe_serialization=True)
    refused_import(tmp_path, "config.json", "model_type qwen2_moe", "shared expert",
                   "not supported")  # fmt: skip


def test_writing_a_mixture_is_refused(tmp_path):
    from landscape.models.exporters import export_hf

    _saved(tmp_path / "src")
    ckpt = import_checkpoint(tmp_path / "src")
    with pytest.raises(LandscapeError, match="qwen3_moe"):
        export_hf(ckpt.cfg, ckpt.params, tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()
