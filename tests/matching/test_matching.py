"""Matching recovers planted transforms exactly, and never changes B's function."""

from __future__ import annotations

import json

import pytest
import torch

from landscape.matching import (
    MATCH_GROUPS,
    MatchContext,
    activation_matching,
    match,
    matching_kinds,
    naive,
    weight_distance,
    weight_matching,
)
from landscape.matching.activation import GAUGE_SWEEP
from landscape.matching.weight import weight_similarity
from landscape.models import ModelConfig, init_params
from landscape.symmetry import (
    RESID_GROUPS,
    Element,
    Transform,
    apply,
    group_kinds,
    random_transform,
    spec_for,
)
from landscape.symmetry.processing import prepare
from tests.conftest import tiny_config, tiny_inputs

ARCHS = ["mlp", "vit", "gpt"]
GROUPS = ["perm", "signed-perm", "orth", "orth-mean"]


def _model(arch: str, norm: str = "rms", seed: int = 1) -> tuple:
    """A tiny float64 model with non-trivial norm gains (and biases for LayerNorm)."""
    cfg = tiny_config(arch, norm)
    params = init_params(cfg, seed, torch.float64)
    gen = torch.Generator().manual_seed(seed + 100)
    for k, v in params.items():
        if k.endswith((".w", ".b")):
            params[k] = v + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
    return cfg, params


def _planted(arch: str, group: str, seed: int = 5, norm: str = "rms") -> tuple:
    """(cfg, A, B = g(A)) with A processed so that ``group`` is exact, g random in ``group``."""
    cfg, a = _model(arch, norm)
    cfg, a = prepare(cfg, a, group)
    spec = spec_for(cfg)
    return cfg, a, apply(spec, random_transform(spec, group, seed), a)


def _max_diff(a: dict, b: dict) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("group", GROUPS)
def test_weight_matching_recovers_planted_transform(arch: str, group: str) -> None:
    cfg, a, b = _planted(arch, group)
    r = weight_matching(cfg, a, b, group)
    assert _max_diff(r.params_a, r.params_b) < 1e-6
    assert r.function_check < 1e-4
    assert r.objective[-1] < 1e-20 and r.rounds <= 3


@pytest.mark.parametrize("arch", ARCHS)
def test_weight_matching_orth_on_layernorm_via_processing(arch: str) -> None:
    # a permutation with a global sign flip is exact on LayerNorm; O(d) needs the LN rewritten
    cfg, a = _model(arch, "ln")
    spec = spec_for(cfg)
    g = random_transform(spec, "perm-global-sign", 3)
    e = g.elements["resid"]
    g = Transform({**g.elements, "resid": Element(e.kind, e.perm, -e.scale.abs())})
    b = apply(spec, g, a)
    r = weight_matching(cfg, a, b, "orth")
    assert r.cfg.norm == "rms" and "blocks.0.ln2.w" not in r.params_a
    assert _max_diff(r.params_a, r.params_b) < 1e-6
    assert r.function_check < 1e-4


@pytest.mark.parametrize(
    "planted", [pytest.param("signed-perm", id="signed"), pytest.param("orth", id="rotated")]
)
@pytest.mark.parametrize("arch", ARCHS)
def test_smaller_group_cannot_undo_a_larger_one(arch: str, planted: str) -> None:
    cfg, a, b = _planted(arch, planted)
    r = weight_matching(cfg, a, b, "perm")
    assert _max_diff(r.params_a, r.params_b) > 1e-2
    assert r.function_check < 1e-4


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("group", ["perm", "signed-perm"])
def test_activation_matching_recovers_planted_permutations(arch: str, group: str) -> None:
    cfg, a, b = _planted(arch, group)
    r = activation_matching(cfg, a, b, group, tiny_inputs(cfg, batch=64))
    assert _max_diff(r.params_a, r.params_b) < 1e-6
    assert r.function_check < 1e-4


