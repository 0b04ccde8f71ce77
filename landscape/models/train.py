"""Seeded, deterministic training of zoo models, cached on disk.

Same seed → the same initial weights (``init_params``) and the same data order (a
``torch.Generator`` seeded from the seed), so on one machine with one thread setting two runs give
bit-identical weights. Training uses AdamW with warm-up and cosine decay; loss/accuracy curves are
recorded with the checkpoint.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import torch

from landscape import data
from landscape.device import kernel_fingerprint, resolve_device
from landscape.errors import LandscapeError, check_seed
from landscape.models.checkpoint import Checkpoint, load_checkpoint_dir
from landscape.models.config import ModelConfig
from landscape.models.functional import Dropout, forward, loss_and_accuracy
from landscape.models.params import Params, init_params
from landscape.models.zoo import (
    ZOO,
    Variant,
    ZooModel,
    corpus_for,
    data_identity,
    get_variant,
    load_shipped,
    read_manifest,
    shipped,
    split_for,
    text_model,
    with_variant,
    zoo_model,
)
from landscape.progress import Progress
from landscape.store.cache import Cache, digest_tensors

TRAIN_VERSION = 1  # bump when the training algorithm changes: old cache entries stop matching
# How far a retrained zoo checkpoint's test metrics may lie from the shipped one's when the two
# were trained with other CPU kernels (another instruction set or vendor rounds differently, and
# training amplifies the difference to max |Δw| ≈ 0.04–0.25). Measured against the shipped
# seed 0 under ATen's default/avx2/avx512 kernels and MKL's own or pinned dispatch: mlp-digits
# |Δacc| ≤ 0.004, |Δloss| ≤ 0.009 nats; vit-digits (memorised, so its test loss moves most)
# |Δacc| ≤ 0.012, |Δloss| ≤ 0.069 nats.
REPRODUCIBLE_METRICS = {"test_accuracy": 0.02, "test_loss": 0.1}


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
    device: str | torch.device | None = None,
    data_dir: str | None = None,
    progress: Progress | None = None,
    variant: str | None = None,
) -> Checkpoint:
    """Train one zoo model from scratch (no cache). Returns parameters on the CPU.

    ``variant`` names a control variant (``landscape.models.zoo.VARIANTS``): changed labels, half of
    the data, an early stop or a LayerNorm model; its metrics are on its own task's targets.

    On the CPU training runs on one thread: the zoo models are small enough that one thread is
    fastest (spinning OpenMP workers lose badly when another process holds a core), and a fixed
    thread count makes the weights bit-identical across machines with different core counts.
    """
    dev = resolve_device(device)
    if dev.type == "cpu":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return _train_model(model, seed, dev, data_dir, progress, variant)
        finally:
            torch.set_num_threads(threads)
    return _train_model(model, seed, dev, data_dir, progress, variant)


def _train_model(
    model: ZooModel,
    seed: int,
    dev: torch.device,
    data_dir: str | None,
    progress: Progress | None,
    variant_name: str | None = None,
) -> Checkpoint:
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
    params = {k: v.to(dev).requires_grad_() for k, v in init_params(cfg, seed).items()}
    decay = [v for k, v in params.items() if decays(k, v)]
    no_decay = [v for k, v in params.items() if not decays(k, v)]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=tc.lr,
        betas=(0.9, 0.98),
    )
    curves: dict[str, list[float]] = {
        "step": [],
        "train_loss": [],
        "test_loss": [],
        "test_accuracy": [],
    }
    running, n_running = 0.0, 0
    start = time.perf_counter()
    batches = _batches(model, seed, vocab, data_dir, var)
    drop = Dropout(tc.dropout, 20_000 + seed, dev) if tc.dropout else None
    for step in range(steps):
        x, y = next(batches)
        for g in opt.param_groups:
            g["lr"] = _lr(step, tc)
        logits = forward(cfg, params, x.to(dev), dropout=drop)
        loss, _ = loss_and_accuracy(cfg, logits, y.to(dev))
        if not torch.isfinite(loss):
            raise LandscapeError(
                f"training {model.name} seed {seed} diverged at step {step} (loss {loss.item()})"
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), tc.grad_clip)
        opt.step()
        running += loss.item()
        n_running += 1
        if (step + 1) % tc.eval_every == 0 or step + 1 == steps:
            test_loss, test_acc = evaluate(cfg, params, test)
            row = (step + 1, running / n_running, test_loss, test_acc)
            for k, v in zip(curves, row, strict=True):
                curves[k].append(v)
            running, n_running = 0.0, 0
            if progress:  # the stage carries the test metrics, for the bar to show
                progress(
                    f"test loss {test_loss:.4f}, test accuracy {test_acc:.4f}", step + 1, steps
                )
    final = {k: v.detach().cpu() for k, v in params.items()}
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
        meta["steps_run"] = steps
    return Checkpoint(cfg, final, meta)


def checkpoint_inputs(
    model: ZooModel, seed: int, data_dir: str | None = None, variant: str | None = None
) -> dict[str, Any]:
    """Cache-key inputs of a checkpoint; a variant adds its definition (none: unchanged)."""
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
    return inputs


def train(
    name: str,
    seed: int,
    *,
    device: str | torch.device | None = None,
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
    checkpoint; cached under the file's digest).
    """
    model = zoo_model(name) if text is None else text_model(text, name)
    check_seed(seed)
    cache = cache or Cache()

    def compute():
        ckpt = train_model(model, seed, device=device, data_dir=data_dir, progress=progress,
                           variant=variant)  # fmt: skip
        return ckpt.params, ckpt.meta

    entry, hit = cache.get_or_compute(
        "checkpoint", checkpoint_inputs(model, seed, data_dir, variant), compute
    )
    return Checkpoint(with_variant(model, variant).config, entry.tensors, entry.meta), hit


