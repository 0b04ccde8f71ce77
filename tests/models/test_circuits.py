"""The circuit form of a transformer: the same function, heads as full QK and OV circuits."""

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig, forward, init_params
from landscape.models.circuits import circuit_form, circuit_forms, joint_width
from landscape.models.registry import random_inputs

GPT = dict(arch="gpt", d_model=16, d_mlp=32, n_layers=2, n_out=11, n_heads=4, d_head=4, n_ctx=8,
           d_vocab=11)  # fmt: skip
CONFIGS = {
    "gpt, biases, LayerNorm": ModelConfig(**GPT, norm="ln"),
    "gpt, no biases, grouped-query": ModelConfig(**GPT, bias=False, n_kv_heads=2),
    "gpt, own scale": ModelConfig(**GPT, attn_scale=0.3),
    "vit": ModelConfig(arch="vit", d_model=16, d_mlp=32, n_layers=2, n_out=10, n_heads=2,
                       d_head=8, image_size=8, patch_size=4),
}  # fmt: skip


def _perturbed(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Initial weights moved off zero biases and unit gains, so every term of a head counts."""
    gen = torch.Generator().manual_seed(seed)
    return {k: v + 0.2 * torch.randn(v.shape, generator=gen)
            for k, v in init_params(cfg, seed).items()}  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_circuit_form_keeps_the_function(name: str) -> None:
    cfg = CONFIGS[name]
    params = _perturbed(cfg, 0)
    cfg_c, circ = circuit_form(cfg, params)
    assert cfg_c.d_head == cfg.d_model + cfg.bias and cfg_c.kv_heads == 1
    x = random_inputs(cfg, 6, torch.Generator().manual_seed(1))
    ref = forward(cfg, params, x)
    assert (forward(cfg_c, circ, x) - ref).abs().max() < 1e-5 * ref.abs().max()
    # the non-attention parameters are the model's own
    assert all(circ[k] is v for k, v in params.items() if ".attn." not in k)


def test_the_circuit_line_averages_products_not_factors() -> None:
    """Midpoint of the circuit forms: its QK circuit is the mean of the two circuits, which the
    midpoint of the factors is not."""
    cfg = CONFIGS["gpt, biases, LayerNorm"]
    a, b = _perturbed(cfg, 0), _perturbed(cfg, 1)
    cfg_c, ca = circuit_form(cfg, a)
    _, cb = circuit_form(cfg, b)
    mid = {k: (ca[k] + cb[k]) / 2 for k in ca}
    _, c_mid_factors = circuit_form(cfg, {k: (a[k] + b[k]) / 2 for k in a})
    q = "blocks.0.attn.W_Q"
    assert torch.allclose(mid[q], (ca[q] + cb[q]) / 2)
    assert (c_mid_factors[q] - mid[q]).abs().max() > 1e-2


def test_circuit_form_is_differentiable() -> None:
    cfg = CONFIGS["vit"]
    params = {k: v.requires_grad_() for k, v in _perturbed(cfg, 0).items()}
    cfg_c, circ = circuit_form(cfg, params)
    x = random_inputs(cfg, 3, torch.Generator().manual_seed(2))
    forward(cfg_c, circ, x).sum().backward()
    assert params["blocks.1.attn.W_K"].grad.abs().sum() > 0


def test_models_without_a_circuit_form_are_refused() -> None:
    qk = ModelConfig(**GPT, pos="rotary", qk_norm="head")
    with pytest.raises(LandscapeError, match="q/k norm"):
        circuit_forms(qk, [init_params(qk, 0)] * 2)
    mlp = ModelConfig(arch="mlp", d_model=8, d_mlp=16, n_layers=1, n_out=3, d_in=5)
    with pytest.raises(LandscapeError, match="no"):
        circuit_form(mlp, init_params(mlp, 0))


@pytest.mark.parametrize("name", CONFIGS)
def test_circuit_check_is_made_in_float64(name: str) -> None:
    """The check of a rewrite measures the rewrite, not float32 rounding: exact to ~1e-12 on a
    float32 model, while a wrong rewrite (one head's circuit off by 1e-4) is still caught."""
    from landscape.matching.result import circuit_checks

    cfg = CONFIGS[name]
    a, b = _perturbed(cfg, 0), _perturbed(cfg, 1)
    assert max(circuit_checks([(cfg, a), (cfg, b)], cfg, [a, b])) < 1e-10
    wrong = dict(b)
    wrong["blocks.1.attn.W_Q"] = b["blocks.1.attn.W_Q"] * (1 + 1e-3)
    checks = circuit_checks([(cfg, a), (cfg, b)], cfg, [a, wrong])
    assert checks[0] < 1e-10 and checks[1] > 1e-6


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("name", CONFIGS)
def test_every_mixture_of_the_joint_form_is_the_mixture_of_the_circuits(name: str, n: int) -> None:
    """circuit_forms: each endpoint keeps its function, and a mixture of the rewritten endpoints
    computes what the same mixture of their circuit forms computes (float64), on either route
    (the joint form where n·d_head < d + 1, else the circuit form)."""
    cfg = CONFIGS[name]
    ends = [{k: v.double() for k, v in _perturbed(cfg, s).items()} for s in range(n)]
    cfg_j, forms = circuit_forms(cfg, ends)
    width = joint_width(cfg, n)
    assert cfg_j.d_head == (width if width is not None else cfg.d_model + cfg.bias)
    x = random_inputs(cfg, 5, torch.Generator().manual_seed(3))
    if x.is_floating_point():
        x = x.double()
    for p, f in zip(ends, forms, strict=True):
        ref = forward(cfg, p, x)
        assert (forward(cfg_j, f, x) - ref).abs().max() < 1e-10 * ref.abs().max()
    cfg_c, circ = circuit_form(cfg, ends[0])[0], [circuit_form(cfg, p)[1] for p in ends]
    gen = torch.Generator().manual_seed(4)
    for _ in range(3):
        w = torch.rand(n, generator=gen, dtype=torch.float64)
        w = w / w.sum()
        joint = {k: sum(wc * f[k] for wc, f in zip(w, forms, strict=True)) for k in forms[0]}
        mixed = {k: sum(wc * c[k] for wc, c in zip(w, circ, strict=True)) for k in circ[0]}
        ref = forward(cfg_c, mixed, x)
        assert (forward(cfg_j, joint, x) - ref).abs().max() < 1e-10 * ref.abs().max()


ROTARY = {
    "gpt, rotary": ModelConfig(**GPT, pos="rotary", bias=False),
    "gpt, partial rotary, grouped-query, biases": ModelConfig(**GPT, pos="rotary", rotary_dim=2,
                                                              n_kv_heads=2),
    "gpt, rotary base per layer": ModelConfig(**GPT, pos="rotary", bias=False,
                                              rotary_bases=(100.0, 10000.0)),
}  # fmt: skip


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("name", ROTARY)
def test_a_rotary_models_joint_form_mixes_its_circuits_at_every_offset(name: str, n: int) -> None:
    """A rotary model has no circuit form but a joint one: each endpoint keeps its function, and
    where the endpoints share W_Q and W_V (and their biases) the mixed circuits Σ w_c·Q R_Δ K_cᵀ
    are Q R_Δ (Σ w_c·K_c)ᵀ, and the OV ones V·Σ w_c·W_O,c: the joint mixture is then the mixture
    of the weights, a reference computed without the joint form."""
    cfg = ROTARY[name]
    with pytest.raises(LandscapeError, match="rotary"):
        circuit_form(cfg, init_params(cfg, 0))
    shared = {k: v for k, v in _perturbed(cfg, 9).items()
              if k.split(".")[-1] in ("W_Q", "W_V", "b_Q", "b_V")}  # fmt: skip
    ends = [{k: v.double() for k, v in {**_perturbed(cfg, s), **shared}.items()}
            for s in range(n)]  # fmt: skip
    cfg_j, forms = circuit_forms(cfg, ends)
    assert cfg_j.d_head == n * cfg.d_head and cfg_j.rotary_chunks == n
    assert cfg_j.rot_dim == cfg.rot_dim
    x = random_inputs(cfg, 5, torch.Generator().manual_seed(3))
    for p, f in zip(ends, forms, strict=True):
        ref = forward(cfg, p, x)
        assert (forward(cfg_j, f, x) - ref).abs().max() < 1e-10 * ref.abs().max()
    w = torch.rand(n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    w = w / w.sum()
    joint = {k: sum(wc * f[k] for wc, f in zip(w, forms, strict=True)) for k in forms[0]}
    weights = {k: sum(wc * p[k] for wc, p in zip(w, ends, strict=True)) for k in ends[0]}
    ref = forward(cfg, weights, x)
    assert (forward(cfg_j, joint, x) - ref).abs().max() < 1e-10 * ref.abs().max()
    # and with W_Q differing, the joint mixture is not the mixture of the weights
    other = {k: v.double() for k, v in _perturbed(cfg, 7).items()}
    cfg_j, (fa, fb) = circuit_forms(cfg, [ends[0], other])
    mid = forward(cfg_j, {k: (fa[k] + fb[k]) / 2 for k in fa}, x)
    plain = forward(cfg, {k: (ends[0][k] + other[k]) / 2 for k in other}, x)
    assert (mid - plain).abs().max() > 1e-3


def test_rotary_chunks_rotate_each_chunk_as_a_head() -> None:
    """Heads of two chunks rotated chunk by chunk equal twice the heads, each rotated alone."""
    from landscape.models.primitives import rotary

    cfg = ROTARY["gpt, partial rotary, grouped-query, biases"]
    x = torch.randn(2, 5, 3, 2 * cfg.d_head, generator=torch.Generator().manual_seed(0))
    chunked = rotary(cfg.replace(d_head=2 * cfg.d_head, rotary_chunks=2), x)
    alone = rotary(cfg, x.unflatten(-1, (2, cfg.d_head)).flatten(-3, -2))
    assert torch.equal(chunked, alone.unflatten(-2, (3, 2)).flatten(-2))
    with pytest.raises(ValueError, match="rotary_chunks"):
        cfg.replace(d_head=5, rotary_chunks=2)
    with pytest.raises(ValueError, match="rotary_chunks"):
        CONFIGS["vit"].replace(rotary_chunks=2)


def test_the_joint_form_is_taken_where_it_is_narrower() -> None:
    vit = CONFIGS["vit"]  # d = 16 with biases, d_head = 8: two endpoints 16 < 17, three 24
    assert joint_width(vit, 2) == 16 and joint_width(vit, 3) is None
    assert circuit_forms(vit, [_perturbed(vit, 0)] * 3)[0].d_head == 17
    gpt = CONFIGS["gpt, no biases, grouped-query"]  # d = 16, d_head = 4, two key/value heads
    cfg_j, _ = circuit_forms(gpt, [_perturbed(gpt, 0)] * 2)
    assert cfg_j.d_head == 8 and cfg_j.kv_heads == 2


def test_the_joint_form_is_differentiable() -> None:
    cfg = CONFIGS["gpt, biases, LayerNorm"]
    a = _perturbed(cfg, 0)
    b = {k: v.requires_grad_() for k, v in _perturbed(cfg, 1).items()}
    cfg_j, (fa, fb) = circuit_forms(cfg, [a, b])
    x = random_inputs(cfg, 3, torch.Generator().manual_seed(2))
    forward(cfg_j, {k: (fa[k] + fb[k]) / 2 for k in fa}, x).sum().backward()
    assert all(b[f"blocks.1.attn.{m}"].grad.abs().sum() > 0 for m in ("W_Q", "W_K", "W_O", "b_Q"))
