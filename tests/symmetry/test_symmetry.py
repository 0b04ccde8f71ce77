"""Every random group element of a valid level leaves logits unchanged; invalid ones do not."""

import json

import pytest
import torch

from landscape.models import forward, init_params, param_shapes
from landscape.symmetry import (
    GLOBAL_SIGN,
    Element,
    Transform,
    apply,
    compose,
    identity,
    inverse,
    probe_inputs,
    random_transform,
    spec_for,
    symmetry_table,
)
from landscape.symmetry.processing import fold_norm_gains, prepare
from tests.conftest import ARCH_NORMS, tiny_config, tiny_inputs

TOL = {torch.float64: 1e-9, torch.float32: 1e-4}
DTYPES = [pytest.param(torch.float64, id="f64"), pytest.param(torch.float32, id="f32")]


def trained_like(arch: str, norm: str, dtype=torch.float64, act: str = "gelu", seed: int = 0):
    """A tiny model whose gains, norm biases and biases are far from their init values.

    Fresh unit gains and zero biases would make some invalid transforms exact by accident.
    """
    cfg = tiny_config(arch, norm, act)
    params = init_params(cfg, seed, torch.float64)
    gen = torch.Generator().manual_seed(seed + 100)
    out = {}
    for name, w in params.items():
        leaf = name.rsplit(".", 1)[1]
        if leaf == "w":
            w = w + 0.5 * torch.randn(w.shape, generator=gen, dtype=w.dtype)
        elif leaf == "b" or leaf.startswith("b_"):
            w = w + 0.3 * torch.randn(w.shape, generator=gen, dtype=w.dtype)
        out[name] = w.to(dtype)
    return cfg, out


def inputs(cfg, dtype):
    x = tiny_inputs(cfg)
    return x if cfg.arch == "gpt" else x.to(dtype)


def max_dlogits(cfg_a, params_a, cfg_b, params_b, dtype) -> float:
    x = inputs(cfg_a, dtype)
    return (forward(cfg_a, params_a, x) - forward(cfg_b, params_b, x)).abs().max().item()


def max_dparams(a, b) -> float:
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


# ----------------------------------------------------------------------------- the spec


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_spec_declares_every_axis_once(arch_norm):
    cfg = tiny_config(*arch_norm)
    spec = spec_for(cfg)
    for name, shape in param_shapes(cfg).items():
        roles = spec.axes[name]
        assert len(roles) == len(shape), name
        for size, role in zip(shape, roles, strict=True):
            if size == cfg.d_model:  # the residual gauge acts on every axis of size d_model
                assert role is not None and role.var == "resid", name
            if role is not None:
                assert spec.variables[role.var].size == size, (name, role)
    # the reverse map is derived: every declared role appears in exactly one touches() list
    n_roles = sum(r is not None for roles in spec.axes.values() for r in roles)
    assert sum(len(spec.touches(v)) for v in spec.variables) == n_roles
    writers = {n for n, _ in spec.writers}
    assert "unembed.W_U" not in writers and "blocks.0.mlp.W_out" in writers
    assert {n for n, _ in spec.readers} >= {"blocks.0.mlp.W_in", "unembed.W_U"}


# ----------------------------------------------------------------------------- valid levels


def _valid_cases():
    for arch_norm in ARCH_NORMS:
        arch, norm = arch_norm.values[0]
        groups = ["perm", "perm-global-sign", "signed-perm", "orth", "orth-mean"]
        if arch != "mlp":
            groups += ["qk", "ov"]
        for group in groups:
            for dt in DTYPES:
                yield pytest.param(
                    arch, norm, group, dt.values[0], id=f"{arch}-{norm}-{group}-{dt.id}"
                )


