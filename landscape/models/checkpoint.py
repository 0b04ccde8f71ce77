"""Checkpoints: a model's configuration, parameters and metadata, and their plain on-disk form.

A checkpoint directory holds ``config.json`` (``{"format": "landscape", "config": ...,
"meta": ...}``) and ``model.safetensors``. Loading never unpickles: safetensors only, every
expected tensor checked for presence, shape and finite values (:func:`check_params`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.params import Params, param_shapes
from landscape.store.files import new_folder, read_json, replace_file, write_problem


@dataclass(eq=False)
class Checkpoint:
    """A trained model: its configuration, parameters and metadata (metrics, curves, vocab).

    Compared and hashed as the object it is (its tensors have no one truth value): a barrier
    request holding a loaded checkpoint is hashable, and equal only to a request holding the
    same object."""

    cfg: ModelConfig
    params: Params
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.meta.get("name", "checkpoint")

    @property
    def seed(self) -> int | None:
        return self.meta.get("seed")

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> Checkpoint:
        params = {k: v.to(device=device, dtype=dtype or v.dtype) for k, v in self.params.items()}
        return Checkpoint(self.cfg, params, self.meta)


def check_params(cfg: ModelConfig, params: Params, source: str) -> None:
    """Every expected tensor present with the right shape and finite values; names the culprit."""
    expected = param_shapes(cfg)
    for name, shape in expected.items():
        if name not in params:
            raise LandscapeError(f"{source}: missing tensor {name}")
        t = params[name]
        if tuple(t.shape) != shape:
            raise LandscapeError(
                f"{source}: tensor {name} has shape {tuple(t.shape)}, expected {shape}"
            )
        if not torch.isfinite(t).all():
            raise LandscapeError(f"{source}: tensor {name} contains NaN or infinite values")
    extra = sorted(set(params) - set(expected))
    if extra:
        raise LandscapeError(f"{source}: unexpected tensor {extra[0]} for this architecture")


def check_save_target(path: str | os.PathLike) -> Path:
    """Refuse, before any work, a checkpoint directory that cannot be written or that holds
    something else: an existing file, a non-empty directory that is not a landscape checkpoint
    (its ``config.json`` would be overwritten), a parent that is a file or not writable. An
    existing landscape checkpoint directory is replaced."""
    p = Path(path).expanduser()
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise LandscapeError(f"cannot save to {p}: it exists and is not a directory")
        if any(p.iterdir()) and not _is_landscape_dir(p):
            raise LandscapeError(
                f"cannot save to {p}: a non-empty directory that is not a landscape checkpoint"
            )
        where = p
    else:
        where = p.parent
        while not where.exists() and where != where.parent:
            where = where.parent
        if not where.is_dir():
            raise LandscapeError(f"cannot save to {p}: {where} is not a directory")
    if not os.access(where, os.W_OK | os.X_OK):
        raise LandscapeError(f"cannot save to {p}: {where} is not writable")
    return p


def _is_landscape_dir(p: Path) -> bool:
    try:
        doc = read_json(p / "config.json")
    except LandscapeError:  # unreadable, not JSON, nested too deeply: not a landscape checkpoint
        return False
    return isinstance(doc, dict) and doc.get("format") == "landscape"


def _weights_file(ckpt: Checkpoint, f: Path) -> None:
    save_file({k: v.contiguous().cpu() for k, v in ckpt.params.items()}, f)


def _config_file(ckpt: Checkpoint, f: Path) -> None:
    doc = {"format": "landscape", "config": ckpt.cfg.to_dict(), "meta": ckpt.meta}
    f.write_text(json.dumps(doc, indent=1))


def save_checkpoint_dir(ckpt: Checkpoint, path: str | os.PathLike) -> Path:
    """Plain format: ``config.json`` (config + metadata) and ``model.safetensors``, in a new
    directory or replacing an existing landscape checkpoint's files (``train --save``); each
    file is replaced whole. A failed write is one line naming the directory and the cause."""
    p = check_save_target(path)
    made = not p.exists()
    try:
        p.mkdir(parents=True, exist_ok=True)
        replace_file(p / "model.safetensors", lambda f: _weights_file(ckpt, f))
        replace_file(p / "config.json", lambda f: _config_file(ckpt, f))
    except (OSError, SafetensorError) as e:
        if made:  # the directory this call created, while it is still empty
            with contextlib.suppress(OSError):
                p.rmdir()
        raise LandscapeError(f"cannot save to {p}: {write_problem(e)}") from None
    return p


def save_new_checkpoint_dir(ckpt: Checkpoint, path: str | os.PathLike) -> Path:
    """:func:`save_checkpoint_dir` to a directory that must not exist yet (``align --out``):
    written whole into a temporary directory of this call's own and renamed into place, so it
    appears complete or not at all; of two writers to one path exactly one succeeds and the
    other gets a one-line error (:func:`landscape.store.files.new_folder`)."""
    p = Path(path).expanduser()
    with new_folder(p) as tmp:
        _weights_file(ckpt, tmp / "model.safetensors")
        _config_file(ckpt, tmp / "config.json")
    return p


def load_checkpoint_dir(path: str | os.PathLike) -> Checkpoint:
    p = Path(path)
    if not p.is_dir():
        raise LandscapeError(f"{p} is not a zoo model name or a checkpoint directory")
    cfg_file, weights = p / "config.json", p / "model.safetensors"
    for f in (cfg_file, weights):
        if not f.is_file():
            raise LandscapeError(f"checkpoint {p}: missing {f.name}")
    doc = read_json(cfg_file)
    try:
        cfg = ModelConfig.from_dict(doc["config"])
    except (KeyError, TypeError, ValueError) as e:
        raise LandscapeError(
            f"checkpoint {p}: config.json is not a landscape config ({e})"
        ) from None
    try:
        params = load_file(weights)
    except (SafetensorError, OSError) as e:
        raise LandscapeError(f"checkpoint {p}: {weights.name} is not a valid safetensors file ({e})"
                             ) from None  # fmt: skip
    check_params(cfg, params, str(weights))
    meta = dict(doc.get("meta", {}))
    meta.setdefault("name", p.name)
    meta.setdefault("source", str(p))
    return Checkpoint(cfg, params, meta)
