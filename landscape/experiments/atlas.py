"""A 2-D atlas of checkpoints, in raw weight space and after alignment to one reference.

Points are trained seeds of one zoo model and randomly gauge-transformed copies of them
(``symmetry.random_transform`` + ``apply``: the same function, other coordinates). In raw weight
space every copy lands far from its original, because a relabelling of units moves every weight;
after weight matching to a reference seed the copies fall back onto their original, so each
symmetry orbit collapses to one point. Both clouds are projected to 2-D with PCA (default) or
UMAP (``umap-learn``, imported only when asked for). The result is cached on disk.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from landscape.errors import LandscapeError
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import MONOMIAL_GROUPS, weight_matching
from landscape.models import Params
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell
from landscape.sources import Source, available_seeds
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry import apply, random_transform, spec_for
from landscape.symmetry.processing import prepare

ATLAS_VERSION = 3  # 2: weight matching also solves the within-head maps; 3: duplicates once
PROJECTIONS = ("pca", "umap")


def _flat(params: Params, keys: Sequence[str]) -> np.ndarray:
    return torch.cat([params[k].detach().double().reshape(-1) for k in keys]).cpu().numpy()


def project(x: np.ndarray, method: str = "pca", seed: int = 0) -> tuple[np.ndarray, list[float]]:
    """Rows of ``x`` (n, D) to (n, 2); PCA also returns the explained variance of each axis.

    PCA: centre, thin SVD ``X = U Σ Vᵀ``, coordinates ``U[:, :2]·Σ[:2]`` with the sign of every
    axis fixed so its largest-|·| loading is positive (reproducible across runs).
    """
    if method not in PROJECTIONS:
        raise LandscapeError(f"unknown projection {method!r}; expected pca or umap")
    if method == "umap":
        try:
            import umap  # heavy (numba): imported only when chosen
        except ImportError as e:
            raise LandscapeError(f"UMAP needs the umap-learn package ({e})") from None
        n = x.shape[0]
        reducer = umap.UMAP(n_components=2, n_neighbors=max(2, min(15, n - 1)), random_state=seed)
        return reducer.fit_transform(x).astype(float), []
    xc = x - x.mean(0, keepdims=True)
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    k = min(2, len(s))
    signs = np.sign(vt[np.arange(k), np.abs(vt[:k]).argmax(1)])
    coords = u[:, :k] * s[:k] * signs
    if k < 2:  # fewer than two distinct points: pad so the plot still has two axes
        coords = np.pad(coords, ((0, 0), (0, 2 - k)))
    total = float((s**2).sum()) or 1.0
    return coords, [float(v**2 / total) for v in s[:2]]


DUPLICATE_RTOL = 1e-9  # two checkpoints closer than this (relative to their norm) are one point
UMAP_MIN_POINTS = 4  # fewer distinct points than this: UMAP has no neighbourhoods, PCA is drawn


def distinct_rows(x: np.ndarray, rtol: float = DUPLICATE_RTOL) -> list[int]:
    """For every row of ``x`` the index of the first row equal to it (within ``rtol`` of the
    larger norm, i.e. float round-off): a row's own index when it is the first of its kind."""
    norms = np.linalg.norm(x, axis=1)
    first: list[int] = []
    for i in range(len(x)):
        same = next((j for j in dict.fromkeys(first)
                     if np.linalg.norm(x[i] - x[j]) <= rtol * max(norms[i], norms[j], 1.0)),
                    i)  # fmt: skip
        first.append(same)
    return first


def project_distinct(x: np.ndarray, method: str = "pca", seed: int = 0
                     ) -> tuple[np.ndarray, list[float], str, list[int]]:  # fmt: skip
    """:func:`project` of the distinct rows of ``x`` only, every duplicate then placed exactly on
    its original (identical checkpoints are one point, whatever the embedding). UMAP on fewer
    than :data:`UMAP_MIN_POINTS` distinct points is not defined: PCA is drawn instead.

    Returns the coordinates of every row, the explained variance, the projection used and
    :func:`distinct_rows`.
    """
    first = distinct_rows(x)
    unique = sorted(set(first))
    used = "pca" if method == "umap" and len(unique) < UMAP_MIN_POINTS else method
    coords, var = project(x[unique], used, seed)
    where = {row: k for k, row in enumerate(unique)}
    return coords[[where[f] for f in first]], var, used, first


