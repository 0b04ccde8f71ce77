"""Curvature along a path: the top Hessian eigenvalues and the Hessian's trace at points of the
straight line θ(λ) = λ·θ_A + (1−λ)·π(θ_B) between two checkpoints, naive and aligned
(docs/design.md §1; λ = 1 is A).

The loss is the mean cross-entropy over every prediction of a fixed batch: ``batch`` rows of A's
split (windows of a text, images, feature vectors) drawn without replacement by ``seed``. Its
Hessian is never formed: the numerics, Hessian-vector products by double backward, Lanczos for
the top eigenvalues and Hutchinson for the trace, are :mod:`landscape.experiments.hessian`'s
(re-exported here). Per block (on request): the top eigenvalue of the diagonal block H_bb of one
transformer block's parameters (and one for those outside every block: embeddings, final norm,
readout).

Memory is bounded by the budget (``landscape.budget.check_hessian``): ARPACK's basis and the
parameters' copies come first, and the batch runs in chunks of rows whose gradient graph fits
what is left, so a language model's vocabulary (its logits, per row and position) sets how many
rows a chunk holds. Each point's products run on ``device`` (the parameters and the batch moved
there), Lanczos' vectors stay float64 on the CPU.

Double backward rather than forward-over-reverse (``torch.func.jvp`` of ``grad``): on
gpt-shakespeare-d128 (16 windows, one thread) it took about the same time per product and half
the memory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import torch

from landscape.budget import HESSIAN_ADVICE, check_hessian, check_points, check_work
from landscape.data import Split
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import ALGO_VERSION, align
from landscape.experiments.barriers.endpoints import Endpoint, check_method, check_pair, check_split
from landscape.experiments.barriers.pipeline import health, peak_rss_mb
from landscape.experiments.context import RunContext
from landscape.experiments.hessian import (
    DTYPES,
    LANCZOS_TOL,
    LANCZOS_VECTORS,
    HessianProducts,
    hutchinson_trace,
    parameter_blocks,
    positions,
    row_bytes,
    top_eigenvalues,
)
from landscape.fields import Fields
from landscape.matching import aligns, method_of, options_key, worst_check
from landscape.models import ModelConfig, Params, count_params
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell, within
from landscape.sources import Data, Source, data_of, label
from landscape.store.cache import Cache, digest_tensors
from landscape.threads import threaded

__all__ = [
    "CURVATURE_VERSION",
    "DEFAULT_BATCH",
    "DTYPES",
    "LANCZOS_TOL",
    "LANCZOS_VECTORS",
    "MAX_PRODUCTS",
    "CurvatureOptions",
    "CurvatureRequest",
    "HessianProducts",
    "check_curvature",
    "check_hessian_memory",
    "expected_products",
    "curvature",
    "curvature_along",
    "curvature_batch",
    "hessian_at",
    "hutchinson_trace",
    "measure_curvature",
    "parameter_blocks",
    "positions",
    "row_bytes",
    "top_eigenvalues",
]

CURVATURE_VERSION = 1  # bump when the batch, the products, Lanczos or Hutchinson change
# rows of the split in the default batch: 16 windows of 128 characters are 2,048 predictions
DEFAULT_BATCH = {"rows": 512, "windows": 16}
# Hessian-vector products a request may expect without --yes (``landscape.budget.check_work``):
# a tenth of a second to a second each for the zoo's language models on one thread, so hours.
MAX_PRODUCTS = 20_000


# ---------------------------------------------------------------- the request


@dataclass(frozen=True)
class CurvatureOptions:
    """What is measured at each point of a line.

    ``top_k`` eigenvalues by Lanczos; ``points`` values of λ from 0 to 1 (3: the endpoints and
    the midpoint); ``probes`` Rademacher probes of Hutchinson's trace (0: no trace);
    ``per_block``: also each block's top eigenvalue; ``batch`` rows of A's ``split`` (None: 16
    windows of a text, 512 rows else, :data:`DEFAULT_BATCH`), drawn by ``seed``, which also
    seeds Lanczos' start and the probes; products in ``dtype`` (float32 or float64).
    """

    top_k: int = 5
    points: int = 3
    probes: int = 16
    per_block: bool = False
    batch: int | None = None
    split: str = "train"
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise LandscapeError("--top-k must be at least 1")
        if self.points < 2:
            raise LandscapeError("--points must be at least 2 (the endpoints)")
        check_points(self.points)
        if self.probes < 0:
            raise LandscapeError("--probes must be 0 (no trace) or more")
        if self.batch is not None and self.batch < 1:
            raise LandscapeError("--batch must be at least 1 row")
        check_split(self.split)
        if self.dtype not in DTYPES:
            raise LandscapeError(
                f"unknown dtype {self.dtype!r}; expected one of {', '.join(DTYPES)}"
            )

    def lambdas(self) -> torch.Tensor:
        return torch.linspace(0.0, 1.0, self.points, dtype=torch.float64)


@dataclass(frozen=True)
class CurvatureRequest:
    """Curvature along the line between ``a`` and ``b`` (each a :class:`Source` or a loaded
    checkpoint), naive and aligned by ``method``/``group`` (the alignments of ``landscape
    barrier``; ``matching``: the method's settings, a dict or its options dataclass), measured
    as ``options`` say. Every check that needs nothing loaded is done when it is made."""

    a: Endpoint
    b: Endpoint
    method: str = "weight"
    group: str = "perm"
    matching: Any = None
    options: CurvatureOptions = field(default_factory=CurvatureOptions)

    def __post_init__(self) -> None:
        check_method(self.method, self.group)
        if isinstance(self.options, dict):
            object.__setattr__(self, "options", CurvatureOptions(**self.options))
        object.__setattr__(self, "matching", method_of(self.method).settings(self.matching))

    @property
    def methods(self) -> tuple[str, ...]:
        """The lines measured: naive, and the request's method when it aligns."""
        return ("naive", self.method) if aligns(self.method) else ("naive",)


def curvature_batch(data: Data, split: str, rows: int | None, seed: int) -> Split:
    """The fixed batch: ``rows`` rows of ``split`` (None: :data:`DEFAULT_BATCH`) drawn without
    replacement by ``seed``, in the split's order; the whole split when it has no more."""
    s = data.split(split)
    windows = s.targets.ndim == 2
    rows = rows or DEFAULT_BATCH["windows" if windows else "rows"]
    if rows >= len(s):
        return s
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(s), generator=gen)[:rows].sort().values
    return Split(s.inputs[pick], s.targets[pick])


