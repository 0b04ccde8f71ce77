"""Tidy tables of the figures: what a figure draws, one measured number per row.

The CSV a page offers beside a figure is one of these, a pure function of the same result the
figure builder draws (never of the plotly traces). Columns name what a row is: for a curve
``model, seed_a, seed_b, method, group, space, split, metric, lam, value`` and, where the
figure draws a mean and a band over pairs, ``mean, band_low, band_high`` of that λ; other
figures keep that vocabulary (``seed``, ``panel``, ``step``, ``metric``, ``value``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from landscape.plots.fields import (
    ABLATION,
    ABLATION_CELL,
    ABLATION_SEED,
    ABLATION_STEP,
    ATLAS,
    ATLAS_POINT,
    BARRIER,
    CURVED,
    CURVED_ALIGNMENT,
    CURVED_PATH,
    EIGENANGLES,
    INTERPOLATION_SERIES,
    ITERATION_ROUND,
    ITERATIONS,
    LEARNED_CHECKPOINT,
    LM_STEP,
    MATRIX,
    SURFACE,
    SURFACE_PATH,
    SURFACE_POINT,
    TRAINING_CURVES,
    TRAINING_RUN,
    TRIANGLE,
    ZOO_ROW,
    ZOO_SEED,
    Fields,
    aligned,
)
from landscape.plots.home import SYMMETRY_LEVELS


def group_of(kind: Fields, record: Mapping[str, Any]) -> str:
    """A row's ``group`` from a ``kind`` record: empty for a method that aligns nothing (naive;
    :func:`~landscape.plots.fields.aligned`), whatever group its result was stored under, so
    that every CSV says the same of it."""
    moved = not kind.read(record, "method") or aligned(kind, record)  # no method: no matching
    return kind.read(record, "group") if moved else ""


CURVE_COLUMNS = ["model", "seed_a", "seed_b", "method", "group", "space", "split", "metric",
                 "lam", "value", "series", "mean", "band_low", "band_high"]  # fmt: skip
METRICS = ("loss", "accuracy")


def _frame(rows: list[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(columns))


def tidy_interpolation(series: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The curves of :func:`~landscape.plots.interpolation.figure_interpolation`: one row per
    pair × series (method/group/space) × metric × λ, with the series' mean and range over its
    pairs at that λ (the drawn line and band)."""
    rows = []
    for s in series:
        results = INTERPOLATION_SERIES.read(s, "results")
        label = INTERPOLATION_SERIES.read(s, "label")
        for metric in METRICS:
            curves = [BARRIER.read(r, metric) for r in results]
            for k, lam in enumerate(BARRIER.read(results[0], "lambdas")):
                at = [c[k] for c in curves]
                band = {"mean": sum(at) / len(at), "band_low": min(at), "band_high": max(at)}
                for r, c in zip(results, curves, strict=True):
                    a, b = BARRIER.read(r, "seeds")
                    method = BARRIER.read(r, "method")
                    rows.append({
                        "model": BARRIER.read(r, "model"), "seed_a": a, "seed_b": b,
                        "method": method,  # naive aligns nothing: no group
                        "group": group_of(BARRIER, r),
                        "space": BARRIER.read(r, "space") or INTERPOLATION_SERIES.read(s, "space"),
                        "split": BARRIER.read(r, "split"), "metric": metric, "lam": lam,
                        "value": c[k], "series": label, **band,
                    })  # fmt: skip
    return _frame(rows, CURVE_COLUMNS)


