"""Training trajectories on a surface's plane (docs/design.md §1, *Surfaces*, *Trajectories*).

A seed's path is its zoo run recorded every ``every`` steps (the initialisation first, the
trained weights last: :func:`landscape.models.train.train_snapshots`, cached). A surface around
one model θ₀ lies in the plane θ₀ + span(d₁, d₂); each snapshot θ_t is projected onto it in
float64 by least squares: (α_t, β_t) minimise ‖r_t − α·d₁ − β·d₂‖ for r_t = θ_t − θ₀, solved
through the QR factors of [d₁ d₂] (the directions need not be orthogonal; the coordinates are in
the surface's own units). What the plane misses is reported, never hidden:

- per snapshot the *projection error* e_t = ‖r_t − α_t·d₁ − β_t·d₂‖ / ‖r_t‖, the fraction of
  its displacement from θ₀ outside the plane (0 at θ₀ itself);
- per path the overall error √(Σ_t ‖residual_t‖² / Σ_t ‖r_t‖²), the same fraction of the whole
  path's displacement.

Random or Hessian directions are nearly orthogonal to any training path (errors near 1: the drawn
path is a shadow). The plane that holds a path is its own (:func:`path_directions`): θ₀ a seed's
trained weights and d₁, d₂ the top two principal directions of that seed's displacements
{θ_t − θ₀} (uncentred, as the path ends at θ₀), exact through the snapshots' Gram matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from landscape.errors import LandscapeError, check_seed
from landscape.experiments.context import RUN, RunContext
from landscape.fields import Fields
from landscape.models import Params
from landscape.models.train import check_snapshot_budget, snapshot_every, train_snapshots
from landscape.models.zoo import ZOO, zoo_model

__all__ = [
    "PROJECTED_PATH",
    "TRAJECTORY_SNAPSHOTS",
    "check_trajectories",
    "flat",
    "path_directions",
    "project_path",
    "seed_path",
    "trajectories",
    "trajectory_every",
]

# snapshots of a path by default: one before every (steps / 25)-th step and one after the last,
# 26 in all (each holds the parameters and AdamW's two moments: the spawn experiment's record)
TRAJECTORY_SNAPSHOTS = 25

# What one seed's path on a plane holds (landscape.fields): a row of :func:`trajectories` (a
# surface's ``trajectories``), :func:`project_path`'s fields with the seed, its steps and whether
# its snapshots were cached; ``end_gap`` only where the seed's checkpoint was given (``ends``).
PROJECTED_PATH = Fields("surface training path",
                        ("seed", "steps", "x", "y", "errors", "error", "distances", "cached"),
                        {"end_gap": None})  # fmt: skip


def flat(params: Params, names: Sequence[str]) -> torch.Tensor:
    """``params`` over ``names`` as one flat float64 vector on the CPU."""
    return torch.cat([params[k].detach().to(torch.float64).reshape(-1).cpu() for k in names])


def _displacements(points: Sequence[Params], origin: Params) -> torch.Tensor:
    """[points, parameters] float64: each point minus the origin, names sorted."""
    names = sorted(origin)
    o = flat(origin, names)
    return torch.stack([flat(p, names) - o for p in points])


def project_path(points: Sequence[Params], origin: Params, d1: Params, d2: Params
                 ) -> dict[str, Any]:  # fmt: skip
    """Each of ``points`` projected onto the plane ``origin`` + span(``d1``, ``d2``), in
    float64: ``x``, ``y`` (the coordinates along d₁ and d₂, in their units), ``errors`` (the
    fraction of each point's displacement from the origin outside the plane, 0 at the origin),
    ``error`` (the path's overall fraction, √(Σ residual² / Σ displacement²)), ``distances``
    (‖θ_t − origin‖). Directions that span no plane are refused."""
    names = sorted(origin)
    basis = torch.stack([flat(d1, names), flat(d2, names)], dim=1)  # [n, 2]
    q, r = torch.linalg.qr(basis)
    scale = float(basis.norm())
    if scale == 0 or abs(float(r[1, 1])) <= 1e-12 * scale:
        raise LandscapeError("the two directions lie on one line: they span no plane")
    disp = _displacements(points, origin)  # [T, n]
    inside = disp @ q  # [T, 2], coordinates in the orthonormal basis
    coords = torch.linalg.solve_triangular(r, inside.T, upper=True).T  # [T, 2] along d1, d2
    residual = disp - inside @ q.T
    lengths, missed = disp.norm(dim=1), residual.norm(dim=1)
    errors = torch.where(lengths > 0, missed / lengths.clamp_min(1e-300), torch.zeros_like(missed))
    total = float(lengths.square().sum())
    overall = (float(missed.square().sum()) / total) ** 0.5 if total > 0 else 0.0
    return {"x": coords[:, 0].tolist(), "y": coords[:, 1].tolist(), "errors": errors.tolist(),
            "error": overall, "distances": lengths.tolist()}  # fmt: skip


def path_directions(points: Sequence[Params], origin: Params
                    ) -> tuple[Params, Params, dict[str, Any]]:  # fmt: skip
    """The plane of a path: the top two principal directions u₁, u₂ of the displacements
    r_t = θ_t − ``origin`` (uncentred), from the eigenvectors of their Gram matrix
    K = [r_s·r_t] (float64; u_i = Σ_t v_it·r_t / √μ_i, u₂ orthogonalised against u₁ once more),
    each scaled to R, the largest in-plane distance of a point from the origin, so the path's
    coordinates lie within [−1, 1]. Sign: the first point (a run's initialisation) has
    non-negative coordinates. Returned float64 on the CPU like ``origin``'s names, with
    ``explained`` (μ₁, μ₂ over Σμ: the share of Σ‖r_t‖² each direction holds) and ``scale``
    (R, a weight-space distance). A path that spans no plane is refused."""
    names = sorted(origin)
    disp = _displacements(points, origin)
    gram = disp @ disp.T
    mu, v = torch.linalg.eigh(gram)  # ascending
    total = float(mu.clamp_min(0).sum())
    if len(points) < 2 or total == 0 or float(mu[-2]) <= 1e-12 * total:
        raise LandscapeError("the path lies on a line through the origin: it spans no plane")
    u1 = disp.T @ v[:, -1] / float(mu[-1]) ** 0.5
    u2 = disp.T @ v[:, -2]
    u1 = u1 / u1.norm()
    u2 = u2 - (u2 @ u1) * u1
    u2 = u2 / u2.norm()
    units = []
    for u in (u1, u2):
        units.append(-u if float(disp[0] @ u) < 0 else u)
    coords = disp @ torch.stack(units, dim=1)
    reach = float(coords.norm(dim=1).max())
    out = []
    for u in units:
        parts = torch.split(u * reach, [origin[k].numel() for k in names])
        out.append({k: p.reshape(origin[k].shape) for k, p in zip(names, parts, strict=True)})
    info = {"explained": [float(mu[-1]) / total, float(mu[-2]) / total], "scale": reach}
    return out[0], out[1], info


def trajectory_every(model: str, every: int | None = None) -> int:
    """Steps between a path's snapshots: ``every``, else a 25th of the zoo run (at least 1)."""
    return every if every is not None else max(1, zoo_model(model).train.steps
                                                // TRAJECTORY_SNAPSHOTS)  # fmt: skip


def check_trajectories(model: str | None, seeds: Sequence[int], every: int | None) -> None:
    """Refuse paths in one line before anything is trained: a model that is not the zoo's (its
    runs are retrained with snapshots), a seed out of range or repeated, a spacing outside the
    run or snapshots past the memory budget."""
    if model is not None and model not in ZOO:
        raise LandscapeError(f"training paths need a zoo model (its runs are retrained with "
                             f"snapshots); {model!r} is not one")  # fmt: skip
    if len(set(seeds)) < len(seeds):
        raise LandscapeError(f"trajectory seeds repeat ({' '.join(map(str, seeds))})")
    for seed in seeds:
        check_seed(seed)
    if model is not None:
        spacing = snapshot_every(model, trajectory_every(model, every))
        check_snapshot_budget(model, spacing)


def seed_path(model: str, seed: int, every: int | None = None, *, context: RunContext = RUN
              ) -> tuple[list[int], list[Params], bool]:  # fmt: skip
    """The training path of zoo ``model``'s ``seed``: its steps, the parameters there (CPU), and
    whether it was cached (:func:`landscape.models.train.train_snapshots`: the run retrained
    with snapshots, once, on the context's device, in its cache)."""
    snaps, hit = train_snapshots(model, seed, trajectory_every(model, every),
                                 device=context.device, cache=context.cache,
                                 progress=context.progress)  # fmt: skip
    return [s.step for s in snaps], [s.params for s in snaps], hit


def trajectories(model: str, seeds: Sequence[int], origin: Params, d1: Params, d2: Params, *,
                 every: int | None = None, ends: Sequence[Params] | None = None,
                 context: RunContext = RUN) -> list[dict[str, Any]]:  # fmt: skip
    """The path of each of ``seeds`` (:func:`seed_path`, in ``context``) on the plane ``origin`` +
    span(``d1``, ``d2``) (:func:`project_path`): per seed its ``seed``, ``steps``, the
    projection's fields and ``cached``; with ``ends`` (each seed's checkpoint as the surface
    knows it), ``end_gap``, ‖last snapshot − checkpoint‖ / ‖checkpoint‖ (0 where the retrained
    run reproduces the checkpoint bit for bit)."""
    out = []
    for i, seed in enumerate(seeds):
        share = context.within(i / len(seeds), (i + 1) / len(seeds), f"path of seed {seed}: ")
        steps, points, hit = seed_path(model, seed, every, context=share)
        row = {"seed": int(seed), "steps": steps, **project_path(points, origin, d1, d2),
               "cached": hit}  # fmt: skip
        if ends is not None:
            names = sorted(origin)
            end = flat(ends[i], names)
            row["end_gap"] = float((flat(points[-1], names) - end).norm() / end.norm())
        out.append(row)
    return out
