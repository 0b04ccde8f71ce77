"""The handlers of the commands that write or merge aligned checkpoints: ``align``, ``merges``.

Each command runs here, importing what it needs when it runs (``landscape --help`` stays
free of torch)."""

from __future__ import annotations

import argparse
from typing import Any

from landscape.cli.running import command, matching_settings, progress_bar, status
from landscape.errors import LandscapeError


@command("align")
def _align(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.context import RunContext
    from landscape.experiments.merging.export import AlignedOptions, write_aligned

    options = AlignedOptions(merge=args.merge, mergekit_config=args.mergekit_config,
                             merge_method=args.merge_method, merge_weight=args.merge_weight,
                             out_a=args.out_a, split=args.split)  # fmt: skip
    status(f"align {args.model} {args.seeds} {args.method}/{args.group} → {args.out}")
    with progress_bar(f"align {args.method}/{args.group}") as progress:
        return write_aligned(args.model, args.seeds, args.out, args.method, args.group, options,
                             context=RunContext(args.device, progress=progress))


@command("merges")
def _merges(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.context import RunContext
    from landscape.experiments.merging.operators import (
        MergesOptions,
        check_merges_work,
        merges,
        require_mergekit,
    )

    # the work, then mergekit itself, before any model is loaded
    check_merges_work(len(args.seeds), args.method, args.operators, args.points)
    require_mergekit()
    if len(args.seeds) < 2:
        raise LandscapeError("merges needs at least two seeds: --seeds A B [C ...]")
    options = MergesOptions(operators=args.operators, density=args.density,
                            merge_seed=args.merge_seed, points=args.points, split=args.split,
                            settings=matching_settings(args) or None)  # fmt: skip
    status(f"merges {args.model} {args.seeds} {args.method}/{args.group}")
    with progress_bar(f"merges {args.method}/{args.group}") as progress:
        return merges(args.model, args.seeds, args.method, args.group, options,
                      context=RunContext(args.device, progress=progress))
