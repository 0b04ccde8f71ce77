"""What the pages ask the library that loads no model and computes nothing: the request of a
pair, the pairs and the paper's numbers of a table, a result's rows, facts of a zoo model. Named
here so that a page reaches the library through ``app.state`` alone."""

from __future__ import annotations

from landscape.experiments.barriers.curved import curve_rows
from landscape.experiments.barriers.request import seeds_request
from landscape.experiments.barriers.tables import mean_sem, pairs_for, paper_value
from landscape.experiments.barriers.widths import default_factors
from landscape.experiments.gauge.parts import trajectory_spacing
from landscape.experiments.merging.operators import merge_rows, mergekit_installed
from landscape.models.train import snapshot_every
from landscape.models.zoo import ZOO
from landscape.sources import model_arch

__all__ = [
    "curve_rows",
    "mean_sem",
    "merge_rows",
    "mergekit_installed",
    "model_arch",
    "pairs_for",
    "paper_value",
    "seeds_request",
    "snapshot_every",
    "trajectory_spacing",
    "width_factors",
]


def width_factors(model: str) -> tuple[int, ...]:
    """The factors k of the narrower versions (width d/k) of a zoo model the page offers: the
    paper's 2, 4, 8 and 16, those that divide its width."""
    return default_factors(ZOO[model].config)
