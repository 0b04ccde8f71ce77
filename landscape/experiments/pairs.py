"""Barriers between two checkpoints that are not zoo models (issue "Real checkpoints").

``barrier_paths(A, B, method, group, text=FILE)`` loads two checkpoints (Hugging Face
directories or ``.gguf`` files through :func:`landscape.models.importers.import_checkpoint`, or
landscape-format directories written by ``zoo.save_checkpoint_dir``), aligns B to A and
measures the loss/accuracy barrier along ``θ(λ) = λ·θ_A + (1−λ)·π(θ_B)`` (λ = 1 is A,
DESIGN §1). Typical use: two fine-tunes of one base model.

Evaluation data
---------------
- Language models: next-token loss and accuracy on non-overlapping windows of a local UTF-8 text
  file, encoded with A's ``tokenizer.json`` when its directory has one, else UTF-8 bytes or
  characters (:func:`landscape.data.text.token_corpus`; the result's ``tokens`` says which).
  Landscape-format character models use their own vocabulary. The ``test`` split is the last
  10% of the text; ``n_ctx`` tokens per window, at most ``max_windows`` windows.
- ViT and MLP classifiers: an image data set, ``data="digits"`` (8×8) or ``"fashion"``
  (28×28 Fashion-MNIST, ``data_dir``), which must fit the model's input (grey images, image
  size, at least 10 classes); anything else is refused in one line.

Memory
------
Everything stays bounded by a few copies of the parameters: weight matching forms the
transformed B one parameter at a time (``landscape.matching``); the curve is evaluated one λ
at a time (a single interpolated copy), in batches of windows sized so that one batch's logits
stay near ``LOGIT_BUDGET`` elements, under ``torch.no_grad``. Parameters are float32 on the CPU;
on CUDA ``dtype="bfloat16"`` halves the evaluation's memory (matching stays float32 on the CPU).

Results are cached (kind ``"pair-barrier"``) keyed by the weight digests of A and B, the
configuration, method, group, data identity and evaluation settings.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from landscape.budget import TEXT_BYTES_CHARACTERS, check_points, check_text_file, check_windows
from landscape.data import Split
from landscape.device import resolve_device
from landscape.errors import LandscapeError
from landscape.models import ModelConfig
from landscape.models.checkpoint import Checkpoint
from landscape.store.cache import Cache, digest_tensors

__all__ = [
    "DATASETS",
    "LOGIT_BUDGET",
    "barrier_paths",
    "check_same_architecture",
    "eval_batch_size",
    "load_any",
]

PAIR_VERSION = 2  # bump when matching or evaluation of pairs changes (2: function_check_a)
METHODS = ("naive", "activation", "weight", "learned")
GROUPS = ("perm", "signed-perm", "orth")
DATASETS = ("digits", "fashion")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
LOGIT_BUDGET = 2**24  # logits (or widest activations) one evaluation batch may hold
AM_TOKENS = 2048  # positions whose activations activation matching correlates
Progress = Callable[[str, float], None]


# ---------------------------------------------------------------- loading


def load_any(path: str | os.PathLike) -> Checkpoint:
    """A checkpoint from a landscape-format directory or any format the importers read."""
    from landscape.models.checkpoint import load_checkpoint_dir
    from landscape.models.importers import import_checkpoint

    p = Path(path)
    cfg_file = p / "config.json"
    if p.is_dir() and cfg_file.is_file():
        try:
            doc = json.loads(cfg_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            doc = None
        if isinstance(doc, dict) and doc.get("format") == "landscape":
            ckpt = load_checkpoint_dir(p)
            params = {k: v.float() for k, v in ckpt.params.items()}
            return Checkpoint(ckpt.cfg, params, ckpt.meta)
    return import_checkpoint(p)


def check_same_architecture(a: Checkpoint, b: Checkpoint, label_a: str, label_b: str) -> None:
    """One-line error naming the first configuration field where A and B differ."""
    da, db = asdict(a.cfg), asdict(b.cfg)
    da["n_kv_heads"], db["n_kv_heads"] = a.cfg.kv_heads, b.cfg.kv_heads  # 0 means n_heads
    diff = [k for k in da if da[k] != db[k]]
    if diff:
        k = diff[0]
        more = f" (and {len(diff) - 1} more)" if len(diff) > 1 else ""
        raise LandscapeError(
            f"mismatched architectures: {label_a} has {k}={da[k]!r}, {label_b} has "
            f"{k}={db[k]!r}{more}"
        )
    if a.meta.get("vocab") != b.meta.get("vocab"):
        raise LandscapeError(f"{label_a} and {label_b} use different character vocabularies")


# ---------------------------------------------------------------- data


def _text_splits(
    ckpt: Checkpoint, path_a: str, text: str, n_ctx: int, max_windows: int
) -> tuple[dict[str, Split], dict[str, Any]]:
    from landscape.data.text import token_corpus

    cfg = ckpt.cfg
    if n_ctx > cfg.n_ctx:
        raise LandscapeError(f"--n-ctx {n_ctx} exceeds the model's context of {cfg.n_ctx}")
    check_windows(max_windows, n_ctx)  # before the text is read
    vocab = ckpt.meta.get("vocab")
    if vocab:  # a landscape character model: its own vocabulary
        from landscape.data import text_corpus

        check_text_file(text, TEXT_BYTES_CHARACTERS, "with the checkpoint's characters")
        corpus = text_corpus(text, vocab)
        splits = {s: corpus.windows(s, n_ctx, max_windows) for s in ("train", "test")}
        ident = {"text": corpus.digest, "tokens": "model vocabulary (characters)"}
        return splits, {**ident, "note": "encoded with the checkpoint's character vocabulary"}
    corpus = token_corpus(text, checkpoint=path_a, d_vocab=cfg.d_vocab)
    splits = {s: corpus.windows(s, n_ctx, max_windows) for s in ("train", "test")}
    return splits, {"text": corpus.digest, "tokens": corpus.tokenizer, "note": corpus.note}


def _image_splits(
    cfg: ModelConfig, data: str, data_dir: str | None
) -> tuple[dict[str, Split], dict[str, Any]]:
    from landscape import data as datasets

    if data not in DATASETS:
        raise LandscapeError(f"unknown data set {data!r}; expected one of {', '.join(DATASETS)}")
    flat = cfg.arch == "mlp"
    if data == "digits":
        splits = {s: datasets.digits(s, flat=flat) for s in ("train", "test")}
    else:
        splits = {s: datasets.fashion(s, data_dir) for s in ("train", "test")}
        if flat:
            splits = {s: Split(v.inputs.flatten(1), v.targets) for s, v in splits.items()}
    x = splits["test"].inputs
    if cfg.arch == "mlp" and x.shape[1] != cfg.d_in:
        raise LandscapeError(f"{data} has {x.shape[1]} features; the model expects {cfg.d_in}")
    if cfg.arch == "vit":
        if cfg.channels > 1:
            raise LandscapeError(
                f"the model expects {cfg.channels}-channel images; {data} is grey (1 channel)"
            )
        if x.shape[-1] != cfg.image_size:
            raise LandscapeError(
                f"{data} images are {x.shape[-1]}×{x.shape[-1]}; the model expects "
                f"{cfg.image_size}×{cfg.image_size}"
            )
        if cfg.channels == 1:
            splits = {s: Split(v.inputs[:, None], v.targets) for s, v in splits.items()}
    if cfg.n_out < 10:
        raise LandscapeError(f"{data} has 10 classes; the model has {cfg.n_out} outputs")
    return splits, {"data": data, "note": f"{data} images, {len(x)} test examples"}


def _splits(
    ckpt: Checkpoint,
    path_a: str,
    text: str | None,
    data: str | None,
    data_dir: str | None,
    n_ctx: int,
    max_windows: int,
) -> tuple[dict[str, Split], dict[str, Any]]:
    cfg = ckpt.cfg
    if cfg.arch == "gpt":
        if text is None:
            raise LandscapeError("a language model pair needs --text FILE (a UTF-8 text file)")
        return _text_splits(ckpt, path_a, text, n_ctx, max_windows)
    if data is None:
        raise LandscapeError(
            f"a {cfg.arch} pair needs an image data set: --data {' or --data '.join(DATASETS)}"
        )
    return _image_splits(cfg, data, data_dir)


def eval_batch_size(cfg: ModelConfig, inputs: torch.Tensor) -> int:
    """Rows per evaluation batch of these inputs (windows of tokens, or images) so that one
    batch's widest activation fits ``LOGIT_BUDGET``."""
    positions = inputs.shape[1] if cfg.arch == "gpt" else cfg.n_ctx or 1
    width = max(cfg.n_out, cfg.d_mlp, 3 * cfg.d_model, cfg.n_heads * positions)
    return max(1, min(512, LOGIT_BUDGET // (positions * width)))


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**20 if sys.platform == "darwin" else 2**10)


# ---------------------------------------------------------------- barrier


def barrier_paths(
    path_a: str | os.PathLike,
    path_b: str | os.PathLike,
    method: str = "weight",
    group: str = "perm",
    *,
    text: str | os.PathLike | None = None,
    data: str | None = None,
    data_dir: str | None = None,
    points: int = 11,
    split: str = "test",
    n_ctx: int = 128,
    max_windows: int = 64,
    device: str | None = None,
    dtype: str = "float32",
    seed: int = 0,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Align B to A with ``method`` under ``group`` and measure the barrier (module docstring).

    Returns the keys of ``experiments.barrier`` (``lambdas``, ``loss``, ``accuracy``,
    ``barrier_loss``, ``barrier_accuracy``, ``endpoint_loss`` [A, B], ``endpoint_accuracy``,
    ``function_check``, ``seconds``, ``cached``, ``device``) and the pair's facts: ``a``, ``b``,
    ``architecture``, ``parameters``, ``data`` (what was evaluated and how it was encoded),
    ``windows``, ``matching`` (rounds, objective, seconds) and ``peak_rss_mb``; the function
    checks of aligned B and processed A (``function_check``, ``function_check_a``),
    ``function_ok`` and ``warnings`` (one line per check that is NaN or above the tolerance).
    A NaN or infinite loss on the line is a LandscapeError naming the λ. Points, windows and
    the text are checked against the memory budget (``landscape.budget``) before work starts.
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise LandscapeError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if group not in GROUPS:
        raise LandscapeError(f"unknown group {group!r}; expected one of {', '.join(GROUPS)}")
    if split not in ("train", "test"):
        raise LandscapeError(f"unknown split {split!r}; expected train or test")
    if points < 2:
        raise LandscapeError("--points must be at least 2 (the endpoints)")
    check_points(points)
    if n_ctx < 1 or max_windows < 1:
        raise LandscapeError("--n-ctx and --max-windows must be positive")
    if dtype not in DTYPES:
        raise LandscapeError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    dev = resolve_device(device)
    if dtype == "bfloat16" and dev.type != "cuda":
        raise LandscapeError("bfloat16 evaluation is for CUDA; on the CPU pairs run in float32")
    say = progress or (lambda stage, frac: None)

    say("load", 0.0)
    a, b = load_any(path_a), load_any(path_b)
    check_same_architecture(a, b, str(path_a), str(path_b))
    cfg = a.cfg
    from landscape.models.importers import describe

    facts = {
        "architecture": describe(cfg, a.meta.get("model_type", "")),
        "parameters": sum(v.numel() for v in a.params.values()),
    }
    splits, data_id = _splits(a, str(path_a), text, data, data_dir, n_ctx, max_windows)
    cache = cache or Cache()
    inputs = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "cfg": cfg.to_dict(),
        "method": method,
        "group": group,
        "seed": seed,
        "points": points,
        "split": split,
        "n_ctx": n_ctx if cfg.arch == "gpt" else None,
        "max_windows": max_windows if cfg.arch == "gpt" else None,
        "data": {k: v for k, v in data_id.items() if k != "note"},
        "dtype": dtype,
        "version": PAIR_VERSION,
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        nonlocal a, b
        from landscape.experiments.curves import (
            barrier_from_curve,
            check_finite_loss,
            evaluate_path,
        )
        from landscape.matching import match

        say("match", 0.1)
        train = splits["train"]
        options: dict[str, Any] = {}
        if method == "activation":
            positions = train.inputs.shape[1] if train.inputs.ndim == 2 and cfg.arch == "gpt" else 1
            options["batch"] = max(1, AM_TOKENS // positions)
        if method == "learned":  # the longest step: report every one of its steps
            options["progress"] = lambda done, total: say(
                f"learned matching step {done}/{total}", 0.1 + 0.4 * done / max(total, 1)
            )
        r = match(cfg, a.params, b.params, method, group, train_split=train, seed=seed,
                  device=str(dev), **options)  # fmt: skip
        a = b = None  # only the processed A and the aligned B are needed from here on
        say("evaluate", 0.5)
        ev = splits[split]
        batch_size = eval_batch_size(cfg, ev.inputs)
        pa, pb = r.params_a, r.params_b
        if dtype != "float32":
            pa = {k: v.to(DTYPES[dtype]) for k, v in pa.items()}
            pb = {k: v.to(DTYPES[dtype]) for k, v in pb.items()}
        lam = torch.linspace(0, 1, points, dtype=torch.float64)
        n_batches = -(-len(ev) // batch_size)

        def step(done: int, total: int) -> None:
            say("evaluate", 0.5 + 0.5 * done / max(total, 1))

        # one λ at a time (chunk=1): one interpolated copy of the parameters, never K of them
        loss, acc = evaluate_path(r.cfg, pa, pb, ev.inputs, ev.targets, lam,
                                  batch_size=batch_size, chunk=1,
                                  device=dev, progress=step)  # fmt: skip

        def where(i: int) -> str:
            x = float(lam[i])
            if x == 1.0:
                return f"λ = 1 (A, {path_a})"
            if x == 0.0:
                return f"λ = 0 (B, {path_b} aligned to A by {method}/{group})"
            return f"λ = {x:.6g} (between {path_a} and {path_b}, {method}/{group})"

        check_finite_loss(loss, where, split)  # refused, and nothing is stored
        curve = barrier_from_curve(lam, loss, acc).to_dict()
        info = r.to_dict()
        meta = {
            **curve,
            "function_check": r.function_check,
            "function_check_a": r.function_check_a,
            "matching": {
                "seconds": round(r.seconds, 4),
                "rounds": r.rounds,
                "objective": info["objective"],
                "kinds": sorted(set(info["kinds"].values())),
                "det_flips": r.det_flips,
            },
            "windows": len(ev),
            "batches_per_lambda": n_batches,
            "compute_seconds": round(time.perf_counter() - t0, 4),
            "compute_peak_rss_mb": round(peak_rss_mb(), 1),
        }
        return {}, meta

    entry, hit = cache.get_or_compute("pair-barrier", inputs, compute)
    from landscape.matching import function_warnings

    warnings = function_warnings({
        f"B ({path_b}) aligned to A ({method}/{group})": entry.meta["function_check"],
        f"A ({path_a}) processed for {group}": entry.meta.get("function_check_a"),
    })  # fmt: skip
    out = {
        "a": str(path_a),
        "b": str(path_b),
        "method": method,
        "group": group,
        "split": split,
        **facts,
        "data": data_id,
        **entry.meta,
        "function_ok": not warnings,
        "warnings": warnings,
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": hit,
        "device": str(dev),
        "dtype": dtype,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    say("done", 1.0)
    return out
