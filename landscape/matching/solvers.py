"""Solvers that turn a similarity matrix into a group element (docs/design.md §1).

Every solver is a pure function of one matrix; building the matrix (weight or activation
cross-products) is the matching loop's job. :func:`solve` is the one dispatch from a variable's
kind to its solver and returns a :class:`landscape.symmetry.Element`; weight, activation and
learned matching and the gauge sweep all call it.

**Orientation.** Rows of ``M`` index A's units (the target slots), columns index B's units:
``M[i, j]`` is the similarity of A's unit i with B's unit j, e.g. ``M = W_Aᵀ W_B`` for weights
whose unit axis is the last one, or the cross-correlation of activations. Each solver returns
the element ``X`` (of M's shape) that maximises ``tr(Xᵀ M)`` over its group, and X maps B's
coordinates into A's: a column vector ``b`` in B's coordinates becomes ``X @ b``; a matrix whose
last axis is B's units (a writer, ``W`` row vectors) becomes ``W @ Xᵀ``.

- Permutations: ``perm[i] = j`` means B's unit j goes to A's slot i; the aligned B is
  ``B.index_select(axis, perm)`` and ``perm_matrix(perm) = P`` with ``P[i, perm[i]] = 1``, so
  ``P @ b = b[perm]`` and ``tr(Pᵀ M) = Σ_i M[i, perm[i]]``.
- Signed permutations: aligned coordinate i is ``signs[i] · b[perm[i]]``; the matrix form is
  ``diag(signs) @ P``.
- Orthogonal: ``G = U Vᵀ`` for ``M = U Σ Vᵀ``; ``aligned b = G @ b``.
- Within-head maps are the exception (``landscape.matching.within_heads``): their objective is
  not linear in the element (it holds both M and M⁻ᵀ), so they take the stacked factors, not one
  matrix, and return the spec's per-head matrices directly.

The residual gauge of docs/design.md §1 multiplies writers on the right (``W ← W·G``), so
its G is the transpose of X here; equivalently, pass ``Mᵀ`` (rows = B, columns = A) and use
the result as is.
Numpy or torch in; torch out, on the input's device (CPU for numpy). Assignment runs on the CPU
in float64 (on scores rounded to :data:`ASSIGN_GRID`, so ties are broken alike everywhere);
orthogonal solutions are computed and returned in float64 (cast back outside, docs/design.md §4).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from landscape.symmetry import (
    GLOBAL_SIGN,
    ORTH,
    ORTH_MEAN,
    PERM,
    SEMI_ORTH,
    SIGNED_PERM,
    Element,
    fix_mean,
    mean_free_part,
)

Matrix = torch.Tensor | np.ndarray
# How a signed permutation is assigned: on |M| with signs from the picks (exact for B_n), or on
# the signed M (the signed-correlation baseline that cannot pair a flipped coordinate).
Signs = Literal["marginalised", "signed"]
SIGNS: tuple[Signs, ...] = ("marginalised", "signed")
# Singular values of a similarity below this fraction of the largest are its null space (exact
# zeros of the data, which round-off leaves at ~1e-16 of the largest; measured similarities keep
# theirs above ~1e-5): the solution there is chosen by rule, not by round-off (solve_semi_orth).
NULL_RANK = 1e-10
# Assignment scores are rounded to this fraction of their largest entry before the solver sees
# them, so that entries equal up to round-off (tied units: dead, duplicated, zero) are exactly
# equal on every machine and the tie is broken by index, not by the last bit of a product.
ASSIGN_GRID = 2.0**-40


def _as_tensor(m: Matrix) -> torch.Tensor:
    t = torch.as_tensor(m)
    if t.ndim != 2:
        raise ValueError(f"expected a 2-d matrix, got shape {tuple(t.shape)}")
    return t


def _assign(score: torch.Tensor, maximize: bool) -> torch.Tensor:
    """Column chosen for each row by linear assignment on a square score matrix."""
    if score.shape[0] != score.shape[1]:
        raise ValueError(f"assignment needs a square matrix, got {tuple(score.shape)}")
    s = score.detach().to("cpu", torch.float64).numpy()
    if not np.isfinite(s).all():
        raise ValueError("similarity matrix has non-finite entries")
    top = float(np.abs(s).max()) if s.size else 0.0
    if top > 0:  # ties up to round-off become exact ties, broken by index (ASSIGN_GRID)
        # a power of two: the grid does not move with the last bit of the largest entry
        q = 2.0 ** (math.frexp(top)[1] - 1) * ASSIGN_GRID
        s = np.round(s / q) * q
    rows, cols = linear_sum_assignment(s, maximize=maximize)
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols
    return torch.from_numpy(perm).to(score.device)


def perm_matrix(perm: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """P with ``P[i, perm[i]] = 1``: ``P @ b = b[perm]`` and ``tr(PᵀM) = Σ_i M[i, perm[i]]``."""
    perm = torch.as_tensor(perm)
    n = perm.shape[0]
    p = torch.zeros(n, n, dtype=dtype, device=perm.device)
    p[torch.arange(n, device=perm.device), perm] = 1
    return p


def solve_perm(m: Matrix) -> torch.Tensor:
    """Permutation maximising ``tr(Pᵀ M) = Σ_i M[i, π(i)]`` (linear assignment, Hungarian-type).

    Returns ``perm`` (long, [n]) with ``perm[i] = j``: B's unit j goes to A's slot i.
    """
    return _assign(_as_tensor(m), maximize=True)


def solve_signed_perm(
    m: Matrix, unsigned: Matrix | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sign-marginalised signed permutation (the hyperoctahedral group B_n = S_n ⋉ {±1}^n).

    ``max over (π, s) of Σ_i s_i M[i, π(i)]``: for any π the best signs are
    ``s_i = sign(M[i, π(i)])``, which turns the objective into ``Σ_i |M[i, π(i)]|``. So π is the
    assignment on ``|M|`` and then ``s_i = sign(M[i, π(i)])`` (a zero entry gets +1). This is
    exact for B_n; it pairs a flipped coordinate (correlation ≈ −1) with its partner.
    ``unsigned`` (e.g. norm-gain cross-products, which see the permutation but never a sign) is
    added to the assignment score outside the absolute value: ``Σ_i |M| + U``.

    Returns ``(perm, signs)``: aligned coordinate i is ``signs[i] · b[perm[i]]``; matrix form
    ``diag(signs) @ perm_matrix(perm)``. Signs are float64.
    """
    t = _as_tensor(m)
    score = t.abs() if unsigned is None else t.abs() + _as_tensor(unsigned)
    perm = _assign(score, maximize=True)
    picked = t.to(torch.float64)[torch.arange(t.shape[0], device=t.device), perm]
    signs = torch.where(picked < 0, -1.0, 1.0).to(torch.float64)
    return perm, signs


