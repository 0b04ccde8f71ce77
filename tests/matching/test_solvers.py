import numpy as np
import pytest
import torch

from landscape.matching.solvers import (
    head_cost,
    perm_matrix,
    solve,
    solve_grouped_perm,
    solve_heads,
    solve_orth,
    solve_perm,
    solve_semi_orth,
    solve_signed_perm,
    solve_signed_perm_naive,
)
from landscape.symmetry import random_element


def _data(n: int, samples: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(n, samples, generator=gen, dtype=torch.float64)  # (units, samples)


def _haar(n: int, gen: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def test_perm_matrix_convention(gen):
    perm = torch.randperm(6, generator=gen)
    b = torch.randn(6, generator=gen, dtype=torch.float64)
    m = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    p = perm_matrix(perm)
    assert torch.equal(p @ b, b[perm])
    assert torch.isclose(torch.trace(p.T @ m), m[torch.arange(6), perm].sum())


@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_solve_perm_recovers_planted(gen, as_numpy):
    a = _data(16, 200, gen)
    perm = torch.randperm(16, generator=gen)
    b = torch.empty_like(a)
    b[perm] = a  # B's unit perm[i] is A's unit i
    m = a @ b.T  # rows: A's units, columns: B's units
    got = solve_perm(m.numpy() if as_numpy else m)
    assert got.dtype == torch.long
    assert torch.equal(got, perm)
    assert torch.equal(b[got], a)


def test_solve_perm_rejects_rectangular():
    with pytest.raises(ValueError, match="square"):
        solve_perm(torch.zeros(3, 4))


def _planted_signed(gen: torch.Generator, n: int = 16):
    a = _data(n, 200, gen)
    perm = torch.randperm(n, generator=gen)
    signs = torch.ones(n, dtype=torch.float64)
    signs[torch.randperm(n, generator=gen)[: n // 2]] = -1.0
    b = torch.empty_like(a)
    b[perm] = signs[:, None] * a  # aligned coordinate i = signs[i] · b[perm[i]] = a[i]
    return a, b, perm, signs


def test_solve_signed_perm_recovers_planted(gen):
    a, b, perm, signs = _planted_signed(gen)
    got_perm, got_signs = solve_signed_perm(a @ b.T)
    assert torch.equal(got_perm, perm)
    assert torch.equal(got_signs, signs)
    assert torch.equal(got_signs[:, None] * b[got_perm], a)
    matrix = torch.diag(got_signs) @ perm_matrix(got_perm)
    assert torch.allclose(matrix @ b, a)


def test_naive_signed_solver_cannot_pair_flipped_coordinates(gen):
    a, b, perm, signs = _planted_signed(gen)
    got_perm, _ = solve_signed_perm_naive(a @ b.T)
    hit = got_perm == perm
    assert hit[signs > 0].all()  # unflipped coordinates are found
    assert not hit[signs < 0].any()  # flipped ones never: their entry is ≈ −‖a_i‖²
    assert hit.double().mean() == pytest.approx(0.5)


def test_signed_solver_zero_entry_gets_plus_sign():
    _, signs = solve_signed_perm(torch.zeros(3, 3))
    assert torch.equal(signs, torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_solve_orth_recovers_planted_rotation(gen, dtype):
    a = _data(12, 100, gen)
    g = _haar(12, gen)
    b = g.T @ a  # so that g @ b = a
    got = solve_orth((a @ b.T).to(dtype))
    assert got.dtype == torch.float64
    eye = torch.eye(12, dtype=torch.float64)
    assert (got.T @ got - eye).abs().max() < 1e-12
    assert (got @ got.T - eye).abs().max() < 1e-12
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    assert (got - g).abs().max() < tol


def test_solve_orth_of_permuted_data_is_the_permutation(gen):
    a = _data(8, 100, gen)
    perm = torch.randperm(8, generator=gen)
    b = torch.empty_like(a)
    b[perm] = a
    m = a @ b.T
    assert (solve_orth(m) - perm_matrix(perm)).abs().max() < 1e-10


def test_solve_semi_orth_recovers_planted_embedding(gen):
    d_a, d_b = 10, 6
    x = _haar(d_a, gen)[:, :d_b]  # orthonormal columns: B's 6-d stream inside A's 10-d one
    b = _data(d_b, 100, gen)
    a = x @ b
    got = solve_semi_orth(a @ b.T)  # [d_a, d_b]
    assert got.shape == (d_a, d_b)
    assert (got.T @ got - torch.eye(d_b, dtype=torch.float64)).abs().max() < 1e-12
    assert (got - x).abs().max() < 1e-10
    # the orientation of docs/design.md §1 (rows = B): G is d_B×d_A with G·Gᵀ = I
    g = solve_semi_orth(b @ a.T)
    assert g.shape == (d_b, d_a)
    assert (g @ g.T - torch.eye(d_b, dtype=torch.float64)).abs().max() < 1e-12
    assert (g - x.T).abs().max() < 1e-10


def test_solve_orth_rejects_rectangular():
    with pytest.raises(ValueError, match="square"):
        solve_orth(np.zeros((3, 4)))


def _heads(gen: torch.Generator, h: int = 4, d: int = 10, e: int = 3):
    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    return r(h, d, e), r(h, d, e), r(h, d, e), r(h, e, d)


def test_head_cost_matches_naive_dxd(gen):
    wq_a, wk_a, wv_a, wo_a = _heads(gen)
    wq_b, wk_b, wv_b, wo_b = _heads(gen)
    cost = head_cost(wq_a, wk_a, wv_a, wo_a, wq_b, wk_b, wv_b, wo_b)
    naive = torch.empty(4, 4, dtype=torch.float64)
    for i in range(4):
        for j in range(4):
            qk = wq_a[i] @ wk_a[i].T - wq_b[j] @ wk_b[j].T  # (d, d)
            ov = wv_a[i] @ wo_a[i] - wv_b[j] @ wo_b[j]
            naive[i, j] = (qk**2).sum() + (ov**2).sum()
    assert torch.allclose(cost, naive, rtol=1e-10, atol=1e-10)


def test_solve_heads_recovers_planted_perm_under_within_head_maps(gen):
    h, e = 4, 3
    wq, wk, wv, wo = _heads(gen, h=h, e=e)
    perm = torch.randperm(h, generator=gen)
    # B's head perm[i] is A's head i, up to invertible maps inside the head
    m = torch.randn(h, e, e, generator=gen, dtype=torch.float64) + 3 * torch.eye(e)
    n = torch.randn(h, e, e, generator=gen, dtype=torch.float64) + 3 * torch.eye(e)
    wq_b, wk_b, wv_b, wo_b = (torch.empty_like(w) for w in (wq, wk, wv, wo))
    wq_b[perm] = wq @ m
    wk_b[perm] = wk @ torch.linalg.inv(m).transpose(1, 2)
    wv_b[perm] = wv @ n
    wo_b[perm] = torch.linalg.inv(n) @ wo
    cost = head_cost(wq, wk, wv, wo, wq_b, wk_b, wv_b, wo_b)
    assert cost[torch.arange(h), perm].max() < 1e-9
    assert torch.equal(solve_heads(cost), perm)


@pytest.mark.parametrize("kind", ["perm", "signed-perm", "perm-global-sign", "orth", "orth-mean"])
def test_solve_dispatch_recovers_planted_element(gen, kind):
    """B = A·G: ``solve(kind, M)`` on ``M = X_Aᵀ X_B`` returns the element aligning B to A, G⁻¹."""
    n = 10
    g = random_element(kind, n, gen)
    x = _data(n, 200, gen).T  # (samples, units)
    m = x.T @ (x @ g.dense())  # similarity of A's units with B = A·G
    est = solve(kind, m)
    assert est.kind == kind
    assert torch.allclose(est.dense(), g.inverse().dense(), atol=1e-9)


def test_orth_mean_is_procrustes_over_the_rotations_fixing_1(gen):
    """``orth-mean``: G·1 = 1, orthogonal, and no element of the subgroup scores higher than
    the restricted Procrustes (while full O(d) generally does: the restriction is real)."""
    n = 9
    m = torch.randn(n, n, generator=gen, dtype=torch.float64)
    g = solve("orth-mean", m).dense()
    ones = torch.ones(n, dtype=torch.float64)
    assert torch.allclose(g @ g.T, torch.eye(n, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(g @ ones, ones, atol=1e-12)

    def score(x: torch.Tensor) -> float:  # the solver maximises tr(Xᵀ M) with X = Gᵀ
        return float((x * m).sum())

    best = score(g.T)
    for _ in range(200):
        other = random_element("orth-mean", n, gen).dense()
        assert score(other.T) <= best + 1e-12
    assert score(solve("orth", m).dense().T) > best + 1e-6


def test_solve_signs_option_is_the_matrix_solvers(gen):
    m = torch.randn(8, 8, generator=gen, dtype=torch.float64)
    for signs, solver in (("marginalised", solve_signed_perm), ("signed", solve_signed_perm_naive)):
        e = solve("signed-perm", m, signs=signs)
        perm, s = solver(m)
        assert torch.equal(e.perm, perm) and torch.equal(e.scale, s)
    with pytest.raises(ValueError, match="sign handling"):
        solve("signed-perm", m, signs="nonsense")


def test_solve_unsigned_scores_enter_outside_the_absolute_value(gen):
    """A norm-gain term only sees the permutation: it can outvote a sign-blind assignment."""
    m = -torch.eye(4, dtype=torch.float64)  # every coordinate flipped
    unsigned = 3 * torch.eye(4, dtype=torch.float64).flip(0)
    e = solve("signed-perm", m, unsigned=unsigned)
    assert torch.equal(e.perm, torch.arange(4).flip(0))  # |M| + U prefers the anti-diagonal
    assert solve("perm", m, unsigned=unsigned).perm.tolist() == [3, 2, 1, 0]


def test_solve_grouped_perm_moves_whole_blocks(gen):
    score = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    perm = solve_grouped_perm(score, 2)
    blocks = perm.view(3, 2) // 2
    assert bool((blocks == blocks[:, :1]).all())
    assert torch.equal(solve("perm", score, group=2).perm, perm)
