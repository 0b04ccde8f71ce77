import pytest
import torch

from landscape.models import count_params, forward, init_params, param_shapes
from tests.conftest import ARCH_NORMS, tiny_config, tiny_inputs


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_forward_shapes_and_param_count(arch_norm):
    cfg = tiny_config(*arch_norm)
    params = init_params(cfg, seed=0)
    assert {k: tuple(v.shape) for k, v in params.items()} == param_shapes(cfg)
    assert sum(v.numel() for v in params.values()) == count_params(cfg)
    logits = forward(cfg, params, tiny_inputs(cfg))
    expected = (4, cfg.n_out) if cfg.arch != "gpt" else (4, cfg.n_ctx, cfg.n_out)
    assert logits.shape == expected
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_batched_forward_over_stacked_params_matches_loop(arch_norm):
    cfg = tiny_config(*arch_norm)
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    x = tiny_inputs(cfg)
    stacked = {k: torch.stack([a[k], b[k]]) for k in a}
    batched = torch.func.vmap(lambda p: forward(cfg, p, x))(stacked)
    assert torch.allclose(batched[0], forward(cfg, a, x), atol=1e-6)
    assert torch.allclose(batched[1], forward(cfg, b, x), atol=1e-6)


def test_gpt_is_causal():
    cfg = tiny_config("gpt")
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg)
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % cfg.d_vocab
    assert torch.allclose(forward(cfg, params, x)[:, :-1], forward(cfg, params, y)[:, :-1])


def test_missing_norm_gain_means_one():
    cfg = tiny_config("vit")
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg)
    stripped = {k: v for k, v in params.items() if not k.endswith("ln2.w")}
    assert torch.equal(forward(cfg, params, x), forward(cfg, stripped, x))


DTYPES = [pytest.param(torch.float32, id="f32"), pytest.param(torch.float64, id="f64")]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
# Short contexts (attention by hand) and causal or long ones (the fused kernel), with the options
# of imported checkpoints; gains and biases are noisy so that every parameter matters.
INFERENCE_CASES = [
    pytest.param("mlp", {}, id="mlp"),
    pytest.param("mlp", dict(norm="ln", d_norm=6), id="mlp-ln"),
    pytest.param("vit", {}, id="vit"),
    pytest.param("vit", dict(norm="ln", n_kv_heads=1, attn_scale=0.3), id="vit-ln-gqa"),
    pytest.param("vit", dict(image_size=14, pos="rotary"), id="vit-50-positions-rotary"),
    pytest.param("gpt", {}, id="gpt"),
    pytest.param("gpt", dict(d_norm=6), id="gpt-narrow-rms"),
    pytest.param(
        "gpt",
        dict(n_kv_heads=1, pos="rotary", mlp="gated", act="silu", bias=False),
        id="gpt-llama-like",
    ),
]


def _case(arch, changes, dtype):
    cfg = tiny_config(arch).replace(**changes)
    gen = torch.Generator().manual_seed(5)
    params = {
        k: (v.double() + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)).to(dtype)
        for k, v in init_params(cfg, 0).items()
    }
    x = tiny_inputs(cfg)
    return cfg, params, (x.to(dtype) if x.is_floating_point() else x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("arch", "changes"), INFERENCE_CASES)
def test_inference_forward_matches_the_reference(monkeypatch, arch, changes, dtype):
    import landscape.models as models

    cfg, params, x = _case(arch, changes, dtype)
    reference = forward(cfg, params, x, {})  # a cache selects the reference forward
    batched = torch.func.vmap(lambda p: forward(cfg, p, x))({k: v[None] for k, v in params.items()})
    assert torch.allclose(batched[0], reference, atol=TOL[dtype])
    for fused in (False, True):  # attention by hand and through the fused kernel
        monkeypatch.setattr(models, "_fused_attention_ok", lambda *_, f=fused: f)
        assert torch.allclose(forward(cfg, params, x), reference, atol=TOL[dtype])


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_training_runs_the_reference_forward(arch):
    # the rounding the shipped checkpoints were trained with: bit for bit
    cfg, params, x = _case(arch, {}, torch.float32)
    trained = {k: v.clone().requires_grad_() for k, v in params.items()}
    assert torch.equal(forward(cfg, trained, x), forward(cfg, params, x, {}))
