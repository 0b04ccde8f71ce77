"""Within-head maps (docs/design.md §1): each attention head's own invertible maps, Q·M with
K·M⁻ᵀ and V·N with N⁻¹·O, which the head permutation leaves free.

Their objective holds both M and M⁻ᵀ, so it is not linear in the element: unlike the solvers of
``landscape.matching.solvers``, these take the stacked factors, not one similarity matrix, and
return the spec's per-head matrices directly, batched over heads, in float64. Kinds: ``orth``
(per-head Procrustes), ``invertible`` (damped Newton from the best of four starts) and
``rope-commuting`` (the QK maps that commute with rotary positions, per frequency pair in closed
form). No decision rests on round-off (:data:`SIGNIFICANT`), so the maps are the same on any
machine up to it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from landscape.symmetry import INVERTIBLE, ORTH, ROPE

# A within-head map more ill-conditioned than this is never returned: it would amplify float32
# round-off of the aligned factors by as much (and a singular one is no symmetry at all).
MAX_COND = 1e8
# A change of a cost below this fraction of its scale is round-off (solve_within_heads).
SIGNIFICANT = 1e-13


class Factors(NamedTuple):
    """The stacked factors a head's map acts on, A's and B's, batched over heads (float64 or
    cast to it): ``X`` [H, r, n] the rows it multiplies by M, ``Y`` [H, s, n] those it
    multiplies by M⁻ᵀ (:func:`within_head_cost`)."""

    xa: torch.Tensor
    xb: torch.Tensor
    ya: torch.Tensor
    yb: torch.Tensor


def within_head_cost(
    m: torch.Tensor, xa: torch.Tensor, xb: torch.Tensor, ya: torch.Tensor, yb: torch.Tensor
) -> torch.Tensor:
    """``f(M_h) = ‖X^A_h − X^B_h M_h‖² + ‖Y^A_h − Y^B_h M_h⁻ᵀ‖²`` per head: [H], float64.

    ``X`` stacks, as rows, every factor a head's map acts on by ``M`` (``[W_Q; b_Q]`` for QK,
    ``[W_V; b_V]`` for OV), ``Y`` every factor it acts on by ``M⁻ᵀ`` (``[W_K; b_K]``; for OV
    ``W_Oᵀ``, since ``W_O ← N⁻¹·W_O`` is ``W_Oᵀ ← W_Oᵀ·N⁻ᵀ``): [H, rows, n]. Infinite where
    M_h is singular.
    """
    inv, info = torch.linalg.inv_ex(m)
    f = (xa - xb @ m).pow(2).sum((-1, -2)) + (ya - yb @ inv.mT).pow(2).sum((-1, -2))
    return torch.where((info == 0) & torch.isfinite(f), f, torch.inf)


def _cond(m: torch.Tensor) -> torch.Tensor:
    """2-norm condition number per matrix (inf where singular or not finite)."""
    s = torch.linalg.svdvals(torch.nan_to_num(m, nan=0.0, posinf=0.0, neginf=0.0))
    c = s[..., 0] / s[..., -1]
    return torch.where(torch.isfinite(m).all(-1).all(-1) & torch.isfinite(c), c, torch.inf)


def _dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y).sum((-1, -2))


def _newton_step(
    m: torch.Tensor,
    xa: torch.Tensor,
    xb: torch.Tensor,
    ya: torch.Tensor,
    yb: torch.Tensor,
    mu: torch.Tensor,
    cg_steps: int = 5,
) -> torch.Tensor:
    """E of the damped Newton step ``M ← M(I + E)`` of :func:`solve_within_heads` [H, n, n]:
    a few preconditioned CG steps on ``H[E] + μE = C`` (a few suffice: the outer iterations and
    the damping do the rest)."""
    n = m.shape[-1]
    xm, yn = xb @ m, yb @ torch.linalg.inv(m).mT
    rx, ry = xa - xm, ya - yn
    gx, gy, k = xm.mT @ xm, yn.mT @ yn, yn.mT @ ry
    alpha, u = torch.linalg.eigh(gx)
    beta, v = torch.linalg.eigh(gy)
    # μ relative to the curvature's size, so the damping does not depend on the units
    damp = (mu * (alpha.sum(-1) + beta.sum(-1)) / n)[:, None, None]
    denom = alpha[:, :, None] + beta[:, None, :] + damp

    def gauss_newton(r: torch.Tensor) -> torch.Tensor:  # the Sylvester solve, exact
        return u @ ((u.mT @ r @ v) / denom) @ v.mT

    def hessian(e: torch.Tensor) -> torch.Tensor:
        return gx @ e + e @ gy + damp * e - (k.mT @ e.mT + e.mT @ k.mT)

    r = xm.mT @ rx - ry.mT @ yn
    e, z = torch.zeros_like(r), gauss_newton(r)
    p, rz, first = z, _dot(r, z), z
    active = rz > 0
    for _ in range(cg_steps):
        hp = hessian(p)
        php = _dot(p, hp)
        active &= php > 0  # negative curvature: keep what CG has so far
        a = torch.where(active, rz / torch.where(active, php, 1.0), 0.0)
        e, r = e + a[:, None, None] * p, r - a[:, None, None] * hp
        z = gauss_newton(r)
        rz_new = _dot(r, z)
        p = z + torch.where(active, rz_new / rz.clamp_min(1e-300), 0.0)[:, None, None] * p
        rz = rz_new
        if not bool(active.any()):
            break
    # negative curvature on the first direction: the Gauss-Newton step
    return torch.where((_dot(e, e) > 0)[:, None, None], e, first)


def solve_within_heads(
    kind: str,
    factors: Factors,
    start: torch.Tensor | None = None,
    *,
    max_iter: int = 50,
    max_cond: float = MAX_COND,
    rotary: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head maps minimising :func:`within_head_cost`, batched over heads, float64.

    ``factors`` (:class:`Factors`): ``X`` [H, r, n] and ``Y`` [H, s, n] as in
    :func:`within_head_cost` (A's factors and B's with every other variable applied); returns
    ``(M, cond)``: M [H, n, n] in the spec's orientation (``X^B ← X^B·M``, ``Y^B ← Y^B·M⁻ᵀ``)
    and each map's 2-norm condition number [H].

    ``orth``: ``M⁻ᵀ = M``, so ``f = const − 2⟨S, M⟩`` with ``S = X^BᵀX^A + Y^BᵀY^A``, and M is
    the polar factor ``UVᵀ`` of ``S = UΣVᵀ`` (per-head Procrustes).

    ``invertible``: f is not convex in M. Per head, the best of four starts: ``start`` (the
    current element, else the identity, so the result is never worse than it), the
    least-squares map of the X side ``X^B⁺X^A``, that of the Y side ``(Y^B⁺Y^A)⁻ᵀ``, and the
    orthogonal solution above (each least-squares map alone fits its side and wrecks the other
    when the two disagree; the orthogonal one balances them). Then damped Newton steps
    ``M ← M(I + E)``: with ``X_M = X^B M``, ``Y_N = Y^B M⁻ᵀ`` and residuals ``R_X = X^A − X_M``,
    ``R_Y = Y^A − Y_N``, expanding ``(I + E)⁻ᵀ = I − Eᵀ + Eᵀ² − …`` gives the gradient
    ``−2C`` and the Hessian ``2H`` at E = 0,

        C = X_MᵀR_X − R_YᵀY_N,    H[E] = (X_MᵀX_M) E + E (Y_NᵀY_N) − (KᵀEᵀ + EᵀKᵀ),

    ``K = Y_NᵀR_Y``. ``H[E] + μE = C`` is solved by conjugate gradients preconditioned with its
    Gauss-Newton part (K = 0), a Sylvester equation solved exactly from the eigendecompositions
    ``X_MᵀX_M = U diag(α) Uᵀ``, ``Y_NᵀY_N = V diag(β) Vᵀ``: ``E = U [(UᵀCV)_ij/(α_i + β_j + μ)]
    Vᵀ``; at negative curvature CG stops (on its first direction: the Gauss-Newton step). A step
    is kept only where it lowers f by more than round-off (:data:`SIGNIFICANT` of the factors'
    squared norm) and keeps ``cond(M) ≤ max_cond``; μ shrinks after a kept step and grows after
    one that raises f (Levenberg-Marquardt); a step that changes f by round-off only ends the
    head's descent. No decision rests on round-off, so the maps are the same on any machine up
    to it. O(H n²(r + s + n)) per step.

    A planted map (B's factors equal to A's moved by ``M₀⁻¹``) is recovered to round-off by
    either least-squares start. Otherwise the result is a stationary point no worse than any
    start, never singular.

    ``rope-commuting`` (QK maps under rotary positions, ``rotary`` = dimensions rotated):
    :func:`solve_rope_commuting`, the global optimum over that subgroup.
    """
    if kind == ROPE:
        return solve_rope_commuting(factors, rotary, start, max_iter=max_iter, max_cond=max_cond)
    xa, xb, ya, yb = (t.to(torch.float64) for t in factors)
    h, n = xa.shape[0], xa.shape[-1]
    eye = torch.eye(n, dtype=torch.float64, device=xa.device).expand(h, n, n)
    u, _, vh = torch.linalg.svd(xb.mT @ xa + yb.mT @ ya)
    procrustes = u @ vh
    if kind == ORTH:
        return procrustes, _cond(procrustes)
    if kind != INVERTIBLE:
        raise ValueError(f"no within-head solver for kind {kind!r}")
    m = eye.clone() if start is None else start.to(xa).clone()
    f = within_head_cost(m, xa, xb, ya, yb)
    inv_y, info = torch.linalg.inv_ex(torch.linalg.pinv(yb) @ ya)
    from_y = torch.where((info == 0)[:, None, None], inv_y.mT, eye)
    scale = xa.pow(2).sum((-1, -2)) + ya.pow(2).sum((-1, -2)) + 1e-300
    # A change of f smaller than this is round-off: deciding on it would let the machine's
    # rounding pick the map (another CPU or a GPU would keep another step), so such a step is
    # neither taken nor refused as too long: the head has converged.
    flat = SIGNIFICANT * scale
    for cand in (torch.linalg.pinv(xb) @ xa, from_y, procrustes):
        fc = within_head_cost(cand, xa, xb, ya, yb)
        better = (fc < f - flat) & (_cond(cand) <= max_cond)
        m, f = torch.where(better[:, None, None], cand, m), torch.where(better, fc, f)
    mu = torch.full((h,), 1e-3, dtype=torch.float64, device=xa.device)
    done = f <= 1e-28 * scale
    for _ in range(max_iter):
        if bool(done.all()):
            break
        step = m @ (eye + _newton_step(m, xa, xb, ya, yb, mu))
        fs = within_head_cost(step, xa, xb, ya, yb)
        ok = (_cond(step) <= max_cond) & ~done
        keep = ok & (fs < f - flat)
        level = ok & ~keep & (fs <= f + flat)  # no step of this size changes f: converged
        m, f = torch.where(keep[:, None, None], step, m), torch.where(keep, fs, f)
        mu = torch.where(keep, (mu / 10).clamp_min(1e-12), mu * 10)
        done |= level | (mu > 1e8) | (f <= 1e-28 * scale)
    return m, _cond(m)


