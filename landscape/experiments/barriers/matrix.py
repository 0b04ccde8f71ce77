"""The all-pairs barrier matrix: the loss and accuracy barrier of every pair of chosen seeds.

Each off-diagonal cell is one :func:`landscape.experiments.barriers.pipeline.barrier` (the cached
pipeline of ``landscape barrier`` and ``landscape table``), so a cell measured once, here, on
the page or by a table, is read from the disk cache everywhere else. The diagonal is a model
against itself: its barrier is 0 by definition and is not measured.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from landscape.budget import (
    EVALUATION,
    MAX_ALIGNMENTS,
    MAX_EVALUATIONS,
    check_points,
    check_work,
)
from landscape.errors import LandscapeError
from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import seeds_request
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.progress import tell, within
from landscape.threads import threaded


@dataclass
class BarrierMatrix:
    """Barriers of every pair of ``seeds`` (``seeds × seeds``, row i and column j the pair
    (seeds[i], seeds[j])).

    The cell (i, j) with i < j is measured with A = seeds[i] and B = seeds[j] aligned to it, and
    (j, i) repeats it: the matrix is symmetric by construction (aligning A to B instead is
    another matching, whose barrier differs slightly). The diagonal is 0.
    """

    model: str
    seeds: list[int]
    method: str
    group: str
    space: str
    split: str
    points: int
    barrier_loss: list[list[float]]  # (seeds, seeds)
    barrier_accuracy: list[list[float]]  # (seeds, seeds)
    pairs: list[dict[str, Any]] = field(default_factory=list)  # one per measured cell, i < j
    function_ok: bool = True
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a barrier matrix holds (landscape.fields): what :func:`barrier_matrix` writes
# (:class:`BarrierMatrix`), and what the figure, the page and the command's summary read.
RESULT = Fields("barrier matrix",
                ("seeds", "method", "group", "split", "points", "barrier_loss",
                 "barrier_accuracy", "pairs", "function_ok", "warnings"),
                # always written; a matrix drawn from a record without them reads these
                {"space": "weights", "model": ""})  # fmt: skip
# one of ``pairs``: a measured cell (i < j), its barriers, function check and cache entry
PAIR = Fields("barrier matrix pair",
              ("seeds", "barrier_loss", "barrier_accuracy", "function_check", "cache_key",
               "cached"))  # fmt: skip


@threaded
def check_matrix_work(seeds: int, points: int) -> None:
    """Refuse, before any work, a matrix of more pairs (alignments) or evaluations than the time
    limits allow without long work asked for (:func:`landscape.budget.check_work`)."""
    pairs = seeds * (seeds - 1) // 2
    check_work(f"{seeds} seeds ask for {pairs} pairs, each aligned and measured", pairs,
               MAX_ALIGNMENTS, "each a matching and a curve, seconds to minutes")  # fmt: skip
    check_work(f"{pairs} pairs of --points {points} ask for {pairs * points} evaluations of the "
               "model", pairs * points, MAX_EVALUATIONS, EVALUATION)  # fmt: skip


@dataclass(frozen=True)
class MatrixOptions:
    """How every cell of a :func:`barrier_matrix` is measured: the line at ``points`` values
    of λ in merge ``space``, on the ``split``."""

    points: int = 25
    split: str = "test"
    space: str = "weights"


MATRIX = MatrixOptions()  # the defaults


@in_context
def barrier_matrix(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "perm",
    options: MatrixOptions = MATRIX,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """The :class:`BarrierMatrix` of ``seeds`` (at least two, all different), as a dict: one
    alignment and one curve per pair, each through
    :func:`~landscape.experiments.barriers.pipeline.barrier`; how each is measured in
    ``options`` (:class:`MatrixOptions`), where it runs in ``context``.
    ``pairs`` holds each measured pair's seeds, barriers, function check and cache key."""
    points, split, space = options.points, options.split, options.space
    device, cache, progress = context.device, context.cache, context.progress
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        raise LandscapeError("a barrier matrix needs at least two seeds: --seeds A B [C ...]")
    if len(set(seeds)) < len(seeds):
        raise LandscapeError(
            f"seeds must differ (got {' '.join(map(str, seeds))}): the diagonal is each model "
            "against itself"
        )
    check_points(points)
    check_matrix_work(len(seeds), points)
    n = len(seeds)
    loss = [[0.0] * n for _ in range(n)]
    acc = [[0.0] * n for _ in range(n)]
    pairs, warnings = [], []
    todo = list(itertools.combinations(range(n), 2))
    for done, (i, j) in enumerate(todo):
        a, b = seeds[i], seeds[j]
        stage = f"{method}/{group} {a}-{b}"
        sub = within(progress, done / len(todo), (done + 1) / len(todo), f"{stage} ")
        req = seeds_request(model, (a, b), method, group, points=points, split=split, space=space)
        r = measure_barrier(req, device=device, cache=cache, progress=sub).to_dict()
        loss[i][j] = loss[j][i] = r["barrier_loss"]
        acc[i][j] = acc[j][i] = r["barrier_accuracy"]
        pairs.append({
            "seeds": [a, b],
            "barrier_loss": r["barrier_loss"],
            "barrier_accuracy": r["barrier_accuracy"],
            "function_check": r["function_check"],
            "cache_key": r["cache_key"],
            "cached": r["cached"],
        })  # fmt: skip
        warnings += [f"seeds {a}-{b}: {w}" for w in r["warnings"]]
        tell(progress, stage, done + 1, len(todo))
    return BarrierMatrix(
        model=model, seeds=seeds, method=method, group=group, space=space, split=split,
        points=points, barrier_loss=loss, barrier_accuracy=acc, pairs=pairs,
        function_ok=not warnings, warnings=warnings,
    ).to_dict()  # fmt: skip
