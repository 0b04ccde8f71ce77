"""Within-head matching: the per-head invertible maps of QK (M, M⁻ᵀ) and OV (N, N⁻¹)."""

from __future__ import annotations

import pytest
import torch

from landscape.matching import MatchContext, match, weight_matching
from landscape.matching.weight import _follow_heads
from landscape.matching.within_heads import (
    MAX_COND,
    Factors,
    solve_within_heads,
    within_head_cost,
)
from landscape.models import ModelConfig, init_params
from landscape.symmetry import Transform, apply, random_element, random_transform, spec_for
from landscape.symmetry.processing import prepare
from tests.conftest import tiny_config

ARCHS = ["vit", "gpt"]


def _model(cfg: ModelConfig, seed: int = 1) -> dict[str, torch.Tensor]:
    """Float64 parameters with non-zero biases and non-trivial gains."""
    gen = torch.Generator().manual_seed(seed + 100)
    return {
        k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
        for k, v in init_params(cfg, seed, torch.float64).items()
    }


def _processed(arch: str, seed: int = 1) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """A tiny model processed for O(d) (gains folded), so every group below is exact on it."""
    return prepare(tiny_config(arch), _model(tiny_config(arch), seed), "orth")


def _gap(a: dict, b: dict) -> float:
    """‖θ_A − θ_B‖ relative to ‖θ_A‖."""
    num = sum(float((a[k] - b[k].double()).pow(2).sum()) for k in a)
    return (num / sum(float(v.pow(2).sum()) for v in a.values())) ** 0.5


def _factors(h: int, rows: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(h, rows, n, generator=gen, dtype=torch.float64) for _ in range(2))


def test_solver_recovers_a_planted_map_to_round_off() -> None:
    """B's factors are A's moved by M₀⁻¹ (X_B = X_A M₀⁻¹, Y_B = Y_A M₀ᵀ): M = M₀."""
    xa, ya = _factors(3, 9, 4, seed=0)
    gen = torch.Generator().manual_seed(1)
    m0 = torch.stack([random_element("invertible", 4, gen).dense() * 3 for _ in range(3)])
    planted = Factors(xa, xa @ torch.linalg.inv(m0), ya, ya @ m0.mT)
    m, cond = solve_within_heads("invertible", planted)
    assert float((m - m0).norm() / m0.norm()) < 1e-10
    assert torch.allclose(cond, torch.linalg.cond(m0))


def test_solver_on_unrelated_factors_is_stationary_and_no_worse_than_its_starts() -> None:
    """Neither least-squares start is optimal when both sides disagree; the refined map is a
    stationary point of the joint cost, no worse than the identity, and well conditioned."""
    xa, ya = _factors(4, 9, 4, seed=2)
    xb, yb = _factors(4, 9, 4, seed=3)
    m, cond = solve_within_heads("invertible", Factors(xa, xb, ya, yb), max_iter=500)
    f = within_head_cost(m, xa, xb, ya, yb)
    eye = torch.eye(4, dtype=torch.float64).expand(4, 4, 4)
    from_x = torch.linalg.pinv(xb) @ xa
    from_y = torch.linalg.inv(torch.linalg.pinv(yb) @ ya).mT
    for start in (eye, from_x, from_y):
        assert bool((f <= within_head_cost(start, xa, xb, ya, yb)).all())
    assert bool((f < within_head_cost(eye, xa, xb, ya, yb) - 1e-3).all())
    grad = m.clone().requires_grad_()
    within_head_cost(grad, xa, xb, ya, yb).sum().backward()
    assert float(grad.grad.norm()) < 1e-6 * float(xa.pow(2).sum() + ya.pow(2).sum())
    assert bool((cond < MAX_COND).all())
    # a given start is never made worse
    again, _ = solve_within_heads("invertible", Factors(xa, xb, ya, yb), m, max_iter=0)
    assert torch.equal(again, m)


def test_solver_orthogonal_kind_is_per_head_procrustes() -> None:
    xa, ya = _factors(2, 9, 4, seed=4)
    q = torch.linalg.qr(torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(5),
                                    dtype=torch.float64))[0]  # fmt: skip
    m, cond = solve_within_heads("orth", Factors(xa, xa @ q.mT, ya, ya @ q.mT))
    assert torch.allclose(m, q, atol=1e-12) and torch.allclose(cond, torch.ones(2, dtype=m.dtype))
    with pytest.raises(ValueError, match="no within-head solver"):
        solve_within_heads("perm", Factors(xa, xa, ya, ya))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("group", ["qk", "ov"])
