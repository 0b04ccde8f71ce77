"""The one barrier pipeline: :func:`measure_barrier` of a :class:`BarrierRequest`
(:mod:`.request`) and its result, :class:`BarrierRun`.

Every result is stored in the disk cache keyed by the weight digests of the checkpoints
involved, the method, group and parameters, the data and the version of the algorithm, so a
second request (from either front end) is served from disk. Two endpoints (each a
:class:`~landscape.sources.Source` or a loaded checkpoint), checked when the request is made, are
loaded, aligned (:mod:`.alignment`), written in the request's coordinates (:mod:`.coordinates`)
and evaluated on A's data (:func:`landscape.sources.data_of`), and the whole measurement is
cached as one entry keyed by :meth:`BarrierRequest.key`. ``landscape barrier`` (zoo seeds and
family members: the convenience :func:`barrier`), ``table``, ``controls``, ``matrix`` and
``pair-barrier`` (checkpoint paths, :mod:`landscape.experiments.barriers.pairs`) all run through
it; the result stays a :class:`BarrierRun` until ``to_dict()``, whose keys follow
docs/design.md §5. Devices arrive resolved (``landscape.device.resolve_device`` at the CLI and
the app).
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import _align, _match
from landscape.experiments.barriers.coordinates import PROCESSED, Coordinates, unfolded_checks
from landscape.experiments.barriers.endpoints import Endpoint
from landscape.experiments.barriers.request import (
    DTYPES,
    BarrierRequest,
    calibration_split,
    seeds_request,
)
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.context import RunContext
from landscape.experiments.evaluation import (
    EvalOptions,
    calibrate_mixtures,
    check_finite_loss,
    evaluate_mixtures,
    path_weights,
)
from landscape.fields import Fields
from landscape.matching import function_warnings, method_of, options_key
from landscape.models import ModelConfig
from landscape.models.circuits import check_circuit_form
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell, within
from landscape.sources import Data, Source, check_same_architecture, data_of, label
from landscape.store.cache import Cache, digest_tensors
from landscape.threads import threaded

# the keys of a measured line (:meth:`landscape.experiments.basins.BarrierCurve.to_dict`), which
# every result of a line carries
CURVE = ("lambdas", "loss", "accuracy", "barrier_loss", "barrier_accuracy", "lambda_peak_loss",
         "lambda_peak_accuracy", "endpoint_loss", "endpoint_accuracy")  # fmt: skip
# What a barrier result holds (landscape.fields): what :meth:`BarrierRun.to_dict` and
# :meth:`BarrierRun.to_seeds_dict` write, and what the figures, the pages and the command's
# summary read. ``method``, ``group``, ``split``, ``space`` and ``aligns`` are always written,
# ``model`` and ``seeds`` by :meth:`~BarrierRun.to_seeds_dict`, yet all are optional: the figures
# also draw curves that name no pair or method (an ablation cell's, a bare curve), read with
# these defaults. ``matching_rounds``,
# ``matching_objective`` and ``cache_key`` are absent from results written before the pipeline
# recorded them (the shipped Home curves); ``coordinates`` only when not the processed ones,
# ``calibrated`` and ``temperatures`` only for a calibrated line, ``options`` only when some
# matching setting is not the library's default.
BARRIER = Fields(
    "barrier result",
    (*CURVE, "function_check", "function_check_a", "function_ok", "warnings", "matching_seconds",
     "seconds", "cached", "device"),
    {"model": "", "seeds": ("", ""), "method": "", "group": "", "split": "", "space": "weights",
     "aligns": None, "matching_rounds": None, "matching_objective": None, "cache_key": "",
     "coordinates": PROCESSED.name, "calibrated": False, "temperatures": None, "options": None},
)  # fmt: skip


def health(checks: dict[str, float | None]) -> dict[str, Any]:
    """``function_ok`` and ``warnings`` of a result from its function checks (what was checked
    → max |Δlogits|): a check that is NaN or above the tolerance is a warning, never dropped."""
    warnings = function_warnings(checks)
    return {"function_ok": not warnings, "warnings": warnings}


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**20 if sys.platform == "darwin" else 2**10)


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
    def aligns(self) -> bool:
        """Whether its method moves B at all (the registry's ``MatchingMethod.aligns``; naive
        does not)."""
        return method_of(self.method).aligns

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
        """The measurement as JSON: method, whether it ``aligns`` (:attr:`aligns`, derived here
        from the registry, never stored: no cache entry or key holds it), group, split, merge
        space, the curve, the function checks, ``function_ok``, ``warnings``, times, the
        matching's rounds and final objective, ``cached``, ``cache_key`` (the barrier entry's)
        and ``device``."""
        e = self.entry
        out = {
            "method": self.method,
            "aligns": self.aligns,
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
    # each endpoint's weights hashed once for the request: its key and its matching's
    digests = (digest_tensors(ckpt_a.params), digest_tensors(ckpt_b.params))
    inputs = r.key(ckpt_a, ckpt_b, data, digests)
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
            al = _align(ckpt_a, ckpt_b, method, group, seed=r.seed, options=options, data=data,
                        context=RunContext(device, cache, sub), digests=digests)  # fmt: skip
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
        scale, weights = None, path_weights(lam)
        if r.calibrate:
            tell(progress, "calibrate the temperature at every λ", 0.5)
            calib = calibration_split(data)
            scale = calibrate_mixtures(cfg, [pa, pb], weights, calib.inputs, calib.targets,
                                       device=device)  # fmt: skip
            meta["temperatures"] = scale.tolist()
        tell(progress, f"load the {split} split", 0.5)
        ev = data.evaluation(split)
        opts = data.eval_options(cfg, ev.inputs)
        # the line's points, each at its own temperature when calibrated (evaluate_path's pass)
        heard = RunContext(device, progress=within(progress, 0.5, 1.0))
        loss, acc = evaluate_mixtures(cfg, [pa, pb], weights, ev.inputs, ev.targets,
                                      EvalOptions(**opts), scale=scale, context=heard)  # fmt: skip
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
