"""Learned matching's settings and its one learning loop, shared by the pairwise method and the
joint triangle (``landscape.matching.learned``, whose docstring says what is learned and how):
latents moved by Adam on the merged model's loss, the projected transform scored on a fixed
slice every ``eval_every`` steps, the best one checked and returned.

A mixture of experts keeps its start's expert permutations (``experts{l}``, weight matching's,
or the identity): they are applied to B once, before the loop, and the units inside each
expert slot are learned as a plain FFN's are, one latent per slot.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.matching.latents import (
    apply_dense,
    dense_on,
    det_sign,
    element_det_sign,
    on_own_heads,
    on_slots,
    project,
    project_all,
    same_element,
)
from landscape.matching.methods import MatchContext, matching_kinds, prepare_pair, setting
from landscape.matching.result import (
    MatchResult,
    aligned_distance,
    function_check,
    weight_distance,
)
from landscape.matching.weight import weight_matching
from landscape.models import ModelConfig, Params, forward
from landscape.models.circuits import (
    check_circuit_form,
    check_space,
    circuit_forms,
    circuit_forms_config,
)
from landscape.models.registry import architecture_of
from landscape.symmetry import ORTH, ORTH_MEAN, Element, Spec, Transform, apply, spec_for

LAMBDAS = ("u(0.4,0.6)", "u(0,1)", "0.5")
INITS = ("weight", "identity")
ORTH_PARAMS = ("exp", "polar")
# Defaults measured on zoo pairs and a 2-layer GPT-2 pair (300 steps; test-loss barriers):
# batches of 64 images or 8,192 tokens, lr 0.1, did as well as 256 at a quarter of the time.
BATCH_ROWS = 64  # rows per step (images, feature vectors)
BATCH_TOKENS = 8192  # positions per step of a language model's windows
EVAL_ROWS = 1024  # rows of the fixed scoring slice (images, feature vectors)
EVAL_TOKENS = 16384  # positions of the scoring slice of a language model's windows


@dataclass(frozen=True)
class LearnedOptions:
    """The settings of learned matching, pairwise
    (:func:`~landscape.matching.learned.learned_matching`) and over a triangle
    (:func:`~landscape.matching.learned.learned_triangle`), written once (their meaning:
    :func:`~landscape.matching.learned.learned_matching`).
    """

    init: str = setting("weight", f"the start: {' or '.join(INITS)} (weight matching's "
                                  "transform, or the identity)")  # fmt: skip
    lam: str = setting("u(0.4,0.6)", f"the distribution of λ, one of {', '.join(LAMBDAS)} "
                                     "(pairwise only)")  # fmt: skip
    steps: int = setting(300, "optimisation steps")
    lr: float = setting(0.1, "rotations: Adam's step in units of the element's RMS entry 1/√n, "
                             "decayed to 0 on a cosine")  # fmt: skip
    lr_perm: float = setting(0.1, "the same for permutation latents")
    batch_size: int | None = setting(None, f"rows per step (none: {BATCH_ROWS} rows, or "
                                           f"{BATCH_TOKENS:,} tokens of a language model's "
                                           "windows)")  # fmt: skip
    orth: str = setting("exp", f"rotations as {' or '.join(ORTH_PARAMS)}: G₀·exp(S − Sᵀ), or "
                               "latents projected every step")  # fmt: skip
    space: str = setting("weights", "the merge space of the loss (landscape.models.circuits): "
                                    "the line's, --space where a command has it")  # fmt: skip
    within_heads: bool = setting(True, "weight matching's start matches the per-head maps too")
    eval_every: int = setting(25, "steps between scorings of the projected transform")
    eval_size: int | None = setting(None, f"rows of the scoring slice (none: {EVAL_ROWS:,} rows, "
                                          f"or {EVAL_TOKENS:,} tokens)")  # fmt: skip
    dual: bool = setting(False, "pairwise: learn A's transform too (from the identity); only "
                                "the optimiser's path can differ")  # fmt: skip


@dataclass
class Member:
    """One model whose transform onto A is learned: its parameters (as given and processed),
    its start, the start's within-head maps on its own heads, its latents, and the start's
    elements held as they are (a mixture's expert permutations, ``held``)."""

    params: Params
    b: Params  # processed
    start: Transform  # acting on b
    g_init: dict[str, torch.Tensor]
    in_b: dict[str, Element]
    g0: dict[str, torch.Tensor]
    latents: dict[str, torch.Tensor]
    b_dev: Params  # processed, within-head maps and held elements applied, on the device
    held: dict[str, Element] = field(default_factory=dict)


@dataclass(frozen=True)
class MergedLoss:
    """What :func:`learn` descends and scores: the cross-entropy of the merged model on rows of
    ``train_split`` (a ``data.Split``, with ``inputs`` and ``targets``) at a mixture
    ``sample()`` = [w_A, w_1, …] (weights summing to 1) drawn afresh every step, scored on a
    fixed slice at the mixtures ``scored``. ``gen`` is the one seeded generator ``sample``
    draws from, and the batches and the scoring slice too; ``about`` goes into every result's
    ``info`` (how the mixtures were drawn)."""

    train_split: Any
    sample: Callable[[], list[float]]
    scored: list[list[float]]
    gen: torch.Generator
    about: dict[str, Any]


def learn(
    cfg: ModelConfig,
    params_a: Params,
    others: list[Params],
    group: str,
    merged: MergedLoss,
    options: LearnedOptions,
    context: MatchContext,
    starts: list[Transform | None] | None = None,
) -> list[MatchResult]:
    """The learning loop of learned matching, pairwise and over a triangle: one set of
    latents per model in ``others``, all moved by one optimiser on the loss of the merged
    model (``merged``, :class:`MergedLoss`); ``starts`` the known weight matchings of
    ``others`` (None: match, with the context's seed). The context's ``device`` is where it
    computes (None: the CPU), its ``progress`` hears every step, and its ``on_elements(step,
    elements)`` is told the projected elements of the first model that moves (``others[0]``;
    A under ``dual``) at every scoring point, within-head maps by slot as in the returned
    transform.

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
    seed, device, progress, on_eval = (context.seed, context.device, context.progress,
                                       context.on_elements)  # fmt: skip
    train_split, sample, mixes = merged.train_split, merged.sample, merged.scored
    gen, about = merged.gen, merged.about
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
    # a mixture's expert permutations are discrete and held at the start's; the rest is learned
    kinds = {v: k for v, k in matching_kinds(spec, group).items()
             if spec.variables[v].family != "experts"}  # fmt: skip
    sizes = {v: spec.variables[v].size for v in kinds}
    groups = {v: spec.variables[v].group for v in kinds}
    # per-slot variables (a mixture's units): one latent [slots, n, n]
    overs = {v: spec.variables[v].over for v in kinds}
    slots = {v: spec.variables[o].size for v, o in overs.items() if o is not None}
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
            start = weight_matching(cfg, params_a, params, group, within_heads=within_heads,
                                    context=MatchContext(seed, dev)).transform  # fmt: skip
        g_init = {v: start.matrix(v) if v in start.elements else _eye(sizes[v], slots.get(v))
                  for v in kinds}  # fmt: skip
        # the start's within-head maps stay as found: moved onto B's own heads once, they travel
        # with them whatever head permutation is learned (re-indexed at the end)
        inner = {v: e for v, e in start.elements.items() if e.over is not None and v not in kinds}
        in_b = {v: on_own_heads(e, start.elements[e.over]) for v, e in inner.items()}
        # the expert permutations too, applied once: slot i of B then holds the expert the
        # start put there, and the learned units of slot i act on it
        held = {v: e for v, e in start.elements.items()
                if spec.variables[v].family == "experts"}  # fmt: skip
        b_inner = apply(spec, Transform({**in_b, **held}), b) if in_b or held else b
        g0 = {v: g_init[v].to(dev, torch.float32) for v in rotations}
        latents = {
            v: (
                torch.zeros_like(g0[v]) if v in rotations else g.to(dev, torch.float32).clone()
            ).requires_grad_(True)
            for v, g in g_init.items()
        }
        b_dev = {k: v.detach().to(dev, torch.float32) for k, v in b_inner.items()}
        members.append(Member(params, b, start, g_init, in_b, g0, latents, b_dev, held))

    dual = o.dual
    if dual:  # A moves too: a member of its own, first, started at the identity
        if len(others) != 1:
            raise ValueError("dual learned matching is pairwise (one model besides A)")
        eye = {v: _eye(sizes[v], slots.get(v)) for v in kinds}
        g0_a = {v: eye[v].to(dev, torch.float32) for v in rotations}
        latents_a = {v: (torch.zeros_like(g0_a[v]) if v in rotations
                         else eye[v].to(dev, torch.float32).clone()).requires_grad_(True)
                     for v in kinds}  # fmt: skip
        members.insert(0, Member(params_a, a, Transform({}), eye, {}, g0_a, latents_a, a_dev))
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

    def rotation(m: Member, v: str) -> torch.Tensor:
        z = m.latents[v]
        k = z - z.T
        if v in centring:
            k = centring[v] @ k @ centring[v]
        return m.g0[v] @ torch.linalg.matrix_exp(k)

    def hard_elements() -> list[dict[str, Element]]:
        with torch.no_grad():
            every = [(i, v, rotation(m, v) if v in rotations else z)
                     for i, m in enumerate(members) for v, z in m.latents.items()]  # fmt: skip
            found = project_all([(kinds[v], t, groups[v], overs[v]) for _, v, t in every])
        out: list[dict[str, Element]] = [{} for _ in members]
        for (i, v, _), e in zip(every, found, strict=True):
            out[i][v] = e
        return out

    def with_inner(elements: list[dict[str, Element]]) -> list[dict[str, Element]]:
        # each start's within-head maps, from its own heads to the slots of ``elements``' heads,
        # and its held expert permutations
        return [{**el, **{v: on_slots(e, el[e.over]) for v, e in m.in_b.items()}, **m.held}
                for m, el in zip(members, elements, strict=True)]  # fmt: skip

    best = hard_elements()
    if progress is not None:  # the scoring slice at several mixtures: a while on large models
        progress("learned matching: scoring the start", 0, steps)
    best_loss, best_step = score(best, "learned matching: scoring the start", 0), 0
    if on_eval is not None:
        on_eval(0, with_inner(best)[0])
    eval_curve = [{"step": 0, "loss": best_loss}]
    losses: list[torch.Tensor] = []
    flips: list[list[int]] = [[] for _ in members]
    last_det = [det_sign(m.g_init["resid"]) for m in members]
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
        elements = project_all([(kinds[v], members[i].latents[v], groups[v], overs[v])
                                 for i, v in projected])  # fmt: skip
        hard_dense = dict(zip(projected, dense_on(elements, dev), strict=True))
        for k, ((i, v), e) in enumerate(zip(projected, elements, strict=True)):
            if last[k] is not None and not same_element(last[k], e):
                changes[i][v] += 1
            last[k] = e
            if v == "resid":  # det of the exact element, on the host where it already is
                det = element_det_sign(e)
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
                        # (per slot for a per-slot latent: each slot's matrix is projected alone)
                        norm = z.norm(dim=(-2, -1), keepdim=True) if v in slots else z.norm()
                        z.mul_(math.sqrt(sizes[v]) / norm.clamp_min(1e-12))
        losses.append(loss.detach())  # read once after the loop: no host sync per step
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            if progress is not None:
                progress(f"learned matching step {step + 1}/{steps}: scoring", step + 0.5, steps)
            elements = hard_elements()
            current = score(elements, f"learned matching step {step + 1}/{steps}: scoring",
                            step + 0.5)  # fmt: skip
            eval_curve.append({"step": step + 1, "loss": current})
            if on_eval is not None:
                on_eval(step + 1, with_inner(elements)[0])
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
            about_dual = {"dual": dual_check(cfg_p, spec, a, m.b, t_a, transform, (x_ev, y_ev),
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
            v: int((project(kinds[v], m.g_init[v], groups[v], overs[v]).perm != e.perm).sum())
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


def _eye(n: int, slots: int | None = None) -> torch.Tensor:
    """The identity of a variable of size n, one per slot for a per-slot variable (float64)."""
    eye = torch.eye(n, dtype=torch.float64)
    return eye if slots is None else eye.expand(slots, n, n).clone()


def dual_check(cfg: ModelConfig, spec: Spec, a: Params, b: Params, t_a: Transform,
               t_b: Transform, rows: tuple[torch.Tensor, torch.Tensor],
               mixes: list[list[float]]) -> dict[str, Any]:  # fmt: skip
    """The line between π_A(θ_A) and π_B(θ_B) against the line between θ_A and π_A⁻¹π_B(θ_B):
    the largest difference of their losses at ``mixes`` on (a few of) the scoring slice's
    ``rows`` (inputs, targets), in float64, and how far A's own transform moved (‖G_A − I‖ of
    its residual element)."""
    x, y = rows
    f64 = {k: v.detach().cpu().double() for k, v in a.items()}
    g64 = {k: v.detach().cpu().double() for k, v in b.items()}
    both = (apply(spec, t_a, f64), apply(spec, t_b, g64))
    one = (f64, apply(spec, t_a.inverse().compose(t_b), g64))
    few = x[:8].cpu()
    if few.is_floating_point():
        few = few.double()
    target = y[:8].cpu().reshape(-1)
    gap = 0.0
    with torch.no_grad():
        for w in mixes:
            losses = []
            for pa, pb in (both, one):
                mixed = {k: w[0] * pa[k] + w[1] * pb[k] for k in pa}
                logits = forward(cfg, mixed, few)
                losses.append(float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    target)))  # fmt: skip
            gap = max(gap, abs(losses[0] - losses[1]))
    g = t_a.matrix("resid")
    moved = 0.0 if g is None else float((g - torch.eye(g.shape[0], dtype=g.dtype)).norm())
    return {"line_gap": gap, "a_resid_change": moved}
