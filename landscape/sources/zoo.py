"""Where a zoo checkpoint comes from: the disk cache, the shipped assets or training.

A checkpoint is found, in order, in the disk cache, in the shipped assets (verified against the
manifest's digest), in the cache's batched-trained entries, or trained
(:func:`get_checkpoint`); :func:`available_seeds` lists the seeds found without training. The
training itself is :mod:`landscape.models.train`. ``landscape train`` never substitutes a shipped
asset: it trains on a cache miss and reports whether the result matches the shipped weights
(:func:`compare_with_shipped`).
"""

from __future__ import annotations

import functools
import json
import stat
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from landscape.errors import LandscapeError
from landscape.models.checkpoint import Checkpoint, load_checkpoint_dir
from landscape.models.train import checkpoint_inputs, train
from landscape.models.zoo import ZOO, ZooModel, with_variant, zoo_model
from landscape.progress import Progress
from landscape.store.cache import Cache, digest_tensors
from landscape.store.paths import assets_root

# How far a retrained zoo checkpoint's test metrics may lie from the shipped one's when the two
# were trained with other CPU kernels (another instruction set or vendor rounds differently, and
# training amplifies the difference to max |Δw| ≈ 0.04–0.25). Measured against the shipped
# seed 0 under ATen's default/avx2/avx512 kernels and MKL's own or pinned dispatch: mlp-digits
# |Δacc| ≤ 0.004, |Δloss| ≤ 0.009 nats; vit-digits (memorised, so its test loss moves most)
# |Δacc| ≤ 0.012, |Δloss| ≤ 0.069 nats.
REPRODUCIBLE_METRICS = {"test_accuracy": 0.02, "test_loss": 0.1}


# ---------------------------------------------------------------- shipped checkpoints


def manifest_path() -> Path:
    return assets_root() / "zoo" / "manifest.json"


def read_manifest() -> list[dict[str, Any]]:
    """The shipped checkpoints' records, parsed once per version of the file (every page run
    lists the seeds of every zoo model): shared between callers, so read them, never change
    them."""
    p = manifest_path()
    try:
        st = p.stat()
    except OSError:
        return []
    if not stat.S_ISREG(st.st_mode):
        return []
    return _parsed_manifest(str(p), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _parsed_manifest(path: str, *stamp: int) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text())["checkpoints"]


def shipped(name: str, seed: int) -> dict[str, Any] | None:
    for rec in read_manifest():
        if rec["name"] == name and rec["seed"] == seed:
            return rec
    return None


def shipped_seeds(name: str) -> list[int]:
    return sorted(r["seed"] for r in read_manifest() if r["name"] == name)


def load_shipped(name: str, seed: int) -> Checkpoint | None:
    """The shipped checkpoint if present, current (same config) and intact (digest verified)."""
    rec = shipped(name, seed)
    model = zoo_model(name)
    if (
        rec is None
        or rec["config"] != model.config.to_dict()
        or rec["train"] != model.train.to_dict()
    ):
        return None
    f = assets_root() / "zoo" / rec["file"]
    try:
        params = load_file(f)
    except (SafetensorError, OSError):
        return None
    if digest_tensors(params) != rec["digest"]:
        return None
    meta = {k: v for k, v in rec.items() if k not in ("config", "file")}
    meta["source"] = "assets"
    meta.update(rec.get("extra", {}))
    return Checkpoint(model.config, params, meta)


