"""Cached experiments on checkpoints: matchings, barrier curves, triangles, eigenangles, tables.

This is the layer the CLI and the app call. Every result is stored in the disk cache keyed by
the weight digests of the checkpoints involved, the method, group and parameters, the data and
the version of the algorithm, so a second request (from either front end) is served from disk.
Results are plain JSON-able dicts; the JSON keys follow docs/design.md §5.

There is one barrier pipeline, :func:`measure_barrier` of a :class:`BarrierRequest`: two
endpoints (each a :class:`~landscape.sources.Source` or a loaded checkpoint), checked when the
request is made, are loaded, aligned and evaluated on A's data
(:func:`landscape.sources.data_of`), and the whole measurement is cached as one entry keyed by
:meth:`BarrierRequest.key`. ``landscape barrier`` (zoo seeds and family members: the
convenience :func:`barrier`), ``table``, ``controls``, ``matrix`` and ``pair-barrier``
(checkpoint paths, :mod:`landscape.experiments.barriers.pairs`) all run through it; the result
stays a :class:`BarrierRun` until ``to_dict()``.
Devices arrive resolved (``landscape.device.resolve_device`` at the CLI and the app).
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

import torch

from landscape.budget import check_points
from landscape.data import Split
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import (
    barrier_from_curve,
    calibrate_mixtures,
    check_finite_loss,
    evaluate_path,
)
from landscape.matching import (
    BARRIER_GROUPS,
    METHODS_BY_NAME,
    WeightOptions,
    function_check,
    function_warnings,
    match,
    method_of,
    options_key,
)
from landscape.matching.result import check_dtype
from landscape.models import ModelConfig, Params
from landscape.models.circuits import check_circuit_form, check_space, circuit_forms
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell, within
from landscape.sources import (
    Data,
    Source,
    check_same_architecture,
    data_of,
    label,
)
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry import Transform
from landscape.threads import threaded

ALGO_VERSION = 5  # bump when matching or triangle evaluation changes: old entries stop matching
# 2: matchings also check the processed A (``function_check_a``)
# 3: within-head maps in weight and activation matching; learned rotations as G₀·exp(S − Sᵀ)
# 4: weight matching decides nothing on round-off (null spaces of a Procrustes by rule, ties of
#    an assignment by index, within-head steps on significant changes only), so its answer is
#    the pair's, not the machine's; entries hold the transform (learned matching starts from it)
# 5: within-head maps under rotary positions (QK maps commuting with RoPE) and grouped-query
#    attention (one QK and one OV map per key/value group): matchings of such models change;
#    models without either match as before
BARRIER_VERSION = 6  # bump when the barrier pipeline changes
# 3: one pipeline for zoo seeds, family members and paths, keyed by the endpoints' weights
# 4: the matchings of ALGO_VERSION 3 (a barrier entry does not hold the matching's version)
# 5: function checks of endpoints in other coordinates (circuit form, original) in float64
# 6: the matchings of ALGO_VERSION 5
SPLITS = ("train", "test")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
Endpoint = Source | Checkpoint


# ---------------------------------------------------------------- checkpoints and data


def load(model: str, seed: int | None, device: torch.device = CPU) -> Checkpoint:
    """The checkpoint of a zoo seed, a family member or a path (``Source(model, seed)``)."""
    return Source(model, seed).load(device)


def eval_split(ckpt: Checkpoint, split: str) -> Split:
    """The data a checkpoint is evaluated on (its zoo model's split, or its family's)."""
    check_split(split)
    return data_of(ckpt).split(split)


def health(checks: dict[str, float | None]) -> dict[str, Any]:
    """``function_ok`` and ``warnings`` of a result from its function checks (what was checked
    → max |Δlogits|): a check that is NaN or above the tolerance is a warning, never dropped."""
    warnings = function_warnings(checks)
    return {"function_ok": not warnings, "warnings": warnings}


def check_pair(a: Checkpoint, b: Checkpoint) -> None:
    """One line naming the first difference of A's and B's architectures or vocabularies."""
    check_same_architecture(a, b, label(a), label(b))


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**20 if sys.platform == "darwin" else 2**10)


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise LandscapeError(f"unknown split {split!r}; expected train or test")


def check_method(method: str, group: str) -> None:
    """One line refusing a method that is not registered or a group no barrier is measured
    under (``landscape.names.BARRIER_GROUPS``)."""
    if method not in METHODS_BY_NAME:
        known = ", ".join(METHODS_BY_NAME)
        raise LandscapeError(f"unknown method {method!r}; expected one of {known}")
    if group not in BARRIER_GROUPS:
        known = ", ".join(BARRIER_GROUPS)
        raise LandscapeError(f"unknown group {group!r}; expected one of {known}")


# ---------------------------------------------------------------- matching


@dataclass
class Aligned:
    """A cached alignment: processed A, aligned B = π(θ_B), the residual matrix and facts."""

    cfg: ModelConfig
    params_a: Params
    params_b: Params
    resid: torch.Tensor  # (d_model, d_model) float64
    info: dict[str, Any]
    cached: bool
    transform: Transform | None = None  # acting on B as processed (None: not stored)


def split_prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> Params:
    n = len(prefix)
    return {k[n:]: v for k, v in tensors.items() if k.startswith(prefix)}


def _match(
    a: Checkpoint,
    b: Checkpoint,
    method: str,
    group: str,
    seed: int,
    device: torch.device,
    options: Any,
    data: Data | None,
    progress: Progress | None,
    consume: bool = False,
    start: Transform | None = None,
) -> Aligned:
    """Align B to A (uncached); activation and learned matching learn from A's training split.

    ``consume``: the parameters of ``a`` and ``b`` are handed over to weight matching, which
    empties them (``landscape.matching.match``): the same result, in fewer copies of the pair.
    ``start``: learned matching's weight-matching start, when known (:func:`align` reads it
    from the cache). ``options``: the method's settings (its options dataclass).
    """
    entry = method_of(method)
    train = None
    if entry.needs_data:  # seconds for a large split: said, so the bar does not look stuck
        tell(progress, "load the train split", 0)
        train = (data or data_of(a)).split("train")
    hooks: dict[str, Any] = {}
    if start is not None:
        hooks["start"] = start
    if consume and entry.consumes:
        hooks["consume"] = True
    try:
        r = match(a.cfg, a.params, b.params, method, group, train_split=train, seed=seed,
                  device=device, options=options, progress=progress, **hooks)  # fmt: skip
    except torch.linalg.LinAlgError as e:  # e.g. weights so large that products overflow
        raise LandscapeError(
            f"{method} matching of {label(b)} to {label(a)} under {group} failed: "
            f"{' '.join(str(e).split())}"
        ) from None
    return Aligned(r.cfg, r.params_a, r.params_b, r.resid_matrix(), r.to_dict(), False,
                   r.transform)  # fmt: skip


def weight_start(
    a: Checkpoint,
    b: Checkpoint,
    group: str,
    *,
    seed: int,
    options: Any,
    context: RunContext = RUN,
) -> Transform | None:
    """Learned matching's start, weight matching under ``group`` (its cached entry, the one
    ``barrier --method weight`` reads), or None when the ``options`` of a learned method (its
    settings dataclass, or learned matching's as a dict) start elsewhere (``init``).
    The context's ``progress`` follows the weight matching when it is not cached."""
    learned = options if is_dataclass(options) else method_of("learned").settings(options)
    if getattr(learned, "init", "weight") != "weight":
        return None
    start = WeightOptions(within_heads=getattr(learned, "within_heads", True))
    return align(a, b, "weight", group, seed=seed, options=start, context=context).transform


@in_context
def align(
    a: Checkpoint,
    b: Checkpoint,
    method: str,
    group: str,
    *,
    seed: int = 0,
    options: Any = None,
    data: Data | None = None,
    context: RunContext = RUN,
) -> Aligned:
    """Align B to A (cached). ``options`` are the matching method's settings, a dict or its
    options dataclass (those not at their defaults key the cache entry); ``data`` is A's
    (default :func:`landscape.sources.data_of`).

    The ``context``'s progress follows the matching: weight matching's visits, activation
    matching's passes, learned matching's steps (its weight-matching start, when not cached,
    in the first tenth).
    """
    check_method(method, group)
    check_pair(a, b)
    device, progress = context.device, context.progress
    cache = context.cache or Cache()
    entry = method_of(method)
    options = entry.settings(options)  # read once: a dataclass passes as it is
    inputs = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "cfg": a.cfg.to_dict(),
        "method": method,
        "group": group,
        "seed": seed,
        "options": options_key(options),
        "version": ALGO_VERSION,
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        start, steps = None, progress
        if entry.learned:
            start = weight_start(a, b, group, seed=seed, options=options,
                                 context=RunContext(device, cache, within(progress, 0.0, 0.1,
                                                                          "start: ")))  # fmt: skip
            steps = within(progress, 0.1, 1.0)
        al = _match(a, b, method, group, seed, device, options, data, steps, start=start)
        tensors = {f"a.{k}": v for k, v in al.params_a.items()}
        tensors.update({f"b.{k}": v for k, v in al.params_b.items()})
        tensors["resid"] = al.resid
        moves, about = al.transform.to_tensors("t.")
        tensors.update(moves)
        return unshared(tensors), {**al.info, "transform": about}

    entry, hit = cache.get_or_compute("matching", inputs, compute)
    t = entry.tensors
    cfg = ModelConfig.from_dict(entry.meta["cfg"])
    about = entry.meta.get("transform")
    transform = None if about is None else Transform.from_tensors(t, about, "t.")
    return Aligned(cfg, split_prefixed(t, "a."), split_prefixed(t, "b."), t["resid"],
                   entry.meta, hit, transform)  # fmt: skip


def unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of the tensors whose storage another one already uses (e.g. a parameter the
    processing left untouched in both endpoints): the cache's file format stores each tensor's
    memory once and refuses shared storage."""
    seen: set[int] = set()
    out = {}
    for k, v in tensors.items():
        ptr = v.untyped_storage().data_ptr()
        out[k] = v.clone() if ptr in seen else v
        seen.add(ptr)
    return out


def learned_space(method: str, space: str) -> dict[str, Any]:
    """The matching setting that makes a ``learned`` method descend the loss along the line
    that is measured: in the circuits space, the circuit line (none in the weights space, so
    its cache keys are those of before spaces)."""
    return {"space": space} if method_of(method).learned and space != "weights" else {}


# ---------------------------------------------------------------- barrier


Unfold = Callable[[Checkpoint, Checkpoint, Aligned], tuple[ModelConfig, Params, Params]]


@dataclass(frozen=True)
class Coordinates:
    """The coordinates in which a barrier's line is straight.

    ``name`` goes into results and cache keys; ``unfold(a, b, aligned) -> (cfg, A, π(B))``
    rewrites the matched pair in them (None: the processed pair as matched). The original
    coordinates of the checkpoints are ``landscape.experiments.barriers.controls.ORIGINAL``.
    ``space``
    is the merge space (``landscape.models.circuits``): ``"weights"``, the model's own factors,
    or ``"circuits"``, every head rewritten as its full QK and OV circuits (:func:`in_space`).
    """

    name: str
    unfold: Unfold | None = None
    space: str = "weights"

    @property
    def key(self) -> str:
        """The name in cache keys (weights-space keys are the names alone, as before spaces)."""
        return self.name if self.space == "weights" else f"{self.name}/{self.space}"


PROCESSED = Coordinates("processed")


def unfolded_checks(
    coordinates: Coordinates, a: Checkpoint, b: Checkpoint, al: Aligned
) -> dict[str, float]:
    """Both endpoints written in ``coordinates`` against the checkpoints, max |Δlogits|.

    Whether the rewrite keeps each function, so it is done from float64 copies and evaluated in
    float64 (:func:`landscape.matching.result.check_dtype`; see ``circuit_checks``). What the
    float32 line is then evaluated on is the same rewrite, rounded once more.
    """
    dtype = check_dtype(a.params)

    def cast(p: Params) -> Params:
        return {k: v.to(dtype) for k, v in p.items()}

    a_, b_ = replace(a, params=cast(a.params)), replace(b, params=cast(b.params))
    al_ = replace(al, params_a=cast(al.params_a), params_b=cast(al.params_b))
    cfg, pa, pb = coordinates.unfold(a_, b_, al_)
    return {"a": function_check(a.cfg, a_.params, cfg, pa, dtype),
            "b": function_check(b.cfg, b_.params, cfg, pb, dtype)}  # fmt: skip


def in_space(coordinates: Coordinates, space: str) -> Coordinates:
    """``coordinates`` in merge space ``space``: for ``"circuits"``, both endpoints in these
    coordinates, then rewritten together for the circuits space (``circuit_forms``: the same
    functions, the line averages QKᵀ and VO instead of the factors)."""
    check_space(space)
    if space == coordinates.space:
        return coordinates
    if coordinates.space != "weights":
        raise LandscapeError(f"{coordinates.name} coordinates are already in {coordinates.space}")
    inner = coordinates.unfold

    def unfold(a: Checkpoint, b: Checkpoint, al: Aligned) -> tuple[ModelConfig, Params, Params]:
        cfg, pa, pb = (al.cfg, al.params_a, al.params_b) if inner is None else inner(a, b, al)
        cfg_c, (ca, cb) = circuit_forms(cfg, [pa, pb])
        return cfg_c, ca, cb

    return Coordinates(coordinates.name, unfold, space)


@dataclass(frozen=True)
class BarrierRequest:
    """One barrier measurement asked for: what :func:`measure_barrier` measures.

    ``a``, ``b``: the endpoints, each a :class:`~landscape.sources.Source` or a loaded
    checkpoint (compared by identity); ``options``: the matching method's settings, its options
    dataclass (a dict of settings is read into it here; a name that is not one of its settings
    is refused); the line is ``θ(λ) = λ·θ_A + (1−λ)·π(θ_B)`` at ``points`` values of λ, λ = 1 is
    A (docs/design.md §1), straight in ``coordinates`` and merge ``space`` (``"weights"`` or
    ``"circuits"``: :func:`in_space`), evaluated on A's ``split`` in ``dtype``. ``seed`` seeds
    the matching. ``store_matching`` off: the matching is not stored apart (large imported
    pairs: it would write two copies of the weights); the result is the same, so it is not
    part of what the request is compared or hashed by. ``calibrate``: every model on the line
    has its logits rescaled by the inverse temperature that fits it best on a slice of A's
    training data (:data:`CALIBRATION_ROWS` rows, :func:`calibration_split`), so the barrier
    left is what no temperature removes.

    Frozen and hashable (with sources as endpoints it is also the app's memo key); every check
    that needs nothing loaded is done when it is made, as one line (docs/design.md, the CLI's
    error contract). :meth:`key` is its disk-cache key.
    """

    a: Endpoint
    b: Endpoint
    method: str = "weight"
    group: str = "perm"
    options: Any = None
    points: int = 25
    split: str = "test"
    space: str = "weights"
    coordinates: Coordinates = PROCESSED
    dtype: str = "float32"
    seed: int = 0
    store_matching: bool = field(default=True, compare=False)
    calibrate: bool = False

    def __post_init__(self) -> None:
        check_method(self.method, self.group)
        check_split(self.split)
        in_space(self.coordinates, self.space)  # a space that is not one, or a second space
        if self.points < 2:
            raise LandscapeError("--points must be at least 2 (the endpoints)")
        check_points(self.points)
        if self.dtype not in DTYPES:
            raise LandscapeError(
                f"unknown dtype {self.dtype!r}; expected one of {', '.join(DTYPES)}"
            )
        object.__setattr__(self, "options", method_of(self.method).settings(self.options))

    @property
    def line(self) -> Coordinates:
        """The coordinates the line is straight in, in the request's merge space."""
        return in_space(self.coordinates, self.space)

    def settings(self, cfg: ModelConfig, data: Data) -> Any:
        """The method's settings for A's data: those that follow from the data and the merge
        space (``Data.match_options``, :func:`learned_space`), then those said (the options'
        settings not at their defaults)."""
        return method_of(self.method).settings({
            **data.match_options(cfg, self.method),
            **learned_space(self.method, self.space),
            **options_key(self.options),
        })  # fmt: skip

    def key(self, a: Checkpoint, b: Checkpoint, data: Data) -> dict[str, Any]:
        """The inputs of the measurement's cache entry (kind ``"barrier"``): both endpoints'
        weights, A's configuration, method, group, seed, the settings not at their defaults,
        points, split, coordinates (with the merge space), A's data and dtype."""
        return {
            "a": digest_tensors(a.params),
            "b": digest_tensors(b.params),
            "cfg": a.cfg.to_dict(),
            "method": self.method,
            "group": self.group,
            "seed": self.seed,
            "options": options_key(self.settings(a.cfg, data)),
            "points": self.points,
            "split": self.split,
            "coordinates": self.line.key,
            "data": data.key,
            "dtype": self.dtype,
            "version": BARRIER_VERSION,
            # a calibrated line is another measurement; the plain ones keep their keys
            **({"calibrate": CALIBRATION_ROWS} if self.calibrate else {}),
        }


# rows of A's training split a calibrated line fits each temperature on (a language model's
# windows count as rows: 64 windows of 128 tokens are learned matching's batch of 8,192 tokens)
CALIBRATION_ROWS = {"rows": 1024, "windows": 64}


def calibration_split(data: Data) -> Split:
    """The slice of A's training split a calibrated line fits its temperatures on: its first
    :data:`CALIBRATION_ROWS` rows (windows, for a language model), never the evaluated split."""
    train = data.split("train")
    n = CALIBRATION_ROWS["windows" if train.inputs.ndim == 2 and train.targets.ndim == 2
                         else "rows"]  # fmt: skip
    return Split(train.inputs[:n], train.targets[:n])


def seeds_request(model: str, seeds: Sequence[int], method: str = "weight",
                  group: str = "perm", **request: Any) -> BarrierRequest:  # fmt: skip
    """The request for two seeds (or members) of one zoo model or family; ``request``: the
    rest of :class:`BarrierRequest`."""
    if len(seeds) != 2:
        raise LandscapeError("barrier needs two seeds: --seeds A B")
    return BarrierRequest(Source(model, seeds[0]), Source(model, seeds[1]), method, group,
                          **request)  # fmt: skip


def seeds_of(request: BarrierRequest) -> tuple[str, tuple[int, int]]:
    """The model (zoo name or family) and the two seeds of a request whose endpoints must be two
    different seeds of one model; one line refusing anything else."""
    a, b = request.a, request.b
    if not (isinstance(a, Source) and isinstance(b, Source) and a.model == b.model
            and a.seed is not None and b.seed is not None):  # fmt: skip
        raise LandscapeError("give two seeds of one model: --seeds A B")
    if a.seed == b.seed:
        raise LandscapeError("give two different seeds: --seeds A B")
    return a.model, (a.seed, b.seed)


def refuse_unread(request: BarrierRequest, what: str, read: Sequence[str]) -> None:
    """Refuse a request that sets what ``what`` does not read: any field other than the endpoints
    and ``read`` that is not at its default (one line naming them), so that nothing asked for is
    silently left out."""
    unread = []
    for f in fields(request):
        if f.name in ("a", "b", "store_matching", *read):
            continue
        value = getattr(request, f.name)
        if f.name == "options" and not options_key(value):
            continue
        if f.name != "options" and value == f.default:
            continue
        unread.append(f.name)
    if unread:
        raise LandscapeError(f"{what} does not take the request's {', '.join(unread)}: leave "
                             f"{'them' if len(unread) > 1 else 'it'} at the default")  # fmt: skip


@dataclass
class BarrierRun:
    """One barrier measurement: the request, who was compared, on what, and the cached entry.

    ``entry`` holds the ``curve`` (``BarrierCurve.to_dict``), ``function_check`` (aligned B against
    B), ``function_check_a`` (processed A against A), ``checks_unfolded`` (both endpoints
    written back in other coordinates, against the checkpoints), ``matching`` (seconds, rounds,
    objective, kinds, det_flips) and the sizes of the evaluation (``windows``,
    ``batches_per_lambda``, compute time and memory).
    """

    request: BarrierRequest
    labels: tuple[str, str]
    coordinates: Coordinates  # the request's, in its merge space
    cfg: ModelConfig  # A's, as loaded
    meta: dict[str, Any]  # A's checkpoint metadata
    parameters: int
    data: Data
    entry: dict[str, Any]
    cached: bool
    device: torch.device
    seconds: float
    key: str = ""  # the entry's cache key (kind "barrier")

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def group(self) -> str:
        return self.request.group

    @property
    def split(self) -> str:
        return self.request.split

    @property
    def dtype(self) -> str:
        return self.request.dtype

    def checks(self) -> dict[str, float | None]:
        """Every function check of the run, named for messages."""
        name_a, name_b = self.labels
        m, g = self.method, self.group
        out = {f"{name_b} aligned to {name_a} ({m}/{g})": self.entry["function_check"],
               f"{name_a} processed for {g}": self.entry.get("function_check_a")}  # fmt: skip
        unfolded = self.entry.get("checks_unfolded")
        if unfolded:
            c = self.coordinates
            where = f"{c.name} coordinates" + (", circuit form" if c.space == "circuits" else "")
            out[f"{name_a} in {where}"] = unfolded["a"]
            out[f"{name_b} aligned, in {where}"] = unfolded["b"]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The measurement as JSON: method, group, split, merge space, the curve, the function
        checks, ``function_ok``, ``warnings``, times, the matching's rounds and final
        objective, ``cached``, ``cache_key`` (the barrier entry's) and ``device``."""
        e = self.entry
        out = {
            "method": self.method,
            "group": self.group,
            "split": self.split,
            "space": self.coordinates.space,
            **e["curve"],
            "function_check": e["function_check"],
            "function_check_a": e.get("function_check_a"),
            **health(self.checks()),
            "matching_seconds": e["matching"]["seconds"],
            # where the descent ended: rounds and ‖θ_A − π(θ_B)‖² (weight matching's objective)
            "matching_rounds": e["matching"]["rounds"],
            "matching_objective": (e["matching"]["objective"] or [None])[-1],
            "seconds": round(self.seconds, 4),
            "cached": self.cached,
            "cache_key": self.key,
            "device": str(self.device),
        }
        if self.coordinates.name != PROCESSED.name:
            out["coordinates"] = self.coordinates.name
        if self.request.calibrate:  # the inverse temperature fitted at each λ
            out["calibrated"] = True
            out["temperatures"] = e["temperatures"]
        return out

    def to_seeds_dict(self) -> dict[str, Any]:
        """The result of ``landscape barrier`` (two seeds of one model, the request's endpoints
        as sources): ``model``, ``seeds``, :meth:`to_dict`, and the matching settings said
        (``options``, those not at the library's defaults) when there are any."""
        a, b = self.request.a, self.request.b
        out = {"model": a.model, "seeds": [a.seed, b.seed], **self.to_dict()}
        said = options_key(self.request.options)
        if said:
            out["options"] = said
        return out


def _open(x: Endpoint, device: torch.device, cache: Cache) -> tuple[Checkpoint, str]:
    if isinstance(x, Checkpoint):
        return x, label(x)
    ckpt = x.load(device, cache)
    return ckpt, x.label(ckpt)


def measure_barrier(
    request: BarrierRequest,
    *,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> BarrierRun:
    """The one barrier pipeline: load, align B to A, evaluate the line on A's data.

    The request was checked when it was made (method, group, split, space, points against the
    memory budget, dtype); here, before anything is loaded, that its dtype runs on ``device``
    (``"bfloat16"`` evaluates in bfloat16, CUDA only; matching stays float32). The measurement
    is one cache entry (kind ``"barrier"``, :meth:`BarrierRequest.key`); on a miss the matching
    comes from its own entry (``align``) unless the request's ``store_matching`` is off.
    A NaN or infinite loss anywhere on the line is a LandscapeError naming the λ, and nothing is
    stored. ``progress`` follows matching (learned: per step) and evaluation.
    """
    r = request
    if r.dtype == "bfloat16" and device.type != "cuda":
        raise LandscapeError("bfloat16 evaluation is for CUDA; on the CPU pairs run in float32")
    coordinates = r.line
    t0 = time.perf_counter()
    cache = cache or Cache()
    tell(progress, "load", 0)
    ckpt_a, name_a = _open(r.a, device, cache)
    ckpt_b, name_b = _open(r.b, device, cache)
    check_same_architecture(ckpt_a, ckpt_b, name_a, name_b)
    if coordinates.space == "circuits":
        check_circuit_form(ckpt_a.cfg)
    data = r.a.data_of(ckpt_a) if isinstance(r.a, Source) else data_of(ckpt_a)
    cfg_a, meta_a = ckpt_a.cfg, ckpt_a.meta
    n_params = sum(v.numel() for v in ckpt_a.params.values())
    options = r.settings(cfg_a, data)  # read once for the whole request
    inputs = r.key(ckpt_a, ckpt_b, data)
    lam = torch.linspace(0, 1, r.points, dtype=torch.float64)
    method, group, split = r.method, r.group, r.split

    def where(i: int) -> str:
        x = float(lam[i])
        if x == 1.0:
            return f"λ = 1 (A, {name_a})"
        if x == 0.0:
            return f"λ = 0 (B, {name_b} aligned to A by {method}/{group})"
        return f"λ = {x:.6g} (between {name_a} and {name_b}, {method}/{group})"

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        nonlocal ckpt_a, ckpt_b
        t1 = time.perf_counter()
        tell(progress, "match", 0)
        sub = within(progress, 0.0, 0.5)
        if r.store_matching:
            al = align(ckpt_a, ckpt_b, method, group, seed=r.seed, options=options, data=data,
                       context=RunContext(device, cache, sub))  # fmt: skip
        else:
            # endpoints loaded here and needed only as processed: weight matching may empty
            # them as it goes (one processed copy of each model instead of two of each)
            consume = coordinates.unfold is None and not any(
                isinstance(x, Checkpoint) for x in (r.a, r.b)
            )
            al = _match(ckpt_a, ckpt_b, method, group, r.seed, device, options, data, sub,
                        consume)  # fmt: skip
        info = al.info
        meta: dict[str, Any] = {
            "function_check": info["function_check"],
            "function_check_a": info.get("function_check_a"),
            "matching": {"seconds": info["seconds"], "rounds": info["rounds"],
                         "objective": info["objective"],
                         "kinds": sorted(set(info["kinds"].values())),
                         "det_flips": info["det_flips"]},
        }  # fmt: skip
        cfg, pa, pb = al.cfg, al.params_a, al.params_b
        if coordinates.unfold is not None:
            meta["checks_unfolded"] = unfolded_checks(coordinates, ckpt_a, ckpt_b, al)
            cfg, pa, pb = coordinates.unfold(ckpt_a, ckpt_b, al)
        # only the processed A and the aligned B are needed from here on: a large pair holds
        # two copies of the weights, not four
        del al
        ckpt_a = ckpt_b = None
        if r.dtype != "float32":
            pa = {k: v.to(DTYPES[r.dtype]) for k, v in pa.items()}
            pb = {k: v.to(DTYPES[r.dtype]) for k, v in pb.items()}
        scale = None
        if r.calibrate:
            tell(progress, "calibrate the temperature at every λ", 0.5)
            calib = calibration_split(data)
            weights = torch.stack([lam, 1.0 - lam], dim=1)
            scale = calibrate_mixtures(cfg, [pa, pb], weights, calib.inputs, calib.targets,
                                       device=device)  # fmt: skip
            meta["temperatures"] = scale.tolist()
        tell(progress, f"load the {split} split", 0.5)
        ev = data.evaluation(split)
        opts = data.eval_options(cfg, ev.inputs)
        loss, acc = evaluate_path(cfg, pa, pb, ev.inputs, ev.targets, lam, device=device,
                                  progress=within(progress, 0.5, 1.0), scale=scale,
                                  **opts)  # fmt: skip
        check_finite_loss(loss, where, split)  # refused, and nothing is stored
        meta["curve"] = barrier_from_curve(lam, loss, acc).to_dict()
        size = opts.get("batch_size")
        meta.update({
            "windows": len(ev),
            "batches_per_lambda": -(-len(ev) // size) if size else None,
            "compute_seconds": round(time.perf_counter() - t1, 4),
            "compute_peak_rss_mb": round(peak_rss_mb(), 1),
        })  # fmt: skip
        return {}, meta

    entry, hit = cache.get_or_compute("barrier", inputs, compute)
    tell(progress, "done", 1)
    return BarrierRun(r, (name_a, name_b), coordinates, cfg_a, meta_a, n_params, data,
                      entry.meta, hit, device, time.perf_counter() - t0, entry.key)  # fmt: skip


@threaded
def barrier(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "perm",
    *,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
    **request: Any,
) -> dict[str, Any]:
    """Loss and accuracy along θ(λ) = λ·θ_A + (1−λ)·π(θ_B) between two seeds of a zoo model
    (or members of a family), λ = 1 is A (docs/design.md §1): :func:`measure_barrier` of
    :func:`seeds_request`, as :meth:`BarrierRun.to_seeds_dict`. ``request``: the rest of
    :class:`BarrierRequest` (``points``, ``split``, ``options`` — the matching method's
    settings, e.g. learned matching's ``steps`` —, ``coordinates``, ``space``, ``dtype``)."""
    req = seeds_request(model, seeds, method, group, **request)
    return measure_barrier(req, device=device, cache=cache, progress=progress).to_seeds_dict()
