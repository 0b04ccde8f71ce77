"""Loss and accuracy along lines and over triangles in weight space (DESIGN §1, "Loss barrier").

Convention: ``θ(λ) = λ·θ_A + (1−λ)·θ_B``, so **λ = 1 is A** and λ = 0 is B (B already aligned to
A by whatever transform the caller chose). For a curve with endpoint losses L_A = L(θ(1)),
L_B = L(θ(0)) and accuracies acc_A, acc_B:

    B_loss = max_λ [ L(θ(λ)) − (λ·L_A + (1−λ)·L_B) ]
    B_acc  = max_λ [ (λ·acc_A + (1−λ)·acc_B) − acc(θ(λ)) ]

Many interpolated models are evaluated at once: the mixed parameters of a chunk of λ values are
stacked along a new leading axis (one tensor per parameter name, not one model per λ) and
``torch.func.vmap`` runs ``models.forward`` over that axis, one pass per data batch
(DESIGN §4). On the CPU, attention models are the exception: vmap turns their einsums over
stacked weights into batched matmuls plus copies, slower than one model at a time, so they run
one plain functional forward per mixture (still no module, no per-λ copy of a state dict;
``auto_chunk``, bench/bench_curve.py). Losses and accuracies are exact means over every
prediction in the data set (every token for gpt), accumulated in float64.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from landscape.models import ModelConfig, Params, forward

Lambdas = int | Sequence[float] | torch.Tensor
Progress = Callable[[int, int], None]


def _as_weights(w: Sequence[float] | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(w, dtype=torch.float64).reshape(-1).cpu()


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
        shape = (-1,) + (1,) * ref.ndim
        acc = w[:, 0].reshape(shape) * ref
        for c in range(1, len(endpoints)):
            acc = acc + w[:, c].reshape(shape) * endpoints[c][name]
        out[name] = acc  # (K, *shape of the parameter)
    return out


def interpolate(
    params_a: Params, params_b: Params, lambdas: Sequence[float] | torch.Tensor
) -> Params:
    """Stacked ``θ(λ) = λ·θ_A + (1−λ)·θ_B`` for every λ: each tensor gets a leading axis K.

    λ = 1 gives A exactly, λ = 0 gives B exactly.
    """
    lam = _as_weights(lambdas)
    return mix([params_a, params_b], torch.stack([lam, 1.0 - lam], dim=1))


def _linspace(lambdas: Lambdas) -> torch.Tensor:
    if isinstance(lambdas, int):
        if lambdas < 2:
            raise ValueError("need at least 2 points to include both endpoints")
        return torch.linspace(0.0, 1.0, lambdas, dtype=torch.float64)
    return _as_weights(lambdas)


# Activation elements one vectorised step may hold on the CPU (≈ 16 MB in float32). Larger
# stacks turn the pass memory-bound and slower than a per-λ loop (bench/bench_curve.py).
CPU_BUDGET_ELEMENTS = 2**22
# Activation elements of one plain (single-model) forward on the CPU (≈ 1 MB): attention over
# longer contexts runs faster on cache-sized slices of the batch (gpt-shakespeare, 64 tokens:
# ~25% faster per forward than one 256-row pass; vit-digits, 17 tokens: about even).
CPU_SLICE_ELEMENTS = 2**18


def _activation_elements(cfg: ModelConfig) -> int:
    """Rough size of the largest activation per sample and mixture (hidden, QKV or scores)."""
    ctx = cfg.n_ctx if cfg.has_attn else 1
    return ctx * max(cfg.d_mlp, 3 * cfg.d_model, cfg.n_heads * ctx, cfg.n_out)


def auto_chunk(cfg: ModelConfig, batch: int, device: torch.device) -> int:
    """How many mixtures to stack per pass: the most whose activations fit the budget
    (CPU: ``CPU_BUDGET_ELEMENTS``; CUDA: 1/16 of the free memory in elements of 4 bytes).

    Attention models on the CPU get 1: a chunk of one runs the plain forward, which beats the
    vmapped attention there (module docstring).
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        budget = free // (4 * 16)
    elif cfg.has_attn:
        return 1
    else:
        budget = CPU_BUDGET_ELEMENTS
    return max(1, budget // max(1, batch * _activation_elements(cfg)))


def evaluate_mixtures(
    cfg: ModelConfig,
    endpoints: Sequence[Params],
    weights: torch.Tensor,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    batch_size: int = 512,
    chunk: int | None = None,
    device: str | torch.device | None = None,
    progress: Progress | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss (nats) and accuracy of every mixture ``Σ_c weights[k, c]·θ_c``: two [K] float64.

    ``chunk`` bounds how many mixtures are stacked at once (default ``auto_chunk``: as many as
    keep one pass's activations within a memory budget, all K for small models); on a CUDA
    out-of-memory error the chunk is halved and the step retried. ``device`` defaults to the
    endpoints' device. ``progress(done, total)`` is called after each (chunk, batch) step.
    """
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

    batched = torch.func.vmap(lambda p, x: forward(cfg, p, x), in_dims=(0, None))
    loss_sum = torch.zeros(k_total, dtype=torch.float64)
    correct = torch.zeros(k_total, dtype=torch.float64)
    if chunk is None:
        chunk = auto_chunk(cfg, min(batch_size, n), dev)
    chunk = max(1, min(chunk, k_total))
    n_batches = -(-n // batch_size)

    rows = x_all.shape[0]
    if dev.type == "cpu":
        rows = max(1, CPU_SLICE_ELEMENTS // _activation_elements(cfg))

    def logits_of(stacked: Params, k: int, x: torch.Tensor) -> torch.Tensor:
        if k > 1:
            return batched(stacked, x)
        # one model: the plain forward, without vmap's batching rules, in cache-sized slices
        single = {name: v[0] for name, v in stacked.items()}
        parts = [forward(cfg, single, x[i : i + rows]) for i in range(0, x.shape[0], rows)]
        return torch.cat(parts)[None]

    def run_chunk(lo: int, hi: int) -> None:
        stacked = mix(ends, weights[lo:hi])
        for b, start in enumerate(range(0, n, batch_size)):
            y = y_all[start : start + batch_size].reshape(-1)
            logits = logits_of(stacked, hi - lo, x_all[start : start + batch_size])
            logits = logits.reshape(hi - lo, y.shape[0], -1)
            logp = logits.log_softmax(-1)
            nll = -logp.gather(-1, y.expand(hi - lo, -1).unsqueeze(-1)).squeeze(-1)
            loss_sum[lo:hi] += nll.sum(1, dtype=torch.float64).cpu()
            correct[lo:hi] += (logits.argmax(-1) == y).sum(1).to(torch.float64).cpu()
            if progress is not None:
                progress(lo * n_batches + (b + 1) * (hi - lo), k_total * n_batches)

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


def evaluate_path(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    lambdas: Lambdas = 25,
    *,
    batch_size: int = 512,
    chunk: int | None = None,
    device: str | torch.device | None = None,
    progress: Progress | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss and accuracy of ``θ(λ) = λ·θ_A + (1−λ)·θ_B`` for every λ: two [K] float64 (CPU).

    ``lambdas`` is a sequence or tensor of λ values, or an int K for ``linspace(0, 1, K)``.
    Exact means over the whole data set (gpt: targets [N, T], every token counts once).
    """
    lam = _linspace(lambdas)
    weights = torch.stack([lam, 1.0 - lam], dim=1)
    return evaluate_mixtures(
        cfg,
        [params_a, params_b],
        weights,
        inputs,
        targets,
        batch_size=batch_size,
        chunk=chunk,
        device=device,
        progress=progress,
    )


class _JsonResult:
    """JSON round trip for the result dataclasses; fields in ``_pairs`` come back as tuples."""

    _pairs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):  # -> Self
        d = dict(d)
        for name in cls._pairs:
            d[name] = tuple(d[name])
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, s: str):  # -> Self
        return cls.from_dict(json.loads(s))


@dataclass
class BarrierCurve(_JsonResult):
    """A loss/accuracy curve along ``θ(λ) = λ·θ_A + (1−λ)·θ_B`` and its barriers.

    Sorted by λ. ``barrier_*`` ≥ 0 because the maximum includes the endpoints, where the gap to
    the chord is 0. ``lambda_peak_*`` is the λ where the maximum is attained (first one on ties).
    """

    lambdas: list[float]
    loss: list[float]
    accuracy: list[float]
    barrier_loss: float
    barrier_accuracy: float
    lambda_peak_loss: float
    lambda_peak_accuracy: float
    endpoint_loss: tuple[float, float]  # (A at λ=1, B at λ=0)
    endpoint_accuracy: tuple[float, float]

    _pairs = ("endpoint_loss", "endpoint_accuracy")


def _endpoint_index(lam: torch.Tensor, value: float) -> int:
    hits = torch.nonzero((lam - value).abs() < 1e-12).flatten()
    if hits.numel() == 0:
        raise ValueError(f"the λ grid must include λ = {value:g} (endpoints are read from it)")
    return int(hits[0])


def barrier_from_curve(
    lambdas: Sequence[float] | torch.Tensor,
    loss: Sequence[float] | torch.Tensor,
    accuracy: Sequence[float] | torch.Tensor,
) -> BarrierCurve:
    """Barriers of a measured curve (DESIGN §1).

    ``B_loss = max_λ [L(θ(λ)) − (λ·L_A + (1−λ)·L_B)]`` and
    ``B_acc = max_λ [(λ·acc_A + (1−λ)·acc_B) − acc(θ(λ))]``, the maxima over the grid points.
    The endpoint values are read from the grid at λ = 1 (A) and λ = 0 (B), so both must be in
    ``lambdas`` (within 1e-12); a ValueError says which one is missing. Any order of λ is fine.
    """
    lam, los, acc = _as_weights(lambdas), _as_weights(loss), _as_weights(accuracy)
    if not lam.shape == los.shape == acc.shape:
        raise ValueError("lambdas, loss and accuracy must have the same length")
    order = torch.argsort(lam, stable=True)
    lam, los, acc = lam[order], los[order], acc[order]
    ia, ib = _endpoint_index(lam, 1.0), _endpoint_index(lam, 0.0)
    gap_loss = los - (lam * los[ia] + (1 - lam) * los[ib])
    gap_acc = (lam * acc[ia] + (1 - lam) * acc[ib]) - acc
    pl, pa = int(torch.argmax(gap_loss)), int(torch.argmax(gap_acc))
    return BarrierCurve(
        lambdas=lam.tolist(),
        loss=los.tolist(),
        accuracy=acc.tolist(),
        barrier_loss=float(gap_loss[pl]),
        barrier_accuracy=float(gap_acc[pa]),
        lambda_peak_loss=float(lam[pl]),
        lambda_peak_accuracy=float(lam[pa]),
        endpoint_loss=(float(los[ia]), float(los[ib])),
        endpoint_accuracy=(float(acc[ia]), float(acc[ib])),
    )


def barrier_curve(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    lambdas: Lambdas = 25,
    **kwargs: Any,
) -> BarrierCurve:
    """``evaluate_path`` followed by ``barrier_from_curve`` (keyword arguments go to the former)."""
    lam = _linspace(lambdas)
    loss, acc = evaluate_path(cfg, params_a, params_b, inputs, targets, lam, **kwargs)
    return barrier_from_curve(lam, loss, acc)


def barycentric_grid(resolution: int) -> torch.Tensor:
    """Lattice points of the 2-simplex with step 1/R: ``(i, j, k)/R`` with ``i + j + k = R``.

    Returns [P, 3] float64 weights (w_A, w_B, w_C) with ``P = (R+1)(R+2)/2`` (R = 1: the 3
    corners; R = 10: 66 points). The corners are included exactly, e.g. (1, 0, 0) is A. Order:
    w_A descending, then w_B descending; the first point is A.
    """
    r = int(resolution)
    if r < 1:
        raise ValueError("resolution must be at least 1")
    rows = [(i / r, j / r, (r - i - j) / r) for i in range(r, -1, -1) for j in range(r - i, -1, -1)]
    return torch.tensor(rows, dtype=torch.float64)


@dataclass
class TriangleResult(_JsonResult):
    """Loss and accuracy over the triangle spanned by θ_A, θ_B, θ_C.

    ``points[p]`` are barycentric weights (w_A, w_B, w_C) of ``θ = w_A·θ_A + w_B·θ_B + w_C·θ_C``.
    A point is in the basin if ``loss ≤ Σ_c w_c·L_c + tol``: its loss lies at most ``tol`` nats
    above the plane through the corners' losses (the triangle's analogue of the chord).
    ``basin_fraction`` is the share of grid points in the basin, corners included (always in).
    """

    resolution: int
    points: list[list[float]]
    loss: list[float]
    accuracy: list[float]
    corner_loss: tuple[float, float, float]  # (A, B, C)
    corner_accuracy: tuple[float, float, float]
    basin_fraction: float
    tol: float = 0.05
    excess_loss: list[float] = field(default_factory=list)  # loss − chord plane, per point

    @property
    def max_excess_loss(self) -> float:
        """The triangle's loss barrier: ``max_p [L(θ_p) − Σ_c w_c L_c]``."""
        return max(self.excess_loss)

    _pairs = ("corner_loss", "corner_accuracy")


def triangle_from_values(
    points: torch.Tensor,
    loss: Sequence[float] | torch.Tensor,
    accuracy: Sequence[float] | torch.Tensor,
    resolution: int,
    tol: float = 0.05,
) -> TriangleResult:
    """Basin statistics of measured triangle values; the corners must be among ``points``."""
    pts = torch.as_tensor(points, dtype=torch.float64)
    los, acc = _as_weights(loss), _as_weights(accuracy)
    corners = []
    for c in range(3):
        hit = torch.nonzero((pts[:, c] - 1.0).abs() < 1e-12).flatten()
        if hit.numel() == 0:
            raise ValueError(f"corner {'ABC'[c]} is missing from the grid")
        corners.append(int(hit[0]))
    corner_loss = los[corners]
    excess = los - pts @ corner_loss
    return TriangleResult(
        resolution=int(resolution),
        points=pts.tolist(),
        loss=los.tolist(),
        accuracy=acc.tolist(),
        corner_loss=tuple(corner_loss.tolist()),
        corner_accuracy=tuple(acc[corners].tolist()),
        basin_fraction=float((excess <= tol).to(torch.float64).mean()),
        tol=float(tol),
        excess_loss=excess.tolist(),
    )


def evaluate_triangle(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    params_c: Params,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    resolution: int = 10,
    *,
    tol: float = 0.05,
    batch_size: int = 512,
    chunk: int | None = None,
    device: str | torch.device | None = None,
    progress: Progress | None = None,
) -> TriangleResult:
    """Evaluate every point of ``barycentric_grid(resolution)`` in one vectorised pass per batch.

    ``tol`` (nats) is the slack of the basin test, see ``TriangleResult``.
    """
    points = barycentric_grid(resolution)
    loss, acc = evaluate_mixtures(
        cfg,
        [params_a, params_b, params_c],
        points,
        inputs,
        targets,
        batch_size=batch_size,
        chunk=chunk,
        device=device,
        progress=progress,
    )
    return triangle_from_values(points, loss, acc, resolution, tol)