def compare_with_shipped(ckpt: Checkpoint) -> dict[str, Any] | None:
    """How a trained checkpoint compares with the shipped one of the same name and seed.

    Bit-identical weights are promised only between solo runs with the same CPU kernels
    (:func:`landscape.device.kernel_fingerprint`, recorded with both); otherwise, and for a
    checkpoint trained batched with other seeds (:func:`landscape.models.train.train_seeds`), the
    test metrics must agree within :data:`REPRODUCIBLE_METRICS`. ``promise`` says which applies,
    ``reproduced`` whether it holds.
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
    bitwise = same_kernels and "batch" not in ckpt.meta
    return {"shipped": True, "current": True, "same_kernels": same_kernels,
            "same_digest": same_digest, "max_abs_diff": diff, "metric_deltas": deltas,
            "promise": "bit-identical weights" if bitwise else "matching test metrics",
            "reproduced": same_digest if bitwise else within}  # fmt: skip


def get_checkpoint(
    model: str,
    seed: int | None = None,
    *,
    device: torch.device | None = None,
    cache: Cache | None = None,
    train_if_missing: bool = True,
    progress: Progress | None = None,
    variant: str | None = None,
) -> Checkpoint:
    """A zoo checkpoint (disk cache → shipped assets → the cache's batched-trained entry,
    :func:`landscape.models.train.train_seeds` → training), or a checkpoint directory (family
    members and other checkpoints: ``landscape.sources.Source``).

    Control variants are never shipped: they come from the cache or are trained.
    """
    if model not in ZOO:
        return load_checkpoint_dir(model)
    if seed is None:
        raise LandscapeError(f"{model} is a zoo model: give a seed")
    cache = cache or Cache()
    zm = zoo_model(model)
    cached = _cached(cache, zm, seed, variant)
    if cached is not None:
        return cached
    if variant is None:
        asset = load_shipped(model, seed)
        if asset is not None:
            return asset
    cached = _cached(cache, zm, seed, variant, batched=True)  # trained with other seeds at once
    if cached is not None:
        return cached
    if variant is None and not train_if_missing:
        raise LandscapeError(f"{model} seed {seed} is neither cached nor shipped")
    return train(model, seed, device=device, cache=cache, progress=progress, variant=variant)[0]


def _cached(
    cache: Cache, model: ZooModel, seed: int, variant: str | None, batched: bool = False
) -> Checkpoint | None:
    """The cached checkpoint of a zoo seed (solo or ``batched``), or None (also when its data is
    missing here, so that its key cannot be told)."""
    try:
        key = cache.key("checkpoint", checkpoint_inputs(model, seed, variant=variant,
                                                        batched=batched))  # fmt: skip
    except LandscapeError:
        return None
    entry = cache.get("checkpoint", key)
    if entry is None:
        return None
    return Checkpoint(with_variant(model, variant).config, entry.tensors, entry.meta)


def available_seeds(name: str, cache: Cache | None = None) -> list[dict[str, Any]]:
    """Every seed of a zoo model that is trained: cached (current recipe) or shipped.

    Rows: ``seed, source ("cache" | "assets" | "batched"), test_loss, test_accuracy,
    train_loss, train_accuracy``. A cached checkpoint wins over the shipped one of the same
    seed, and either over a batched-trained one (:func:`landscape.models.train.train_seeds`), the
    order in which :func:`get_checkpoint` reads them (an imported family's members:
    ``landscape.sources.available_seeds``).
    """

    model = zoo_model(name)
    rows: dict[int, dict[str, Any]] = {}
    for rec in read_manifest():
        if rec["name"] == name and rec["config"] == model.config.to_dict():
            rows[rec["seed"]] = {"seed": rec["seed"], "source": "assets", **rec["metrics"]}
    cache = cache or Cache()
    batched: dict[int, dict[str, Any]] = {}
    for key, meta in cache.metas("checkpoint"):
        if meta.get("name") != name:
            continue
        seed = meta["seed"]
        try:
            solo_key = cache.key("checkpoint", checkpoint_inputs(model, seed))
            batched_key = cache.key("checkpoint", checkpoint_inputs(model, seed, batched=True))
        except LandscapeError:  # its data is missing here: cannot tell, so do not list it
            continue
        if key == solo_key:
            rows[seed] = {"seed": seed, "source": "cache", **meta["metrics"]}
        elif key == batched_key:
            batched[seed] = {"seed": seed, "source": "batched", **meta["metrics"]}
    rows.update({s: row for s, row in batched.items() if s not in rows})  # as get_checkpoint
    return [rows[s] for s in sorted(rows)]
