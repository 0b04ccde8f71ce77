"""Weight matching is a property of the pair, not of the machine that computed it.

Another CPU's kernels, another thread count or a GPU round every product differently, by about
1e-16 of its size. Nothing the descent decides may rest on differences that small: the null
space of a rank-deficient Procrustes, ties of an assignment, the acceptance of a within-head step.
Each test perturbs the inputs of a decision at that level and checks the answer stays.
"""

from __future__ import annotations

import pytest
import torch

import landscape.matching.weight as weight_module
from landscape.matching import weight_matching
from landscape.matching.solvers import solve, solve_orth, solve_perm
from landscape.models import ModelConfig, init_params


def _round_off(m: torch.Tensor, seed: int, size: float = 1e-14) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return m * (1 + size * torch.randn(m.shape, generator=g, dtype=torch.float64))


def test_procrustes_null_space_is_chosen_by_rule_not_by_round_off() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 5, generator=g, dtype=torch.float64)
    y = torch.randn(16, 5, generator=g, dtype=torch.float64)
    m = x @ y.T  # rank 5 of 16: eleven directions where every rotation is as good
    results = [solve_orth(_round_off(m, seed)) for seed in range(4)]
    for r in results:
        assert torch.allclose(r @ r.T, torch.eye(16, dtype=torch.float64), atol=1e-12)
        # still a maximiser: tr(Gᵀ M) is the nuclear norm
        nuclear = torch.linalg.svdvals(m).sum()
        assert torch.isclose((r * m).sum(), nuclear, rtol=1e-12)
    for r in results[1:]:
        assert (r - results[0]).abs().max() < 1e-8


def test_procrustes_of_nothing_is_the_identity() -> None:
    zero = torch.zeros(6, 6, dtype=torch.float64)
    assert torch.equal(solve_orth(zero), torch.eye(6, dtype=torch.float64))


def test_procrustes_null_space_goes_nearest_the_identity() -> None:
    # M acts on the first two coordinates only: the rest is left as it was
    m = torch.zeros(5, 5, dtype=torch.float64)
    m[:2, :2] = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    g = solve_orth(m)
    assert torch.allclose(g[:2, :2], m[:2, :2], atol=1e-12)
    assert torch.allclose(g[2:, 2:], torch.eye(3, dtype=torch.float64), atol=1e-12)


def test_tied_units_are_assigned_alike_whatever_the_round_off() -> None:
    g = torch.Generator().manual_seed(1)
    m = torch.randn(12, 12, generator=g, dtype=torch.float64)
    m[:, 7] = m[:, 3]  # B's units 3 and 7 are the same unit
    perms = {tuple(solve_perm(_round_off(m, seed)).tolist()) for seed in range(8)}
    assert len(perms) == 1


def _vit_pair(d_mlp: int = 24) -> tuple[ModelConfig, dict, dict]:
    # few embedding rows (patches of 4 pixels, 5 positions, 3 classes) for a stream of 16: the
    # first visit of the stream has a rank-deficient similarity, as the zoo's ViTs have
    cfg = ModelConfig("vit", d_model=16, d_mlp=d_mlp, n_layers=2, n_out=3, n_heads=2,
                      d_head=8, image_size=4, patch_size=2)  # fmt: skip
    return cfg, init_params(cfg, seed=0), init_params(cfg, seed=1)


@pytest.mark.parametrize("group", ["orth", "signed-perm"])
def test_weight_matching_gives_one_answer_under_round_off(group, monkeypatch) -> None:
    cfg, a, b = _vit_pair()
    reference = weight_matching(cfg, a, b, group, max_rounds=20)
    similarity = weight_module.weight_similarity

    def perturbed_by(seed: int):
        calls = iter(range(10**6))

        def perturbed(*args, **kw):
            m, m_abs = similarity(*args, **kw)
            return _round_off(m, 1000 * seed + next(calls)), m_abs

        return perturbed

    for seed in range(3):
        monkeypatch.setattr(weight_module, "weight_similarity", perturbed_by(seed))
        r = weight_matching(cfg, a, b, group, max_rounds=20)
        assert r.rounds == reference.rounds
        for var, e in reference.transform.elements.items():
            other = r.transform.elements[var]
            if e.is_monomial:
                assert torch.equal(e.perm, other.perm), var
                assert torch.equal(e.scale, other.scale), var
            else:
                assert (e.matrix - other.matrix).abs().max() < 1e-6, var
        assert r.objective[-1] == pytest.approx(reference.objective[-1], rel=1e-9)


def test_wide_assignments_solved_concurrently_give_the_sequential_answer(monkeypatch) -> None:
    cfg, a, b = _vit_pair(d_mlp=40)
    monkeypatch.setattr(weight_module, "CONCURRENT_SIZE", 10**9)
    sequential = weight_matching(cfg, a, b, "orth", max_rounds=6)
    monkeypatch.setattr(weight_module, "CONCURRENT_SIZE", 1)
    concurrent = weight_matching(cfg, a, b, "orth", max_rounds=6)
    assert concurrent.objective == sequential.objective
    for var, e in sequential.transform.elements.items():
        assert torch.equal(e.dense(), concurrent.transform.elements[var].dense()), var


def test_solve_keeps_the_element_where_the_similarity_is() -> None:
    m = torch.randn(5, 5, dtype=torch.float64)
    for kind in ("perm", "signed-perm", "orth"):
        e = solve(kind, m)
        assert (e.matrix if e.perm is None else e.perm).device == m.device
