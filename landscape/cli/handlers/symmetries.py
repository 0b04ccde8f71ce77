"""The handlers of the commands about symmetries: ``symmetries``, ``eigenangles``,
``gauge-sweep``, ``transport``, ``recover``.

Each command runs here, importing what it needs when it runs (``landscape --help`` stays
free of torch)."""

from __future__ import annotations

import argparse
from typing import Any

from landscape.cli.running import command, progress_bar, say, status
from landscape.errors import LandscapeError


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
    status(f"eigenangles {args.model} {args.seeds}")
    with progress_bar("eigenangles learned/orth") as progress:
        out = eigenangle_view(args.model, args.seeds, device=args.device, progress=progress)
    if args.iterations:
        status(f"iterations {args.model} {args.seeds}")
        with progress_bar("iterations") as progress:
            it = iteration_barriers(args.model, args.seeds, IterationOptions(**options),
                                    context=RunContext(args.device, progress=progress))  # fmt: skip
        for warning in it["warnings"]:  # main says only the top level's
            say(f"warning: iterations: {warning}")
        out["iterations"] = it
    return out


@command("gauge-sweep")
def _gauge_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.context import RunContext
    from landscape.experiments.gauge.runner import PARTS, GaugeOptions, gauge_sweep

    options = GaugeOptions(draws=args.draws, steps_grid=args.steps,
                           trajectory_steps=args.trajectory_steps,
                           trajectory_every=args.trajectory_every, parts=args.parts or PARTS,
                           lr=args.lr, executor=args.executor, address=args.address)  # fmt: skip
    status(f"gauge sweep {args.model} seed {args.seed}")
    with progress_bar(f"gauge sweep {args.model}") as progress:
        return gauge_sweep(args.model, args.seed, options,
                           context=RunContext(args.device, progress=progress))  # fmt: skip


@command("transport")
def _transport(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments import transport as tr

    if args.artifact is None:
        options = tr.TransportOptions(gauge_seed=args.gauge_seed, lora_steps=args.lora_steps,
                                      adamw_steps_before=args.adamw_steps,
                                      adamw_steps_after=args.adamw_steps)  # fmt: skip
        status(f"transport table {args.model} seed {args.seed}")
        with progress_bar(f"transport {args.model}") as progress:
            rows = tr.transport_table(args.model, args.seed, options,
                                      context=RunContext(args.device, progress=progress))
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


@command("recover")
def _recover(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from landscape.experiments.context import RunContext
    from landscape.experiments.merging.recover_benchmark import RecoveryOptions, recovery

    options = RecoveryOptions(method=args.method, draw=args.draw, points=args.points,
                              dtype=getattr(torch, args.dtype), text=args.text,
                              image_data=args.data, data_dir=args.data_dir)  # fmt: skip
    status(f"recover {args.model}{'' if args.seed is None else f' seed {args.seed}'} "
            f"{args.method}")  # fmt: skip
    with progress_bar(f"recover {args.method}") as progress:
        return recovery(args.model, args.seed, args.groups, options,
                        context=RunContext(args.device, progress=progress))
