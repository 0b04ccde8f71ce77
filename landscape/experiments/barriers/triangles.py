"""Triangles: loss and accuracy over the plane through three models, B and C aligned onto A
edge by edge (:func:`landscape.experiments.barriers.alignment.align`) or jointly
(:func:`align_joint`), in either merge space; cached like every other experiment.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_resolution
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments import sweeps
from landscape.experiments.barriers.alignment import (
    ALGO_VERSION,
    Aligned,
    align,
    learned_space,
    split_prefixed,
    unshared,
    weight_start,
)
from landscape.experiments.barriers.endpoints import check_method, check_pair, check_split
from landscape.experiments.barriers.pipeline import health
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import EvalOptions, check_finite_loss, evaluate_triangle
from landscape.fields import Fields
from landscape.matching import (
    MatchContext,
    function_check,
    method_of,
    options_key,
    worst_check,
)
from landscape.matching.learned import learned_triangle
from landscape.matching.result import circuit_checks
from landscape.models import ModelConfig
from landscape.models.circuits import check_circuit_form, check_space, circuit_forms
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell, within
from landscape.sources import Data, Source, data_of, label
from landscape.store.cache import Cache, digest_tensors

__all__ = ["JOINT_METHOD", "TRIANGLE", "align_joint", "triangle"]

# What a triangle result holds (landscape.fields): what :func:`triangle` writes (its grid is
# :class:`landscape.experiments.basins.TriangleResult`), and what the figures, the page and the
# command's summary read. ``seeds`` and ``split`` are always written here, yet optional: the
# figures also draw a bare grid, which names neither; ``eval_seconds`` and ``eval_device`` are
# absent from grids stored before their time was kept.
TRIANGLE = Fields(
    "triangle result",
    ("model", "method", "group", "space", "joint", "resolution", "points", "loss", "accuracy",
     "corner_loss", "corner_accuracy", "basin_fraction", "tol", "excess_loss", "function_check",
     "function_check_a", "function_ok", "warnings", "seconds", "cached", "device"),
    {"seeds": ("A", "B", "C"), "split": "test", "eval_seconds": None, "eval_device": None},
)  # fmt: skip

# the one method whose loss aligns B and C together over the triangle (``joint``): learned
# matching's own routine, :func:`landscape.matching.learned.learned_triangle`, by its name
JOINT_METHOD = "learned"


@in_context
def align_joint(
    a: Checkpoint,
    b: Checkpoint,
    c: Checkpoint,
    group: str,
    *,
    seed: int = 0,
    options: Any = None,
    data: Data | None = None,
    context: RunContext = RUN,
) -> tuple[Aligned, Aligned]:
    """Learned alignment of B and C onto A jointly over the triangle
    (:func:`landscape.matching.learned.learned_triangle`), cached as one entry. ``options``:
    learned matching's settings (a dict or ``LearnedOptions``)."""
    check_method(JOINT_METHOD, group)
    check_pair(a, b)
    check_pair(a, c)
    device, progress = context.device, context.progress
    cache = context.cache or Cache()
    options = method_of(JOINT_METHOD).settings(options)
    inputs = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "c": digest_tensors(c.params),
        "cfg": a.cfg.to_dict(),
        "method": f"{JOINT_METHOD}-joint",
        "group": group,
        "seed": seed,
        "options": options_key(options),
        "version": ALGO_VERSION,
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        train = (data or data_of(a)).split("train")
        # each edge's weight-matching start from the cache (shared with the pairwise barriers)
        starts = tuple(weight_start(a, x, group, seed=seed, options=options,
                                    context=RunContext(device, cache))
                       for x in (b, c))  # fmt: skip
        rb, rc = learned_triangle(a.cfg, a.params, (b.params, c.params), group, train,
                                  options=options, context=MatchContext(seed, device, progress),
                                  starts=starts)  # fmt: skip
        tensors = {f"a.{k}": v for k, v in rb.params_a.items()}
        for name, r in (("b", rb), ("c", rc)):
            r.function_check_a = function_check(a.cfg, a.params, r.cfg, r.params_a)
            tensors.update({f"{name}.{k}": v for k, v in r.params_b.items()})
            tensors[f"resid_{name}"] = r.resid_matrix()
        return unshared(tensors), {"cfg": rb.cfg.to_dict(), "b": rb.to_dict(), "c": rc.to_dict()}

    entry, hit = cache.get_or_compute("matching", inputs, compute)
    t, cfg = entry.tensors, ModelConfig.from_dict(entry.meta["cfg"])
    pa = split_prefixed(t, "a.")
    return tuple(Aligned(cfg, pa, split_prefixed(t, f"{x}."), t[f"resid_{x}"], entry.meta[x], hit)
                 for x in ("b", "c"))  # type: ignore[return-value]  # fmt: skip


