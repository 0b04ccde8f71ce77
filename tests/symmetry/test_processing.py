"""Each weight-processing step and the width embedding leave logits unchanged."""

import pytest
import torch

from landscape.symmetry import apply, random_transform, spec_for
from landscape.symmetry.processing import (
    center_writers,
    embed_width,
    fold_norm_biases,
    fold_norm_gains,
    norm_state,
    prepare,
    process,
)
from tests.conftest import ARCH_NORMS
from tests.symmetry.test_symmetry import DTYPES, TOL, max_dlogits, trained_like

ARCHS = ["mlp", "vit", "gpt"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_fold_norm_biases_preserves_logits(arch, dtype):
    cfg, params = trained_like(arch, "ln", dtype)
    cfg2, folded = fold_norm_biases(cfg, params)
    assert not any(k.endswith((".ln1.b", ".ln2.b")) or k == "ln_final.b" for k in folded)
    assert max_dlogits(cfg, params, cfg2, folded, dtype) < TOL[dtype]
    state = norm_state(cfg2, folded)
    assert state.biases_folded and not state.gains_folded


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_fold_norm_gains_preserves_logits(arch_norm, dtype):
    cfg, params = trained_like(*arch_norm, dtype)
    cfg2, folded = fold_norm_gains(cfg, params)  # folds LayerNorm biases first
    assert not any(k.endswith((".w", ".b")) and spec_for(cfg).is_norm_param(k) for k in folded)
    assert max_dlogits(cfg, params, cfg2, folded, dtype) < TOL[dtype]
    assert norm_state(cfg2, folded).gains_folded


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_center_writers_turns_layernorm_into_rmsnorm(arch, dtype):
    cfg, params = trained_like(arch, "ln", dtype)
    assert not norm_state(cfg, params).centred
    cfg2, centred = center_writers(cfg, params)
    assert cfg2.norm == "rms" and cfg2.d_norm == cfg.d_model
    assert max_dlogits(cfg, params, cfg2, centred, dtype) < TOL[dtype]
    state = norm_state(cfg2, centred)
    assert state.centred and state.norm == "rms" and not state.gains_folded
    # the writers really changed: without centring, RMSNorm would give different logits
    assert max_dlogits(cfg, params, cfg2, params, dtype) > 1e-2


def test_center_writers_refuses_rmsnorm():
    cfg, params = trained_like("gpt", "rms")
    with pytest.raises(ValueError, match="already uses RMSNorm"):
        center_writers(cfg, params)


def test_steps_are_pure():
    cfg, params = trained_like("vit", "ln")
    before = {k: v.clone() for k, v in params.items()}
    process(cfg, params, ("fold_norm_biases", "fold_norm_gains", "center_writers"))
    assert params.keys() == before.keys()
    assert all(torch.equal(params[k], before[k]) for k in params)


@pytest.mark.parametrize(
    "norm,group,steps",
    [
        ("rms", "signed-perm", ()),
        ("rms", "orth", ("fold_norm_gains",)),
        ("ln", "perm-global-sign", ()),
        ("ln", "signed-perm", ("center_writers",)),
        ("ln", "orth", ("fold_norm_biases", "fold_norm_gains", "center_writers")),
    ],
    ids=lambda v: "+".join(v) if isinstance(v, tuple) else v,
)
def test_prepare_runs_only_the_needed_steps(norm, group, steps):
    cfg, params = trained_like("gpt", norm)
    cfg2, params2 = prepare(cfg, params, group)
    expected = process(cfg, params, steps)
    assert cfg2 == expected[0] and params2.keys() == expected[1].keys()
    assert max_dlogits(cfg, params, cfg2, params2, torch.float64) < 1e-9


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_embed_width_preserves_logits(arch_norm, dtype):
    cfg, params = trained_like(*arch_norm, dtype)
    cfg2, params2 = prepare(cfg, params, "orth")
    wide_cfg, wide = embed_width(cfg2, params2, d_new=13, seed=0)
    assert wide_cfg.d_model == 13 and wide_cfg.d_norm == cfg.d_model
    assert wide["unembed.W_U"].shape[0] == 13
    assert max_dlogits(cfg, params, wide_cfg, wide, dtype) < TOL[dtype]
    # the √d correction matters: dividing by the new width changes the function
    wrong = wide_cfg.replace(d_norm=13)
    assert max_dlogits(cfg, params, wrong, wide, dtype) > 1e-2
    # the wider stream admits its own rotations and signed permutations
    spec = spec_for(wide_cfg)
    for group in ("orth", "signed-perm"):
        moved = apply(spec, random_transform(spec, group, 1), wide)
        assert max_dlogits(cfg, params, wide_cfg, moved, dtype) < TOL[dtype]


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_embed_width_needs_folded_gains(arch_norm):
    cfg, params = trained_like(*arch_norm)
    with pytest.raises(ValueError, match="fold_norm_gains"):
        embed_width(cfg, params, d_new=12, seed=0)


def test_fold_norm_biases_on_a_bias_free_layernorm_model():
    import torch

    from landscape.models import forward, init_params
    from landscape.symmetry.processing import fold_norm_biases
    from tests.conftest import tiny_config, tiny_inputs

    cfg = tiny_config("gpt", norm="ln").replace(bias=False)
    gen = torch.Generator().manual_seed(1)
    params = {k: v + (0.3 * torch.randn(v.shape, generator=gen) if k.endswith(".b") else 0)
              for k, v in init_params(cfg, 0, torch.float64).items()}  # fmt: skip
    assert any(k.endswith("ln1.b") for k in params)
    cfg2, folded = fold_norm_biases(cfg, params)
    assert cfg2.bias and not any(k.endswith(("ln1.b", "ln2.b", "ln_final.b")) for k in folded)
    x = tiny_inputs(cfg)
    assert (forward(cfg, params, x) - forward(cfg2, folded, x)).abs().max() < 1e-9
