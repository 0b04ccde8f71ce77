"""Block layouts as registry entries (``landscape.models.layouts``): a new layout is one entry,
and the parameters, both forward paths, the symmetry spec and processing follow its facts."""

from __future__ import annotations

import pytest
import torch

from landscape.models import ModelConfig, forward, init_params, param_shapes
from landscape.models.layouts import LAYOUTS, BlockLayout, block_layout, layout_of
from landscape.models.primitives import activation, reference_norm
from landscape.models.registry import describe
from landscape.models.self_attention import attention
from landscape.symmetry import random_transform, spec_for
from landscape.symmetry.action import apply
from landscape.symmetry.processing import prepare
from landscape.symmetry.spec import fixed_gain_norms, resid_blocked

# What docs/architecture.md's "Adding a block layout" adds: attention and the FFN read the same
# stream, each output through its own norm before the residual add
PARALLEL_POST = BlockLayout("parallel-post", "parallel sublayers with output norms",
                            norm_in=False, norm_out=True, parallel=True)  # fmt: skip
BASE = dict(d_model=16, d_mlp=12, n_layers=2, n_out=7, n_heads=4, d_head=4, d_vocab=7, n_ctx=6)


@pytest.fixture
def parallel_post(monkeypatch) -> ModelConfig:
    monkeypatch.setitem(LAYOUTS, PARALLEL_POST.name, PARALLEL_POST)
    return ModelConfig("gpt", block=PARALLEL_POST.name, **BASE)


def noisy(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    return {k: v.double() + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
            for k, v in init_params(cfg, 0).items()}  # fmt: skip


def by_hand(cfg: ModelConfig, p: dict[str, torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    """``x + N_1(attn(x)) + N_2(mlp(x))`` per block, written out without the block loop."""
    x = p["embed.W_E"][tokens] + p["pos_embed.W_pos"][: tokens.shape[1]]
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        a = attention(cfg, p, f"{b}.attn", x, layer=layer)
        h = activation(cfg, x @ p[f"{b}.mlp.W_in"] + p[f"{b}.mlp.b_in"])
        m = h @ p[f"{b}.mlp.W_out"] + p[f"{b}.mlp.b_out"]
        post1 = reference_norm(cfg, p, f"{b}.ln1_post", a)
        x = x + post1 + reference_norm(cfg, p, f"{b}.ln2_post", m)
    return reference_norm(cfg, p, "ln_final", x) @ p["unembed.W_U"] + p["unembed.b_U"]


def test_a_new_layout_is_one_registry_entry(parallel_post):
    cfg = parallel_post
    shapes = param_shapes(cfg)
    assert "blocks.0.ln1_post.w" in shapes and "blocks.1.ln2_post.w" in shapes
    assert not any(".ln1." in n or ".ln2." in n for n in shapes)
    params, tokens = noisy(cfg), torch.randint(0, 7, (3, 6), generator=torch.Generator())
    reference = forward(cfg, params, tokens, fast=False)
    assert torch.allclose(reference, by_hand(cfg, params, tokens), atol=1e-12)
    assert torch.allclose(forward(cfg, params, tokens, fast=True), reference, atol=1e-12)
    assert "parallel sublayers with output norms" in describe(cfg)
    # the output norms' gains are fixed: signed permutations stay exact, rotations are refused
    assert fixed_gain_norms(cfg)[:2] == ("blocks.0.ln1_post", "blocks.0.ln2_post")
    assert "ln1_post" in resid_blocked(cfg)
    spec = spec_for(cfg)
    moved = apply(spec, random_transform(spec, "signed-perm", 1), params)
    assert float((forward(cfg, moved, tokens) - reference).abs().max()) < 1e-10
    with pytest.raises(ValueError, match="ln1_post"):
        prepare(cfg, params, "orth")


def test_the_forward_reads_the_parallel_fact(parallel_post):
    # the same entry, sequential: a different function, so the loop did read the fact
    params, tokens = noisy(parallel_post), torch.randint(0, 7, (3, 6), generator=torch.Generator())
    sequential = BlockLayout("seq-post", "", norm_in=False, norm_out=True)
    LAYOUTS[sequential.name] = sequential
    try:
        cfg = parallel_post.replace(block=sequential.name)
        assert param_shapes(cfg) == param_shapes(parallel_post)
        moved = forward(cfg, params, tokens) - forward(parallel_post, params, tokens)
        assert float(moved.abs().max()) > 1e-3
    finally:
        del LAYOUTS[sequential.name]


def test_the_layouts_and_their_facts():
    assert tuple(LAYOUTS) == ("pre", "post", "parallel", "sandwich", "postln")
    post_ln = block_layout("postln")
    assert post_ln.embed_norm and not post_ln.final_norm and not post_ln.dropout
    assert post_ln.fixed_gain_norms(True) == ("ln1", "ln2")
    assert block_layout("sandwich").fixed_gain_norms(False) == ("ln2_post",)
    assert block_layout("pre").fixed_gain_norms(True) == ()
    assert layout_of(ModelConfig("gpt", block="parallel", **BASE)).parallel
    with pytest.raises(ValueError, match="expected one of"):
        block_layout("post-ln")
    with pytest.raises(ValueError, match="ln1/ln2"):
        BlockLayout("both", "", norm_in=True, norm_sum=True)
    with pytest.raises(ValueError, match="not built"):
        BlockLayout("parallel-postln", "", norm_in=False, norm_sum=True, parallel=True)
