"""Loss and accuracy along lines and over triangles in weight space (docs/design.md §1).

Convention: ``θ(λ) = λ·θ_A + (1−λ)·θ_B``, so **λ = 1 is A** and λ = 0 is B (B already aligned to
A by whatever transform the caller chose). The barriers and basins of the measured values are
:mod:`landscape.experiments.basins`; here they are measured.

Many interpolated models are evaluated at once: the mixed parameters of a chunk of λ values are
stacked along a new leading axis (one tensor per parameter name, not one model per λ), mixed in one
step for the whole chunk. On CUDA ``torch.func.vmap`` runs ``models.forward_resid`` over that axis,
one pass per data batch (docs/design.md §4). On the CPU every model runs one plain functional
forward per mixture instead, on cache-sized slices of the batch: vmap's batched matmuls and copies,
and activations K times larger, made the vectorised pass slower there for every zoo model
(``auto_chunk``, bench/bench_curve.py). Either way there is no module and no per-λ copy of a state
dict. The embedding is linear in the parameters, so each endpoint embeds a batch once and the
mixtures start from mixed embeddings. Losses and accuracies are exact means over every prediction in
the data set (every token for gpt), accumulated in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from landscape.errors import LandscapeError
from landscape.experiments.basins import (
    BarrierCurve,
    TriangleResult,
    as_values,
    barrier_from_curve,
    barycentric_grid,
    triangle_from_values,
)
from landscape.experiments.context import RunContext
from landscape.models import ModelConfig, Params, embed, forward, forward_resid
from landscape.threads import threaded

Lambdas = int | Sequence[float] | torch.Tensor


@dataclass(frozen=True)
class EvalOptions:
    """How mixtures are evaluated (never what they measure): ``batch_size`` rows of the data a
    batch; ``chunk`` mixtures stacked per vectorised pass (None: :func:`auto_chunk`; 1 is the
    plain pass, :func:`evaluate_mixtures`)."""

    batch_size: int = 512
    chunk: int | None = None


EVAL = EvalOptions()  # the defaults


def _check_same_keys(endpoints: Sequence[Params]) -> None:
    keys = set(endpoints[0])
    for p in endpoints[1:]:
        if set(p) != keys:
            diff = sorted(keys.symmetric_difference(p))
            raise ValueError(f"parameter sets differ in names: {diff[:5]}")


def mix(endpoints: Sequence[Params], weights: torch.Tensor) -> Params:
    """Stacked mixtures ``θ_k = Σ_c weights[k, c]·θ_c``: every tensor gains a leading axis K.

    ``weights`` is [K, C] for C endpoints. A weight row that is a corner (one 1, rest 0) gives
    that endpoint bit for bit (``1·x + 0·y = x`` in floating point).
    """
    _check_same_keys(endpoints)
    weights = torch.as_tensor(weights, dtype=torch.float64)
    if weights.ndim != 2 or weights.shape[1] != len(endpoints):
        raise ValueError(f"weights must be [K, {len(endpoints)}], got {tuple(weights.shape)}")
    out: Params = {}
    for name, ref in endpoints[0].items():
        w = weights.to(device=ref.device, dtype=ref.dtype)
        out[name] = _mix_tensors([p[name] for p in endpoints], w)  # (K, *shape of the parameter)
    return out


def _combine(xs: Sequence[torch.Tensor], ws: Sequence[float]) -> torch.Tensor:
    """``Σ_c ws[c]·xs[c]`` for one mixture, in place on a fresh tensor (``_mix_tensors`` for K
    mixtures): half the time of the stacked form on a slice of embeddings."""
    acc = xs[0] * ws[0]
    for x, wc in zip(xs[1:], ws[1:], strict=True):
        acc.add_(x, alpha=wc)
    return acc


def _mix_tensors(xs: Sequence[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """``Σ_c weights[k, c]·xs[c]`` for every row k of ``weights`` [K, C]: [K, *shape of xs[c]]."""
    shape = (-1,) + (1,) * xs[0].ndim
    acc = weights[:, 0].reshape(shape) * xs[0]
    for c in range(1, len(xs)):
        acc = acc + weights[:, c].reshape(shape) * xs[c]
    return acc


def interpolate(
    params_a: Params, params_b: Params, lambdas: Sequence[float] | torch.Tensor
) -> Params:
    """Stacked ``θ(λ) = λ·θ_A + (1−λ)·θ_B`` for every λ: each tensor gets a leading axis K.

    λ = 1 gives A exactly, λ = 0 gives B exactly.
    """
    lam = as_values(lambdas)
    return mix([params_a, params_b], torch.stack([lam, 1.0 - lam], dim=1))


def _linspace(lambdas: Lambdas) -> torch.Tensor:
    if isinstance(lambdas, int):
        if lambdas < 2:
            raise ValueError("need at least 2 points to include both endpoints")
        return torch.linspace(0.0, 1.0, lambdas, dtype=torch.float64)
    return as_values(lambdas)


# Activation elements of one plain (single-model) forward on the CPU (≈ 2 MB in float32): the batch
# is cut into equal slices of at most this many. Smaller slices pay a forward's fixed overhead
# (≈ 0.3 ms for vit-digits) more often; larger ones leave the cache, and their megabyte-sized
# temporaries are often handed back to the system and faulted in again on every forward. A
# 25-point curve on one thread: vit-digits (497 digits) 0.19 s in 2 slices, 0.20 s in 4, 0.22–0.29 s
# in one pass; gpt-shakespeare (256 windows) 1.78 s in slices of 32, 1.84 s of 16, 1.99 s of 8.
CPU_SLICE_ELEMENTS = 2**19
# Positions a CPU slice gives every weight matrix at the least: fewer, and the forward reads each
# matrix again for too few rows. SmolLM2-135M on 16 windows of 64 tokens (its vocabulary makes the
# rule above ask for one window a slice), 3 points at 2 threads: one window a slice 22.2 s, 4
# windows 13.0 s, 8 windows 11.5 s, 16 windows 11.6 s. The zoo's slices are longer already.
MIN_SLICE_POSITIONS = 512
# Fewer classes than this (less than one AVX-512 vector of float32) and the log-softmax of the loss
# runs down columns of the transposed logits, vectorised across predictions: for the 10 digit
# classes 4–6× faster than along rows; 16 classes and more are faster along rows.
NARROW_CLASSES = 16
# Parameter elements mixed at once for the one-model-at-a-time pass (≈ 64 MB in float32): all
# 25 points of a curve of any zoo model in one go, GPT-2-sized models one at a time.
MIX_BUDGET_ELEMENTS = 2**24


def _row_positions(cfg: ModelConfig, positions: int | None) -> int:
    """Positions a sample carries through the forward: ``positions`` (default: the model's
    context) for attention models, 1 for MLPs."""
    return (positions or cfg.n_ctx) if cfg.has_attn else 1


def _activation_elements(cfg: ModelConfig, positions: int | None = None) -> int:
    """Rough size of the largest activation per sample and mixture (hidden, QKV or scores);
    ``positions``: the sample's length (default: the model's context)."""
    ctx = _row_positions(cfg, positions)
    return ctx * max(cfg.ffn_width, 3 * cfg.d_model, cfg.n_heads * ctx, cfg.n_out)


def slice_rows(cfg: ModelConfig, batch: int, device: torch.device, positions: int | None = None
               ) -> int:  # fmt: skip
    """Rows per slice of a batch in the plain forward: the whole batch on CUDA; on the CPU, equal
    slices of at most ``CPU_SLICE_ELEMENTS // _activation_elements(cfg, positions)`` rows (no
    short remainder: each slice costs one forward's fixed overhead), but never fewer than
    ``MIN_SLICE_POSITIONS`` positions a slice. ``positions``: each row's length (default: the
    model's context)."""
    if device.type == "cuda":
        return batch
    most = max(1, CPU_SLICE_ELEMENTS // _activation_elements(cfg, positions),
               -(-MIN_SLICE_POSITIONS // _row_positions(cfg, positions)))  # fmt: skip
    n_slices = -(-batch // most)
    return -(-batch // n_slices)


def auto_chunk(cfg: ModelConfig, batch: int, device: torch.device) -> int:
    """How many mixtures to stack per vectorised pass. CUDA: the most whose activations fit 1/16
    of the free memory (elements of 4 bytes). CPU: 1, the plain forward per mixture, faster
    there than the vmapped pass for MLPs and attention models alike (module docstring).
    """
    if device.type != "cuda":
        return 1
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, free // (4 * 16) // max(1, batch * _activation_elements(cfg)))


def evaluate_mixtures(
    cfg: ModelConfig,
    endpoints: Sequence[Params],
    weights: torch.Tensor,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    options: EvalOptions = EVAL,
    *,
    scale: torch.Tensor | None = None,
    context: RunContext | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss (nats) and accuracy of every mixture ``Σ_c weights[k, c]·θ_c``: two [K] float64.
    ``scale`` [K]: mixture k's logits are multiplied by ``scale[k]`` before the loss (an inverse
    temperature, :func:`calibrate_mixtures`; the accuracy is the same for any positive scale).

    The options' ``chunk`` is how many mixtures one vectorised pass stacks (default
    ``auto_chunk``: on CUDA as many as keep the activations within a memory budget; on the CPU
    1), over batches of ``batch_size`` rows. A chunk of 1 is the plain pass: one forward per
    mixture on slices of the batch (``slice_rows``), the parameters of up to
    ``MIX_BUDGET_ELEMENTS`` mixed at once. On a CUDA out-of-memory error the chunk is halved and
    the step retried. It runs on the ``context``'s device (without a context: on the endpoints'
    device, nothing heard); the context's ``progress("evaluate", done, total)`` counts (mixture,
    batch) steps: it is called after each model of the plain pass and after each (chunk, batch)
    step of the vectorised one.
    """
    batch_size, chunk = options.batch_size, options.chunk
    device = None if context is None else context.device
    progress = None if context is None else context.progress
    weights = torch.as_tensor(weights, dtype=torch.float64).cpu()
    k_total = weights.shape[0]
    n = inputs.shape[0]
    if targets.shape[0] != n:
        raise ValueError(f"{n} inputs but {targets.shape[0]} targets")
    if batch_size <= 0:
        raise ValueError("batch_size must be positive")
    dev = torch.device(device) if device is not None else next(iter(endpoints[0].values())).device
    ends = [{k: v.to(dev) for k, v in p.items()} for p in endpoints]
    dtype = next(iter(ends[0].values())).dtype
    x_all = inputs.to(dev)
    if x_all.is_floating_point():
        x_all = x_all.to(dtype)
    y_all = targets.to(dev)

    batched = torch.func.vmap(lambda p, x: forward_resid(cfg, p, x), in_dims=(0, 0))
    loss_sum = torch.zeros(k_total, dtype=torch.float64)
    correct = torch.zeros(k_total, dtype=torch.float64)
    if chunk is None:
        chunk = auto_chunk(cfg, min(batch_size, n), dev)
    chunk = max(1, min(chunk, k_total))
    n_batches = -(-n // batch_size)
    plain = chunk == 1
    if plain:  # one mixture per pass, so mix as many as the budget holds at once
        n_params = sum(v.numel() for v in ends[0].values())
        chunk = max(1, min(k_total, MIX_BUDGET_ELEMENTS // max(1, n_params)))

    betas = None if scale is None else torch.as_tensor(scale, dtype=torch.float64).cpu()

    def scores(logits: torch.Tensor, y: torch.Tensor, lo: int
               ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Summed loss (float64) and correct predictions of the logits of K models, mixtures
        ``lo`` to ``lo + K``: two [K]."""
        k = logits.shape[0]
        logits = logits.reshape(k, y.shape[0], -1)  # (K, predictions, n_out)
        hits = (logits.argmax(-1) == y).sum(1)
        if betas is not None:
            logits = logits * betas[lo : lo + k].to(logits.device, logits.dtype)[:, None, None]
        if logits.shape[-1] < NARROW_CLASSES:  # log-softmax down columns, across predictions
            logp = logits.transpose(1, 2).contiguous().log_softmax(1)  # (K, n_out, predictions)
            return -logp.gather(1, y.expand(k, 1, -1)).sum((1, 2), dtype=torch.float64), hits
        nll = F.cross_entropy(logits.flatten(0, 1), y.repeat(k), reduction="none")
        return nll.view(k, -1).sum(1, dtype=torch.float64), hits

    def add(lo: int, hi: int, loss: torch.Tensor, hits: torch.Tensor) -> None:
        loss_sum[lo:hi] += loss.cpu()
        correct[lo:hi] += hits.cpu().to(torch.float64)

    def run_chunk(lo: int, hi: int) -> None:
        stacked = mix(ends, weights[lo:hi])
        w = weights[lo:hi].to(device=dev, dtype=dtype)
        singles = []
        if plain:  # the mixtures as plain parameter dicts (views, no copies)
            columns = [v.unbind(0) for v in stacked.values()]
            singles = [dict(zip(stacked, vs, strict=True)) for vs in zip(*columns, strict=True)]
        for b, start in enumerate(range(0, n, batch_size)):
            x = x_all[start : start + batch_size]
            y = y_all[start : start + batch_size].reshape(-1)
            # embed is linear in the parameters: mix the endpoints' embeddings, not re-embed
            resid = [embed(cfg, p, x) for p in ends]
            done = lo * n_batches + b * (hi - lo)
            if not plain:
                add(lo, hi, *scores(batched(stacked, _mix_tensors(resid, w)), y, lo))
                if progress is not None:
                    progress("evaluate", done + hi - lo, k_total * n_batches)
                continue
            # one model at a time: the plain forward, without vmap's batching rules, on
            # cache-sized slices of the batch
            positions = resid[0].shape[1] if resid[0].dim() == 3 else None  # (rows, positions, d)
            step = slice_rows(cfg, x.shape[0], dev, positions)
            cuts = [slice(i, i + step) for i in range(0, x.shape[0], step)]
            per_model = []
            for j, (single, wj) in enumerate(zip(singles, w.tolist(), strict=True)):
                parts = [
                    forward_resid(cfg, single, _combine([r[c] for r in resid], wj)) for c in cuts
                ]
                per_model.append(scores(torch.cat(parts)[None], y, lo + j))
                if progress is not None:
                    progress("evaluate", done + len(per_model), k_total * n_batches)
            add(lo, hi, *(torch.cat(t) for t in zip(*per_model, strict=True)))

    with torch.inference_mode():  # no autograd bookkeeping at all (a few % on small models)
        lo = 0
        while lo < k_total:
            hi = min(lo + chunk, k_total)
            saved = loss_sum[lo:hi].clone(), correct[lo:hi].clone()
            try:
                run_chunk(lo, hi)
            except torch.cuda.OutOfMemoryError:
                if chunk == 1:
                    raise
                loss_sum[lo:hi], correct[lo:hi] = saved
                chunk = max(1, chunk // 2)
                torch.cuda.empty_cache()
                continue
            lo = hi
    count = float(targets.numel())
    return loss_sum / count, correct / count


@threaded
def fit_temperature(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """The inverse temperature β > 0 that minimises the mean cross-entropy of ``β·logits``
    ([N, classes]) against ``targets`` [N], in float64.

    f(β) = mean(logsumexp(β·z) − β·z_y) is convex in β: f′(β) = mean(E_p[z] − z_y) and
    f″(β) = mean(Var_p[z]) ≥ 0 under p = softmax(β·z). Newton's method from β = 1, each step
    halved until f decreases, on β's logarithm so it stays positive; stops when a step moves β
    by less than 1e-10 of itself."""
    z = logits.reshape(-1, logits.shape[-1]).to(torch.float64)
    y = targets.reshape(-1)
    zy = z.gather(1, y[:, None]).squeeze(1)

    def f(beta: float) -> float:
        return float((torch.logsumexp(beta * z, 1) - beta * zy).mean())

    beta, value = 1.0, f(1.0)
    for _ in range(100):
        p = torch.softmax(beta * z, 1)
        mean = (p * z).sum(1)
        grad = float((mean - zy).mean())
        curv = float((p * z * z).sum(1).sub(mean * mean).mean())
        if curv <= 0 or not grad:
            break
        step = -grad / curv
        new, new_value = beta + step, math.inf
        while True:
            if new > 0:
                new_value = f(new)
                if new_value <= value:
                    break
            step /= 2
            new = beta + step
            if abs(step) < 1e-12 * beta:
                return beta
        moved = abs(new - beta)
        beta, value = new, new_value
        if moved < 1e-10 * beta:
            break
    return beta


def calibrate_mixtures(
    cfg: ModelConfig,
    endpoints: Sequence[Params],
    weights: torch.Tensor,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    batch_size: int = 512,
    device: torch.device | None = None,
) -> torch.Tensor:
    """The inverse temperature of every mixture ``Σ_c weights[k, c]·θ_c``, fitted on ``inputs``
    (a calibration set, never the split the barrier is measured on) by :func:`fit_temperature`:
    [K] float64, for :func:`evaluate_mixtures`' ``scale``. A model merged from two that disagree
    is less confident than either; the temperature removes the part of its loss that rescaling
    its logits removes (the control of "LMC without permutations, after temperature
    calibration")."""
    weights = torch.as_tensor(weights, dtype=torch.float64).cpu()
    dev = torch.device(device) if device is not None else next(iter(endpoints[0].values())).device
    ends = [{k: v.to(dev) for k, v in p.items()} for p in endpoints]
    dtype = next(iter(ends[0].values())).dtype
    x_all = inputs.to(dev)
    if x_all.is_floating_point():
        x_all = x_all.to(dtype)
    out = []
    with torch.inference_mode():
        for row in weights:
            mixed = {k: _combine([e[k] for e in ends], row.tolist()) for k in ends[0]}
            logits = torch.cat([forward(cfg, mixed, x_all[i : i + batch_size])
                                for i in range(0, x_all.shape[0], batch_size)])  # fmt: skip
            out.append(fit_temperature(logits.cpu(), targets.cpu()))
    return torch.tensor(out, dtype=torch.float64)


def path_weights(lambdas: Lambdas) -> torch.Tensor:
    """The mixture weights of the line's points: rows (λ, 1 − λ), [K, 2] float64 (``lambdas``
    as :func:`evaluate_path` reads them)."""
    lam = _linspace(lambdas)
    return torch.stack([lam, 1.0 - lam], dim=1)


def evaluate_path(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    lambdas: Lambdas = 25,
    options: EvalOptions = EVAL,
    *,
    context: RunContext | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss and accuracy of ``θ(λ) = λ·θ_A + (1−λ)·θ_B`` for every λ: two [K] float64 (CPU).

    ``lambdas`` is a sequence or tensor of λ values, or an int K for ``linspace(0, 1, K)``.
    Exact means over the whole data set (gpt: targets [N, T], every token counts once).
    ``options`` and ``context``: as :func:`evaluate_mixtures`' (which takes each λ's inverse
    temperature too, on the line's :func:`path_weights`).
    """
    return evaluate_mixtures(cfg, [params_a, params_b], path_weights(lambdas), inputs, targets,
                             options, context=context)  # fmt: skip


def check_finite_loss(
    loss: Sequence[float] | torch.Tensor, where: Callable[[int], str], split: str
) -> None:
    """Refuse a curve or grid with a NaN or infinite loss: a barrier measured against it would
    be NaN or meaningless. ``where(i)`` names point i (model and λ); the message names the split.
    """
    values = as_values(loss)
    bad = torch.nonzero(~torch.isfinite(values)).flatten()
    if bad.numel():
        i = int(bad[0])
        raise LandscapeError(
            f"the loss is {float(values[i])} at {where(i)} on the {split} split: the model's "
            "outputs are not finite there, so no barrier can be measured"
        )


def barrier_curve(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    lambdas: Lambdas = 25,
    options: EvalOptions = EVAL,
    *,
    context: RunContext | None = None,
) -> BarrierCurve:
    """``evaluate_path`` followed by ``barrier_from_curve`` (its arguments are the former's)."""
    lam = _linspace(lambdas)
    loss, acc = evaluate_path(cfg, params_a, params_b, inputs, targets, lam, options,
                              context=context)  # fmt: skip
    return barrier_from_curve(lam, loss, acc)


def evaluate_triangle(
    cfg: ModelConfig,
    corners: Sequence[Params],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    resolution: int = 10,
    options: EvalOptions = EVAL,
    *,
    tol: float = 0.05,
    context: RunContext | None = None,
) -> TriangleResult:
    """Evaluate every point of ``barycentric_grid(resolution)`` over the three ``corners``
    (A, B, C) in one vectorised pass per batch (``options`` and ``context``: as
    :func:`evaluate_mixtures`').

    ``tol`` (nats) is the slack of the basin test, see ``TriangleResult``.
    """
    points = barycentric_grid(resolution)
    loss, acc = evaluate_mixtures(cfg, list(corners), points, inputs, targets, options,
                                  context=context)  # fmt: skip
    return triangle_from_values(points, loss, acc, resolution, tol)
