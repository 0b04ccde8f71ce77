"""Q/K norms (``qk_norm`` "head"/"full") and post-norm blocks (``block="post"``) on canonical
models: both forward paths, the gauges that stay exact, and the ones these norms block.

Besides "valid gauges keep the logits", these tests show why the spec leaves maps out: a
within-head QK map does not pass through a q/k norm (even without RoPE), and a post norm's gain
stops every rotation of the stream, folded or not.
"""

from __future__ import annotations

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig, forward, init_params, param_shapes
from landscape.models.circuits import check_circuit_form
from landscape.symmetry import (
    ORTH,
    PERM,
    SIGNED_PERM,
    Element,
    Transform,
    apply,
    embed_width,
    random_element,
    random_transform,
    rescale_norm,
    spec_for,
    symmetry_table,
)
from landscape.symmetry.processing import fold_norm_gains, prepare
from tests.conftest import tiny_config, tiny_inputs


def ext_config(**changes) -> ModelConfig:
    base = dict(d_model=16, d_mlp=12, n_layers=2, n_out=7, n_heads=4, d_head=4, d_vocab=7, n_ctx=6)
    return ModelConfig("gpt", **{**base, **changes})


OLMO_LIKE = dict(block="post", qk_norm="full", pos="rotary", n_kv_heads=2, mlp="gated",
                 act="silu", bias=False)  # fmt: skip
CONFIGS = [
    pytest.param(dict(qk_norm="head"), id="qk-head"),
    pytest.param(dict(qk_norm="full"), id="qk-full"),
    pytest.param(dict(qk_norm="full", n_kv_heads=2, pos="rotary"), id="qk-full-gqa-rotary"),
    pytest.param(
        dict(qk_norm="head", n_kv_heads=2, pos="rotary", mlp="gated", act="silu", bias=False),
        id="qwen3-like",
    ),
    pytest.param(dict(block="post"), id="post"),
    pytest.param(OLMO_LIKE, id="olmo2-like"),
]


def noisy_params(cfg: ModelConfig, seed: int = 0, dtype=torch.float64) -> dict[str, torch.Tensor]:
    """Parameters with non-trivial gains (q/k and post norms included) and biases."""
    gen = torch.Generator().manual_seed(seed + 100)
    return {
        k: (v.double() + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)).to(dtype)
        for k, v in init_params(cfg, seed).items()
    }


def tokens(cfg: ModelConfig) -> torch.Tensor:
    return torch.randint(0, cfg.d_vocab, (3, cfg.n_ctx), generator=torch.Generator().manual_seed(1))


def dlogits(cfg: ModelConfig, a: dict, b: dict, cfg_b: ModelConfig | None = None) -> float:
    x = tokens(cfg)
    return float((forward(cfg, a, x) - forward(cfg_b or cfg, b, x)).abs().max())


def test_config_fields_round_trip_and_are_checked():
    cfg = ext_config(**OLMO_LIKE)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert {"qk_norm", "block"} <= set(cfg.to_dict())
    assert not {"qk_norm", "block"} & set(tiny_config("gpt").to_dict())  # old cache keys kept
    shapes = param_shapes(cfg)
    assert shapes["blocks.0.attn.q_norm.w"] == (4, 4) and shapes["blocks.0.attn.k_norm.w"] == (2, 4)
    assert "blocks.0.ln1_post.w" in shapes and "blocks.0.ln1.w" not in shapes
    assert param_shapes(ext_config(qk_norm="head"))["blocks.1.attn.k_norm.w"] == (4,)
    with pytest.raises(ValueError, match="qk_norm"):
        ext_config(qk_norm="rms")
    with pytest.raises(ValueError, match="needs attention"):
        tiny_config("mlp").replace(qk_norm="head")
    with pytest.raises(ValueError, match="needs norm 'rms'"):
        ext_config(block="post", norm="ln")


