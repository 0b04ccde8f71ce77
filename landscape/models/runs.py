"""One training run of a zoo model, solo or with several seeds batched: the step loop, its
evaluations, the one-thread rule on the CPU, and the trained checkpoint with its metadata.

Same seed → the same initial weights (``init_params``) and the same data order
(``landscape.models.training_data``), so on one machine with one thread setting two runs give
bit-identical weights. Caching is ``landscape.models.train``'s.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from landscape import data
from landscape.device import kernel_fingerprint, resolve_device
from landscape.errors import LandscapeError
from landscape.models.batched import clip_per_seed_, seed_losses, seed_slice, stack_params
from landscape.models.checkpoint import Checkpoint
from landscape.models.config import ModelConfig
from landscape.models.functional import forward, loss_and_accuracy
from landscape.models.params import Params, init_params
from landscape.models.primitives import Dropout
from landscape.models.recipe import Recipe, adamw, learning_rate, new_curves, recipe
from landscape.models.snapshots import RunKeeper, Snapshot, resumed, take_snapshot
from landscape.models.training_data import batches, replay, train_for_metrics
from landscape.models.zoo import ZooModel, data_identity
from landscape.progress import Progress
from landscape.store.cache import digest_tensors


def evaluate(
    cfg: ModelConfig, params: Params, split: data.Split, batch_size: int = 512
) -> tuple[float, float]:
    """Mean loss (nats per prediction) and accuracy over the whole split."""
    dev = next(iter(params.values())).device
    total_loss, total_acc, n = 0.0, 0.0, 0
    with torch.no_grad():
        for i in range(0, len(split), batch_size):
            x = split.inputs[i : i + batch_size].to(dev)
            y = split.targets[i : i + batch_size].to(dev)
            loss, acc = loss_and_accuracy(cfg, forward(cfg, params, x), y)
            w = y.numel()
            total_loss += loss.item() * w
            total_acc += acc.item() * w
            n += w
    return total_loss / n, total_acc / n


def train_model(
    model: ZooModel,
    seed: int,
    *,
    device: torch.device | None = None,
    data_dir: str | None = None,
    progress: Progress | None = None,
    variant: str | None = None,
    keep: RunKeeper | None = None,
) -> Checkpoint:
    """Train one zoo model from scratch (no cache). Returns parameters on the CPU.

    ``variant`` names a control variant (``landscape.models.zoo.VARIANTS``): changed labels, half of
    the data, an early stop or a LayerNorm model; its metrics are on its own task's targets.

    On the CPU training runs on one thread: the zoo models are small enough that one thread is
    fastest (spinning OpenMP workers lose badly when another process holds a core), and a fixed
    thread count makes the weights bit-identical across machines with different core counts.
    """
    dev = resolve_device(device)
    with one_thread(dev):
        return run_seed(model, seed, dev, data_dir, progress, variant, keep=keep)


def train_models(
    model: ZooModel,
    seeds: list[int],
    *,
    device: torch.device | None = None,
    data_dir: str | None = None,
    progress: Progress | None = None,
    variant: str | None = None,
    keep: RunKeeper | None = None,
) -> list[Checkpoint]:
    """Train several seeds of one zoo model as one batched model (no cache), in the order of
    ``seeds``; parameters on the CPU. Each seed sees its solo run's batches and dropout draws
    (:func:`run_seeds`). On the CPU on one thread, as :func:`train_model`. ``keep``: as
    for :func:`train_model`."""
    dev = resolve_device(device)
    with one_thread(dev):
        return run_seeds(model, seeds, dev, data_dir, progress, variant, keep=keep)


@contextlib.contextmanager
def one_thread(dev: torch.device) -> Iterator[None]:
    """One CPU thread while training on the CPU (:func:`train_model` says why)."""
    if dev.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class Spawning:
    """What a run does for spawning, opt-in (:func:`landscape.models.train.train_snapshots`,
    :func:`landscape.models.train.train_from`): ``every`` > 0 appends a :class:`Snapshot` to
    ``snapshots`` before every ``every``-th step and after the last (the arithmetic of the run
    is unchanged); ``resume`` goes on from a snapshot instead of the seed's initialisation, and
    ``order`` seeds the data order and dropout instead of the seed."""

    every: int = 0
    snapshots: list[Snapshot] | None = None
    resume: Snapshot | None = None
    order: int | None = None


NO_SPAWNING = Spawning()  # the plain run: no snapshots, from the seed's initialisation


def run_seed(
    model: ZooModel,
    seed: int,
    dev: torch.device,
    data_dir: str | None,
    progress: Progress | None,
    variant_name: str | None = None,
    *,
    spawning: Spawning = NO_SPAWNING,
    keep: RunKeeper | None = None,
) -> Checkpoint:
    """One seed's training run on ``dev``, on the threads its caller set (:func:`train_model`
    sets one on the CPU). The step never waits for the device (a small model on a GPU is
    bound by launching kernels, so the host must run ahead): batches go over from pinned memory
    without blocking, the losses are summed on the device, and a non-finite one is reported at
    the next evaluation, with the window of steps it lies in.

    ``spawning`` (:class:`Spawning`): the snapshots it takes, or the snapshot and data order it
    goes on from. ``keep``: where the run keeps its progress at every evaluation, and whence it
    goes on (:class:`RunKeeper`)."""
    every, snapshots = spawning.every, spawning.snapshots
    resume, order = spawning.resume, spawning.order
    r = recipe(model, variant_name, data_dir)
    cfg, tc, steps = r.model.config, r.model.train, r.steps
    kept = resumed(keep, cfg)
    if kept is not None:
        resume = kept[0]
    first = 0 if resume is None else resume.step
    init = init_params(cfg, seed) if resume is None else resume.params
    params = {k: v.to(dev).clone().requires_grad_() for k, v in init.items()}
    opt = adamw(params, tc)
    if resume is not None and first > 0:  # AdamW's state as the run left it
        for k, v in params.items():
            opt.state[v] = {"step": torch.tensor(float(first)),
                            "exp_avg": resume.exp_avg[k].to(dev).clone(),
                            "exp_avg_sq": resume.exp_avg_sq[k].to(dev).clone()}  # fmt: skip
    curves = new_curves() if kept is None else kept[1]["curves"][0]
    running, n_running, since = torch.zeros((), dtype=torch.float64, device=dev), 0, first
    start = time.perf_counter() - (0.0 if kept is None else kept[1]["seconds"])
    stream = seed if order is None else order
    feed = batches(r.model, stream, r.vocab, data_dir, r.var)
    drop = Dropout(tc.dropout, 20_000 + stream, dev) if tc.dropout else None
    if kept is not None:  # the data and dropout draws where the run stopped
        replay(feed, first)
        if drop is not None:
            drop.generator.set_state(kept[2]["0"])
        if progress:
            progress(f"resumed at step {first}", first, steps)
    for step in range(first, steps):
        if every and step % every == 0 and snapshots is not None:
            snapshots.append(take_snapshot(step, params, opt))
        x, y = next(feed)
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, tc)
        logits = forward(cfg, params, _to(x, dev), dropout=drop)
        loss, _ = loss_and_accuracy(cfg, logits, _to(y, dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), tc.grad_clip)
        opt.step()
        running += loss.detach().double()  # float32 losses summed in float64, on the device
        n_running += 1
        if (step + 1) % tc.eval_every == 0 or step + 1 == steps:
            mean = (running / n_running).item()
            if not math.isfinite(mean):
                raise LandscapeError(f"training {model.name} seed {seed} diverged between steps "
                                     f"{since} and {step} (mean loss {mean})")  # fmt: skip
            test_loss, test_acc = evaluate(cfg, params, r.test)
            row = (step + 1, mean, test_loss, test_acc)
            for k, v in zip(curves, row, strict=True):
                curves[k].append(v)
            running.zero_()
            n_running, since = 0, step + 1
            if keep is not None and step + 1 < steps:
                keep.write(step + 1, params, opt, [curves], None if drop is None else [drop],
                           time.perf_counter() - start)  # fmt: skip
            if progress:  # the stage carries the test metrics, for the bar to show
                progress(f"test loss {test_loss:.4f}, test accuracy {100 * test_acc:.2f}%",
                         step + 1, steps)  # fmt: skip
    if every and snapshots is not None:
        snapshots.append(take_snapshot(steps, params, opt))
    if not curves["step"]:  # resumed at the last step: nothing trained, the metrics of now
        test_loss, test_acc = evaluate(cfg, params, r.test)
        for k, v in zip(curves, (steps, math.nan, test_loss, test_acc), strict=True):
            curves[k].append(v)
    final = {k: v.detach().cpu() for k, v in params.items()}
    return _checkpoint(r, seed, final, curves, start, dev, data_dir)


def run_seeds(
    model: ZooModel,
    seeds: list[int],
    dev: torch.device,
    data_dir: str | None,
    progress: Progress | None,
    variant_name: str | None = None,
    keep: RunKeeper | None = None,
) -> list[Checkpoint]:
    """:func:`run_seed` for every seed at once: the parameters stacked on a seed axis, one
    vmapped loss and one backward for all seeds (``landscape.models.batched``), each seed's
    gradient clipped on its own, and one AdamW over the stacked tensors (elementwise, so each
    slice moves as that seed's solo optimizer moves it). Seed s reads the batches of its own
    generator and draws dropout from its own, as its solo run does.

    The step waits for the device no more than the solo step does (:func:`run_seed`).
    """
    r = recipe(model, variant_name, data_dir)
    cfg, tc, steps = r.model.config, r.model.train, r.steps
    kept = resumed(keep, cfg)
    if kept is None:
        params = stack_params([init_params(cfg, s) for s in seeds], dev)
    else:
        params = {k: v.to(dev).clone().requires_grad_() for k, v in kept[0].params.items()}
    opt = adamw(params, tc, seed_axis=True)
    first = 0 if kept is None else kept[0].step
    if kept is not None:  # AdamW's state as the run left it
        for k, v in params.items():
            opt.state[v] = {"step": torch.tensor(float(first)),
                            "exp_avg": kept[0].exp_avg[k].to(dev).clone(),
                            "exp_avg_sq": kept[0].exp_avg_sq[k].to(dev).clone()}  # fmt: skip
    curves = [new_curves() for _ in seeds] if kept is None else kept[1]["curves"]
    running = torch.zeros(len(seeds), dtype=torch.float64, device=dev)
    n_running, since = 0, first
    start = time.perf_counter() - (0.0 if kept is None else kept[1]["seconds"])
    streams = [batches(r.model, s, r.vocab, data_dir, r.var) for s in seeds]
    drops = [Dropout(tc.dropout, 20_000 + s, dev) for s in seeds] if tc.dropout else None
    if kept is not None:  # each seed's data and dropout draws where the run stopped
        for i, b in enumerate(streams):
            replay(b, first)
            if drops is not None:
                drops[i].generator.set_state(kept[2][str(i)])
        if progress:
            progress(f"resumed at step {first}", first, steps)
    for step in range(first, steps):
        xs, ys = zip(*(next(b) for b in streams), strict=True)
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, tc)
        x, y = _to(torch.stack(xs), dev), _to(torch.stack(ys), dev)
        losses = seed_losses(cfg, params, x, y, drops)
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        clip_per_seed_([v.grad for v in params.values()], tc.grad_clip)
        opt.step()
        running += losses.detach().double()  # the solo run's sum of float32 losses in float64
        n_running += 1
        if (step + 1) % tc.eval_every == 0 or step + 1 == steps:
            means = (running / n_running).tolist()
            bad = [s for s, m in zip(seeds, means, strict=True) if not math.isfinite(m)]
            if bad:
                raise LandscapeError(
                    f"training {model.name} seed{'s' * (len(bad) > 1)} "
                    f"{' '.join(map(str, bad))} diverged between steps {since} and {step}"
                )
            shown = []
            for i, c in enumerate(curves):
                test_loss, test_acc = evaluate(cfg, seed_slice(params, i), r.test)
                row = (step + 1, means[i], test_loss, test_acc)
                for k, v in zip(c, row, strict=True):
                    c[k].append(v)
                shown.append((test_loss, test_acc))
            running.zero_()
            n_running, since = 0, step + 1
            if keep is not None and step + 1 < steps:
                keep.write(step + 1, params, opt, curves, drops, time.perf_counter() - start)
            if progress:  # each seed's test metrics, in the order of the seeds
                losses_, accs = zip(*shown, strict=True)
                progress(f"test loss {'/'.join(f'{v:.4f}' for v in losses_)}, test accuracy "
                         f"{'/'.join(f'{100 * v:.2f}%' for v in accs)}", step + 1,
                         steps)  # fmt: skip
    out = []
    for i, seed in enumerate(seeds):
        final = {k: v.cpu().clone() for k, v in seed_slice(params, i).items()}
        ckpt = _checkpoint(r, seed, final, curves[i], start, dev, data_dir)
        ckpt.meta["batch"] = list(seeds)  # trained together; "seconds" is the whole run's
        out.append(ckpt)
    return out


def _to(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """``t`` on ``dev``; to a GPU from pinned memory without blocking (a copy from pageable
    memory waits for the GPU's queue to drain, every step)."""
    if dev.type != "cuda":
        return t.to(dev)
    return t.pin_memory().to(dev, non_blocking=True)


def _checkpoint(
    r: Recipe,
    seed: int,
    final: Params,
    curves: dict[str, list[float]],
    start: float,
    dev: torch.device,
    data_dir: str | None,
) -> Checkpoint:
    """The trained parameters (on the CPU) with their metadata: metrics on the test split (the
    curves' last row) and the whole training split (text: its first ``eval_windows``), and the
    seconds since ``start`` (``time.perf_counter``)."""
    model, var, vocab = r.model, r.var, r.vocab
    cfg, tc = model.config, model.train
    train_split = train_for_metrics(model, var, vocab, data_dir)
    train_loss, train_acc = evaluate(cfg, final, train_split)
    meta: dict[str, Any] = {
        "name": model.name,
        "seed": seed,
        "dataset": model.dataset,
        "train": tc.to_dict(),
        "data": data_identity(model, data_dir),
        "metrics": {
            "test_loss": curves["test_loss"][-1],
            "test_accuracy": curves["test_accuracy"][-1],
            "train_loss": train_loss,
            "train_accuracy": train_acc,
        },
        "curves": curves,
        "seconds": round(time.perf_counter() - start, 2),
        "device": str(dev),
        "digest": digest_tensors(final),
    }
    if dev.type == "cpu":
        meta["kernels"] = kernel_fingerprint()
    if vocab is not None:
        meta["vocab"] = vocab
    if var is not None:
        meta["variant"] = var.name
        meta["steps_run"] = r.steps
    return Checkpoint(cfg, final, meta)
