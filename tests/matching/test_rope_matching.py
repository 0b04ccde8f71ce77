"""Matching the within-head maps under rotary positions and grouped-query attention.

The QK maps of a rotary model are solved in the kind that commutes with RoPE (one complex
scaling per frequency pair, :func:`landscape.matching.within_heads.solve_rope_commuting`), one map
per key/value group; planted maps come back to round-off, and the solve is the global optimum
of its pair problems.
"""

from __future__ import annotations

import math

import pytest
import torch

from landscape.data import Split
from landscape.matching import weight_matching
from landscape.matching.activation import activation_matching
from landscape.matching.learned import learned_matching
from landscape.matching.within_heads import (
    MAX_COND,
    Factors,
    solve_within_heads,
    within_head_cost,
)
from landscape.models import ModelConfig, forward, init_params
from landscape.symmetry import (
    ROPE,
    apply,
    random_rope_commuting,
    random_transform,
    rope_commuting_error,
    spec_for,
)
from landscape.symmetry.processing import prepare
from tests.conftest import tiny_inputs

# d_vocab ≥ d_model: the stream's first visit sees a full-rank embedding (a rotary model has no
# W_pos to add rank)
BASE = dict(d_model=16, d_mlp=12, n_layers=2, n_out=20, n_heads=4, d_head=8, d_vocab=20, n_ctx=6)
CONFIGS = [
    pytest.param(dict(pos="rotary"), id="rope"),
    pytest.param(dict(pos="rotary", rotary_dim=4), id="rope-partial"),
    pytest.param(dict(pos="rotary", n_kv_heads=2), id="rope-gqa"),
    pytest.param(dict(pos="rotary", rotary_dim=4, n_kv_heads=2), id="rope-partial-gqa"),
    pytest.param(
        dict(pos="rotary", n_kv_heads=2, mlp="gated", bias=False, act="silu"), id="llama"
    ),  # fmt: skip
]


def _model(changes: dict, seed: int = 1) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """A tiny model processed for O(d) (gains folded), float64, parameters off their init."""
    cfg = ModelConfig("gpt", **BASE, **changes)
    gen = torch.Generator().manual_seed(seed + 100)
    params = {
        k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
        for k, v in init_params(cfg, seed, torch.float64).items()
    }
    return prepare(cfg, params, "orth")


def _gap(a: dict, b: dict) -> float:
    """max |θ_A − θ_B| over every parameter."""
    return max(float((a[k] - b[k].double()).abs().max()) for k in a)


def _pairs(h: int, rows: int, n: int, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(h, rows, n, generator=gen, dtype=torch.float64) for _ in range(2))


@pytest.mark.parametrize("rotary", [8, 4], ids=["full", "partial"])
@pytest.mark.parametrize("balanced", [False, True], ids=["unbalanced", "balanced"])
def test_solver_recovers_a_planted_map_to_round_off(rotary: int, balanced: bool) -> None:
    """X_B = X_A·M₀⁻¹, Y_B = Y_A·M₀ᵀ. ``balanced`` (Y_A = X_A) is where the squared stationarity
    polynomial has a double root at the answer; Newton on g′ still brings it to round-off."""
    xa, ya = _pairs(3, 9, 8, seed=0)
    ya = xa if balanced else ya
    gen = torch.Generator().manual_seed(1)
    m0 = torch.stack([3 * random_rope_commuting(8, rotary, gen) for _ in range(3)])
    m, cond = solve_within_heads(ROPE, Factors(xa, xa @ torch.linalg.inv(m0), ya, ya @ m0.mT),
                                 rotary=rotary)  # fmt: skip
    assert float((m - m0).abs().max() / m0.abs().max()) < 1e-12
    assert float(rope_commuting_error(m, rotary).max()) == 0.0
    assert torch.allclose(cond, torch.linalg.cond(m0), rtol=1e-9)


