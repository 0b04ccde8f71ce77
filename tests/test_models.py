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
