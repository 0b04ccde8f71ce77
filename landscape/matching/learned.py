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

Determinant flips: the sign of det G_resid is tracked; under the polar parametrisation a change
means Z crossed a singular matrix and the polar factor jumped between the two components of O(d)
(or, for permutations, an odd relabelling). They are counted and reported; the exponential
parametrisation has none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.matching.methods import (
    MatchingMethod,
    given_settings,
    matching_kinds,
    prepare_pair,
    refuse_experts,
)
from landscape.matching.result import (
    MatchResult,
    aligned_distance,
    function_check,
    weight_distance,
)
from landscape.matching.solvers import solve
from landscape.matching.weight import weight_matching
from landscape.models import ModelConfig, Params, forward
from landscape.models.circuits import (
    check_circuit_form,
    check_space,
    circuit_forms,
    circuit_forms_config,
)
from landscape.models.registry import architecture_of
from landscape.progress import Progress
from landscape.symmetry import (
    ABS,
    GROUP_OF,
    ORTH,
    ORTH_MEAN,
    PERM_OF,
    Element,
    Spec,
    Transform,
    apply,
    spec_for,
)

LAMBDAS = ("u(0.4,0.6)", "u(0,1)", "0.5")
INITS = ("weight", "identity")
ORTH_PARAMS = ("exp", "polar")
# Defaults measured on zoo pairs and a 2-layer GPT-2 pair (300 steps; test-loss barriers):
# batches of 64 images or 8,192 tokens, lr 0.1, did as well as 256 at a quarter of the time.
BATCH_ROWS = 64  # rows per step (images, feature vectors)
BATCH_TOKENS = 8192  # positions per step of a language model's windows
EVAL_ROWS = 1024  # rows of the fixed scoring slice (images, feature vectors)
EVAL_TOKENS = 16384  # positions of the scoring slice of a language model's windows

# Told the projected elements at every scoring point (step 0: the start)
OnEval = Callable[[int, Mapping[str, Element]], None]


@dataclass(frozen=True)
class LearnedOptions:
    """The settings of learned matching, pairwise (:func:`learned_matching`) and over a
    triangle (:func:`learned_triangle`), written once (their meaning: :func:`learned_matching`).
    """

    init: str = "weight"  # INITS: start from weight matching, or from the identity
    lam: str = "u(0.4,0.6)"  # LAMBDAS: the distribution of λ (pairwise only)
    steps: int = 300
    lr: float = 0.1  # rotations: Adam's step in units of the element's RMS entry 1/√n
    lr_perm: float = 0.1  # the same for permutation latents
    batch_size: int | None = None  # rows per step (None: BATCH_ROWS, or BATCH_TOKENS tokens)
    orth: str = "exp"  # ORTH_PARAMS: rotations as G₀·exp(S − Sᵀ), or projected latents
    space: str = "weights"  # the merge space of the loss (landscape.models.circuits)
    within_heads: bool = True  # weight matching's start matches the per-head maps too
    eval_every: int = 25  # steps between scorings of the projected transform
    eval_size: int | None = None  # rows of the scoring slice (None: EVAL_ROWS, or EVAL_TOKENS)
    dual: bool = False  # pairwise: learn A's transform too (from the identity), :func:`_learn`


__all__ = [
    "INITS",
    "LAMBDAS",
    "LEARNED",
    "LearnedOptions",
    "ORTH_PARAMS",
    "OnEval",
    "apply_dense",
    "learned_matching",
    "learned_triangle",
    "project",
]


def project(kind: str, z: torch.Tensor, group: int = 1) -> Element:
    """The element of ``kind`` nearest to Z: maximises ``tr(Gᵀ Z)`` over the group (float64).

    ``group`` > 1 (grouped-query heads): permutations moving blocks of that many slots.
    """
    # solve maximises Σ_i s_i M[i, π(i)] with G[π(i), i] = s_i, i.e. tr(Gᵀ Mᵀ): pass M = Zᵀ
    return solve(kind, z.detach().to("cpu", torch.float64).T, group=group)