def solve_signed_perm_naive(
    m: Matrix, unsigned: Matrix | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Signed-correlation baseline: π maximises ``Σ_i M[i, π(i)]`` (signed, plus ``unsigned``
    when given), then signs from the chosen entries, ``s_i = sign(M[i, π(i)])``.

    The assignment itself cannot see that a −1 entry is a perfect (flipped) match, so flipped
    coordinates are paired with something else; kept to reproduce the ~50% plateau of
    docs/design.md §1, "Coordinate transport". Same return convention as ``solve_signed_perm``.
    """
    t = _as_tensor(m)
    perm = _assign(t if unsigned is None else t + _as_tensor(unsigned), maximize=True)
    picked = t.to(torch.float64)[torch.arange(t.shape[0], device=t.device), perm]
    signs = torch.where(picked < 0, -1.0, 1.0).to(torch.float64)
    return perm, signs


def solve_semi_orth(m: Matrix) -> torch.Tensor:
    """Polar factor of a possibly rectangular M: ``G = U Vᵀ`` from the thin SVD ``M = U Σ Vᵀ``.

    ``G`` has M's shape [m, n] and maximises ``tr(Gᵀ M)`` over matrices with orthonormal rows
    (m ≤ n, ``G Gᵀ = I_m``) or orthonormal columns (m ≥ n, ``Gᵀ G = I_n``): by von Neumann's
    trace inequality ``tr(Gᵀ M) ≤ Σ σ_k``, attained at ``U Vᵀ``. For a width change with
    d_B < d_A, pass M as [d_B, d_A] (rows = B, the orientation of docs/design.md §1) to get its
    ``G`` (d_B×d_A, ``G·Gᵀ = I``) directly. Computed and returned in float64.

    **Rank-deficient M.** Where M has singular values below :data:`NULL_RANK` of the largest,
    every ``G = U_r V_rᵀ + U₀ Q V₀ᵀ`` (Q orthogonal on the null spaces U₀, V₀) is a maximiser,
    and the SVD's choice of Q is round-off: another CPU's kernels, another thread count or a GPU
    pick another rotation there (the first visit of a ViT's stream sees only its embeddings,
    rank 86 of 128, and the descent then went to answers 8% apart in barrier). There Q is
    the one nearest the identity, ``argmax_Q tr(Gᵀ I) = polar(U₀ᵀ I V₀)``, which depends on the
    null spaces only, not on the bases the SVD returned: a result of M, not of the machine.
    """
    t = _as_tensor(m).to(torch.float64)
    u, s, vh = torch.linalg.svd(t, full_matrices=False)
    g = u @ vh
    rank = int((s > NULL_RANK * s[0]).sum()) if s.numel() and float(s[0]) > 0 else 0
    if rank < s.numel():
        u0, v0 = u[:, rank:], vh[rank:].mT
        eye = torch.eye(t.shape[0], t.shape[1], dtype=t.dtype, device=t.device)
        a, _, bh = torch.linalg.svd(u0.mT @ eye @ v0)
        g = u[:, :rank] @ vh[:rank] + u0 @ (a @ bh) @ v0.mT
    return g


def solve_orth(m: Matrix) -> torch.Tensor:
    """Orthogonal Procrustes: ``G = argmax_{G ∈ O(n)} tr(Gᵀ M) = U Vᵀ`` for ``M = U Σ Vᵀ``.

    With rows = A and columns = B (module convention) G maps B's coordinates to A's,
    ``aligned b = G @ b``; with ``M = W_Aᵀ W_B`` it minimises ``‖W_A − W_B Gᵀ‖_F``. G may be a
    reflection (det −1); O(n), not SO(n). float64 in and out (SVD in float64, docs/design.md §4).
    """
    t = _as_tensor(m)
    if t.shape[0] != t.shape[1]:
        raise ValueError(f"solve_orth needs a square matrix, got {tuple(t.shape)}")
    return solve_semi_orth(t)


def head_cost(
    wq_a: torch.Tensor,
    wk_a: torch.Tensor,
    wv_a: torch.Tensor,
    wo_a: torch.Tensor,
    wq_b: torch.Tensor,
    wk_b: torch.Tensor,
    wv_b: torch.Tensor,
    wo_b: torch.Tensor,
) -> torch.Tensor:
    """Cost of pairing A's head i with B's head j, for every pair: [H_A, H_B], float64.

    ``C[i, j] = ‖Q^A_i K^A_iᵀ − Q^B_j K^B_jᵀ‖² + ‖V^A_i O^A_i − V^B_j O^B_j‖²`` (Frobenius),
    with ``W_Q/W_K/W_V`` [H, d_model, d_head] and ``W_O`` [H, d_head, d_model]. The QK and OV
    circuits are invariant to the within-head maps (Q·M, K·M⁻ᵀ; V·N, N⁻¹·O), so this cost is too.

    Never forms a d×d matrix: ``‖A_i − B_j‖² = ‖A_i‖² + ‖B_j‖² − 2 tr(A_iᵀ B_j)`` and, by the
    cyclic trace,

        tr((Q_a K_aᵀ)ᵀ Q_b K_bᵀ) = tr((Q_aᵀ Q_b)(K_bᵀ K_a)) = Σ_pq (Q_aᵀ Q_b)_pq (K_aᵀ K_b)_pq
        tr((V_a O_a)ᵀ V_b O_b)   = tr((V_aᵀ V_b)(O_b O_aᵀ)) = Σ_pq (V_aᵀ V_b)_pq (O_a O_bᵀ)_pq

    so everything is d_head×d_head Gram blocks: O(H² d_head² d) time, O(H² d_head²) memory.
    """

    def f64(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.float64)

    def gram(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # x [H_a, d, e], y [H_b, d, f] → [H_a, H_b, e, f] with blocks x_iᵀ y_j
        return torch.einsum("ide,jdf->ijef", f64(x), f64(y))

    ot_a, ot_b = wo_a.transpose(1, 2), wo_b.transpose(1, 2)  # [H, d_model, d_head]

    def self_norm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # ‖x_i y_iᵀ‖² = Σ_pq (x_iᵀ x_i)_pq (y_iᵀ y_i)_pq, per head: [H]
        gx = torch.einsum("ide,idf->ief", f64(x), f64(x))
        gy = torch.einsum("ide,idf->ief", f64(y), f64(y))
        return (gx * gy).sum((-1, -2))

    def circuit_cost(x_a, y_a, x_b, y_b) -> torch.Tensor:
        # ‖x_a y_aᵀ − x_b y_bᵀ‖² for every head pair, x and y as [H, d_model, d_head]
        cross = (gram(x_a, x_b) * gram(y_a, y_b)).sum((-1, -2))
        return self_norm(x_a, y_a)[:, None] + self_norm(x_b, y_b)[None, :] - 2 * cross

    cost = circuit_cost(wq_a, wk_a, wq_b, wk_b) + circuit_cost(wv_a, ot_a, wv_b, ot_b)
    return cost.clamp_min(0.0)  # cancellation can leave tiny negatives for identical heads


def solve_heads(cost: Matrix) -> torch.Tensor:
    """Head permutation minimising ``Σ_i cost[i, π(i)]`` (rows = A's heads, columns = B's).

    Same convention as ``solve_perm``: ``perm[i] = j`` puts B's head j into A's slot i.
    """
    return _assign(_as_tensor(cost), maximize=False)


def solve_grouped_perm(score: Matrix, group: int) -> torch.Tensor:
    """Permutation maximising ``Σ_i score[i, π(i)]`` that moves blocks of ``group`` slots.

    Grouped-query heads (S_r ≀ S_{n/r}): block I of A and block J of B score the best assignment
    of their r query heads to each other; the blocks are then assigned on those scores, and each
    chosen pair of blocks keeps its inner assignment. Exact optimum over the wreath product.
    """
    if group == 1:
        return solve_perm(score)
    score = _as_tensor(score)
    nb = score.shape[0] // group
    inner: dict[tuple[int, int], torch.Tensor] = {}
    block = torch.empty(nb, nb, dtype=torch.float64)
    for i in range(nb):
        for j in range(nb):
            sub = score[i * group : (i + 1) * group, j * group : (j + 1) * group]
            inner[i, j] = solve_perm(sub)
            block[i, j] = sub[torch.arange(group), inner[i, j]].sum()
    blocks = solve_perm(block)
    return torch.cat([int(j) * group + inner[i, int(j)] for i, j in enumerate(blocks)])


def solve(
    kind: str,
    m: torch.Tensor,
    *,
    unsigned: torch.Tensor | None = None,
    signs: Signs = "marginalised",
    group: int = 1,
) -> Element:
    """The element of ``kind`` aligning B to A from a similarity ``M`` (rows A, columns B).

    Maximises ``Σ_i s_i M[i, π(i)] + U[i, π(i)]`` over the kind's group, with ``U = unsigned``
    (axes acted on by |G| or P(G), norm gains and gated-FFN gates: they see the permutation, not
    the signs) and returns it in the spec's orientation, ``G[π(i), i] = s_i`` (writers
    ``W ← W·G``):

    - ``perm``: linear assignment on ``M + U``; with ``group`` > 1 moving blocks of that many
      slots (:func:`solve_grouped_perm`, grouped-query heads);
    - ``signed-perm``: ``signs="marginalised"`` assigns on ``|M| + U`` and takes
      ``s_i = sign M[i, π(i)]`` (exact for B_d); ``"signed"`` assigns on the signed ``M + U``
      (the baseline of the gauge sweep's recovery curves);
    - ``perm-global-sign``: the better of the assignments on ``±M + U``, one sign for all;
    - ``orth``: Procrustes on M (``U`` unused: gains are folded first); the solver's ``X = UVᵀ``
      maps column vectors, so the element acting on row vectors is ``Xᵀ``;
    - ``orth-mean``: the same Procrustes restricted to rotations fixing the mean direction
      ``1/√n``: M restricted to the complement of 1 on both sides
      (:func:`landscape.symmetry.mean_free_part`), solved there in dimension n − 1 and embedded
      back with 1 fixed (:func:`landscape.symmetry.fix_mean`). ``tr(XᵀM)`` splits into the
      fixed ``(HMH)[0, 0]`` and the complement's term, so this is the maximiser over the
      subgroup;
    - ``semi-orth``: a narrower B (width change): M is [d_A, d_B] with d_A ≥ d_B and
      ``X = UVᵀ`` of its thin SVD (:func:`solve_semi_orth`, orthonormal columns); the element is
      ``G = Xᵀ`` (d_B × d_A, ``G·Gᵀ = I``), which embeds B's stream into A's, ``x ↦ x·G``.

    Learned matching projects a latent Z (already in the spec's orientation, ``Z ≈ G``) by
    passing ``M = Zᵀ``. The element lives on M's device: the orthogonal solve runs there, an
    assignment on the CPU (its permutation is moved back), so weight matching on a GPU keeps
    its elements there between rounds.
    """
    if signs not in SIGNS:
        raise ValueError(f"unknown sign handling {signs!r}; expected one of {SIGNS}")
    n, dev = m.shape[0], m.device
    score = m if unsigned is None else m + unsigned
    ones = torch.ones(n, dtype=torch.float64, device=dev)
    if kind == PERM:
        perm = solve_perm(score) if group == 1 else solve_grouped_perm(score, group)
        return Element(kind, perm.to(dev), ones)
    if kind == SIGNED_PERM:
        solver = solve_signed_perm if signs == "marginalised" else solve_signed_perm_naive
        perm, s = solver(m, unsigned)
        return Element(kind, perm.to(dev), s.to(dev))
    if kind == GLOBAL_SIGN:
        rows = torch.arange(n, device=dev)
        best = None
        for sign in (1.0, -1.0):
            signed = sign * m if unsigned is None else sign * m + unsigned
            perm = solve_perm(signed).to(dev)
            total = float(signed[rows, perm].sum())
            if best is None or total > best[0]:
                best = (total, Element(kind, perm, sign * ones))
        return best[1]
    if kind == ORTH:
        return Element(kind, matrix=solve_orth(m).T.contiguous())
    if kind == ORTH_MEAN:
        x = fix_mean(solve_orth(mean_free_part(m.to(torch.float64))))
        return Element(kind, matrix=x.T.contiguous())
    if kind == SEMI_ORTH:
        if m.ndim != 2 or m.shape[0] < m.shape[1]:
            raise ValueError(
                "a semi-orthogonal element widens B's stream: M must be [d_A, d_B] with "
                f"d_A ≥ d_B, got {tuple(m.shape)}"
            )
        return Element(kind, matrix=solve_semi_orth(m).T.contiguous())
    raise ValueError(f"no solver for kind {kind!r}")