def _chunk_rows(cfg: ModelConfig, n_params: int, options: CurvatureOptions, length: int,
                rows: int, advice: str = HESSIAN_ADVICE) -> int:  # fmt: skip
    """Rows per chunk, at most ``rows``, within the memory budget (refused when not even one row
    of ``length`` positions fits, with ``advice``)."""
    itemsize = torch.empty((), dtype=DTYPES[options.dtype]).element_size()
    vectors = max(2 * options.top_k + 1, LANCZOS_VECTORS)
    return check_hessian(n_params, vectors, itemsize, row_bytes(cfg, length, itemsize), rows,
                         advice)  # fmt: skip


def check_hessian_memory(cfg: ModelConfig, options: CurvatureOptions,
                         advice: str = HESSIAN_ADVICE) -> None:  # fmt: skip
    """Refuse in one line, before anything is loaded, a Hessian of a model of ``cfg`` whose
    Lanczos vectors (``options.top_k``), parameter copies (``options.dtype``) and one row's
    gradient graph (a row of the model's context) exceed the memory budget
    (``landscape.budget.check_hessian``; the line ends with ``advice``)."""
    _chunk_rows(cfg, count_params(cfg), options, positions(cfg), 1, advice)


def hessian_at(cfg: ModelConfig, params: Params, batch: Split, options: CurvatureOptions, *,
               device: torch.device = CPU, advice: str = HESSIAN_ADVICE
               ) -> HessianProducts:  # fmt: skip
    """The Hessian-vector products of the mean loss of ``params`` on ``batch``, in
    ``options.dtype`` on ``device``, the batch in chunks of rows that fit the memory budget with
    Lanczos' ``options.top_k`` vectors (refused in one line, ending with ``advice``, when not
    even one row fits)."""
    n_params = sum(v.numel() for v in params.values())
    rows = _chunk_rows(cfg, n_params, options, positions(cfg, batch.inputs), len(batch), advice)
    dtype = DTYPES[options.dtype]
    point = {k: v.to(device=device, dtype=dtype) for k, v in params.items()}
    return HessianProducts(cfg, point, batch.inputs, batch.targets, rows)