def test_weight_matching_recovers_planted_within_head_maps(arch: str, group: str) -> None:
    """The group level alone: B = A moved by a random per-head map; the map is recovered."""
    cfg, a = _processed(arch)
    spec = spec_for(cfg)
    planted = random_transform(spec, group, 3)
    r = weight_matching(cfg, a, apply(spec, planted, a), group)
    assert _gap(a, r.params_b) < 1e-10
    for var, e in planted.elements.items():
        # the recovered map undoes the planted one: M_rec = M_planted⁻¹, head by head
        assert torch.allclose(r.transform.elements[var].matrix @ e.matrix,
                              torch.eye(cfg.d_head, dtype=torch.float64), atol=1e-9)  # fmt: skip
    assert set(r.info["within_heads_cond"]) == set(planted.elements)
    assert r.function_check < 1e-4
    assert match(cfg, a, apply(spec, planted, a), "weight", group).function_check < 1e-4


@pytest.mark.parametrize("arch", ARCHS)
def test_within_heads_undoes_residual_head_and_within_head_transforms(arch: str) -> None:
    """B = A under a random O(d) element (stream, FFN units, heads) composed with random QK and
    OV maps: only with ``within_heads`` does weight matching bring B back onto A."""
    cfg, a = _processed(arch)
    spec = spec_for(cfg)
    g = random_transform(spec, "orth", 4) @ random_transform(spec, "qk", 5)
    g = g @ random_transform(spec, "ov", 6)
    b = apply(spec, g, a)
    on = weight_matching(cfg, a, b, "orth", within_heads=True)
    assert _gap(a, on.params_b) < 1e-8
    assert on.function_check < 1e-4
    assert {e.kind for v, e in on.transform.elements.items() if v[:2] in ("qk", "ov")} == {
        "invertible"
    }
    off = weight_matching(cfg, a, b, "orth", within_heads=False)
    assert _gap(a, off.params_b) > 0.1
    assert not any(v.startswith(("qk", "ov")) for v in off.transform.elements)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("group", ["perm", "orth"])
def test_within_heads_on_independent_models_keeps_function(arch: str, group: str) -> None:
    """Two unrelated models: the maps are well conditioned, B's function is kept, and the
    factored weights come closer than with the head permutation alone."""
    cfg = tiny_config(arch, "ln")
    a, b = _model(cfg, 1), _model(cfg, 2)
    on = match(cfg, a, b, "weight", group, within_heads=True)
    off = match(cfg, a, b, "weight", group, within_heads=False)
    assert on.function_check < 1e-4 and on.function_check_a < 1e-4
    assert on.objective[-1] < off.objective[-1]
    conds = on.info["within_heads_cond"]
    assert set(conds) == {f"{f}{layer}" for f in ("qk", "ov") for layer in range(cfg.n_layers)}
    assert all(1 <= c < MAX_COND for cs in conds.values() for c in cs)


def test_within_heads_matches_the_maps_each_architecture_declares() -> None:
    """Grouped-query attention declares both maps, one per key/value group; rotary positions
    declare QK maps commuting with RoPE; a q/k norm declares only OV maps, and then only those
    are matched."""
    base = dict(d_model=16, d_mlp=12, n_layers=2, n_out=7, n_heads=4, d_head=4, d_vocab=7, n_ctx=6)
    every = {f"{f}{layer}" for f in ("qk", "ov") for layer in range(2)}
    gqa = ModelConfig("gpt", **base, n_kv_heads=2)
    r = weight_matching(gqa, _model(gqa, 1), _model(gqa, 2), "signed-perm", within_heads=True)
    assert set(r.info["within_heads_cond"]) == every and r.function_check < 1e-4
    for v in every:  # the two query heads of a group share one map
        m = r.transform.elements[v].matrix
        assert torch.equal(m[0::2], m[1::2]) and not torch.equal(m[0], m[2])
    rope = ModelConfig("gpt", **base, pos="rotary")
    r = weight_matching(rope, _model(rope, 1), _model(rope, 2), "orth", within_heads=True)
    assert set(r.info["within_heads_cond"]) == every
    assert {r.transform.elements[v].kind for v in ("qk0", "qk1")} == {"rope-commuting"}
    assert r.function_check < 1e-4
    normed = ModelConfig("gpt", **base, pos="rotary", qk_norm="head")
    r = weight_matching(normed, _model(normed, 1), _model(normed, 2), "orth", within_heads=True)
    assert set(r.info["within_heads_cond"]) == {"ov0", "ov1"}
    assert r.function_check < 1e-4


