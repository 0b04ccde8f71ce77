"""The two directions of a surface around one model (docs/design.md §1, *Surfaces*): Gaussian
draws or the top two eigenvectors of the loss's Hessian there, each *filter-normalised* (every
filter rescaled to the norm of the model's same filter), and the grid's axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

from landscape.errors import LandscapeError
from landscape.experiments.context import RUN, RunContext
from landscape.experiments.curvature import CurvatureOptions, curvature_batch, hessian_at
from landscape.experiments.hessian import LANCZOS_TOL, top_eigenpairs
from landscape.fields import Fields
from landscape.models import ModelConfig, Params
from landscape.sources import Data

__all__ = [
    "HESSIAN_ADVICE",
    "HESSIAN_RECORD",
    "VECTORS",
    "Vectors",
    "direction_pair",
    "filter_axes",
    "filter_norms",
    "filter_normalise",
    "grid_axis",
    "hessian_directions",
    "hessian_options",
]

Vectors = Literal["zero", "keep"]
VECTORS: tuple[Vectors, ...] = ("zero", "keep")
# what a surface whose Hessian exceeds the memory budget can ask for instead
HESSIAN_ADVICE = "random directions or a smaller model need less"
# What Hessian directions record (landscape.fields): the record :func:`hessian_directions`
# returns, a surface's ``hessian``; its ``batch`` is curvature's
# (:data:`landscape.experiments.curvature.CURVATURE_BATCH`: rows, unit, predictions).
HESSIAN_RECORD = Fields("Hessian directions",
                        ("eigenvalues", "axis_curvatures", "converged", "hessian_vector_products",
                         "batch", "split", "seed", "dtype", "loss", "gradient_norm"))  # fmt: skip
# Per-head readers: their head axis indexes output units too (docs/design.md §1, *Surfaces*).
HEAD_READERS = ("W_Q", "W_K", "W_V")


# ---------------------------------------------------------------- filter-normalised directions


def filter_axes(name: str, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The axes one filter of parameter ``name`` spans, or None for a vector parameter.

    A filter is everything that feeds one output unit under right multiplication ``x·W``: the
    slice ``W[..., j]`` over every axis but the last, so for a matrix [d_in, d_out] a column. The
    per-head readers ``W_Q``, ``W_K``, ``W_V`` [heads, d_model, d_head] output one unit per
    (head, j), so their filter is ``W[h, :, j]`` (axis 1); ``W_O`` [heads, d_head, d_model]
    outputs d_model units, each fed by every head: ``W_O[:, :, j]`` (axes 0, 1). Embedding tables
    and positions (``W_E``, ``W_pos``) follow the same rule. Vectors (biases ``b_*``, norm gains
    ``w`` and biases ``b``, the class token) are no filters: :func:`filter_normalise` zeroes or
    keeps them.
    """
    leaf = name.rsplit(".", 1)[-1]
    if not leaf.startswith("W") or len(shape) < 2:
        return None
    if leaf in HEAD_READERS and len(shape) == 3:
        return (1,)
    return tuple(range(len(shape) - 1))


def filter_norms(name: str, t: torch.Tensor) -> torch.Tensor | None:
    """‖filter‖₂ of every filter of ``t`` (:func:`filter_axes`), broadcastable against ``t``;
    None for a vector parameter."""
    axes = filter_axes(name, t.shape)
    if axes is None:
        return None
    return t.to(torch.float64).square().sum(axes, keepdim=True).sqrt()


def filter_normalise(direction: Params, params: Params, vectors: Vectors = "zero") -> Params:
    """Every filter of ``direction`` rescaled to the norm of the same filter of ``params``:
    ``d_f ← d_f · ‖θ_f‖ / ‖d_f‖`` (a filter of θ that is zero gives a zero filter).

    Vector parameters: ``"zero"`` (default) leaves them out of the direction, ``"keep"`` takes
    the parameter itself as its direction (so it moves by α·θ, its norm again θ's). Returned in
    ``params``' dtype and device.
    """
    if vectors not in VECTORS:
        raise LandscapeError(f"unknown vectors {vectors!r}; expected one of {', '.join(VECTORS)}")
    out: Params = {}
    for name, theta in params.items():
        d = direction[name].to(torch.float64)
        norms = filter_norms(name, theta)
        if norms is None:
            out[name] = torch.zeros_like(theta) if vectors == "zero" else theta.clone()
            continue
        own = filter_norms(name, d)
        scale = torch.where(own > 0, norms.cpu() / own.clamp_min(1e-300), torch.zeros_like(own))
        out[name] = (d * scale).to(device=theta.device, dtype=theta.dtype)
    return out


def direction_pair(params: Params, seed: int, vectors: Vectors = "zero") -> tuple[Params, Params]:
    """Two filter-normalised Gaussian directions around ``params``: d₁ then d₂ drawn from one
    generator seeded by ``seed``, each parameter in sorted name order, in float64 on the CPU (the
    same directions on every device). They are not orthogonalised: at the zoo's sizes two such
    draws are orthogonal to about 1/√(parameters)."""
    gen = torch.Generator().manual_seed(int(seed))
    names = sorted(params)
    drawn = []
    for _ in range(2):
        raw = {k: torch.randn(tuple(params[k].shape), generator=gen, dtype=torch.float64)
               for k in names}  # fmt: skip
        drawn.append(filter_normalise(raw, params, vectors))
    return drawn[0], drawn[1]


