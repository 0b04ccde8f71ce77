"""Activation matching (AM, docs/design.md §1): the same solvers on activation statistics.

Both models run on one fixed batch; the similarity of A's and B's units comes from the residual
stream at every layer boundary (all positions pooled, standardised per layer, optionally
without the first position), the FFN hidden units and the heads. One pass suffices: hidden
units do not depend on the residual gauge, and the residual element is found first. On a
LayerNorm model rewritten as RMSNorm (centred writers) the stream never leaves 1^⊥, so O(d)
activation matching cannot see the sign of G along 1: the readers' (unused) component along 1
may come out flipped, which changes neither the function nor any interpolated model (every
writer stays centred).

One implementation, :func:`activation_transform`, with two named ways of forming the
similarities (:class:`ActivationSimilarity`), because merging them would move published numbers:

- :data:`MATCHING`, used by :func:`activation_matching` and so by ``match(…, "activation")``
  (barrier tables, pairs, the app's method "activation"): forward passes in float64, statistics
  on the CPU; Pearson correlations per layer (per coordinate z-scored), and for O(d) the centred
  cross-covariance with one scale per model and layer (z-scoring per coordinate would break an
  orthogonal relation); FFN units pooled like the stream (``drop_first`` applies to them too)
  and gated units matched with signs under signed and orthogonal groups; heads assigned on the
  cosine similarity of their residual writes ``z_h·W_O[h]`` (B's in A's coordinates through the
  matched G): activations only, as the method's definition asks.
- :data:`GAUGE_SWEEP`, used by the gauge sweep (``landscape.experiments.gauge.parts``: scramble and
  claim parts): forward passes in the parameters' own precision and on their device (the sweep
  runs on its task's device); centred coordinates scaled to unit norm (Pearson up to the factor
  N − 1), all layers contracted in one sum, and for O(d) the uncentred cross-moment
  ``Σ_l x_Aᵀ x_B`` (for x_B = x_A·G its polar factor is exactly G); FFN units over every
  position and always plain permutations; heads assigned on the QK/OV weight-circuit cost after
  the stream is aligned (:func:`landscape.matching.weight.head_element`), which is exact for a
  scrambled copy of a model. The sign handling of signed residual permutations is the sweep's
  variable (``signs``): its recovery curves compare both.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from landscape.device import CPU
from landscape.matching.methods import (
    MATCH_CONTEXT,
    MatchContext,
    MatchingMethod,
    given_settings,
    matching_kinds,
    prepare_pair,
    refuse_experts,
    setting,
)
from landscape.matching.result import MatchResult, aligned_distance, finish, weight_distance
from landscape.matching.solvers import Signs, solve, solve_grouped_perm
from landscape.matching.weight import head_element, within_head_element, within_head_variables
from landscape.models import ModelConfig, Params, forward
from landscape.progress import tell
from landscape.symmetry import ORTH, ORTH_MEAN, PERM, Element, Transform, apply, spec_for

ROTATIONS = (ORTH, ORTH_MEAN)  # the dense residual kinds: one scale per model and layer

# "pearson": per-coordinate z-scores averaged over rows, layers summed one at a time (O(d): the
# centred cross-covariance, one scale per model). "cosine": centred unit-norm columns contracted
# over all layers at once (O(d): the uncentred cross-moment).
Statistic = Literal["pearson", "cosine"]
# "output": cosine of the heads' residual writes; "circuit": the QK/OV weight-circuit cost.
HeadCost = Literal["output", "circuit"]


@dataclass(frozen=True)
class ActivationSimilarity:
    """How activation matching forms and solves its similarities (module docstring)."""

    statistic: Statistic
    heads: HeadCost
    dtype: torch.dtype | None  # precision of the forward passes; None keeps the parameters'
    on_cpu: bool  # statistics on the CPU (True) or on the device that ran the forward passes
    units_drop_first: bool  # whether ``drop_first`` also leaves position 0 out of FFN units
    signs: Signs = "marginalised"  # signed permutations: on |C| (exact) or on signed C


MATCHING = ActivationSimilarity("pearson", "output", torch.float64, True, True)
GAUGE_SWEEP = ActivationSimilarity("cosine", "circuit", None, False, False)


@dataclass(frozen=True)
class ActivationOptions:
    """The settings of activation matching (:func:`activation_matching`, the method
    ``"activation"``)."""

    batch: int = setting(512, "rows of A's training split it correlates (one fixed batch: "
                              "the first rows)")  # fmt: skip
    drop_first: bool = setting(False, "leave position 0 out (the attention sinks of text "
                                      "models)")  # fmt: skip
    within_heads: bool = setting(True, "also match the per-head maps, by their weight "
                                       "objective")  # fmt: skip


def collect(
    cfg: ModelConfig,
    params: Params,
    inputs: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    to_cpu: bool = False,
) -> dict[str, torch.Tensor]:
    """Every cached activation of one forward pass (``landscape.models.forward``'s cache keys).

    ``dtype`` casts the parameters first (None: keep theirs) and float inputs follow the
    parameters' precision; ``device`` moves both (None: leave them where they are); ``to_cpu``
    brings the activations back to the CPU.
    """
    x = inputs if device is None else inputs.to(device)
    if x.is_floating_point():
        x = x.to(dtype if dtype is not None else next(iter(params.values())).dtype)
    if dtype is not None or device is not None:
        params = {k: v.to(device=device, dtype=dtype) for k, v in params.items()}
    cache: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        forward(cfg, params, x, cache)
    return {k: v.cpu() for k, v in cache.items()} if to_cpu else cache


def pool(x: torch.Tensor, n: int, drop_first: bool) -> torch.Tensor:
    """All positions pooled into rows: [batch(, pos), ..., n] → [rows, n]; ``drop_first`` leaves
    out position 0 (attention-sink coordinates of text models, docs/design.md §1)."""
    if drop_first and x.ndim >= 3:
        x = x[:, 1:]
    return x.reshape(-1, n)


def stream(cache: Mapping[str, torch.Tensor], cfg: ModelConfig, drop_first: bool) -> torch.Tensor:
    """The residual stream at every layer boundary, positions pooled: [n_layers + 1, rows, d]."""
    layers = range(cfg.n_layers + 1)
    return torch.stack([pool(cache[f"resid.{i}"], cfg.d_model, drop_first) for i in layers])


def resid_stack(
    cfg: ModelConfig, params: Params, inputs: torch.Tensor, *, drop_first: bool = False
) -> torch.Tensor:
    """Residual stream at every layer boundary of one forward pass in the parameters' own
    precision, positions pooled: [n_layers + 1, N·pos, d]."""
    return stream(collect(cfg, params, inputs), cfg, drop_first)


def _pearson(xa: torch.Tensor, xb: torch.Tensor, per_coordinate: bool) -> torch.Tensor:
    """Cross-correlation ``C[i, j]`` of A's coordinate i with B's coordinate j (rows = samples).

    ``per_coordinate``: Pearson correlation (each coordinate z-scored). Otherwise the centred
    cross-covariance with one scalar per model (the stream's mean variance), which keeps an
    orthogonal relation exact: B = A·G gives C = Ãᵀ Ã G.
    """
    xa, xb = xa - xa.mean(0), xb - xb.mean(0)
    if per_coordinate:
        xa = xa / (xa.std(0) + 1e-12)
        xb = xb / (xb.std(0) + 1e-12)
    else:
        xa = xa / (xa.pow(2).mean().sqrt() + 1e-12)
        xb = xb / (xb.pow(2).mean().sqrt() + 1e-12)
    return xa.T @ xb / xa.shape[0]


def _standardise(x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    x = x - x.mean(-2, keepdim=True)
    return x / (x.norm(dim=-2, keepdim=True) + 1e-12)


def activation_similarity(
    xa: torch.Tensor, xb: torch.Tensor, kind: str, statistic: Statistic
) -> torch.Tensor:
    """Similarity of A's and B's units from paired activations [L, N, n] (L layers): [n, n].

    ``"pearson"``: ``M = Σ_l corr(x_A^l, x_B^l)`` with each coordinate z-scored, or for O(d)
    ``Σ_l cov(x_A^l, x_B^l)/(s_A^l s_B^l)`` with one scale per model and layer. ``"cosine"``:
    ``M = Σ_l x̃_A^lᵀ x̃_B^l`` with x̃ centred and scaled to unit column norm; for O(d) the
    uncentred cross-moment ``M = Σ_l x_A^lᵀ x_B^l``, which for ``x_B = x_A·G`` is
    ``(Σ_l x_A^lᵀ x_A^l)·G``, whose polar factor is exactly G (a positive-definite left factor
    does not change the polar factor).
    """
    if statistic == "pearson":
        return sum(_pearson(xa[i], xb[i], kind not in ROTATIONS) for i in range(xa.shape[0]))
    if statistic != "cosine":
        raise ValueError(f"unknown statistic {statistic!r}; expected 'pearson' or 'cosine'")
    if kind in ROTATIONS:
        return torch.einsum("lna,lnb->ab", xa.double(), xb.double())
    return torch.einsum("lna,lnb->ab", _standardise(xa), _standardise(xb))


def _output_heads(
    cfg: ModelConfig,
    group: int,
    layer: int,
    caches: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]],
    params: tuple[Params, Params],
    g: torch.Tensor,
    drop_first: bool,
) -> Element:
    """Heads of one layer assigned on the cosine similarity of their residual writes
    ``z_h·W_O[h]`` (all positions), B's taken in A's coordinates through G."""
    d = cfg.d_model
    heads = []
    for cache, p, rot in ((caches[0], params[0], None), (caches[1], params[1], g)):
        w_o = p[f"blocks.{layer}.attn.W_O"].double()
        o = torch.einsum("bphe,hed->hbpd", cache[f"blocks.{layer}.attn.z"], w_o)
        o = o.reshape(o.shape[0], o.shape[1], -1, d)
        if drop_first:
            o = o[:, :, 1:]
        o = o.reshape(o.shape[0], -1, d)
        if rot is not None:
            o = o @ rot.to(o.device)  # B's writes in A's residual coordinates
        o = o.reshape(o.shape[0], -1)
        heads.append(o / (o.norm(dim=1, keepdim=True) + 1e-12))
    perm = solve_grouped_perm(heads[0] @ heads[1].T, group)
    return Element(PERM, perm, torch.ones(len(perm), dtype=torch.float64))


def activation_transform(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    inputs: torch.Tensor,
    kinds: Mapping[str, str],
    *,
    similarity: ActivationSimilarity = MATCHING,
    drop_first: bool = False,
    context: MatchContext = MATCH_CONTEXT,
) -> tuple[Transform, float]:
    """The transform ``h`` aligning B to A from activations on ``inputs``, and for O(d) the
    aligned residual similarity ``tr(Gᵀ M)`` (0 otherwise).

    ``kinds`` gives the residual and FFN-unit kinds (heads are permutations); the parameters
    must already be processed for them (no check here: :func:`activation_matching` processes,
    the gauge sweep passes processed pairs). The context's ``device`` runs the forward passes
    there (None: where the parameters are); its ``progress`` hears the two forward passes and
    each layer's solve (nothing is drawn: its ``seed`` is not read). Returns ``h`` with
    ``apply(h, θ_B) ≈ θ_A``.
    """
    spec, o, progress = spec_for(cfg), similarity, context.progress
    run = {"dtype": o.dtype, "device": context.device, "to_cpu": o.on_cpu}
    steps = 3 + cfg.n_layers
    tell(progress, "activation matching: A's activations", 0, steps)
    ca = collect(cfg, params_a, inputs, **run)
    tell(progress, "activation matching: B's activations", 1, steps)
    cb = collect(cfg, params_b, inputs, **run)
    tell(progress, "activation matching: the stream", 2, steps)
    xa, xb = stream(ca, cfg, drop_first), stream(cb, cfg, drop_first)
    m = activation_similarity(xa, xb, kinds["resid"], o.statistic)
    elements = {"resid": solve(kinds["resid"], m, signs=o.signs).to("cpu")}
    g = elements["resid"].dense()
    similarity = float((g.T * m.cpu()).sum()) if kinds["resid"] in ROTATIONS else 0.0
    drop_units = drop_first and o.units_drop_first
    for layer in range(cfg.n_layers):
        tell(progress, f"activation matching: layer {layer}", 3 + layer, steps)
        key, mv = f"blocks.{layer}.mlp.hidden", f"mlp{layer}"
        h_a, h_b = pool(ca[key], cfg.d_mlp, drop_units), pool(cb[key], cfg.d_mlp, drop_units)
        # gated units: a flipped up projection flips the unit's sign
        c = activation_similarity(h_a[None], h_b[None], kinds[mv], o.statistic)
        elements[mv] = solve(kinds[mv], c, signs=o.signs).to("cpu")
        if cfg.has_attn and o.heads == "output":
            group = spec.variables[f"heads{layer}"].group
            elements[f"heads{layer}"] = _output_heads(
                cfg, group, layer, (ca, cb), (params_a, params_b), g, drop_first
            )
    if cfg.has_attn and o.heads == "circuit":
        b_aligned = apply(spec, Transform(elements), params_b, check=False)
        for layer in range(cfg.n_layers):
            # grouped-query heads move with their key/value group (weight matching's solver)
            hv = f"heads{layer}"
            elements[hv] = head_element(spec, hv, params_a, b_aligned)
    return Transform(elements), similarity


def activation_matching(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    inputs: torch.Tensor,
    *,
    options: ActivationOptions | None = None,
    similarity: ActivationSimilarity = MATCHING,
    context: MatchContext = MATCH_CONTEXT,
    **settings: Any,
) -> MatchResult:
    """Activation matching on one fixed batch ``inputs`` (module docstring, :data:`MATCHING`).

    Its settings (:class:`ActivationOptions`; ``batch`` is for callers that take the batch from
    a training split) come as ``options`` or as keywords (``drop_first``, ``within_heads``).

    Processes A and B for ``group`` (:func:`landscape.matching.methods.prepare_pair`), matches
    the group's kinds (:func:`landscape.matching.methods.matching_kinds`) and returns a
    function-checked :class:`MatchResult`. Residual stream: the correlation matrices of every
    layer boundary ``resid.{l}`` (l = 0..n_layers, all positions pooled) summed and solved by the
    residual kind. FFN units: correlation of ``mlp.hidden``. Heads: cosine similarity of each
    head's residual write, assigned as a permutation. ``drop_first`` leaves out position 0
    (attention sinks of text models). The context's ``device`` runs the forward passes
    (default: the CPU). ``within_heads``: then each head's own QK/OV maps (invertible; QK under
    rotary positions commuting with RoPE; one per key/value group under GQA), which no
    activation of the stream can see, by their weight objective with everything else held
    (:func:`landscape.matching.weight.within_head_element`, one visit each); without them the
    straight line between factored weights averages every head's factors in unrelated bases.
    The context's ``progress`` follows the forward passes and the layers' solves; nothing is
    drawn (its ``seed`` is not read).
    """
    opts = given_settings(ActivationOptions, options, what="activation matching", **settings)
    refuse_experts(cfg, "activation matching")
    drop_first = opts.drop_first
    t0 = time.perf_counter()
    dev = context.device if context.device is not None else CPU
    cfg_p, a, b = prepare_pair(cfg, params_a, params_b, group)
    spec = spec_for(cfg_p)
    kinds = matching_kinds(spec, group)
    transform, aligned_similarity = activation_transform(
        cfg_p, a, b, inputs, kinds, similarity=similarity, drop_first=drop_first,
        context=replace(context, device=dev),
    )  # fmt: skip
    info: dict = {"batch": int(inputs.shape[0]), "drop_first": drop_first,
                  "similarity": aligned_similarity}  # fmt: skip
    if opts.within_heads:
        elements, conds = dict(transform.elements), {}
        for v in within_head_variables(spec):
            kind = spec.variables[v].widest  # invertible, or rope-commuting under RoPE
            elements[v], cond = within_head_element(spec, v, kind, a, b, elements)
            conds[v] = [float(c) for c in cond]
        transform = Transform(elements)
        if conds:
            info["within_heads_cond"] = conds
    objective = [weight_distance(a, b), aligned_distance(spec, transform.elements, a, b)]
    return finish(
        "activation",
        group,
        cfg,
        params_b,
        (cfg_p, a, b),
        transform,
        t0,
        objective=objective,
        rounds=1,
        info=info,
    )


def _run(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    options: ActivationOptions,
    *,
    train_split: Any,
    context: MatchContext,
    inputs: torch.Tensor | None = None,
) -> MatchResult:
    """The method ``"activation"``: on ``inputs`` when given, else the first ``options.batch``
    rows of A's training split."""
    if inputs is None:
        if train_split is None:
            raise ValueError("activation matching needs inputs or a train_split")
        inputs = train_split.inputs[: options.batch]
    return activation_matching(cfg, params_a, params_b, group, inputs, options=options,
                               context=context)  # fmt: skip


ACTIVATION = MatchingMethod("activation", "activation matching", ActivationOptions, _run,
                            needs_data=True, experts=False, fixed_batch="batch",
                            hooks=("inputs",))  # fmt: skip
