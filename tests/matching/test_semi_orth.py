"""Matching a narrower B: the semi-orthogonal solve, its equivalence with O(d) matching of the
embedded B, and a planted width change recovered exactly by weight matching."""

from __future__ import annotations

import pytest
import torch

from landscape.matching import weight_distance, weight_matching
from landscape.matching.result import function_check
from landscape.matching.solvers import solve
from landscape.models import init_params
from landscape.symmetry import (
    ORTH,
    SEMI_ORTH,
    Element,
    Transform,
    apply,
    random_semi_orthogonal,
    random_transform,
    spec_for,
)
from landscape.symmetry.processing import embed_width, prepare, rescale_norm
from tests.conftest import tiny_config

ARCHS = ["mlp", "vit", "gpt"]


def test_solve_semi_orth_recovers_a_planted_embedding(gen):
    d_a, d_b = 12, 5
    g = random_semi_orthogonal(d_b, d_a, gen)  # (d_b, d_a), G·Gᵀ = I
    w_b = torch.randn(40, d_b, generator=gen, dtype=torch.float64)  # writer rows of B
    w_a = w_b @ g  # A's writer: B's embedded, x ↦ x·G
    e = solve(SEMI_ORTH, w_a.T @ w_b)  # rows A, columns B
    assert e.kind == SEMI_ORTH and e.matrix.shape == (d_b, d_a)
    assert (e.matrix @ e.matrix.T - torch.eye(d_b, dtype=torch.float64)).abs().max() < 1e-12
    assert (e.matrix - g).abs().max() < 1e-10


def test_solve_semi_orth_refuses_a_narrowing(gen):
    with pytest.raises(ValueError, match="widens"):
        solve(SEMI_ORTH, torch.randn(4, 6, generator=gen, dtype=torch.float64))


def test_orthogonal_solve_of_the_embedded_similarity_is_the_semi_orthogonal_solve(gen):
    """G0·O(M·G0) = G(M): Procrustes over O(d) on the embedded B's similarity M·G0 is the thin-SVD
    solution of the rectangular M, whatever the embedding G0 (experiments/barriers/widths.py)."""
    d_a, d_b = 10, 4
    m = torch.randn(d_a, d_b, generator=gen, dtype=torch.float64)
    direct = solve(SEMI_ORTH, m).matrix
    for _ in range(3):
        g0 = random_semi_orthogonal(d_b, d_a, gen)
        o = solve(ORTH, m @ g0).matrix  # the element on the embedded stream
        assert (g0 @ o - direct).abs().max() < 1e-10


def _narrow(arch: str, seed: int = 1) -> tuple:
    """A tiny float64 RMSNorm model (width 8) with non-trivial gains."""
    cfg = tiny_config(arch)
    params = init_params(cfg, seed, torch.float64)
    gen = torch.Generator().manual_seed(seed + 100)
    for k, v in params.items():
        if k.endswith(".w"):
            params[k] = v + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
    return cfg, params


def _embedded(cfg, params, d: int, seed: int) -> tuple:
    cfg, params = prepare(cfg, params, "orth")
    return rescale_norm(*embed_width(cfg, params, d, seed), d)


@pytest.mark.parametrize("arch", ARCHS)
def test_weight_matching_recovers_a_planted_width_change(arch):
    """A = B embedded by one random G, then its units permuted (stream, FFN, heads); weight
    matching of B embedded by another G finds A exactly and keeps the narrow B's function."""
    cfg_b, b = _narrow(arch)
    cfg, a = _embedded(cfg_b, b, 16, seed=1)
    a = apply(spec_for(cfg), random_transform(spec_for(cfg), "perm", 7), a)
    cfg_e, b_emb = _embedded(cfg_b, b, 16, seed=2)
    assert cfg_e == cfg
    r = weight_matching(cfg, a, b_emb, "orth")
    assert weight_distance(r.params_a, r.params_b) < 1e-18 * weight_distance(a, b_emb)
    assert function_check(cfg_b, b, r.cfg, r.params_b) < 1e-4  # float32 forward of the check
    # on the narrow B the alignment is one semi-orthogonal element: the embedding, then O
    g0 = random_semi_orthogonal(8, 16, torch.Generator().manual_seed(2))  # embed_width's seed 2
    total = r.transform @ Transform({"resid": Element(SEMI_ORTH, matrix=g0)})
    assert total.elements["resid"].kind == SEMI_ORTH
    cfg_n, b_n = rescale_norm(*prepare(cfg_b, b, "orth"), 16)  # commutes with the embedding
    moved = apply(spec_for(cfg_n), total, b_n)  # checked: G·Gᵀ = I on the narrow stream
    assert max(float((moved[k] - r.params_b[k]).abs().max()) for k in moved) < 1e-9
