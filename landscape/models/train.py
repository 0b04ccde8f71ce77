"""Seeded, deterministic training of zoo models, cached on disk.

Same seed → the same initial weights (``init_params``) and the same data order (a
``torch.Generator`` seeded from the seed), so on one machine with one thread setting two runs give
bit-identical weights. Training uses AdamW with warm-up and cosine decay; loss/accuracy curves are
recorded with the checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from landscape import data
from landscape.budget import check_snapshots, max_snapshots
from landscape.device import kernel_fingerprint, resolve_device
from landscape.errors import LandscapeError, check_seed
from landscape.models.batched import (
    batching_problem,
    clip_per_seed_,
    seed_losses,
    seed_slice,
    stack_params,
)
from landscape.models.checkpoint import Checkpoint
from landscape.models.config import ModelConfig
from landscape.models.functional import Dropout, forward, loss_and_accuracy
from landscape.models.params import Params, count_params, init_params, param_shapes
from landscape.models.zoo import (
    TrainConfig,
    Variant,
    ZooModel,
    corpus_for,
    data_identity,
    get_variant,
    split_for,
    text_model,
    with_variant,
    zoo_model,
)
from landscape.progress import Progress
from landscape.store.cache import Cache, Entry, digest_tensors

TRAIN_VERSION = 1  # bump when the training algorithm changes: old cache entries stop matching
BATCHED_VERSION = 1  # bump when batched training (train_seeds) changes: its entries stop matching


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


def _lr(step: int, tc) -> float:
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    t = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    return tc.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def decays(name: str, w: torch.Tensor) -> bool:
    """The recipe's weight-decay rule: decay matrices, never vectors or positions (``W_pos``).

    The one copy of the rule: the functional AdamW of ``landscape.optim`` uses it too.
    """
    return w.ndim >= 2 and "W_pos" not in name


# Fixed seeds of the control variants' data changes: the same for every training seed.
SHUFFLE_SEED, HALVES_SEED = 20_000, 20_001


def _relabel(v: Variant | None, targets: torch.Tensor, n: int) -> torch.Tensor:
    return (targets + 1) % n if v is not None and v.labels == "permuted" else targets


def _variant_train(model: ZooModel, v: Variant | None, split: data.Split) -> data.Split:
    """A classification training split as a variant sees it (labels, half)."""
    if v is None:
        return split
    x, y = split.inputs, _relabel(v, split.targets, model.config.n_out)
    if v.labels == "shuffled":
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(SHUFFLE_SEED))]
    if v.half >= 0:
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(HALVES_SEED))
        keep = order[: len(y) // 2] if v.half == 0 else order[len(y) // 2 :]
        x, y = x[keep], y[keep]
    return data.Split(x, y)


def _batches(model: ZooModel, seed: int, vocab: str | None, data_dir: str | None,
             v: Variant | None = None):  # fmt: skip
    """Endless seeded stream of training batches (as the variant ``v`` sees them, if any)."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    bs = model.train.batch_size
    if model.is_text:
        stream = corpus_for(model, vocab).train
        labels = stream
        if v is not None and v.half >= 0:
            stream = stream[: len(stream) // 2] if v.half == 0 else stream[len(stream) // 2 :]
            labels = stream
        if v is not None and v.labels == "shuffled":
            g = torch.Generator().manual_seed(SHUFFLE_SEED)
            labels = stream[torch.randperm(len(stream), generator=g)]
        t = model.config.n_ctx
        while True:
            starts = torch.randint(0, len(stream) - t - 1, (bs,), generator=gen)
            idx = starts[:, None] + torch.arange(t + 1)
            chunk = stream[idx].long()  # streams are compact codes; embeddings take int64
            target = labels[idx[:, 1:]].long() if v is not None else chunk[:, 1:]
            yield chunk[:, :-1], _relabel(v, target, model.config.n_out)
    split = _variant_train(model, v, split_for(model, "train", data_dir=data_dir))
    while True:
        order = torch.randperm(len(split), generator=gen)
        for i in range(0, len(order) - bs + 1, bs):
            j = order[i : i + bs]
            yield split.inputs[j], split.targets[j]


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
    with _one_thread(dev):
        return _train_model(model, seed, dev, data_dir, progress, variant, keep=keep)


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
    (:func:`_train_batched`). On the CPU on one thread, as :func:`train_model`. ``keep``: as
    for :func:`train_model`."""
    dev = resolve_device(device)
    with _one_thread(dev):
        return _train_batched(model, seeds, dev, data_dir, progress, variant, keep=keep)


@contextlib.contextmanager
def _one_thread(dev: torch.device) -> Iterator[None]:
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
class _Recipe:
    """What every seed's run of one zoo model (and variant) shares."""

    model: ZooModel  # with the variant's architecture change
    var: Variant | None
    steps: int
    vocab: str | None
    test: data.Split  # on the variant's own task (permuted labels: permuted targets)


def _recipe(model: ZooModel, variant_name: str | None, data_dir: str | None) -> _Recipe:
    var = get_variant(variant_name)
    model = with_variant(model, variant_name)
    cfg, tc = model.config, model.train
    steps = tc.steps if var is None else max(1, round(var.stop * tc.steps))
    vocab = corpus_for(model).vocab if model.is_text else None
    if vocab is not None and len(vocab) != cfg.d_vocab:
        raise LandscapeError(f"the text has {len(vocab)} symbols, the model expects {cfg.d_vocab}")
    test = split_for(model, "test", vocab=vocab, data_dir=data_dir)
    if var is not None:  # metrics on the variant's own task (permuted labels: permuted targets)
        test = data.Split(test.inputs, _relabel(var, test.targets, cfg.n_out))
    return _Recipe(model, var, steps, vocab, test)


def _adamw(params: Params, tc: TrainConfig, seed_axis: bool = False) -> torch.optim.AdamW:
    """The recipe's AdamW over ``params``, decayed by :func:`decays` (on one seed's slice when
    the tensors carry a leading ``seed_axis``)."""
    rule = [decays(k, v[0] if seed_axis else v) for k, v in params.items()]
    decay = [v for v, d in zip(params.values(), rule, strict=True) if d]
    no_decay = [v for v, d in zip(params.values(), rule, strict=True) if not d]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=tc.lr,
        betas=(0.9, 0.98),
    )


