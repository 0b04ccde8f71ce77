"""The √d correction written into the weights: ``rescale_norm`` keeps logits, and after
``embed_width`` it turns a narrow model into one of the wider configuration."""

import pytest
import torch

from landscape.symmetry import apply, random_transform, spec_for
from landscape.symmetry.processing import embed_width, prepare, rescale_norm
from tests.symmetry.test_symmetry import DTYPES, TOL, max_dlogits, trained_like

ARCHS = ["mlp", "vit", "gpt"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("gains", ["kept", "folded"])
def test_rescale_norm_preserves_logits(arch, dtype, gains):
    cfg, params = trained_like(arch, "rms", dtype)
    if gains == "folded":
        cfg, params = prepare(cfg, params, "orth")
    for d_norm in (3, 32):
        cfg2, params2 = rescale_norm(cfg, params, d_norm)
        assert cfg2.d_norm == d_norm and cfg2.d_model == cfg.d_model
        assert max_dlogits(cfg, params, cfg2, params2, dtype) < TOL[dtype]
        # the weights really changed: the old ones under the new constant are another function
        assert max_dlogits(cfg, params, cfg2, params, dtype) > 1e-3


def test_rescale_norm_keeps_a_norm_bias_exact():
    """A norm bias (left by center_writers on a LayerNorm model) scales with the stream."""
    cfg, params = trained_like("gpt", "ln")
    cfg, params = prepare(cfg, params, "signed-perm")  # centred: RMSNorm with biases kept
    assert any(k.endswith("ln1.b") for k in params)
    cfg2, params2 = rescale_norm(cfg, params, 20)
    assert max_dlogits(cfg, params, cfg2, params2, torch.float64) < 1e-9


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_embedded_model_has_the_wide_config(arch, dtype):
    cfg, params = trained_like(arch, "rms", dtype)
    cfg_p, params_p = prepare(cfg, params, "orth")
    wide_cfg, wide = rescale_norm(*embed_width(cfg_p, params_p, 16, seed=3), 16)
    assert wide_cfg == cfg.replace(d_model=16, d_norm=0)  # a model trained at width 16
    assert max_dlogits(cfg, params, wide_cfg, wide, dtype) < TOL[dtype]
    # and it admits the wider model's rotations
    spec = spec_for(wide_cfg)
    moved = apply(spec, random_transform(spec, "orth", 1), wide)
    assert max_dlogits(cfg, params, wide_cfg, moved, dtype) < TOL[dtype]


def test_rescale_norm_refuses_layernorm_and_nonsense():
    cfg, params = trained_like("vit", "ln")
    with pytest.raises(ValueError, match="center_writers"):
        rescale_norm(cfg, params, 16)
    cfg, params = trained_like("vit", "rms")
    with pytest.raises(ValueError, match="positive"):
        rescale_norm(cfg, params, 0)
    same_cfg, same = rescale_norm(cfg, params, cfg.d_norm)
    assert same_cfg == cfg and all(torch.equal(same[k], params[k]) for k in params)
