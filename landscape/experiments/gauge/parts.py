"""Gauge sweep: which facts about a model survive a random function-preserving gauge
(docs/design.md §1, "Coordinate transport").

For an RMSNorm stream with per-channel gains the coordinate-preserving residual gauge is the
signed-permutation group B_d = S_d ⋉ {±1}^d: B = g(A) writes ``x·G`` where A writes ``x``, so
B's residual coordinate i is ``s_i · x[π(i)]`` (``Element``: ``G[π(i), i] = s_i``). The sweep:

1. the symmetry table (:func:`landscape.symmetry.symmetry_table`);
2. scramble: θ against g(θ) for random g in S_d, B_d and O(d): function check, naive barrier,
   barrier after matching restricted to S_d, B_d, O(d) (:func:`scramble_test`);
3. recovery under drift: B = g(A) with g ∈ B_d, fine-tuned k steps, the gauge recovered from paired
   activations and from weights by signed-correlation and sign-marginalised assignment
   (:func:`recovery_under_drift`);
4. trajectory transport: checkpoints of one run, each stored in its own random B_d gauge; local
   matches composed along the run against matching the endpoints (:func:`trajectory_transport`);
5. claim check: "the top-k residual coordinates for class c" under each gauge, and after
   transporting back (:func:`claim_check`): the negative control for coordinate claims.

Recovered gauges are returned as the transform ``h`` that aligns B to A, ``apply(h, θ_B) ≈ θ_A``;
for B = g(A) the truth is ``h = g⁻¹``. Orientation of every similarity matrix: rows are A's units,
columns B's (landscape.matching.solvers).

Each part returns a JSON-able dict written by its result dataclass
(:mod:`landscape.experiments.gauge.results`; ``from_dict`` reads a stored one back). The model
and its data come as a :class:`landscape.tasks.Task`; fine-tuning is
:func:`landscape.optim.adamw_steps`.
The whole sweep, each part cached and optionally run as Ray draws, is
:func:`landscape.experiments.gauge.runner.gauge_sweep`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_checkpoints, check_steps, max_checkpoints
from landscape.data import Split
from landscape.errors import LandscapeError, check_seed
from landscape.experiments.evaluation import barrier_curve
from landscape.experiments.gauge.coordinates import (
    activation_similarity,
    align_activations,
    coordinate_accuracy,
    readout_features,
    resid_only,
    solve_resid,
    weight_similarity,
)
from landscape.experiments.gauge.results import (
    RECOVERY_METHODS,
    RECOVERY_SOURCES,
    SWEEP_GROUPS,
    ClaimResult,
    ClaimRow,
    ClaimSummary,
    RecoveryPoint,
    RecoveryResult,
    ScrambleResult,
    ScrambleRow,
    ScrambleSummary,
    TrajectoryResult,
    TrajectoryRow,
    mean,
)
from landscape.matching.activation import resid_stack
from landscape.models import (
    ModelConfig,
    Params,
    forward,
    init_params,
    loss_and_accuracy,
)
from landscape.optim import AdamWOptions, adamw_steps
from landscape.progress import Progress
from landscape.symmetry import (
    ORTH,
    PERM,
    SIGNED_PERM,
    Element,
    Transform,
    apply,
    probe_inputs,
    random_transform,
    spec_for,
)
from landscape.symmetry.processing import prepare
from landscape.tasks import Task, TaskSource

__all__ = [
    "GAUGE_VERSION",
    "check_kept_checkpoints",
    "check_sweep_args",
    "claim_check",
    "recover",
    "recovery_lr",
    "recovery_under_drift",
    "resid_stack",
    "scramble_test",
    "top_coordinates",
    "trajectory_transport",
]

GAUGE_VERSION = 2  # bump when a sweep algorithm or result changes: old cache entries stop matching


# ----------------------------------------------------------------------------- 2. scramble


def max_dlogits(cfg: ModelConfig, pa: Params, pb: Params) -> float:
    """max |Δlogits| of two parameter sets on a fixed probe batch, computed in float64."""
    x = probe_inputs(cfg)
    a = {k: v.cpu().double() for k, v in pa.items()}
    b = {k: v.cpu().double() for k, v in pb.items()}
    with torch.no_grad():
        return float((forward(cfg, a, x) - forward(cfg, b, x)).abs().max())


def scramble_test(task: Task, *, draws: int = 3, seed: int = 0, lambdas: int = 11,
                  progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    """θ against g(θ) for random g in S_d, B_d, O(d) (with FFN units and heads permuted too).

    Per draw: max |Δlogits| (function check, float64), the naive barrier, and the barriers after
    activation matching restricted to S_d, B_d and O(d) on the stream. O(d) needs folded gains:
    O(d) scrambles and O(d) matching run on ``prepare(·, "orth")`` parameters (the same function).
    A :class:`ScrambleResult` as a dict: rows (test loss barriers, accuracy barriers under
    ``*_acc``) and a per-group mean summary.
    """
    units = draw_units(draws)
    folded = prepare(task.cfg, task.params, "orth")  # once for every draw
    rows = []
    for done, (group, d) in enumerate(units, 1):
        rows.append(scramble_row(task, group, d, seed=seed, lambdas=lambdas, folded=folded))
        if progress:
            progress("scramble", done, len(units))
    return scramble_result(rows, draws, lambdas)


def draw_units(draws: int) -> list[tuple[str, int]]:
    """The draws of a part that draws per group: (group, draw) in the order of the rows."""
    return [(group, d) for group in SWEEP_GROUPS for d in range(draws)]


def scramble_row(task: Task, group: str, draw: int, *, seed: int = 0, lambdas: int = 11,
                 folded: tuple[ModelConfig, Params] | None = None) -> ScrambleRow:  # fmt: skip
    """One draw of :func:`scramble_test`: θ against g(θ), g the ``draw``-th element of
    ``group`` (gauge seed ``1000·seed + draw``). ``folded``: ``prepare(task's model, "orth")``
    when the caller has it already (computed here otherwise)."""
    cfg, pa = task.cfg, task.params
    cfg_f, pa_f = folded if folded is not None else prepare(cfg, pa, "orth")
    spec, spec_f = spec_for(cfg), spec_for(cfg_f)
    x, y = task.test.inputs, task.test.targets
    gseed = 1000 * seed + draw
    if SWEEP_GROUPS[group] == ORTH:
        g = random_transform(spec_f, group, gseed)
        a_cfg, a, b = cfg_f, pa_f, apply(spec_f, g, pa_f)
    else:
        g = random_transform(spec, group, gseed)
        a_cfg, a, b = cfg, pa, apply(spec, g, pa)
    check = max_dlogits(a_cfg, a, b)
    naive = barrier_curve(a_cfg, a, b, x, y, lambdas)
    matched, matched_acc = {}, {}
    for match_group, match_kind in SWEEP_GROUPS.items():
        if match_kind == ORTH:
            mc, ma, mb = cfg_f, *_fold_pair(cfg, a_cfg, a, b)
        else:
            mc, ma, mb = a_cfg, a, b
        h = align_activations(mc, ma, mb, task.act_inputs, match_kind)
        mb = apply(spec_for(mc), h, mb)
        curve = barrier_curve(mc, ma, mb, x, y, lambdas)
        matched[match_group] = curve.barrier_loss
        matched_acc[match_group] = curve.barrier_accuracy
    return ScrambleRow(group, draw, check, naive.barrier_loss, naive.barrier_accuracy, matched,
                       matched_acc)  # fmt: skip


def scramble_result(rows: Sequence[ScrambleRow], draws: int, lambdas: int = 11
                    ) -> dict[str, Any]:  # fmt: skip
    """The rows of :func:`scramble_test` with their per-group summary, as a dict."""
    summary = [ScrambleSummary.of(g, rows) for g in SWEEP_GROUPS]
    return ScrambleResult(list(rows), summary, draws, lambdas).to_dict()


def _fold_pair(cfg: ModelConfig, a_cfg: ModelConfig, a: Params, b: Params
               ) -> tuple[Params, Params]:  # fmt: skip
    if a_cfg is not cfg:  # already folded
        return a, b
    return prepare(cfg, a, "orth")[1], prepare(cfg, b, "orth")[1]


# ----------------------------------------------------------------------------- 3. drift


def recover(
    cfg: ModelConfig,
    pa: Params,
    pb: Params,
    inputs: torch.Tensor,
    *,
    source: str,
    method: str,
    drop_first: bool = False,
) -> Element:
    """The B_d element aligning B's stream to A's, from ``source`` ∈ {"activations", "weights"}
    with ``method`` ∈ {"signed", "marginalised"} (see :func:`solve_resid`)."""
    if source == "activations":
        sim = activation_similarity(resid_stack(cfg, pa, inputs, drop_first=drop_first),
                                    resid_stack(cfg, pb, inputs, drop_first=drop_first),
                                    SIGNED_PERM)  # fmt: skip
    elif source == "weights":
        sim = weight_similarity(cfg, pa, pb)
    else:
        raise ValueError(f"unknown source {source!r}; expected 'activations' or 'weights'")
    return solve_resid(sim, SIGNED_PERM, method)


def _rel_dist(pa: Params, pb: Params) -> float:
    num = sum(float(((pa[k] - pb[k]).double() ** 2).sum()) for k in pa)
    den = sum(float((pa[k].double() ** 2).sum()) for k in pa)
    return math.sqrt(num / den)


def recovery_lr(task: Task | TaskSource, lr: float | None = None) -> tuple[float, str]:
    """The learning rate the recovery part fine-tunes at, and where it comes from: ``lr`` when
    given ("given"), else the task's own (a family's record, a zoo model's recipe:
    ``task.lr_from``). A given rate equal to the task's own is the task's own."""
    check_sweep_args(lr=lr)
    if lr is None or lr == task.lr:
        return task.lr, task.lr_from
    return float(lr), "given"


def recovery_under_drift(
    task: Task,
    *,
    steps_grid: Sequence[int] = (0, 10, 30, 100, 300),
    draws: int = 2,
    seed: int = 0,
    lr: float | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Scramble with g ∈ B_d (stream only), fine-tune g(A) k steps, recover g.

    For each k in ``steps_grid`` and draw: recovery from paired activations and from weights
    (:func:`recover`) with signed-correlation and sign-marginalised assignment, scored per
    coordinate against the truth ``g⁻¹`` (:func:`coordinate_accuracy`). Also the relative weight
    drift ``‖θ_k − θ_0‖/‖θ_0‖``. Fine-tuning: AdamW (no warm-up) on the training data at ``lr``,
    by default the model's own (:func:`recovery_lr`; the result's ``lr_from`` says which).
    A :class:`RecoveryResult` as a dict.
    """
    check_sweep_args(draws=draws, steps_grid=steps_grid)
    check_kept_checkpoints(task, steps_grid=steps_grid)
    lr, lr_from = recovery_lr(task, lr)
    rows = []
    for d in range(draws):
        rows += recovery_draw(task, d, steps_grid=steps_grid, seed=seed, lr=lr)
        if progress:
            progress("recovery", d + 1, draws)
    return recovery_result(rows, steps_grid, draws, lr, lr_from)


