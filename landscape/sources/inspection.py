"""``landscape inspect PATH``: what a checkpoint is and the gauge groups it admits, optionally with
the measured symmetry table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from landscape.models import ModelConfig, count_params
from landscape.models.importers import (
    inspect_checkpoint,
)
from landscape.models.registry import describe as describe_architecture
from landscape.models.zoo import (
    load_checkpoint_dir,
)
from landscape.sources.checkpoints import landscape_dir, load_any
from landscape.symmetry import admitted_symmetries, symmetry_table


def inspect(path: str | os.PathLike, *, audit: bool = False) -> dict[str, Any]:
    """``landscape inspect PATH``: what a checkpoint is (:func:`~landscape.models.importers.
    inspect_checkpoint`; a folder landscape wrote, ``format`` landscape, from its own
    configuration and metadata) and, under ``symmetries``, the gauge groups it admits as
    imported (:func:`landscape.symmetry.admitted_symmetries`, read from the configuration).

    ``audit``: also ``audit``, the measured symmetry table of the weights
    (:func:`landscape.symmetry.symmetry_table`): every group level with a random element
    applied, its max |Δlogits| in float64, whether it is valid, what it needs and why (which
    norm or gain blocks it), and for an invalid level the row measured after the processing
    that makes it exact.
    """
    if landscape_dir(Path(path)):
        cfg, info = _inspect_landscape(Path(path))
    else:
        cfg, info = inspect_checkpoint(path)
    out = {**info, "symmetries": admitted_symmetries(cfg)}
    if audit:
        ckpt = load_any(path)
        out["audit"] = symmetry_table(ckpt.cfg, ckpt.params)
    return out


def _inspect_landscape(p: Path) -> tuple[ModelConfig, dict[str, Any]]:
    """:func:`inspect` of a folder landscape wrote: its own configuration (no source model
    type: the format is landscape's), the weights checked as loading checks them, and what its
    metadata says (the zoo model or family it came from, an alignment it holds)."""
    ckpt = load_checkpoint_dir(p)
    return ckpt.cfg, {
        "path": str(p),
        "format": "landscape",
        "architecture": describe_architecture(ckpt.cfg),
        "config": ckpt.cfg.to_dict(),
        "parameters": count_params(ckpt.cfg),
        "source_parameters": sum(v.numel() for v in ckpt.params.values()),
        "meta": ckpt.meta,
    }