ATLAS_BYTES = 4 * 2**30  # the flattened checkpoints the atlas may hold


@dataclass(frozen=True)
class AtlasOptions:
    """What :func:`atlas` draws: ``copies`` gauge copies per seed, each a random element of
    ``group`` (one of the monomial groups), every checkpoint weight-matched to the seed
    ``reference`` (None: the smallest seed), projected by ``projection`` (:data:`PROJECTIONS`)."""

    reference: int | None = None
    copies: int = 2
    group: str = "perm"
    projection: str = "pca"


ATLAS = AtlasOptions()  # the defaults

# What an atlas holds (landscape.fields): what :func:`atlas` writes, and what the figure, the
# page and their tables read. Every field is written by every atlas (``orbit_ratio_*`` is None
# without copies or without two seeds); ``projection_*`` stays optional, read as the projection
# asked for where an atlas does not say which one drew a panel.
RESULT = Fields(
    "atlas result",
    ("model", "seeds", "reference", "copies", "group", "projection", "dimension", "points",
     "explained_raw", "explained_aligned", "orbit_ratio_raw", "orbit_ratio_aligned",
     "duplicates_raw", "duplicates_aligned", "seconds", "cached"),
    {"projection_raw": None, "projection_aligned": None},
)  # fmt: skip
# one checkpoint of ``points``: a seed (``copy`` 0) or one of its gauge copies, placed raw and
# aligned; its full-dimensional distance to its seed and whether it equals it, in each space
POINT = Fields("atlas point", ("seed", "kind", "copy", "raw", "aligned"),
               {"distance_raw": None, "distance_aligned": None, "on_seed_raw": False,
                "on_seed_aligned": False})  # fmt: skip


