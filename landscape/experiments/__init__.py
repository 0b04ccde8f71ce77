"""Experiments on checkpoints, cached on disk: the layer the CLI and the app call.

- :mod:`~landscape.experiments.runs`: matchings, the one barrier pipeline, eigenangles
  (re-exported here); :mod:`~landscape.experiments.triangles`: triangles, edge by edge or
  jointly aligned (re-exported here); :mod:`~landscape.experiments.tables`: pairs of seeds and the
  methods × groups table (re-exported here);
- :mod:`~landscape.experiments.curves`: loss and accuracy along lines and over triangles;
- :mod:`~landscape.experiments.pairs`: barriers between checkpoint paths;
- :mod:`~landscape.experiments.controls`: control pairs and the original coordinates of a path;
- :mod:`~landscape.experiments.gauge`: the gauge sweep's parts, run by
  :mod:`~landscape.experiments.gauge_runner`; :mod:`~landscape.experiments.transport`:
  artifact transport; :mod:`~landscape.experiments.atlas`: 2-D maps of checkpoints;
  :mod:`~landscape.experiments.eigen`: eigenangles of rotations;
  :mod:`~landscape.experiments.eigenview`: the Eigenangles page's result as one small entry
  (its :func:`eigenangle_view` re-exported here);
  :mod:`~landscape.experiments.iterations`: the barrier per weight-matching round and per
  learned-matching checkpoint (its :func:`iteration_barriers` re-exported here);
  :mod:`~landscape.experiments.widths`: barriers against narrower models (re-exported here).

Submodules keep their own names (``experiments.transport`` is the module, its function is
``transport.transport``); the functions re-exported here are those of ``runs``, ``triangles``,
``tables`` and ``widths``, ``iteration_barriers`` and ``eigenangle_view``.
"""

from __future__ import annotations

from landscape.experiments.eigenview import eigenangle_view
from landscape.experiments.iterations import iteration_barriers
from landscape.experiments.runs import (
    ALGO_VERSION,
    BARRIER_VERSION,
    PROCESSED,
    SPLITS,
    Aligned,
    BarrierRun,
    Coordinates,
    align,
    barrier,
    barrier_pair,
    check_pair,
    eigenangle_result,
    eval_split,
    family_members,
    health,
    load,
    measure_barrier,
    member_metrics,
)
from landscape.experiments.tables import (
    DEFAULT_ROWS,
    PAPER_REFERENCE,
    mean_sem,
    pairs_for,
    paper_value,
    summarise_barriers,
    table,
    table_spaces,
)
from landscape.experiments.triangles import align_joint, triangle
from landscape.experiments.widths import (
    WIDTH_GROUP,
    check_factors,
    default_factors,
    embed_checkpoint,
    narrow_checkpoint,
    narrow_model,
    width_barriers,
    width_rows,
)
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
    "BarrierRun",
    "Coordinates",
    "align",
    "align_joint",
    "barrier",
    "barrier_pair",
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
    "table",
    "triangle",
    "width_barriers",
    "width_rows",
]