def recovery_draw(task: Task, draw: int, *, steps_grid: Sequence[int], seed: int = 0,
                  lr: float | None = None) -> list[RecoveryPoint]:  # fmt: skip
    """One draw of :func:`recovery_under_drift`: its points at every step count of the grid
    (fine-tuning at ``lr``, by default the task's own)."""
    lr = recovery_lr(task, lr)[0]
    cfg, spec = task.cfg, spec_for(task.cfg)
    grid = sorted(set(int(k) for k in steps_grid))
    g = resid_only(spec, SIGNED_PERM, 1000 * seed + draw)
    truth = g.inverse().elements["resid"]
    b0 = apply(spec, g, task.params)
    snaps = {0: b0} if 0 in grid else {}

    def keep(step: int, p: Params) -> None:
        if step in grid:  # a copy: the steps after it update p in place
            snaps[step] = {k: v.clone() for k, v in p.items()}

    if grid[-1] > 0:
        adamw_steps(cfg, (b0, None), task.batches(seed=7 + draw), grid[-1], AdamWOptions(lr=lr),
                    callback=keep)  # fmt: skip
    rows = []
    for k in grid:
        scores = {source: {method: coordinate_accuracy(
            recover(cfg, task.params, snaps[k], task.act_inputs, source=source,
                    method=method), truth) for method in RECOVERY_METHODS}
            for source in RECOVERY_SOURCES}  # fmt: skip
        rows.append(RecoveryPoint(k, _rel_dist(b0, snaps[k]),
                                  float((truth.scale < 0).double().mean()), scores,
                                  draw=draw))  # fmt: skip
    return rows