@pytest.mark.parametrize("arch,norm,group,dtype", list(_valid_cases()))
def test_valid_group_preserves_logits(arch, norm, group, dtype):
    cfg, params = trained_like(arch, norm, dtype)
    cfg2, params2 = prepare(cfg, params, group)  # the processing steps this level needs
    spec = spec_for(cfg2)
    for seed in range(2):
        moved = apply(spec, random_transform(spec, group, seed), params2)
        assert max_dlogits(cfg, params, cfg2, moved, dtype) < TOL[dtype]
        assert all(moved[k].dtype == dtype for k in moved)


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_global_sign_flip_is_exact_with_norm_biases_kept(arch_norm):
    # LayerNorm commutes with x ↦ −x; the norm bias flips with the stream, the gain does not
    cfg, params = trained_like(*arch_norm)
    spec = spec_for(cfg)
    n = cfg.d_model
    flip = Element(GLOBAL_SIGN, torch.randperm(n), -torch.ones(n, dtype=torch.float64))
    moved = apply(spec, Transform({"resid": flip}), params)
    assert max_dlogits(cfg, params, cfg, moved, torch.float64) < 1e-9
    assert torch.equal(moved["ln_final.w"], params["ln_final.w"][flip.perm])
    if cfg.norm == "ln":
        assert torch.equal(moved["ln_final.b"], -params["ln_final.b"][flip.perm])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
@pytest.mark.parametrize("kind", ["scale", "scaled-perm"])
def test_relu_positive_scaling_preserves_logits(arch, kind, dtype):
    cfg, params = trained_like(arch, "rms", dtype, act="relu")
    spec = spec_for(cfg)
    kinds = {v: kind for v in spec.family("mlp")}
    t = random_transform(spec, kinds, seed=0)
    moved = apply(spec, t, params)
    assert max_dlogits(cfg, params, cfg, moved, dtype) < TOL[dtype]
    assert max_dparams(params, moved) > 1e-2  # it did move the weights


# ----------------------------------------------------------------------------- invalid levels


INVALID = [
    pytest.param("rms", "orth", (), "fold_norm_gains", id="rms-orth-gains-kept"),
    pytest.param("ln", "signed-perm", (), "center_writers", id="ln-signed-perm"),
    pytest.param("ln", "orth", (), "fold_norm_gains and center_writers", id="ln-orth"),
    pytest.param("ln", "orth", ("fold",), "center_writers", id="ln-orth-gains-folded"),
]


@pytest.mark.parametrize("norm,group,steps,needs", INVALID)
@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_invalid_group_is_refused_and_changes_logits(arch, norm, group, steps, needs):
    cfg, params = trained_like(arch, norm)
    if "fold" in steps:
        cfg, params = fold_norm_gains(cfg, params)
    spec = spec_for(cfg)
    t = random_transform(spec, group, seed=0)
    with pytest.raises(ValueError, match=needs):
        apply(spec, t, params)
    moved = apply(spec, t, params, check=False)
    assert max_dlogits(cfg, params, cfg, moved, torch.float64) > 1e-2


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_positive_scaling_of_gelu_units_is_refused(arch):
    cfg, params = trained_like(arch, "rms")
    spec = spec_for(cfg)
    t = random_transform(spec, "scale", seed=0)
    with pytest.raises(ValueError, match="relu"):
        apply(spec, t, params)
    moved = apply(spec, t, params, check=False)
    assert max_dlogits(cfg, params, cfg, moved, torch.float64) > 1e-2


def test_element_that_is_not_its_kind_is_refused():
    cfg, params = trained_like("mlp", "rms")
    spec = spec_for(cfg)
    bad = Element("perm", torch.randperm(cfg.d_model), -torch.ones(cfg.d_model).double())
    with pytest.raises(ValueError, match="not a valid 'perm'"):
        apply(spec, Transform({"resid": bad}), params)
    with pytest.raises(KeyError):
        apply(spec, Transform({"resid9": bad}), params)


# ----------------------------------------------------------------------------- group laws