def _new_curves() -> dict[str, list[float]]:
    return {"step": [], "train_loss": [], "test_loss": [], "test_accuracy": []}


@dataclass(frozen=True)
class Snapshot:
    """A training run before its step ``step``: the parameters and AdamW's moments, all a run
    needs to go on from there (the learning rate is the recipe's at that step)."""

    step: int
    params: Params
    exp_avg: Params
    exp_avg_sq: Params


def _snapshot(step: int, params: Params, opt: torch.optim.AdamW) -> Snapshot:
    """The run now, copied to the CPU (moments zero before the first step)."""

    def moment(name: str) -> Params:
        return {k: opt.state[v][name].detach().cpu().clone() if v in opt.state
                else torch.zeros_like(v, device="cpu") for k, v in params.items()}  # fmt: skip

    return Snapshot(step, {k: v.detach().cpu().clone() for k, v in params.items()},
                    moment("exp_avg"), moment("exp_avg_sq"))  # fmt: skip


RUN_STATE = "run-state"  # the cache kind of an unfinished run's progress (RunKeeper)


@dataclass(frozen=True)
class RunKeeper:
    """Where an unfinished training run keeps its progress, so that a run that is interrupted
    (a closed terminal, a lost machine) goes on from its last evaluation when it is asked for
    again, instead of from step 0.

    At every evaluation but the last, the run writes its parameters, AdamW's moments, its
    curves so far, each seed's dropout generator and the seconds spent into the cache (kind
    :data:`RUN_STATE`) under ``key`` (the key of the checkpoint, or checkpoints, being trained);
    the entry is removed once the checkpoint is stored. The data order needs nothing stored:
    each seed's stream is replayed from its seed to the step. So a resumed run computes what the
    uninterrupted run computes, bit for bit (the same kernels assumed, as ever)."""

    cache: Cache
    key: str

    def read(self) -> Entry | None:
        return self.cache.get(RUN_STATE, self.key)

    def write(self, step: int, params: Params, opt: torch.optim.AdamW,
              curves: list[dict[str, list[float]]], drops: list[Dropout] | None,
              seconds: float) -> None:  # fmt: skip
        snap = _snapshot(step, params, opt)
        tensors = {f"p.{k}": v for k, v in snap.params.items()}
        tensors.update({f"m.{k}": v for k, v in snap.exp_avg.items()})
        tensors.update({f"v.{k}": v for k, v in snap.exp_avg_sq.items()})
        for i, d in enumerate(drops or []):
            tensors[f"rng.{i}"] = d.generator.get_state()
        meta = {"step": step, "curves": curves, "seconds": seconds}
        try:
            self.cache.put(RUN_STATE, self.key, tensors, meta)
        except LandscapeError as e:  # the run goes on; only its resumption is lost
            print(f"landscape: warning: {e}; this run cannot resume if interrupted",
                  file=sys.stderr)  # fmt: skip

    def remove(self) -> None:
        self.cache.remove(RUN_STATE, self.key)


