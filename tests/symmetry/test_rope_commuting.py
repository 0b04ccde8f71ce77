"""Within-head maps under rotary positions and grouped-query attention.

Under RoPE the QK maps are the ones commuting with the rotation (a scaled rotation per frequency
pair in the model's half-split pairing, any invertible block on the unrotated dimensions); under
grouped-query attention one QK and one OV map serve a whole key/value group. Both keep every
logit; a map that mixes frequency pairs, uses another pairing, or differs inside a group does not.
"""

from __future__ import annotations

import math

import pytest
import torch

from landscape.models import ModelConfig, forward, init_params
from landscape.symmetry import (
    INVERTIBLE,
    ROPE,
    Element,
    Transform,
    apply,
    random_element,
    random_rope_commuting,
    random_transform,
    rope_commuting_error,
    spec_for,
    symmetry_table,
)
from tests.conftest import tiny_inputs

BASE = dict(d_model=16, d_mlp=12, n_layers=2, n_out=7, n_heads=4, d_head=8, d_vocab=7, n_ctx=6)
CONFIGS = [
    pytest.param(dict(pos="rotary"), id="rope"),
    pytest.param(dict(pos="rotary", rotary_dim=4), id="rope-partial"),
    pytest.param(dict(pos="rotary", n_kv_heads=2), id="rope-gqa"),
    pytest.param(
        dict(pos="rotary", rotary_dim=4, n_kv_heads=2, rotary_bases=(100.0, 10.0)),
        id="rope-partial-gqa-bases",
    ),  # fmt: skip
    pytest.param(
        dict(pos="rotary", n_kv_heads=1, mlp="gated", bias=False, act="silu"), id="llama-mqa"
    ),  # fmt: skip
    pytest.param(dict(n_kv_heads=2), id="gqa"),
]


def _model(changes: dict, seed: int = 1) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """A tiny model, float64, with every parameter moved off its initial value."""
    cfg = ModelConfig("gpt", **BASE, **changes)
    gen = torch.Generator().manual_seed(seed + 100)
    params = {
        k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
        for k, v in init_params(cfg, seed, torch.float64).items()
    }
    return cfg, params


def _dlogits(cfg: ModelConfig, a: dict, b: dict) -> float:
    x = tiny_inputs(cfg)
    return float((forward(cfg, a, x) - forward(cfg, b, x)).abs().max())


def _per_group(spec, maker, kind: str = INVERTIBLE) -> Transform:
    """One map per key/value group from ``maker(n)`` for every ``qk{l}``, repeated per head."""
    out = {}
    for name in spec.family("qk"):
        v = spec.variables[name]
        maps = spec.variables[v.over].size // v.group
        m = torch.stack([maker(v.size) for _ in range(maps)]).repeat_interleave(v.group, 0)
        out[name] = Element(kind, matrix=m, over=v.over)
    return Transform(out)


