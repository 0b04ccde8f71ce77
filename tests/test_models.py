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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("arch", "changes"),
    [
        pytest.param("vit", {}, id="vit"),
        pytest.param("gpt", {}, id="gpt-causal"),
        pytest.param("gpt", dict(n_kv_heads=1, pos="rotary", attn_scale=0.3), id="gpt-gqa-rotary"),
    ],
)
def test_fused_and_hand_written_attention_agree(monkeypatch, arch, changes, dtype):
    import landscape.models as models

    cfg = tiny_config(arch).replace(**changes)
    params = init_params(cfg, 0, dtype)
    x = tiny_inputs(cfg)
    x = x.to(dtype) if x.is_floating_point() else x
    out = {}
    for fused in (False, True):
        monkeypatch.setattr(models, "_fused_attention_ok", lambda *_, f=fused: f)
        out[fused] = forward(cfg, params, x)
    assert torch.allclose(out[False], out[True], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vit_class_token_shortcut_keeps_logits(dtype):
    cfg = tiny_config("vit")
    params = init_params(cfg, 0, dtype)
    x = tiny_inputs(cfg).to(dtype)
    # with a cache the last block runs on every position
    assert torch.allclose(forward(cfg, params, x), forward(cfg, params, x, {}), atol=TOL[dtype])
