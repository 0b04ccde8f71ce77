"""The handlers of the commands about the loss between models: ``barrier``, ``table``,
``matrix``, ``controls``, ``widths``, ``pair-barrier``, ``ablation``, ``kv-sharing``, ``curve``,
``spawn``, ``curvature``, ``triangle``, ``surface``.

Each command runs here, importing what it needs when it runs (``landscape --help`` stays
free of torch)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from landscape.cli.running import command, matching_settings, progress_bar, say, status
from landscape.errors import LandscapeError


@command("barrier")
def _barrier(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import barrier

    options = matching_settings(args)
    status(f"barrier {args.model} {args.seeds} {args.method}/{args.group}")
    with progress_bar(f"barrier {args.method}/{args.group}") as progress:
        return barrier(args.model, args.seeds, args.method, args.group, points=args.points,
                       split=args.split, space=args.space, device=args.device,
                       options=options or None, calibrate=args.calibrate,
                       progress=progress)  # fmt: skip


@command("table")
def _table(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext, TableOptions, table

    options = TableOptions(split=args.split, points=args.points, space=args.space,
                           learned_options=matching_settings(args) or None,
                           executor=args.executor, address=args.address)  # fmt: skip
    with progress_bar(f"table {args.model}") as progress:
        return table(args.model, args.pairs, options,
                     context=RunContext(args.device, progress=progress))


@command("matrix")
def _matrix(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.matrix import (
        MatrixOptions,
        barrier_matrix,
        check_matrix_work,
    )

    if len(args.seeds) < 2:
        raise LandscapeError("matrix needs at least two seeds: --seeds A B [C ...]")
    check_matrix_work(len(args.seeds), args.points)  # before the status line lists the seeds
    status(f"matrix {args.model} {args.seeds} {args.method}/{args.group}")
    with progress_bar(f"matrix {args.method}/{args.group}") as progress:
        return barrier_matrix(args.model, args.seeds, args.method, args.group,
                              MatrixOptions(points=args.points, split=args.split,
                                            space=args.space),
                              context=RunContext(args.device, progress=progress))  # fmt: skip


@command("controls")
def _controls(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.controls import ControlsOptions, controls_table

    options = ControlsOptions(split=args.split, points=args.points, layernorm=args.layernorm,
                              space=args.space, executor=args.executor,
                              address=args.address)  # fmt: skip
    with progress_bar(f"controls {args.model}") as progress:
        return controls_table(args.model, args.pairs, options,
                              context=RunContext(args.device, progress=progress))


@command("widths")
def _widths(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import (
        RunContext,
        WidthOptions,
        check_factors,
        default_factors,
        width_barriers,
    )
    from landscape.models.zoo import zoo_model

    cfg = zoo_model(args.model).config
    factors = check_factors(cfg, args.factors or default_factors(cfg))  # before the status line
    status(f"widths {args.model} {args.seeds} factors {list(factors)}")
    with progress_bar(f"widths {args.model}") as progress:
        options = WidthOptions(factors=factors, methods=args.methods, points=args.points,
                               split=args.split, embed_seed=args.embed_seed)  # fmt: skip
        return width_barriers(args.model, *args.seeds, options,
                              context=RunContext(args.device, progress=progress))


@command("pair-barrier")
def _pair_barrier(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.pairs import barrier_paths, paths_request
    from landscape.sources import DataSpec

    if os.path.realpath(args.a) == os.path.realpath(args.b):  # as repeated --seeds are
        raise LandscapeError(f"A and B are one checkpoint ({args.a}): a model against itself "
                             "has no barrier to measure")  # fmt: skip
    data = DataSpec(text=args.text, data=args.data, data_dir=args.data_dir, n_ctx=args.n_ctx,
                    max_windows=args.max_windows)  # fmt: skip
    request = paths_request(args.a, args.b, args.method, args.group, data=data,
                            points=args.points, max_rounds=args.max_rounds, split=args.split,
                            space=args.space, dtype=args.dtype)  # fmt: skip
    with progress_bar(f"pair-barrier {args.method}/{args.group}") as progress:
        return barrier_paths(request, context=RunContext(args.device, progress=progress))


@command("ablation")
def _ablation(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.ablation import STEPS, ablation, untrained

    known = dict(STEPS)
    steps = STEPS if not args.models else [(m, known.get(m, "")) for m in args.models]
    missing = untrained([name for name, _ in steps], args.seeds)
    if missing:  # said before the hours it takes, not after
        say(f"{len(missing)} checkpoint(s) are not trained yet and train first (about 30 "
             f"minutes a seed on one CPU thread): {', '.join(missing)}")  # fmt: skip
    options = matching_settings(args)
    with progress_bar("ablation") as progress:
        return ablation(steps, seeds=args.seeds, space=args.space, points=args.points,
                        split=args.split, learned_options=options or None,
                        context=RunContext(args.device, progress=progress))  # fmt: skip


@command("kv-sharing")
def _kv_sharing(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.ablation import SharingOptions, kv_sharing

    options = SharingOptions(method=args.method, group=args.group, space=args.space,
                             points=args.points, split=args.split,
                             learned_options=matching_settings(args) or None)  # fmt: skip
    with progress_bar(f"kv-sharing {args.model}") as progress:
        return kv_sharing(args.model, args.seeds, options,
                          context=RunContext(args.device, progress=progress))


@command("curve")
def _curve(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext, seeds_request
    from landscape.experiments.barriers.curved import CurveOptions, curve

    options = matching_settings(args)
    request = seeds_request(args.model, args.seeds, args.method, args.group, points=args.points,
                            split=args.split, options=options or None)  # fmt: skip
    drawn = CurveOptions(kind=args.kind, bends=args.bends, steps=args.steps, lr=args.lr,
                         train_seed=args.train_seed)  # fmt: skip
    status(f"curve {args.model} {args.seeds} {args.method}/{args.group} {args.kind}")
    with progress_bar(f"curve {args.kind} {args.method}/{args.group}") as progress:
        return curve(request, drawn, context=RunContext(args.device, progress=progress))


@command("spawn")
def _spawn(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.spawn import SpawnOptions, spawn

    options = SpawnOptions(children=args.children, every=args.every, method=args.method,
                           group=args.group, points=args.points, split=args.split)  # fmt: skip
    status(f"spawn {args.model} seed {args.seed} at {args.at} {args.method}/{args.group}")
    with progress_bar(f"spawn {args.model}") as progress:
        return spawn(args.model, args.at, options, seed=args.seed,
                     context=RunContext(args.device, progress=progress))


@command("curvature")
def _curvature(args: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import asdict

    from landscape.experiments.curvature import CurvatureOptions, check_curvature, curvature
    from landscape.matching import aligns
    from landscape.models.zoo import ZOO

    matching = matching_settings(args)
    options = CurvatureOptions(top_k=args.top_k, points=args.points, probes=args.probes,
                               per_block=args.per_block, batch=args.batch, split=args.split,
                               dtype=args.dtype, seed=args.batch_seed)  # fmt: skip
    if args.model in ZOO:  # the budget, before any loading (a family's is checked once loaded)
        check_curvature(ZOO[args.model].config, options)
    which = f"naive and {args.method}/{args.group}" if aligns(args.method) else "naive"
    status(f"curvature {args.model} {args.seeds} {which}")
    with progress_bar(f"curvature {which}") as progress:
        return curvature(args.model, args.seeds, args.method, args.group,
                         matching=matching or None, device=args.device, progress=progress,
                         **asdict(options))  # fmt: skip


@command("triangle")
def _triangle(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext, TriangleOptions, triangle

    options = TriangleOptions(resolution=args.resolution, tol=args.tol, split=args.split,
                              space=args.space, joint=args.joint, executor=args.executor,
                              address=args.address)  # fmt: skip
    status(f"triangle {args.model} {args.seeds} {args.method}/{args.group}")
    with progress_bar(f"triangle {args.method}/{args.group}") as progress:
        return triangle(args.model, args.seeds, args.method, args.group, options,
                        context=RunContext(args.device, progress=progress))


# the options of one kind of surface, refused with the other (their defaults are the library's)
SURFACE_AROUND = ("directions", "directions_seed", "extent", "vectors", "trajectories",
                  "every")
SURFACE_PLANE = ("method", "group", "margin", "path_points")


@command("surface")
def _surface(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import SurfaceOptions, check_surface, surface
    from landscape.models.zoo import ZOO

    plane = args.seeds is not None
    wrong = [k for k in (SURFACE_AROUND if plane else SURFACE_PLANE)
             if getattr(args, k) is not None]  # fmt: skip
    if wrong:
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        kind = "around one model (--seed)" if plane else "through three models (--seeds)"
        raise LandscapeError(f"{flags}: only for a surface {kind}")
    given = {k: getattr(args, k) for k in (*SURFACE_AROUND, *SURFACE_PLANE)
             if getattr(args, k) is not None}  # fmt: skip
    seeds = args.seeds if plane else [args.seed]
    method, group = given.pop("method", "weight"), given.pop("group", "orth")
    options = SurfaceOptions(resolution=args.resolution, split=args.split, **given)
    # a zoo model's Hessian budget before any loading (a family's is checked once loaded)
    cfg = ZOO[args.model].config if args.model in ZOO else None
    check_surface(seeds, method, group, options, cfg=cfg, model=args.model)
    what = f"{args.model} {seeds} {method}/{group}" if plane else f"{args.model} seed {args.seed}"
    what += {"hessian": " along its Hessian's top two eigenvectors",
             "trajectory": " in the plane of its training path"}.get(given.get("directions"), "")
    status(f"surface {what}")
    with progress_bar(f"surface {'plane' if plane else 'directions'}") as progress:
        return surface(args.model, seeds, method, group, options,
                       context=RunContext(args.device, progress=progress))
