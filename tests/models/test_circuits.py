"""The circuit form of a transformer: the same function, heads as full QK and OV circuits."""

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig, forward, init_params
from landscape.models.circuits import circuit_form
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
    rotary = ModelConfig(**GPT, pos="rotary")
    with pytest.raises(LandscapeError, match="rotary"):
        circuit_form(rotary, init_params(rotary, 0))
    mlp = ModelConfig(arch="mlp", d_model=8, d_mlp=16, n_layers=1, n_out=3, d_in=5)
    with pytest.raises(LandscapeError, match="no"):
        circuit_form(mlp, init_params(mlp, 0))


@pytest.mark.parametrize("name", CONFIGS)
def test_circuit_check_is_made_in_float64(name: str) -> None:
    """The check of a rewrite measures the rewrite, not float32 rounding: exact to ~1e-12 on a
    float32 model, while a wrong rewrite (one head's circuit off by 1e-4) is still caught."""
    from landscape.matching.result import circuit_check

    cfg = CONFIGS[name]
    params = _perturbed(cfg, 0)
    assert circuit_check(cfg, params, cfg, params) < 1e-10
    wrong = dict(params)
    wrong["blocks.1.attn.W_Q"] = params["blocks.1.attn.W_Q"] * (1 + 1e-3)
    assert circuit_check(cfg, params, cfg, wrong) > 1e-6
