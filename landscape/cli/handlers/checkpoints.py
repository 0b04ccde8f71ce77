"""The handlers of the commands about checkpoints: ``zoo``, ``train``, ``data``, ``cache``,
``inspect``, ``family``.

Each command runs here, importing what it needs when it runs (``landscape --help`` stays
free of torch)."""

from __future__ import annotations

import argparse
from typing import Any

from landscape.cli.running import command, say, status
from landscape.errors import LandscapeError


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
        say(
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
            say(f"warning: {args.model} seed {seed} differs from the shipped checkpoint beyond "
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


@command("inspect")
def _inspect(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.sources import inspect

    return inspect(args.path, audit=args.audit)


@command("family")
def _family(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import family_members
    from landscape.sources import DataSpec, add_family
    from landscape.store import families as fm

    if args.action == "add":
        n = len(args.paths)
        status(f"checking {n} checkpoint{'s' if n != 1 else ''} for family {args.name}")
        spec = DataSpec(text=args.text, data=args.data, data_dir=args.data_dir, n_ctx=args.n_ctx,
                        max_windows=args.max_windows)  # fmt: skip
        fam = add_family(args.name, args.paths, spec, lr=args.lr, batch_size=args.batch_size,
                         labels=args.labels, replace=args.replace)  # fmt: skip
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
