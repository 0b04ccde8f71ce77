"""Landscape: weight-space symmetries and linear mode connectivity of transformers.

The public API is small and re-exported here; heavier parts (matching, experiments, plots,
importers) are imported on first use, so ``import landscape`` stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from landscape.errors import LandscapeError

__version__ = "0.1.0"

_LAZY = {
    # the models need torch: on first use too, so that `landscape --help` starts without it
    "ModelConfig": "landscape.models",
    "forward": "landscape.models",
    "init_params": "landscape.models",
    "Cache": "landscape.store.cache",
    "get_checkpoint": "landscape.sources.zoo",
    "train": "landscape.models.train",
    "spec_for": "landscape.symmetry",
    "apply": "landscape.symmetry",
    "random_transform": "landscape.symmetry",
    "symmetry_table": "landscape.symmetry",
    "match": "landscape.matching",
    "evaluate_path": "landscape.experiments.evaluation",
    "EvalOptions": "landscape.experiments.evaluation",
    "barrier_from_curve": "landscape.experiments.basins",
    "barrier": "landscape.experiments",
    "BarrierRequest": "landscape.experiments",
    "measure_barrier": "landscape.experiments",
    "triangle": "landscape.experiments",
    "table": "landscape.experiments",
    "curvature": "landscape.experiments.curvature",
    "CurvatureRequest": "landscape.experiments.curvature",
    "measure_curvature": "landscape.experiments.curvature",
    "import_checkpoint": "landscape.models.importers",
    "add_family": "landscape.sources",
}

__all__ = ["LandscapeError", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'landscape' has no attribute {name!r}")
