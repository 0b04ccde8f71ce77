"""The recovery benchmark: scramble a model with a planted symmetry, align it back, score it.

For each group level the architecture admits (:func:`levels_of`), the model A is processed as
the level needs (``symmetry.processing.prepare``: folded gains for rotations, a LayerNorm stream
rewritten as RMSNorm for signed permutations; the same function, docs/design.md §1), a seeded
random element g of the level is drawn from the spec (``symmetry.random_transform``, the
sampling of the symmetry table and the gauge sweep) and applied, B = g(θ_A). B computes A's
function (``scramble_check``: max |Δlogits| against A as given, in float64). B is then aligned
back to A by the project's matching (``matching.match``; weight matching by default) and the
found transform h is compared with the planted inverse g⁻¹, variable by variable: every gauge
variable in h or g⁻¹, a missing one being the identity, so that a map found where none was
planted counts against the recovery as well.

Scores (documented in docs/design.md §5):

- ``recovered``: the fraction of units put back where they were. For two monomial elements
  (permutations, signed permutations; heads, FFN units, the stream) unit i is recovered when h
  sends it to g⁻¹'s slot with g⁻¹'s sign (``experiments.gauge.coordinate_accuracy``, its
  ``coord``). Otherwise (rotations, within-head maps: one map per head) column j of the dense
  matrix (what unit j of the aligned model is made of) is recovered when
  ``‖h[:, j] − g⁻¹[:, j]‖ ≤ COLUMN_TOL·‖g⁻¹[:, j]‖``; a wrong column of a rotation is off by
  O(1), round-off by 1e-12 in float64.
- ``distance``: the largest ``‖H − G⁻¹‖_F / ‖G⁻¹‖_F`` over the level's variables (per head for
  within-head maps), which for a rotation is ``‖R_found − R_planted⁻¹‖_F / √d``.
- ``in_place``: the fraction of units whose weights are back where A has them
  (:func:`units_in_place`: every slice a unit indexes within ``COLUMN_TOL`` of A's), a measure
  of the aligned weights alone, so it scores an aligner that reports no transform as well.
  It is strict: a unit counts only when every parameter slice it indexes is back, so one
  variable left wrong (a head's QK map) takes with it the units of every other variable those
  parameters carry (the stream's units that W_Q reads, the head);
- ``gap``: the largest ``|θ_A − h(B)|`` over every parameter, relative to that parameter's
  largest entry; ``function_check``: h(B) against B (matching's own check, float32).
- ``barrier_loss``/``barrier_accuracy``: the barrier along ``λ·θ_A + (1−λ)·h(B)`` on A's test
  data (zero when h = g⁻¹); ``seconds``: the matching's wall time.

The matching group is the planted level for residual levels and ``perm`` for the within-head
levels ``qk``/``ov`` (matching solves the within-head maps beside the permutations, and does not
know which level was planted). A benchmark's seconds are its point, so nothing here is cached.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import EvalOptions, evaluate_path
from landscape.experiments.gauge.coordinates import coordinate_accuracy
from landscape.matching import (
    METHODS,
    MatchContext,
    function_check,
    function_warnings,
    match,
    method_of,
)
from landscape.models import ModelConfig, Params
from landscape.progress import Progress, tell, within
from landscape.sources import Data, DataSpec, Source
from landscape.symmetry import (
    GROUP_OF,
    KV_G,
    KV_INV_T,
    RESID_GROUPS,
    Element,
    Spec,
    Transform,
    apply,
    random_transform,
    spec_for,
)
from landscape.symmetry.processing import prepare

# Every level a recovery can plant, in the order rows are shown: the residual chain, then the
# within-head maps
LEVELS = ("perm", "perm-global-sign", "signed-perm", "orth-mean", "orth", "qk", "ov")
# What runs when no level is named: one of each kind of element (S_d, B_d, O(d), QK and OV maps)
DEFAULT_LEVELS = ("perm", "signed-perm", "orth", "qk", "ov")
INNER_LEVELS = ("qk", "ov")
COLUMN_TOL = 1e-4  # a recovered column: relative error below float32's function tolerance
RECOVER_POINTS = 11  # λ points of the barrier between A and the recovered B


@dataclass(frozen=True)
class RecoveryOptions:
    """What a recovery runs (:func:`recover`, :func:`recovery`): the matching ``method``, the
    ``draw`` seeding the planted element and the matching's visiting order, ``points`` values of
    λ on the barrier, the parameters cast to ``dtype``; for a checkpoint path its data, as text
    (``text``) or images (``image_data``, read from ``data_dir``)."""

    method: str = "weight"
    draw: int = 0
    points: int = RECOVER_POINTS
    dtype: torch.dtype = torch.float64
    text: str | None = None
    image_data: str | None = None
    data_dir: str | None = None


RECOVERY = RecoveryOptions()  # the defaults


@dataclass
class VariableScore:
    """One gauge variable's recovery: ``units`` scored (slots, or columns of every map),
    ``recovered`` of them, and ``distance`` ‖H − G⁻¹‖_F / ‖G⁻¹‖_F (largest over heads)."""

    variable: str
    kind: str
    units: int
    recovered: int
    distance: float


@dataclass
class RecoveryRow:
    """One group level of :func:`recover` (module docstring for every score)."""

    level: str
    method: str
    match_group: str
    planted: dict[str, str]  # family → kind of the planted element (resid, mlp, heads, qk, ov)
    units: int
    recovered: float
    in_place: float  # units whose weights are back where A has them (units_in_place)
    distance: float
    by_family: dict[str, float]
    scramble_check: float
    function_check: float
    gap: float
    barrier_loss: float | None
    barrier_accuracy: float | None
    seconds: float
    rounds: int
    variables: list[VariableScore] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- scores


def _identity(spec: Spec, var: str) -> Element:
    """The identity element of ``var`` (one identity map per slot for a per-slot variable)."""
    v = spec.variables[var]
    eye = torch.eye(v.size, dtype=torch.float64)
    if v.over is None:
        return Element(v.kinds[0], torch.arange(v.size), torch.ones(v.size, dtype=torch.float64))
    return Element(v.widest, matrix=eye.expand(spec.variables[v.over].size, -1, -1), over=v.over)


def score_variable(spec: Spec, var: str, found: Element | None,
                   truth: Element | None) -> VariableScore:  # fmt: skip
    """How much of ``truth`` (g⁻¹'s element of ``var``; None: the identity) ``found`` recovered
    (module docstring)."""
    f = (found if found is not None else _identity(spec, var)).to(CPU)
    t = (truth if truth is not None else _identity(spec, var)).to(CPU)
    kind = t.kind if truth is not None else f.kind
    if f.is_monomial and t.is_monomial:
        ok = coordinate_accuracy(f, t)["coord"]
        units = len(t.perm)
        recovered = round(ok * units)
    else:
        hf, ht = f.dense(), t.dense()  # [.., n, n]
        col_err = (hf - ht).norm(dim=-2) / ht.norm(dim=-2).clamp_min(1e-300)
        units, recovered = col_err.numel(), int((col_err <= COLUMN_TOL).sum())
    hf, ht = f.dense(), t.dense()
    if hf.ndim == 2:
        hf, ht = hf[None], ht[None]
    distance = float(((hf - ht).flatten(1).norm(dim=1) / ht.flatten(1).norm(dim=1)).max())
    return VariableScore(var, kind, units, recovered, distance)


def score_transform(spec: Spec, found: Transform, truth: Transform) -> list[VariableScore]:
    """:func:`score_variable` for every variable of ``found`` or ``truth``, in spec order."""
    names = set(found.elements) | set(truth.elements)
    return [score_variable(spec, v, found.elements.get(v), truth.elements.get(v))
            for v in spec.variables if v in names]  # fmt: skip


def _gap(a: Params, b: Params) -> float:
    """max over parameters of ``max|a − b| / max|a|`` (float64)."""
    worst = 0.0
    for k, v in a.items():
        x, y = v.double().cpu(), b[k].double().cpu()
        worst = max(worst, float((x - y).abs().max()) / max(float(x.abs().max()), 1e-300))
    return worst


# ---------------------------------------------------------------------------- levels


def levels_of(cfg: ModelConfig) -> tuple[str, ...]:
    """The levels of :data:`LEVELS` that ``cfg`` admits after processing: the residual kinds
    its ``resid`` variable declares, and ``qk``/``ov`` where the spec declares them."""
    spec = spec_for(cfg)
    resid = spec.variables["resid"].kinds
    out = [g for g in LEVELS if g in RESID_GROUPS and RESID_GROUPS[g] in resid]
    return (*out, *(g for g in INNER_LEVELS if spec.family(g)))


def check_levels(cfg: ModelConfig, levels: Sequence[str] | None) -> tuple[str, ...]:
    """The levels to run (default: :data:`DEFAULT_LEVELS` the model admits); a level the model
    does not admit, or an unknown one, is refused in one line."""
    admitted = levels_of(cfg)
    if levels is None:
        return tuple(g for g in DEFAULT_LEVELS if g in admitted)
    for g in levels:
        if g not in LEVELS:
            raise LandscapeError(f"unknown group level {g!r}; expected one of {', '.join(LEVELS)}")
        if g in INNER_LEVELS and g not in admitted:
            why = "attention" if not cfg.has_attn else "QK maps (its q/k norms block them)"
            raise LandscapeError(f"this {cfg.arch} does not admit the level {g!r}: it has no {why}")
        if g not in admitted:
            raise LandscapeError(
                f"this {cfg.arch} does not admit the level {g!r} (it admits "
                f"{', '.join(admitted)}: `landscape symmetries` says why)"
            )
    return tuple(dict.fromkeys(levels))


def _planted_kinds(spec: Spec, g: Transform) -> dict[str, str]:
    """Family → kind of the planted element (its first variable's: a level gives every variable
    of a family one kind)."""
    out: dict[str, str] = {}
    for var, e in g.elements.items():
        family = spec.variables[var].family
        out.setdefault(family, e.kind)
    return out


# ---------------------------------------------------------------------------- the benchmark


@dataclass
class Scramble:
    """A planted element: ``a`` (A processed for the level, config ``cfg``), ``g`` drawn from
    the spec of ``cfg``, ``b`` = g(a), and ``check``, B's max |Δlogits| against A as given."""

    level: str
    match_group: str
    cfg: ModelConfig
    a: Params
    g: Transform
    b: Params
    check: float


def scramble(cfg: ModelConfig, params: Params, level: str, seed: int = 0) -> Scramble:
    """Process A as ``level`` needs and apply a random element of it (seed ``seed``), in the
    parameters' dtype; the matching group is the level, ``perm`` for ``qk``/``ov``."""
    match_group = "perm" if level in INNER_LEVELS else level
    cfg_p, a = prepare(cfg, params, match_group)
    spec = spec_for(cfg_p)
    g = random_transform(spec, level, seed)
    b = apply(spec, g, a)
    check = function_check(cfg, params, cfg_p, b, dtype=torch.float64)
    return Scramble(level, match_group, cfg_p, a, g, b, check)


def units_in_place(spec: Spec, a: Params, b: Params,
                   tol: float = COLUMN_TOL) -> dict[str, tuple[int, int]]:  # fmt: skip
    """Per variable, (units whose weights are back in place, units): unit i of a variable is in
    place when every slice of every parameter the variable indexes at i (rows, columns, a head's
    block, one column of a head's map) is within ``tol`` of A's, relative. A measure of the
    weights alone, so it scores any aligner's output, whatever transform it found (or none);
    parameters missing from either side are skipped."""
    out = {}
    for var, v in spec.variables.items():
        slots = spec.variables[v.over].size if v.over is not None else 1
        ok = torch.ones(slots, v.size, dtype=torch.bool)
        for name, axis, role in spec.touches(var):
            if name not in a or name not in b:
                continue
            x, y = a[name].double().cpu(), b[name].double().cpu()
            shared = role.act in (GROUP_OF, KV_G, KV_INV_T)  # one slice per group of units
            if v.over is None:
                x, y = x.movedim(axis, 0)[None], y.movedim(axis, 0)[None]
                cols = torch.arange(v.size) // (v.group if shared else 1)
                rows = torch.zeros(1, dtype=torch.long)
            else:  # per-slot maps: (slot, column) of the map, the slot on the head axis
                over = next(i for i, r in enumerate(spec.axes[name]) if r and r.var == v.over)
                x, y = x.movedim((over, axis), (0, 1)), y.movedim((over, axis), (0, 1))
                rows = torch.arange(slots) // (v.group if shared else 1)
                cols = torch.arange(v.size)
            xs = x[rows][:, cols].reshape(len(rows), len(cols), -1)
            ys = y[rows][:, cols].reshape(len(rows), len(cols), -1)
            diff, ref = (xs - ys).norm(dim=-1), xs.norm(dim=-1)
            ok &= (diff <= tol * ref) | (diff == 0)
        out[var] = (int(ok.sum()), ok.numel())
    return out


def align_back(
    s: Scramble,
    *,
    method: str = "weight",
    seed: int = 0,
    data: Data | None = None,
    points: int = RECOVER_POINTS,
    device: torch.device = CPU,
    progress: Progress | None = None,
    options: dict[str, Any] | None = None,
) -> RecoveryRow:
    """Align the scrambled B back to A with ``method`` and score it (module docstring).
    ``data``: A's data, for the barrier (its test evaluation split) and for data-driven methods
    (its training split); without it the barrier is None and only weight and naive matching
    run."""
    if method not in METHODS:
        raise LandscapeError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    cfg_p, a, b = s.cfg, s.a, s.b
    spec = spec_for(cfg_p)
    train = data.split("train") if data is not None else None
    if method_of(method).needs_data and train is None:
        raise LandscapeError(f"{method} matching needs the model's data (give --text or --data)")
    heard = within(progress, 0.0, 0.9)  # every method's stages (naive has none)
    t0 = time.perf_counter()
    r = match(cfg_p, a, b, method, s.match_group, options=dict(options or {}), train_split=train,
              context=MatchContext(seed, device, heard))  # fmt: skip
    seconds = time.perf_counter() - t0
    scores = score_transform(spec, r.transform.to(CPU), s.g.inverse())
    units = sum(x.units for x in scores)
    by_family: dict[str, list[int]] = {}
    for x in scores:
        tally = by_family.setdefault(spec.variables[x.variable].family, [0, 0])
        tally[0] += x.recovered
        tally[1] += x.units
    placed = units_in_place(spec, a, r.params_b).values()
    barrier_loss = barrier_acc = None
    if data is not None:
        tell(progress, "barrier", 0.9)
        barrier_loss, barrier_acc = barrier_between(cfg_p, r.params_a, r.params_b, data, points)
    tell(progress, "done", 1.0)
    return RecoveryRow(
        level=s.level,
        method=method,
        match_group=s.match_group,
        planted=_planted_kinds(spec, s.g),
        units=units,
        recovered=sum(x.recovered for x in scores) / max(units, 1),
        in_place=sum(k for k, _ in placed) / max(sum(n for _, n in placed), 1),
        distance=max((x.distance for x in scores), default=0.0),
        by_family={f: ok / n for f, (ok, n) in by_family.items()},
        scramble_check=s.check,
        function_check=r.function_check,
        gap=_gap(a, r.params_b),
        barrier_loss=barrier_loss,
        barrier_accuracy=barrier_acc,
        seconds=seconds,
        rounds=r.rounds,
        variables=scores,
    )


def barrier_between(cfg: ModelConfig, a: Params, b: Params, data: Data,
                    points: int = RECOVER_POINTS) -> tuple[float, float]:  # fmt: skip
    """(loss, accuracy) barrier along ``λ·a + (1−λ)·b`` on ``data``'s test evaluation split."""
    ev = data.evaluation("test")
    opts = EvalOptions(**data.eval_options(cfg, ev.inputs))
    lam = torch.linspace(0, 1, points, dtype=torch.float64)
    loss, acc = evaluate_path(cfg, a, b, ev.inputs, ev.targets, lam, opts)
    curve = barrier_from_curve(lam, loss, acc)
    return curve.barrier_loss, curve.barrier_accuracy


def recover_level(
    cfg: ModelConfig,
    params: Params,
    level: str,
    *,
    seed: int = 0,
    **kw: Any,
) -> RecoveryRow:
    """Plant a random element of ``level`` (seed ``seed``) in ``params`` (:func:`scramble`, in
    their own dtype: float64 makes every score a property of the algorithm, not of float32
    storage) and align it back (:func:`align_back`, keywords passed on; ``seed`` also seeds
    the matching's visiting order)."""
    return align_back(scramble(cfg, params, level, seed), seed=seed, **kw)


@in_context
def recover(
    cfg: ModelConfig,
    params: Params,
    levels: Sequence[str] | None = None,
    options: RecoveryOptions = RECOVERY,
    *,
    data: Data | None = None,
    context: RunContext = RUN,
) -> list[RecoveryRow]:
    """:func:`recover_level` for every level (default: :data:`DEFAULT_LEVELS` the model
    admits), on ``params`` cast to the options' ``dtype`` (float64 by default), planted and
    matched with seed ``draw``, on the context's device; ``data``: A's data (for the barrier and
    data-driven methods). The options' data source (``text``, ``image_data``, ``data_dir``) is
    :func:`recovery`'s, not read here."""
    method, seed, points, dtype = options.method, options.draw, options.points, options.dtype
    device, progress = context.device, context.progress
    todo = check_levels(cfg, levels)
    params = {k: v.detach().to(CPU, dtype) for k, v in params.items()}
    rows = []
    for i, level in enumerate(todo):
        part = within(progress, i / len(todo), (i + 1) / len(todo), f"{level}: ")
        rows.append(recover_level(cfg, params, level, method=method, seed=seed, data=data,
                                  points=points, device=device, progress=part))  # fmt: skip
    return rows


@in_context
def recovery(
    model: str,
    seed: int | None = None,
    levels: Sequence[str] | None = None,
    options: RecoveryOptions = RECOVERY,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """``landscape recover MODEL``: the rows of :func:`recover` for a zoo seed, a family member
    or a checkpoint path (a path's data from the options' ``text`` or ``image_data``), as one
    JSON-able dict with ``rows`` (tidy records: one per level), ``function_ok`` and
    ``warnings``; what it runs in ``options`` (:class:`RecoveryOptions`), where in
    ``context``."""
    method, draw, dtype = options.method, options.draw, options.dtype
    text, image_data, data_dir = options.text, options.image_data, options.data_dir
    progress = context.progress
    source = Source(model, seed)
    if source.kind == "zoo" and seed is None:
        raise LandscapeError(f"{model} is a zoo model: give the checkpoint's --seed")
    given = text is not None or image_data is not None
    if given and source.kind != "path":
        raise LandscapeError("--text and --data name a checkpoint path's data; a zoo model or "
                             "family has its own")  # fmt: skip
    tell(progress, "load", 0.0)
    ckpt = source.load(CPU)
    todo = check_levels(ckpt.cfg, levels)  # before the data is read
    if given:  # windows as long as the model's context allows, at most pair-barrier's 128
        spec = DataSpec(text=text, data=image_data, data_dir=data_dir,
                        n_ctx=min(128, ckpt.cfg.n_ctx or 128))  # fmt: skip
        source = Source(model, seed, data=spec)
        data = source.data_of(ckpt)
    else:
        try:
            data = source.data_of(ckpt)
        except LandscapeError as e:
            hint = "for a checkpoint path give --text FILE or --data digits|fashion"
            raise LandscapeError(f"{e} (recover measures the barrier on it: {hint})") from None
    rows = recover(
        ckpt.cfg, ckpt.params, todo, options, data=data, context=context.within(0.05, 1.0)
    )
    checks = {}
    for r in rows:
        checks[f"the {r.level} scramble"] = r.scramble_check
        checks[f"B recovered from the {r.level} scramble"] = r.function_check
    warnings = function_warnings(checks)
    return {
        "model": model,
        "seed": seed,
        "label": source.label(ckpt),
        "method": method,
        "draw": draw,
        "dtype": str(dtype).removeprefix("torch."),
        "column_tol": COLUMN_TOL,
        "rows": [r.to_dict() for r in rows],
        "function_ok": not warnings,
        "warnings": warnings,
    }


__all__ = [
    "COLUMN_TOL",
    "DEFAULT_LEVELS",
    "LEVELS",
    "RECOVERY",
    "RecoveryOptions",
    "RecoveryRow",
    "Scramble",
    "VariableScore",
    "align_back",
    "barrier_between",
    "check_levels",
    "levels_of",
    "recover",
    "recover_level",
    "recovery",
    "score_transform",
    "score_variable",
    "scramble",
    "units_in_place",
]
