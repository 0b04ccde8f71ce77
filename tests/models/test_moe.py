"""Sparse mixtures of experts in the model: the config, the parameters and the forward, checked
against a mixture written out position by position."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from landscape.models import ModelConfig, forward, init_params, param_shapes
from landscape.models.registry import describe
from landscape.models.self_attention import attention
from tests.conftest import tiny_config, tiny_inputs, tiny_moe


def noisy(cfg: ModelConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """Float64 parameters with every bias and gain moved off its initial value."""
    gen = torch.Generator().manual_seed(seed + 100)
    return {k: v.double() + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
            for k, v in init_params(cfg, seed).items()}  # fmt: skip


def test_configs_without_experts_keep_their_dicts():
    for arch in ("mlp", "vit", "gpt"):
        d = tiny_config(arch).to_dict()
        assert not {"n_experts", "top_k", "norm_top_k"} & set(d)
    cfg = tiny_moe()
    assert cfg.to_dict()["n_experts"] == 4 and cfg.to_dict()["top_k"] == 2
    assert "norm_top_k" not in cfg.to_dict()  # the default keeps existing mixtures' keys
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg and cfg.moe
    plain = tiny_moe(norm_top_k=False)
    assert plain.to_dict()["norm_top_k"] is False and plain != cfg
    assert ModelConfig.from_dict(plain.to_dict()) == plain


def test_unnormalised_routing_has_one_spelling():
    with pytest.raises(ValueError, match="norm_top_k=False needs n_experts"):
        tiny_config("gpt").replace(norm_top_k=False)
    with pytest.raises(ValueError, match="norm_top_k must be true or false"):
        tiny_moe(norm_top_k=0)
    # routed to every expert, both routings are one softmax over all logits
    assert tiny_moe(top_k=4, norm_top_k=False) == tiny_moe(top_k=4)
    assert "(top 2 of a softmax over all)" in describe(tiny_moe(norm_top_k=False))


@pytest.mark.parametrize(("n", "k"), [(4, 0), (4, 5), (0, 1), (-1, 0), (2.0, 1)])
def test_routing_width_is_checked(n, k):
    with pytest.raises(ValueError):
        tiny_moe(n_experts=n, top_k=k)


def test_parameters_have_an_expert_axis():
    shapes = param_shapes(tiny_moe(mlp="gated"))
    assert shapes["blocks.0.mlp.W_router"] == (8, 4) and shapes["blocks.0.mlp.b_router"] == (4,)
    assert shapes["blocks.0.mlp.W_in"] == shapes["blocks.0.mlp.W_gate"] == (4, 8, 6)
    assert shapes["blocks.0.mlp.W_out"] == (4, 6, 8) and shapes["blocks.0.mlp.b_out"] == (4, 8)
    lean = param_shapes(tiny_moe(bias=False))
    assert "blocks.0.mlp.b_router" not in lean and "blocks.0.mlp.b_in" not in lean
    assert "mixture of 4 experts (top 2)" in describe(tiny_moe())


def _mixture_by_hand(cfg: ModelConfig, p: dict, prefix: str, x: torch.Tensor) -> torch.Tensor:
    """The Mixtral-style layer written out: a softmax over every router logit, the top k kept
    and renormalised (not renormalised with ``norm_top_k`` False, as Qwen3-MoE's
    ``norm_topk_prob`` false), each chosen expert run on its own position."""
    out = torch.zeros_like(x)
    for pos in range(x.shape[0]):
        v = x[pos]
        probs = (v @ p[f"{prefix}.W_router"] + p[f"{prefix}.b_router"]).softmax(-1)
        top, idx = probs.topk(cfg.top_k)
        weights = top / top.sum() if cfg.norm_top_k else top
        for w, e in zip(weights, idx.tolist(), strict=True):
            up = v @ p[f"{prefix}.W_in"][e] + p[f"{prefix}.b_in"][e]
            if cfg.gated:
                up = F.silu(v @ p[f"{prefix}.W_gate"][e] + p[f"{prefix}.b_gate"][e]) * up
            else:
                up = F.gelu(up)
            out[pos] += w * (up @ p[f"{prefix}.W_out"][e] + p[f"{prefix}.b_out"][e])
    return out


@pytest.mark.parametrize(("mlp", "act", "norm"),
                         [("plain", "gelu", True), ("gated", "silu", True),
                          ("gated", "silu", False)])  # fmt: skip
def test_mixture_equals_the_layer_written_out(mlp, act, norm):
    cfg = tiny_moe(mlp=mlp, act=act, norm_top_k=norm)
    p = noisy(cfg)
    x = tiny_inputs(cfg, 3)
    cache: dict = {}
    logits = forward(cfg, p, x, cache, fast=False)
    stream = cache["resid.1"]  # entering block 1: its attention, then its mixture by hand
    ln1 = p["blocks.1.ln1.w"] * stream / stream.pow(2).mean(-1, keepdim=True).add(cfg.eps).sqrt()
    after_attn = stream + attention(cfg, p, "blocks.1.attn", ln1, layer=1)
    ln2 = after_attn / after_attn.pow(2).mean(-1, keepdim=True).add(cfg.eps).sqrt()
    ln2 = ln2 * p["blocks.1.ln2.w"]
    mixed = torch.stack([_mixture_by_hand(cfg, p, "blocks.1.mlp", row) for row in ln2])
    assert torch.allclose(cache["resid.2"], after_attn + mixed, atol=1e-12)
    routed = cache["blocks.1.mlp.routing"]
    assert ((routed > 0).sum(-1) == cfg.top_k).all()
    if norm:
        assert torch.allclose(routed.sum(-1), torch.ones_like(routed[..., 0]), atol=1e-12)
    else:  # the other experts' share of the softmax is missing
        assert (routed.sum(-1) < 1 - 1e-3).all()
    assert torch.allclose(forward(cfg, p, x, fast=True), logits, atol=1e-12)


def test_residual_mlp_mixture_runs_both_kernels():
    cfg = tiny_moe("mlp", act="relu")
    p = noisy(cfg)
    x = tiny_inputs(cfg, 5).double()
    assert torch.allclose(forward(cfg, p, x, fast=True), forward(cfg, p, x, fast=False),
                          atol=1e-12)  # fmt: skip
