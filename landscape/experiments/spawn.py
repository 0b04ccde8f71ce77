"""When two runs enter one basin: children spawned from a common parent at step k with
different data orders, and their barrier against k (``landscape spawn``; docs/design.md §1).

The parent is the zoo run of ``seed``, trained once with a snapshot (parameters and AdamW's
moments) every ``every`` steps (:func:`landscape.models.train.train_snapshots`). From the
snapshot at step k, ``children`` runs go on to the recipe's last step, each with its own data
order and dropout draws (:func:`landscape.models.train.train_from`; child c's order is
``ORDER_BASE·(seed + 1) + c``, far from every zoo seed's) and the same learning-rate schedule.
Every pair of children is measured by the barrier pipeline
(:func:`landscape.experiments.barriers.pipeline.measure_barrier`), naive and aligned by
``method``/``group``: the loss and accuracy barrier along the straight line, on the ``split``
(the test split by default). ``every``, ``children``, ``method``, ``group``, ``points`` and
``split`` are :class:`SpawnOptions`.

At k = 0 the children share only their initialisation; at the last step they are the parent
itself (no step left to take), so their barrier is 0. In between, the step after which the
barrier stays near 0 is when the run's basin is decided.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from landscape.budget import check_points
from landscape.errors import LandscapeError
from landscape.experiments.barriers.endpoints import check_method, check_split
from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import BarrierRequest
from landscape.experiments.barriers.tables import mean_sem
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import aligns
from landscape.models.train import (
    check_snapshot_budget,
    snapshot_every,
    train_from,
    train_snapshots,
)
from landscape.models.zoo import ZOO
from landscape.progress import tell, within
from landscape.store.cache import Cache

CHILDREN = 2
ORDER_BASE = 100_000  # child c of parent seed s reads the data in order ORDER_BASE·(s + 1) + c
POINTS = 25


@dataclass(frozen=True)
class SpawnOptions:
    """What :func:`spawn` measures: ``children`` runs from each spawn step, the parent's
    snapshots every ``every`` steps (None: the model's spacing,
    :func:`landscape.models.train.snapshot_every`), every pair of children naive and aligned by
    ``method``/``group``, along ``points`` values of λ on the ``split``."""

    children: int = CHILDREN
    every: int | None = None
    method: str = "weight"
    group: str = "perm"
    points: int = POINTS
    split: str = "test"


SPAWN = SpawnOptions()  # the defaults


@dataclass
class SpawnResult:
    """``landscape spawn``: per spawn step (``at``) and alignment (naive, then
    ``method``/``group``), the barrier between the children (mean and s.e.m. over their pairs)
    in ``rows``; the children's test metrics in ``children``; the parent's run in ``parent``."""

    model: str
    seed: int
    at: list[int]
    children: int
    every: int
    steps: int
    method: str
    group: str
    split: str
    points: int
    rows: list[dict[str, Any]]
    members: list[dict[str, Any]]
    parent: dict[str, Any]
    seconds: float
    function_ok: bool = True
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a spawn result holds (landscape.fields): what :func:`spawn` writes (:class:`SpawnResult`),
# and what the figure, the page and the command's summary read.
RESULT = Fields("spawn result",
                ("at", "children", "every", "steps", "method", "group", "points", "rows",
                 "members", "parent", "seconds", "function_ok", "warnings"),
                # always written; a figure drawn from a record without them reads these
                {"model": "", "split": "test", "seed": 0})  # fmt: skip
# one of ``rows``: a spawn step and alignment, the children's barrier (mean over their pairs)
# and the cache keys of its pairs' barriers
ROW = Fields("spawn row",
             ("step", "method", "group", "pairs", "barrier_loss", "barrier_accuracy",
              "cache_keys"),
             # always written, None with a single pair of children; absent: None
             {"barrier_loss_sem": None, "barrier_accuracy_sem": None})  # fmt: skip
# one of ``members``: a child and its metrics (the zoo run's, ``landscape.models.runs``)
MEMBER = Fields("spawn child",
                ("step", "child", "test_loss", "test_accuracy", "train_loss",
                 "train_accuracy"))  # fmt: skip


def check_spawn(model: str, at: Sequence[int], children: int, every: int | None) -> int:
    """One line refusing what cannot be spawned, or what the parent's snapshots would need past
    the memory budget; returns the snapshots' spacing."""
    if model not in ZOO:
        raise LandscapeError(f"spawn trains zoo models; {model!r} is not one (see landscape zoo)")
    if children < 2:
        raise LandscapeError(
            f"--children must be at least 2 (a barrier needs a pair), got {children}"
        )
    every = snapshot_every(model, every)
    steps = ZOO[model].train.steps
    if not at:
        raise LandscapeError("give at least one spawn step: --at K1 K2 …")
    for k in at:
        if not 0 <= k <= steps or (k % every and k != steps):
            raise LandscapeError(
                f"--at {k}: a spawn step must be a multiple of --every {every} between 0 and "
                f"the run's {steps} steps (or {steps} itself)"
            )
    check_snapshot_budget(model, every)
    return every


