"""Barriers and basins of measured values (docs/design.md §1): what a curve or a triangle of
losses and accuracies says against its endpoints, whatever evaluated it.

Convention: ``θ(λ) = λ·θ_A + (1−λ)·θ_B``, so **λ = 1 is A** and λ = 0 is B. For a curve with
endpoint losses L_A = L(θ(1)), L_B = L(θ(0)) and accuracies acc_A, acc_B:

    B_loss = max_λ [ L(θ(λ)) − (λ·L_A + (1−λ)·L_B) ]
    B_acc  = max_λ [ (λ·acc_A + (1−λ)·acc_B) − acc(θ(λ)) ]

over the grid points (:func:`barrier_from_curve`); over the triangle spanned by three models,
the excess of each point's loss over the plane through the corners' losses and the share of
points within a tolerance of it (:func:`triangle_from_values`, on :func:`barycentric_grid`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch


def as_values(x: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """Numbers (a sequence or a tensor of any shape) as one flat float64 tensor on the CPU."""
    return torch.as_tensor(x, dtype=torch.float64).reshape(-1).cpu()


class _JsonResult:
    """JSON round trip for the result dataclasses; fields in ``_pairs`` come back as tuples."""

    _pairs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):  # -> Self
        d = dict(d)
        for name in cls._pairs:
            d[name] = tuple(d[name])
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, s: str):  # -> Self
        return cls.from_dict(json.loads(s))


@dataclass
class BarrierCurve(_JsonResult):
    """A loss/accuracy curve along ``θ(λ) = λ·θ_A + (1−λ)·θ_B`` and its barriers.

    Sorted by λ. ``barrier_*`` ≥ 0 because the maximum includes the endpoints, where the gap to
    the chord is 0. ``lambda_peak_*`` is the λ where the maximum is attained (first one on ties).
    """

    lambdas: list[float]
    loss: list[float]
    accuracy: list[float]
    barrier_loss: float
    barrier_accuracy: float
    lambda_peak_loss: float
    lambda_peak_accuracy: float
    endpoint_loss: tuple[float, float]  # (A at λ=1, B at λ=0)
    endpoint_accuracy: tuple[float, float]

    _pairs = ("endpoint_loss", "endpoint_accuracy")


def _endpoint_index(lam: torch.Tensor, value: float) -> int:
    hits = torch.nonzero((lam - value).abs() < 1e-12).flatten()
    if hits.numel() == 0:
        raise ValueError(f"the λ grid must include λ = {value:g} (endpoints are read from it)")
    return int(hits[0])


def barrier_from_curve(
    lambdas: Sequence[float] | torch.Tensor,
    loss: Sequence[float] | torch.Tensor,
    accuracy: Sequence[float] | torch.Tensor,
    *,
    endpoints_loss: tuple[float, float] | None = None,
    endpoints_accuracy: tuple[float, float] | None = None,
) -> BarrierCurve:
    """Barriers of a measured curve (docs/design.md §1).

    ``B_loss = max_λ [L(θ(λ)) − (λ·L_A + (1−λ)·L_B)]`` and
    ``B_acc = max_λ [(λ·acc_A + (1−λ)·acc_B) − acc(θ(λ))]``, the maxima over the grid points.
    The endpoint values are read from the grid at λ = 1 (A) and λ = 0 (B), so both must be in
    ``lambdas`` (within 1e-12); a ValueError says which one is missing. Any order of λ is fine.
    ``endpoints_loss``/``endpoints_accuracy``: (A, B) of the chord instead, for a path that
    does not end at A and B (a sparsifying merge operator at λ = 1,
    :mod:`landscape.experiments.merging.operators`); ``endpoint_*`` of the result are then these.
    """
    lam, los, acc = as_values(lambdas), as_values(loss), as_values(accuracy)
    if not lam.shape == los.shape == acc.shape:
        raise ValueError("lambdas, loss and accuracy must have the same length")
    order = torch.argsort(lam, stable=True)
    lam, los, acc = lam[order], los[order], acc[order]
    ia, ib = _endpoint_index(lam, 1.0), _endpoint_index(lam, 0.0)
    la, lb = endpoints_loss or (float(los[ia]), float(los[ib]))
    aa, ab = endpoints_accuracy or (float(acc[ia]), float(acc[ib]))
    gap_loss = los - (lam * la + (1 - lam) * lb)
    gap_acc = (lam * aa + (1 - lam) * ab) - acc
    pl, pa = int(torch.argmax(gap_loss)), int(torch.argmax(gap_acc))
    return BarrierCurve(
        lambdas=lam.tolist(),
        loss=los.tolist(),
        accuracy=acc.tolist(),
        barrier_loss=float(gap_loss[pl]),
        barrier_accuracy=float(gap_acc[pa]),
        lambda_peak_loss=float(lam[pl]),
        lambda_peak_accuracy=float(lam[pa]),
        endpoint_loss=(la, lb),
        endpoint_accuracy=(aa, ab),
    )



def barycentric_grid(resolution: int) -> torch.Tensor:
    """Lattice points of the 2-simplex with step 1/R: ``(i, j, k)/R`` with ``i + j + k = R``.

    Returns [P, 3] float64 weights (w_A, w_B, w_C) with ``P = (R+1)(R+2)/2`` (R = 1: the 3
    corners; R = 10: 66 points). The corners are included exactly, e.g. (1, 0, 0) is A. Order:
    w_A descending, then w_B descending; the first point is A.
    """
    r = int(resolution)
    if r < 1:
        raise ValueError("resolution must be at least 1")
    rows = [(i / r, j / r, (r - i - j) / r) for i in range(r, -1, -1) for j in range(r - i, -1, -1)]
    return torch.tensor(rows, dtype=torch.float64)


@dataclass
class TriangleResult(_JsonResult):
    """Loss and accuracy over the triangle spanned by θ_A, θ_B, θ_C.

    ``points[p]`` are barycentric weights (w_A, w_B, w_C) of ``θ = w_A·θ_A + w_B·θ_B + w_C·θ_C``.
    A point is in the basin if ``loss ≤ Σ_c w_c·L_c + tol``: its loss lies at most ``tol`` nats
    above the plane through the corners' losses (the triangle's analogue of the chord).
    ``basin_fraction`` is the share of grid points in the basin, corners included (always in).
    """

    resolution: int
    points: list[list[float]]
    loss: list[float]
    accuracy: list[float]
    corner_loss: tuple[float, float, float]  # (A, B, C)
    corner_accuracy: tuple[float, float, float]
    basin_fraction: float
    tol: float = 0.05
    excess_loss: list[float] = field(default_factory=list)  # loss − chord plane, per point

    @property
    def max_excess_loss(self) -> float:
        """The triangle's loss barrier: ``max_p [L(θ_p) − Σ_c w_c L_c]`` (NaN if any is NaN)."""
        return float(torch.tensor(self.excess_loss, dtype=torch.float64).max())

    _pairs = ("corner_loss", "corner_accuracy")


def triangle_from_values(
    points: torch.Tensor,
    loss: Sequence[float] | torch.Tensor,
    accuracy: Sequence[float] | torch.Tensor,
    resolution: int,
    tol: float = 0.05,
) -> TriangleResult:
    """Basin statistics of measured triangle values; the corners must be among ``points``."""
    pts = torch.as_tensor(points, dtype=torch.float64)
    los, acc = as_values(loss), as_values(accuracy)
    corners = []
    for c in range(3):
        hit = torch.nonzero((pts[:, c] - 1.0).abs() < 1e-12).flatten()
        if hit.numel() == 0:
            raise ValueError(f"corner {'ABC'[c]} is missing from the grid")
        corners.append(int(hit[0]))
    corner_loss = los[corners]
    excess = los - pts @ corner_loss
    return TriangleResult(
        resolution=int(resolution),
        points=pts.tolist(),
        loss=los.tolist(),
        accuracy=acc.tolist(),
        corner_loss=tuple(corner_loss.tolist()),
        corner_accuracy=tuple(acc[corners].tolist()),
        basin_fraction=float((excess <= tol).to(torch.float64).mean()),
        tol=float(tol),
        excess_loss=excess.tolist(),
    )
