"""The residual coordinates of the gauge sweep (docs/design.md §1, "Coordinate transport"):
the stream read out of a model, A's and B's coordinates compared by activations and by weights,
the residual element solved from a similarity, and how many coordinates an estimate recovers.

The residual alignment of the sweep: one implementation each in :mod:`landscape.matching`, with
the sweep's options (``landscape.matching.activation.GAUGE_SWEEP``; norm gains left out of
weights).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from landscape.matching.activation import GAUGE_SWEEP, activation_transform, collect
from landscape.matching.activation import activation_similarity as matching_similarity
from landscape.matching.solvers import Signs, solve
from landscape.matching.weight import weight_similarity as resid_weight_similarity
from landscape.models import ModelConfig, Params, architecture_of
from landscape.symmetry import Element, Spec, Transform, group_kinds, random_transform, spec_for


def readout_features(cfg: ModelConfig, params: Params, inputs: torch.Tensor, layer: int
                     ) -> torch.Tensor:  # fmt: skip
    """Residual stream entering block ``layer`` at the positions that are read out:
    mlp [N, d]; vit the class token [N, d]; gpt every position [N·T, d]."""
    x = collect(cfg, params, inputs)[f"resid.{layer}"]
    if architecture_of(cfg).readout == "class token":
        x = x[:, 0]
    return x.reshape(-1, cfg.d_model)


def activation_similarity(xa: torch.Tensor, xb: torch.Tensor, kind: str) -> torch.Tensor:
    """Similarity of A's and B's residual coordinates from paired activations [L, N, d]: [d, d],
    by the sweep's statistic (``landscape.matching.activation.activation_similarity``,
    ``"cosine"``: correlations summed over layers; O(d): uncentred cross-moments)."""
    return matching_similarity(xa, xb, kind, GAUGE_SWEEP.statistic)


def weight_similarity(cfg: ModelConfig, pa: Params, pb: Params) -> torch.Tensor:
    """Similarity of A's and B's residual coordinates from weights: [d, d].

    ``M = Σ_W W_Aᵀ W_B`` over every parameter the residual gauge acts on by G or G⁻ᵀ: one
    coordinate-descent step of weight matching (``landscape.matching.weight.weight_similarity``).
    Norm gains move by |G| and carry no sign, so they are left out (``gains="ignore"``).
    """
    return resid_weight_similarity(spec_for(cfg), "resid", pa, pb, gains="ignore")[0]


def solve_resid(m: torch.Tensor, kind: str, method: Signs = "marginalised") -> Element:
    """The residual element ``h`` aligning B to A from a similarity ``m`` (rows A, columns B):
    ``landscape.matching.solvers.solve`` with ``method`` ∈ {"marginalised", "signed"} as its
    sign handling of signed permutations."""
    return solve(kind, m, signs=method).to("cpu")


def coordinate_accuracy(est: Element, true: Element) -> dict[str, float]:
    """Agreement of two monomial elements per coordinate.

    ``perm``: share of slots mapped to the right coordinate; ``sign``: share of those with the
    right sign; ``coord``: share right in both (the coordinate is recovered exactly).
    """
    ok_p = est.perm.cpu() == true.perm.cpu()
    ok_s = torch.sign(est.scale.cpu()) == torch.sign(true.scale.cpu())
    n_ok = int(ok_p.sum())
    return {
        "perm": n_ok / len(ok_p),
        "sign": float((ok_s & ok_p).sum()) / max(n_ok, 1),
        "coord": float((ok_s & ok_p).double().mean()),
    }


def align_activations(
    cfg: ModelConfig,
    pa: Params,
    pb: Params,
    inputs: torch.Tensor,
    resid_kind: str,
    *,
    method: Signs = "marginalised",
    drop_first: bool = False,
) -> Transform:
    """Activation matching restricted to ``resid_kind`` on the stream (docs/design.md §1),
    with the sweep's options (``landscape.matching.activation.GAUGE_SWEEP``).

    Residual: :func:`activation_similarity` solved by ``resid_kind`` (``method``: the sign
    handling). FFN units of each layer: assignment on correlations of the hidden activations
    (they do not see the residual gauge). Heads: assignment on the QK/OV circuit cost of A
    against B with its stream already aligned. The parameters are used as given (processed by
    the caller). Returns ``h`` with ``apply(h, θ_B) ≈ θ_A``.
    """
    kinds = group_kinds(spec_for(cfg), resid_kind)  # the kind names its own level
    similarity = replace(GAUGE_SWEEP, signs=method)
    return activation_transform(cfg, pa, pb, inputs, kinds, similarity=similarity,
                                drop_first=drop_first)[0]  # fmt: skip


def resid_only(spec: Spec, kind: str, seed: int) -> Transform:
    """A random element of ``kind`` on the residual stream only (FFN units and heads fixed)."""
    return random_transform(spec, {"resid": kind}, seed)