@dataclass(frozen=True)
class TriangleOptions:
    """What a triangle measures and how its work is spread: a grid of ``resolution`` steps per
    edge (``tol``: the basin's loss tolerance, ``evaluation.evaluate_triangle``) on A's
    ``split``, mixed in merge ``space``; ``joint``: B and C aligned together (learned matching
    only); ``executor`` (``"local"`` or ``"ray"``, at ``address``)."""

    resolution: int = 10
    tol: float = 0.05
    split: str = "test"
    space: str = "weights"
    joint: bool = False
    executor: str = "local"
    address: str | None = None


@in_context
def triangle(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "orth",
    options: TriangleOptions = TriangleOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Loss/accuracy over the triangle θ_A, π_B(θ_B), π_C(θ_C), B and C aligned onto A, mixed
    in merge ``space`` (``"circuits"``: the three circuit forms, :func:`in_space`), options in
    :class:`TriangleOptions`. ``joint`` (learned matching only): B and C are aligned together
    over the whole triangle (:func:`align_joint`) instead of edge by edge.

    ``function_check`` is the worst of B's and C's (NaN if either is NaN), ``function_check_a``
    that of the processed A; ``function_ok``/``warnings`` as a barrier's
    (:meth:`~landscape.experiments.barriers.pipeline.BarrierRun.to_dict`). A NaN or infinite
    loss at any grid point is a LandscapeError naming the point.

    ``executor="ray"`` aligns B and C onto A as two Ray tasks (one for ``joint``), then
    evaluates the grid as a third once they are done (on the cluster at ``address``, else a
    local one), and stores the alignments and the grid in ``cache`` first
    (:mod:`landscape.experiments.sweeps`); the result is then assembled from the cache as in
    the serial run (``cached`` is whether the tasks found everything cached).
    """
    o = options
    resolution, tol, split, space, joint = o.resolution, o.tol, o.split, o.space, o.joint
    executor, address = o.executor, o.address
    device, progress = context.device, context.progress
    sweeps.check_executor(executor, address)
    if len(seeds) != 3:
        raise LandscapeError("triangle needs three seeds: --seeds A B C")
    check_method(method, group)
    if joint and method != JOINT_METHOD:  # the joint loss is one method's own
        raise LandscapeError(f"--joint aligns B and C together by {method_of(JOINT_METHOD).title}: "
                             f"use --method {JOINT_METHOD}")  # fmt: skip
    if resolution < 1:
        raise LandscapeError("--resolution must be at least 1")
    check_resolution(resolution)
    check_split(split)
    check_space(space)
    t0 = time.perf_counter()
    cache = context.cache or Cache()
    remote_hit = True
    if executor == "ray":  # before anything is loaded here: the workers bring the checkpoints
        options = {"method": method, "group": group, "resolution": resolution, "tol": tol,
                   "split": split, "space": space, "joint": joint}  # fmt: skip
        remote_hit = _on_ray(model, seeds, options, address, cache, within(progress, 0.0, 0.9))
        progress = within(progress, 0.9, 1.0)
    a, b, c = (Source(model, s).load(device, cache) for s in seeds)
    if space == "circuits":
        check_circuit_form(a.cfg)
    data = data_of(a)
    options = learned_space(method, space)
    names = [label(x) for x in (a, b, c)]
    # the request keys the grid, as a barrier's does: a stored grid is served without aligning
    # its corners again (they are the matchings of the request, so the grid follows from it)
    inputs = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "c": digest_tensors(c.params),
        "cfg": a.cfg.to_dict(),
        "method": method,
        "group": group,
        "options": options,
        "resolution": resolution,
        "tol": tol,
        "split": split,
        "data": data.key,
        "version": ALGO_VERSION,
        "key": "request",  # keyed by the request, no longer by the aligned corners
        **({"space": space} if space != "weights" else {}),
        **({"joint": True} if joint else {}),
    }
    aligned_cached = [True]

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        if joint:
            tell(progress, "match B", 0)
            ab, ac = align_joint(a, b, c, group, options=options, data=data,
                                 context=RunContext(device, cache,
                                                    within(progress, 0.0, 0.5)))  # fmt: skip
        else:  # each edge from A in turn, a quarter of the progress each
            edges = []
            for x, lo, stage in ((b, 0.0, "match B"), (c, 0.25, "match C")):
                tell(progress, stage, lo)
                edges.append(align(a, x, method, group, data=data, options=options,
                                   context=RunContext(device, cache,
                                                      within(progress, lo, lo + 0.25))))
            ab, ac = edges
        aligned_cached[0] = ab.cached and ac.cached
        checks = {
            f"{names[1]} aligned to {names[0]} ({method}/{group})": ab.info["function_check"],
            f"{names[2]} aligned to {names[0]} ({method}/{group})": ac.info["function_check"],
            f"{names[0]} processed for {group}": worst_check(
                [ab.info.get("function_check_a"), ac.info.get("function_check_a")]
            ),
        }
        cfg, corners = ab.cfg, [ab.params_a, ab.params_b, ac.params_b]
        if space == "circuits":
            found = circuit_checks([(k.cfg, k.params) for k in (a, b, c)], ab.cfg, corners)
            for ckpt, value in zip((a, b, c), found, strict=True):
                checks[f"{label(ckpt)} in circuit form"] = value
            cfg, corners = circuit_forms(ab.cfg, corners)
        tell(progress, "evaluate", 0.5)
        ev = data.evaluation(split)
        started = time.perf_counter()
        heard = RunContext(device, progress=within(progress, 0.5, 1.0))
        r = evaluate_triangle(cfg, corners, ev.inputs, ev.targets, resolution,
                              EvalOptions(**data.eval_options(cfg, ev.inputs)), tol=tol,
                              context=heard)  # fmt: skip
        # the grid's own time, kept with it: what a grid of another size will cost here
        evaluated = round(time.perf_counter() - started, 3)

        def where(i: int) -> str:
            w = ", ".join(f"{x:.4g}" for x in r.points[i])
            return f"the point (w_A, w_B, w_C) = ({w}) of {', '.join(names)} ({method}/{group})"

        check_finite_loss(r.loss, where, split)  # refused, and nothing is stored
        worst = worst_check([ab.info["function_check"], ac.info["function_check"]])
        return {}, {**r.to_dict(), "function_check": worst, "checks": checks,
                    "eval_seconds": evaluated, "eval_device": str(device)}  # fmt: skip

    entry, hit = cache.get_or_compute("triangle", inputs, compute)
    tell(progress, "done", 1)
    meta = dict(entry.meta)
    checks = meta.pop("checks")
    return {
        "model": model,
        "seeds": list(seeds),
        "method": method,
        "group": group,
        "split": split,
        "space": space,
        "joint": joint,
        **meta,
        "function_check_a": checks[f"{names[0]} processed for {group}"],
        **health(checks),
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": hit and aligned_cached[0] and remote_hit,
        "device": str(device),
    }


def _align_edge(model: str, seeds: tuple[int, int], method: str, group: str,
                options: dict[str, Any], *, cache: Cache) -> None:  # fmt: skip
    """On a worker: one edge of a triangle, seed ``seeds[1]`` aligned onto ``seeds[0]`` into
    ``cache`` as :func:`triangle` aligns it."""
    a, x = (Source(model, s).load(CPU, cache) for s in seeds)
    align(a, x, method, group, data=data_of(a), options=options, context=RunContext(cache=cache))


def _align_both(model: str, seeds: Sequence[int], group: str, options: dict[str, Any], *,
                cache: Cache) -> None:  # fmt: skip
    """On a worker: B and C aligned onto A jointly into ``cache`` (:func:`align_joint`)."""
    a, b, c = (Source(model, s).load(CPU, cache) for s in seeds)
    align_joint(a, b, c, group, options=options, data=data_of(a), context=RunContext(cache=cache))


def _grid(model: str, seeds: Sequence[int], *, cache: Cache, **options: Any) -> None:
    """On a worker: the triangle's grid, its alignments read from ``cache``."""
    rest = {k: v for k, v in options.items() if k not in ("method", "group")}
    triangle(
        model,
        seeds,
        options["method"],
        options["group"],
        TriangleOptions(**rest),
        context=RunContext(cache=cache),
    )


def _on_ray(model: str, seeds: Sequence[int], options: dict[str, Any], address: str | None,
            cache: Cache, progress: Progress | None) -> bool:  # fmt: skip
    """The alignments of a triangle as Ray tasks, then its grid; every entry stored in
    ``cache``. Returns whether the tasks found all of them cached."""
    method, group = options["method"], options["group"]
    learned = learned_space(method, options["space"])
    seeds = list(seeds)
    name = f"{model} {seeds} {method}/{group}"
    if options["joint"]:
        edges = [sweeps.Call(_align_both, (model, seeds, group, learned),
                             kinds=("checkpoint", "matching"),
                             what=f"the joint alignment of the triangle {name}")]  # fmt: skip
    else:
        edges = [sweeps.Call(_align_edge, (model, (seeds[0], s), method, group, learned),
                             kinds=("checkpoint", "matching"),
                             what=f"aligning {s} onto {seeds[0]} ({method}/{group})")
                 for s in seeds[1:]]  # fmt: skip
    grid = sweeps.Call(_grid, (model, seeds), options, kinds=("triangle",),
                       what=f"the grid of the triangle {name}")  # fmt: skip
    with sweeps.sweep(address) as pool:
        refs = [pool.submit(e) for e in edges]
        refs.append(pool.submit(grid, after=refs))
        done = pool.gather(refs, cache, progress, "ray tasks")
    return all(f.hit for d in done for f in d.found if f.kind != "checkpoint")