def compare_with_shipped(ckpt: Checkpoint) -> dict[str, Any] | None:
    """How a trained checkpoint compares with the shipped one of the same name and seed.

    Bit-identical weights are promised only between runs with the same CPU kernels
    (:func:`landscape.device.kernel_fingerprint`, recorded with both); otherwise the test
    metrics must agree within :data:`REPRODUCIBLE_METRICS`. ``reproduced`` says whether the
    promise that applies holds.
    """
    rec = shipped(ckpt.name, ckpt.seed)
    if rec is None:
        return None
    asset = load_shipped(ckpt.name, ckpt.seed)
    if asset is None:
        return {"shipped": True, "current": False}
    diff = max((ckpt.params[k] - asset.params[k]).abs().max().item() for k in asset.params)
    kernels = ckpt.meta.get("kernels")
    same_kernels = kernels is not None and kernels == rec.get("kernels")
    same_digest = rec["digest"] == ckpt.meta["digest"]
    deltas = {k: abs(ckpt.meta["metrics"][k] - rec["metrics"][k]) for k in REPRODUCIBLE_METRICS}
    within = all(deltas[k] <= tol for k, tol in REPRODUCIBLE_METRICS.items())
    return {"shipped": True, "current": True, "same_kernels": same_kernels,
            "same_digest": same_digest, "max_abs_diff": diff, "metric_deltas": deltas,
            "reproduced": same_digest if same_kernels else within}  # fmt: skip


def get_checkpoint(
    model: str,
    seed: int | None = None,
    *,
    device: str | torch.device | None = None,
    cache: Cache | None = None,
    train_if_missing: bool = True,
    progress: Progress | None = None,
    variant: str | None = None,
) -> Checkpoint:
    """A zoo checkpoint (disk cache → shipped assets → training), or a checkpoint directory
    (family members and other checkpoints: ``landscape.sources.Source``).

    Control variants are never shipped: they come from the cache or are trained.
    """
    if model not in ZOO:
        return load_checkpoint_dir(model)
    if seed is None:
        raise LandscapeError(f"{model} is a zoo model: give a seed")
    if variant is not None:
        return train(model, seed, device=device, cache=cache, progress=progress,
                     variant=variant)[0]  # fmt: skip
    cache = cache or Cache()
    zm = zoo_model(model)
    try:
        key = cache.key("checkpoint", checkpoint_inputs(zm, seed))
    except LandscapeError:
        key = None  # data missing: only a shipped checkpoint can help
    if key is not None:
        entry = cache.get("checkpoint", key)
        if entry is not None:
            return Checkpoint(zm.config, entry.tensors, entry.meta)
    asset = load_shipped(model, seed)
    if asset is not None:
        return asset
    if not train_if_missing:
        raise LandscapeError(f"{model} seed {seed} is neither cached nor shipped")
    return train(model, seed, device=device, cache=cache, progress=progress)[0]


def available_seeds(name: str, cache: Cache | None = None) -> list[dict[str, Any]]:
    """Every seed of a zoo model that is trained: cached (current recipe) or shipped.

    Rows: ``seed, source ("cache" | "assets"), test_loss, test_accuracy, train_loss,
    train_accuracy``. A cached checkpoint wins over the shipped one of the same seed (an
    imported family's members: ``landscape.sources.available_seeds``).
    """

    model = zoo_model(name)
    rows: dict[int, dict[str, Any]] = {}
    for rec in read_manifest():
        if rec["name"] == name and rec["config"] == model.config.to_dict():
            rows[rec["seed"]] = {"seed": rec["seed"], "source": "assets", **rec["metrics"]}
    cache = cache or Cache()
    for key, meta in cache.metas("checkpoint"):
        if meta.get("name") != name:
            continue
        try:
            current = key == cache.key("checkpoint", checkpoint_inputs(model, meta["seed"]))
        except LandscapeError:  # its data is missing here: cannot tell, so do not list it
            current = False
        if current:
            rows[meta["seed"]] = {"seed": meta["seed"], "source": "cache", **meta["metrics"]}
    return [rows[s] for s in sorted(rows)]


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