@pytest.mark.parametrize("changes", CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_random_within_head_maps_keep_the_logits(changes: dict, dtype: torch.dtype) -> None:
    cfg, params = _model(changes)
    params = {k: v.to(dtype) for k, v in params.items()}
    spec = spec_for(cfg)
    kind = ROPE if cfg.pos == "rotary" else INVERTIBLE
    assert spec.variables["qk0"].kinds[-1] == kind
    assert spec.variables["qk0"].rotary == cfg.rot_dim
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    for seed in range(3):
        g = random_transform(spec, "qk", seed) @ random_transform(spec, "ov", seed + 10)
        g = g @ random_transform(spec, "perm", seed + 20)
        assert _dlogits(cfg, params, apply(spec, g, params)) < tol
        for name in spec.family("qk"):
            m = g.elements[name].matrix
            if cfg.pos == "rotary":
                assert float(rope_commuting_error(m, cfg.rot_dim).max()) < 1e-12
            group = spec.variables[name].group  # one map per key/value group
            assert torch.equal(m.unflatten(0, (-1, group)), m[::group, None].expand_as(
                m.unflatten(0, (-1, group))))  # fmt: skip


@pytest.mark.parametrize("changes", CONFIGS[:5])
def test_a_map_mixing_frequency_pairs_changes_the_logits_and_is_refused(changes: dict) -> None:
    cfg, params = _model(changes)
    spec = spec_for(cfg)
    gen = torch.Generator().manual_seed(0)
    mixing = _per_group(spec, lambda n: random_element(INVERTIBLE, n, gen).dense())
    assert _dlogits(cfg, params, apply(spec, mixing, params, check=False)) > 1e-3
    with pytest.raises(ValueError, match="admits kinds"):
        apply(spec, mixing, params)
    # labelled rope-commuting but mixing: the structure check refuses it
    mixing = Transform({k: Element(ROPE, matrix=e.matrix, over=e.over)
                        for k, e in mixing.elements.items()})  # fmt: skip
    with pytest.raises(ValueError, match="does not commute with the rotary positions"):
        apply(spec, mixing, params)


def test_the_pairing_is_the_models_half_split_one() -> None:
    """A scaled rotation of the interleaved pairs (2i, 2i + 1) is no symmetry of a model whose
    RoPE pairs i with i + r/2; the same blocks on the half-split pairs are."""
    cfg, params = _model(dict(pos="rotary"))
    spec = spec_for(cfg)
    c, s = 1.3 * math.cos(0.7), 1.3 * math.sin(0.7)

    def blocks(pairs: list[tuple[int, int]]) -> torch.Tensor:
        m = torch.eye(cfg.d_head, dtype=torch.float64)
        for i, j in pairs:
            m[i, i], m[j, j], m[i, j], m[j, i] = c, c, s, -s
        return m

    half = cfg.d_head // 2
    half_split = _per_group(spec, lambda n: blocks([(i, i + half) for i in range(half)]), ROPE)
    interleaved = _per_group(spec, lambda n: blocks([(2 * i, 2 * i + 1) for i in range(half)]),
                             ROPE)  # fmt: skip
    assert _dlogits(cfg, params, apply(spec, half_split, params)) < 1e-9
    assert _dlogits(cfg, params, apply(spec, interleaved, params, check=False)) > 1e-3
    with pytest.raises(ValueError, match="does not commute"):
        apply(spec, interleaved, params)


@pytest.mark.parametrize("family", ["qk", "ov"])
def test_maps_differing_inside_a_key_value_group_are_refused(family: str) -> None:
    cfg, params = _model(dict(pos="rotary", n_kv_heads=2, rotary_dim=4))
    spec = spec_for(cfg)
    g = random_transform(spec, family, 0)
    name = f"{family}0"
    e = g.elements[name]
    m = e.matrix.clone()
    m[1] = random_transform(spec, family, 1).elements[name].matrix[0]  # head 1 ≠ head 0
    split = Transform({**g.elements, name: Element(e.kind, matrix=m, over=e.over)})
    with pytest.raises(ValueError, match="one map per key/value group"):
        apply(spec, split, params)
    assert _dlogits(cfg, params, apply(spec, split, params, check=False)) > 1e-3


def test_rope_commuting_maps_form_a_group() -> None:
    """Products and inverses stay in the kind, and apply(g ∘ h) = apply(g, apply(h))."""
    cfg, params = _model(dict(pos="rotary", rotary_dim=4, n_kv_heads=2))
    spec = spec_for(cfg)
    g, h = random_transform(spec, "qk", 1), random_transform(spec, "qk", 2)
    both = apply(spec, g @ h, params)
    twice = apply(spec, g, apply(spec, h, params))
    assert max(float((both[k] - twice[k]).abs().max()) for k in both) < 1e-12
    back = apply(spec, g.inverse(), apply(spec, g, params))
    assert max(float((back[k] - params[k]).abs().max()) for k in back) < 1e-12
    assert {e.kind for e in (g @ h).elements.values()} == {ROPE}
    gen = torch.Generator().manual_seed(3)
    m = random_rope_commuting(8, 4, gen)
    assert float(rope_commuting_error(m @ random_rope_commuting(8, 4, gen), 4)) < 1e-15
    assert float(rope_commuting_error(torch.linalg.inv(m), 4)) < 1e-14


@pytest.mark.parametrize("changes", CONFIGS[:5])
def test_symmetry_table_shows_rope_maps_exact_and_mixing_maps_not(changes: dict) -> None:
    cfg, params = _model(changes)
    rows = {r["group"]: r for r in symmetry_table(cfg, params)}
    qk = rows["qk"]
    assert qk["valid"] and qk["max_abs_dlogits"] < 1e-9
    assert "scaled rotation per rotary frequency pair" in qk["acts_on"]
    assert ("unrotated" in qk["acts_on"]) == (cfg.rot_dim < cfg.d_head)
    assert ("key/value group" in qk["acts_on"]) == (cfg.kv_heads < cfg.n_heads)
    mixing = rows["qk (general invertible M)"]
    assert not mixing["valid"] and mixing["max_abs_dlogits"] > 1e-3
    assert mixing["needs"] == "not exact with rotary positions"
    assert rows["ov"]["valid"] and rows["ov"]["max_abs_dlogits"] < 1e-9


def test_q_k_norms_still_block_the_query_key_maps() -> None:
    cfg, params = _model(dict(pos="rotary", qk_norm="head"))
    spec = spec_for(cfg)
    assert not spec.family("qk") and spec.family("ov")
    rows = {r["group"] for r in symmetry_table(cfg, params)}
    assert "qk" not in rows and "ov" in rows


@pytest.mark.parametrize("changes", [
    pytest.param(dict(n_kv_heads=2), id="gqa"),
    pytest.param(dict(pos="rotary", n_kv_heads=1, mlp="gated", bias=False, act="silu"),
                 id="llama-mqa"),
    pytest.param(dict(pos="rotary", n_kv_heads=2, qk_norm="full"), id="gqa-full-qk-norm"),
])  # fmt: skip
def test_grouped_query_attention_written_as_multi_head_keeps_every_logit(changes):
    from landscape.symmetry.processing import expand_kv_heads

    cfg, params = _model(changes)
    wide_cfg, wide = expand_kv_heads(cfg, params)
    assert wide_cfg.kv_heads == wide_cfg.n_heads == cfg.n_heads
    assert wide["blocks.0.attn.W_K"].shape[0] == cfg.n_heads
    x = tiny_inputs(cfg)
    assert float((forward(cfg, params, x) - forward(wide_cfg, wide, x)).abs().max()) < 1e-12
    if cfg.qk_norm != "none":  # no within-head QK maps at all there
        return
    # the copies are free: a per-head QK map (one that differs inside a group) is now exact
    spec = spec_for(wide_cfg)
    assert spec.variables["qk0"].group == 1
    t = random_transform(spec, {v: spec.variables[v].kinds[0] for v in spec.family("qk")}, 3)
    moved = apply(spec, t, wide)
    assert float((forward(wide_cfg, wide, x) - forward(wide_cfg, moved, x)).abs().max()) < 1e-9
