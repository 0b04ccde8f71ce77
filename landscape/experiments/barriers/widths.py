"""Barriers between models of different widths (docs/design.md §1, the
symmetry table's last row; the paper's Appendix E).

A zoo model A of width d is compared with a model B of width d/k: the same zoo recipe with
``d_model`` divided by k (same layers, heads, d_head and d_mlp), trained on a cache miss like
every zoo checkpoint (:func:`narrow_checkpoint`).

**Embedding** (:func:`embed_checkpoint`). B's stream is embedded into A's width, x ↦ x·G with
G (d/k × d), G·Gᵀ = I (``symmetry.processing.embed_width``: writers W·G, readers Gᵀ·W, gains
folded first), and its √d correction is written into the weights (``processing.rescale_norm``:
RMSNorm divides by d, writers ×√k, readers ×1/√k). The embedded B computes B's function with
exactly A's configuration, so the one barrier pipeline (``pipeline.measure_barrier``) measures the
pair like any other: the straight line between A and the embedded B, on A's split.

**Alignment.** Every semi-orthogonal G′ (d/k × d) is G·O for some O ∈ O(d) (complete G's rows
to an orthonormal basis), so matching the embedded B under O(d) is matching B under the
semi-orthogonal group. For the residual step of weight matching: if M [d, d/k] is the
rectangular similarity of A's stream with B's, the embedded B's is M·G, and its Procrustes
solution X = UVᵀ gives G·Xᵀ = (U_M V_Mᵀ)ᵀ, the thin-SVD solution of M itself
(``matching.solvers.solve(SEMI_ORTH, M)``; tests/matching/test_semi_orth.py). So ``weight`` is
weight matching under ``orth`` on the embedded B, with the FFN and head permutations and the
within-head maps, and every method of the pipeline applies; whatever G the embedding drew,
weight matching reaches the same aligned B (tests/experiments/test_widths.py). ``naive`` is the
embedding with a random G and no matching.

Every row's ``function_check`` is max |Δlogits| of the aligned (or merely embedded) B, in A's
configuration, against the narrow B itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_points
from landscape.device import CPU
from landscape.errors import LandscapeError, check_seed
from landscape.experiments.barriers.alignment import ALGO_VERSION, align
from landscape.experiments.barriers.endpoints import SPLITS
from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import BARRIER_VERSION, BarrierRequest
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import METHODS_BY_NAME, function_check, function_warnings
from landscape.models import ModelConfig
from landscape.models.train import checkpoint_inputs, train_model
from landscape.models.zoo import Checkpoint, ZooModel, zoo_model
from landscape.progress import Progress, tell, within
from landscape.sources import Source
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry.processing import embed_width, prepare, rescale_norm

__all__ = [
    "WIDTHS",
    "WIDTH_GROUP",
    "WIDTH_NARROW",
    "WIDTH_ROW",
    "WidthOptions",
    "check_factors",
    "default_factors",
    "embed_checkpoint",
    "narrow_checkpoint",
    "narrow_model",
    "width_barriers",
    "width_rows",
]

WIDTHS_VERSION = 1  # bump when the rows change: old entries stop matching
WIDTH_GROUP = "orth"  # O(d) on the embedded B is the semi-orthogonal group on B (module docstring)
# A row's fields in the order they are shown (the curves last: they make wide table cells)
ROW_KEYS = ("factor", "width", "method", "group", "barrier_loss", "barrier_accuracy",
            "endpoint_loss", "endpoint_accuracy", "function_check", "function_check_embedded",
            "function_check_a", "within_head_cond", "lambda_peak_loss", "matching_seconds",
            "cached", "lambdas", "loss", "accuracy")  # fmt: skip

# What a widths result holds (landscape.fields): what :func:`width_barriers` writes, and what
# the figure, the page and the command's summary read.
WIDTHS = Fields("widths result",
                ("model", "seeds", "d_model", "d_head", "factors", "methods", "group", "space",
                 "split", "points", "embed_seed", "a", "narrow", "rows", "function_ok",
                 "warnings", "seconds", "cached"))  # fmt: skip
# one of ``rows`` (:func:`width_rows`, ROW_KEYS)
WIDTH_ROW = Fields("widths row", tuple(k for k in ROW_KEYS if k != "group"),
                   # every row names it; a row that does not (drawn by hand) is read as O(d)
                   {"group": WIDTH_GROUP})  # fmt: skip
# one of ``narrow``: the narrow B of one factor, its size, test metrics and training time
# (``train_seconds`` None where its checkpoint does not say)
WIDTH_NARROW = Fields("widths narrow model",
                      ("factor", "width", "parameters", "test_loss", "test_accuracy",
                       "train_seconds"))  # fmt: skip


def check_factors(cfg: ModelConfig, factors: Sequence[int]) -> tuple[int, ...]:
    """The width factors k as a tuple, or one line naming the first that is refused.

    A factor must be a whole number k ≥ 1 that divides ``d_model`` (k = 1 is the same-width
    reference: B itself, embedded by a random rotation), and each may be given once. A width
    below ``d_head`` is allowed: B is a valid model and its embedding exact, but each head then
    reads through a d/k × d_head factor of rank below d_head, so its within-head maps are not
    unique (weight matching walks along the flat directions to the conditioning cap; the rows
    report ``within_head_cond``, and the aligned B keeps its function).
    """
    if not factors:
        raise LandscapeError("give at least one width factor (--factors 2 4 8)")
    d = cfg.d_model
    out: list[int] = []
    for k in factors:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise LandscapeError(f"width factor {k!r}: expected a whole number of at least 1")
        if d % k:
            raise LandscapeError(
                f"width factor {k} does not divide d_model = {d}: the narrow model would have "
                f"width {d / k:g}"
            )
        if k in out:
            raise LandscapeError(f"width factor {k} is given twice")
        out.append(k)
    return tuple(out)


def default_factors(cfg: ModelConfig) -> tuple[int, ...]:
    """k = 2, 4, 8, 16 (the paper's d/2 … d/16), those that divide ``d_model``."""
    return tuple(k for k in (2, 4, 8, 16) if not cfg.d_model % k)


def narrow_model(model: str, factor: int) -> ZooModel:
    """Zoo model ``model`` with ``d_model`` divided by ``factor`` (its RMSNorm dividing by the
    new width), everything else kept: layers, heads, d_head, d_mlp, data and recipe.

    The name is kept (the narrow model is evaluated on the zoo model's data); the narrower
    configuration is part of its cache key, so it never stands in for the zoo checkpoint.
    """
    zm = zoo_model(model)
    (k,) = check_factors(zm.config, (factor,))
    if k == 1:
        return zm
    cfg = zm.config.replace(d_model=zm.config.d_model // k, d_norm=0)  # 0: the new width
    return ZooModel(zm.name, zm.dataset, f"{zm.description}, width d/{k}", cfg, zm.train,
                    zm.eval_windows, zm.text_path)  # fmt: skip


def narrow_checkpoint(
    model: str,
    factor: int,
    seed: int,
    *,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> Checkpoint:
    """Seed ``seed`` of :func:`narrow_model` (cache, else trained with the zoo recipe: seeded
    and deterministic like every zoo checkpoint; one thread on the CPU). Factor 1 is the zoo
    checkpoint itself (cache, shipped assets or training)."""
    check_seed(seed)
    zm = narrow_model(model, factor)
    if factor == 1:
        return Source(model, seed).load(device, cache)
    cache = cache or Cache()

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        ckpt = train_model(zm, seed, device=device, progress=progress)
        return ckpt.params, {**ckpt.meta, "width_factor": factor}

    entry, _ = cache.get_or_compute("checkpoint", checkpoint_inputs(zm, seed), compute)
    return Checkpoint(zm.config, entry.tensors, entry.meta)


def embed_checkpoint(narrow: Checkpoint, d_model: int, seed: int = 0) -> Checkpoint:
    """B embedded into width ``d_model`` by a seeded random G (``G·Gᵀ = I``), in the wider
    configuration: gains folded (``prepare(..., "orth")``), ``embed_width``, ``rescale_norm``.

    The result computes B's function (float32 round-off) and its config is B's with
    ``d_model`` (and the width RMSNorm divides by) set to ``d_model``: a zoo model of width
    ``d_model`` has exactly this config.
    """
    cfg, params = prepare(narrow.cfg, narrow.params, WIDTH_GROUP)
    cfg, params = embed_width(cfg, params, d_model, seed)
    cfg, params = rescale_norm(cfg, params, d_model)
    # untouched parameters (the unembedding bias) would still be B's tensors: the cache cannot
    # store a pair whose endpoints share memory
    params = {k: v.clone() for k, v in params.items()}
    meta = {**narrow.meta, "embedded": {"from": narrow.cfg.d_model, "to": d_model, "seed": seed}}
    return Checkpoint(cfg, params, meta)


def width_rows(
    a: Checkpoint,
    narrow: Checkpoint,
    methods: Sequence[str] = ("naive", "weight"),
    *,
    points: int = 11,
    split: str = "test",
    embed_seed: int = 0,
    context: RunContext = RUN,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per method for A against a narrower B, and the warnings of its function checks.

    B is embedded (:func:`embed_checkpoint`, ``embed_seed``) and aligned to A by each method
    under O(d) (the semi-orthogonal group on B), through the one barrier pipeline (cached).
    Rows: ``factor, width, method, group, barrier_loss, barrier_accuracy, endpoint_loss,
    endpoint_accuracy, lambda_peak_loss, lambdas, loss, accuracy, function_check`` (the
    aligned B against the narrow B), ``function_check_embedded`` (against the embedded B),
    ``function_check_a``, ``within_head_cond`` (the largest condition number of the matched
    within-head maps, None without them), ``matching_seconds``, ``cached``.
    """
    device, cache, progress = context.device, context.cache, context.progress
    d, width = a.cfg.d_model, narrow.cfg.d_model
    if width > d or d % width:
        raise LandscapeError(f"B's width {width} does not divide A's width {d}")
    check_factors(a.cfg, (d // width,))
    b = embed_checkpoint(narrow, d, embed_seed)
    rows, warnings = [], []
    for i, method in enumerate(methods):
        part = within(progress, i / len(methods), (i + 1) / len(methods), f"{method} ")
        req = BarrierRequest(a, b, method, WIDTH_GROUP, points=points, split=split)
        run = measure_barrier(req, device=device, cache=cache, progress=part)
        # the run's own matching entry, read back for the aligned B itself
        al = align(a, b, method, WIDTH_GROUP, options=req.settings(a.cfg, run.data),
                   data=run.data, context=RunContext(device, cache))  # fmt: skip
        check = function_check(narrow.cfg, narrow.params, al.cfg, al.params_b)
        conds = al.info["info"].get("within_heads_cond", {})
        cond = max((max(c) for c in conds.values()), default=None)
        out = run.to_dict()
        tag = f"d/{d // width}, {method}"
        warnings += [f"{tag}: {w}" for w in out["warnings"]]
        warnings += [f"{tag}: {w}" for w in
                     function_warnings({"B aligned, against the narrow B": check})]  # fmt: skip
        row = {**out, "factor": d // width, "width": width, "group": WIDTH_GROUP,
               "within_head_cond": cond}  # fmt: skip
        row.update(function_check=check, function_check_embedded=out["function_check"])
        rows.append(_ordered(row))
    return rows, warnings


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ROW_KEYS}


@dataclass(frozen=True)
class WidthOptions:
    """What :func:`width_barriers` measures: the narrow versions of width d/k for every factor k
    of ``factors`` (None: :func:`default_factors`), each method of ``methods``, at ``points``
    values of λ on A's ``split``; ``embed_seed`` draws the embedding of the narrow B."""

    factors: Sequence[int] | None = None
    methods: Sequence[str] = ("naive", "weight")
    points: int = 11
    split: str = "test"
    embed_seed: int = 0


@in_context
def width_barriers(
    model: str,
    seed_a: int,
    seed_b: int,
    options: WidthOptions = WidthOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Barriers between seed ``seed_a`` of zoo model ``model`` (width d) and seed ``seed_b`` of
    its narrow versions (width d/k for every factor k; default :func:`default_factors`), for
    every method.

    Everything is checked before anything is trained: factors (:func:`check_factors`),
    methods, points, split, seeds. The narrow models come from :func:`narrow_checkpoint`; each
    row from :func:`width_rows`. The whole result is one cache entry (kind ``"widths"``) keyed
    by the weights of A and of every narrow B, the methods, points, split and embedding seed.
    Returns ``model, seeds, d_model, d_head, factors, methods, group, space, split, points,
    embed_seed, a`` (A's test metrics), ``narrow`` (per factor: width, parameters, the narrow
    B's test metrics and training seconds), ``rows``, ``function_ok``, ``warnings``,
    ``seconds``, ``cached``.
    """
    o = options
    factors, methods, points, split, embed_seed = (o.factors, o.methods, o.points, o.split,
                                                   o.embed_seed)  # fmt: skip
    device, progress = context.device, context.progress
    t0 = time.perf_counter()
    zm = zoo_model(model)
    if factors is None:
        factors = default_factors(zm.config)
    factors = check_factors(zm.config, list(factors))
    methods = tuple(methods)
    for m in methods:
        if m not in METHODS_BY_NAME:
            known = ", ".join(METHODS_BY_NAME)
            raise LandscapeError(f"unknown method {m!r}; expected one of {known}")
    if not methods or len(set(methods)) != len(methods):
        raise LandscapeError("give each method once, and at least one")
    if split not in SPLITS:
        raise LandscapeError(f"unknown split {split!r}; expected train or test")
    if points < 2:
        raise LandscapeError("--points must be at least 2 (the endpoints)")
    check_points(points)
    check_seed(seed_a)
    check_seed(seed_b)
    check_seed(embed_seed, "the embedding seed")
    cache = context.cache or Cache()
    steps = 1 + 2 * len(factors)
    tell(progress, f"load {model} seed {seed_a}", 0, steps)
    a = Source(model, seed_a).load(device, cache)
    narrow = {}
    for i, k in enumerate(factors):
        stage = f"train d/{k} seed {seed_b}"
        tell(progress, stage, 1 + i, steps)
        narrow[k] = narrow_checkpoint(model, k, seed_b, device=device, cache=cache,
                                      progress=within(progress, (1 + i) / steps,
                                                      (2 + i) / steps, f"{stage}: "))  # fmt: skip
    inputs = {
        "a": digest_tensors(a.params),
        "b": {str(k): digest_tensors(n.params) for k, n in narrow.items()},
        "cfg": a.cfg.to_dict(),
        "methods": list(methods),
        "points": points,
        "split": split,
        "embed_seed": embed_seed,
        "version": [WIDTHS_VERSION, BARRIER_VERSION, ALGO_VERSION],
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        rows, warnings, narrow_rows = [], [], []
        for i, k in enumerate(factors):
            lo = (1 + len(factors) + i) / steps
            r, w = width_rows(a, narrow[k], methods, points=points, split=split,
                              embed_seed=embed_seed,
                              context=RunContext(device, cache,
                                                 within(progress, lo, lo + 1 / steps,
                                                        f"d/{k} ")))  # fmt: skip
            rows += r
            warnings += w
            n = narrow[k]
            narrow_rows.append({
                "factor": k,
                "width": n.cfg.d_model,
                "parameters": sum(v.numel() for v in n.params.values()),
                "test_loss": n.meta["metrics"]["test_loss"],
                "test_accuracy": n.meta["metrics"]["test_accuracy"],
                "train_seconds": n.meta.get("seconds"),
            })  # fmt: skip
        return {}, {"rows": rows, "narrow": narrow_rows, "warnings": warnings}

    entry, hit = cache.get_or_compute("widths", inputs, compute)
    tell(progress, "done", steps, steps)
    return {
        "model": model,
        "seeds": [seed_a, seed_b],
        "d_model": a.cfg.d_model,
        "d_head": a.cfg.d_head,
        "factors": list(factors),
        "methods": list(methods),
        "group": WIDTH_GROUP,
        "space": "weights",
        "split": split,
        "points": points,
        "embed_seed": embed_seed,
        "a": {k: a.meta["metrics"][k] for k in ("test_loss", "test_accuracy")},
        "narrow": entry.meta["narrow"],
        "rows": [_ordered(r) for r in entry.meta["rows"]],  # the cache sorts keys
        "function_ok": not entry.meta["warnings"],
        "warnings": entry.meta["warnings"],
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": hit,
    }
