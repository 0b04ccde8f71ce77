"""Seeded, deterministic training of zoo models, cached on disk: one seed (:func:`train`), several
seeds batched (:func:`train_seeds`), and a run's snapshots and the runs spawned from them
(:func:`train_snapshots`, :func:`train_from`).

The runs themselves are ``landscape.models.runs``'s: same seed → the same initial weights and the
same data order, so on one machine with one thread setting two runs give bit-identical weights.
Training uses AdamW with warm-up and cosine decay (``landscape.models.recipe``); loss/accuracy
curves are recorded with the checkpoint.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_snapshots, max_snapshots
from landscape.device import resolve_device
from landscape.errors import LandscapeError, check_seed
from landscape.models.batched import batching_problem
from landscape.models.checkpoint import Checkpoint
from landscape.models.params import Params, count_params
from landscape.models.runs import Spawning, one_thread, run_seed, train_model, train_models
from landscape.models.snapshots import RUN_STATE, RunKeeper, Snapshot
from landscape.models.zoo import (
    ZooModel,
    data_identity,
    get_variant,
    text_model,
    with_variant,
    zoo_model,
)
from landscape.progress import Progress
from landscape.store.cache import Cache, Entry, digest_tensors

TRAIN_VERSION = 1  # bump when the training algorithm changes: old cache entries stop matching
BATCHED_VERSION = 1  # bump when batched training (train_seeds) changes: its entries stop matching


def checkpoint_inputs(
    model: ZooModel,
    seed: int,
    data_dir: str | None = None,
    variant: str | None = None,
    *,
    batched: bool = False,
) -> dict[str, Any]:
    """Cache-key inputs of a checkpoint; a variant adds its definition, batched training
    (:func:`train_seeds`) its version (neither: unchanged)."""
    inputs = {
        "name": model.name,
        "config": with_variant(model, variant).config.to_dict(),
        "train": model.train.to_dict(),
        "seed": seed,
        "data": data_identity(model, data_dir),
        "version": TRAIN_VERSION,
    }
    v = get_variant(variant)
    if v is not None:
        inputs["variant"] = v.to_dict()
    if batched:
        inputs["batched"] = BATCHED_VERSION
    return inputs


def train(
    name: str,
    seed: int,
    *,
    device: torch.device | None = None,
    data_dir: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
    variant: str | None = None,
    text: str | None = None,
) -> tuple[Checkpoint, bool]:
    """Train (or load from the disk cache) one zoo checkpoint. Returns (checkpoint, cache hit).

    ``variant`` trains a control variant of the model (``landscape.models.zoo.VARIANTS``), cached
    under its own key; ``None`` is the zoo recipe itself. ``text`` trains the GPT model ``name``
    on a user's UTF-8 text file instead (its own character vocabulary, stored with the
    checkpoint; cached under the file's digest). ``device``: where it trains, resolved by the
    caller (the CLI and the app: ``landscape.device.resolve_device``); None trains on CUDA when
    it is available, else on the CPU.
    """
    model = zoo_model(name) if text is None else text_model(text, name)
    check_seed(seed)
    cache = cache or Cache()
    inputs = checkpoint_inputs(model, seed, data_dir, variant)
    keep = RunKeeper(cache, cache.key("checkpoint", inputs))

    def compute():
        ckpt = train_model(model, seed, device=device, data_dir=data_dir, progress=progress,
                           variant=variant, keep=keep)  # fmt: skip
        return ckpt.params, ckpt.meta

    entry, hit = cache.get_or_compute("checkpoint", inputs, compute)
    if not hit:
        keep.remove()
    return Checkpoint(with_variant(model, variant).config, entry.tensors, entry.meta), hit


SNAPSHOTS_VERSION = 1  # bump when snapshots or runs resumed from them change


def snapshot_every(name: str, every: int | None = None) -> int:
    """The spacing of a zoo model's snapshots: ``every``, else a fiftieth of its run."""
    steps = zoo_model(name).train.steps
    every = max(1, steps // 50) if every is None else every
    if not 1 <= every <= steps:
        raise LandscapeError(f"snapshots every {every} steps: must be between 1 and the run's "
                             f"{steps} steps")  # fmt: skip
    return every


def check_snapshot_budget(name: str, every: int) -> None:
    """Refuse snapshots of zoo model ``name`` every ``every`` steps that the memory budget does
    not hold (:func:`landscape.budget.check_snapshots`): one before every ``every``-th step and
    one after the last."""
    model = zoo_model(name)
    steps, n = model.train.steps, count_params(model.config)
    limit = max_snapshots(n)
    # the smallest spacing that fits: ceil(steps / spacing) + 1 snapshots at most ``limit``
    fits = f"--every {-(-steps // (limit - 1))} fits" if 1 < limit <= steps else ""
    check_snapshots(f"--every {every} ({name}'s run of {steps} steps)",
                    len(range(0, steps, every)) + 1, n, fits)  # fmt: skip


def train_snapshots(
    name: str,
    seed: int,
    every: int,
    *,
    device: torch.device | None = None,
    data_dir: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> tuple[list[Snapshot], bool]:
    """The zoo run of ``seed`` with a :class:`Snapshot` before every ``every``-th step and after
    the last (opt-in; the run's arithmetic is the zoo recipe's, so the last snapshot holds the
    checkpoint's weights). Cached as one entry (kind ``"snapshots"``). Returns (snapshots in
    step order, cache hit). Refused before any work when the snapshots exceed the memory budget
    (:func:`landscape.budget.check_snapshots`)."""
    model = zoo_model(name)
    check_seed(seed)
    every = snapshot_every(name, every)
    check_snapshot_budget(name, every)
    cache = cache or Cache()

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        taken: list[Snapshot] = []
        dev = resolve_device(device)
        with one_thread(dev):
            ckpt = run_seed(model, seed, dev, data_dir, progress,
                            spawning=Spawning(every=every, snapshots=taken))
        tensors = {}
        for snap in taken:
            for part in ("params", "exp_avg", "exp_avg_sq"):
                tensors.update({f"{snap.step}.{part}.{k}": v
                                for k, v in getattr(snap, part).items()})  # fmt: skip
        return tensors, {"steps": [snap.step for snap in taken], "checkpoint": ckpt.meta}

    inputs = {**checkpoint_inputs(model, seed, data_dir), "every": every,
              "snapshots": SNAPSHOTS_VERSION}  # fmt: skip
    entry, hit = cache.get_or_compute("snapshots", inputs, compute)

    def part(step: int, what: str) -> Params:
        prefix = f"{step}.{what}."
        return {k[len(prefix) :]: v for k, v in entry.tensors.items() if k.startswith(prefix)}

    return [Snapshot(step, part(step, "params"), part(step, "exp_avg"), part(step, "exp_avg_sq"))
            for step in entry.meta["steps"]], hit  # fmt: skip


def train_from(
    name: str,
    seed: int,
    snapshot: Snapshot,
    order: int,
    *,
    device: torch.device | None = None,
    data_dir: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> tuple[Checkpoint, bool]:
    """The run of ``seed`` gone on from ``snapshot`` to the recipe's last step with the data
    order (and dropout) of ``order`` instead of its own: a child spawned from a parent. Cached
    (kind ``"spawn"``) under the snapshot's digest and ``order``. Returns (checkpoint, hit); its
    metadata says ``spawn``: the parent seed, the step and the order."""
    model = zoo_model(name)
    cache = cache or Cache()

    def compute() -> tuple[Params, dict[str, Any]]:
        dev = resolve_device(device)
        with one_thread(dev):
            ckpt = run_seed(model, seed, dev, data_dir, progress,
                            spawning=Spawning(resume=snapshot, order=order))
        return ckpt.params, {**ckpt.meta, "spawn": {"parent": seed, "step": snapshot.step,
                                                    "order": order}}  # fmt: skip

    inputs = {**checkpoint_inputs(model, seed, data_dir), "step": snapshot.step, "order": order,
              "snapshot": [digest_tensors(snapshot.params), digest_tensors(snapshot.exp_avg),
                           digest_tensors(snapshot.exp_avg_sq)],
              "snapshots": SNAPSHOTS_VERSION}  # fmt: skip
    entry, hit = cache.get_or_compute("spawn", inputs, compute)
    return Checkpoint(model.config, entry.tensors, entry.meta), hit


@dataclass(frozen=True)
class TrainedSeeds:
    """What :func:`train_seeds` returns: one checkpoint per seed, in the order asked."""

    checkpoints: list[Checkpoint]
    cached: list[bool]  # read from the cache, not trained now
    batched: bool  # False: trained (or read) seed by seed, solo; ``note`` says why
    note: str | None = None


def train_seeds(
    name: str,
    seeds: list[int],
    *,
    device: torch.device | None = None,
    data_dir: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
    variant: str | None = None,
    text: str | None = None,
) -> TrainedSeeds:
    """Train (or load from the disk cache) several seeds of one zoo checkpoint as one batched
    model (:func:`train_models`); the seeds missing from the cache train together. One seed is
    :func:`train`, solo. Options as for :func:`train`.

    Each seed is its own cache entry, under its solo key plus ``batched``
    (:func:`checkpoint_inputs`). Batched weights equalled the solo ones bit for bit on the CPU
    where this was written, but a batched kernel may sum in another order elsewhere (a GPU's
    batched matrix products), and a solo entry promises the solo run's bits (the shipped digest,
    :func:`landscape.sources.zoo.compare_with_shipped`); so neither is served for the other.
    :func:`landscape.sources.zoo.get_checkpoint` reads a batched entry for a seed that no solo
    entry or shipped asset has. The key does not name the seeds trained with it
    (``meta["batch"]`` does): each seed's arithmetic is its own slice, so its bits do not depend
    on its companions. A model whose training step cannot be batched
    (:func:`landscape.models.batched.batching_problem`) trains seed by seed through
    :func:`train`, under the solo keys, and ``note`` says why.
    """
    for s in seeds:
        check_seed(s)
    if not seeds:
        raise LandscapeError("give at least one seed")
    if len(set(seeds)) < len(seeds):
        raise LandscapeError(f"seeds repeat ({' '.join(map(str, seeds))}): each seed trains once")
    opts: dict[str, Any] = {"device": device, "data_dir": data_dir, "cache": cache,
                            "progress": progress, "variant": variant, "text": text}  # fmt: skip
    if len(seeds) == 1:
        ckpt, hit = train(name, seeds[0], **opts)
        return TrainedSeeds([ckpt], [hit], batched=False)
    model = zoo_model(name) if text is None else text_model(text, name)
    cfg = with_variant(model, variant).config
    cache = opts["cache"] = cache or Cache()
    keys = {s: cache.key("checkpoint", checkpoint_inputs(model, s, data_dir, variant,
                                                         batched=True)) for s in seeds}  # fmt: skip
    entries = {s: cache.get("checkpoint", keys[s]) for s in seeds}
    missing = [s for s in seeds if entries[s] is None]
    if missing:
        problem = batching_problem(cfg, model.train.dropout)
        if problem is not None:
            runs = [train(name, s, **opts) for s in seeds]
            return TrainedSeeds([c for c, _ in runs], [h for _, h in runs], batched=False,
                                note=f"{model.name} cannot be trained batched ({problem}); "
                                "its seeds trained one at a time (solo checkpoints)")  # fmt: skip
        with contextlib.ExitStack() as locks:  # in sorted order, so two runs cannot deadlock
            for s in sorted(missing):
                locks.enter_context(cache.lock("checkpoint", keys[s]))
            entries.update({s: cache.get("checkpoint", keys[s]) for s in missing})
            todo = [s for s in missing if entries[s] is None]  # another process may have some
            if todo:
                keep = RunKeeper(
                    cache, cache.key(RUN_STATE, {"checkpoints": [keys[s] for s in todo]})
                )
                trained = train_models(model, todo, device=device, data_dir=data_dir,
                                       progress=progress, variant=variant, keep=keep)  # fmt: skip
                for s, ckpt in zip(todo, trained, strict=True):
                    entries[s] = _store(cache, keys[s], ckpt)
                keep.remove()
            missing = todo
    return TrainedSeeds([Checkpoint(cfg, entries[s].tensors, entries[s].meta) for s in seeds],
                        [s not in missing for s in seeds], batched=True)  # fmt: skip


def _store(cache: Cache, key: str, ckpt: Checkpoint) -> Entry:
    """A trained checkpoint's cache entry; when it cannot be written, the checkpoint itself
    with a warning (as ``Cache.get_or_compute`` does: the result is still good)."""
    try:
        return cache.put("checkpoint", key, ckpt.params, ckpt.meta)
    except LandscapeError as e:
        print(f"landscape: warning: {e}; result not cached", file=sys.stderr)
        return Entry(ckpt.params, ckpt.meta, key)


def tqdm_progress(desc: str) -> Progress:
    """A bar on stderr of the training steps done; its postfix is the stage (the test metrics)."""
    from tqdm import tqdm

    bar: dict[str, Any] = {}

    def update(stage: str, step: float, total: float) -> None:
        if "bar" not in bar:
            bar["bar"] = tqdm(total=total, desc=desc, file=sys.stderr, leave=False)
        bar["bar"].update(step - bar["bar"].n)
        bar["bar"].set_postfix_str(stage)
        if step >= total:
            bar["bar"].close()

    return update
