"""What the figures read from results: one declaration per result kind, read through one accessor.

Results reach the builders as JSON dicts (from the cache, the CLI or the app), some with keys
built from names (``matched_{group}``, ``{source}_{method}_{metric}``). A renamed key must not
turn into ``None`` on a page, so every builder reads through :meth:`Fields.read`
(:mod:`landscape.fields`):

- a ``required`` field that is absent raises :class:`MissingField` naming the kind and the field
  (its value may still be ``None`` where the producer writes ``None``, e.g. ``perm_only`` of O(d));
- an ``optional`` field that is absent reads as its declared default;
- reading a field the kind does not declare raises too.

A kind whose producer declares its fields beside itself is read from there, and names every
field its producer writes (a test of the producer holds its records to it): the barrier
result's (``BARRIER``, :mod:`landscape.experiments.barriers.pipeline`), the triangle's
(``TRIANGLE``, :mod:`landscape.experiments.barriers.triangles`), the surface's (``SURFACE``,
``SURFACE_POINT``, ``SURFACE_PATH``, :mod:`landscape.experiments.surfaces`; its training paths'
``SURFACE_RUN``, :mod:`landscape.experiments.trajectories`), the atlas's (``ATLAS``,
``ATLAS_POINT``, :mod:`landscape.experiments.atlas`), the Llama ablation's (``ABLATION*``,
:mod:`landscape.experiments.barriers.ablation`), the widths result's (``WIDTHS``,
``WIDTH_ROW``, :mod:`landscape.experiments.barriers.widths`), the barrier matrix's (``MATRIX``,
:mod:`landscape.experiments.barriers.matrix`), the curve's (``CURVED*``,
:mod:`landscape.experiments.barriers.curved`), the iterations result's (``ITERATIONS``,
``ITERATION_ROUND``, ``LEARNED_CHECKPOINT``, :mod:`landscape.experiments.barriers.iterations`),
one pair's merges (``MERGES``, ``MERGE_ALIGNMENT``, ``MERGE_CURVE``,
:mod:`landscape.experiments.merging.operators`), the spawn result's (``SPAWN``, ``SPAWN_ROW``,
:mod:`landscape.experiments.spawn`), the eigenangle result's (``EIGENANGLES``,
``ANGLE_SUMMARY``, ``LM_STEP``, :mod:`landscape.experiments.eigen.view`), the gauge sweep's
(``GAUGE_SWEEP``, ``SYMMETRY_TABLE``, :mod:`landscape.experiments.gauge.runner`; its parts'
``SCRAMBLE*``, ``RECOVERY*``, ``TRAJECTORY*``, ``CLAIM*``,
:mod:`landscape.experiments.gauge.results`; the symmetry table's rows, ``SYMMETRY_ROW``,
:mod:`landscape.symmetry.table`) and the transport table's rows (``TRANSPORT_ROW``,
:mod:`landscape.experiments.transport`), all re-exported here, and the curvature's, read by
:mod:`landscape.plots.curvature` from :mod:`landscape.experiments.curvature`. The kinds below
(:data:`ALL`: the Models page's and the Interpolation page's series) are still declared here,
as the list of every key the figures read of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from landscape.experiments.atlas import POINT as ATLAS_POINT
from landscape.experiments.atlas import RESULT as ATLAS
from landscape.experiments.barriers.ablation import CELL as ABLATION_CELL
from landscape.experiments.barriers.ablation import CURVE as ABLATION_CURVE
from landscape.experiments.barriers.ablation import ENTRY as ABLATION_STEP
from landscape.experiments.barriers.ablation import MISSING as ABLATION_MISSING
from landscape.experiments.barriers.ablation import RESULT as ABLATION
from landscape.experiments.barriers.ablation import SEED as ABLATION_SEED
from landscape.experiments.barriers.curved import CURVED, CURVED_ALIGNMENT, CURVED_PATH
from landscape.experiments.barriers.iterations import (
    ITERATION_ROUND,
    ITERATIONS,
    LEARNED_CHECKPOINT,
)
from landscape.experiments.barriers.matrix import RESULT as MATRIX
from landscape.experiments.barriers.pipeline import BARRIER
from landscape.experiments.barriers.triangles import TRIANGLE
from landscape.experiments.barriers.widths import WIDTH_ROW, WIDTHS
from landscape.experiments.eigen.view import ANGLE_SUMMARY, EIGENANGLES, LM_STEP
from landscape.experiments.gauge.results import (
    CLAIM_ROW,
    CLAIMS,
    CLAIMS_SUMMARY,
    RECOVERY,
    RECOVERY_POINT,
    SCRAMBLE,
    SCRAMBLE_ROW,
    SCRAMBLE_SUMMARY,
    TRAJECTORY,
    TRAJECTORY_ROW,
)
from landscape.experiments.gauge.runner import GAUGE_SWEEP, SYMMETRY_TABLE
from landscape.experiments.merging.operators import MERGE_ALIGNMENT, MERGE_CURVE
from landscape.experiments.merging.operators import PAIR_MERGES as MERGES
from landscape.experiments.spawn import RESULT as SPAWN
from landscape.experiments.spawn import ROW as SPAWN_ROW
from landscape.experiments.surfaces import PATH as SURFACE_PATH
from landscape.experiments.surfaces import POINT as SURFACE_POINT
from landscape.experiments.surfaces import RESULT as SURFACE
from landscape.experiments.trajectories import PROJECTED_PATH as SURFACE_RUN
from landscape.experiments.transport import TRANSPORT_ROW
from landscape.fields import Fields, MissingField
from landscape.matching import result_aligns
from landscape.names import method_key
from landscape.symmetry.table import SYMMETRY_ROW

__all__ = ["ABLATION", "ABLATION_CELL", "ABLATION_CURVE", "ABLATION_MISSING", "ABLATION_SEED",
           "ABLATION_STEP", "ANGLE_SUMMARY", "ATLAS", "ATLAS_POINT", "BARRIER", "CLAIMS",
           "CLAIMS_SUMMARY", "CLAIM_ROW", "CURVED", "CURVED_ALIGNMENT", "CURVED_PATH",
           "EIGENANGLES", "GAUGE_SWEEP", "ITERATIONS", "ITERATION_ROUND", "LEARNED_CHECKPOINT",
           "LM_STEP", "MATRIX", "MERGES", "MERGE_ALIGNMENT", "MERGE_CURVE", "RECOVERY",
           "RECOVERY_POINT", "SCRAMBLE", "SCRAMBLE_ROW", "SCRAMBLE_SUMMARY", "SPAWN", "SPAWN_ROW",
           "SURFACE", "SURFACE_PATH", "SURFACE_POINT", "SURFACE_RUN", "SYMMETRY_ROW",
           "SYMMETRY_TABLE", "TRAJECTORY", "TRAJECTORY_ROW", "TRANSPORT_ROW", "TRIANGLE",
           "WIDTHS", "WIDTH_ROW", "Fields", "MissingField", "aligned", "key_of"]  # fmt: skip


def aligned(kind: Fields, record: Mapping[str, Any]) -> bool:
    """Whether the matching of ``record`` (a ``kind`` that declares ``method``) moves B: its
    ``aligns`` where its kind declares one and it carries it (a barrier result), else its
    method's registry entry (``landscape.matching.result_aligns``)."""
    said = kind.read(record, "aligns") if "aligns" in kind.names else None
    return result_aligns({"aligns": said, "method": kind.read(record, "method")})


def key_of(kind: Fields, record: Mapping[str, Any]) -> str:
    """The method key of ``record`` (``"weight/orth"``; ``"naive"``, which aligns nothing, has
    no group): its ``method`` and ``group``, and :func:`aligned`."""
    return method_key(kind.read(record, "method"), kind.read(record, "group"),
                      aligns=aligned(kind, record))  # fmt: skip


# ---------------------------------------------------------------- models page

TRAINING_RUN = Fields("training run", ("label", "curves"))
# ``curves`` of a training run: one list per column, index = evaluation
TRAINING_CURVES = Fields("training curves", ("step", "train_loss", "test_loss", "test_accuracy"))
ZOO_ROW = Fields("zoo row", ("name", "seeds"))
ZOO_SEED = Fields("zoo seed", ("seed", "test_accuracy"))

# ---------------------------------------------------------------- interpolation page

INTERPOLATION_SERIES = Fields("interpolation series", ("label", "results"),
                              {"space": "weights", "method": None})  # fmt: skip

# the kinds declared here (not beside their producers): exactly what the figures read of them
ALL = (
    TRAINING_RUN, TRAINING_CURVES, ZOO_ROW, ZOO_SEED, INTERPOLATION_SERIES,
)  # fmt: skip
