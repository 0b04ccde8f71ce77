"""Typed results of the gauge sweep (:mod:`landscape.experiments.gauge.parts`).

Each part of the sweep is written by its dataclass (:class:`ScrambleResult`,
:class:`RecoveryResult`, :class:`TrajectoryResult`, :class:`ClaimResult`) as a JSON-able dict
(``to_dict``, what the sweep caches and returns); ``from_dict`` reads a stored one back. Keys
built from groups and sources are made in one place (:func:`matched_key`,
:func:`recovery_key`), so the figures that read them and the sweep that writes them agree, and a
renamed field fails loudly instead of reading as None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from landscape.fields import Fields
from landscape.symmetry import RESID_GROUPS

__all__ = [
    "CLAIMS",
    "CLAIMS_SUMMARY",
    "CLAIM_ROW",
    "CLAIM_VARIANTS",
    "COORDINATE_SCORES",
    "GROUP_LABEL",
    "RECOVERY",
    "RECOVERY_METHODS",
    "RECOVERY_POINT",
    "RECOVERY_SOURCES",
    "SCRAMBLE",
    "SCRAMBLE_ROW",
    "SCRAMBLE_SUMMARY",
    "SWEEP_GROUPS",
    "TRAJECTORY",
    "TRAJECTORY_ROW",
    "ClaimResult",
    "ClaimRow",
    "ClaimSummary",
    "RecoveryPoint",
    "RecoveryResult",
    "ScrambleResult",
    "ScrambleRow",
    "ScrambleSummary",
    "TrajectoryResult",
    "TrajectoryRow",
    "matched_key",
    "mean",
    "recovery_key",
]

# The three residual groups of the sweep (the chain S_d ⊂ B_d ⊂ O(d)), name -> residual kind.
SWEEP_GROUPS = {g: RESID_GROUPS[g] for g in ("perm", "signed-perm", "orth")}
GROUP_LABEL = {"perm": "S_d", "signed-perm": "B_d", "orth": "O(d)"}
RECOVERY_METHODS = ("signed", "marginalised")  # signed-correlation vs sign-marginalised assignment
RECOVERY_SOURCES = ("activations", "weights")
COORDINATE_SCORES = ("perm", "sign", "coord")  # the keys of coordinate_accuracy
CLAIM_VARIANTS = ("raw", "transported", "perm_only")


def matched_key(group: str) -> str:
    """The key of the loss barrier after matching within ``group`` in a scramble row
    (``"_acc"`` appended: the accuracy barrier)."""
    return f"matched_{group}"


def recovery_key(source: str, method: str, score: str) -> str:
    """The key of one recovery score: ``{source}_{method}_{score}``, e.g.
    ``weights_marginalised_coord`` (sources :data:`RECOVERY_SOURCES`, methods
    :data:`RECOVERY_METHODS`, scores :data:`COORDINATE_SCORES`)."""
    return f"{source}_{method}_{score}"


def mean(xs) -> float | None:
    """Mean, or None for no values (JSON has no NaN)."""
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else None


@dataclass(frozen=True)
class ScrambleRow:
    """θ against g(θ) for one draw of g from ``group``: the function check, the naive barrier and
    the barriers after matching within each sweep group (test loss; ``*_acc`` accuracy)."""

    group: str
    draw: int
    max_abs_dlogits: float
    naive: float
    naive_acc: float
    matched: dict[str, float]  # by matching group, SWEEP_GROUPS
    matched_acc: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"group": self.group, "draw": self.draw,
                               "max_abs_dlogits": self.max_abs_dlogits, "naive": self.naive,
                               "naive_acc": self.naive_acc}  # fmt: skip
        for g in SWEEP_GROUPS:
            out[matched_key(g)] = self.matched[g]
            out[matched_key(g) + "_acc"] = self.matched_acc[g]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScrambleRow:
        return cls(d["group"], d["draw"], d["max_abs_dlogits"], d["naive"], d["naive_acc"],
                   {g: d[matched_key(g)] for g in SWEEP_GROUPS},
                   {g: d[matched_key(g) + "_acc"] for g in SWEEP_GROUPS})  # fmt: skip


@dataclass(frozen=True)
class ScrambleSummary:
    """Means over the draws of one group (None where there is nothing to average)."""

    group: str
    label: str
    max_abs_dlogits: float | None
    naive: float | None
    matched: dict[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "label": self.label,
                "max_abs_dlogits": self.max_abs_dlogits, "naive": self.naive,
                **{matched_key(g): v for g, v in self.matched.items()}}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScrambleSummary:
        return cls(d["group"], d["label"], d["max_abs_dlogits"], d["naive"],
                   {g: d[matched_key(g)] for g in SWEEP_GROUPS})  # fmt: skip

    @classmethod
    def of(cls, group: str, rows: Sequence[ScrambleRow]) -> ScrambleSummary:
        mine = [r for r in rows if r.group == group]
        return cls(group, GROUP_LABEL[group], mean(r.max_abs_dlogits for r in mine),
                   mean(r.naive for r in mine),
                   {g: mean(r.matched[g] for r in mine) for g in SWEEP_GROUPS})  # fmt: skip


@dataclass(frozen=True)
class ScrambleResult:
    """:func:`scramble_test`: rows, a per-group summary, and how they were measured."""

    rows: list[ScrambleRow]
    summary: list[ScrambleSummary]
    draws: int
    lambdas: int
    split: str = "test"  # every barrier names its split (docs/design.md §5): the task's test split

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows],
                "summary": [s.to_dict() for s in self.summary], "draws": self.draws,
                "lambdas": self.lambdas, "split": self.split}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScrambleResult:
        return cls([ScrambleRow.from_dict(r) for r in d["rows"]],
                   [ScrambleSummary.from_dict(s) for s in d["summary"]], d["draws"],
                   d["lambdas"], d["split"])  # fmt: skip


Scores = dict[str, dict[str, dict[str, float]]]  # source → method → coordinate_accuracy


@dataclass(frozen=True)
class RecoveryPoint:
    """Recovery of a B_d gauge after ``steps`` of fine-tuning: the relative weight ``drift``,
    the share of ``flipped`` signs in the truth and every score (:func:`recovery_key`); ``draw``
    names the draw of a row, None for a point of the curve (means over draws)."""

    steps: int
    drift: float | None
    flipped: float | None
    scores: Scores
    draw: int | None = None

    def to_dict(self) -> dict[str, Any]:
        head = {} if self.draw is None else {"draw": self.draw}
        flat = {recovery_key(s, m, q): v for s, by in self.scores.items()
                for m, acc in by.items() for q, v in acc.items()}  # fmt: skip
        return {**head, "steps": self.steps, "drift": self.drift, "flipped": self.flipped, **flat}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecoveryPoint:
        scores = {s: {m: {q: d[recovery_key(s, m, q)] for q in COORDINATE_SCORES}
                      for m in RECOVERY_METHODS} for s in RECOVERY_SOURCES}  # fmt: skip
        return cls(d["steps"], d["drift"], d["flipped"], scores, d.get("draw"))

    @classmethod
    def mean(cls, steps: int, rows: Sequence[RecoveryPoint]) -> RecoveryPoint:
        """The mean of the rows at ``steps``, column by column."""
        mine = [r for r in rows if r.steps == steps]
        scores = {s: {m: {q: mean(r.scores[s][m][q] for r in mine) for q in acc}
                      for m, acc in by.items()}
                  for s, by in mine[0].scores.items()}  # fmt: skip
        return cls(steps, mean(r.drift for r in mine), mean(r.flipped for r in mine), scores)


@dataclass(frozen=True)
class RecoveryResult:
    """:func:`recovery_under_drift`: a row per draw and step count, the curve of their means."""

    rows: list[RecoveryPoint]
    curve: list[RecoveryPoint]
    steps_grid: list[int]
    lr: float  # the fine-tuning's learning rate
    draws: int
    # where lr came from: "given", or the model's own ("family record", "zoo recipe", "task");
    # None in a result stored before it was said
    lr_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows],
                "curve": [c.to_dict() for c in self.curve], "steps_grid": self.steps_grid,
                "lr": self.lr, "lr_from": self.lr_from, "draws": self.draws}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecoveryResult:
        return cls([RecoveryPoint.from_dict(r) for r in d["rows"]],
                   [RecoveryPoint.from_dict(c) for c in d["curve"]], d["steps_grid"], d["lr"],
                   d["draws"], d.get("lr_from"))  # fmt: skip


@dataclass(frozen=True)
class TrajectoryRow:
    """Coordinates recovered between stored checkpoint 0 and the one ``steps`` later: local
    matches composed along the run (``local_coord``) against the endpoints matched directly."""

    source: str
    steps: int
    drift: float
    local_coord: float
    endpoint_coord: float

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "steps": self.steps, "drift": self.drift,
                "local_coord": self.local_coord, "endpoint_coord": self.endpoint_coord}  # fmt: skip


@dataclass(frozen=True)
class TrajectoryResult:
    """:func:`trajectory_transport`: one row per source and stored checkpoint, and the run."""

    rows: list[TrajectoryRow]
    steps: int
    every: int
    lr: float
    weight_decay: float

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "steps": self.steps,
                "every": self.every, "lr": self.lr, "weight_decay": self.weight_decay}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrajectoryResult:
        return cls([TrajectoryRow(**r) for r in d["rows"]], d["steps"], d["every"], d["lr"],
                   d["weight_decay"])  # fmt: skip


@dataclass(frozen=True)
class ClaimRow:
    """One gauge draw of the claim check: the accuracy change (0 up to rounding) and the overlap
    of the re-made claim with the original per variant (:data:`CLAIM_VARIANTS`: ``raw`` in the
    gauge, ``transported`` back, ``perm_only`` back by the permutation alone; absent for O(d))."""

    group: str
    draw: int
    accuracy_delta: float
    overlap: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "draw": self.draw, "accuracy_delta": self.accuracy_delta,
                **self.overlap}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClaimRow:
        return cls(d["group"], d["draw"], d["accuracy_delta"],
                   {v: d[v] for v in CLAIM_VARIANTS if v in d})  # fmt: skip


@dataclass(frozen=True)
class ClaimSummary:
    """Means over the draws and classes of one group (``perm_only`` None for O(d))."""

    group: str
    label: str
    overlap: dict[str, float | None]
    accuracy_delta: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "label": self.label, **self.overlap,
                "accuracy_delta": self.accuracy_delta}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClaimSummary:
        return cls(d["group"], d["label"], {v: d[v] for v in CLAIM_VARIANTS},
                   d["accuracy_delta"])  # fmt: skip

    @classmethod
    def of(cls, group: str, rows: Sequence[ClaimRow]) -> ClaimSummary:
        mine = [r for r in rows if r.group == group]
        overlap = {v: mean(r.overlap[v] for r in mine if v in r.overlap) for v in CLAIM_VARIANTS}
        return cls(group, GROUP_LABEL[group], overlap, mean(r.accuracy_delta for r in mine))


@dataclass(frozen=True)
class ClaimResult:
    """:func:`claim_check`: rows, a per-group summary, the claim and the chance level k/d."""

    rows: list[ClaimRow]
    summary: list[ClaimSummary]
    k: int
    classes: list[int]
    layer: int
    chance: float
    accuracy: float
    split: str = "test"

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows],
                "summary": [s.to_dict() for s in self.summary], "k": self.k,
                "classes": self.classes, "layer": self.layer, "chance": self.chance,
                "accuracy": self.accuracy, "split": self.split}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClaimResult:
        return cls([ClaimRow.from_dict(r) for r in d["rows"]],
                   [ClaimSummary.from_dict(s) for s in d["summary"]], d["k"], d["classes"],
                   d["layer"], d["chance"], d["accuracy"], d["split"])  # fmt: skip


# ---------------------------------------------------------------- declared fields

# What each part of the gauge sweep holds (landscape.fields): what the dataclasses above write
# (``to_dict``), and what the figures, the tidy tables and the Gauge page read. Every part the
# sweep returns also holds ``seconds``, its compute time (``runner.gauge_sweep``); a part's own
# function (``scramble_test`` …) does not write it.
_SECONDS = {"seconds": None}  # absent from a part computed outside the sweep
_MATCHED = tuple(matched_key(g) for g in SWEEP_GROUPS)
SCRAMBLE = Fields("scramble result", ("rows", "summary", "draws", "lambdas", "split"),
                  _SECONDS)  # fmt: skip
SCRAMBLE_ROW = Fields("scramble row",
                      ("group", "draw", "max_abs_dlogits", "naive", "naive_acc",
                       *(k for m in _MATCHED for k in (m, m + "_acc"))))  # fmt: skip
SCRAMBLE_SUMMARY = Fields("scramble summary row",
                          ("group", "label", "max_abs_dlogits", "naive", *_MATCHED))  # fmt: skip
RECOVERY = Fields("recovery result", ("rows", "curve", "steps_grid", "lr", "draws"),
                  # ``lr_from``: always written now; None (or absent) in a result stored before
                  # it was said
                  {"lr_from": None, **_SECONDS})  # fmt: skip
RECOVERY_POINT = Fields("recovery curve point",
                        ("steps", "drift", "flipped",
                         *(recovery_key(s, m, q) for s in RECOVERY_SOURCES
                           for m in RECOVERY_METHODS for q in COORDINATE_SCORES)),
                        # a row of one draw names it; a point of the curve (means) has none
                        {"draw": None})  # fmt: skip
TRAJECTORY = Fields("trajectory result", ("rows", "steps", "every", "lr", "weight_decay"),
                    _SECONDS)  # fmt: skip
TRAJECTORY_ROW = Fields("trajectory row",
                        ("source", "steps", "drift", "local_coord", "endpoint_coord"))
CLAIMS = Fields("claim-check result",
                ("rows", "summary", "k", "classes", "layer", "chance", "accuracy", "split"),
                _SECONDS)  # fmt: skip
# a draw's overlap per variant: ``perm_only`` absent under O(d), whose gauge has no
# permutation part
CLAIM_ROW = Fields("claim-check row", ("group", "draw", "accuracy_delta", "raw", "transported"),
                   {"perm_only": None})  # fmt: skip
CLAIMS_SUMMARY = Fields("claim-check summary row",
                        ("group", "label", *CLAIM_VARIANTS, "accuracy_delta"))  # fmt: skip