def test_activation_matching_orth_and_drop_first() -> None:
    cfg, a, b = _planted("gpt", "orth")
    r = activation_matching(cfg, a, b, "orth", tiny_inputs(cfg, batch=64), drop_first=True)
    assert _max_diff(r.params_a, r.params_b) < 1e-6
    assert r.info["drop_first"]


def test_weight_matching_improves_unrelated_models_and_keeps_function() -> None:
    cfg, a = _model("vit")
    _, b = _model("vit", seed=2)
    for group in GROUPS:
        r = weight_matching(cfg, a, b, group, context=MatchContext(seed=1))
        assert r.objective[-1] < r.objective[0]
        assert r.function_check < 1e-4
        g = r.resid_matrix()
        assert torch.allclose(g @ g.T, torch.eye(cfg.d_model, dtype=torch.float64), atol=1e-10)


def test_naive_and_match_entry() -> None:
    cfg, a = _model("mlp", "ln")
    _, b = _model("mlp", "ln", seed=2)
    r = naive(cfg, a, b, "orth")
    assert r.transform.elements == {} and r.cfg.norm == "rms"
    assert r.objective == [pytest.approx(weight_distance(r.params_a, r.params_b))]
    assert torch.equal(r.resid_matrix(), torch.eye(cfg.d_model, dtype=torch.float64))
    assert r.function_check < 1e-4
    m = match(cfg, a, b, "weight", "signed-perm")
    d = json.loads(m.to_json())
    assert d["method"] == "weight" and d["kinds"]["resid"] == "signed-perm"
    assert d["objective"] == m.objective
    with pytest.raises(ValueError, match="unknown matching method"):
        match(cfg, a, b, "magic", "perm")
    with pytest.raises(ValueError, match="needs a train_split"):
        match(cfg, a, b, "learned", "perm")
    with pytest.raises(ValueError, match="matching needs a group"):
        match(cfg, a, b, "weight", "scale")


def test_one_map_from_group_to_kinds() -> None:
    """Matching's kinds are the level's kinds, except signed gated units (``gated_signs``)."""
    assert MATCH_GROUPS == tuple(RESID_GROUPS)
    gated = ModelConfig("gpt", d_model=8, d_mlp=12, n_layers=2, n_out=7, n_heads=2, d_head=4,
                        d_vocab=7, n_ctx=6, mlp="gated", act="silu")  # fmt: skip
    for cfg in (tiny_config("gpt"), gated):
        spec = spec_for(cfg)
        for group in MATCH_GROUPS:
            assert matching_kinds(spec, group) == group_kinds(spec, group, gated_signs=True)
            plain = group_kinds(spec, group)
            assert set(plain.values()) - {"perm"} <= {RESID_GROUPS[group]}
    assert matching_kinds(spec_for(gated), "signed-perm")["mlp0"] == "signed-perm"
    assert matching_kinds(spec_for(tiny_config("gpt")), "signed-perm")["mlp0"] == "perm"


def test_weight_similarity_gains_option() -> None:
    """Norm gains enter as a separate unsigned score or not at all; the signed part is shared."""
    cfg, a = _model("gpt")
    _, b = _model("gpt", seed=2)
    spec = spec_for(cfg)
    m, m_abs = weight_similarity(spec, "resid", a, b)
    m2, none = weight_similarity(spec, "resid", a, b, gains="ignore")
    assert torch.equal(m, m2) and none is None
    gains = [k for k in a if spec.is_norm_param(k) and k.endswith(".w")]
    assert torch.allclose(m_abs, sum(torch.outer(a[k], b[k]) for k in gains))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("group", GROUPS)
def test_gauge_sweep_options_recover_planted_transform(arch: str, group: str) -> None:
    """The sweep's option set of activation matching also undoes a planted element exactly."""
    cfg, a, b = _planted(arch, group)
    r = activation_matching(cfg, a, b, group, tiny_inputs(cfg, batch=64), similarity=GAUGE_SWEEP)
    assert _max_diff(r.params_a, r.params_b) < 1e-6