def test_solver_finds_the_global_optimum_of_each_pair() -> None:
    """Unrelated factors: each pair's scaling beats every point of a fine (ρ, θ) grid, and no
    change within the kind lowers the cost (the unrotated block is left to the invertible
    solver, tested elsewhere)."""
    xa, ya = _pairs(3, 9, 8, seed=2)
    xb, yb = _pairs(3, 9, 8, seed=3)
    m, _ = solve_within_heads(ROPE, Factors(xa, xb, ya, yb), rotary=8)
    f = within_head_cost(m, xa, xb, ya, yb)
    rho = torch.logspace(-2, 2, 401, dtype=torch.float64)
    theta = torch.linspace(-math.pi, math.pi, 361, dtype=torch.float64)
    w = (rho[:, None] * torch.exp(1j * theta[None, :])).reshape(-1)
    for pair in range(4):
        # the pair's columns as complex numbers, [H, rows]
        za, zb, wa, wb = (torch.complex(x[..., pair], x[..., pair + 4]) for x in (xa, xb, ya, yb))
        grid = (za[..., None] - zb[..., None] * w).abs().square().sum(1) + (
            wa[..., None] - wb[..., None] * w / w.abs().square()
        ).abs().square().sum(1)
        found = torch.complex(m[:, pair, pair], m[:, pair, pair + 4])
        own = (za - zb * found[:, None]).abs().square().sum(1) + (
            wa - wb * (found / found.abs().square())[:, None]
        ).abs().square().sum(1)
        assert bool((own <= grid.min(-1).values + 1e-9).all())
    gen = torch.Generator().manual_seed(4)
    for _ in range(200):  # small and large moves inside the kind: never lower
        d = 0.01 * random_rope_commuting(8, 8, gen) * torch.randn(1, generator=gen).item()
        assert bool((within_head_cost(m + d, xa, xb, ya, yb) >= f - 1e-9).all())


def test_solver_keeps_the_start_where_no_factor_sees_a_pair() -> None:
    """A pair whose factors of B are zero: every scaling costs the same, so the start stays,
    exactly (no round-off decides it), and the other pairs are solved."""
    xa, ya = _pairs(2, 9, 8, seed=5)
    gen = torch.Generator().manual_seed(6)
    m0 = torch.stack([random_rope_commuting(8, 8, gen) for _ in range(2)])
    xb, yb = xa @ torch.linalg.inv(m0), ya @ m0.mT
    xb[..., [1, 5]], yb[..., [1, 5]] = 0.0, 0.0
    start = torch.stack([random_rope_commuting(8, 8, gen) for _ in range(2)])
    m, _ = solve_within_heads(ROPE, Factors(xa, xb, ya, yb), start, rotary=8)
    block = [1, 5]
    assert torch.equal(m[:, block][:, :, block], start[:, block][:, :, block])
    rest = [0, 2, 3, 4, 6, 7]
    assert torch.allclose(m[:, rest][:, :, rest], m0[:, rest][:, :, rest], atol=1e-12)


def test_solver_solves_a_pair_seen_from_one_side_only() -> None:
    """Where B's query (or key) factors of a pair vanish, the other side alone fixes the
    scaling; the degree-6 polynomial loses its leading terms there, the answer stays exact."""
    xa, ya = _pairs(2, 9, 8, seed=9)
    gen = torch.Generator().manual_seed(10)
    m0 = torch.stack([random_rope_commuting(8, 8, gen) for _ in range(2)])
    xb, yb = xa @ torch.linalg.inv(m0), ya @ m0.mT
    xb[..., [0, 4]] = 0.0  # pair 0: keys only
    yb[..., [1, 5]] = 0.0  # pair 1: queries only
    m, _ = solve_within_heads(ROPE, Factors(xa, xb, ya, yb), rotary=8)
    assert float((m - m0).abs().max()) < 1e-12


def test_solver_answer_does_not_rest_on_round_off() -> None:
    xa, ya = _pairs(4, 9, 8, seed=7)
    xb, yb = _pairs(4, 9, 8, seed=8)
    ref, _ = solve_within_heads(ROPE, Factors(xa, xb, ya, yb), rotary=4)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        noisy = [t * (1 + 1e-14 * torch.randn(t.shape, generator=gen, dtype=torch.float64))
                 for t in (xa, xb, ya, yb)]  # fmt: skip
        m, _ = solve_within_heads(ROPE, Factors(*noisy), rotary=4)
        # the pairs' closed form moves by round-off; the unrotated block is the invertible
        # solver's, whose descent stops where a step changes the cost by round-off only, so
        # its map is fixed to about the square root of that (test_settles: 1e-6)
        assert float((m[:, :4, :4] - ref[:, :4, :4]).abs().max()) < 1e-12
        assert float((m[:, 4:, 4:] - ref[:, 4:, 4:]).abs().max()) < 1e-5
    # the scale of a pair stays within √MAX_COND of every other pair's
    scales = (ref[:, :2, :2].pow(2).sum(-1)).sqrt()
    assert bool((scales.amax(-1) / scales.amin(-1) <= MAX_COND**0.5).all())