def expected_products(cfg: ModelConfig, options: CurvatureOptions) -> int:
    """Hessian-vector products a line is expected to take: per point about three Lanczos bases
    for the top k (:data:`LANCZOS_VECTORS` or 2k + 1 each), the probes, and one basis for each
    block and the parameters outside them."""
    basis = max(2 * options.top_k + 1, LANCZOS_VECTORS)
    blocks = (cfg.n_layers + 1) * (LANCZOS_VECTORS + 1) if options.per_block else 0
    return options.points * (3 * basis + options.probes + blocks)


def check_curvature(cfg: ModelConfig, options: CurvatureOptions) -> None:
    """Refuse, before anything is loaded, a request for a model of ``cfg`` whose Lanczos
    vectors, parameter copies and one row's gradient graph (a row of the model's context) exceed
    the memory budget, or whose two lines expect more than :data:`MAX_PRODUCTS`
    Hessian-vector products without long work asked for (one line each;
    :func:`measure_curvature` checks the memory again with the batch's rows)."""
    check_hessian_memory(cfg, options)
    n = 2 * expected_products(cfg, options)
    check_work(f"--points {options.points}, --top-k {options.top_k}, --probes {options.probes}"
               f"{' and --per-block' if options.per_block else ''} ask for about {n} "
               "Hessian-vector products", n, MAX_PRODUCTS,
               "each about three passes of the model over the batch")  # fmt: skip


