"""Cached experiments on checkpoints: matchings, barrier curves, triangles, eigenangles, tables.

This is the layer the CLI and the app call. Every result is stored in the disk cache keyed by
the weight digests of the checkpoints involved, the method, group and parameters, and the
version of the algorithm (``ALGO_VERSION``), so a second request (from either front end) is
served from disk. Results are plain JSON-able dicts; the JSON keys follow DESIGN §5.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_points, check_resolution
from landscape.data import Split
from landscape.device import resolve_device
from landscape.errors import LandscapeError
from landscape.experiments.curves import (
    barrier_from_curve,
    check_finite_loss,
    evaluate_path,
    evaluate_triangle,
)
from landscape.experiments.eigen import angle_summary, eigenangles, haar_orthogonal
from landscape.matching import function_check, function_warnings, worst_check
from landscape.models import ModelConfig, Params
from landscape.models.checkpoint import Checkpoint
from landscape.models.train import get_checkpoint
from landscape.models.zoo import ZOO, split_for, zoo_model
from landscape.store.cache import Cache, digest_tensors

ALGO_VERSION = 2  # bump when matching or evaluation changes: old cache entries stop matching
# 2: matchings also check the processed A (``function_check_a``)
METHODS = ("naive", "activation", "weight", "learned")
GROUPS = ("perm", "signed-perm", "orth")
SPLITS = ("train", "test")
Progress = Callable[[str, float], None]  # (stage, fraction done)


# ---------------------------------------------------------------- checkpoints and data


def load(model: str, seed: int | None, device: str | None = None) -> Checkpoint:
    return get_checkpoint(model, seed, device=device)


def eval_split(ckpt: Checkpoint, split: str) -> Split:
    """The data a checkpoint is evaluated on (its zoo model's split, or its family's)."""
    if split not in SPLITS:
        raise LandscapeError(f"unknown split {split!r}; expected train or test")
    fam = ckpt.meta.get("family")
    if fam:
        from landscape.store.families import family_splits

        return family_splits(fam)[0][split]
    name = ckpt.meta.get("name")
    if name not in ZOO:
        raise LandscapeError(
            f"no evaluation data is known for checkpoint {name!r}: it is not from the zoo; "
            "register it in a family (`landscape family add`) to give it data"
        )
    zm = zoo_model(name)
    if zm.dataset == "shakespeare" and split == "train":
        # Learned matching trains on every training window; evaluation uses a fixed subset.
        from landscape.data import shakespeare

        return shakespeare(ckpt.meta.get("vocab")).windows("train", zm.config.n_ctx)
    return split_for(zm, split, vocab=ckpt.meta.get("vocab"))


def _eval_subset(ckpt: Checkpoint, split: str) -> Split:
    s = eval_split(ckpt, split)
    if ckpt.meta.get("family"):
        return s  # already capped at the family's max_windows
    zm = zoo_model(ckpt.meta["name"])
    if zm.eval_windows and len(s) > zm.eval_windows:
        return Split(s.inputs[: zm.eval_windows], s.targets[: zm.eval_windows])
    return s


def _eval_options(cfg: ModelConfig, ckpt: Checkpoint, data: Split) -> dict[str, Any]:
    """Batching for ``evaluate_path``/``evaluate_triangle``: family members may be large models
    (one λ at a time, batches sized to a logit budget); zoo models use the library defaults."""
    if not ckpt.meta.get("family"):
        return {}
    from landscape.experiments.pairs import eval_batch_size

    return {"batch_size": eval_batch_size(cfg, data.inputs), "chunk": 1}


def label(ckpt: Checkpoint) -> str:
    """How a checkpoint is named in messages: ``mlp-digits seed 3``, or for a family member
    ``fam member 1 (its label)`` (members share the family's name, which cannot tell them apart)."""
    if ckpt.meta.get("family"):
        tag = ckpt.meta.get("label")
        return f"{ckpt.meta['family']} member {ckpt.seed}" + (f" ({tag})" if tag else "")
    return ckpt.name if ckpt.seed is None else f"{ckpt.name} seed {ckpt.seed}"


def health(checks: dict[str, float | None]) -> dict[str, Any]:
    """``function_ok`` and ``warnings`` of a result from its function checks (what was checked
    → max |Δlogits|): a check that is NaN or above the tolerance is a warning, never dropped."""
    warnings = function_warnings(checks)
    return {"function_ok": not warnings, "warnings": warnings}


def _sub_progress(
    progress: Progress | None, lo: float, hi: float, prefix: str = ""
) -> Progress | None:
    """``progress`` of a part of the work that runs from fraction ``lo`` to ``hi`` of the whole
    (its stages prefixed with ``prefix``)."""
    if progress is None:
        return None
    return lambda stage, frac: progress(prefix + stage, lo + (hi - lo) * frac)


def check_pair(a: Checkpoint, b: Checkpoint) -> None:
    who_a, who_b = label(a), label(b)
    if a.cfg != b.cfg:
        diff = [k for k, v in a.cfg.to_dict().items() if b.cfg.to_dict()[k] != v]
        raise LandscapeError(f"mismatched architectures: {who_a} and {who_b} differ in {diff}")
    if a.meta.get("vocab") != b.meta.get("vocab"):
        raise LandscapeError(f"{who_a} and {who_b} use different vocabularies")


# ---------------------------------------------------------------- matching


@dataclass
class Aligned:
    """A cached alignment: processed A, aligned B = π(θ_B), the residual matrix and facts."""

    cfg: ModelConfig
    params_a: Params
    params_b: Params
    resid: torch.Tensor  # (d_model, d_model) float64
    info: dict[str, Any]
    cached: bool


def _split_prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> Params:
    n = len(prefix)
    return {k[n:]: v for k, v in tensors.items() if k.startswith(prefix)}


def align(
    a: Checkpoint,
    b: Checkpoint,
    method: str,
    group: str,
    *,
    seed: int = 0,
    device: str | None = None,
    cache: Cache | None = None,
    options: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> Aligned:
    """Align B to A (cached). ``options`` go to the matching method (and into the cache key).

    ``progress(stage, fraction)`` follows learned matching step by step (the other methods
    report nothing until they are done).
    """
    from landscape.matching import match

    if method not in METHODS:
        raise LandscapeError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if group not in GROUPS:
        raise LandscapeError(f"unknown group {group!r}; expected one of {', '.join(GROUPS)}")
    check_pair(a, b)
    cache = cache or Cache()
    options = dict(options or {})
    inputs = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "cfg": a.cfg.to_dict(),
        "method": method,
        "group": group,
        "seed": seed,
        "options": options,
        "version": ALGO_VERSION,
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        train = eval_split(a, "train") if method in ("activation", "learned") else None
        dev = str(resolve_device(device))
        extra: dict[str, Any] = {}
        if method == "learned" and progress is not None:
            extra["progress"] = lambda done, total: progress(
                f"learned matching step {done}/{total}", done / max(total, 1)
            )
        try:
            r = match(a.cfg, a.params, b.params, method, group, train_split=train, seed=seed,
                      device=dev, **options, **extra)  # fmt: skip
        except torch.linalg.LinAlgError as e:  # e.g. weights so large that products overflow
            raise LandscapeError(
                f"{method} matching of {label(b)} to {label(a)} under {group} failed: "
                f"{' '.join(str(e).split())}"
            ) from None
        tensors = {f"a.{k}": v for k, v in r.params_a.items()}
        tensors.update({f"b.{k}": v for k, v in r.params_b.items()})
        tensors["resid"] = r.resid_matrix()
        return tensors, r.to_dict()

    entry, hit = cache.get_or_compute("matching", inputs, compute)
    t = entry.tensors
    cfg = ModelConfig.from_dict(entry.meta["cfg"])
    return Aligned(cfg, _split_prefixed(t, "a."), _split_prefixed(t, "b."), t["resid"],
                   entry.meta, hit)  # fmt: skip


# ---------------------------------------------------------------- barrier


def barrier(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "perm",
    *,
    points: int = 25,
    split: str = "test",
    device: str | None = None,
    cache: Cache | None = None,
    options: dict[str, Any] | None = None,
    coordinates: str = "processed",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Loss and accuracy along θ(λ) = λ·θ_A + (1−λ)·π(θ_B), λ = 1 is A (DESIGN §1).

    ``coordinates`` says in which coordinates the line is straight, see :func:`barrier_pair`.
    """
    if len(seeds) != 2:
        raise LandscapeError("barrier needs two seeds: --seeds A B")
    check_points(points)  # before a checkpoint is loaded (or trained)
    t0 = time.perf_counter()
    a, b = load(model, seeds[0], device), load(model, seeds[1], device)
    out = barrier_pair(a, b, method, group, points=points, split=split, device=device,
                       cache=cache, options=options, coordinates=coordinates,
                       progress=progress)  # fmt: skip
    out = {"model": model, "seeds": list(seeds), **out}
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out


COORDINATES = ("processed", "original")


def barrier_pair(
    a: Checkpoint,
    b: Checkpoint,
    method: str = "weight",
    group: str = "perm",
    *,
    points: int = 25,
    split: str = "test",
    device: str | None = None,
    cache: Cache | None = None,
    options: dict[str, Any] | None = None,
    coordinates: str = "processed",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The barrier between two checkpoints (cached); evaluated on A's zoo data ``split``.

    ``coordinates="processed"``: the straight line between processed A and π(B) as matched
    (gains folded for O(d), LayerNorm rewritten as RMSNorm, DESIGN §1). ``"original"``: the
    straight line between the unprocessed A and π(B) written back in the unprocessed
    parameterisation (``landscape.experiments.controls.original_coordinates``). Folding gains or
    norm
    biases into the readers makes the two lines different paths between the same functions.

    Besides the numbers: ``function_check`` (aligned B against B), ``function_check_a``
    (processed A against A), in original coordinates also both unfolded endpoints against the
    checkpoints; ``function_ok`` and one line in ``warnings`` per check that is NaN or above the
    tolerance. A NaN or infinite loss anywhere on the line is a LandscapeError naming the λ.
    ``progress(stage, fraction)`` follows matching (learned: per step) and evaluation.
    """
    if points < 2:
        raise LandscapeError("--points must be at least 2 (the endpoints)")
    check_points(points)
    if coordinates not in COORDINATES:
        raise LandscapeError(f"unknown coordinates {coordinates!r}; expected processed or original")
    t0 = time.perf_counter()
    say = progress or (lambda stage, frac: None)
    cache = cache or Cache()
    say("match", 0.0)
    al = align(a, b, method, group, device=device, cache=cache, options=options,
               progress=_sub_progress(progress, 0.0, 0.5))  # fmt: skip
    name_a, name_b = label(a), label(b)
    checks = {
        f"{name_b} aligned to {name_a} ({method}/{group})": al.info["function_check"],
        f"{name_a} processed for {group}": al.info.get("function_check_a"),
    }
    cfg, pa, pb = al.cfg, al.params_a, al.params_b
    if coordinates == "original":
        from landscape.experiments.controls import original_coordinates

        cfg, pa, pb = original_coordinates(a, b, al)
        checks[f"{name_a} in original coordinates"] = function_check(a.cfg, a.params, cfg, pa)
        checks[f"{name_b} aligned, in original coordinates"] = function_check(
            b.cfg, b.params, cfg, pb
        )
    dev = str(resolve_device(device))
    inputs = {
        "a": digest_tensors(pa),
        "b": digest_tensors(pb),
        "cfg": cfg.to_dict(),
        "points": points,
        "split": split,
        "data": _data_key(a),
        "version": ALGO_VERSION,
    }

    def where(i: int) -> str:
        x = float(lam[i])
        if x == 1.0:
            return f"λ = 1 (A, {name_a})"
        if x == 0.0:
            return f"λ = 0 (B, {name_b} aligned to A by {method}/{group})"
        return f"λ = {x:.6g} (between {name_a} and {name_b}, {method}/{group})"

    def step(done: int, total: int) -> None:
        say("evaluate", 0.5 + 0.5 * done / max(total, 1))

    lam = torch.linspace(0, 1, points, dtype=torch.float64)

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        data = _eval_subset(a, split)
        loss, acc = evaluate_path(cfg, pa, pb, data.inputs, data.targets, lam, device=dev,
                                  progress=step, **_eval_options(cfg, a, data))  # fmt: skip
        check_finite_loss(loss, where, split)  # refused, and nothing is stored
        return {}, barrier_from_curve(lam, loss, acc).to_dict()

    say("evaluate", 0.5)
    entry, hit = cache.get_or_compute("barrier", inputs, compute)
    curve = entry.meta
    out = {
        "method": method,
        "group": group,
        "split": split,
        **curve,
        "function_check": al.info["function_check"],
        "function_check_a": al.info.get("function_check_a"),
        **health(checks),
        "matching_seconds": al.info["seconds"],
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": hit and al.cached,
        "device": dev,
    }
    if coordinates != "processed":
        out["coordinates"] = coordinates
    say("done", 1.0)
    return out


def _data_key(ckpt: Checkpoint) -> dict[str, Any]:
    from landscape.models.zoo import data_identity

    if ckpt.meta.get("family"):
        from landscape.store.families import family_splits

        return family_splits(ckpt.meta["family"])[1]

    zm = zoo_model(ckpt.meta["name"])
    try:
        return data_identity(zm)
    except LandscapeError:
        return {"name": zm.dataset}


# ---------------------------------------------------------------- triangle


def triangle(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "orth",
    *,
    resolution: int = 10,
    tol: float = 0.05,
    split: str = "test",
    device: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Loss/accuracy over the triangle θ_A, π_B(θ_B), π_C(θ_C), B and C aligned onto A.

    ``function_check`` is the worst of B's and C's (NaN if either is NaN), ``function_check_a``
    that of the processed A; ``function_ok``/``warnings`` as in :func:`barrier_pair`. A NaN or
    infinite loss at any grid point is a LandscapeError naming the point.
    """
    if len(seeds) != 3:
        raise LandscapeError("triangle needs three seeds: --seeds A B C")
    if resolution < 1:
        raise LandscapeError("--resolution must be at least 1")
    check_resolution(resolution)
    t0 = time.perf_counter()
    say = progress or (lambda stage, frac: None)
    cache = cache or Cache()
    a, b, c = (load(model, s, device) for s in seeds)
    say("match B", 0.0)
    ab = align(a, b, method, group, device=device, cache=cache,
               progress=_sub_progress(progress, 0.0, 0.25))  # fmt: skip
    say("match C", 0.25)
    ac = align(a, c, method, group, device=device, cache=cache,
               progress=_sub_progress(progress, 0.25, 0.5))  # fmt: skip
    names = [label(x) for x in (a, b, c)]
    checks = {
        f"{names[1]} aligned to {names[0]} ({method}/{group})": ab.info["function_check"],
        f"{names[2]} aligned to {names[0]} ({method}/{group})": ac.info["function_check"],
        f"{names[0]} processed for {group}": worst_check(
            [ab.info.get("function_check_a"), ac.info.get("function_check_a")]
        ),
    }
    dev = str(resolve_device(device))
    inputs = {
        "a": digest_tensors(ab.params_a),
        "b": digest_tensors(ab.params_b),
        "c": digest_tensors(ac.params_b),
        "cfg": ab.cfg.to_dict(),
        "resolution": resolution,
        "tol": tol,
        "split": split,
        "data": _data_key(a),
        "version": ALGO_VERSION,
    }

    def step(done: int, total: int) -> None:
        say("evaluate", 0.5 + 0.5 * done / max(total, 1))

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        data = _eval_subset(a, split)
        r = evaluate_triangle(ab.cfg, ab.params_a, ab.params_b, ac.params_b, data.inputs,
                              data.targets, resolution, tol=tol, device=dev, progress=step,
                              **_eval_options(ab.cfg, a, data))  # fmt: skip

        def where(i: int) -> str:
            w = ", ".join(f"{x:.4g}" for x in r.points[i])
            return f"the point (w_A, w_B, w_C) = ({w}) of {', '.join(names)} ({method}/{group})"

        check_finite_loss(r.loss, where, split)  # refused, and nothing is stored
        return {}, r.to_dict()

    say("evaluate", 0.5)
    entry, hit = cache.get_or_compute("triangle", inputs, compute)
    say("done", 1.0)
    return {
        "model": model,
        "seeds": list(seeds),
        "method": method,
        "group": group,
        "split": split,
        **entry.meta,
        "function_check": worst_check([ab.info["function_check"], ac.info["function_check"]]),
        "function_check_a": checks[f"{names[0]} processed for {group}"],
        **health(checks),
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": hit and ab.cached and ac.cached,
        "device": dev,
    }


# ---------------------------------------------------------------- eigenangles


def eigenangle_result(
    model: str,
    seeds: Sequence[int],
    *,
    device: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Eigenangles of O_WM, of the correction O_LM·O_WMᵀ and of a Haar-random rotation.

    ``progress(stage, fraction)`` follows learned matching step by step.
    """
    if len(seeds) != 2:
        raise LandscapeError("eigenangles needs two seeds: --seeds A B")
    t0 = time.perf_counter()
    cache = cache or Cache()
    a, b = load(model, seeds[0], device), load(model, seeds[1], device)
    wm = align(a, b, "weight", "orth", device=device, cache=cache)
    lm = align(a, b, "learned", "orth", device=device, cache=cache, progress=progress)
    o_wm, o_lm = wm.resid.double(), lm.resid.double()
    d = o_wm.shape[0]
    angles = {
        "angles_wm": eigenangles(o_wm),
        "angles_correction": eigenangles(o_lm @ o_wm.T),
        "angles_haar": eigenangles(haar_orthogonal(d, seed=seeds[0] * 1000 + seeds[1])),
    }
    out: dict[str, Any] = {"model": model, "seeds": list(seeds), "d_model": d}
    for k, v in angles.items():
        out[k] = [float(x) for x in v]
        out[k.replace("angles_", "summary_")] = angle_summary(v)
    out["wm_objective"] = wm.info["objective"]
    out["lm_curve"] = lm.info["lm_curve"]
    out["det_flip"] = lm.info["det_flips"]
    out["seconds"] = round(time.perf_counter() - t0, 4)
    out["cached"] = wm.cached and lm.cached
    return out


# ---------------------------------------------------------------- tables


def pairs_for(model: str, n: int, seeds: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """N pairs of seeds: disjoint consecutive pairs when there are enough seeds, else all pairs.

    Seeds default to the shipped/cached ones (at least 2·N of them when available).
    """
    from landscape.models.train import available_seeds

    if n < 1:
        raise LandscapeError("--pairs must be at least 1")
    if seeds is None:
        seeds = [r["seed"] for r in available_seeds(model)]
        if len(seeds) < 2:
            seeds = list(range(max(2, 2 * n)))
    seeds = list(seeds)
    if 2 * n <= len(seeds):
        return [(seeds[2 * i], seeds[2 * i + 1]) for i in range(n)]
    combos = list(itertools.combinations(seeds, 2))
    if n > len(combos):
        raise LandscapeError(f"{len(seeds)} seeds give only {len(combos)} pairs; asked for {n}")
    return combos[:n]


def mean_sem(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def summarise_barriers(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± standard error of the loss and accuracy barriers of several pairs' results.

    Nothing NaN is dropped: a NaN barrier makes the mean NaN, a NaN function check makes
    ``function_check`` NaN; ``function_ok`` holds only if it holds for every pair, and
    ``warnings`` collects every pair's warnings.
    """
    bl = mean_sem([r["barrier_loss"] for r in results])
    ba = mean_sem([r["barrier_accuracy"] for r in results])
    return {
        "barrier_loss": bl[0],
        "barrier_loss_sem": bl[1],
        "barrier_accuracy": ba[0],
        "barrier_accuracy_sem": ba[1],
        "per_pair_loss": [r["barrier_loss"] for r in results],
        "function_check": worst_check(r["function_check"] for r in results),
        "function_ok": all(r.get("function_ok", True) for r in results),
        "warnings": list(dict.fromkeys(w for r in results for w in r.get("warnings", []))),
    }


DEFAULT_ROWS = (("naive", "perm"), ("activation", "perm"), ("weight", "perm"),
                ("weight", "orth"), ("learned", "perm"), ("learned", "orth"))  # fmt: skip


def table(
    model: str,
    pairs: int = 3,
    *,
    rows: Sequence[tuple[str, str]] = DEFAULT_ROWS,
    split: str = "test",
    points: int = 25,
    seeds: Sequence[int] | None = None,
    device: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Table-2-style grid: rows method × group, mean ± standard error over pairs.

    ``function_ok`` and ``warnings`` (also per row) gather those of every barrier.
    """
    check_points(points)
    pair_list = pairs_for(model, pairs, seeds)
    out_rows = []
    total = len(rows) * len(pair_list)
    done = 0
    for method, group in rows:
        results = []
        for sa, sb in pair_list:
            stage = f"{method}/{group} {sa}-{sb}"
            # within one barrier too, e.g. the steps of learned matching
            sub = _sub_progress(progress, done / total, (done + 1) / total, f"{stage} ")
            results.append(barrier(model, (sa, sb), method, group, points=points, split=split,
                                   device=device, cache=cache, progress=sub))  # fmt: skip
            done += 1
            if progress:
                progress(stage, done / total)
        out_rows.append({
            "method": method,
            "group": group,
            **summarise_barriers(results),
            "matching_seconds": sum(r["matching_seconds"] for r in results) / len(results),
        })  # fmt: skip
    warnings = list(dict.fromkeys(w for r in out_rows for w in r["warnings"]))
    return {"model": model, "split": split, "pairs": [list(p) for p in pair_list],
            "rows": out_rows, "function_ok": not warnings, "warnings": warnings}  # fmt: skip