@pytest.mark.parametrize("changes", CONFIGS)
def test_weight_matching_recovers_planted_rope_maps_to_round_off(changes: dict) -> None:
    """B = A under random QK maps commuting with RoPE (one per key/value group) and random OV
    maps: weight matching on the within-head levels brings B back onto A."""
    cfg, a = _model(changes)
    spec = spec_for(cfg)
    for group in ("qk", "ov"):
        planted = random_transform(spec, group, 3)
        assert set(planted.elements) == {f"{group}{layer}" for layer in range(cfg.n_layers)}
        r = weight_matching(cfg, a, apply(spec, planted, a), group)
        assert _gap(a, r.params_b) < 1e-10
        assert r.function_check < 1e-4
        for var, e in planted.elements.items():
            found = r.transform.elements[var]
            assert found.kind == spec.variables[var].widest
            eye = torch.eye(cfg.d_head, dtype=torch.float64)
            assert torch.allclose(found.matrix @ e.matrix, eye.expand_as(e.matrix), atol=1e-10)
            rep = spec.variables[var].group  # the heads of one key/value group: one map
            assert torch.equal(found.matrix[::rep].repeat_interleave(rep, 0), found.matrix)


@pytest.mark.parametrize("changes", CONFIGS)
def test_weight_matching_undoes_stream_heads_and_rope_maps_together(changes: dict) -> None:
    cfg, a = _model(changes)
    spec = spec_for(cfg)
    g = random_transform(spec, "orth", 4) @ random_transform(spec, "qk", 5)
    g = g @ random_transform(spec, "ov", 6)
    b = apply(spec, g, a)
    r = weight_matching(cfg, a, b, "orth")
    assert _gap(a, r.params_b) < 1e-8
    assert r.function_check < 1e-4
    kinds = {v: e.kind for v, e in r.transform.elements.items() if e.over is not None}
    assert kinds == {**{f"qk{i}": ROPE for i in range(2)}, **{f"ov{i}": "invertible"
                                                                for i in range(2)}}  # fmt: skip
    off = weight_matching(cfg, a, b, "orth", within_heads=False)
    assert _gap(a, off.params_b) > 0.1


def test_matching_independent_rotary_models_keeps_their_functions() -> None:
    cfg, a = _model(dict(pos="rotary", rotary_dim=4, n_kv_heads=2), seed=1)
    _, b = _model(dict(pos="rotary", rotary_dim=4, n_kv_heads=2), seed=2)
    on = weight_matching(cfg, a, b, "orth")
    off = weight_matching(cfg, a, b, "orth", within_heads=False)
    assert on.function_check < 1e-4 and on.objective[-1] < off.objective[-1]
    conds = on.info["within_heads_cond"]
    assert all(1 <= c < MAX_COND for cs in conds.values() for c in cs)
    for v in ("qk0", "qk1"):
        m = on.transform.elements[v].matrix
        assert float(rope_commuting_error(m, 4).max()) < 1e-12
        assert torch.equal(m[0::2], m[1::2])


def test_activation_matching_solves_the_rope_maps() -> None:
    cfg, a = _model(dict(pos="rotary", rotary_dim=4, n_kv_heads=2))
    spec = spec_for(cfg)
    g = random_transform(spec, "orth", 4) @ random_transform(spec, "qk", 5)
    b = apply(spec, g @ random_transform(spec, "ov", 6), a)
    x = tiny_inputs(cfg, batch=256, seed=3)
    r = activation_matching(cfg, a, b, "orth", x)
    assert r.function_check < 1e-4
    assert {r.transform.elements[v].kind for v in ("qk0", "qk1")} == {ROPE}
    assert _gap(a, r.params_b) < 1e-6


def test_learned_matching_keeps_the_rope_maps_of_its_start() -> None:
    """Learned matching learns the stream and the permutations; the within-head maps are weight
    matching's, carried with their heads, so they stay RoPE-commuting and shared per group."""
    cfg, a = _model(dict(pos="rotary", rotary_dim=4, n_kv_heads=2), seed=1)
    _, b = _model(dict(pos="rotary", rotary_dim=4, n_kv_heads=2), seed=2)
    x = tiny_inputs(cfg, batch=64, seed=4)
    with torch.no_grad():
        y = forward(cfg, a, x).argmax(-1)
    r = learned_matching(cfg, a, b, "orth", Split(x, y), steps=5, batch_size=32, lam="0.5")
    assert r.function_check < 1e-4
    for v in ("qk0", "qk1"):
        e = r.transform.elements[v]
        assert e.kind == ROPE and float(rope_commuting_error(e.matrix, 4).max()) < 1e-12
        assert torch.equal(e.matrix[0::2], e.matrix[1::2])
    apply(spec_for(cfg), r.transform, b)  # exact: the check accepts it