def apply_dense(
    spec: Spec,
    mats: Mapping[str, torch.Tensor],
    params: Params,
    abs_mats: Mapping[str, torch.Tensor] | None = None,
) -> Params:
    """Differentiable ``apply`` for dense orthogonal elements (one matrix per plain variable).

    Along every axis with a role of a variable in ``mats``: ``W'[.., i, ..] = Σ_j M[j, i]·W[.., j,
    ..]`` with M = G for "G" and "G⁻ᵀ" (equal for the orthogonal matrices used here: the forward
    value of a straight-through G is always a group element), and M = |G| for gains and gated-FFN
    gates (P(G)), taken from ``abs_mats`` when given (so the straight-through gradient survives)
    else ``G.abs()``. Grouped-query K/V heads (G/group) take the block means of G over the
    variable's groups: for a block-moving permutation that is the induced permutation of groups.
    Works from the spec's axes only: no per-architecture code.

    The parameters are visited in name order, whatever order the dict holds them in: autograd
    sums the gradient of a shared matrix over them in that order, and a different summation
    order rounds differently, which the optimisation then amplifies. A checkpoint just trained
    and the same one read back from the cache (whose tensors come in name order) thus learn the
    same alignment.
    """
    out: Params = {}
    for name in sorted(params):
        w = params[name]
        for axis, role in enumerate(spec.axes[name]):
            if role is None or role.var not in mats:
                continue
            m = mats[role.var]
            if role.act in (ABS, PERM_OF):
                m = abs_mats[role.var] if abs_mats is not None else m.abs()
            elif role.act == GROUP_OF:
                r = spec.variables[role.var].group
                m = m.reshape(m.shape[0] // r, r, m.shape[1] // r, r).sum((1, 3)) / r
            w = (w.movedim(axis, -1) @ m.to(w.dtype)).movedim(-1, axis)
        out[name] = w
    return {name: out[name] for name in params}


def _lambda_sampler(lam: str, gen: torch.Generator) -> Callable[[], float]:
    if lam == "u(0.4,0.6)":
        return lambda: 0.4 + 0.2 * float(torch.rand(1, generator=gen))
    if lam == "u(0,1)":
        return lambda: float(torch.rand(1, generator=gen))
    if lam == "0.5":
        return lambda: 0.5
    raise ValueError(f"unknown λ distribution {lam!r}; expected one of {LAMBDAS}")


def _on_own_heads(inner: Element, heads: Element) -> Element:
    """Per-head maps indexed by slot after ``heads`` (slot i holds B's head ``heads.perm[i]``),
    re-indexed by B's own head numbers."""
    return Element(inner.kind, matrix=inner.matrix[torch.argsort(heads.perm)], over=inner.over)


def _on_slots(inner: Element, heads: Element) -> Element:
    """Per-head maps indexed by B's own heads, re-indexed by slot after ``heads``."""
    return Element(inner.kind, matrix=inner.matrix[heads.perm], over=inner.over)


def _eval_lambdas(lam: str) -> list[float]:
    """Quartiles of the λ distribution: where the kept transform is scored."""
    return {"u(0.4,0.6)": [0.45, 0.5, 0.55], "u(0,1)": [0.25, 0.5, 0.75], "0.5": [0.5]}[lam]


def _det_sign(g: torch.Tensor) -> int:
    return int(torch.sign(torch.linalg.det(g)).item())


def _element_det_sign(e: Element) -> int:
    """sign det G of an element on the host: a monomial's from its permutation's parity and its
    signs (no determinant, no device), a dense one's from its determinant."""
    if not e.is_monomial:
        return _det_sign(e.matrix)
    perm, seen, odd = e.perm.tolist(), [False] * len(e.perm), 0
    for i in range(len(perm)):  # parity: a cycle of length k is k − 1 transpositions
        j, length = i, 0
        while not seen[j]:
            seen[j], j, length = True, perm[j], length + 1
        odd ^= max(length - 1, 0) & 1
    negative = int((e.scale < 0).sum()) & 1
    return -1 if odd ^ negative else 1


def _same(a: Element, b: Element) -> bool:
    if a.is_monomial:
        return torch.equal(a.perm, b.perm) and torch.equal(a.scale, b.scale)
    return torch.equal(a.matrix, b.matrix)


def _project_all(latents: list[tuple[str, torch.Tensor, int]]) -> list[Element]:
    """:func:`project` of several latents ``(kind, Z, group)`` with one copy to the host: the
    assignments run on the CPU, and one copy of all latents waits for the device once a step,
    not once a variable. Elements on the CPU."""
    if not latents:
        return []
    flat = torch.cat([z.detach().reshape(-1) for _, z, _ in latents]).to("cpu", torch.float64)
    out, at = [], 0
    for kind, z, group in latents:
        host = flat[at : at + z.numel()].view(z.shape)
        at += z.numel()
        out.append(solve(kind, host.T, group=group))
    return out


def _dense_on(elements: list[Element], dev: torch.device) -> list[torch.Tensor]:
    """The elements as float32 matrices on ``dev``, from one copy of their permutations and
    signs (or dense matrices), the matrices built there (the same path on every device)."""
    if not elements:
        return []
    parts = [torch.cat([e.perm.double(), e.scale]) if e.is_monomial else e.matrix.reshape(-1)
             for e in elements]  # fmt: skip
    packed = torch.cat(parts)
    if dev.type == "cuda":
        packed = packed.pin_memory()
    # float32 holds every unit index below 2²⁴ and every sign exactly, and is what the step uses
    packed = packed.to(dev, torch.float32, non_blocking=True)
    out, at = [], 0
    for e in elements:
        if e.is_monomial:
            k = len(e.perm)
            perm, scale = packed[at : at + k].long(), packed[at + k : at + 2 * k]
            at += 2 * k
            m = torch.zeros(k, k, dtype=torch.float32, device=dev)
            m[perm, torch.arange(k, device=dev)] = scale
        else:
            m = packed[at : at + e.matrix.numel()].view(e.matrix.shape)
            at += e.matrix.numel()
        out.append(m)
    return out


def learned_matching(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    train_split: Any,
    *,
    options: LearnedOptions | None = None,
    seed: int = 0,
    device: torch.device | None = None,
    progress: Progress | None = None,
    on_eval: OnEval | None = None,
    start: Transform | None = None,
    **settings: Any,
) -> MatchResult:
    """Learn the transform of B by minimising the merged model's loss (module docstring).

    Its settings (:class:`LearnedOptions`) come as ``options`` or as keywords, keywords over
    ``options``. ``train_split`` has ``inputs`` and ``targets`` (a ``data.Split``); batches of
    ``batch_size`` rows (default 64, or 8,192 tokens of a language model's windows) are drawn in
    seeded shuffled epochs. ``init="weight"`` starts from weight matching under ``group`` (seed
    ``seed``), ``"identity"`` from the identity. ``orth`` is the parametrisation of rotations:
    ``"exp"`` (G = G₀·exp(S − Sᵀ), never singular) or ``"polar"`` (a free latent projected each
    step, straight-through). ``space`` is the merge space of the loss: ``"weights"`` or
    ``"circuits"`` (the endpoints rewritten together, ``landscape.models.circuits``). ``lr``
    (rotations) and ``lr_perm`` (permutation latents) are Adam's step in units of the group
    element's RMS entry 1/√n, decayed to 0 on a cosine. Every ``eval_every`` steps the projected
    transform is scored by the merged loss on a fixed slice of the training rows (``eval_size``;
    default 1,024 rows, or 16,384 tokens of a language model's windows) at three λ (the
    quartiles of the λ distribution), and the best one seen, the start included, is returned
    (``info["selected_step"]``, ``info["eval_curve"]``). ``progress``
    (:mod:`landscape.progress`) hears ``("learned matching step i/steps", i, steps)`` after each
    step i. ``on_eval(step, elements)`` is told the projected elements at every scoring point
    (step 0, the start, included), within-head maps by slot as in the returned transform, acting
    on B as processed (``prepare_pair`` under ``group``); the one returned is the call at
    ``info["selected_step"]``.
    ``lm_curve`` records the merged loss ``[{step, loss}]`` (loss of the λ drawn at that step);
    ``det_flips`` the sign changes of det G_resid; ``info`` the start, the settings, how many
    units changed assignment per variable (``moved``), ‖G − G_init‖ for a dense resid and
    ``projection_changes``, the steps at which a projected latent's element changed (per
    variable; the assignments are the only work of a step that needs the host).
    ``start`` is weight matching's transform under ``group`` with the same ``seed`` and
    ``within_heads`` (acting on B as processed), when the caller has it already (the cache):
    ``init="weight"`` then starts from it instead of matching again.
    """
    opts = given_settings(LearnedOptions, options, what="learned matching", **settings)
    refuse_experts(cfg, "learned matching")
    lam = opts.lam
    if lam not in LAMBDAS:
        raise ValueError(f"unknown λ distribution {lam!r}; expected one of {LAMBDAS}")
    gen = torch.Generator().manual_seed(seed)
    draw = _lambda_sampler(lam, gen)

    def sample() -> list[float]:
        t = draw()
        return [t, 1 - t]

    mixes = [[t, 1 - t] for t in _eval_lambdas(lam)]
    (r,) = _learn(cfg, params_a, [params_b], group, train_split, sample, mixes, gen, opts,
                  seed=seed, device=device, progress=progress,
                  on_eval=None if on_eval is None else lambda step, els: on_eval(step, els[0]),
                  about={"lam": lam}, starts=[start])  # fmt: skip
    return r


def learned_triangle(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    params_c: Params,
    group: str,
    train_split: Any,
    *,
    options: LearnedOptions | None = None,
    seed: int = 0,
    device: torch.device | None = None,
    progress: Progress | None = None,
    starts: tuple[Transform | None, Transform | None] = (None, None),
    **settings: Any,
) -> tuple[MatchResult, MatchResult]:
    """Learn the transforms of B and C onto A jointly, over the whole triangle.

    The loss is ``E_w CE(w_A·θ_A + w_B·π_B(θ_B) + w_C·π_C(θ_C))`` with ``w`` drawn uniformly on
    the simplex (Dirichlet(1, 1, 1)), so the two transforms are learned for every mixture of the
    three models, not edge by edge; the scoring slice is evaluated at the centroid and the three
    edge midpoints. Each transform starts from its own pairwise start (weight matching onto A, or
    the identity) and keeps its model's function exactly. Settings as :func:`learned_matching`
    (``starts``: B's and C's weight matching onto A, when known); returns (B's result, C's
    result), each with ``info["joint"] = True``. The mixtures are drawn from Dirichlet(1, 1, 1),
    so ``lam`` is not a setting here.
    """
    opts = given_settings(LearnedOptions, options, what="learned matching", **settings)
    refuse_experts(cfg, "learned matching")
    if opts.lam != LearnedOptions.lam:
        raise ValueError("a joint triangle draws its mixtures from Dirichlet(1, 1, 1): no lam")
    gen = torch.Generator().manual_seed(seed)

    def sample() -> list[float]:
        e = -torch.rand(3, generator=gen, dtype=torch.float64).clamp_min(1e-12).log()
        return (e / e.sum()).tolist()

    third, half = 1.0 / 3.0, 0.5
    mixes = [[third] * 3, [half, half, 0.0], [half, 0.0, half], [0.0, half, half]]
    b, c = _learn(cfg, params_a, [params_b, params_c], group, train_split, sample, mixes, gen,
                  opts, seed=seed, device=device, progress=progress,
                  about={"lam": "dirichlet(1,1,1)", "joint": True},
                  starts=list(starts))  # fmt: skip
    return b, c


def _learn(
    cfg: ModelConfig,
    params_a: Params,
    others: list[Params],
    group: str,
    train_split: Any,
    sample: Callable[[], list[float]],
    mixes: list[list[float]],
    gen: torch.Generator,
    options: LearnedOptions,
    *,
    seed: int,
    device: torch.device | None,
    progress: Progress | None,
    about: dict[str, Any],
    on_eval: Callable[[int, list[dict[str, Element]]], None] | None = None,
    starts: list[Transform | None] | None = None,
) -> list[MatchResult]:
    """The learning loop of :func:`learned_matching` and :func:`learned_triangle`: one set of
    latents per model in ``others``, all moved by one optimiser on the loss of the mixture
    ``sample()`` = [w_A, w_1, …] (weights summing to 1); ``mixes`` are the mixtures the scoring
    slice is evaluated at; ``starts`` the known weight matchings of ``others`` (None: match);
    ``about`` goes into every result's ``info`` (how the mixtures were drawn).

    ``options.dual`` (one model in ``others``): A gets latents of its own too, started at the
    identity, and the loss is that of λ·π_A(θ_A) + (1−λ)·π_B(θ_B): both endpoints move. Every
    group here acts linearly on the parameters and keeps the function of any parameters, so
    that line is π_A applied to the line between θ_A and π_A⁻¹π_B(θ_B), with the same loss at
    every λ: moving both endpoints reaches no line that moving B alone cannot. What is returned
    is therefore B's single-sided equivalent π_A⁻¹∘π_B (A as processed), and ``info["dual"]``
    holds the largest loss gap between the two lines at the scoring mixtures (float64), which
    is rounding; what the dual parametrisation can change is only the path the optimiser
    takes."""
    t0 = time.perf_counter()
    o = options
    init, steps, lr, lr_perm, orth = o.init, o.steps, o.lr, o.lr_perm, o.orth
    space, within_heads, eval_every = o.space, o.within_heads, o.eval_every
    batch_size, eval_size = o.batch_size, o.eval_size
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; expected one of {INITS}")
    if orth not in ORTH_PARAMS:
        raise ValueError(f"unknown orth parametrisation {orth!r}; expected one of {ORTH_PARAMS}")
    check_space(space)
    dev = device if device is not None else CPU
    if progress is not None:
        progress("learned matching: preparing the pair", 0, steps)
    prepared = [prepare_pair(cfg, params_a, p, group) for p in others]
    cfg_p, a = prepared[0][0], prepared[0][1]
    if space == "circuits":
        check_circuit_form(cfg_p)
    spec = spec_for(cfg_p)
    kinds = matching_kinds(spec, group)
    sizes = {v: spec.variables[v].size for v in kinds}
    groups = {v: spec.variables[v].group for v in kinds}
    # rotations by the exponential of a skew matrix: G₀·exp(K) is orthogonal for every latent,
    # stays in G₀'s component of O(d) and needs no projection; the rest: projected latents
    rotations = {v for v in kinds if kinds[v] in (ORTH, ORTH_MEAN) and orth == "exp"}
    # rotations fixing the mean direction: the skew generator with 1 in its kernel, P·K·P with
    # P = I − 11ᵀ/n, whose exponential fixes 1 (as G₀ does)
    centring = {v: torch.eye(sizes[v], device=dev) - 1.0 / sizes[v]
                for v in rotations if kinds[v] == ORTH_MEAN}  # fmt: skip
    a_dev = {k: v.detach().to(dev, torch.float32) for k, v in a.items()}

    members = []
    starts = starts if starts is not None else [None] * len(others)
    for params, (_, _, b), known in zip(others, prepared, starts, strict=True):
        if init == "identity":
            start = Transform({})
        elif known is not None:
            start = known.to("cpu")
        else:
            start = weight_matching(cfg, params_a, params, group, seed=seed,
                                    within_heads=within_heads, device=dev).transform  # fmt: skip
        g_init = {
            v: start.matrix(v) if v in start.elements else torch.eye(sizes[v], dtype=torch.float64)
            for v in kinds
        }
        # the start's within-head maps stay as found: moved onto B's own heads once, they travel
        # with them whatever head permutation is learned (re-indexed at the end)
        inner = {v: e for v, e in start.elements.items() if e.over is not None}
        in_b = {v: _on_own_heads(e, start.elements[e.over]) for v, e in inner.items()}
        b_inner = apply(spec, Transform(in_b), b) if in_b else b
        g0 = {v: g_init[v].to(dev, torch.float32) for v in rotations}
        latents = {
            v: (
                torch.zeros_like(g0[v]) if v in rotations else g.to(dev, torch.float32).clone()
            ).requires_grad_(True)
            for v, g in g_init.items()
        }
        b_dev = {k: v.detach().to(dev, torch.float32) for k, v in b_inner.items()}
        members.append(_Member(params, b, start, g_init, in_b, g0, latents, b_dev))

    dual = o.dual
    if dual:  # A moves too: a member of its own, first, started at the identity
        if len(others) != 1:
            raise ValueError("dual learned matching is pairwise (one model besides A)")
        eye = {v: torch.eye(sizes[v], dtype=torch.float64) for v in kinds}
        g0_a = {v: eye[v].to(dev, torch.float32) for v in rotations}
        latents_a = {v: (torch.zeros_like(g0_a[v]) if v in rotations
                         else eye[v].to(dev, torch.float32).clone()).requires_grad_(True)
                     for v in kinds}  # fmt: skip
        members.insert(0, _Member(params_a, a, Transform({}), eye, {}, g0_a, latents_a, a_dev))
    fixed = [] if dual else [a_dev]  # the endpoints that do not move

    base_lr = {v: (lr if kinds[v] in (ORTH, ORTH_MEAN) else lr_perm) / math.sqrt(sizes[v])
               for v in kinds}  # fmt: skip
    opt = torch.optim.Adam(
        [{"params": [z], "lr": base_lr[v]} for m in members for v, z in m.latents.items()]
    )
    # cosine decay to 0: late steps only polish, so the final projection is no random jump
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: 0.5 * (1 + math.cos(math.pi * step / max(steps, 1)))
    )
    inputs, targets = train_split.inputs, train_split.targets
    if dev.type == "cuda":  # the split on the device once: no host copy (and wait) per step
        inputs, targets = inputs.to(dev), targets.to(dev)
    n = inputs.shape[0]
    order, cursor = torch.randperm(n, generator=gen).to(inputs.device), 0

    if space == "circuits":  # A and every moved member rewritten together (circuit_forms)
        cfg_m = circuit_forms_config(cfg_p, len(fixed) + len(members))

        def in_space(ps: list[Params]) -> list[Params]:
            return circuit_forms(cfg_p, ps)[1]
    else:
        cfg_m = cfg_p

        def in_space(ps: list[Params]) -> list[Params]:
            return ps

    # a fixed slice of the training data scores the hard transforms every ``eval_every`` steps
    # at mixtures of the training distribution; the best transforms seen (the start included)
    # are kept
    tokens = architecture_of(cfg).inputs == "tokens" and inputs.ndim == 2
    if batch_size is None:
        batch_size = max(1, BATCH_TOKENS // inputs.shape[1]) if tokens else BATCH_ROWS
    batch_size = min(batch_size, n)
    if eval_size is None:
        eval_size = max(64, EVAL_TOKENS // inputs.shape[1]) if tokens else EVAL_ROWS
    ev = torch.randperm(n, generator=gen)[: min(n, eval_size)]
    x_ev, y_ev = inputs[ev].to(dev), targets[ev].to(dev)

    def merged_loss(mats, abs_mats, x, y, ws, each=None) -> torch.Tensor:
        moved = [apply_dense(spec, mt, m.b_dev, ab)
                 for m, mt, ab in zip(members, mats, abs_mats, strict=True)]  # fmt: skip
        a_m, *moved_all = in_space([*fixed, *moved])
        total = 0.0
        for w in ws:
            mix = {k: w[0] * a_m[k] + sum(wi * p[k] for wi, p in zip(w[1:], moved_all, strict=True))
                   for k in a_m}  # fmt: skip
            # the inference path, explicitly: fused attention and norms, differentiable, and
            # faster than the reference path under autograd (1.7× on a 2-layer GPT-2 pair)
            logits = forward(cfg_m, mix, x, fast=True)
            total = total + F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            if each is not None:
                each()
        return total / len(ws)

    def score(elements: list[dict[str, Element]], what: str, at: float) -> float:
        """The scoring slice's loss at every mixture, each mixture told to ``progress`` as
        ``what`` (seconds each on a large model)."""
        done = 0

        def each() -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(f"{what} (mixture {done}/{len(mixes)})", at, steps)

        with torch.no_grad():
            mats = [{v: e.dense().to(dev, torch.float32) for v, e in el.items()}
                    for el in elements]  # fmt: skip
            return float(merged_loss(mats, [None] * len(mats), x_ev, y_ev, mixes, each))

    def rotation(m: _Member, v: str) -> torch.Tensor:
        z = m.latents[v]
        k = z - z.T
        if v in centring:
            k = centring[v] @ k @ centring[v]
        return m.g0[v] @ torch.linalg.matrix_exp(k)

    def hard_elements() -> list[dict[str, Element]]:
        with torch.no_grad():
            every = [(i, v, rotation(m, v) if v in rotations else z)
                     for i, m in enumerate(members) for v, z in m.latents.items()]  # fmt: skip
            found = _project_all([(kinds[v], t, groups[v]) for _, v, t in every])
        out: list[dict[str, Element]] = [{} for _ in members]
        for (i, v, _), e in zip(every, found, strict=True):
            out[i][v] = e
        return out

    def with_inner(elements: list[dict[str, Element]]) -> list[dict[str, Element]]:
        # each start's within-head maps, from its own heads to the slots of ``elements``' heads
        return [{**el, **{v: _on_slots(e, el[e.over]) for v, e in m.in_b.items()}}
                for m, el in zip(members, elements, strict=True)]  # fmt: skip

    best = hard_elements()
    if progress is not None:  # the scoring slice at several mixtures: a while on large models
        progress("learned matching: scoring the start", 0, steps)
    best_loss, best_step = score(best, "learned matching: scoring the start", 0), 0
    if on_eval is not None:
        on_eval(0, with_inner(best))
    eval_curve = [{"step": 0, "loss": best_loss}]
    losses: list[torch.Tensor] = []
    flips: list[list[int]] = [[] for _ in members]
    last_det = [_det_sign(m.g_init["resid"]) for m in members]
    # the latents projected each step (rotations by the exponential need none), in one order
    projected = [(i, v) for i, m in enumerate(members) for v in m.latents if v not in rotations]
    last: list[Element | None] = [None] * len(projected)
    changes = [{v: 0 for v in m.latents if v not in rotations} for m in members]
    for step in range(steps):
        if cursor + batch_size > n:
            order, cursor = torch.randperm(n, generator=gen).to(inputs.device), 0
        idx = order[cursor : cursor + batch_size]
        cursor += batch_size
        x, y = inputs[idx].to(dev), targets[idx].to(dev)

        # every projection of the step from one copy of the latents to the host, and back in one
        elements = _project_all([(kinds[v], members[i].latents[v], groups[v])
                                 for i, v in projected])  # fmt: skip
        hard_dense = dict(zip(projected, _dense_on(elements, dev), strict=True))
        for k, ((i, v), e) in enumerate(zip(projected, elements, strict=True)):
            if last[k] is not None and not _same(last[k], e):
                changes[i][v] += 1
            last[k] = e
            if v == "resid":  # det of the exact element, on the host where it already is
                det = _element_det_sign(e)
                if det != last_det[i]:
                    flips[i].append(step)
                last_det[i] = det
        mats, abs_mats = [], []
        for i, m in enumerate(members):
            mt, ab = {}, {}
            for v, z in m.latents.items():
                if v in rotations:  # an exact group element with its own gradient
                    mt[v] = rotation(m, v)
                    ab[v] = mt[v].abs()
                    continue
                hard = hard_dense[i, v]
                mt[v] = z + (hard - z).detach()  # straight through the projection
                ab[v] = torch.where(hard < 0, -1.0, 1.0) * mt[v]  # value |G|, grad via G
            mats.append(mt)
            abs_mats.append(ab)
        loss = merged_loss(mats, abs_mats, x, y, [sample()])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        with torch.no_grad():
            for m in members:
                for v, z in m.latents.items():
                    if v not in rotations:  # projections ignore the scale: keep RMS entry 1/√n
                        z.mul_(math.sqrt(sizes[v]) / z.norm().clamp_min(1e-12))
        losses.append(loss.detach())  # read once after the loop: no host sync per step
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            if progress is not None:
                progress(f"learned matching step {step + 1}/{steps}: scoring", step + 0.5, steps)
            elements = hard_elements()
            current = score(elements, f"learned matching step {step + 1}/{steps}: scoring",
                            step + 0.5)  # fmt: skip
            eval_curve.append({"step": step + 1, "loss": current})
            if on_eval is not None:
                on_eval(step + 1, with_inner(elements))
            if current < best_loss:
                best, best_loss, best_step = elements, current, step + 1
        if progress is not None:
            progress(f"learned matching step {step + 1}/{steps}", step + 1, steps)

    values = torch.stack(losses).tolist() if losses else []
    curve = [{"step": i, "loss": v} for i, v in enumerate(values)]
    a64 = {k: v.double() for k, v in a.items()}
    out = []
    fulls = with_inner(best)
    t_a = None
    if dual:  # A's learned element, and B's results alone from here
        t_a = Transform(fulls[0])
        members, best, fulls, flips, changes = (x[1:] for x in (members, best, fulls, flips,
                                                                changes))  # fmt: skip
    for m, elements, full, flip_steps, changed in zip(members, best, fulls, flips, changes,
                                                      strict=True):  # fmt: skip
        transform = Transform(full)
        about_dual = {}
        if t_a is not None:  # B's single-sided equivalent π_A⁻¹∘π_B, checked against the pair
            about_dual = {"dual": _dual_check(cfg_p, spec, a, m.b, t_a, transform, x_ev, y_ev,
                                              mixes)}  # fmt: skip
            transform = t_a.inverse().compose(transform)
        dtype = next(iter(m.params.values())).dtype
        aligned = {k: v.to(dtype) for k, v in apply(spec, transform, m.b).items()}
        check = function_check(cfg, m.params, cfg_p, aligned)
        if not check < 1e-3:
            # NaN included: a model whose logits are not finite has no function to keep
            raise LandscapeError(
                f"learned matching: the learned transform changes B's function (max |Δlogits| "
                f"{check:.3g}; B's logits {'are not finite' if math.isnan(check) else 'moved'})"
            )
        moved = {  # units whose assignment differs from the start
            v: int((project(kinds[v], m.g_init[v], groups[v]).perm != e.perm).sum())
            for v, e in elements.items()
            if e.is_monomial
        }
        info = {
            "init": init,
            **about,
            "steps": steps,
            "lr": lr,
            "lr_perm": lr_perm,
            "batch_size": batch_size,
            "orth": orth,
            "space": space,
            "within_heads": sorted(m.in_b),
            "eval_size": int(x_ev.shape[0]),
            "seed": seed,
            "moved": moved,
            "resid_change": float((elements["resid"].dense() - m.g_init["resid"]).norm()),
            "det_flip_steps": flip_steps,
            "projection_changes": changed,
            "selected_step": best_step,
            "eval_curve": eval_curve,
            "start_objective": aligned_distance(spec, m.start.elements, a, m.b),
            **about_dual,
        }
        start_b = apply(spec, m.start, m.b)
        out.append(MatchResult(
            "learned",
            group,
            transform,
            cfg_p,
            {k: v.to(dtype) for k, v in a.items()},
            aligned,
            objective=[
                weight_distance(a64, {k: v.to(dtype).double() for k, v in start_b.items()}),
                weight_distance(a64, {k: v.double() for k, v in aligned.items()}),
            ],
            rounds=steps,
            det_flips=len(flip_steps),
            lm_curve=curve,
            function_check=check,
            seconds=time.perf_counter() - t0,
            info=info,
        ))  # fmt: skip
    return out


def _dual_check(cfg: ModelConfig, spec: Spec, a: Params, b: Params, t_a: Transform,
                t_b: Transform, x: torch.Tensor, y: torch.Tensor,
                mixes: list[list[float]]) -> dict[str, Any]:  # fmt: skip
    """The line between π_A(θ_A) and π_B(θ_B) against the line between θ_A and π_A⁻¹π_B(θ_B):
    the largest difference of their losses at ``mixes`` on (a few rows of) the scoring slice,
    in float64, and how far A's own transform moved (‖G_A − I‖ of its residual element)."""
    f64 = {k: v.detach().cpu().double() for k, v in a.items()}
    g64 = {k: v.detach().cpu().double() for k, v in b.items()}
    both = (apply(spec, t_a, f64), apply(spec, t_b, g64))
    one = (f64, apply(spec, t_a.inverse().compose(t_b), g64))
    rows = x[:8].cpu()
    if rows.is_floating_point():
        rows = rows.double()
    target = y[:8].cpu().reshape(-1)
    gap = 0.0
    with torch.no_grad():
        for w in mixes:
            losses = []
            for pa, pb in (both, one):
                mixed = {k: w[0] * pa[k] + w[1] * pb[k] for k in pa}
                logits = forward(cfg, mixed, rows)
                losses.append(float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    target)))  # fmt: skip
            gap = max(gap, abs(losses[0] - losses[1]))
    g = t_a.matrix("resid")
    moved = 0.0 if g is None else float((g - torch.eye(g.shape[0], dtype=g.dtype)).norm())
    return {"line_gap": gap, "a_resid_change": moved}


@dataclass
class _Member:
    """One model whose transform onto A is learned: its parameters (as given and processed),
    its start, the start's within-head maps on its own heads, and its latents."""

    params: Params
    b: Params  # processed
    start: Transform  # acting on b
    g_init: dict[str, torch.Tensor]
    in_b: dict[str, Element]
    g0: dict[str, torch.Tensor]
    latents: dict[str, torch.Tensor]
    b_dev: Params  # processed, within-head maps applied, on the device in float32


def _run(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    options: LearnedOptions,
    *,
    train_split: Any,
    seed: int,
    device: torch.device | None,
    progress: Progress | None,
    **hooks: Any,
) -> MatchResult:
    if train_split is None:
        raise ValueError("learned matching needs a train_split")
    return learned_matching(cfg, params_a, params_b, group, train_split, options=options,
                            seed=seed, device=device, progress=progress, **hooks)  # fmt: skip


LEARNED = MatchingMethod("learned", "learned matching", LearnedOptions, _run, needs_data=True,
                         learned=True, hooks=("start", "on_eval"))  # fmt: skip