FORWARD_CASES = [
    *CONFIGS,
    pytest.param(dict(arch="vit", qk_norm="full", n_kv_heads=1), id="vit-qk-full"),
    pytest.param(dict(arch="vit", block="post", qk_norm="head"), id="vit-post-qk-head"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("changes", FORWARD_CASES)
def test_fast_and_reference_forwards_agree(monkeypatch, changes, dtype):
    from landscape.models import self_attention

    changes = dict(changes)
    arch = changes.pop("arch", "gpt")
    cfg = ext_config(**changes) if arch == "gpt" else tiny_config(arch).replace(**changes)
    params = noisy_params(cfg, dtype=dtype)
    x = tokens(cfg) if arch == "gpt" else tiny_inputs(cfg).to(dtype)
    reference = forward(cfg, params, x, fast=False)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    batched = torch.func.vmap(lambda p: forward(cfg, p, x))({k: v[None] for k, v in params.items()})
    assert torch.allclose(batched[0], reference, atol=tol)
    # attention by hand and by the fused kernel; the vit reads its class token, so its last
    # block computes the queries of that position alone
    for fused in (False, True):
        monkeypatch.setattr(self_attention, "_fused_attention_ok", lambda *_, f=fused: f)
        assert torch.allclose(forward(cfg, params, x, fast=True), reference, atol=tol)
    # every new gain is read: changing one moves the logits
    name = "blocks.0.attn.q_norm.w" if cfg.qk_norm != "none" else "blocks.0.ln2_post.w"
    moved = {**params, name: params[name] * 1.5}
    assert float((forward(cfg, moved, x, fast=False) - reference).abs().max()) > 1e-4


def test_qk_norm_is_rms_over_the_head_or_the_position():
    from landscape.models.primitives import qk_norm

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, 5, generator=gen, dtype=torch.float64)  # (batch, pos, heads, d_head)
    w_head, w_full = torch.rand(5, dtype=torch.float64), torch.rand(4, 5, dtype=torch.float64)
    for kind, w in (("head", w_head), ("full", w_full)):
        cfg = ext_config(qk_norm=kind, eps=1e-3)
        p = {"attn.q_norm.w": w}
        dims = (-1,) if kind == "head" else (-2, -1)
        expected = q / torch.sqrt(q.pow(2).mean(dims, keepdim=True) + 1e-3) * w
        for fused in (False, True):
            assert torch.allclose(qk_norm(cfg, p, "attn", "q", q, fused), expected, atol=1e-12)


@pytest.mark.parametrize("changes", CONFIGS)
def test_admitted_gauges_keep_the_logits(changes):
    cfg = ext_config(**changes)
    params = noisy_params(cfg)
    rows = symmetry_table(cfg, params)
    assert all(r["max_abs_dlogits"] < 1e-9 for r in rows if r["valid"]), rows
    groups = {r["group"] for r in rows}
    assert {"perm", "signed-perm"} <= groups
    qk_declared = cfg.qk_norm == "none"  # under RoPE and GQA too, restricted and shared
    assert ("qk" in groups) == qk_declared
    orth = next(r for r in rows if r["group"] == "orth")
    assert not orth["valid"] and orth["max_abs_dlogits"] > 1e-3
    if cfg.block == "post":  # the note names the norm; folding does not help
        assert "ln1_post" in orth["note"] and orth["needs"] == "not exact in any processing state"
        after = next(r for r in rows if r["group"] == "orth after fold_norm_gains")
        assert not after["valid"] and after["max_abs_dlogits"] > 1e-3
        assert not any(r["group"].startswith("semi-orth") for r in rows)
    else:  # a q/k norm leaves the residual groups alone
        assert next(r for r in rows if r["group"] == "orth after fold_norm_gains")["valid"]


@pytest.mark.parametrize("changes", [dict(qk_norm="full"), dict(qk_norm="full", n_kv_heads=2)],
                         ids=["mha", "gqa"])  # fmt: skip
def test_full_qk_norm_gains_move_with_their_heads(changes):
    cfg = ext_config(**changes)
    params = noisy_params(cfg)
    spec = spec_for(cfg)
    t = random_transform(spec, {v: PERM for v in spec.family("heads")}, 3)
    new = apply(spec, t, params)
    assert dlogits(cfg, params, new) < 1e-9
    perm = t.elements["heads0"].perm
    assert not torch.equal(perm, torch.arange(4))
    assert torch.equal(new["blocks.0.attn.q_norm.w"], params["blocks.0.attn.q_norm.w"][perm])
    group = cfg.n_heads // cfg.kv_heads
    kv_perm = perm[::group] // group  # the key gains follow their group
    assert torch.equal(new["blocks.0.attn.k_norm.w"], params["blocks.0.attn.k_norm.w"][kv_perm])
    # permuting the heads without their gains is not a symmetry
    unmoved = {**new, "blocks.0.attn.q_norm.w": params["blocks.0.attn.q_norm.w"]}
    assert dlogits(cfg, params, unmoved) > 1e-3


@pytest.mark.parametrize("kind", ["head", "full"])
def test_within_head_query_key_maps_do_not_pass_a_qk_norm(kind):
    # no positions in the head space: without the norm any invertible M cancels in q·kᵀ
    cfg, plain = ext_config(pos="none", qk_norm=kind), ext_config(pos="none")
    spec = spec_for(cfg)
    assert "qk0" not in spec.variables and "ov0" in spec.variables
    params = noisy_params(cfg)
    gen = torch.Generator().manual_seed(0)
    for m in (random_element("invertible", 4, gen).dense(), random_element(ORTH, 4, gen).dense()):
        moved = dict(params)
        moved["blocks.0.attn.W_Q"] = params["blocks.0.attn.W_Q"] @ m
        moved["blocks.0.attn.W_K"] = params["blocks.0.attn.W_K"] @ torch.linalg.inv(m).T
        moved["blocks.0.attn.b_Q"] = params["blocks.0.attn.b_Q"] @ m
        moved["blocks.0.attn.b_K"] = params["blocks.0.attn.b_K"] @ torch.linalg.inv(m).T
        no_norm = {k: v for k, v in params.items() if "_norm." not in k}
        moved_no_norm = {k: v for k, v in moved.items() if "_norm." not in k}
        assert dlogits(plain, no_norm, moved_no_norm) < 1e-9
        # the norm divides by ‖q‖, which M changes; a rotation cannot pass the gains either
        assert dlogits(cfg, params, moved) > 1e-3
    # the value/output maps have no norm: still exact
    assert dlogits(cfg, params, apply(spec, random_transform(spec, "ov", 0), params)) < 1e-9


def test_post_norm_gains_block_rotations_in_every_state():
    cfg = ext_config(**OLMO_LIKE)
    params = noisy_params(cfg)
    spec = spec_for(cfg)
    assert ORTH not in spec.variables["resid"].kinds
    assert spec.axes["blocks.0.ln1_post.w"][0].act == "|G|"
    # signed permutations: the RMS norm is odd and permutation-equivariant, gains by |G|
    t = random_transform(spec, "signed-perm", 1)
    new = apply(spec, t, params)
    assert dlogits(cfg, params, new) < 1e-9
    g = t.elements["resid"]
    assert torch.equal(new["blocks.1.ln2_post.w"], params["blocks.1.ln2_post.w"][g.perm])
    # rotations: refused by apply, by prepare and by the width change, naming the norm
    rot = random_transform(spec, "orth", 1)
    with pytest.raises(ValueError, match="ln1_post"):
        apply(spec, rot, params)
    with pytest.raises(ValueError, match="ln1_post"):
        prepare(cfg, params, "orth")
    cfg_f, folded = fold_norm_gains(cfg, params)
    assert "ln_final.w" not in folded and "blocks.0.ln1_post.w" in folded  # no reader takes it
    assert dlogits(cfg, params, folded, cfg_f) < 1e-9
    with pytest.raises(ValueError, match="ln1_post"):
        apply(spec_for(cfg_f), rot, folded)
    with pytest.raises(ValueError, match="ln1_post"):
        embed_width(cfg_f, folded, 24, 0)
    # ... and measured: the function changes, before and after folding
    assert dlogits(cfg, params, apply(spec, rot, params, check=False)) > 1e-3
    assert dlogits(cfg, params, apply(spec, rot, folded, check=False), cfg_f) > 1e-3


def test_post_norm_processing_keeps_the_function():
    cfg = ext_config(**OLMO_LIKE)
    params = noisy_params(cfg)
    for group in ("perm", "signed-perm"):  # nothing to do
        cfg2, p2 = prepare(cfg, params, group)
        assert cfg2 == cfg and p2.keys() == params.keys()
    # the post norm divides by d_norm too, so it scales with the stream: exact
    cfg3, p3 = rescale_norm(cfg, params, 24)
    assert dlogits(cfg, params, p3, cfg3) < 1e-9


@pytest.mark.parametrize("changes", [dict(qk_norm="head"), dict(block="post")], ids=["qk", "post"])
def test_planted_signed_permutation_is_recovered(changes):
    from landscape.matching import weight_matching

    cfg = ext_config(**changes, mlp="gated", act="silu")
    a = noisy_params(cfg)
    spec = spec_for(cfg)
    kinds = {"resid": SIGNED_PERM, **{v: PERM for v in spec.family("heads")},
             **{v: SIGNED_PERM for v in spec.family("mlp")}}  # fmt: skip
    b = apply(spec, random_transform(spec, kinds, 4), a)
    r = weight_matching(cfg, a, b, "signed-perm")
    assert max(float((r.params_a[k] - r.params_b[k]).abs().max()) for k in a) < 1e-6
    assert r.function_check < 1e-4


def test_a_head_permutation_splitting_full_norm_groups_is_refused():
    cfg = ext_config(qk_norm="full", n_kv_heads=2)
    params = noisy_params(cfg)
    spec = spec_for(cfg)
    bad = Transform({"heads0": Element(PERM, torch.tensor([0, 2, 1, 3]), torch.ones(4).double())})
    with pytest.raises(ValueError, match="key/value groups"):
        apply(spec, bad, params)


def test_qk_norm_has_no_circuit_form():
    with pytest.raises(LandscapeError, match="q/k norm"):
        check_circuit_form(ext_config(qk_norm="head"))
    check_circuit_form(ext_config(block="post"))  # the OV circuit is unaffected by a post norm