def _resumed(keep: RunKeeper | None, cfg: ModelConfig
             ) -> tuple[Snapshot, dict[str, Any], Params] | None:  # fmt: skip
    """The snapshot, meta (step, curves, seconds) and dropout generator states of a kept run,
    its parameters in the model's own order (the optimizer's groups and the gradient norm's sum
    follow it: another order rounds otherwise)."""
    entry = keep.read() if keep is not None else None
    if entry is None:
        return None
    t = entry.tensors
    order = list(param_shapes(cfg))

    def part(prefix: str) -> Params:
        if prefix == "rng.":
            return {k[len(prefix):]: v for k, v in t.items() if k.startswith(prefix)}
        return {k: t[prefix + k] for k in order}

    snap = Snapshot(entry.meta["step"], part("p."), part("m."), part("v."))
    # the curves' columns in the run's order (the stored JSON sorts them): rows are zipped in
    meta = {**entry.meta, "curves": [{k: list(c[k]) for k in _new_curves()}
                                     for c in entry.meta["curves"]]}  # fmt: skip
    return snap, meta, part("rng.")


def _replay(batches: Iterator[Any], steps: int) -> None:
    """Advance a batch stream by ``steps`` batches (a resumed run reads on where it stopped)."""
    for _ in range(steps):
        next(batches)


def _train_model(
    model: ZooModel,
    seed: int,
    dev: torch.device,
    data_dir: str | None,
    progress: Progress | None,
    variant_name: str | None = None,
    *,
    every: int = 0,
    snapshots: list[Snapshot] | None = None,
    resume: Snapshot | None = None,
    order: int | None = None,
    keep: RunKeeper | None = None,
) -> Checkpoint:
    """One seed's training run. The step never waits for the device (a small model on a GPU is
    bound by launching kernels, so the host must run ahead): batches go over from pinned memory
    without blocking, the losses are summed on the device, and a non-finite one is reported at
    the next evaluation, with the window of steps it lies in.

    Opt-in, for spawning (:func:`train_snapshots`, :func:`train_from`): ``every`` > 0 appends a
    :class:`Snapshot` to ``snapshots`` before every ``every``-th step and after the last (the
    arithmetic of the run is unchanged); ``resume`` goes on from a snapshot instead of the
    seed's initialisation, and ``order`` seeds the data order and dropout instead of ``seed``.
    ``keep``: where the run keeps its progress at every evaluation, and whence it goes on
    (:class:`RunKeeper`)."""
    r = _recipe(model, variant_name, data_dir)
    cfg, tc, steps = r.model.config, r.model.train, r.steps
    kept = _resumed(keep, cfg)
    if kept is not None:
        resume = kept[0]
    first = 0 if resume is None else resume.step
    init = init_params(cfg, seed) if resume is None else resume.params
    params = {k: v.to(dev).clone().requires_grad_() for k, v in init.items()}
    opt = _adamw(params, tc)
    if resume is not None and first > 0:  # AdamW's state as the run left it
        for k, v in params.items():
            opt.state[v] = {"step": torch.tensor(float(first)),
                            "exp_avg": resume.exp_avg[k].to(dev).clone(),
                            "exp_avg_sq": resume.exp_avg_sq[k].to(dev).clone()}  # fmt: skip
    curves = _new_curves() if kept is None else kept[1]["curves"][0]
    running, n_running, since = torch.zeros((), dtype=torch.float64, device=dev), 0, first
    start = time.perf_counter() - (0.0 if kept is None else kept[1]["seconds"])
    stream = seed if order is None else order
    batches = _batches(r.model, stream, r.vocab, data_dir, r.var)
    drop = Dropout(tc.dropout, 20_000 + stream, dev) if tc.dropout else None
    if kept is not None:  # the data and dropout draws where the run stopped
        _replay(batches, first)
        if drop is not None:
            drop.generator.set_state(kept[2]["0"])
        if progress:
            progress(f"resumed at step {first}", first, steps)
    for step in range(first, steps):
        if every and step % every == 0 and snapshots is not None:
            snapshots.append(_snapshot(step, params, opt))
        x, y = next(batches)
        for g in opt.param_groups:
            g["lr"] = _lr(step, tc)
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
        snapshots.append(_snapshot(steps, params, opt))
    if not curves["step"]:  # resumed at the last step: nothing trained, the metrics of now
        test_loss, test_acc = evaluate(cfg, params, r.test)
        for k, v in zip(curves, (steps, math.nan, test_loss, test_acc), strict=True):
            curves[k].append(v)
    final = {k: v.detach().cpu() for k, v in params.items()}
    return _checkpoint(r, seed, final, curves, start, dev, data_dir)