def recovery_result(rows: Sequence[RecoveryPoint], steps_grid: Sequence[int], draws: int,
                    lr: float, lr_from: str) -> dict[str, Any]:  # fmt: skip
    """The points of :func:`recovery_under_drift` with their mean curve, as a dict; ``lr`` and
    ``lr_from`` as :func:`recovery_lr` gives them."""
    grid = sorted(set(int(k) for k in steps_grid))
    curve = [RecoveryPoint.mean(k, rows) for k in grid]
    return RecoveryResult(list(rows), curve, grid, lr, draws, lr_from).to_dict()


# ----------------------------------------------------------------------------- 4. trajectory


def trajectory_transport(
    task: Task,
    *,
    steps: int = 1500,
    every: int = 10,
    seed: int = 0,
    lr: float | None = None,
    weight_decay: float = 1.0,
    sources: Sequence[str] = ("weights", "activations"),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Gauge recovery along one training run versus across it.

    A run from a fresh initialisation (seed ``seed``), AdamW at the model's peak ``lr``
    (constant) with strong decoupled weight decay (so the initialisation is forgotten and the
    endpoints share little), ``steps`` long; a checkpoint every ``every`` steps, checkpoint t
    stored as ``g_t(θ_t)`` with its own random g_t ∈ B_d. The truth between stored
    checkpoints 0 and t is ``h_t = g_0 ∘ g_t⁻¹`` (aligns stored t to stored 0). *Local*: match
    consecutive stored checkpoints (sign-marginalised) and compose,
    ``ĥ_{0←t} = ĥ_{0←t−1} ∘ ĥ_{t−1←t}``.
    *Endpoint*: match stored 0 and stored t directly. Accuracy per coordinate against the
    distance in steps. A :class:`TrajectoryResult` as a dict.
    """
    check_sweep_args(trajectory_steps=steps, trajectory_every=every)
    check_kept_checkpoints(task, trajectory=(steps, every))
    cfg, spec = task.cfg, spec_for(task.cfg)
    lr = task.lr if lr is None else lr
    snaps = [init_params(cfg, seed)]
    snaps[0] = {k: v.to(task.device) for k, v in snaps[0].items()}

    def keep(step: int, p: Params) -> None:
        if step % every == 0:  # a copy: the steps after it update p in place
            snaps.append({k: v.clone() for k, v in p.items()})

    adamw_steps(
        cfg,
        (snaps[0], None),
        task.batches(seed=100 + seed),
        steps,
        AdamWOptions(lr=lr, weight_decay=weight_decay),
        callback=keep,
    )
    gauges = [resid_only(spec, SIGNED_PERM, 5000 + 1000 * seed + t) for t in range(len(snaps))]
    stored = [apply(spec, g, p) for g, p in zip(gauges, snaps, strict=True)]
    rows = []
    for source in sources:
        local = Element(SIGNED_PERM, torch.arange(cfg.d_model),
                        torch.ones(cfg.d_model, dtype=torch.float64))  # fmt: skip
        for t in range(1, len(stored)):
            truth = (gauges[0] @ gauges[t].inverse()).elements["resid"]
            step = recover(cfg, stored[t - 1], stored[t], task.act_inputs, source=source,
                           method="marginalised")  # fmt: skip
            local = (Transform({"resid": local}) @ Transform({"resid": step})).elements["resid"]
            direct = recover(cfg, stored[0], stored[t], task.act_inputs, source=source,
                             method="marginalised")  # fmt: skip
            rows.append(TrajectoryRow(source, t * every, _rel_dist(snaps[0], snaps[t]),
                                      coordinate_accuracy(local, truth)["coord"],
                                      coordinate_accuracy(direct, truth)["coord"]))  # fmt: skip
        if progress:
            progress("trajectory", sources.index(source) + 1, len(sources))
    return TrajectoryResult(rows, steps, every, lr, weight_decay).to_dict()


# ----------------------------------------------------------------------------- 5. claims


def top_coordinates(feats: torch.Tensor, labels: torch.Tensor, cls: int, k: int) -> list[int]:
    """The claim "the top-k residual coordinates for class c": the k largest entries of
    ``mean(x | y = c) − mean(x | y ≠ c)``."""
    mask = labels == cls
    diff = feats[mask].double().mean(0) - feats[~mask].double().mean(0)
    return sorted(torch.topk(diff, k).indices.tolist())


def _act_on_rows(x: torch.Tensor, e: Element) -> torch.Tensor:
    """Row vectors x (stream coordinates) through an element: ``x·G``."""
    if e.is_monomial:
        return x[:, e.perm.to(x.device)] * e.scale.to(x.device, x.dtype)
    return (x.double() @ e.matrix.to(x.device)).to(x.dtype)


def claim_check(task: Task, *, draws: int = 3, k: int = 4, seed: int = 0,
                classes: Sequence[int] | None = None) -> dict[str, Any]:  # fmt: skip
    """Coordinate claims under random gauges (the negative control of a gauge sweep).

    The claim is made in A's coordinates at the last layer boundary (``resid.{n_layers}``,
    read-out positions) on the training inputs, about ``classes`` (default: the three most
    frequent). Per gauge g in S_d, B_d, O(d) (gains folded first, which leaves the stream
    unchanged) and draw: the claim re-made in g(θ) (``raw``: its overlap with the original
    top-k, expected ≈ k/d), re-made after transporting B's activations back through the gauge
    recovered by activation matching of the same group (``transported``: 1.0), and for B_d also
    through the recovered permutation without its signs (``perm_only``). The function-level
    control, the class accuracy, is identical in every gauge. A :class:`ClaimResult` as a dict.
    """
    claims = Claims.of(task, k, classes)
    rows = [claims.row(group, d, seed) for group, d in draw_units(draws)]
    return claims.result(rows)


@dataclass
class Claims:
    """The claims of :func:`claim_check` made in A's coordinates: what every draw is scored
    against (:meth:`row`) and what its result reports (:meth:`result`)."""

    task: Task
    cfg: ModelConfig  # gains folded
    params: Params
    k: int
    classes: list[int]
    claims: dict[int, list[int]]  # class -> top-k coordinates in A
    accuracy: float  # A's test accuracy

    @classmethod
    def of(cls, task: Task, k: int = 4, classes: Sequence[int] | None = None) -> Claims:
        cfg, pa = prepare(task.cfg, task.params, "orth")
        labels = task.act_targets.reshape(-1)
        classes = list(classes) if classes is not None else task.frequent_classes(3)
        fa = readout_features(cfg, pa, task.act_inputs, cfg.n_layers)
        claims = {c: top_coordinates(fa, labels, c, k) for c in classes}
        return cls(task, cfg, pa, k, classes, claims, _accuracy(cfg, pa, task.test))

    def row(self, group: str, draw: int, seed: int = 0) -> ClaimRow:
        """One draw: the claims re-made under the ``draw``-th gauge of ``group``."""
        cfg, pa, x, k = self.cfg, self.params, self.task.act_inputs, self.k
        spec, kind, layer = spec_for(cfg), SWEEP_GROUPS[group], cfg.n_layers
        labels = self.task.act_targets.reshape(-1)
        g = resid_only(spec, kind, 2000 + 1000 * seed + draw)
        pb = apply(spec, g, pa)
        fb = readout_features(cfg, pb, x, layer)
        h = align_activations(cfg, pa, pb, x, kind).elements["resid"]
        back = _act_on_rows(fb, h)
        variants = {"raw": fb, "transported": back}
        if kind != ORTH:
            variants["perm_only"] = _act_on_rows(fb, Element(PERM, h.perm, h.scale.abs()))
        overlap = {}
        for name, f in variants.items():
            overlaps = [len(set(top_coordinates(f, labels, c, k)) & set(self.claims[c])) / k
                        for c in self.classes]  # fmt: skip
            overlap[name] = mean(overlaps)
        return ClaimRow(group, draw, _accuracy(cfg, pb, self.task.test) - self.accuracy, overlap)

    def result(self, rows: Sequence[ClaimRow]) -> dict[str, Any]:
        summary = [ClaimSummary.of(g, rows) for g in SWEEP_GROUPS]
        return ClaimResult(list(rows), summary, self.k, self.classes, self.cfg.n_layers,
                           self.k / self.cfg.d_model, self.accuracy).to_dict()  # fmt: skip


def _accuracy(cfg: ModelConfig, params: Params, split: Split) -> float:
    with torch.no_grad():
        return float(loss_and_accuracy(cfg, forward(cfg, params, split.inputs), split.targets)[1])


def check_kept_checkpoints(task: Task | TaskSource, *, steps_grid: Sequence[int] | None = None,
                           trajectory: tuple[int, int] | None = None) -> None:  # fmt: skip
    """Refuse, before any training, a part that keeps more checkpoints of the task's model than
    the memory budget holds (:func:`landscape.budget.check_checkpoints`): the recovery part one
    per step count of ``steps_grid``, the trajectory part one every ``every`` of its ``steps``
    (``trajectory``: (steps, every))."""
    n = sum(v.numel() for v in task.params.values())
    if steps_grid is not None:
        grid = set(steps_grid)
        check_checkpoints(f"gauge-sweep --steps with {len(grid)} step counts", len(grid), n)
    if trajectory is not None:
        steps, every = trajectory
        check_checkpoints(f"gauge-sweep --trajectory-steps {steps} with --trajectory-every "
                          f"{every}", steps // every + 1, n)  # fmt: skip


def trajectory_spacing(steps: int, every: int, parameters: int) -> int:
    """The checkpoint spacing of a trajectory of ``steps`` steps: ``every``, or the smallest
    wider one whose checkpoints (``steps // spacing + 1``) the memory budget holds for a model of
    ``parameters`` parameters (:func:`check_kept_checkpoints` refuses the rest)."""
    limit = max_checkpoints(parameters)
    if limit < 2:
        return every  # not even two checkpoints fit: the check says so
    return max(every, -(-steps // (limit - 1)))


def check_sweep_args(
    *,
    seed: int = 0,
    draws: int = 1,
    steps_grid: Sequence[int] = (0,),
    trajectory_steps: int = 1,
    trajectory_every: int = 1,
    lr: float | None = None,
) -> None:
    """One-line errors for sweep arguments that would otherwise fail deep inside a part
    (a ``KeyError`` for a negative step, a division by a zero spacing), overflow a seed, or run
    for days (steps past :data:`landscape.budget.MAX_STEPS`)."""
    check_seed(seed, "the gauge-sweep seed")
    if draws < 1:
        raise LandscapeError(f"gauge-sweep --draws must be at least 1, got {draws}")
    if not steps_grid or min(steps_grid) < 0:
        raise LandscapeError(
            f"gauge-sweep --steps must be one or more non-negative step counts, got "
            f"{list(steps_grid)}"
        )
    check_steps("gauge-sweep --steps", max(steps_grid))
    check_steps("gauge-sweep --trajectory-steps", trajectory_steps)
    if lr is not None and not (math.isfinite(lr) and lr > 0):
        raise LandscapeError(f"gauge-sweep --lr must be a positive finite number, got {lr}")
    if trajectory_every < 1:
        raise LandscapeError(
            f"gauge-sweep --trajectory-every must be at least 1, got {trajectory_every}"
        )
    if trajectory_steps < trajectory_every:
        raise LandscapeError(
            f"gauge-sweep --trajectory-steps ({trajectory_steps}) must be at least "
            f"--trajectory-every ({trajectory_every}): no checkpoint would be stored"
        )
