"""Experiments on checkpoints, cached on disk: the layer the CLI and the app call.

One room per experiment family, each a subpackage or a module:

- :mod:`~landscape.experiments.barriers`: the one barrier pipeline (``barriers.pipeline``) and
  what is built on it: the methods × groups table, controls, checkpoint-path pairs, the matrix,
  the barrier per matching round, narrower models, triangles, curved paths;
- :mod:`~landscape.experiments.eigen`: eigenangles of the rotations and the Eigenangles page's
  cached result;
- :mod:`~landscape.experiments.gauge`: the gauge sweep (its parts, its runner, its results);
- :mod:`~landscape.experiments.transport`: artifact transport between checkpoints;
- :mod:`~landscape.experiments.atlas`: 2-D maps of checkpoints;
- :mod:`~landscape.experiments.merging`: aligned checkpoints out, mergekit's operators, the
  recovery benchmark;
- :mod:`~landscape.experiments.families`: imported families' members with their metrics;
- :mod:`~landscape.experiments.surfaces`: 2-D loss surfaces (random directions, the plane
  through three aligned models);
- :mod:`~landscape.experiments.spawn`: children spawned from one run's snapshots, their barrier
  against the spawn step.
- :mod:`~landscape.experiments.curvature`: top Hessian eigenvalues and the Hessian's trace
  along the line, naive and aligned (imported where used: it loads ARPACK).

Shared by the rooms: :mod:`~landscape.experiments.evaluation` (loss and accuracy of many
models at once: along lines, over triangles) and :mod:`~landscape.experiments.sweeps` (the
tasks of a sweep, threaded or as Ray draws).

Re-exported here: the barrier pipeline, tables, triangles, widths, ``iteration_barriers``,
the eigenangle results and the family metrics.
"""

from __future__ import annotations

from landscape.experiments.barriers.alignment import ALGO_VERSION, Aligned, align
from landscape.experiments.barriers.coordinates import PROCESSED, Coordinates
from landscape.experiments.barriers.endpoints import SPLITS, check_pair, eval_split, load
from landscape.experiments.barriers.iterations import IterationOptions, iteration_barriers
from landscape.experiments.barriers.pipeline import BarrierRun, barrier, health, measure_barrier
from landscape.experiments.barriers.request import BARRIER_VERSION, BarrierRequest, seeds_request
from landscape.experiments.barriers.tables import (
    DEFAULT_ROWS,
    PAPER_REFERENCE,
    TableOptions,
    mean_sem,
    pairs_for,
    paper_value,
    summarise_barriers,
    table,
    table_spaces,
)
from landscape.experiments.barriers.triangles import TriangleOptions, align_joint, triangle
from landscape.experiments.barriers.widths import (
    WIDTH_GROUP,
    WidthOptions,
    check_factors,
    default_factors,
    embed_checkpoint,
    narrow_checkpoint,
    narrow_model,
    width_barriers,
    width_rows,
)
from landscape.experiments.context import RunContext
from landscape.experiments.eigen.view import eigenangle_result, eigenangle_view
from landscape.experiments.families import family_members, member_metrics
from landscape.experiments.surfaces import SurfaceOptions, surface
from landscape.names import BARRIER_GROUPS, METHODS

__all__ = [
    "ALGO_VERSION",
    "BARRIER_VERSION",
    "DEFAULT_ROWS",
    "PAPER_REFERENCE",
    "paper_value",
    "table_spaces",
    "BARRIER_GROUPS",
    "METHODS",
    "PROCESSED",
    "SPLITS",
    "WIDTH_GROUP",
    "Aligned",
    "BarrierRequest",
    "BarrierRun",
    "Coordinates",
    "IterationOptions",
    "RunContext",
    "SurfaceOptions",
    "TableOptions",
    "TriangleOptions",
    "WidthOptions",
    "align",
    "align_joint",
    "barrier",
    "seeds_request",
    "check_factors",
    "check_pair",
    "default_factors",
    "eigenangle_result",
    "eigenangle_view",
    "embed_checkpoint",
    "eval_split",
    "family_members",
    "health",
    "iteration_barriers",
    "load",
    "mean_sem",
    "measure_barrier",
    "member_metrics",
    "narrow_checkpoint",
    "narrow_model",
    "pairs_for",
    "summarise_barriers",
    "surface",
    "table",
    "triangle",
    "width_barriers",
    "width_rows",
]