@in_context
def atlas(
    model: str,
    seeds: Sequence[int] | None = None,
    options: AtlasOptions = ATLAS,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Coordinates of ``seeds`` (None: every trained seed) and ``copies`` gauge copies per
    seed, raw and aligned to ``reference``; what it draws in ``options`` (:class:`AtlasOptions`),
    where it runs in ``context``.

    Returns ``points`` (one dict per checkpoint: ``seed``, ``kind`` "seed" | "gauge copy",
    ``copy``, ``raw`` [x, y], ``aligned`` [x, y], ``distance_*`` its full-dimensional distance to
    its seed, ``on_seed_*`` whether it equals its seed there), the explained variance of the PCA
    axes, and the collapse statistic ``orbit_ratio_*``: mean full-dimensional distance of a copy
    to its seed over the mean distance between different seeds (≈ 0 once the symmetry is factored
    out). Identical checkpoints are projected once and drawn at one place
    (:func:`project_distinct`; ``duplicates_*`` counts them, ``projection_*`` is the projection
    drawn, PCA where UMAP has too few distinct points).
    """
    reference, copies, group = options.reference, options.copies, options.group
    projection, device, progress = options.projection, context.device, context.progress
    if group not in MONOMIAL_GROUPS:
        raise LandscapeError(
            f"atlas group must be one of {', '.join(MONOMIAL_GROUPS)}, got {group!r}"
        )
    if copies < 0:
        raise LandscapeError("copies must be non-negative")
    if seeds is None:
        seeds = [r["seed"] for r in available_seeds(model)]
    seeds = sorted(set(int(s) for s in seeds))
    if len(seeds) < 2:
        raise LandscapeError(f"the atlas needs at least two trained seeds of {model}")
    reference = seeds[0] if reference is None else int(reference)
    if reference not in seeds:
        raise LandscapeError(f"reference seed {reference} is not among the seeds {seeds}")
    cache = context.cache or Cache()
    ckpts = {s: Source(model, s).load(device) for s in seeds}  # as everywhere: train if missing
    n_params = sum(v.numel() for v in ckpts[seeds[0]].params.values())
    n_points = len(seeds) * (1 + copies)
    if 2 * n_points * n_params * 8 > ATLAS_BYTES:  # raw and aligned float64 vectors
        raise LandscapeError(
            f"the atlas of {n_points} checkpoints × {n_params:,} parameters needs "
            f"{2 * n_points * n_params * 8 / 2**30:.1f} GB; choose fewer seeds or copies"
        )
    inputs = {
        "model": model,
        "digests": [digest_tensors(ckpts[s].params) for s in seeds],
        "seeds": seeds,
        "reference": reference,
        "copies": copies,
        "group": group,
        "projection": projection,
        "version": ATLAS_VERSION,
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        return {}, _compute(ckpts, seeds, reference, copies, group, projection, progress)

    entry, hit = cache.get_or_compute("atlas", inputs, compute)
    return {"model": model, **entry.meta, "cached": hit}


def _compute(
    ckpts: dict[int, Checkpoint],
    seeds: list[int],
    reference: int,
    copies: int,
    group: str,
    projection: str,
    progress: Progress | None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    cfg = ckpts[seeds[0]].cfg
    cfg_p, ref = prepare(cfg, ckpts[reference].params, group)
    spec = spec_for(cfg_p)
    keys = sorted(ref)
    labels, raw, aligned = [], [], []
    total = len(seeds) * (1 + copies)
    for s in seeds:
        _, base = prepare(cfg, ckpts[s].params, group)
        members = [("seed", 0, base)]
        for k in range(copies):
            g = random_transform(spec, group, seed=100_003 * (s + 1) + k)
            members.append(("gauge copy", k + 1, apply(spec, g, base)))
        for kind, k, p in members:
            r = weight_matching(cfg_p, ref, p, group)
            labels.append({"seed": s, "kind": kind, "copy": k})
            raw.append(_flat(p, keys))
            aligned.append(_flat(r.params_b, keys))
            tell(progress, f"seed {s} {kind} {k}", len(labels), total)
    out: dict[str, Any] = {
        "seeds": seeds,
        "reference": reference,
        "copies": copies,
        "group": group,
        "projection": projection,
        "dimension": int(raw[0].size),
    }
    seed_rows = {lab["seed"]: i for i, lab in enumerate(labels) if lab["kind"] == "seed"}
    for space, vecs in (("raw", np.stack(raw)), ("aligned", np.stack(aligned))):
        coords, var, used, first = project_distinct(vecs, projection)
        out[f"explained_{space}"] = var
        out[f"orbit_ratio_{space}"] = _orbit_ratio(vecs, labels)
        out[f"projection_{space}"] = used
        out[f"duplicates_{space}"] = sum(f != i for i, f in enumerate(first))
        for i, (lab, xy) in enumerate(zip(labels, coords.tolist(), strict=True)):
            lab[space] = [float(v) for v in xy]
            own = seed_rows[lab["seed"]]
            lab[f"distance_{space}"] = float(np.linalg.norm(vecs[i] - vecs[own]))
            lab[f"on_seed_{space}"] = i != own and first[i] == first[own]
    out["points"] = labels
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def _orbit_ratio(vecs: np.ndarray, labels: list[dict[str, Any]]) -> float | None:
    """Mean distance copy → own seed over mean distance between different seeds."""
    seed_rows = {lab["seed"]: i for i, lab in enumerate(labels) if lab["kind"] == "seed"}
    within = [np.linalg.norm(vecs[i] - vecs[seed_rows[lab["seed"]]])
              for i, lab in enumerate(labels) if lab["kind"] != "seed"]  # fmt: skip
    idx = list(seed_rows.values())
    between = [np.linalg.norm(vecs[i] - vecs[j]) for n, i in enumerate(idx) for j in idx[n + 1 :]]
    if not within or not between:
        return None
    return float(np.mean(within) / np.mean(between))
