"""The one prepared device check: every GPU workload of the product, timed against its target and
checked against a CPU value shipped beside the script.

    python bench/gpu.py --parts zoo --data DIR      # one call, ≤ 8 minutes on an H200
    python bench/gpu.py --parts big --data DIR      # the other call
    python bench/gpu.py --smoke                      # the same code on the CPU, small (CI)
    python bench/gpu.py --record [--smoke] --data DIR   # the CPU references (hours on 2 cores)

``--data`` is a folder holding the four Fashion-MNIST IDX files and ``shakespeare.txt`` (as
``landscape data fetch shakespeare`` stores it): the device machine has no network, so the
data travels with the call. The repository ignores ``.device-data/`` for this (35 MB)::

    mkdir -p .device-data && cp /usr/share/datasets/fashion-mnist/*.gz .device-data/ \
        && cp ~/.cache/landscape/data/shakespeare.txt .device-data/
    # then, on the lent machine, carrying .device-data, each call ≤ 480 s:
    python bench/gpu.py --parts zoo --data .device-data
    python bench/gpu.py --parts big --data .device-data
 Every workload runs with an empty cache of its own (no result is
served from an earlier one), one after the other, each under a time guard, the whole call under
``--budget`` seconds; a workload that does not fit says so and the others keep their numbers. Parts:

- ``zoo``: the naive curve of vit-fashion-d128 (25 points on the 10,000 test images); weight
  matching (orth) of its seeds 0 and 1 and the barrier; learned matching (orth, 300 steps,
  the weight-matching start included) of gpt-shakespeare-d128-drop0.3's seeds 0 and 1; the
  triangle of vit-fashion-d128's seeds 0, 1, 2 under weight/orth; training vit-fashion-d128
  (7,500 steps) for seed 0 alone and for seeds 0, 1, 2 together.
- ``big``: ``table vit-fashion-d128 --space both`` (three pairs, every method, both merge
  spaces); the 1.1B-parameter Llama pair of ``bench/bench_big.py`` (TinyLlama's configuration,
  B = A plus noise) under weight/orth with a 5-point curve, its GPU memory, and the same pair at
  two layers against its CPU reference; the growth series of ``bench/bench_scaling.py`` to
  width 4096; last, the two-layer pair's curve in the circuits space (its rotary QK circuits
  at every offset, in the joint form), with its CPU record where one was taken.
- ``paper-vit``, ``paper-gpt``: Table 2 at the paper's scale (issue #41 item 5): the three
  seeds of ``vit-fashion-d256-l6`` or ``gpt-shakespeare-d256-l6`` trained together on the
  device, then ``table MODEL --space both`` on them; no CPU reference (hours there).
- ``landscape``: the loss surface around vit-fashion-d128 seed 0 (11 × 11 models on the whole
  test split) and a Bézier curve trained between its seeds 0 and 1 (weight/perm, 200 steps):
  times, with the values for a later CPU record; no CPU reference yet (minutes to an hour there).
- ``curvature``: ``landscape curvature`` of the dropout GPT's seeds 0 and 1 on the device (naive
  line, top-5 eigenvalues and a 16-probe trace at λ = 0, ½, 1 on the default 16 training
  windows; the value is the midpoint's top eigenvalue), and ``surface --directions hessian``
  around its seed 0 (the top two eigenvectors, then 5 × 5 models on the test split; the value is
  λ₁, 4.80 on the CPU as docs/design.md records). A CPU run of the same part in seconds, on
  mlp-digits: ``python bench/gpu.py --smoke --parts curvature``.
- ``moe``: ``moe-shakespeare-d64``'s seeds 0 and 1 trained on the device, then weight/orth and
  learned/orth (300 steps) over experts, units and the stream, with their barriers (the CPU's
  pair 0–1 from its own checkpoints: 1.570 and 0.451, a comparison only); and
  ``surface --directions trajectory --trajectories 0 1`` around gpt-shakespeare seed 0 (both
  runs retrained with snapshots on the device; the value is seed 0's path's projection error).
  Smoke: ``python bench/gpu.py --smoke --parts moe`` (the same workloads on mlp-digits).

Each result is compared with ``bench/gpu_reference.json`` (written by ``--record`` on the CPU
with this code): barriers within 1% (the cross-machine target of weight matching) or 0.005
nats, learned barriers within 10% or 0.005, trained seeds within the README's cross-machine
tolerance of the shipped checkpoints' test metrics. One table (seconds against the issue's
measurement before and the target, the value against the CPU's) is printed and written to
``$OUT/gpu_bench.txt`` with the raw results in ``gpu_bench.json``. Imports only what a bare
GPU image has (torch, numpy, scipy, safetensors, transformers): no app packages.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

REFERENCE = Path(__file__).with_name("gpu_reference.json")
BUDGET_S = 450  # one call: 8 minutes of the lease, less start-up and writing
VIT, GPT = "vit-fashion-d128", "gpt-shakespeare-d128-drop0.3"
MOE = "moe-shakespeare-d64"


@dataclass
class Result:
    """One workload: what it measured, how long it took, and what it is checked against."""

    name: str
    what: str
    seconds: float | None = None
    before_s: float | None = None  # the measurement on the H200 before this work
    target_s: float | None = None
    value: float | None = None  # the number checked against the CPU
    reference: float | None = None
    rel_tol: float = 0.01
    abs_tol: float = 0.005
    facts: dict[str, Any] = field(default_factory=dict)
    problem: str = ""

    @property
    def agrees(self) -> bool | None:
        if self.value is None or self.reference is None:
            return None
        tol = max(self.rel_tol * abs(self.reference), self.abs_tol)
        return abs(self.value - self.reference) <= tol

    @property
    def met(self) -> bool | None:
        if self.seconds is None or self.target_s is None:
            return None
        return self.seconds <= self.target_s


# ---------------------------------------------------------------- workloads


def _cache(tmp: Path, name: str):
    from landscape.store.cache import Cache

    return Cache(tmp / name)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def curve(device: torch.device, tmp: Path, model: str = VIT) -> Result:
    """Naive curve: evaluation of 25 interpolated models on the whole test split."""
    from landscape.experiments.context import RunContext
    from landscape.experiments.evaluation import EvalOptions, evaluate_path
    from landscape.sources import Source, data_of

    r = Result("curve", f"naive curve, {model} 0-1, 25 points, test split", before_s=1.1,
               target_s=1.1, rel_tol=1e-4, abs_tol=1e-4)  # fmt: skip
    a, b = Source(model, 0).load(), Source(model, 1).load()
    data = data_of(a)
    ev = data.evaluation("test")
    opts, on = EvalOptions(**data.eval_options(a.cfg, ev.inputs)), RunContext(device)
    lam = torch.linspace(0, 1, 25, dtype=torch.float64)
    evaluate_path(a.cfg, a.params, b.params, ev.inputs[:64], ev.targets[:64], lam[:2], opts,
                  context=on)  # warm-up: kernels and allocator  # fmt: skip
    _sync(device)
    t = time.perf_counter()
    loss, acc = evaluate_path(a.cfg, a.params, b.params, ev.inputs, ev.targets, lam, opts,
                              context=on)  # fmt: skip
    _sync(device)
    r.seconds = time.perf_counter() - t
    from landscape.experiments.basins import barrier_from_curve

    r.value = barrier_from_curve(lam, loss, acc).barrier_loss
    r.facts["images"] = len(ev)
    return r


def _barrier(device, tmp, name, model, seeds, method, group, **kw) -> dict[str, Any]:
    from landscape.experiments.barriers.pipeline import measure_barrier
    from landscape.experiments.barriers.request import seeds_request

    run = measure_barrier(seeds_request(model, seeds, method, group, **kw), device=device,
                          cache=_cache(tmp, name))  # fmt: skip
    return run.to_dict() | {"rounds": run.entry["matching"]["rounds"]}


def weight(device: torch.device, tmp: Path, model: str = VIT) -> Result:
    """Weight matching under O(d) and the barrier (25 points)."""
    r = Result("weight", f"weight/orth matching, {model} 0-1 (and its barrier)", before_s=23,
               target_s=2)  # fmt: skip
    t = time.perf_counter()
    out = _barrier(device, tmp, "weight", model, (0, 1), "weight", "orth")
    r.facts |= {"barrier_s": round(time.perf_counter() - t, 2), "rounds": out["rounds"],
                "function_check": out["function_check"]}  # fmt: skip
    r.seconds, r.value = out["matching_seconds"], out["barrier_loss"]
    return r


def learned(device: torch.device, tmp: Path, model: str = GPT, steps: int = 300) -> Result:
    """Learned matching under O(d), the weight-matching start included."""
    r = Result("learned", f"learned/orth {steps} steps, {model} 0-1, start included",
               before_s=55, target_s=5, rel_tol=0.1)  # fmt: skip
    out = _barrier(device, tmp, "learned", model, (0, 1), "learned", "orth",
                   options={"steps": steps})  # fmt: skip
    r.seconds, r.value = out["matching_seconds"], out["barrier_loss"]
    r.facts["function_check"] = out["function_check"]
    return r


def triangle(device: torch.device, tmp: Path, model: str = VIT) -> Result:
    """The triangle of three seeds under weight/orth (default resolution)."""
    from landscape.experiments.barriers.triangles import triangle as run_triangle
    from landscape.experiments.context import RunContext

    r = Result("triangle", f"triangle weight/orth, {model} 0 1 2", before_s=22)
    t = time.perf_counter()
    out = run_triangle(model, (0, 1, 2), "weight", "orth",
                       context=RunContext(device, _cache(tmp, "triangle")))  # fmt: skip
    r.seconds = time.perf_counter() - t
    # the worst loss above the plane of the corners, and the share of points within tolerance
    r.value = max(out["excess_loss"])
    r.facts |= {"basin_fraction": out["basin_fraction"], "function_check": out["function_check"]}
    return r


def surface(device: torch.device, tmp: Path, model: str = VIT, resolution: int = 11) -> Result:
    """The loss surface around seed 0 along filter-normalised directions: resolution² models
    evaluated on the whole test split, in batched chunks."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import SurfaceOptions
    from landscape.experiments.surfaces import surface as run_surface

    r = Result("surface", f"surface around {model} seed 0, {resolution}×{resolution}, test split",
               rel_tol=1e-4, abs_tol=1e-4)  # fmt: skip
    t = time.perf_counter()
    out = run_surface(model, [0], options=SurfaceOptions(resolution, extent=1.0),
                      context=RunContext(device, _cache(tmp, "surface")))  # fmt: skip
    _sync(device)
    r.seconds = time.perf_counter() - t
    corner = out["loss"][0][0]  # the grid's corner, (-extent, -extent): far from the model
    r.value = corner
    r.facts |= {
        "models": resolution * resolution,
        "centre_loss": out["loss"][resolution // 2][resolution // 2],
        "max_loss": max(max(row) for row in out["loss"]),
    }
    return r


def curvature(device: torch.device, tmp: Path, model: str = GPT, probes: int = 16,
              top_k: int = 5, points: int = 3, batch: int | None = None) -> Result:  # fmt: skip
    """``landscape curvature`` of seeds 0 and 1, naive: top-k eigenvalues and the trace at
    ``points`` values of λ (Hessian-vector products on the device, Lanczos on the CPU)."""
    from landscape.experiments.curvature import curvature as run_curvature

    r = Result("curvature", f"curvature {model} 0-1 naive, top-{top_k} at {points} points, "
               f"{probes} probes", rel_tol=1e-3, abs_tol=1e-3)  # fmt: skip
    t = time.perf_counter()
    out = run_curvature(model, (0, 1), "naive", device=device, cache=_cache(tmp, "curvature"),
                        top_k=top_k, points=points, probes=probes, batch=batch)  # fmt: skip
    _sync(device)
    r.seconds = time.perf_counter() - t
    line = out["lines"][0]
    r.value = line["top_eigenvalue"][points // 2]  # the midpoint's (with 3 points)
    r.facts |= {"top_eigenvalue": line["top_eigenvalue"], "trace": line["trace"],
                "products": sum(line["hessian_vector_products"]),
                "converged": all(line["converged"])}  # fmt: skip
    return r


def hessian_surface(device: torch.device, tmp: Path, model: str = GPT, resolution: int = 5
                    ) -> Result:  # fmt: skip
    """``surface --directions hessian`` around seed 0: Lanczos for the top two eigenvectors on
    the device's products, then resolution² models on the test split."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import SurfaceOptions
    from landscape.experiments.surfaces import surface as run_surface

    r = Result("hessian-surface", f"surface around {model} seed 0 along its Hessian, "
               f"{resolution}×{resolution}", rel_tol=1e-3, abs_tol=1e-3)  # fmt: skip
    t = time.perf_counter()
    out = run_surface(
        model,
        [0],
        options=SurfaceOptions(resolution, directions="hessian", extent=0.5),
        context=RunContext(device, _cache(tmp, "hessian-surface")),
    )
    _sync(device)
    r.seconds = time.perf_counter() - t
    h = out["hessian"]
    r.value = h["eigenvalues"][0]
    r.facts |= {"eigenvalues": h["eigenvalues"], "products": h["hessian_vector_products"],
                "converged": h["converged"], "centre_loss": out["points"][0]["loss"]}  # fmt: skip
    return r


def moe(device: torch.device, tmp: Path, model: str = MOE, method: str = "weight",
        steps: int = 300) -> Result:  # fmt: skip
    """The mixture of experts' seeds 0 and 1 (not shipped: trained on the device into this
    workload's cache), aligned over experts, units and the residual stream (``method``/orth;
    learned matching ``steps`` steps from weight matching's start), and the barrier (25 points,
    test split). The checkpoints are the device's, so the CPU's barriers (weight/orth 1.570,
    learned/orth 0.451 on pair 0–1, README) are a comparison, not a reference."""
    r = Result(f"moe-{method}", f"{method}/orth over experts, {model} 0-1, seeds trained here",
               rel_tol=0.1)  # fmt: skip
    from landscape.matching import method_of

    t = time.perf_counter()
    # the steps of a method that declares them (learned matching)
    takes_steps = any(s.name == "steps" for s in method_of(method).declared())
    kw = {"options": {"steps": steps}} if takes_steps else {}
    out = _barrier(device, tmp, f"moe-{method}", model, (0, 1), method, "orth", **kw)
    _sync(device)
    r.seconds, r.value = time.perf_counter() - t, out["barrier_loss"]
    r.facts |= {"matching_s": out["matching_seconds"], "function_check": out["function_check"]}
    return r


def trajectories(device: torch.device, tmp: Path, model: str = "gpt-shakespeare",
                 resolution: int = 7) -> Result:  # fmt: skip
    """``surface --directions trajectory --trajectories 0 1`` around seed 0: both seeds' runs
    retrained on the device with their snapshots, the plane of seed 0's path, resolution²
    models on the test split; the value is seed 0's path's projection error."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import SurfaceOptions
    from landscape.experiments.surfaces import surface as run_surface

    r = Result("trajectories", f"surface on {model} seed 0's path plane, paths of seeds 0 and 1, "
               f"{resolution}×{resolution}", rel_tol=0.05, abs_tol=0.02)  # fmt: skip
    t = time.perf_counter()
    out = run_surface(model, [0], options=SurfaceOptions(
        resolution, directions="trajectory", trajectories=(0, 1)),
        context=RunContext(device, _cache(tmp, "trajectories")))  # fmt: skip
    _sync(device)
    r.seconds = time.perf_counter() - t
    paths = out["trajectories"]
    r.value = paths[0]["error"]
    r.facts |= {"projection_error": [p["error"] for p in paths],
                "end_gap": [p.get("end_gap") for p in paths]}  # fmt: skip
    return r


def bezier(device: torch.device, tmp: Path, model: str = VIT, steps: int = 200) -> Result:
    """A quadratic Bézier curve trained between seeds 0 and 1 (weight/perm), its control point
    on the device, and the curve's barrier beside the line's."""
    from landscape.experiments import RunContext, seeds_request
    from landscape.experiments.barriers.curved import CurveOptions
    from landscape.experiments.barriers.curved import curve as run_curve

    r = Result("bezier", f"Bézier curve {steps} steps, {model} 0-1 weight/perm", rel_tol=0.2,
               abs_tol=0.02)  # fmt: skip
    t = time.perf_counter()
    out = run_curve(seeds_request(model, (0, 1), "weight", "perm", points=25),
                    CurveOptions(steps=steps),
                    context=RunContext(device, _cache(tmp, "bezier")))  # fmt: skip
    _sync(device)
    r.seconds = time.perf_counter() - t
    aligned = out["alignments"][-1]
    r.value = aligned["curve"]["barrier_loss"]
    r.facts |= {"line_barrier": aligned["line"]["barrier_loss"],
                "training_s": aligned["training_seconds"]}  # fmt: skip
    return r


def train(device: torch.device, tmp: Path, model: str = VIT, seeds=(0,)) -> Result:
    """Training from scratch (the zoo recipe), solo or several seeds at once; each seed's test
    metrics against the shipped checkpoint's."""
    from landscape.models.train import train_seeds
    from landscape.sources.zoo import REPRODUCIBLE_METRICS, compare_with_shipped

    many = len(seeds) > 1
    r = Result("train3" if many else "train1", f"train {model} seeds {' '.join(map(str, seeds))}"
               + (" together" if many else ""), before_s=None if many else 126,
               target_s=45 if many else 30)  # fmt: skip
    _sync(device)
    t = time.perf_counter()
    got = train_seeds(model, list(seeds), device=device, cache=_cache(tmp, r.name))
    _sync(device)
    r.seconds = time.perf_counter() - t
    worst = 0.0
    for ckpt in got.checkpoints:
        deltas = (compare_with_shipped(ckpt) or {}).get("metric_deltas", {})
        for k, tol in REPRODUCIBLE_METRICS.items():
            worst = max(worst, deltas.get(k, math.inf) / tol)
        r.facts[f"seed{ckpt.seed}"] = {k: round(ckpt.meta["metrics"][k], 4)
                                       for k in REPRODUCIBLE_METRICS}  # fmt: skip
    r.facts["batched"] = got.batched
    # the check: the largest metric difference from the shipped seeds, in units of the tolerance
    r.value, r.reference, r.rel_tol, r.abs_tol = worst, 0.0, 0.0, 1.0
    return r


def table(device: torch.device, tmp: Path, model: str = VIT) -> Result:
    """``table MODEL --space both``: three pairs, every method, both spaces; its worst cell
    against the CPU's same cell."""
    from landscape.experiments.barriers.tables import TableOptions
    from landscape.experiments.barriers.tables import table as run_table
    from landscape.experiments.context import RunContext

    r = Result("table", f"table {model} --space both (3 pairs)", before_s=22 * 60,
               target_s=10 * 60)  # fmt: skip
    t = time.perf_counter()
    out = run_table(
        model, 3, TableOptions(space="both"), context=RunContext(device, _cache(tmp, "table"))
    )
    r.seconds = time.perf_counter() - t
    r.facts["cells"] = {
        f"{row['method']}/{row['group']}/{row['space']}/{'-'.join(map(str, pair))}": loss
        for row in out["rows"]
        for pair, loss in zip(out["pairs"], row["per_pair_loss"], strict=True)
    }
    return r


def paper(device: torch.device, tmp: Path, model: str, space: str = "both") -> Result:
    """Table 2 at the paper's scale: ``model``'s seeds 0, 1, 2 trained together on the device
    (not shipped, so from scratch), then ``table MODEL --space both`` on them from the same
    cache; the rows (mean ± s.e.m. over the three pairs, per-pair values) go into the report
    beside the paper's numbers. There is no CPU reference: these models take hours there."""
    from landscape.experiments.barriers.tables import TableOptions
    from landscape.experiments.barriers.tables import table as run_table
    from landscape.experiments.context import RunContext
    from landscape.models.train import train_seeds

    r = Result(f"paper-{model}", f"train {model} seeds 0 1 2 together, then its table "
               f"--space {space}")  # fmt: skip
    cache = _cache(tmp, r.name)
    _sync(device)
    t = time.perf_counter()
    got = train_seeds(model, [0, 1, 2], device=device, cache=cache)
    _sync(device)
    r.facts["train_s"] = round(time.perf_counter() - t, 1)
    r.facts["batched"] = got.batched
    r.facts["test"] = {ck.seed: {k: round(v, 4) for k, v in ck.meta["metrics"].items()
                                 if k.startswith("test")} for ck in got.checkpoints}  # fmt: skip
    out = run_table(model, 3, TableOptions(space=space), context=RunContext(device, cache))
    r.seconds = time.perf_counter() - t
    lines = ["| method | space | loss barrier | per pair | acc. barrier | matching s | paper |",
             "|" + "---|" * 7]  # fmt: skip
    for row in out["rows"]:
        per = " ".join(f"{x:.3f}" for x in row["per_pair_loss"])
        lines.append(
            f"| {row['method']}/{row['group']} | {row['space']} | {row['barrier_loss']:.3f} ± "
            f"{row['barrier_loss_sem']:.3f} | {per} | {row['barrier_accuracy']:.3f} ± "
            f"{row['barrier_accuracy_sem']:.3f} | {row['matching_seconds']:.1f} | "
            f"{row['paper'] or '–'} |"
        )
    r.facts["table"] = "\n".join(lines)
    r.facts["cells"] = {
        f"{row['method']}/{row['group']}/{row['space']}/{'-'.join(map(str, pair))}": loss
        for row in out["rows"]
        for pair, loss in zip(out["pairs"], row["per_pair_loss"], strict=True)
    }
    return r


def llama(device: torch.device, tmp: Path, layers: int = 22, space: str = "weights") -> Result:
    """bench_big's Llama pair (TinyLlama's configuration) under weight/orth with a 5-point
    curve in merge ``space``: seconds, GPU memory, function checks. In the circuits space the
    curve runs in the joint form (rotary: its QK circuits at every offset)."""
    from bench.bench_big import make_pair
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.pairs import barrier_paths, paths_request
    from landscape.sources import DataSpec

    big = layers >= 22
    name = ("llama" if big else f"llama{layers}") + ("c" if space == "circuits" else "")
    r = Result(name, f"Llama pair, {layers} layers of TinyLlama, weight/orth + 5-point curve "
               f"({space} space)", before_s=2017 if big and space == "weights" else None,
               target_s=300 if big and space == "weights" else None)  # fmt: skip
    a, b = make_pair(tmp / "llama", layers, 0.1)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t = time.perf_counter()
    data = DataSpec(text=str(ROOT / "README.md"), n_ctx=64, max_windows=16)
    out = barrier_paths(
        paths_request(a, b, "weight", "orth", data=data, points=5, space=space),
        context=RunContext(device, _cache(tmp, f"llama{layers}{space}")),
    )
    r.seconds = time.perf_counter() - t
    r.value = out["barrier_loss"]
    r.facts |= {"matching_s": out["matching"]["seconds"], "rounds": out["matching"]["rounds"],
                "function_check": out["function_check"],
                "parameters": out["parameters"]}  # fmt: skip
    if device.type == "cuda":
        r.facts["gpu_peak_gb"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    shutil.rmtree(tmp / "llama", ignore_errors=True)
    return r


def growth(device: torch.device, tmp: Path, budget_s: float = 120) -> Result:
    from bench import bench_scaling

    r = Result("growth", "growth series to width 4096 (bench_scaling)")
    t = time.perf_counter()
    widths = (128, 256, 512, 1024, 2048, 4096) if device.type == "cuda" else (32, 64)
    text, _ = bench_scaling.run(device, widths, (5, 25, 100), (256, 1024, 4096),
                                budget_s=budget_s, repeats=1)  # fmt: skip
    r.seconds = time.perf_counter() - t
    r.facts["table"] = text
    return r


# ---------------------------------------------------------------- running

PARTS: dict[str, list[tuple[str, Callable[..., Result], dict[str, Any], int]]] = {
    # (name, workload, keywords, time guard in seconds)
    "zoo": [
        ("curve", curve, {}, 60),
        ("weight", weight, {}, 90),
        ("learned", learned, {}, 120),
        ("triangle", triangle, {}, 90),
        ("train1", train, {"seeds": (0,)}, 120),
        ("train3", train, {"seeds": (0, 1, 2)}, 120),
    ],
    "big": [
        ("table", table, {}, 300),
        ("llama2", llama, {"layers": 2}, 90),
        ("llama", llama, {"layers": 22}, 330),
        ("growth", growth, {"budget_s": 100}, 120),
        ("llama2c", llama, {"layers": 2, "space": "circuits"}, 90),
    ],
    # Table 2 at the paper's scale (6 layers × 256), a call each: a third and fourth call, past
    # one session's 15 minutes of device time when zoo and big run first
    # surfaces and curved paths (batched evaluation of many models, a control point trained on
    # the device)
    "landscape": [
        ("surface", surface, {}, 240),
        ("bezier", bezier, {}, 240),
    ],
    # the Hessian on the device: products of the dropout GPT, then a surface along them
    "curvature": [
        ("curvature", curvature, {}, 240),
        ("hessian-surface", hessian_surface, {}, 180),
    ],
    # the mixture of experts trained on the device and aligned over its experts, and training
    # paths on a surface (runs retrained with snapshots on the device)
    "moe": [
        ("moe-weight", moe, {}, 150),
        ("moe-learned", moe, {"method": "learned"}, 150),
        ("trajectories", trajectories, {}, 150),
    ],
    "paper-vit": [("paper-vit", paper, {"model": "vit-fashion-d256-l6"}, 450)],
    "paper-gpt": [("paper-gpt", paper, {"model": "gpt-shakespeare-d256-l6"}, 450)],
}
# the same code on the CPU, small enough for a test: zoo models that need no data download
SMOKE = [
    ("curve", curve, {"model": "mlp-digits"}, 60),
    ("weight", weight, {"model": "mlp-digits"}, 60),
    ("learned", learned, {"model": "mlp-digits", "steps": 10}, 60),
    ("triangle", triangle, {"model": "mlp-digits"}, 60),
    ("train3", train, {"model": "mlp-digits", "seeds": (0, 1)}, 90),
    ("growth", growth, {"budget_s": 20}, 40),
    ("surface", surface, {"model": "mlp-digits", "resolution": 5}, 60),
    ("bezier", bezier, {"model": "mlp-digits", "steps": 10}, 60),
]

# the smoke runs of single parts (``--smoke --parts P``): the part's code on small settings
SMOKE_PARTS = {
    "curvature": [
        (
            "curvature",
            curvature,
            {"model": "mlp-digits", "probes": 2, "top_k": 2, "points": 2, "batch": 64},
            120,
        ),
        ("hessian-surface", hessian_surface, {"model": "mlp-digits", "resolution": 3}, 60),
    ],
    "moe": [  # the workloads' code on mlp-digits (the mixture trains for minutes on a CPU;
        # learned matching runs weight matching's start too)
        ("moe-learned", moe, {"model": "mlp-digits", "method": "learned", "steps": 10}, 120),
        ("trajectories", trajectories, {"model": "mlp-digits", "resolution": 3}, 120),
    ],
}


UNRECORDED = (
    "train1",
    "train3",
    "llama",
    "growth",
    "paper-vit",
    "paper-gpt",
    "surface",
    "bezier",
    "moe-weight",
    "moe-learned",
)
# the guards of a CPU run that records references: hours, not minutes
RECORD_GUARD_S = 4 * 3600


class _Timeout(Exception):
    pass


def _guarded(seconds: float, fn: Callable[[], Result], name: str) -> Result:
    def alarm(signum, frame):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(max(1, int(seconds)))
    try:
        return fn()
    except _Timeout:
        return Result(name, "", problem=f"abandoned after its {seconds:.0f} s time guard")
    except Exception:  # one failing workload must not lose the others' numbers
        return Result(name, "", problem="failed: " + traceback.format_exc(limit=4))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _cell(x: Any, fmt: str = "{:.4g}") -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    return fmt.format(x)


def report(results: list[Result], header: list[str]) -> str:
    rows = [["workload", "seconds", "before", "target", "met", "value", "CPU", "agrees"]]
    for r in results:
        ratio = None if r.seconds is None or r.before_s is None else r.before_s / r.seconds
        before = _cell(r.before_s) + ("" if ratio is None else f" ({ratio:.1f}×)")
        rows.append([r.name, _cell(r.seconds, "{:.2f}"), before, _cell(r.target_s), _cell(r.met),
                     _cell(r.value), _cell(r.reference), _cell(r.agrees)])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [*header, ""]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    for r in results:
        if r.problem:
            lines.append(f"\n{r.name}: {r.problem}")
        facts = {k: v for k, v in r.facts.items() if k != "table"}
        if facts:
            lines.append(f"{r.name}: {r.what}; {json.dumps(facts, default=str)}")
        if "table" in r.facts:
            lines.append(r.facts["table"])
    return "\n".join(lines)


def run(
    plan,
    device: torch.device,
    budget_s: float,
    references: dict[str, Any],
    done: Callable[[Result], None] = lambda r: None,
) -> list[Result]:
    """Each workload in turn; ``done`` is handed each result as it comes (a record keeps it)."""
    start = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="landscape-gpu-") as d:
        tmp = Path(d)
        for name, fn, kw, guard in plan:
            left = budget_s - (time.perf_counter() - start)
            if left < 10:
                results.append(Result(name, "", problem="not run: the call's budget is spent"))
                continue
            print(f"[{time.perf_counter() - start:5.0f} s] {name}", file=sys.stderr, flush=True)
            guard = guard if budget_s < RECORD_GUARD_S else RECORD_GUARD_S
            r = _guarded(min(guard, left), lambda fn=fn, kw=kw: fn(device, tmp, **kw), name)
            ref = references.get(r.name)
            if isinstance(ref, dict):  # a table: its worst disagreement, cell by cell
                cells = r.facts.get("cells", {})
                gaps = [abs(cells[k] - v) / max(abs(v), 0.005 / 0.01) for k, v in ref.items()
                        if k in cells]  # fmt: skip
                r.value, r.reference, r.rel_tol, r.abs_tol = (max(gaps) if gaps else None), 0.0, \
                    0.0, 0.01  # fmt: skip
            elif ref is not None and r.reference is None:
                r.reference = ref
            results.append(r)
            done(r)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--parts",
        nargs="+",
        choices=sorted(PARTS),
        help="default zoo; with --smoke, the smoke runs of these parts ("
        + ", ".join(sorted(SMOKE_PARTS))
        + ") instead of the whole smoke run",
    )
    p.add_argument("--data", help="folder with the Fashion-MNIST IDX files and shakespeare.txt")
    p.add_argument("--smoke", action="store_true", help="the CPU smoke run (seconds)")
    p.add_argument("--record", action="store_true", help="write the CPU references")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole call")
    p.add_argument("--out", help="table path (default $OUT/gpu_bench.txt, else ./gpu_bench.txt)")
    args = p.parse_args()
    if args.data:
        for var in ("LANDSCAPE_FASHION_MNIST", "LANDSCAPE_DATA"):
            os.environ[var] = str(Path(args.data).resolve())
    from bench.common import machine_line
    from landscape.device import kernel_fingerprint

    cuda = torch.cuda.is_available() and not (args.smoke or args.record)
    device = torch.device("cuda" if cuda else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # the CPU's numbers, not TF32's
    torch.backends.cudnn.allow_tf32 = False
    header = [f"landscape device check; {machine_line()}", f"kernels: {kernel_fingerprint()}"]
    if cuda:
        header.append(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    if args.smoke:
        missing = [part for part in args.parts or [] if part not in SMOKE_PARTS]
        if missing:
            p.error(f"no smoke run of part {', '.join(missing)} (there is of "
                    f"{', '.join(sorted(SMOKE_PARTS))})")  # fmt: skip
        plan = [w for part in args.parts for w in SMOKE_PARTS[part]] if args.parts else SMOKE
        budget = min(args.budget, 240)
        header.append("smoke run on the CPU (no CUDA sections)")
    else:
        plan = [w for part in args.parts or ["zoo"] for w in PARTS[part]]
        budget = args.budget if not args.record else 10**6
        if not cuda and not args.record:
            header.append("no CUDA device: the workloads run on the CPU")
    if args.record:  # what has a CPU value to ship: not training (checked against the shipped
        # seeds), the growth series (times only) or the 1.1B pair (its two-layer twin is checked)
        plan = [w for w in plan if w[0] not in UNRECORDED]
    shipped = json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {}
    references = {} if args.record else shipped.get("smoke", {}) if args.smoke else shipped
    torch.set_num_threads(os.cpu_count() or 1)
    got = (shipped.setdefault("smoke", {}) if args.smoke else shipped) if args.record else {}

    def keep(r: Result) -> None:  # a record is written after each workload: hours are not lost
        if not args.record:
            return
        if r.name == "table" and "cells" in r.facts:
            got[r.name] = r.facts["cells"]
        elif r.value is not None and not r.name.startswith("train"):
            got[r.name] = r.value
        else:
            return
        REFERENCE.write_text(json.dumps(shipped, indent=1, sort_keys=True) + "\n")

    results = run(plan, device, budget, references, keep)
    if args.smoke:  # small models on the CPU: the H200's measurements and targets do not apply
        for r in results:
            r.before_s = r.target_s = None
    text = report(results, header)
    print(text)
    if args.record:
        print(f"references written to {REFERENCE}")
        return
    out_dir = os.environ.get("OUT")
    path = Path(args.out) if args.out else Path(out_dir or ".") / "gpu_bench.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.with_suffix(".json").write_text(json.dumps(
        [r.__dict__ | {"agrees": r.agrees, "met": r.met} for r in results], indent=1,
        default=str))  # fmt: skip
    print(f"\ntable written to {path}")


if __name__ == "__main__":
    main()
