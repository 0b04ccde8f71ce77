"""Curved low-loss paths between two endpoints: a Bézier curve or a polygonal chain whose control
points are trained on the training split with the endpoints fixed, its barrier beside the
straight line's, naive and aligned (``landscape curve``, the Interpolation page's "Curved path";
docs/design.md §1).

**The curves.** With t = 1 − λ (λ = 1 is A, as on the line) and the points P₀ = A,
P₁ … P_n = θ₁ … θ_n (the ``bends``), P_{n+1} = π(B):

- ``bezier``: φ(t) = Σ_j C(n+1, j)·t^j·(1−t)^{n+1−j}·P_j, one bend giving the quadratic
  φ(t) = (1−t)²A + 2t(1−t)θ + t²B;
- ``chain``: the polygon A → θ₁ → … → θ_n → B, bend j at t = j/(n+1), linear in between.

Each control point starts on the line at its own t, θ_j = (1 − t_j)·A + t_j·π(B) with
t_j = j/(n+1) (the midpoint for one bend). Both kinds reproduce a straight line from control
points on it, so an untrained curve (``steps=0``) *is* the straight line, up to rounding.

**Training** (the standard recipe): every step draws t uniformly and one minibatch of the
training split (the checkpoint's own sampler and batch size), and lowers the cross-entropy of
φ(t) by Adam on the control points alone, at the recipe's learning rate under a cosine decay to
0; the endpoints never move. Every curve point is a mixture of the n + 2 points, so the curve is
evaluated exactly as the line is (:func:`landscape.experiments.evaluation.evaluate_mixtures`, in
chunks on the device) on the test split at the line's grid of λ, and its barriers are taken
against the same chord between A and B (docs/design.md §1).

Every (pair, alignment, curve recipe) is one cache entry (kind ``"curve"``) holding the trained
control points; the line beside it is the barrier pipeline's own entry
(:func:`landscape.experiments.barriers.pipeline.measure_barrier`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import torch
import torch.nn.functional as F

from landscape.budget import MAX_STEPS
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import align
from landscape.experiments.barriers.pipeline import health, measure_barrier
from landscape.experiments.barriers.request import BarrierRequest, refuse_unread, seeds_of
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import EvalOptions, check_finite_loss, evaluate_mixtures
from landscape.fields import Fields
from landscape.matching import aligns, given_options, matching_key, options_key
from landscape.models import ModelConfig, Params, forward
from landscape.progress import tell, within
from landscape.sources import Data, Source
from landscape.store.cache import Cache, digest_tensors

Kind = Literal["bezier", "chain"]
KINDS: tuple[Kind, ...] = ("bezier", "chain")
STEPS = 500  # training steps of the control points
BENDS = 1
MAX_BENDS = 8
POINTS = 25  # the line's grid (landscape barrier's default)
CURVE_VERSION = 1  # bump when a curve is trained or evaluated differently
LOSS_RECORDS = 50  # training losses kept per curve (means over equal stretches of steps)


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise LandscapeError(f"unknown curve kind {kind!r}; expected one of {', '.join(KINDS)}")


def check_bends(bends: int) -> None:
    if not 1 <= bends <= MAX_BENDS:
        raise LandscapeError(f"--bends must be between 1 and {MAX_BENDS}, got {bends}")


def curve_weights(kind: str, bends: int, lambdas: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """The weights of (A, θ₁, …, θ_n, B) at every λ: [K, n + 2] float64, each row summing to 1.

    λ = 1 is A and λ = 0 is B exactly (one weight 1, the rest 0), as on the line (module
    docstring: t = 1 − λ; Bernstein weights for ``bezier``, hat functions on the knots
    j/(n+1) for ``chain``).
    """
    check_kind(kind)
    t = 1.0 - torch.as_tensor(lambdas, dtype=torch.float64).reshape(-1, 1)
    n = bends + 1  # the curve's degree, or the chain's number of pieces
    j = torch.arange(n + 1, dtype=torch.float64)
    if kind == "bezier":
        binom = torch.tensor([math.comb(n, int(i)) for i in j], dtype=torch.float64)
        return binom * t**j * (1.0 - t) ** (n - j)
    # the hat of knot j/n: 1 there, falling linearly to 0 at the neighbouring knots
    return (1.0 - (n * t - j).abs()).clamp(min=0.0)


def line_controls(params_a: Params, params_b: Params, bends: int) -> list[Params]:
    """Control points on the straight line: θ_j = (1 − t_j)·A + t_j·B, t_j = j/(n+1)."""
    n = bends + 1
    return [{k: (1 - j / n) * params_a[k] + (j / n) * params_b[k] for k in params_a}
            for j in range(1, n)]  # fmt: skip


def _points_at(weights: Sequence[float], points: Sequence[Params]) -> Params:
    """``Σ_j weights[j]·points[j]``, differentiable in the points (one curve point)."""
    out = {}
    for k in points[0]:
        acc = weights[0] * points[0][k]
        for w, p in zip(weights[1:], points[1:], strict=True):
            if w != 0.0:
                acc = acc + w * p[k]
        out[k] = acc
    return out


@dataclass(frozen=True)
class CurveOptions:
    """How a curve is drawn and trained: its ``kind`` (``bezier`` or ``chain``) with ``bends``
    control points, trained ``steps`` steps at learning rate ``lr`` on minibatches of
    ``batch_size`` rows (None: the checkpoint's recipe, ``data.lr`` and ``data.batch_size``);
    ``train_seed`` draws t and the minibatches. ``steps=0``: the control points on the line."""

    kind: str = "bezier"
    bends: int = BENDS
    steps: int = STEPS
    lr: float | None = None
    batch_size: int | None = None
    train_seed: int = 0


def train_controls(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    data: Data,
    options: CurveOptions = CurveOptions(),
    *,
    context: RunContext = RUN,
) -> tuple[list[Params], list[float]]:
    """Control points of an ``options.kind`` curve from A to B, trained on ``data``'s training
    split with both endpoints fixed (module docstring), and the mean training loss over each of
    up to ``LOSS_RECORDS`` equal stretches of the steps (:class:`CurveOptions`), on the
    context's device. Returned on the CPU, float32."""
    kind, bends, steps = options.kind, options.bends, options.steps
    lr, batch_size, seed = options.lr, options.batch_size, options.train_seed
    device, progress = context.device, context.progress
    check_kind(kind)
    lr = data.lr if lr is None else lr
    batch_size = data.batch_size if batch_size is None else batch_size
    dev = torch.device(device)
    a = {k: v.detach().to(dev, torch.float32) for k, v in params_a.items()}
    b = {k: v.detach().to(dev, torch.float32) for k, v in params_b.items()}
    controls = [{k: v.clone().requires_grad_(True) for k, v in c.items()}
                for c in line_controls(a, b, bends)]  # fmt: skip
    losses: list[float] = []
    if steps > 0:
        train = data.split("train")
        sample = data.sampler(cfg, train)
        gen = torch.Generator().manual_seed(seed)
        opt = torch.optim.Adam([v for c in controls for v in c.values()], lr=lr)
        # cosine decay to 0, as learned matching's: the last steps only polish
        schedule = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps))
        )
        stretch = max(1, -(-steps // LOSS_RECORDS))
        running, count = 0.0, 0
        for step in range(steps):
            lam = float(torch.rand((), generator=gen, dtype=torch.float64))
            w = curve_weights(kind, bends, [lam])[0].tolist()
            x, y = sample(gen, batch_size)
            x = x.to(dev, torch.float32) if x.is_floating_point() else x.to(dev)
            logits = forward(cfg, _points_at(w, [a, *controls, b]), x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.to(dev).reshape(-1))
            value = float(loss.detach())
            if not math.isfinite(value):
                raise LandscapeError(
                    f"the curve's training loss is {value} at step {step} (λ = {lam:.3g}): "
                    "lower --lr"
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
            running, count = running + value, count + 1
            if count == stretch or step == steps - 1:
                losses.append(running / count)
                running, count = 0.0, 0
            tell(progress, "train the curve", step + 1, steps)
    return [{k: v.detach().cpu() for k, v in c.items()} for c in controls], losses


@dataclass
class CurveResult:
    """``landscape curve``: for one pair, per alignment (naive, then ``method``/``group``) the
    straight ``line`` and the trained ``curve`` at the line's λ (loss, accuracy, barriers
    against the chord between A and B), the curve's ``training`` losses, the function checks
    and cache keys; ``rows``, one per path and alignment, with its two barriers."""

    model: str
    seeds: list[int]
    method: str
    group: str
    kind: str
    bends: int
    steps: int
    lr: float
    batch_size: int
    train_seed: int
    split: str
    points: int
    lambdas: list[float]
    alignments: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    seconds: float
    function_ok: bool = True
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a curve result holds (landscape.fields): what :func:`curve` writes
# (:class:`CurveResult`), and what the figure, the tidy table, the page and the command's
# summary read.
CURVED = Fields("curve result",
                ("method", "group", "kind", "lr", "batch_size", "train_seed", "points",
                 "lambdas", "alignments", "rows", "seconds", "function_ok", "warnings"),
                # always written; a curve drawn from a record without them reads these
                {"split": "test", "model": "", "seeds": ("", ""), "bends": 1,
                 "steps": None})  # fmt: skip
# one of ``alignments``: naive, then the method's; its ``line`` and ``curve`` (CURVED_PATH),
# the curve's training, the function checks and the cache entries of the curve and the line
CURVED_ALIGNMENT = Fields("curve alignment",
                          ("method", "group", "line", "curve", "training_loss",
                           "training_seconds", "function_check", "function_ok", "warnings",
                           "cached", "cache_key", "line_cache_key"))  # fmt: skip
# the ``line`` or the ``curve`` of an alignment, at the line's λ (:func:`_barriers`)
CURVED_PATH = Fields("curve path",
                     ("loss", "accuracy", "barrier_loss", "barrier_accuracy", "lambda_peak_loss",
                      "lambda_peak_accuracy", "endpoint_loss", "endpoint_accuracy"))  # fmt: skip
# one of ``rows`` (:func:`curve_rows`)
CURVED_ROW = Fields("curve row",
                    ("alignment", "path", "loss barrier (nats)", "accuracy barrier (fraction)",
                     "max loss (nats)"))  # fmt: skip


def _barriers(c: dict[str, Any]) -> dict[str, Any]:
    keep = ("loss", "accuracy", "barrier_loss", "barrier_accuracy", "lambda_peak_loss",
            "lambda_peak_accuracy", "endpoint_loss", "endpoint_accuracy")  # fmt: skip
    return {k: c[k] for k in keep}


def curve_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The barriers of a :class:`CurveResult` as tidy records: per alignment, the line's and
    the curve's loss barrier (nats), accuracy barrier (fraction) and maximum loss."""
    rows = []
    for al in result["alignments"]:
        which = matching_key(al["method"], al["group"])
        for path, name in (("line", "straight line"), ("curve", result["kind"])):
            c = al[path]
            rows.append({"alignment": which, "path": name,
                         "loss barrier (nats)": c["barrier_loss"],
                         "accuracy barrier (fraction)": c["barrier_accuracy"],
                         "max loss (nats)": max(c["loss"])})  # fmt: skip
    return rows


@in_context
def curve(
    request: BarrierRequest,
    options: CurveOptions = CurveOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """:class:`CurveResult` of the request's endpoints, seeds A and B of one model: the curve of
    ``options`` trained between A and π(B) (module docstring) beside the straight line, for the
    naive pair and for B aligned by the request's method and group (the aligned pair of
    :func:`~.alignment.align`, the one the line is measured on), with its matching settings, at
    its ``points`` on its ``split``; the request's other fields stay at their defaults.
    Everything is checked before anything is loaded (the request when it was made)."""
    t0 = time.perf_counter()
    model, seeds = seeds_of(request)
    refuse_unread(request, "a curve", ("method", "group", "options", "points", "split"))
    method, group, points, split = request.method, request.group, request.points, request.split
    said_options = options_key(request.options)
    kind, bends, steps = options.kind, options.bends, options.steps
    lr, batch_size, train_seed = options.lr, options.batch_size, options.train_seed
    device, progress = context.device, context.progress
    check_kind(kind)
    check_bends(bends)
    if not 0 <= steps <= MAX_STEPS:
        raise LandscapeError(f"--steps must be between 0 and {MAX_STEPS}, got {steps}")
    if lr is not None and not (math.isfinite(lr) and lr > 0):
        raise LandscapeError(f"--lr must be a positive number, got {lr}")
    if batch_size is not None and batch_size < 1:
        raise LandscapeError(f"the batch size must be positive, got {batch_size}")
    cache = context.cache or Cache()
    tell(progress, "load", 0)
    src_a, src_b = Source(model, seeds[0]), Source(model, seeds[1])
    a, b = src_a.load(device, cache), src_b.load(device, cache)
    data = src_a.data_of(a)
    lr = data.lr if lr is None else float(lr)
    batch_size = data.batch_size if batch_size is None else int(batch_size)
    lam = torch.linspace(0, 1, points, dtype=torch.float64)
    weights = curve_weights(kind, bends, lam)
    alignments_asked = [("naive", group)] + ([(method, group)] if aligns(method) else [])
    out, warnings = [], []
    for k, (m, g) in enumerate(alignments_asked):
        lo, hi = k / len(alignments_asked), (k + 1) / len(alignments_asked)
        said = given_options(m, said_options if m == method else None)
        asked = BarrierRequest(a, b, m, g, options=said or None, points=points, split=split)
        line = measure_barrier(asked, device=device, cache=cache,
                               progress=within(progress, lo, lo + 0.2 * (hi - lo),
                                               f"{m}/{g} line: "))  # fmt: skip
        settings = asked.settings(a.cfg, data)
        inputs = {
            "a": digest_tensors(a.params), "b": digest_tensors(b.params),
            "cfg": a.cfg.to_dict(), "method": m, "group": g, "options": options_key(settings),
            "kind": kind, "bends": bends, "steps": steps, "lr": lr, "batch_size": batch_size,
            "train_seed": train_seed, "points": points, "split": split, "data": data.key,
            "version": CURVE_VERSION,
        }  # fmt: skip

        def compute(m: str = m, g: str = g, settings: Any = settings, lo: float = lo,
                    hi: float = hi) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:  # fmt: skip
            t1 = time.perf_counter()
            al = align(a, b, m, g, options=settings, data=data, context=RunContext(device, cache))
            trained_as = replace(options, lr=lr, batch_size=batch_size)
            controls, losses = train_controls(
                al.cfg, al.params_a, al.params_b, data, trained_as,
                context=RunContext(device, progress=within(
                    progress, lo + 0.2 * (hi - lo), lo + 0.8 * (hi - lo), f"{m}/{g} ")),
            )  # fmt: skip
            trained = time.perf_counter() - t1
            ev = data.evaluation(split)
            opts = data.eval_options(al.cfg, ev.inputs)
            ends = [al.params_a, *controls, al.params_b]
            loss, acc = evaluate_mixtures(
                al.cfg, ends, weights, ev.inputs, ev.targets, EvalOptions(**opts),
                context=RunContext(device, progress=within(progress, lo + 0.8 * (hi - lo), hi,
                                                           f"{m}/{g} curve: ")),
            )  # fmt: skip

            def where(i: int) -> str:
                return f"λ = {float(lam[i]):.6g} on the {kind} curve ({m}/{g})"

            check_finite_loss(loss, where, split)  # refused, and nothing is stored
            tensors = {f"c{j}.{n}": v.contiguous() for j, c in enumerate(controls)
                       for n, v in c.items()}  # fmt: skip
            return tensors, {"curve": barrier_from_curve(lam, loss, acc).to_dict(),
                             "training_loss": losses,
                             "training_seconds": round(trained, 4),
                             "seconds": round(time.perf_counter() - t1, 4)}  # fmt: skip

        entry, hit = cache.get_or_compute("curve", inputs, compute)
        run = line.to_dict()
        warnings += [f"{m}/{g}: {w}" for w in run["warnings"]]
        out.append({
            "method": m, "group": g,
            "line": _barriers(run),
            "curve": _barriers(entry.meta["curve"]),
            "training_loss": entry.meta["training_loss"],
            "training_seconds": entry.meta["training_seconds"],
            "function_check": run["function_check"], **health(line.checks()),
            "cached": hit, "cache_key": entry.key, "line_cache_key": run["cache_key"],
        })  # fmt: skip
    tell(progress, "done", 1)
    result = CurveResult(
        model=model, seeds=[int(s) for s in seeds], method=method, group=group, kind=kind,
        bends=bends, steps=steps, lr=lr, batch_size=batch_size, train_seed=train_seed,
        split=split, points=points, lambdas=lam.tolist(), alignments=out, rows=[], seconds=0.0,
        function_ok=not warnings, warnings=warnings,
    ).to_dict()  # fmt: skip
    result["rows"] = curve_rows(result)
    result["seconds"] = round(time.perf_counter() - t0, 4)
    return result