def curvature_along(cfg: ModelConfig, params_a: Params, params_b: Params, batch: Split,
                    options: CurvatureOptions, *, device: torch.device = CPU,
                    progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    """The curvature at each λ of ``options.lambdas()`` on θ(λ) = λ·A + (1−λ)·B (mixed in
    float64, then cast to ``options.dtype``): per point the batch's ``loss`` and
    ``gradient_norm``, ``top_eigenvalues`` (largest first) and ``top_eigenvalue``, ``trace`` and
    ``trace_se`` (None without probes), ``blocks`` (block → top eigenvalue per point, with
    ``per_block``), whether Lanczos ``converged``, the ``hessian_vector_products`` made and
    the ``point_seconds``; and the ``chunks`` and ``chunk_rows`` the batch ran in."""
    dtype = DTYPES[options.dtype]
    n_params = sum(v.numel() for v in params_a.values())
    rows = _chunk_rows(cfg, n_params, options, positions(cfg, batch.inputs), len(batch))
    tol = LANCZOS_TOL[options.dtype]
    lam = options.lambdas()
    blocks = parameter_blocks(list(params_a)) if options.per_block else {}
    out: dict[str, Any] = {key: [] for key in (
        "loss", "gradient_norm", "top_eigenvalues", "top_eigenvalue", "trace", "trace_se",
        "converged", "hessian_vector_products", "point_seconds")}  # fmt: skip
    out["blocks"] = {name: [] for name in blocks}
    for i, x in enumerate(lam.tolist()):
        t0 = time.perf_counter()
        tell(progress, f"λ = {x:.3g}", i / len(lam))
        point = {k: (x * params_a[k].to(torch.float64) + (1 - x) * params_b[k].to(torch.float64))
                 .to(device=device, dtype=dtype) for k in params_a}  # fmt: skip
        h = HessianProducts(cfg, point, batch.inputs, batch.targets, rows)
        del point
        n = h.size()
        values, converged = top_eigenvalues(h.matvec(), n, options.top_k, seed=options.seed,
                                            tol=tol)  # fmt: skip
        trace = se = None
        if options.probes:
            trace, se = hutchinson_trace(h.matvec(), n, options.probes, seed=options.seed)
        for name, names in blocks.items():
            top, ok = top_eigenvalues(h.matvec(names), h.size(names), 1, seed=options.seed,
                                      tol=tol)  # fmt: skip
            out["blocks"][name].append(top[0] if top else math.nan)
            converged = converged and ok
        for key, value in (("loss", h.loss), ("gradient_norm", h.gradient_norm),
                           ("top_eigenvalues", values),
                           ("top_eigenvalue", values[0] if values else math.nan),
                           ("trace", trace), ("trace_se", se), ("converged", converged),
                           ("hessian_vector_products", h.products),
                           ("point_seconds", round(time.perf_counter() - t0, 4))):  # fmt: skip
            out[key].append(value)
        del h
    tell(progress, "done", 1)
    return {"lambdas": lam.tolist(), **out, "chunks": -(-len(batch) // rows), "chunk_rows": rows}


# ---------------------------------------------------------------- the result's fields

# What a curvature result holds (landscape.fields), as :func:`measure_curvature` and
# :func:`curvature` write it and the figure, the page and the command's summary read it: the
# request, its options (CurvatureOptions' fields; ``batch`` in words), one line per alignment.
CURVATURE = Fields("curvature result",
                   ("method", "group", *(f.name for f in fields(CurvatureOptions)
                                         if f.name != "batch"),
                    "batch", "parameters", "lines", "function_check", "function_check_a",
                    "function_ok", "warnings", "seconds", "cached", "device"),
                   {"model": "", "seeds": ("", "")})  # fmt: skip
# ``batch`` of a result: how large the batch was (:func:`_batch_facts`)
CURVATURE_BATCH = Fields("curvature batch", ("rows", "unit", "predictions"))
# one alignment's line: per λ (lists) the batch's loss, the curvature and what it cost
CURVATURE_LINE = Fields("curvature line",
                        ("method", "group", "lambdas", "loss", "gradient_norm",
                         "top_eigenvalues", "top_eigenvalue", "trace", "trace_se",
                         "converged", "hessian_vector_products", "point_seconds", "chunks",
                         "chunk_rows", "function_check", "function_check_a", "compute_seconds",
                         "compute_peak_rss_mb"),
                        {"blocks": {}})  # fmt: skip


# ---------------------------------------------------------------- the cached experiment


def _open(x: Endpoint, device: torch.device, cache: Cache) -> tuple[Checkpoint, str]:
    if isinstance(x, Checkpoint):
        return x, label(x)
    ckpt = x.load(device, cache)
    return ckpt, x.label(ckpt)


def _batch_facts(batch: Split) -> dict[str, Any]:
    """How large the batch is, in words a result says: rows, and predictions (tokens)."""
    windows = batch.targets.ndim == 2
    return {"rows": len(batch), "unit": "windows" if windows else "examples",
            "predictions": int(batch.targets.numel())}  # fmt: skip


def measure_curvature(request: CurvatureRequest, *, device: torch.device = CPU,
                      cache: Cache | None = None, progress: Progress | None = None
                      ) -> dict[str, Any]:  # fmt: skip
    """Curvature along the line, naive and aligned (:meth:`CurvatureRequest.methods`): load,
    align B to A (the cached matching of ``landscape barrier``), check the memory budget, then
    :func:`curvature_along` on the processed A and the (aligned) B. One cache entry per line
    (kind ``curvature``), keyed by both endpoints' weights, A's configuration and data, the
    method, group and settings not at their defaults, and the options. Returns the result of
    ``landscape curvature``: ``lines`` (one per method) with the function checks, ``batch``
    (rows and predictions), times and ``cached``."""
    r, o = request, request.options
    t0 = time.perf_counter()
    cache = cache or Cache()
    tell(progress, "load", 0)
    ckpt_a, name_a = _open(r.a, device, cache)
    ckpt_b, name_b = _open(r.b, device, cache)
    check_pair(ckpt_a, ckpt_b)
    data = r.a.data_of(ckpt_a) if isinstance(r.a, Source) else data_of(ckpt_a)
    batch = curvature_batch(data, o.split, o.batch, o.seed)
    n_params = sum(v.numel() for v in ckpt_a.params.values())
    check_curvature(ckpt_a.cfg, o)  # refused before any matching
    _chunk_rows(ckpt_a.cfg, n_params, o, positions(ckpt_a.cfg, batch.inputs), len(batch))
    lines, hits = [], []
    for k, method in enumerate(r.methods):
        share = within(progress, k / len(r.methods), (k + 1) / len(r.methods), f"{method}: ")
        settings = method_of(method).settings(
            {**data.match_options(ckpt_a.cfg, method),
             **(options_key(r.matching) if method == r.method else {})})  # fmt: skip
        inputs = {
            "a": digest_tensors(ckpt_a.params),
            "b": digest_tensors(ckpt_b.params),
            "cfg": ckpt_a.cfg.to_dict(),
            "method": method,
            "group": r.group,
            "matching": options_key(settings),
            "options": asdict(replace(o, batch=len(batch))),
            "data": data.key,
            "version": CURVATURE_VERSION,
            "matching_version": ALGO_VERSION,
        }

        def compute(method: str = method, settings: Any = settings,
                    share: Progress | None = share) -> tuple[dict, dict[str, Any]]:  # fmt: skip
            t1 = time.perf_counter()
            tell(share, "match", 0)
            al = align(ckpt_a, ckpt_b, method, r.group, options=settings, data=data,
                       context=RunContext(device, cache, within(share, 0.0, 0.2)))  # fmt: skip
            line = curvature_along(al.cfg, al.params_a, al.params_b, batch, o, device=device,
                                   progress=within(share, 0.2, 1.0))  # fmt: skip
            return {}, {
                "method": method, "group": r.group, **line,
                "function_check": al.info["function_check"],
                "function_check_a": al.info.get("function_check_a"),
                "compute_seconds": round(time.perf_counter() - t1, 4),
                "compute_peak_rss_mb": round(peak_rss_mb(), 1),
            }  # fmt: skip

        entry, hit = cache.get_or_compute("curvature", inputs, compute)
        lines.append(dict(entry.meta))
        hits.append(hit)
    tell(progress, "done", 1)
    checks = {}
    for line in lines:
        if aligns(line["method"]):
            checks[f"{name_b} aligned to {name_a} ({line['method']}/{r.group})"] = (
                line["function_check"])
        checks[f"{name_a} processed for {r.group} ({line['method']})"] = line["function_check_a"]
    aligned = lines[-1]
    return {
        "method": r.method,
        "group": r.group,
        **{k: v for k, v in asdict(o).items() if k not in ("batch", "points")},
        "points": o.points,
        "batch": _batch_facts(batch),
        "parameters": n_params,
        "lines": lines,
        "function_check": aligned["function_check"],
        "function_check_a": worst_check([x["function_check_a"] for x in lines]),
        **health(checks),
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": all(hits),
        "device": str(device),
    }


@threaded
def curvature(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "perm",
    *,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Curvature along the line between two seeds of a zoo model (or members of a family), naive
    and aligned by ``method``/``group``: :func:`measure_curvature`, with ``model`` and
    ``seeds``. ``options``: the fields of :class:`CurvatureOptions` (``top_k``, ``points``,
    ``probes``, ``per_block``, ``batch``, ``split``, ``dtype``, ``seed``) and ``matching``, the
    method's settings (:class:`CurvatureRequest`)."""
    if len(seeds) != 2:
        raise LandscapeError("curvature needs two seeds: --seeds A B")
    matching = options.pop("matching", None)
    req = CurvatureRequest(Source(model, seeds[0]), Source(model, seeds[1]), method, group,
                           matching, CurvatureOptions(**options))  # fmt: skip
    out = measure_curvature(req, device=device, cache=cache, progress=progress)
    return {"model": model, "seeds": list(seeds), **out}