def tidy_ablation(result: Mapping[str, Any]) -> pd.DataFrame:
    """The Llama ablation: one row per entry × (method, group, space) × pair × metric (the loss
    barrier in nats, the accuracy barrier as a fraction), and one per entry × seed of its test
    loss (``metric`` ``test_loss``; no method)."""
    split = ABLATION.read(result, "split")
    rows = []
    for step in ABLATION.read(result, "steps"):
        model = ABLATION_STEP.read(step, "model")
        for seed in ABLATION_STEP.read(step, "seeds"):
            rows.append({"model": model, "seed_a": ABLATION_SEED.read(seed, "seed"),
                         "split": split, "metric": "test_loss",
                         "value": ABLATION_SEED.read(seed, "test_loss")})  # fmt: skip
        for c in ABLATION_STEP.read(step, "cells"):
            method = ABLATION_CELL.read(c, "method")
            group = group_of(ABLATION_CELL, c)
            pairs = ABLATION_STEP.read(step, "pairs")
            for metric, values in (("barrier_loss", ABLATION_CELL.read(c, "per_pair_loss")),
                                   ("barrier_accuracy",
                                    ABLATION_CELL.read(c, "per_pair_accuracy"))):  # fmt: skip
                for (a, b), v in zip(pairs, values, strict=True):
                    rows.append({"model": model, "seed_a": a, "seed_b": b,
                                 "method": method + (", calibrated" if ABLATION_CELL.read(
                                     c, "calibrated") else ""),
                                 "group": group,
                                 "space": ABLATION_CELL.read(c, "space"), "split": split,
                                 "metric": metric, "value": v})  # fmt: skip
    return _frame(rows, ["model", "seed_a", "seed_b", "method", "group", "space", "split",
                         "metric", "value"])  # fmt: skip


def tidy_matrix(result: Mapping[str, Any]) -> pd.DataFrame:
    """The all-pairs barrier matrix: one row per (seed A, seed B) cell × metric, the diagonal
    included (0, ``measured`` False)."""
    seeds = MATRIX.read(result, "seeds")
    rows = []
    for metric, key in (("loss barrier", "barrier_loss"), ("accuracy barrier", "barrier_accuracy")):
        z = MATRIX.read(result, key)
        for i, a in enumerate(seeds):
            for j, b in enumerate(seeds):
                rows.append({
                    "model": MATRIX.read(result, "model"), "seed_a": a, "seed_b": b,
                    "method": MATRIX.read(result, "method"),
                    "group": group_of(MATRIX, result),
                    "space": MATRIX.read(result, "space"), "split": MATRIX.read(result, "split"),
                    "metric": metric, "value": z[i][j], "measured": i != j,
                })  # fmt: skip
    columns = ["model", "seed_a", "seed_b", "method", "group", "space", "split", "metric",
               "value", "measured"]  # fmt: skip
    return _frame(rows, columns)


def tidy_curve(result: Mapping[str, Any]) -> pd.DataFrame:
    """The curved path beside its line (:func:`~landscape.plots.curves.figure_curve`): one row per
    alignment × path (``line`` or the curve's kind) × metric × λ, and each path's barriers."""
    a, b = CURVED.read(result, "seeds")
    kind = CURVED.read(result, "kind")
    rows = []
    for al in CURVED.read(result, "alignments"):
        method = CURVED_ALIGNMENT.read(al, "method")
        for path, name in (("line", "line"), ("curve", kind)):
            c = CURVED_ALIGNMENT.read(al, path)
            for metric in METRICS:
                for lam, value in zip(CURVED.read(result, "lambdas"), CURVED_PATH.read(c, metric),
                                      strict=True):  # fmt: skip
                    rows.append({
                        "model": CURVED.read(result, "model"), "seed_a": a, "seed_b": b,
                        "method": method,
                        "group": group_of(CURVED_ALIGNMENT, al),
                        "split": CURVED.read(result, "split"), "path": name, "metric": metric,
                        "lam": lam, "value": value,
                        "barrier": CURVED_PATH.read(c, f"barrier_{metric}"),
                    })  # fmt: skip
    columns = ["model", "seed_a", "seed_b", "method", "group", "split", "path", "metric", "lam",
               "value", "barrier"]  # fmt: skip
    return _frame(rows, columns)


def tidy_triangles(results: Sequence[Mapping[str, Any]], model: str = "") -> pd.DataFrame:
    """The triangles of :func:`~landscape.plots.triangle.figure_triangles`: one row per
    triangle × grid point × metric, with the mixture weights and whether the point is in the
    basin."""
    rows = []
    for r in results:
        a, b, c = TRIANGLE.read(r, "seeds")
        loss, acc = TRIANGLE.read(r, "loss"), TRIANGLE.read(r, "accuracy")
        excess, tol = TRIANGLE.read(r, "excess_loss"), TRIANGLE.read(r, "tol")
        for p, w in enumerate(TRIANGLE.read(r, "points")):
            for metric, values in (("loss", loss), ("accuracy", acc), ("excess loss", excess)):
                rows.append({
                    "model": model, "seed_a": a, "seed_b": b, "seed_c": c,
                    "method": TRIANGLE.read(r, "method"),
                    "group": group_of(TRIANGLE, r),
                    "split": TRIANGLE.read(r, "split"), "w_a": w[0], "w_b": w[1], "w_c": w[2],
                    "metric": metric, "value": values[p], "in_basin": excess[p] <= tol,
                })  # fmt: skip
    columns = ["model", "seed_a", "seed_b", "seed_c", "method", "group", "split", "w_a", "w_b",
               "w_c", "metric", "value", "in_basin"]  # fmt: skip
    return _frame(rows, columns)


