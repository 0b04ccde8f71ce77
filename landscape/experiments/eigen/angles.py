"""Eigenangles of orthogonal matrices (docs/design.md §1: the residual rotation found by matching).

An orthogonal G is normal, so it is unitarily diagonalisable with eigenvalues on the unit
circle, ``e^{±iφ}`` in conjugate pairs plus real ±1. The angles φ say how far G is from the
identity coordinate by coordinate: a permutation-like or near-identity G has angles near 0,
a Haar-random rotation spreads them over (−π, π] (for large d nearly uniformly, so the median
|φ| is ≈ π/2). All computations are float64.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

# eigenvalues at −1 come back as −1 ± tiny·i; their angle is folded to +π within this distance
_PI_TOL = 1e-9


def eigenangles(g: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Angles ``arg λ_k`` of the eigenvalues of a square (orthogonal) G, float64, sorted.

    Every angle lies in (−π, π]; an eigenvalue −1 (a reflection direction) reads π, not −π.
    The modulus of the eigenvalues is ignored, so a nearly orthogonal G gives its nearby angles.
    """
    t = torch.as_tensor(g).detach().to("cpu", torch.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {tuple(t.shape)}")
    angles = torch.angle(torch.linalg.eigvals(t))
    angles = torch.where(angles <= -math.pi + _PI_TOL, torch.full_like(angles, math.pi), angles)
    return torch.sort(angles).values


def orthogonal_eigenangles(q: torch.Tensor) -> torch.Tensor:
    """:func:`eigenangles` of an orthogonal Q with no repeated angle (a Haar draw, almost
    surely), from the symmetric eigenproblem, several times faster than the general one.

    Q = U·diag(e^{iφ})·U* gives (Q + Qᵀ)/2 = U·diag(cos φ)·U*: its eigenvalues are the cos φ,
    twice for each conjugate pair e^{±iφ}, once for a real eigenvalue ±1. Those are known from
    d and det Q: d odd, one at det Q; d even and det Q = −1, one at +1 and one at −1. The
    angles of the pairs are ±arccos of each doubled cosine (their mean), the real ones 0 and π
    exactly.
    """
    t = torch.as_tensor(q).detach().to("cpu", torch.float64)
    d = t.shape[0]
    phi = torch.arccos(torch.linalg.eigvalsh((t + t.T) / 2).clamp(-1.0, 1.0)).flip(0)  # ascending
    det = det_sign(t)
    plus, minus = (det > 0, det < 0) if d % 2 else (det < 0, det < 0)
    phi = phi[int(plus) : d - int(minus)]
    pairs = phi.reshape(-1, 2).mean(1)
    real = [0.0] * plus + [math.pi] * minus
    return torch.sort(torch.cat([-pairs, pairs, torch.tensor(real, dtype=torch.float64)])).values


def haar_orthogonal(d: int, seed: int, *, proper: bool = False) -> torch.Tensor:
    """A Haar-distributed random orthogonal d×d matrix, float64.

    ``Z`` with i.i.d. N(0, 1) entries, ``Z = QR``; ``Q·diag(sign(diag R))`` is Haar on O(d)
    (the sign fix makes the QR factorisation unique; without it Q is not Haar; Mezzadri 2007).
    The determinant is then +1 or −1 with probability ½ each. With ``proper=True`` the first
    column is negated when det = −1, which gives Haar measure on SO(d) (det +1 always).
    """
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(d, d, generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(z)
    signs = torch.sign(torch.diagonal(r))
    signs[signs == 0] = 1.0
    q = q * signs
    if proper and det_sign(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def det_sign(g: torch.Tensor | np.ndarray) -> int:
    """Sign of det G (+1 rotation, −1 reflection; 0 if singular), from a float64 LU (slogdet)."""
    sign, _ = torch.linalg.slogdet(torch.as_tensor(g).detach().to("cpu", torch.float64))
    return int(sign.item())


def angle_summary(angles: torch.Tensor | np.ndarray, small: float = 0.3) -> dict[str, float]:
    """Summary of eigenangles: ``share_small`` (fraction with |φ| < ``small`` rad, default 0.3),
    ``median_abs`` and ``mean_abs`` of |φ| in radians, ``n`` the number of angles, and
    ``small`` the threshold used. Empty input gives NaN statistics and n = 0.
    """
    a = torch.as_tensor(angles).detach().to("cpu", torch.float64).abs().reshape(-1)
    n = a.numel()
    if n == 0:
        return {
            "share_small": math.nan,
            "median_abs": math.nan,
            "mean_abs": math.nan,
            "n": 0,
            "small": small,
        }
    return {
        "share_small": float((a < small).to(torch.float64).mean()),
        "median_abs": float(a.quantile(0.5)),  # the average of the two middle values if n even
        "mean_abs": float(a.mean()),
        "n": n,
        "small": float(small),
    }


HAAR_ANGLES = 25_600  # about this many eigenangles make up the Haar reference, at most
HAAR_DRAWS = 200  # draws of the Haar reference for d ≤ HAAR_ANGLES / HAAR_DRAWS
HAAR_SEED = 0


def haar_draws(d: int) -> int:
    """How many Haar-random d×d matrices the reference averages: 200 up to d = 128, then as many
    as keep about :data:`HAAR_ANGLES` angles (at least 10)."""
    return max(10, min(HAAR_DRAWS, math.ceil(HAAR_ANGLES / d)))


@functools.lru_cache(maxsize=16)
def _haar_reference(d: int, draws: int, seed: int) -> tuple[float, ...]:
    angles = [orthogonal_eigenangles(haar_orthogonal(d, seed=seed + k)) for k in range(draws)]
    return tuple(torch.cat(angles).sort().values.tolist())


def haar_reference(d: int, draws: int | None = None, seed: int = HAAR_SEED) -> torch.Tensor:
    """The eigenangles of ``draws`` (default :func:`haar_draws`) Haar-random d×d orthogonal
    matrices (O(d), seeds ``seed, seed + 1, …``), pooled and sorted: their histogram is the
    average over the draws, an estimate of the eigenangle density of Haar measure on O(d). It
    depends on d alone, so every pair of models of one width is compared with the same
    reference (a single draw would change from pair to pair)."""
    return torch.tensor(_haar_reference(int(d), int(draws or haar_draws(d)), int(seed)),
                        dtype=torch.float64)  # fmt: skip
