"""Model extensions (rotary, grouped queries, gated FFN, bias-free, image channels) and their spec.

Besides "valid gauges keep the logits", these tests show why the spec leaves some maps out: a
gate unit cannot flip sign, a head permutation that splits a key/value group is not a symmetry,
and a generic within-head QK map does not commute with rotary positions.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from landscape.models import ModelConfig, forward, init_params
from landscape.symmetry import (
    PERM,
    SCALED_PERM,
    SIGNED_PERM,
    Element,
    Transform,
    apply,
    random_element,
    random_transform,
    spec_for,
)
from tests.conftest import tiny_config


def ext_config(**changes) -> ModelConfig:
    base = dict(d_model=16, d_mlp=12, n_layers=2, n_out=7, n_heads=4, d_head=4, d_vocab=7, n_ctx=6)
    return ModelConfig("gpt", **{**base, **changes})


LLAMA_LIKE = dict(pos="rotary", n_kv_heads=2, mlp="gated", act="silu", bias=False)


def noisy_params(cfg: ModelConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """Float64 parameters with non-trivial gains and biases."""
    gen = torch.Generator().manual_seed(seed + 100)
    return {
        k: (v.double() + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64))
        for k, v in init_params(cfg, seed).items()
    }


def tokens(cfg: ModelConfig) -> torch.Tensor:
    return torch.randint(0, cfg.d_vocab, (3, cfg.n_ctx), generator=torch.Generator().manual_seed(1))


def dlogits(cfg: ModelConfig, a: dict, b: dict) -> float:
    x = tokens(cfg)
    return float((forward(cfg, a, x) - forward(cfg, b, x)).abs().max())


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_existing_configs_keep_their_dicts(arch):
    d = tiny_config(arch).to_dict()
    assert not {"pos", "n_kv_heads", "mlp", "bias", "attn_scale", "channels"} & set(d)
    assert ModelConfig.from_dict(d) == tiny_config(arch)


def test_extension_config_round_trips():
    cfg = ext_config(**LLAMA_LIKE, rotary_base=500.0)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.kv_heads == 2 and cfg.rot_dim == 4 and cfg.gated
    with pytest.raises(ValueError):
        ext_config(n_kv_heads=3)


def test_bias_free_equals_zero_biases():
    from landscape.models import param_shapes

    cfg = ext_config(mlp="gated", act="silu")
    lean = ext_config(mlp="gated", act="silu", bias=False)
    params = noisy_params(cfg)
    kept = {k: v for k, v in params.items() if k in param_shapes(lean)}
    assert set(params) - set(kept) >= {"unembed.b_U", "blocks.0.attn.b_O", "blocks.0.mlp.b_gate"}
    zeroed = {k: (v if k in kept else torch.zeros_like(v)) for k, v in params.items()}
    x = tokens(cfg)
    assert torch.allclose(forward(cfg, zeroed, x), forward(lean, kept, x), atol=1e-12)


def test_grouped_query_equals_repeated_key_value_heads():
    gqa = ext_config(n_kv_heads=2)
    params = noisy_params(gqa)
    full = dict(params)
    for layer in range(2):
        for m in "KV":
            for kind in "Wb":
                name = f"blocks.{layer}.attn.{kind}_{m}"
                full[name] = params[name].repeat_interleave(2, dim=0)
    assert dlogits(gqa, params, params) == 0
    x = tokens(gqa)
    assert torch.allclose(forward(gqa, params, x), forward(ext_config(), full, x), atol=1e-12)


def test_channel_patches_match_a_conv_patch_embedding():
    dims = dict(d_model=8, d_mlp=12, n_layers=1, n_out=5, n_heads=2, d_head=4)
    cfg = ModelConfig("vit", **dims, image_size=4, patch_size=2, channels=3)
    assert cfg.d_in == 12
    params = init_params(cfg, 0)
    images = torch.randn(2, 3, 4, 4)
    from landscape.models import embed, patchify

    conv_w = params["embed.W_E"].T.reshape(8, 3, 2, 2)
    conv = F.conv2d(images, conv_w, params["embed.b_E"], stride=2).flatten(2).transpose(1, 2)
    ours = patchify(cfg, images) @ params["embed.W_E"] + params["embed.b_E"]
    assert torch.allclose(ours, conv, atol=1e-6)
    assert embed(cfg, params, images).shape == (2, 5, 8)


@pytest.mark.parametrize("kind", [PERM, SIGNED_PERM, SCALED_PERM])
def test_gated_ffn_unit_gauges_are_exact(kind):
    cfg = ext_config(**LLAMA_LIKE)
    params = noisy_params(cfg)
    spec = spec_for(cfg)
    t = random_transform(spec, {v: kind for v in spec.family("mlp")}, 0)
    new = apply(spec, t, params)
    assert dlogits(cfg, params, new) < 1e-9
    if kind == SIGNED_PERM:  # the gate is only permuted: its columns keep their signs
        perm = t.elements["mlp0"].perm
        assert torch.equal(new["blocks.0.mlp.W_gate"], params["blocks.0.mlp.W_gate"][:, perm])


def test_gate_sign_flip_is_not_a_symmetry():
    cfg = ext_config(**LLAMA_LIKE)
    params = noisy_params(cfg)
    up, gate = dict(params), dict(params)
    for name, flipped in (("W_in", up), ("W_gate", gate)):
        flipped[f"blocks.0.mlp.{name}"] = params[f"blocks.0.mlp.{name}"].clone()
        flipped[f"blocks.0.mlp.{name}"][:, 0] *= -1
        flipped["blocks.0.mlp.W_out"] = params["blocks.0.mlp.W_out"].clone()
        flipped["blocks.0.mlp.W_out"][0] *= -1
    assert dlogits(cfg, params, up) < 1e-12  # up projection: exact
    assert dlogits(cfg, params, gate) > 1e-3  # gate: SiLU(−z) ≠ −SiLU(z)


def test_grouped_head_permutations():
    cfg = ext_config(**LLAMA_LIKE)
    params = noisy_params(cfg)
    spec = spec_for(cfg)
    assert spec.variables["heads0"].group == 2
    # within-head maps: one per key/value group, shared by its query heads
    assert spec.variables["qk0"].group == spec.variables["ov0"].group == 2
    t = random_transform(spec, "perm", 4)
    assert dlogits(cfg, params, apply(spec, t, params)) < 1e-9
    # swapping the two groups, and heads inside a group: exact
    ok = Transform({"heads0": Element(PERM, torch.tensor([3, 2, 0, 1]), torch.ones(4).double())})
    assert dlogits(cfg, params, apply(spec, ok, params)) < 1e-9
    # moving a query head to another key/value group: refused, and it changes the function
    bad = Transform({"heads0": Element(PERM, torch.tensor([0, 2, 1, 3]), torch.ones(4).double())})
    with pytest.raises(ValueError, match="key/value groups"):
        apply(spec, bad, params)
    assert dlogits(cfg, params, apply(spec, bad, params, check=False)) > 1e-3


def test_rotary_restricts_within_head_query_key_maps():
    rope = ext_config(pos="rotary", bias=False)
    spec = spec_for(rope)
    assert spec.variables["qk0"].kinds == ("rope-commuting",) and "ov0" in spec.variables
    params = noisy_params(rope)
    assert dlogits(rope, params, apply(spec, random_transform(spec, "qk", 0), params)) < 1e-9
    assert dlogits(rope, params, apply(spec, random_transform(spec, "ov", 0), params)) < 1e-9
    # a generic invertible M on q (M⁻ᵀ on k) no longer cancels once RoPE sits in between ...
    gen = torch.Generator().manual_seed(0)
    m = random_element("invertible", 4, gen).dense()
    moved = dict(params)
    moved["blocks.0.attn.W_Q"] = params["blocks.0.attn.W_Q"] @ m
    moved["blocks.0.attn.W_K"] = params["blocks.0.attn.W_K"] @ torch.linalg.inv(m).T
    assert dlogits(rope, params, moved) > 1e-3
    # ... while it does without positions in the head space
    plain = ext_config(pos="none", bias=False)
    assert dlogits(plain, params, moved) < 1e-9
    # rotations by the same angle in one frequency pair commute with RoPE: the reason the
    # restricted qk kind is exact
    c, s = math.cos(0.7), math.sin(0.7)
    r = torch.eye(4, dtype=torch.float64)
    r[0, 0], r[0, 2], r[2, 0], r[2, 2] = c, s, -s, c  # pair (0, 2) of a 4-dim head
    moved["blocks.0.attn.W_Q"] = params["blocks.0.attn.W_Q"] @ r
    moved["blocks.0.attn.W_K"] = params["blocks.0.attn.W_K"] @ r
    assert dlogits(rope, params, moved) < 1e-9


@pytest.mark.parametrize("group", ["perm", "signed-perm", "orth"])
def test_llama_like_resid_gauges(group):
    from landscape.symmetry.processing import prepare

    cfg = ext_config(**LLAMA_LIKE)
    params = noisy_params(cfg)
    cfg2, params2 = prepare(cfg, params, group)
    spec = spec_for(cfg2)
    new = apply(spec, random_transform(spec, group, 2), params2)
    x = tokens(cfg)
    assert float((forward(cfg2, new, x) - forward(cfg, params, x)).abs().max()) < 1e-9
