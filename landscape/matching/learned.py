"""Learned matching (docs/design.md §1): learn π by descending the loss of the merged model.

Rotations (``orth`` variables, ``orth="exp"``, the default) are parametrised as

    G = G₀ · exp(S − Sᵀ)

with G₀ the starting element and S a free latent: every latent gives an exact orthogonal matrix
in G₀'s component of O(d), the gradient is exact, and nothing passes through a singular matrix.
For every other matched variable (``mlp{l}``, ``heads{l}`` permutations; rotations with
``orth="polar"``) an unconstrained latent Z_v is kept, in the spec's orientation (Z_v ≈ G_v,
writers ``W ← W·G``), and each step projects it onto v's group,

    perm:        G = argmax_{P ∈ S_n} tr(Pᵀ Z)           (linear assignment)
    signed-perm: G = argmax_{P ∈ B_n} tr(Pᵀ Z)           (assignment on |Z|, signs of the picks)
    orth:        G = argmax_{O ∈ O(n)} tr(Oᵀ Z) = U Vᵀ   (polar factor, Z = U Σ Vᵀ, float64)

with the straight-through estimator ``G_ste = Z + (G − Z).detach()``: the forward pass sees
the exact group element, the backward pass treats the projection as the identity. The loss is

    E_{λ ~ p(λ)} CE( λ·θ_A + (1−λ)·π_G(θ_B) )

on training batches, with p(λ) = U(0.4, 0.6) by default (also U(0, 1) or the midpoint only), in
the weights or, with ``space="circuits"``, between the heads' QK and OV circuits (the endpoints
rewritten together, ``landscape.models.circuits.circuit_forms``). The latents move by
``torch.optim.Adam`` with a cosine schedule.
Only the transform is learned, so π(θ_B) stays exactly B's function: the final hard transform is
re-applied with :func:`landscape.symmetry.apply` and the logits are compared.

Step size. Z is renormalised to ‖Z‖_F = √n after every step (the projections ignore the scale),
so its entries have RMS 1/√n and Adam's step is set relative to that: ``lr`` is the per-step move
of an entry in units of the RMS entry. With a fixed absolute learning rate a permutation latent
(entries 1 and 0) would need hundreds of steps before any assignment can change, and "learned
permutations" would silently equal their initialisation.

Mixtures of experts: the permutation of each layer's experts (``experts{l}``, each expert with
its router column) is discrete and is not learned. It is held at the start's, weight
matching's (which assigns experts by their router columns and their best unit assignment) or,
with ``init="identity"``, the identity, and applied to B once; the units inside each expert
slot are then learned as a plain FFN's, one latent per slot (``[E, d_mlp, d_mlp]``, each slot
projected onto its own permutation), together with the residual element and the heads. The
returned transform holds the start's expert permutation beside the learned elements.

Determinant flips: the sign of det G_resid is tracked; under the polar parametrisation a change
means Z crossed a singular matrix and the polar factor jumped between the two components of O(d)
(or, for permutations, an odd relabelling). They are counted and reported; the exponential
parametrisation has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from landscape.matching.learning import (
    INITS,
    LAMBDAS,
    ORTH_PARAMS,
    LearnedOptions,
    MergedLoss,
    learn,
)
from landscape.matching.methods import MATCH_CONTEXT, MatchContext, MatchingMethod, given_settings
from landscape.matching.result import MatchResult
from landscape.models import ModelConfig, Params
from landscape.symmetry import Transform

__all__ = [
    "INITS",
    "LAMBDAS",
    "LEARNED",
    "LearnedOptions",
    "ORTH_PARAMS",
    "learned_matching",
    "learned_triangle",
]


def _lambda_sampler(lam: str, gen: torch.Generator) -> Callable[[], float]:
    if lam == "u(0.4,0.6)":
        return lambda: 0.4 + 0.2 * float(torch.rand(1, generator=gen))
    if lam == "u(0,1)":
        return lambda: float(torch.rand(1, generator=gen))
    if lam == "0.5":
        return lambda: 0.5
    raise ValueError(f"unknown λ distribution {lam!r}; expected one of {LAMBDAS}")


def _eval_lambdas(lam: str) -> list[float]:
    """Quartiles of the λ distribution: where the kept transform is scored."""
    return {"u(0.4,0.6)": [0.45, 0.5, 0.55], "u(0,1)": [0.25, 0.5, 0.75], "0.5": [0.5]}[lam]


def learned_matching(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    train_split: Any,
    *,
    options: LearnedOptions | None = None,
    context: MatchContext = MATCH_CONTEXT,
    start: Transform | None = None,
    **settings: Any,
) -> MatchResult:
    """Learn the transform of B by minimising the merged model's loss (module docstring).

    Its settings (:class:`LearnedOptions`) come as ``options`` or as keywords, keywords over
    ``options``; the ``context`` (:class:`~landscape.matching.methods.MatchContext`) gives the
    seed, the device (None: the CPU) and who hears. ``train_split`` has ``inputs`` and
    ``targets`` (a ``data.Split``); batches of ``batch_size`` rows (default 64, or 8,192 tokens
    of a language model's windows) are drawn in shuffled epochs seeded by the context's
    ``seed``. ``init="weight"`` starts from weight matching under ``group`` (with the same
    seed), ``"identity"`` from the identity. ``orth`` is the parametrisation of rotations:
    ``"exp"`` (G = G₀·exp(S − Sᵀ), never singular) or ``"polar"`` (a free latent projected each
    step, straight-through). ``space`` is the merge space of the loss: ``"weights"`` or
    ``"circuits"`` (the endpoints rewritten together, ``landscape.models.circuits``). ``lr``
    (rotations) and ``lr_perm`` (permutation latents) are Adam's step in units of the group
    element's RMS entry 1/√n, decayed to 0 on a cosine. Every ``eval_every`` steps the projected
    transform is scored by the merged loss on a fixed slice of the training rows (``eval_size``;
    default 1,024 rows, or 16,384 tokens of a language model's windows) at three λ (the
    quartiles of the λ distribution), and the best one seen, the start included, is returned
    (``info["selected_step"]``, ``info["eval_curve"]``). The context's ``progress``
    (:mod:`landscape.progress`) hears ``("learned matching step i/steps", i, steps)`` after each
    step i. Its ``on_elements(step, elements)`` is told the projected elements at every
    scoring point (step 0, the start, included), within-head maps by slot as in the returned
    transform, acting on B as processed (``prepare_pair`` under ``group``); the one returned is
    the call at ``info["selected_step"]``.
    ``lm_curve`` records the merged loss ``[{step, loss}]`` (loss of the λ drawn at that step);
    ``det_flips`` the sign changes of det G_resid; ``info`` the start, the settings, how many
    units changed assignment per variable (``moved``), ‖G − G_init‖ for a dense resid and
    ``projection_changes``, the steps at which a projected latent's element changed (per
    variable; the assignments are the only work of a step that needs the host).
    ``start`` is weight matching's transform under ``group`` with the same seed and
    ``within_heads`` (acting on B as processed), when the caller has it already (the cache):
    ``init="weight"`` then starts from it instead of matching again.
    """
    opts = given_settings(LearnedOptions, options, what="learned matching", **settings)
    lam = opts.lam
    if lam not in LAMBDAS:
        raise ValueError(f"unknown λ distribution {lam!r}; expected one of {LAMBDAS}")
    gen = torch.Generator().manual_seed(context.seed)
    draw = _lambda_sampler(lam, gen)

    def sample() -> list[float]:
        t = draw()
        return [t, 1 - t]

    mixes = [[t, 1 - t] for t in _eval_lambdas(lam)]
    merged = MergedLoss(train_split, sample, mixes, gen, {"lam": lam})
    (r,) = learn(cfg, params_a, [params_b], group, merged, opts, context, [start])
    return r


def learned_triangle(
    cfg: ModelConfig,
    params_a: Params,
    others: tuple[Params, Params],
    group: str,
    train_split: Any,
    *,
    options: LearnedOptions | None = None,
    context: MatchContext = MATCH_CONTEXT,
    starts: tuple[Transform | None, Transform | None] = (None, None),
    **settings: Any,
) -> tuple[MatchResult, MatchResult]:
    """Learn the transforms of B and C (``others``) onto A jointly, over the whole triangle.

    The loss is ``E_w CE(w_A·θ_A + w_B·π_B(θ_B) + w_C·π_C(θ_C))`` with ``w`` drawn uniformly on
    the simplex (Dirichlet(1, 1, 1)), so the two transforms are learned for every mixture of the
    three models, not edge by edge; the scoring slice is evaluated at the centroid and the three
    edge midpoints. Each transform starts from its own pairwise start (weight matching onto A, or
    the identity) and keeps its model's function exactly. Settings and context as
    :func:`learned_matching` (``starts``: B's and C's weight matching onto A, when known; the
    context's ``on_elements`` hears B's elements); returns (B's result, C's result), each with
    ``info["joint"] = True``. The mixtures are drawn from Dirichlet(1, 1, 1), so ``lam`` is not
    a setting here.
    """
    opts = given_settings(LearnedOptions, options, what="learned matching", **settings)
    if opts.lam != LearnedOptions.lam:
        raise ValueError("a joint triangle draws its mixtures from Dirichlet(1, 1, 1): no lam")
    gen = torch.Generator().manual_seed(context.seed)

    def sample() -> list[float]:
        e = -torch.rand(3, generator=gen, dtype=torch.float64).clamp_min(1e-12).log()
        return (e / e.sum()).tolist()

    third, half = 1.0 / 3.0, 0.5
    mixes = [[third] * 3, [half, half, 0.0], [half, 0.0, half], [0.0, half, half]]
    merged = MergedLoss(train_split, sample, mixes, gen, {"lam": "dirichlet(1,1,1)", "joint": True})
    b, c = learn(cfg, params_a, list(others), group, merged, opts, context, list(starts))
    return b, c


def _run(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    options: LearnedOptions,
    *,
    train_split: Any,
    context: MatchContext,
    **hooks: Any,
) -> MatchResult:
    if train_split is None:
        raise ValueError("learned matching needs a train_split")
    return learned_matching(cfg, params_a, params_b, group, train_split, options=options,
                            context=context, **hooks)  # fmt: skip


LEARNED = MatchingMethod("learned", "learned matching", LearnedOptions, _run, needs_data=True,
                         learned=True, hooks=("start",))  # fmt: skip