def hessian_options(seed: int = 0, split: str = "train", batch: int | None = None,
                    dtype: str = "float32") -> CurvatureOptions:  # fmt: skip
    """The curvature options of a surface's Hessian directions: the top two eigenpairs on
    ``batch`` rows of ``split`` drawn by ``seed`` (curvature's batch and defaults), products in
    ``dtype``."""
    return CurvatureOptions(top_k=2, probes=0, batch=batch, split=split, dtype=dtype, seed=seed)


HESSIAN = hessian_options()  # the defaults


def hessian_directions(cfg: ModelConfig, params: Params, data: Data,
                       options: CurvatureOptions = HESSIAN, *, vectors: Vectors = "zero",
                       context: RunContext = RUN
                       ) -> tuple[Params, Params, dict[str, Any]]:  # fmt: skip
    """The top two eigenvectors of the loss's Hessian at ``params``, filter-normalised as
    :func:`direction_pair`'s draws are (``vectors``): d₁ from the eigenvector of the largest
    (algebraic) eigenvalue λ₁, d₂ from the second's λ₂, found on the context's device.

    The loss and its Hessian are those of ``landscape curvature``
    (:mod:`landscape.experiments.curvature`), with ``options`` from :func:`hessian_options`
    (its ``seed``, ``split``, ``batch`` and ``dtype`` are read): the mean cross-entropy over
    ``batch`` rows of ``split`` drawn by ``seed``
    (:func:`~landscape.experiments.curvature.curvature_batch`; by default 16 windows of a text,
    512 rows else, of the training split), Hessian-vector products in ``dtype`` within the memory
    budget, Lanczos from a Gaussian start seeded by ``seed``
    (:func:`~landscape.experiments.hessian.top_eigenpairs`). Sign: each eigenvector is signed
    so that its entry of largest magnitude (over every parameter, names sorted) is positive, and
    filter normalisation rescales each filter by a positive factor, so this convention fixes
    both axes' orientation (the same model, batch and seed give the same axes).

    Also returns what the surface records: ``eigenvalues`` [λ₁, λ₂]; ``axis_curvatures``
    [d₁ᵀHd₁, d₂ᵀHd₂], the second derivative of the batch's loss along each normalised axis at the
    centre (filter normalisation rescales filters unevenly, so the axes are no longer exact
    eigenvectors and these are not λ·‖d‖²): the batch's loss at (α, 0) is
    L + α·∇L·d₁ + ½·κ₁·α² to second order; whether Lanczos ``converged``; the
    ``hessian_vector_products`` made; the ``batch`` (rows, unit, predictions), ``split``,
    ``seed`` and ``dtype``; the batch's ``loss`` and ``gradient_norm`` at the centre.
    """
    seed, split, batch, dtype = options.seed, options.split, options.batch, options.dtype
    options = hessian_options(seed, split, batch, dtype)  # the top two eigenpairs, no trace
    rows = curvature_batch(data, split, batch, seed)
    h = hessian_at(cfg, params, rows, options, device=context.device, advice=HESSIAN_ADVICE)
    values, flat, converged = top_eigenpairs(h.matvec(), h.size(), 2, seed=seed,
                                             tol=LANCZOS_TOL[dtype])  # fmt: skip
    if len(values) < 2:
        raise LandscapeError(
            f"Lanczos converged on {len(values)} of the Hessian's top two "
            "eigenvectors at the surface's centre: no Hessian directions"
        )
    d1, d2 = (filter_normalise(h.unflatten(flat[:, j]), params, vectors) for j in range(2))
    curvatures = [float(h.flatten(d) @ h.product(h.flatten(d))) for d in (d1, d2)]
    windows = rows.targets.ndim == 2
    info = {
        "eigenvalues": values[:2],
        "axis_curvatures": curvatures,
        "converged": converged,
        "hessian_vector_products": h.products,
        "batch": {"rows": len(rows), "unit": "windows" if windows else "examples",
                  "predictions": int(rows.targets.numel())},
        "split": split,
        "seed": seed,
        "dtype": dtype,
        "loss": h.loss,
        "gradient_norm": h.gradient_norm,
    }  # fmt: skip
    return d1, d2, info


def grid_axis(lo: float, hi: float, resolution: int) -> torch.Tensor:
    """``resolution`` evenly spaced values from ``lo`` to ``hi`` (float64); on a symmetric axis
    with an odd resolution the middle one is exactly 0."""
    r = int(resolution)
    i = torch.arange(r, dtype=torch.float64)
    if lo == -hi:  # (2i − (r − 1))/(r − 1)·hi: the middle value is 0, not a rounding of it
        return (2 * i - (r - 1)) / max(r - 1, 1) * hi
    return lo + (hi - lo) * i / max(r - 1, 1)