@in_context
def spawn(
    model: str,
    at: Sequence[int],
    options: SpawnOptions = SPAWN,
    *,
    seed: int = 0,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """:class:`SpawnResult` of the options' ``children`` runs spawned from ``seed``'s zoo run at
    every step of ``at`` (module docstring), as a dict; what it measures in ``options``
    (:class:`SpawnOptions`), where it runs in ``context``. Everything is checked before
    anything trains."""
    children, every, method, group = options.children, options.every, options.method, options.group
    points, split = options.points, options.split
    device, progress = context.device, context.progress
    t0 = time.perf_counter()
    check_method(method, group)
    check_split(split)
    at = sorted({int(k) for k in at})
    every = check_spawn(model, at, children, every)
    if points < 2:
        raise LandscapeError("--points must be at least 2 (the endpoints)")
    check_points(points)
    cache = context.cache or Cache()
    tell(progress, "parent", 0)
    snaps, _ = train_snapshots(model, seed, every, device=device, cache=cache,
                               progress=within(progress, 0.0, 0.2, "parent: "))  # fmt: skip
    by_step = {s.step: s for s in snaps}
    alignments = [("naive", group)] + ([(method, group)] if aligns(method) else [])
    rows, members, warnings = [], [], []
    for i, k in enumerate(at):
        lo, hi = 0.2 + 0.8 * i / len(at), 0.2 + 0.8 * (i + 1) / len(at)
        kids = []
        for c in range(children):
            part = within(progress, lo, lo + 0.7 * (hi - lo) * (c + 1) / children,
                          f"step {k}, child {c}: ")  # fmt: skip
            ckpt, _ = train_from(model, seed, by_step[k], ORDER_BASE * (seed + 1) + c,
                                 device=device, cache=cache, progress=part)  # fmt: skip
            kids.append(ckpt)
            members.append({"step": k, "child": c, **ckpt.meta["metrics"]})
        pairs = list(itertools.combinations(range(children), 2))
        for m, g in alignments:
            runs = []
            for a, b in pairs:
                asked = BarrierRequest(kids[a], kids[b], m, g, points=points, split=split)
                run = measure_barrier(asked, device=device, cache=cache)
                runs.append(run.to_dict())
                warnings += [f"step {k}, children {a}–{b}, {m}/{g}: {w}"
                             for w in runs[-1]["warnings"]]  # fmt: skip
            row: dict[str, Any] = {"step": k, "method": m, "group": g, "pairs": len(runs)}
            for metric in ("loss", "accuracy"):
                mean, sem = mean_sem([r[f"barrier_{metric}"] for r in runs])
                row[f"barrier_{metric}"] = mean
                row[f"barrier_{metric}_sem"] = sem if len(runs) > 1 else None
            row["cache_keys"] = [r["cache_key"] for r in runs]
            rows.append(row)
        tell(progress, f"step {k}", hi)
    tell(progress, "done", 1)
    last = by_step[max(by_step)]
    return SpawnResult(
        model=model, seed=seed, at=at, children=children, every=every, steps=last.step,
        method=method, group=group, split=split, points=points, rows=rows, members=members,
        parent={"snapshots": sorted(by_step)}, seconds=round(time.perf_counter() - t0, 4),
        function_ok=not warnings, warnings=warnings,
    ).to_dict()  # fmt: skip
