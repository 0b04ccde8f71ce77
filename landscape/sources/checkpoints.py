"""Checkpoints by path, family member or zoo name: loading, naming in messages, the same-
architecture check, and what a name holds (seeds, architecture).
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from landscape.errors import LandscapeError, did_you_mean
from landscape.models import ModelConfig
from landscape.models.importers import (
    import_checkpoint,
)
from landscape.models.zoo import (
    ZOO,
    Checkpoint,
    load_checkpoint_dir,
    zoo_model,
)
from landscape.sources.zoo import available_seeds as zoo_seeds
from landscape.store.cache import Cache
from landscape.store.families import (
    check_member,
    families,
    family,
    is_family,
    member_rows,
)
from landscape.store.files import read_json


def load_any(path: str | os.PathLike) -> Checkpoint:
    """A float32 checkpoint from a landscape-format directory or any format the importers read
    (:func:`landscape.models.importers.import_checkpoint`)."""
    p = Path(path)
    if not p.exists():
        known = [*ZOO, *(f.name for f in families())]
        raise LandscapeError(
            f"{p} is not a zoo model, a family or a checkpoint path{did_you_mean(str(p), known)}"
        )
    if landscape_dir(p):
        ckpt = load_checkpoint_dir(p)
        params = {k: v.float() for k, v in ckpt.params.items()}
        return Checkpoint(ckpt.cfg, params, ckpt.meta)
    return import_checkpoint(p)


def landscape_dir(p: Path) -> bool:
    """Whether ``p`` is a folder landscape wrote: a ``config.json`` that says
    ``"format": "landscape"`` (``train --save``, ``align --out``, a family's planted member)."""
    if not (p.is_dir() and (p / "config.json").is_file()):
        return False
    try:
        doc = read_json(p / "config.json")
    except LandscapeError:  # the importer names the problem
        return False
    return isinstance(doc, dict) and doc.get("format") == "landscape"


def label(ckpt: Checkpoint) -> str:
    """How a checkpoint is named in messages: ``mlp-digits seed 3``, or for a family member
    ``fam member 1 (its label)`` (members share the family's name, which cannot tell them apart)."""
    if ckpt.meta.get("family"):
        tag = ckpt.meta.get("label")
        return f"{ckpt.meta['family']} member {ckpt.seed}" + (f" ({tag})" if tag else "")
    return ckpt.name if ckpt.seed is None else f"{ckpt.name} seed {ckpt.seed}"


def check_same_architecture(a: Checkpoint, b: Checkpoint, label_a: str, label_b: str) -> None:
    """One-line error naming the configuration fields where A and B differ (the first with both
    values), or their vocabularies."""
    da, db = asdict(a.cfg), asdict(b.cfg)
    da["n_kv_heads"], db["n_kv_heads"] = a.cfg.kv_heads, b.cfg.kv_heads  # 0 means n_heads
    diff = [k for k in da if da[k] != db[k]]
    if diff:
        k = diff[0]
        hint = ""
        if set(diff) <= {"d_model", "d_norm"}:  # residual width only: a semi-orthogonal embedding
            hint = "; they differ only in width: compare them with `landscape widths`"
        raise LandscapeError(
            f"mismatched architectures: {label_a} and {label_b} differ in {diff}: {label_a} has "
            f"{k}={da[k]!r}, {label_b} has {k}={db[k]!r}{hint}"
        )
    if a.meta.get("vocab") != b.meta.get("vocab"):
        raise LandscapeError(f"{label_a} and {label_b} use different character vocabularies")


def load_member(name: str, index: int | None) -> Checkpoint:
    """Member ``index`` of a family as a float32 Checkpoint whose meta names the family."""
    fam = family(name)
    i = check_member(fam, index)
    ckpt = load_any(fam.members[i])
    meta = {**ckpt.meta, "name": fam.name, "family": fam.name, "seed": i,
            "member": fam.members[i], "label": fam.label(i)}  # fmt: skip
    return Checkpoint(ckpt.cfg, ckpt.params, meta)


def available_seeds(name: str, cache: Cache | None = None) -> list[dict[str, Any]]:
    """The checkpoints of a zoo model (:func:`landscape.sources.zoo.available_seeds`: seeds
    cached or shipped, with metrics) or of a family (its members: ``seed, label, path,
    present``)."""
    if name not in ZOO and is_family(name):
        return member_rows(name)
    return zoo_seeds(name, cache)


def model_arch(name: str) -> str:
    """The architecture name of a zoo model or an imported family (``mlp``, ``vit``, …)."""
    if name not in ZOO and is_family(name):
        return family(name).arch
    return zoo_model(name).config.arch  # the zoo's error for an unknown name


def model_config(name: str, member: int = 0) -> ModelConfig:
    """The config of a zoo model (its recipe's: nothing is loaded or trained) or of an imported
    family (member ``member``'s, read from disk)."""
    if name not in ZOO and is_family(name):
        return load_member(name, member).cfg
    return zoo_model(name).config