def tidy_surface(result: Mapping[str, Any]) -> pd.DataFrame:
    """The surface of :func:`~landscape.plots.surface.figure_surface`: one row per grid point ×
    metric (``part`` grid), per model point × metric (``part`` model, ``label`` the model) and
    per point of a straight path × metric (``part`` path, ``label`` its ends, ``lam``)."""
    kind, seeds = SURFACE.read(result, "kind"), SURFACE.read(result, "seeds")
    base = {"model": SURFACE.read(result, "model"), "seeds": " ".join(map(str, seeds)),
            "kind": kind, "method": SURFACE.read(result, "method"),
            "group": group_of(SURFACE, result),
            "split": SURFACE.read(result, "split")}  # fmt: skip
    rows = []
    xs, ys = SURFACE.read(result, "x"), SURFACE.read(result, "y")
    for metric in METRICS:
        for i, (y, row) in enumerate(zip(ys, SURFACE.read(result, metric), strict=True)):
            for x, v in zip(xs, row, strict=True):
                rows.append({**base, "part": "grid", "label": "", "x": x, "y": y, "lam": None,
                             "metric": metric, "value": v, "row": i})  # fmt: skip
        for p in SURFACE.read(result, "points"):
            rows.append({**base, "part": "model", "label": SURFACE_POINT.read(p, "label"),
                         "x": SURFACE_POINT.read(p, "x"), "y": SURFACE_POINT.read(p, "y"),
                         "lam": None, "metric": metric,
                         "value": SURFACE_POINT.read(p, metric)})  # fmt: skip
        for path in SURFACE.read(result, "paths"):
            px, py = SURFACE_PATH.read(path, "x"), SURFACE_PATH.read(path, "y")
            lams = SURFACE_PATH.read(path, "lambdas") or [None] * len(px)
            values = SURFACE_PATH.read(path, metric)
            for x, y, lam, v in zip(px, py, lams, values, strict=True):
                rows.append({**base, "part": "path", "label": SURFACE_PATH.read(path, "label"),
                             "x": x, "y": y, "lam": lam, "metric": metric, "value": v})  # fmt: skip
    columns = ["model", "seeds", "kind", "method", "group", "split", "part", "label", "x", "y",
               "lam", "metric", "value"]  # fmt: skip
    return _frame(rows, columns)


def tidy_eigenangles(result: Mapping[str, Any], model: str = "",
                     seeds: Sequence[int] = ("", "")) -> pd.DataFrame:  # fmt: skip
    """The eigenangles of each rotation drawn (O_WM, the correction, Haar): one row each."""
    rows = []
    for rotation, key in (("O_WM", "angles_wm"), ("O_LM·O_WMᵀ", "angles_correction"),
                          ("Haar", "angles_haar")):  # fmt: skip
        for k, angle in enumerate(EIGENANGLES.read(result, key) or []):
            rows.append({"model": model, "seed_a": seeds[0], "seed_b": seeds[1],
                         "rotation": rotation, "index": k, "angle_rad": angle})  # fmt: skip
    return _frame(rows, ["model", "seed_a", "seed_b", "rotation", "index", "angle_rad"])


def tidy_objective(values: Sequence[float]) -> pd.DataFrame:
    """The weight-matching objective per round."""
    return _frame([{"round": i, "metric": "objective", "value": v} for i, v in enumerate(values)],
                  ["round", "metric", "value"])  # fmt: skip


def tidy_lm_curve(curve: Sequence[Mapping[str, float]]) -> pd.DataFrame:
    """The learned-matching training loss per step."""
    rows = [{"step": LM_STEP.read(c, "step"), "metric": "merged train loss",
             "value": LM_STEP.read(c, "loss")} for c in curve]  # fmt: skip
    return _frame(rows, ["step", "metric", "value"])