def _train_batched(
    model: ZooModel,
    seeds: list[int],
    dev: torch.device,
    data_dir: str | None,
    progress: Progress | None,
    variant_name: str | None = None,
    keep: RunKeeper | None = None,
) -> list[Checkpoint]:
    """:func:`_train_model` for every seed at once: the parameters stacked on a seed axis, one
    vmapped loss and one backward for all seeds (``landscape.models.batched``), each seed's
    gradient clipped on its own, and one AdamW over the stacked tensors (elementwise, so each
    slice moves as that seed's solo optimizer moves it). Seed s reads the batches of its own
    generator and draws dropout from its own, as its solo run does.

    The step waits for the device no more than the solo step does (:func:`_train_model`).
    """
    r = _recipe(model, variant_name, data_dir)
    cfg, tc, steps = r.model.config, r.model.train, r.steps
    kept = _resumed(keep, cfg)
    if kept is None:
        params = stack_params([init_params(cfg, s) for s in seeds], dev)
    else:
        params = {k: v.to(dev).clone().requires_grad_() for k, v in kept[0].params.items()}
    opt = _adamw(params, tc, seed_axis=True)
    first = 0 if kept is None else kept[0].step
    if kept is not None:  # AdamW's state as the run left it
        for k, v in params.items():
            opt.state[v] = {"step": torch.tensor(float(first)),
                            "exp_avg": kept[0].exp_avg[k].to(dev).clone(),
                            "exp_avg_sq": kept[0].exp_avg_sq[k].to(dev).clone()}  # fmt: skip
    curves = [_new_curves() for _ in seeds] if kept is None else kept[1]["curves"]
    running = torch.zeros(len(seeds), dtype=torch.float64, device=dev)
    n_running, since = 0, first
    start = time.perf_counter() - (0.0 if kept is None else kept[1]["seconds"])
    streams = [_batches(r.model, s, r.vocab, data_dir, r.var) for s in seeds]
    drops = [Dropout(tc.dropout, 20_000 + s, dev) for s in seeds] if tc.dropout else None
    if kept is not None:  # each seed's data and dropout draws where the run stopped
        for i, b in enumerate(streams):
            _replay(b, first)
            if drops is not None:
                drops[i].generator.set_state(kept[2][str(i)])
        if progress:
            progress(f"resumed at step {first}", first, steps)
    for step in range(first, steps):
        xs, ys = zip(*(next(b) for b in streams), strict=True)
        for g in opt.param_groups:
            g["lr"] = _lr(step, tc)
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
    r: _Recipe,
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
    train_split = split_for(model, "train", vocab=vocab, data_dir=data_dir)
    if model.is_text:
        train_split = data.Split(
            train_split.inputs[: model.eval_windows], train_split.targets[: model.eval_windows]
        )
        if var is not None:
            y = _relabel(var, train_split.targets, cfg.n_out)
            train_split = data.Split(train_split.inputs, y)
    else:
        train_split = _variant_train(model, var, train_split)
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
        with _one_thread(dev):
            ckpt = _train_model(model, seed, dev, data_dir, progress, every=every,
                                snapshots=taken)  # fmt: skip
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
        with _one_thread(dev):
            ckpt = _train_model(model, seed, dev, data_dir, progress, resume=snapshot,
                                order=order)  # fmt: skip
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
                keep = RunKeeper(cache, cache.key(RUN_STATE, {"checkpoints": [keys[s]
                                                                             for s in todo]}))
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