def test_planted_heads_and_maps_are_undone_in_any_visiting_order() -> None:
    """Head permutations planted together with QK maps (indexed by the permuted slots)."""
    cfg, a = _processed("gpt")
    spec = spec_for(cfg)
    g = random_transform(spec, {"heads0": "perm", "heads1": "perm"}, 7)
    b = apply(spec, g @ random_transform(spec, "qk", 8), a)
    for seed in range(3):
        r = weight_matching(cfg, a, b, "perm", within_heads=True, context=MatchContext(seed))
        assert _gap(a, r.params_b) < 1e-8


def test_within_head_maps_follow_their_heads() -> None:
    """When a head permutation changes, each B head keeps the map it had: slot i of the new
    permutation holds what slot ``old⁻¹[new[i]]`` held before."""
    cfg, a = _processed("gpt")
    spec = spec_for(cfg)
    old, new = (random_transform(spec, {"heads0": "perm"}, s).elements["heads0"] for s in (1, 2))
    maps = random_transform(spec, {"qk0": "invertible"}, 3).elements["qk0"]
    before = apply(spec, Transform({"heads0": old, "qk0": maps}), a)
    after = apply(spec, Transform({"heads0": new, "qk0": _follow_heads(maps, old, new)}), a)
    slots = torch.argsort(old.perm)[new.perm]
    assert not torch.equal(old.perm, new.perm)
    for name in ("W_Q", "b_Q", "W_K", "b_K"):
        w = f"blocks.0.attn.{name}"
        assert torch.allclose(after[w], before[w][slots], atol=1e-12)
    first = _follow_heads(maps, None, new)  # from the identity permutation
    assert torch.equal(first.matrix, maps.matrix[new.perm])


@pytest.mark.parametrize("arch", ARCHS)
def test_activation_matching_adds_the_within_head_maps(arch: str) -> None:
    """Activations cannot see a head's own maps; activation matching then solves them from the
    weights, so a copy moved by a rotation and random QK/OV maps comes back onto A."""
    from landscape.matching.activation import activation_matching
    from tests.conftest import tiny_inputs

    cfg, a = _processed(arch)
    spec = spec_for(cfg)
    g = random_transform(spec, "orth", 4) @ random_transform(spec, "qk", 5)
    b = apply(spec, g @ random_transform(spec, "ov", 6), a)
    x = tiny_inputs(cfg, batch=256, seed=3)
    on = activation_matching(cfg, a, b, "orth", x)
    off = activation_matching(cfg, a, b, "orth", x, within_heads=False)
    assert on.function_check < 1e-4 and set(on.info["within_heads_cond"]) >= {"qk0", "ov0"}
    assert _gap(a, on.params_b) < 1e-6 < 0.1 < _gap(a, off.params_b)


def test_a_looser_tolerance_stops_dense_matching_where_the_objective_settles() -> None:
    cfg = tiny_config("gpt")
    a, b = _model(cfg, 1), _model(cfg, 2)
    tight = weight_matching(cfg, a, b, "orth", max_rounds=40)
    loose = weight_matching(cfg, a, b, "orth", max_rounds=40, tol=1e-3)
    scale = sum(float(v.double().pow(2).sum()) for p in (a, b) for v in p.values())
    assert loose.rounds < tight.rounds
    # it stopped at a round whose improvement was within tol (and the rounds before it agree)
    drop = loose.objective[-2] - loose.objective[-1]
    assert 0 <= drop <= 1e-3 * scale
    assert loose.objective == pytest.approx(tight.objective[: loose.rounds + 1], rel=1e-9)