def _full_kinds(spec, resid_kind):
    """Every variable at once, the per-head maps included: exercises the wreath product."""
    kinds = {"resid": resid_kind}
    for v in spec.variables.values():
        if v.family in ("mlp", "heads"):
            kinds[v.name] = v.kinds[-1]
        elif v.family in ("qk", "ov"):
            kinds[v.name] = "invertible"
    return kinds


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_inverse_undoes_and_composition_matches_sequential_apply(arch_norm):
    arch, norm = arch_norm
    cfg, params = trained_like(arch, norm, act="relu")
    cfg, params = prepare(cfg, params, "orth")
    spec = spec_for(cfg)
    g, h, k = (random_transform(spec, _full_kinds(spec, "orth"), s) for s in range(3))
    g_params = apply(spec, g, params)
    assert max_dlogits(cfg, params, cfg, g_params, torch.float64) < 1e-9
    assert max_dparams(apply(spec, inverse(g), g_params), params) < 1e-12
    assert max_dparams(apply(spec, compose(inverse(g), g), params), params) < 1e-12
    assert max_dparams(apply(spec, compose(g, inverse(g)), params), params) < 1e-12
    sequential = apply(spec, g, apply(spec, h, params))
    assert max_dparams(apply(spec, g @ h, params), sequential) < 1e-12
    assert max_dparams(apply(spec, (g @ h) @ k, params), apply(spec, g @ (h @ k), params)) < 1e-12
    assert max_dparams(apply(spec, identity(), params), params) == 0


def test_compose_multiplies_matrices_along_the_axis():
    cfg, _ = trained_like("gpt", "rms")
    spec = spec_for(cfg)
    g, h = (random_transform(spec, "signed-perm", s) for s in (1, 2))
    gh = g @ h  # h first: along an axis, W·H·G
    assert torch.equal(gh.matrix("resid"), h.matrix("resid") @ g.matrix("resid"))
    m = g.matrix("resid")
    assert torch.equal(m.abs().sum(0), torch.ones(cfg.d_model, dtype=torch.float64))
    assert torch.allclose(inverse(g).matrix("resid"), m.T)


def test_apply_is_pure():
    cfg, params = trained_like("vit", "rms")
    before = {k: v.clone() for k, v in params.items()}
    spec = spec_for(cfg)
    moved = apply(spec, random_transform(spec, "signed-perm", 0), params)
    assert moved is not params
    assert all(torch.equal(params[k], before[k]) for k in params)


def test_random_transform_is_seeded():
    spec = spec_for(tiny_config("gpt"))
    a, b, c = (random_transform(spec, "orth", s) for s in (0, 0, 1))
    assert torch.equal(a.matrix("resid"), b.matrix("resid"))
    assert not torch.equal(a.matrix("resid"), c.matrix("resid"))


# ----------------------------------------------------------------------------- table


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_symmetry_table_measures_valid_and_invalid_levels(arch_norm):
    cfg, params = trained_like(*arch_norm)
    rows = symmetry_table(cfg, params, seed=0)
    json.dumps(rows)  # the CLI prints it as it is
    by_group = {r["group"]: r for r in rows}
    assert set(rows[0]) == {"group", "acts_on", "valid", "max_abs_dlogits", "needs", "note"}
    for r in rows:
        if r["valid"]:
            assert r["max_abs_dlogits"] < 1e-9 and r["needs"] == "", r
        else:
            assert r["max_abs_dlogits"] > 1e-2 and r["needs"], r
    # RMSNorm admits signed permutations as they are, LayerNorm does not
    assert by_group["signed-perm"]["valid"] == (cfg.norm == "rms")
    assert by_group["perm-global-sign"]["valid"]
    assert not by_group["orth"]["valid"]  # the gains are still per-channel
    assert any(r["group"].startswith("orth after") and r["valid"] for r in rows)
    assert ("qk" in by_group) == cfg.has_attn


def test_probe_inputs_caps_token_batches():
    """One probe builder: the table's whole-context float64 batch, and the capped one."""
    cfg = tiny_config("gpt").replace(n_ctx=64, d_vocab=50, n_out=50)
    assert probe_inputs(cfg).shape == (8, 64)
    x = probe_inputs(cfg, 16, max_tokens=32, max_logits=32 * 50 * 4)
    assert x.shape == (4, 32) and torch.equal(x, probe_inputs(cfg, 4, max_tokens=32))
    assert probe_inputs(cfg, 16, max_logits=1).shape[0] == 2  # never fewer than two windows
    mlp = tiny_config("mlp")
    assert probe_inputs(mlp).dtype == torch.float64
    assert probe_inputs(mlp, dtype=torch.float32, max_tokens=1).shape == (8, mlp.d_in)
