"""Barriers along straight lines: the one barrier pipeline (:mod:`.pipeline`: load, align,
evaluate, cache) of a request (:mod:`.request`), its endpoints and checks (:mod:`.endpoints`),
its cached matchings (:mod:`.alignment`) and the coordinates its line is straight in
(:mod:`.coordinates`), the methods × groups table (:mod:`.tables`), control pairs
(:mod:`.controls`), barriers between checkpoint paths (:mod:`.pairs`), the all-pairs matrix
(:mod:`.matrix`), the barrier per matching round (:mod:`.iterations`), against narrower models
(:mod:`.widths`) and over three-model triangles (:mod:`.triangles`).
"""

from __future__ import annotations

from landscape.experiments.barriers.alignment import (
    Aligned,
    align,
    learned_space,
    split_prefixed,
    unshared,
    weight_start,
)
from landscape.experiments.barriers.controls import (
    Control,
    ControlsOptions,
    control_pair,
    controls_table,
    function_distance,
    original_coordinates,
)
from landscape.experiments.barriers.coordinates import Coordinates, in_space, unfolded_checks
from landscape.experiments.barriers.endpoints import (
    check_method,
    check_pair,
    check_split,
    eval_split,
    load,
)
from landscape.experiments.barriers.iterations import (
    FULL_ROUNDS,
    ITERATIONS_VERSION,
    LEARNED_GROUP,
    ROUND_STRIDE,
    IterationOptions,
    iteration_barriers,
    measured_rounds,
)
from landscape.experiments.barriers.matrix import (
    BarrierMatrix,
    MatrixOptions,
    barrier_matrix,
)
from landscape.experiments.barriers.pairs import (
    AM_TOKENS,
    DATASETS,
    LOGIT_BUDGET,
    barrier_paths,
    check_same_architecture,
    eval_batch_size,
    load_any,
    paths_request,
)
from landscape.experiments.barriers.pipeline import (
    BarrierRun,
    barrier,
    health,
    measure_barrier,
    peak_rss_mb,
)
from landscape.experiments.barriers.request import (
    BarrierRequest,
    refuse_unread,
    seeds_of,
    seeds_request,
)
from landscape.experiments.barriers.tables import (
    TableOptions,
    mean_sem,
    pairs_for,
    paper_value,
    summarise_barriers,
    table,
    table_spaces,
)
from landscape.experiments.barriers.triangles import (
    TriangleOptions,
    align_joint,
    triangle,
)
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

__all__ = [
    "load",
    "eval_split",
    "health",
    "check_pair",
    "peak_rss_mb",
    "check_split",
    "check_method",
    "Aligned",
    "split_prefixed",
    "weight_start",
    "align",
    "unshared",
    "learned_space",
    "Coordinates",
    "unfolded_checks",
    "in_space",
    "BarrierRequest",
    "BarrierRun",
    "measure_barrier",
    "seeds_request",
    "seeds_of",
    "refuse_unread",
    "barrier",
    "pairs_for",
    "mean_sem",
    "summarise_barriers",
    "paper_value",
    "table",
    "TableOptions",
    "table_spaces",
    "Control",
    "control_pair",
    "function_distance",
    "original_coordinates",
    "controls_table",
    "ControlsOptions",
    "AM_TOKENS",
    "DATASETS",
    "LOGIT_BUDGET",
    "barrier_paths",
    "paths_request",
    "check_same_architecture",
    "eval_batch_size",
    "load_any",
    "BarrierMatrix",
    "MatrixOptions",
    "barrier_matrix",
    "FULL_ROUNDS",
    "ITERATIONS_VERSION",
    "LEARNED_GROUP",
    "ROUND_STRIDE",
    "iteration_barriers",
    "IterationOptions",
    "measured_rounds",
    "WIDTH_GROUP",
    "check_factors",
    "default_factors",
    "embed_checkpoint",
    "narrow_checkpoint",
    "narrow_model",
    "width_barriers",
    "WidthOptions",
    "width_rows",
    "align_joint",
    "triangle",
    "TriangleOptions",
]