def tidy_iterations(result: Mapping[str, Any], part: str) -> pd.DataFrame:
    """Barriers per weight-matching round (``part="rounds"``) or per learned checkpoint
    (``"checkpoints"``, with ``returned``: the checkpoint learned matching gives back): one row
    per line point × metric."""
    split, space = ITERATIONS.read(result, "split"), ITERATIONS.read(result, "space")
    rows = []
    for r in ITERATIONS.read(result, part):
        if part == "rounds":
            where = {"group": ITERATION_ROUND.read(r, "group"),
                     "round": ITERATION_ROUND.read(r, "round")}  # fmt: skip
            read = ITERATION_ROUND.read
        else:
            where = {"init": LEARNED_CHECKPOINT.read(r, "init"),
                     "step": LEARNED_CHECKPOINT.read(r, "step"),
                     "returned": bool(LEARNED_CHECKPOINT.read(r, "selected"))}  # fmt: skip
            read = LEARNED_CHECKPOINT.read
        for metric in METRICS:
            rows.append({**where, "space": space, "split": split, "metric": f"{metric} barrier",
                         "value": read(r, f"barrier_{metric}")})  # fmt: skip
    first = ["group", "round"] if part == "rounds" else ["init", "step", "returned"]
    return _frame(rows, [*first, "space", "split", "metric", "value"])


def tidy_atlas(result: Mapping[str, Any], model: str = "") -> pd.DataFrame:
    """The atlas: one row per point × panel (raw or aligned coordinates)."""
    proj = ATLAS.read(result, "projection")
    rows = []
    for p in ATLAS.read(result, "points"):
        for panel in ("raw", "aligned"):
            x, y = ATLAS_POINT.read(p, panel)[:2]
            rows.append({"model": model, "seed": ATLAS_POINT.read(p, "seed"),
                         "kind": ATLAS_POINT.read(p, "kind"), "copy": ATLAS_POINT.read(p, "copy"),
                         "panel": panel, "projection": proj, "x": x, "y": y})  # fmt: skip
    return _frame(rows, ["model", "seed", "kind", "copy", "panel", "projection", "x", "y"])


def tidy_zoo(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The zoo overview: one row per model × trained seed."""
    out = [{"model": ZOO_ROW.read(r, "name"), "seed": ZOO_SEED.read(s, "seed"),
            "metric": "test accuracy", "value": ZOO_SEED.read(s, "test_accuracy")}
           for r in rows for s in ZOO_ROW.read(r, "seeds")]  # fmt: skip
    return _frame(out, ["model", "seed", "metric", "value"])


def tidy_training(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Training curves: one row per run × evaluation step × metric."""
    rows = []
    for run in runs:
        c = TRAINING_RUN.read(run, "curves")
        for metric in ("train_loss", "test_loss", "test_accuracy"):
            for step, v in zip(TRAINING_CURVES.read(c, "step"), TRAINING_CURVES.read(c, metric),
                               strict=True):  # fmt: skip
                rows.append({"run": TRAINING_RUN.read(run, "label"), "step": step,
                             "metric": metric.replace("_", " "), "value": v})  # fmt: skip
    return _frame(rows, ["run", "step", "metric", "value"])


def tidy_records(rows: Iterable[Mapping[str, Any]], **settings: Any) -> pd.DataFrame:
    """Rows that are already one record each (the gauge page's tables), nested fields flattened
    to ``outer.inner`` columns and the ``settings`` (model, seed, …) as leading columns."""
    flat = pd.json_normalize([dict(r) for r in rows])
    for i, (k, v) in enumerate((k, v) for k, v in settings.items() if k not in flat.columns):
        flat.insert(i, k, v)
    return flat


def tidy_symmetry_levels() -> pd.DataFrame:
    """The Home page's diagram of the four nested symmetry levels: one row per level, its
    group and what it acts on (the diagram is boxes and words, which a CSV of traces misses)."""
    rows = []
    for i, (name, detail) in enumerate(SYMMETRY_LEVELS, start=1):
        group, _, acts = detail.replace("<br>", " ").partition(": ")
        rows.append({"level": i, "name": name, "group": group, "acts_on": acts,
                     "contains_levels": ", ".join(str(k) for k in range(1, i))})  # fmt: skip
    return _frame(rows, ["level", "name", "group", "acts_on", "contains_levels"])