def _complex_pairs(x: torch.Tensor, rotary: int) -> torch.Tensor:
    """The rotated columns of ``x`` [..., n] as one complex number per frequency pair,
    ``x_i + i·x_{i+r/2}`` [..., r/2] (complex128): right multiplication by a pair's block
    ``[[a, c], [−c, a]]`` is then multiplication by ``a + ic``."""
    h = rotary // 2
    return torch.complex(x[..., :h].to(torch.float64), x[..., h:rotary].to(torch.float64))


def _pair_cost(w, a, b, p, q, sx, sy) -> torch.Tensor:
    """``‖x_A − x_B·w‖² + ‖y_A − y_B·w/|w|²‖²`` of every pair from its sums (float64)."""
    t = w.abs().square()
    return a + b + p * t + q / t - 2 * (sx * w).real - 2 * (sy * w).real / t


def solve_rope_commuting(
    factors: Factors,
    rotary: int,
    start: torch.Tensor | None = None,
    *,
    max_iter: int = 50,
    max_cond: float = MAX_COND,
    polish: int = 50,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head maps commuting with RoPE (kind ``rope-commuting``) minimising
    :func:`within_head_cost`; arguments and returns as :func:`solve_within_heads`.

    M is block-diagonal (``landscape.symmetry.spec``'s docstring): a scaled rotation per
    frequency pair, ``w = a + ic`` as a complex number, and an invertible block F on the
    dimensions from ``rotary`` on. ``X·M`` and ``Y·M⁻ᵀ`` act on each block's own columns, so
    the cost splits into one problem per pair and one for F (the unconstrained problem on those
    columns, solved by :func:`solve_within_heads`). With a pair's columns as complex numbers
    (``x_A``, ``x_B``, ``y_A``, ``y_B`` over the rows), ``M⁻ᵀ`` is ``w/|w|²`` there and

        f(w) = ‖x_A − x_B·w‖² + ‖y_A − y_B·w/|w|²‖²
             = A + B + P·t + Q/t − 2·Re((ρ·s_x + s_y/ρ)·e^{iθ}),

    ``w = ρe^{iθ}``, ``t = ρ²``, ``A = ‖x_A‖²``, ``B = ‖y_A‖²``, ``P = ‖x_B‖²``, ``Q = ‖y_B‖²``,
    ``s_x = Σ conj(x_A)·x_B``, ``s_y = Σ conj(y_A)·y_B``. For a given ρ the best angle is that of
    ``conj(ρ·s_x + s_y/ρ)``, which leaves ``g(t) = P·t + Q/t − 2·√(α·t + 2γ + δ/t)`` with
    ``α = |s_x|²``, ``δ = |s_y|²``, ``γ = Re(s_x·conj(s_y))``. Its stationary points solve
    ``(P·t² − Q)·√h = α·t² − δ`` (h the root's argument); squared and times t, the degree-6
    polynomial

        P²α·t⁶ + (2P²γ − α²)·t⁵ + (P²δ − 2PQα)·t⁴ + (2αδ − 4PQγ)·t³
            + (Q²α − 2PQδ)·t² + (2Q²γ − δ²)·t + Q²δ = 0,

    whose positive real roots (companion-matrix eigenvalues; every root with a positive real
    part is tried) hold every stationary point, among them the global minimum. Each root is
    polished by Newton steps on ``g′`` itself until the steps stop moving it (squaring can
    double a root; ``g′`` has it simple, so a planted map comes back to round-off, and two roots
    of one stationary point end up equal to round-off). The pair takes the candidate of least
    f: the start's block (the current element, else the identity) unless another is lower by
    more than round-off (:data:`SIGNIFICANT` of the pair's ``A + B``), then the roots by
    increasing t, so no tie is left to round-off. ``t = ρ²`` is kept within
    ``[max_cond^-½, max_cond^½]``: no two pairs' scales differ by more than ``√max_cond``.
    The two one-sided least-squares scalings ``conj(s_x)/P`` and ``Q/s_y`` are candidates too
    (they are the answer where one side's factors vanish). The returned condition number is
    that of the whole map.
    """
    xa, xb, ya, yb = (t.to(torch.float64) for t in factors)
    h, n = xa.shape[0], xa.shape[-1]
    if rotary <= 0 or rotary % 2 or rotary > n:
        raise ValueError(f"rotary must be even and in 1..{n}, got {rotary}")
    dev, k = xa.device, rotary // 2
    eye = torch.eye(n, dtype=torch.float64, device=dev).expand(h, n, n)
    start = eye if start is None else start.to(xa)
    cx = [_complex_pairs(t, rotary) for t in (xa, xb, ya, yb)]
    a, p, b, q = (z.abs().square().sum(-2) for z in cx)  # [H, k]: A, P, B, Q
    sx = (cx[0].conj() * cx[1]).sum(-2)
    sy = (cx[2].conj() * cx[3]).sum(-2)
    al, de, ga = sx.abs().square(), sy.abs().square(), (sx * sy.conj()).real

    def best_angle(t: torch.Tensor) -> torch.Tensor:  # t [H, k, roots]
        rho = t.sqrt()
        z = (rho * sx[..., None] + sy[..., None] / rho).conj()
        phase = torch.where(z.abs() > 0, z / z.abs().clamp_min(1e-300), torch.ones_like(z))
        return rho * phase

    coeffs = torch.stack([p * p * al, 2 * p * p * ga - al * al, p * p * de - 2 * p * q * al,
                          2 * al * de - 4 * p * q * ga, q * q * al - 2 * p * q * de,
                          2 * q * q * ga - de * de, q * q * de], -1)  # fmt: skip
    top = coeffs.abs().amax(-1, keepdim=True)
    coeffs = coeffs / torch.where(top > 0, top, 1.0)
    lead = coeffs[..., :1]
    # a vanishing leading coefficient (one side's factors zero) leaves a spurious huge root
    lead = torch.where(lead.abs() > 1e-300, lead, torch.full_like(lead, 1e-300))
    companion = torch.zeros(*coeffs.shape[:-1], 6, 6, dtype=torch.float64, device=dev)
    companion[..., 0, :] = -coeffs[..., 1:] / lead
    companion[..., 1:, :-1] = torch.eye(5, dtype=torch.float64, device=dev)
    # the small eigenproblems on the host, whatever the device: the same roots everywhere
    roots = torch.linalg.eigvals(companion.cpu()).to(dev)  # [H, k, 6]
    lo, hi = max_cond**-0.5, max_cond**0.5
    t = roots.real.clamp(lo, hi)
    for _ in range(polish):  # Newton on g′(t) = P − Q/t² − h′/√h
        hh = (al[..., None] * t + 2 * ga[..., None] + de[..., None] / t).clamp_min(1e-300)
        h1 = al[..., None] - de[..., None] / t**2
        h2 = 2 * de[..., None] / t**3
        g1 = p[..., None] - q[..., None] / t**2 - h1 / hh.sqrt()
        g2 = 2 * q[..., None] / t**3 - h2 / hh.sqrt() + h1**2 / (2 * hh**1.5)
        step = torch.where(g2 > 0, g1 / torch.where(g2 > 0, g2, 1.0), 0.0)
        step = torch.where(torch.isfinite(step) & (t - step > 0), step, 0.0)
        t = (t - step).clamp(lo, hi)
        if not bool((step.abs() > 4e-16 * t).any()):
            break
    # every root with a positive real part is a candidate (a double root of the square may
    # split into a complex pair): the cost decides, so a spurious one is never taken
    t = torch.where(roots.real > 0, t, torch.nan)
    t = t.sort(-1).values  # the least t first among equal costs: no tie left to round-off
    one_sided = torch.stack([sx.conj() / p, q / sy], -1)
    one_sided = torch.where(torch.isfinite(one_sided) & (one_sided.abs() > 0), one_sided, 1.0)
    idx = torch.arange(k, device=dev)
    w0 = torch.complex(start[:, idx, idx], start[:, idx, idx + k])
    cands = torch.cat([best_angle(t), one_sided], -1)
    w, f = w0, _pair_cost(w0, a, b, p, q, sx, sy)
    flat = SIGNIFICANT * (a + b) + 1e-300
    for j in range(cands.shape[-1]):
        c = cands[..., j]
        tc = c.abs().square()
        fc = _pair_cost(c, a, b, p, q, sx, sy)
        better = torch.isfinite(fc) & (tc >= lo) & (tc <= hi) & (fc < f - flat)
        w, f = torch.where(better, c, w), torch.where(better, fc, f)
    m = torch.zeros(h, n, n, dtype=torch.float64, device=dev)
    m[:, idx, idx], m[:, idx + k, idx + k] = w.real, w.real
    m[:, idx, idx + k], m[:, idx + k, idx] = w.imag, -w.imag
    if n > rotary:
        rest = slice(rotary, None)
        m[:, rest, rest] = solve_within_heads(
            INVERTIBLE, Factors(xa[..., rest], xb[..., rest], ya[..., rest], yb[..., rest]),
            start[:, rest, rest], max_iter=max_iter, max_cond=max_cond,
        )[0]  # fmt: skip
    return m, _cond(m)
