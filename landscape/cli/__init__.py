"""The ``landscape`` command line (docs/design.md §5).

Every command takes ``--json`` (one JSON object on stdout; progress on stderr), ``--device`` and
``--threads`` (``landscape.threads``).
Bad input exits with status 2 and one line on stderr naming the problem; set
``LANDSCAPE_DEBUG=1`` to see tracebacks of unexpected errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from landscape.cli.parser import build_parser
from landscape.cli.parser.arguments import LEARNED_OPTIONS
from landscape.cli.summaries import show, terminal_safe
from landscape.errors import LandscapeError
from landscape.progress import Progress, fraction

Handler = Callable[[argparse.Namespace], dict[str, Any]]
COMMANDS: dict[str, Handler] = {}


def _width(args: argparse.Namespace) -> int:
    """The model width that ``--threads auto`` is chosen for: the zoo model's, else 256."""
    from landscape.models.zoo import ZOO

    model = getattr(args, "model", None)
    return ZOO[model].config.d_model if isinstance(model, str) and model in ZOO else 256


def command(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = fn
        return fn

    return register


# ---------------------------------------------------------------- handlers


@command("zoo")
def _zoo(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.models.zoo import zoo_table
    from landscape.sources.zoo import shipped_seeds

    rows = zoo_table()
    for r in rows:
        r["shipped_seeds"] = shipped_seeds(r["name"])
    return {"models": rows}


@command("train")
def _train(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.models.train import tqdm_progress, train
    from landscape.sources.zoo import compare_with_shipped

    if args.seeds is not None and len(args.seeds) > 1:
        return _train_seeds(args)
    if args.seeds is not None:  # one seed: solo, as --seed
        args.seed = args.seeds[0]
    if args.save:  # before training, not after minutes of it
        from landscape.models.checkpoint import check_save_target

        check_save_target(args.save)
    progress = tqdm_progress(f"train {args.model} seed {args.seed}")
    ckpt, hit = train(args.model, args.seed, device=args.device, data_dir=args.data_dir,
                      progress=progress, text=args.text)  # fmt: skip
    saved = None
    if args.save:
        from landscape.models.checkpoint import save_checkpoint_dir

        saved = str(save_checkpoint_dir(ckpt, args.save))
    m = ckpt.meta
    shipped = None if args.text else compare_with_shipped(ckpt)
    if shipped and shipped.get("current") and not shipped["reproduced"]:
        promise = "bit-identical weights" if shipped["same_kernels"] else "matching test metrics"
        _say(
            f"warning: {args.model} seed {args.seed} differs from the shipped checkpoint "
            f"beyond the promise ({promise}); see README, reproducibility"
        )
    return {
        "model": args.model,
        "seed": args.seed,
        "cached": hit,
        "digest": m["digest"],
        **m["metrics"],
        "seconds": m["seconds"],
        "device": m["device"],
        "shipped": shipped,
        "saved": saved,
    }


def _train_seeds(args: argparse.Namespace) -> dict[str, Any]:
    """``train --seeds A B …``: the seeds as one batched model (``train_seeds``); a row each."""
    from pathlib import Path

    from landscape.models.checkpoint import check_save_target, save_checkpoint_dir
    from landscape.models.train import tqdm_progress, train_seeds
    from landscape.sources.zoo import compare_with_shipped

    seeds = args.seeds
    if len(set(seeds)) < len(seeds):  # before the save targets are looked at
        raise LandscapeError(f"seeds repeat ({' '.join(map(str, seeds))}): each seed trains once")
    folders = {s: Path(args.save) / f"seed-{s}" for s in seeds} if args.save else {}
    for folder in folders.values():  # before training, not after minutes of it
        check_save_target(folder)
    progress = tqdm_progress(f"train {args.model} seeds {' '.join(map(str, seeds))}")
    run = train_seeds(args.model, seeds, device=args.device, data_dir=args.data_dir,
                      progress=progress, text=args.text)  # fmt: skip
    rows = []
    for ckpt, hit in zip(run.checkpoints, run.cached, strict=True):
        seed, m = ckpt.seed, ckpt.meta
        shipped = None if args.text else compare_with_shipped(ckpt)
        if shipped and shipped.get("current") and not shipped["reproduced"]:
            _say(f"warning: {args.model} seed {seed} differs from the shipped checkpoint beyond "
                 f"the promise ({shipped['promise']}); see README, reproducibility")  # fmt: skip
        saved = str(save_checkpoint_dir(ckpt, folders[seed])) if folders else None
        rows.append({"seed": seed, "cached": hit, **m["metrics"], "seconds": m["seconds"],
                     "device": m["device"], "shipped": shipped, "digest": m["digest"],
                     "saved": saved})  # fmt: skip
    return {"model": args.model, "seeds": seeds, "batched": run.batched, "note": run.note,
            "checkpoints": rows}  # fmt: skip


@command("data")
def _data(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.data import fetch_shakespeare, shakespeare

    path = fetch_shakespeare(args.archive)
    corpus = shakespeare()
    return {"name": args.name, "path": str(path), "characters": len(corpus.train) + len(corpus.val),
            "vocabulary": len(corpus.vocab), "sha256": corpus.digest}  # fmt: skip


@command("cache")
def _cache(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.store.cache import Cache

    cache = Cache()
    if args.action == "clear":
        return {"root": str(cache.root), "removed": cache.clear(args.kind)}
    return cache.info()


@command("symmetries")
def _symmetries(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from landscape.device import CPU
    from landscape.models import init_params
    from landscape.sources import Source
    from landscape.symmetry import norm_state, symmetry_table

    ckpt = Source(args.model, args.seed).load(CPU)
    cfg, params, source = ckpt.cfg, ckpt.params, "checkpoint"
    if args.norm is not None:
        cfg = cfg.replace(norm=args.norm)
        params = init_params(cfg, args.seed or 0)
        gen = torch.Generator().manual_seed(args.seed or 0)
        # Random gains and biases: with all gains 1 some invalid groups look exact by accident.
        params = {k: (v + 0.3 * torch.randn(v.shape, generator=gen)) if k.endswith((".w", ".b"))
                  else v for k, v in params.items()}  # fmt: skip
        source = f"random init, {'LayerNorm' if args.norm == 'ln' else 'RMSNorm'}"
    rows = symmetry_table(cfg, params, seed=args.draw)
    return {"model": args.model, "seed": args.seed, "source": source,
            "norm_state": norm_state(cfg, params).to_dict(), "rows": rows}  # fmt: skip


def _learned_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--learned-*`` options given, as learned matching's keywords; refused with another
    method (a command without ``--method``, such as ``table``, gives them to its learned rows).
    One equal to the library's default is left out, so it reads the default's entry."""
    given = [flag for flag in LEARNED_OPTIONS if getattr(args, flag) is not None]
    if not given:
        return {}
    if getattr(args, "method", "learned") != "learned":
        flags = ", ".join("--" + flag.replace("_", "-") for flag in given)
        raise LandscapeError(f"{flags}: for --method learned, not {args.method}")
    from landscape.matching import given_options

    return given_options("learned", {LEARNED_OPTIONS[f]: getattr(args, f) for f in given})


@command("barrier")
def _barrier(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import barrier

    options = _learned_settings(args)
    _status(f"barrier {args.model} {args.seeds} {args.method}/{args.group}")
    with _progress_bar(f"barrier {args.method}/{args.group}") as progress:
        return barrier(args.model, args.seeds, args.method, args.group, points=args.points,
                       split=args.split, space=args.space, device=args.device,
                       options=options or None, calibrate=args.calibrate,
                       progress=progress)  # fmt: skip


@command("curve")
def _curve(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext, seeds_request
    from landscape.experiments.barriers.curved import CurveOptions, curve

    options = _learned_settings(args)
    request = seeds_request(args.model, args.seeds, args.method, args.group, points=args.points,
                            split=args.split, options=options or None)  # fmt: skip
    drawn = CurveOptions(kind=args.kind, bends=args.bends, steps=args.steps, lr=args.lr,
                         train_seed=args.train_seed)  # fmt: skip
    _status(f"curve {args.model} {args.seeds} {args.method}/{args.group} {args.kind}")
    with _progress_bar(f"curve {args.kind} {args.method}/{args.group}") as progress:
        return curve(request, drawn, context=RunContext(args.device, progress=progress))


@command("curvature")
def _curvature(args: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import asdict

    from landscape.experiments.curvature import CurvatureOptions, check_curvature, curvature
    from landscape.models.zoo import ZOO

    matching = _learned_settings(args)
    options = CurvatureOptions(top_k=args.top_k, points=args.points, probes=args.probes,
                               per_block=args.per_block, batch=args.batch, split=args.split,
                               dtype=args.dtype, seed=args.batch_seed)  # fmt: skip
    if args.model in ZOO:  # the budget, before any loading (a family's is checked once loaded)
        check_curvature(ZOO[args.model].config, options)
    which = "naive" if args.method == "naive" else f"naive and {args.method}/{args.group}"
    _status(f"curvature {args.model} {args.seeds} {which}")
    with _progress_bar(f"curvature {which}") as progress:
        return curvature(args.model, args.seeds, args.method, args.group,
                         matching=matching or None, device=args.device, progress=progress,
                         **asdict(options))  # fmt: skip


@command("spawn")
def _spawn(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.spawn import spawn

    _status(f"spawn {args.model} seed {args.seed} at {args.at} {args.method}/{args.group}")
    with _progress_bar(f"spawn {args.model}") as progress:
        return spawn(args.model, args.at, seed=args.seed, children=args.children,
                     every=args.every, method=args.method, group=args.group, points=args.points,
                     split=args.split, device=args.device, progress=progress)  # fmt: skip


@command("align")
def _align(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.merging.export import write_aligned

    _status(f"align {args.model} {args.seeds} {args.method}/{args.group} → {args.out}")
    with _progress_bar(f"align {args.method}/{args.group}") as progress:
        return write_aligned(args.model, args.seeds, args.out, args.method, args.group,
                             merge=args.merge, mergekit_config=args.mergekit_config,
                             merge_method=args.merge_method, merge_weight=args.merge_weight,
                             out_a=args.out_a, split=args.split, device=args.device,
                             progress=progress)  # fmt: skip


@command("triangle")
def _triangle(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext, TriangleOptions, triangle

    options = TriangleOptions(resolution=args.resolution, tol=args.tol, split=args.split,
                              space=args.space, joint=args.joint, executor=args.executor,
                              address=args.address)  # fmt: skip
    _status(f"triangle {args.model} {args.seeds} {args.method}/{args.group}")
    with _progress_bar(f"triangle {args.method}/{args.group}") as progress:
        return triangle(args.model, args.seeds, args.method, args.group, options,
                        context=RunContext(args.device, progress=progress))


# the options of one kind of surface, refused with the other (their defaults are the library's)
SURFACE_AROUND = ("directions", "directions_seed", "extent", "vectors", "trajectories",
                  "every")
SURFACE_PLANE = ("method", "group", "margin", "path_points")


@command("surface")
def _surface(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.surfaces import check_surface, surface
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
    # a zoo model's Hessian budget before any loading (a family's is checked once loaded)
    cfg = ZOO[args.model].config if args.model in ZOO else None
    check_surface(seeds, method, group, resolution=args.resolution, split=args.split, cfg=cfg,
                  model=args.model, **given)  # fmt: skip
    what = f"{args.model} {seeds} {method}/{group}" if plane else f"{args.model} seed {args.seed}"
    what += {"hessian": " along its Hessian's top two eigenvectors",
             "trajectory": " in the plane of its training path"}.get(given.get("directions"), "")
    _status(f"surface {what}")
    with _progress_bar(f"surface {'plane' if plane else 'directions'}") as progress:
        return surface(args.model, seeds, method, group, resolution=args.resolution,
                       split=args.split, device=args.device, progress=progress,
                       **given)  # fmt: skip


@command("eigenangles")
def _eigenangles(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.budget import check_points
    from landscape.experiments import (
        IterationOptions,
        RunContext,
        eigenangle_view,
        iteration_barriers,
    )

    options = {k: getattr(args, k) for k in ("max_rounds", "checkpoints", "points")
               if getattr(args, k) is not None}  # fmt: skip
    if options and not args.iterations:
        flags = ", ".join("--" + k.replace("_", "-") for k in options)
        raise LandscapeError(f"{flags} only with --iterations")
    if "points" in options:  # before minutes of matching, not after them
        check_points(options["points"])
    _status(f"eigenangles {args.model} {args.seeds}")
    with _progress_bar("eigenangles learned/orth") as progress:
        out = eigenangle_view(args.model, args.seeds, device=args.device, progress=progress)
    if args.iterations:
        _status(f"iterations {args.model} {args.seeds}")
        with _progress_bar("iterations") as progress:
            it = iteration_barriers(args.model, args.seeds, IterationOptions(**options),
                                    context=RunContext(args.device, progress=progress))
        for warning in it["warnings"]:  # main says only the top level's
            _say(f"warning: iterations: {warning}")
        out["iterations"] = it
    return out


@command("table")
def _table(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext, TableOptions, table

    options = TableOptions(split=args.split, points=args.points, space=args.space,
                           learned_options=_learned_settings(args) or None,
                           executor=args.executor, address=args.address)  # fmt: skip
    with _progress_bar(f"table {args.model}") as progress:
        return table(args.model, args.pairs, options,
                     context=RunContext(args.device, progress=progress))


@command("ablation")
def _ablation(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.ablation import STEPS, ablation, untrained

    known = dict(STEPS)
    steps = STEPS if not args.models else [(m, known.get(m, "")) for m in args.models]
    missing = untrained([name for name, _ in steps], args.seeds)
    if missing:  # said before the hours it takes, not after
        _say(f"{len(missing)} checkpoint(s) are not trained yet and train first (about 30 "
             f"minutes a seed on one CPU thread): {', '.join(missing)}")  # fmt: skip
    options = _learned_settings(args)
    with _progress_bar("ablation") as progress:
        return ablation(steps, seeds=args.seeds, space=args.space, points=args.points,
                        split=args.split, learned_options=options or None,
                        context=RunContext(args.device, progress=progress))  # fmt: skip


@command("kv-sharing")
def _kv_sharing(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.ablation import SharingOptions, kv_sharing

    options = SharingOptions(method=args.method, group=args.group, space=args.space,
                             points=args.points, split=args.split,
                             learned_options=_learned_settings(args) or None)  # fmt: skip
    with _progress_bar(f"kv-sharing {args.model}") as progress:
        return kv_sharing(args.model, args.seeds, options,
                          context=RunContext(args.device, progress=progress))


@command("matrix")
def _matrix(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.matrix import barrier_matrix, check_matrix_work

    if len(args.seeds) < 2:
        raise LandscapeError("matrix needs at least two seeds: --seeds A B [C ...]")
    check_matrix_work(len(args.seeds), args.points)  # before the status line lists the seeds
    _status(f"matrix {args.model} {args.seeds} {args.method}/{args.group}")
    with _progress_bar(f"matrix {args.method}/{args.group}") as progress:
        return barrier_matrix(args.model, args.seeds, args.method, args.group,
                              points=args.points, split=args.split, space=args.space,
                              context=RunContext(args.device, progress=progress))  # fmt: skip


@command("merges")
def _merges(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.merging.operators import (
        check_merges_work,
        merges,
        require_mergekit,
    )

    # the work, then mergekit itself, before any model is loaded
    check_merges_work(len(args.seeds), args.method, args.operators, args.points)
    require_mergekit()
    if len(args.seeds) < 2:
        raise LandscapeError("merges needs at least two seeds: --seeds A B [C ...]")
    options = _learned_settings(args)
    _status(f"merges {args.model} {args.seeds} {args.method}/{args.group}")
    with _progress_bar(f"merges {args.method}/{args.group}") as progress:
        return merges(args.model, args.seeds, args.method, args.group, operators=args.operators,
                      points=args.points, split=args.split, density=args.density,
                      merge_seed=args.merge_seed, options=options or None, device=args.device,
                      progress=progress)  # fmt: skip


@command("controls")
def _controls(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.controls import ControlsOptions, controls_table

    options = ControlsOptions(split=args.split, points=args.points, layernorm=args.layernorm,
                              space=args.space, executor=args.executor,
                              address=args.address)  # fmt: skip
    with _progress_bar(f"controls {args.model}") as progress:
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
    _status(f"widths {args.model} {args.seeds} factors {list(factors)}")
    with _progress_bar(f"widths {args.model}") as progress:
        options = WidthOptions(factors=factors, methods=args.methods, points=args.points,
                               split=args.split, embed_seed=args.embed_seed)  # fmt: skip
        return width_barriers(args.model, *args.seeds, options,
                              context=RunContext(args.device, progress=progress))


@command("gauge-sweep")
def _gauge_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.gauge.runner import PARTS, gauge_sweep

    _status(f"gauge sweep {args.model} seed {args.seed}")
    with _progress_bar(f"gauge sweep {args.model}") as progress:
        return gauge_sweep(args.model, args.seed, draws=args.draws, steps_grid=args.steps,
                           trajectory_steps=args.trajectory_steps,
                           trajectory_every=args.trajectory_every, parts=args.parts or PARTS,
                           device=args.device, executor=args.executor, address=args.address,
                           lr=args.lr, progress=progress)  # fmt: skip


@command("transport")
def _transport(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import transport as tr

    if args.artifact is None:
        _status(f"transport table {args.model} seed {args.seed}")
        with _progress_bar(f"transport {args.model}") as progress:
            rows = tr.transport_table(args.model, args.seed, gauge_seed=args.gauge_seed,
                                      lora_steps=args.lora_steps,
                                      adamw_steps_before=args.adamw_steps,
                                      adamw_steps_after=args.adamw_steps, device=args.device,
                                      progress=progress)  # fmt: skip
        return {"model": args.model, "seed": args.seed, "gauge_seed": args.gauge_seed,
                "lora_steps": args.lora_steps, "adamw_steps": args.adamw_steps,
                "rows": rows}  # fmt: skip
    from landscape.device import CPU
    from landscape.sources import Source
    from landscape.symmetry import random_transform, spec_for

    if args.out is None:
        raise LandscapeError("--artifact needs --out, the path of the transported artifact")
    a = Source(args.model, args.seed).load(CPU)
    artifact = tr.load_artifact(args.artifact, a.cfg)
    if args.to_seed is not None:
        from landscape.matching import weight_matching

        b = Source(args.model, args.to_seed).load(CPU)
        # π with π(θ_A) ≈ θ_B carries A's coordinates into B's; artifacts live in the stream
        # and FFN coordinates, so the within-head maps are not needed
        transform = weight_matching(a.cfg, b.params, a.params, args.group,
                                    within_heads=False).transform  # fmt: skip
        target = f"seed {args.to_seed} (weight matching, {args.group})"
    else:
        transform = random_transform(spec_for(a.cfg), args.group, args.gauge_seed)
        target = f"g(θ), g a random {args.group} element, gauge seed {args.gauge_seed}"
    moved = tr.transport(a.cfg, artifact, transform, args.mode)
    out = tr.save_artifact(args.out, moved, a.cfg)
    return {"artifact": artifact.kind, "from": f"{args.model} seed {args.seed}", "to": target,
            "mode": args.mode, "out": str(out)}  # fmt: skip


@command("inspect")
def _inspect(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.sources import inspect

    return inspect(args.path, audit=args.audit)


@command("family")
def _family(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import family_members
    from landscape.sources import add_family
    from landscape.store import families as fm

    if args.action == "add":
        n = len(args.paths)
        _status(f"checking {n} checkpoint{'s' if n != 1 else ''} for family {args.name}")
        fam = add_family(args.name, args.paths, text=args.text, data=args.data,
                         data_dir=args.data_dir, n_ctx=args.n_ctx, max_windows=args.max_windows,
                         lr=args.lr, batch_size=args.batch_size, labels=args.labels,
                         replace=args.replace)  # fmt: skip
        return {**fam.to_dict(), "members": family_members(fam.name)}
    if args.action == "list":
        return {"families": [{"name": f.name, "members": len(f.members), "arch": f.arch,
                              "parameters": f.parameters, "data": f.dataset}
                             for f in fm.families()]}  # fmt: skip
    if args.action == "show":
        fam = fm.family(args.name)
        return {**fam.to_dict(), "members": family_members(fam.name)}
    if not fm.remove_family(args.name):
        raise LandscapeError(f"no family {args.name!r} to remove")
    return {"removed": args.name}


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
    with _progress_bar(f"pair-barrier {args.method}/{args.group}") as progress:
        return barrier_paths(request, context=RunContext(args.device, progress=progress))


@command("recover")
def _recover(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from landscape.experiments.merging.recover_benchmark import recovery

    _status(f"recover {args.model}{'' if args.seed is None else f' seed {args.seed}'} "
            f"{args.method}")  # fmt: skip
    with _progress_bar(f"recover {args.method}") as progress:
        return recovery(args.model, args.seed, args.groups, method=args.method, draw=args.draw,
                        text=args.text, image_data=args.data, data_dir=args.data_dir,
                        points=args.points, dtype=getattr(torch, args.dtype),
                        device=args.device, progress=progress)  # fmt: skip


def _say(text: object) -> None:
    """``landscape: text`` as one line on stderr. Every message the command line prints there
    goes through here: it may echo names, labels, paths and text from files, so every control
    character is written as a visible escape (``landscape.cli.summaries.terminal_safe``)."""
    print(f"landscape: {terminal_safe(text)}", file=sys.stderr, flush=True)


def _status(text: str) -> None:
    _say(f"{text} ...")


@contextlib.contextmanager
def _progress_bar(desc: str) -> Iterator[Progress]:
    """A progress bar on stderr fed by ``progress(stage, done, total)`` (``landscape.progress``):
    the bar shows the fraction done, the postfix the stage (and a count that is not a fraction)."""
    from tqdm import tqdm

    bar = tqdm(total=100, desc=terminal_safe(desc), file=sys.stderr, leave=False)

    def progress(stage: str, done: float, total: float) -> None:
        stage = terminal_safe(stage)  # it may name a member's label or a file
        bar.set_postfix_str(stage if total == 1 else f"{stage} {done:g}/{total:g}")
        bar.update(round(100 * fraction(done, total)) - bar.n)

    try:
        yield progress
    finally:
        bar.close()


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "figure", None):  # an existing figure is refused before the work
            from landscape.plots.files import check_figure_target

            check_figure_target(args.figure, args.force)
        from landscape.budget import long_work
        from landscape.device import resolve_device
        from landscape.threads import resolve_threads, using

        # the one place --device is resolved: everything below takes a torch.device
        args.device = resolve_device(args.device)
        # and --threads: torch's count for the command, restored after it; --yes lifts the
        # time limits (landscape.budget.check_work) for the command
        with using(resolve_threads(args.threads, _width(args))), long_work(args.yes):
            result = COMMANDS[args.command](args)
    except LandscapeError as e:
        _say(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted; nothing partial was stored")
        return 130
    except Exception as e:  # unexpected: still one line unless debugging
        if os.environ.get("LANDSCAPE_DEBUG"):
            raise
        _say(f"error: {type(e).__name__}: {e}")
        return 1
    if getattr(args, "figure", None):
        try:
            from landscape.plots.files import write_figures

            result["figures"] = write_figures(args.command, result, args.figure, args.size,
                                              force=args.force)  # fmt: skip
        except LandscapeError as e:  # the result stands; say that the figure failed
            _say(f"error: {e}")
            print(_output(args, result))
            return 2
    # a broken function or a NaN check is never only a field: it is said on stderr too
    for warning in result.get("warnings", []):
        _say(f"warning: {warning}")
    print(_output(args, result))
    return 0


def _output(args: argparse.Namespace, result: dict[str, Any]) -> str:
    """What stdout gets: one JSON object (``--json``), else the summary for people with every
    control character but its own line breaks written as a visible escape (names, labels and
    paths in it may come from files). JSON escapes C0 and, as ASCII, C1 itself; DEL, valid raw
    in JSON, is escaped here too, so no control character reaches the terminal either way."""
    if args.json:
        return json.dumps(_clean(result)).replace("\x7f", "\\u007f")
    return terminal_safe(show(args.command, result), keep="\n")


if __name__ == "__main__":
    sys.exit(main())
