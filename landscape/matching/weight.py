"""Weight matching (WM, docs/design.md §1): data-free coordinate descent over the spec.

Coordinate descent over the variables. For variable v, with every other variable held at its
current element (B' = π_{−v}(θ_B)), the similarity of A's unit i with B's unit j is

    M[i, j] = Σ_{(W, axis) touched by v} ⟨W_A[.., i, ..], W_B'[.., j, ..]⟩

(the contraction over every other axis, :func:`weight_similarity`), and v's element maximises
``Σ_i s_i M[i, π(i)]`` over its group (:func:`landscape.matching.solvers.solve`): linear
assignment (perm), assignment on |M| with ``s_i = sign M[i, π(i)]`` (signed perm), Procrustes
``G = (UVᵀ)ᵀ`` with ``M = UΣVᵀ`` (orth, float64). Norm gains move by |G|, never signed: their
cross-products ``γ_A[i]γ_B[j]`` are added to the assignment score outside the absolute value.
Heads minimise the QK/OV circuit cost ``‖Q_A K_Aᵀ − Q_B K_Bᵀ‖² + ‖V_A O_A − V_B O_B‖²`` in
d_head×d_head form (:func:`head_element`, :func:`landscape.matching.solvers.head_cost`).
Variables are visited in a fresh seeded random order each round (as in weight-matching
practice: a fixed order can cycle between two partial optima), except that the first round
starts with ``resid``, and while a variable is still unvisited the parameters it touches are
left out of the others' similarity (their cross-products would pair unaligned units: noise that
traps the descent, worst for O(d)). The objective recorded per round is ``‖θ_A − π(θ_B)‖²`` over
every parameter (float64).

**Mixtures of experts** (``n_experts`` > 0). ``experts{l}`` is visited like a head variable,
by a score its experts' unit orders do not change (:func:`expert_element`: router columns, and
per pair of experts the best assignment of their units), and right after it ``mlp{l}``, one
assignment of units per expert slot (:func:`expert_units_element`). When the expert permutation
changes, the unit elements follow their experts to the new slots, as within-head maps follow
their heads.

**Within-head maps** (``within_heads=True``, or the group levels ``qk``/``ov`` alone). The head
cost leaves each head's factors in B's own bases, so the straight line between the factored
weights averages A's Q with B's Q in unrelated bases. With the option on, every layer's
``qk{l}``/``ov{l}`` (one invertible d_head×d_head map per head, batched over the head slots
*after* the head permutation) is visited right after ``heads{l}`` and minimises its part of the
objective, ``‖[W_Q; b_Q]^A − [W_Q; b_Q]^{B'}·M‖² + ‖[W_K; b_K]^A − [W_K; b_K]^{B'}·M⁻ᵀ‖²`` (OV:
``‖[W_V; b_V]^A − [W_V; b_V]^{B'}·N‖² + ‖W_O^A − N⁻¹·W_O^{B'}‖²``) with every other variable
held (:func:`within_head_element`, :func:`landscape.matching.within_heads.solve_within_heads`). When
a head permutation changes, the maps follow their heads to the new slots, so a map always
belongs to the B head it was fitted to. Under grouped-query attention one map serves each
key/value group (pooled over its query heads); under rotary positions the QK maps are the ones
commuting with RoPE, a scaled rotation per frequency pair, solved exactly
(:func:`landscape.matching.within_heads.solve_rope_commuting`). Architectures without these
variables (``qk`` under q/k norms) are matched as without the option.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import torch

from landscape.matching.methods import (
    MATCH_CONTEXT,
    MatchContext,
    MatchingMethod,
    given_settings,
    matching_kinds,
    prepare_pair,
    setting,
)
from landscape.matching.result import (
    MatchResult,
    aligned_distance,
    finish,
    moved,
    probe_logits,
    weight_distance,
)
from landscape.matching.solvers import head_cost, solve, solve_grouped_perm, solve_heads
from landscape.matching.within_heads import Factors, solve_within_heads
from landscape.models import ModelConfig, Params
from landscape.progress import tell
from landscape.symmetry import (
    ABS,
    GROUP_OF,
    INVERTIBLE,
    ORTH,
    ORTH_MEAN,
    PERM,
    PERM_OF,
    ROPE,
    Element,
    Spec,
    Transform,
    follow_slots,
    group_kinds,
    spec_for,
)

# Group levels made of within-head maps alone (landscape.symmetry.group_kinds)
INNER_GROUPS = ("qk", "ov")

# How norm gains (|G|) and gated-FFN gates (P(G)) enter a similarity: as a separate unsigned
# score (weight matching), or not at all (the gauge sweep's residual recovery from weights).
Gains = Literal["unsigned", "ignore"]


def weight_similarity(
    spec: Spec,
    var: str,
    a: Params,
    b: Params,
    *,
    elements: Mapping[str, Element] | None = None,
    unsolved: Collection[str] = (),
    gains: Gains = "unsigned",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``M[i, j] = Σ ⟨W_A[.., i, ..], W_B'[.., j, ..]⟩`` over the axes ``var`` touches.

    ``B' = π_{−v}(θ_B)``: ``elements`` (every variable but ``var``) are applied to one touched
    parameter of B at a time, so no transformed copy of the whole model is ever held.
    Returns (M over G and G⁻ᵀ axes, M over |G| and P(G) axes or None). For the orthogonal and
    monomial ±1 elements matched here G⁻ᵀ = G, so readers and writers add up alike; norm gains
    (|G|) and gated-FFN gates (P(G), only permuted) see the permutation, never signs:
    ``gains="unsigned"`` returns their cross-products as the second matrix (to be added to the
    assignment score outside the absolute value, :func:`landscape.matching.solvers.solve`),
    ``gains="ignore"`` leaves them out (the second matrix is then None). A parameter with an
    axis of a variable in ``unsolved`` (not visited yet) is left out: its other axis is still
    unaligned, and its cross-product would be noise that can trap the descent. M lives on A's
    device, float64.
    """
    if gains not in ("unsigned", "ignore"):
        raise ValueError(f"unknown gains handling {gains!r}; expected 'unsigned' or 'ignore'")
    n = spec.variables[var].size
    others = {k: e for k, e in (elements or {}).items() if k != var}
    m = torch.zeros(n, n, dtype=torch.float64, device=next(iter(a.values())).device)
    m_abs = None
    for name, axis, role in spec.touches(var):
        if name not in a:  # folded away by processing
            continue
        if role.act in (ABS, PERM_OF) and gains == "ignore":
            continue
        if any(r is not None and r.var in unsolved for r in spec.axes[name]):
            continue
        x = a[name].double().movedim(axis, 0).reshape(n, -1)
        y = moved(spec, others, b, name).movedim(axis, 0).reshape(n, -1)
        if role.act in (ABS, PERM_OF):
            m_abs = x @ y.T if m_abs is None else m_abs + x @ y.T
        else:
            m = m + x @ y.T
    return m, m_abs


def head_element(
    spec: Spec, var: str, a: Params, b: Params, elements: Mapping[str, Element] | None = None
) -> Element:
    """Head permutation minimising the QK/OV circuit cost (invariant to within-head maps).

    Weights shared by a group of query heads (role ``"G/group"``: grouped-query K and V) are
    repeated for every query head of their group, so the cost is per query head, and the
    assignment moves whole groups (:func:`landscape.matching.solvers.solve_grouped_perm`) when
    ``Variable.group`` > 1.
    """
    v = spec.variables[var]
    p = f"blocks.{v.layer}.attn"
    others = {k: e for k, e in (elements or {}).items() if k != var}
    ws = []
    for side in (a, b):
        for w in (f"{p}.W_{m}" for m in "QKVO"):
            t = side[w].double() if side is a else moved(spec, others, side, w)
            axis, role = next((i, r) for i, r in enumerate(spec.axes[w]) if r and r.var == var)
            if role.act == GROUP_OF:
                t = t.repeat_interleave(v.group, dim=axis)
            ws.append(t)
    cost = head_cost(*ws)
    perm = solve_heads(cost) if v.group == 1 else solve_grouped_perm(-cost, v.group)
    perm = perm.to(cost.device)
    return Element(PERM, perm, torch.ones(len(perm), dtype=torch.float64, device=cost.device))


def within_head_element(
    spec: Spec,
    var: str,
    kind: str,
    a: Params,
    b: Params,
    elements: Mapping[str, Element] | None = None,
) -> tuple[Element, torch.Tensor]:
    """Per-head maps of ``var`` (``qk{l}``/``ov{l}``) with every other variable held.

    Every parameter ``var`` touches is laid out per head slot as rows over its map's axis,
    ``[H, rows, d_head]``: those it multiplies by M (``W_Q``, ``b_Q``; ``W_V``, ``b_V``) form X,
    those it multiplies by M⁻ᵀ (``W_K``, ``b_K``; ``W_O`` with its d_head axis last, ``W_Oᵀ``)
    form Y, of A and of ``B' = π_{−v}(θ_B)`` (heads permuted, stream aligned, so slot i of B'
    is the B head matched to A's head i). The current element of ``var`` is the solver's start,
    so the visit never raises ``‖θ_A − π(θ_B)‖²``. Under grouped-query attention one map serves
    a key/value group: the rows of its query heads and of its key/value head are solved together
    (their K or V factor counted once, as in the objective). Under rotary positions ``qk{l}``
    is ``rope-commuting`` (:func:`landscape.matching.within_heads.solve_rope_commuting`).
    Returns the element ``[H, n, n]`` and each map's condition number (per query head).
    """
    v = spec.variables[var]
    others = {k: e for k, e in (elements or {}).items() if k != var}
    # one map per key/value group (GQA): the rows of the group's query heads are pooled with
    # those of its key/value head, and the map is solved once per group
    maps = spec.variables[v.over].size // v.group
    rows: dict[bool, tuple[list[torch.Tensor], list[torch.Tensor]]] = {False: ([], []),
                                                                       True: ([], [])}  # fmt: skip
    for name, axis, role in spec.touches(var):
        if name not in a:
            continue
        slot = spec.axis_of(name, v.over)
        for side, t in enumerate((a[name].double(), moved(spec, others, b, name))):
            per_head = t.movedim((slot, axis), (0, -1))
            rows[role.transpose][side].append(per_head.reshape(maps, -1, v.size))
    factors = Factors(*(torch.cat(rows[inv][side], 1) for inv in (False, True) for side in (0, 1)))
    current = (elements or {}).get(var)
    start = None if current is None else current.matrix[:: v.group]
    m, cond = solve_within_heads(kind, factors, start, rotary=v.rotary)
    m, cond = m.repeat_interleave(v.group, 0), cond.repeat_interleave(v.group, 0)
    return Element(kind, matrix=m, over=v.over), cond


def _unit_similarities(
    spec: Spec, var: str, a: Params, b: Params, others: Mapping[str, Element]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A mixture's units ``var`` (``mlp{l}``, per expert slot) laid out per expert: the rows of
    every parameter ``var`` touches, ``[E, d_mlp, rest]``, of A and of ``B' = others(θ_B)``,
    split into the axes it acts on by G or G⁻ᵀ (X) and by P(G), the gates (U)."""
    v = spec.variables[var]
    parts: dict[bool, tuple[list[torch.Tensor], list[torch.Tensor]]] = {False: ([], []),
                                                                        True: ([], [])}  # fmt: skip
    for name, axis, role in spec.touches(var):
        if name not in a:
            continue
        slot = spec.axis_of(name, v.over)
        for side, t in enumerate((a[name].double(), moved(spec, others, b, name))):
            rows = t.movedim((slot, axis), (0, 1)).reshape(t.shape[slot], v.size, -1)
            parts[role.act == PERM_OF][side].append(rows)
    e = spec.variables[v.over].size
    empty = torch.zeros(e, v.size, 0, dtype=torch.float64, device=next(iter(a.values())).device)
    xa, xb, ua, ub = (torch.cat(parts[gate][side], 2) if parts[gate][side] else empty
                      for gate in (False, True) for side in (0, 1))  # fmt: skip
    return xa, xb, ua, ub


def _assignment_value(e: Element, m: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``Σ_i s_i·M[i, π(i)] + U[i, π(i)]``: the score :func:`solve` maximised for ``e``."""
    i = torch.arange(len(e.perm), device=m.device)
    perm = e.perm.to(m.device)
    return (e.scale.to(m.device) * m[i, perm]).sum() + u[i, perm].sum()


def expert_element(
    spec: Spec,
    var: str,
    kinds: Mapping[str, str],
    a: Params,
    b: Params,
    elements: Mapping[str, Element] | None = None,
) -> Element:
    """The permutation of a mixture's experts (``experts{l}``) with every other variable but its
    own units held.

    Experts are matched by their weights whatever the order of their units: the similarity of
    A's expert i with B's expert j is the inner product of their router columns (``W_router``,
    ``b_router``) and of their unit-free parameters (``b_out``), plus the best alignment of
    their units, the score of the unit assignment between the two (of the units' kind,
    :func:`landscape.matching.solvers.solve`), one assignment per pair. The experts' units
    (``mlp{l}``) are left out of ``B'`` and matched right after, expert by expert
    (:func:`expert_units_element`). Its cost is E² assignments of d_mlp units a layer, and it
    holds every expert's rows of both models at once: milliseconds at the zoo's sizes, not
    sized for a large imported mixture (not measured there).
    """
    v = spec.variables[var]
    units = next(w for w in spec.family("mlp") if spec.variables[w].over == var)
    others = {k: e for k, e in (elements or {}).items() if k not in (var, units)}
    n = v.size
    m = torch.zeros(n, n, dtype=torch.float64, device=next(iter(a.values())).device)
    for name, axis, _ in spec.touches(var):
        if name not in a or any(r is not None and r.var == units for r in spec.axes[name]):
            continue
        x = a[name].double().movedim(axis, 0).reshape(n, -1)
        y = moved(spec, others, b, name).movedim(axis, 0).reshape(n, -1)
        m = m + x @ y.T
    xa, xb, ua, ub = _unit_similarities(spec, units, a, b, others)
    for i in range(n):
        for j in range(n):
            s, u = xa[i] @ xb[j].T, ua[i] @ ub[j].T
            e = solve(kinds[units], s, unsigned=u if ua.shape[-1] else None)
            m[i, j] += _assignment_value(e, s, u)
    return solve(PERM, m)


def expert_units_element(
    spec: Spec,
    var: str,
    kind: str,
    a: Params,
    b: Params,
    elements: Mapping[str, Element] | None = None,
) -> Element:
    """A mixture's units (``mlp{l}``, one element per expert slot) with every other variable
    held: in each slot i, A's expert i against the B expert the expert permutation put there,
    the assignment of a plain FFN's units (gates as the unsigned part). Returns the per-slot
    monomial element (``perm``, ``scale`` [E, d_mlp])."""
    v = spec.variables[var]
    others = {k: e for k, e in (elements or {}).items() if k != var}
    xa, xb, ua, ub = _unit_similarities(spec, var, a, b, others)
    solved = [
        solve(kind, xa[i] @ xb[i].T, unsigned=ua[i] @ ub[i].T if ua.shape[-1] else None)
        for i in range(len(xa))
    ]
    perm = torch.stack([e.perm.to(xa.device) for e in solved])
    scale = torch.stack([e.scale.to(xa.device) for e in solved])
    return Element(kind, perm, scale, over=v.over)


def _follow_heads(inner: Element, old: Element | None, new: Element) -> Element:
    """Per-head maps re-indexed after the head permutation changed from ``old`` to ``new``.

    Slot i of the old permutation held B's head ``old.perm[i]`` and its map ``M[i]``; under the
    new one slot i holds B's head ``new.perm[i]``, whose map sat at slot
    ``old.perm⁻¹[new.perm[i]]``.
    """
    where = new.perm if old is None else torch.argsort(old.perm)[new.perm]
    return follow_slots(inner, Element(PERM, where, torch.ones(len(where), dtype=torch.float64)))


def _changed(old: Element | None, new: Element) -> bool:
    """Whether a monomial element changed (dense ones are judged by the objective)."""
    if not new.is_monomial:
        return False
    if old is None:
        identity = torch.arange(new.size, device=new.perm.device).expand_as(new.perm)
        return not (torch.equal(new.perm, identity) and bool((new.scale == 1).all()))
    return not (torch.equal(old.perm, new.perm) and torch.equal(old.scale, new.scale))


# FFN variables at least this wide have their assignments solved concurrently (the solver
# releases the GIL; at a 1.1B Llama's 5632 units one takes seconds, at the zoo's widths
# milliseconds, where threads would only add overhead)
CONCURRENT_SIZE = 1024
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1)), "assignment")
    return _POOL


def _solved(
    kind: str, m: torch.Tensor, m_abs: torch.Tensor | None, old: Element | None
) -> tuple[Element, bool]:
    new = solve(kind, m, unsigned=m_abs)
    return new, _changed(old, new)


def _settle(pending: dict[str, Future[tuple[Element, bool]]], elements: dict[str, Element]) -> bool:
    """Wait for the pending assignments (in visiting order) and store their elements; whether
    one changed."""
    changed = False
    for var, future in pending.items():
        elements[var], moved_ = future.result()
        changed |= moved_
    pending.clear()
    return changed


def _sq_norm(p: Params) -> float:
    return float(sum(float(v.double().pow(2).sum()) for v in p.values()))


def within_head_variables(spec: Spec) -> list[str]:
    """The declared per-head maps, ``qk{l}`` then ``ov{l}`` (no ``qk`` under q/k norms)."""
    return [v for family in INNER_GROUPS for v in spec.family(family)]


def weight_kinds(
    spec: Spec, group: str, within_heads: bool = False
) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """Kind per matched variable, and the within-head maps visited right after each head variable.

    A residual level gives :func:`landscape.matching.methods.matching_kinds`, plus, with
    ``within_heads``, every declared ``qk{l}``/``ov{l}`` as invertible maps (QK under rotary
    positions: maps commuting with RoPE; listed after ``heads{l}`` in the second mapping).
    ``qk``/``ov`` alone give their maps and nothing else
    (heads stay in place, so ``within_heads`` changes nothing there).
    """
    if group in INNER_GROUPS:
        return group_kinds(spec, group), {}
    kinds = matching_kinds(spec, group)
    after: dict[str, tuple[str, ...]] = {}
    for v in spec.family("mlp"):  # a mixture's units: right after their layer's experts
        if spec.variables[v].over is not None:
            after[spec.variables[v].over] = (v,)
    if within_heads:
        for v in within_head_variables(spec):
            kinds[v] = spec.variables[v].widest  # invertible, or rope-commuting (QK under RoPE)
            after[spec.variables[v].over] = (*after.get(spec.variables[v].over, ()), v)
    return kinds, after


@dataclass(frozen=True)
class WeightOptions:
    """The settings of weight matching (:func:`weight_matching`)."""

    max_rounds: int = setting(50, "rounds of the descent at most")
    tol: float = setting(1e-4, "settled when a round lowers the objective by at most this, "
                               "relative")  # fmt: skip
    within_heads: bool = setting(True, "also match the per-head maps qk{l}/ov{l}")


def weight_matching(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    *,
    options: WeightOptions | None = None,
    context: MatchContext = MATCH_CONTEXT,
    consume: bool = False,
    **settings: Any,
) -> MatchResult:
    """Weight matching by coordinate descent over the spec's variables (module docstring).

    Its settings (:class:`WeightOptions`) come as ``options`` or as keywords (``max_rounds``,
    ``tol``, ``within_heads``), keywords over ``options``; the ``context``
    (:class:`~landscape.matching.methods.MatchContext`) gives the seed, the device and who hears.

    Starts at the identity; each round visits every variable once in an order drawn from the
    context's ``seed`` and replaces its element by the best one with the others held fixed.
    Stops when a round changes no monomial element and (with a dense element: orthogonal
    stream, within-head maps) ``‖θ_A − π(θ_B)‖²`` improved by at most ``tol`` relative to
    ``‖θ_A‖² + ‖θ_B‖²``, or after ``max_rounds``. The default was chosen by measurement: with
    the dense within-head maps the descent on the zoo's transformers never settles (after 50
    rounds the objective still falls by ~1e-5 of itself a round, now and then by more when an
    FFN assignment changes), and on vit-fashion-d128 seeds 0-1 the rounds after the first under
    1e-4 (round 16) lower the objective by 0.4% in all while the barrier moves by 5-10% in
    either direction, depending on the visiting order; 1e-4 stops there and takes a third of
    the time. ``within_heads`` also matches the per-head maps ``qk{l}``/``ov{l}`` (each visited
    right after its layer's head permutation; the visiting order of the other variables is the
    one drawn without the option); their condition numbers are in ``info``.
    The context's ``on_elements(r, elements)`` is told the elements after round r (r = 0
    before the first round: none, the identity), acting on B as processed
    (:func:`prepare_pair` under ``group``), with ``objective[r]`` their ``‖θ_A − π(θ_B)‖²``; the
    last call holds the returned transform. It receives a copy, so it may keep it.
    ``consume``: ``params_a`` and ``params_b`` are handed over and emptied (a large pair then
    holds the processed A and B, and at the end the processed A and the aligned B, never the
    originals beside them); B's function check is made against its logits taken beforehand.
    The result is the same as without.
    The context's ``device`` (None: where the parameters are) is where the descent runs: the
    processed pair is moved there once in its own dtype, every similarity product, Procrustes
    SVD and within-head solve is made there in float64, and the elements stay there between
    rounds; only assignment problems visit the CPU (their scores, then the permutation back).
    The result (transform and parameters) is returned where the parameters came from.
    Its ``progress`` (:mod:`landscape.progress`) hears each variable's visit, counted in rounds
    of ``max_rounds`` (the descent usually stops well before: the stage says which round).
    """
    opts = given_settings(WeightOptions, options, what="weight matching", **settings)
    max_rounds, tol, within_heads = opts.max_rounds, opts.tol, opts.within_heads
    seed, device, progress = context.seed, context.device, context.progress
    on_round = context.on_elements
    t0 = time.perf_counter()
    home = next(iter(params_a.values())).device
    reference = None
    if consume:
        dtype = next(iter(params_b.values())).dtype
        reference = probe_logits(cfg, params_b)
    cfg_p, a, b = prepare_pair(cfg, params_a, params_b, group, consume=consume)
    dev = home if device is None else device
    if dev != home:
        if not consume:  # a pair that needs no processing comes back as the caller's own dicts
            a, b = dict(a), dict(b)
        for p in (a, b):  # one parameter at a time, so a large pair is never held twice
            for k in list(p):
                p[k] = p[k].to(dev)
    spec = spec_for(cfg_p)
    kinds, after = weight_kinds(spec, group, within_heads)
    dense = any(k in (ORTH, ORTH_MEAN, INVERTIBLE, ROPE) for k in kinds.values())
    scale = _sq_norm(a) + _sq_norm(b)
    gen = torch.Generator().manual_seed(seed)
    # the order is drawn over the variables without the within-head maps, so the option leaves
    # the seeded order of the others as it was
    names = [v for v in kinds if not any(v in inner for inner in after.values())]
    elements: dict[str, Element] = {}
    conds: dict[str, torch.Tensor] = {}
    objective = [weight_distance(a, b)]
    if on_round is not None:
        on_round(0, {})
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        changed = False
        order = [names[i] for i in torch.randperm(len(names), generator=gen).tolist()]
        if rounds == 1 and "resid" in kinds:  # the stream first: embeddings and unembedding
            order = ["resid"] + [v for v in order if v != "resid"]
        # wide FFN assignments solved on CPU threads while the descent goes on: no variable
        # visited before the next ``resid`` reads an FFN element, so the answer is the same
        pending: dict[str, Future[tuple[Element, bool]]] = {}
        visits = [w for v in order for w in (v, *after.get(v, ()))]
        stage = f"weight matching round {rounds} (stops when settled, at most {max_rounds})"
        for i, var in enumerate(visits):
            tell(progress, stage, rounds - 1 + i / len(visits), max_rounds)
            # B' = π_{−v}(θ_B) is formed one touched parameter at a time inside the helpers
            family = spec.variables[var].family
            if family == "resid" or var in pending:
                changed |= _settle(pending, elements)
            if family in ("heads", "experts"):
                new = (head_element(spec, var, a, b, elements) if family == "heads"
                       else expert_element(spec, var, kinds, a, b, elements))  # fmt: skip
                for inner in (w for w in after.get(var, ()) if w in elements):
                    elements[inner] = _follow_heads(elements[inner], elements.get(var), new)
            elif family in INNER_GROUPS:
                new, conds[var] = within_head_element(spec, var, kinds[var], a, b, elements)
            elif spec.variables[var].over is not None:  # a mixture's units, expert by expert
                new = expert_units_element(spec, var, kinds[var], a, b, elements)
            else:
                unsolved = set(kinds) - set(elements) - set(pending) - {var}
                m, m_abs = weight_similarity(spec, var, a, b, elements=elements, unsolved=unsolved)
                if family == "mlp" and m.shape[0] >= CONCURRENT_SIZE:
                    pending[var] = _pool().submit(_solved, kinds[var], m, m_abs, elements.get(var))
                    continue
                new = solve(kinds[var], m, unsigned=m_abs)
            changed |= _changed(elements.get(var), new)
            elements[var] = new
        changed |= _settle(pending, elements)
        objective.append(aligned_distance(spec, elements, a, b))
        if on_round is not None:
            on_round(rounds, dict(elements))
        settled = abs(objective[-2] - objective[-1]) <= tol * scale
        if not changed and (not dense or settled):
            break
    transform = Transform(dict(elements))
    info = {"order": "random per round", "seed": seed, "converged": rounds < max_rounds}
    if conds:  # the last visit's maps are the ones in the transform
        info["within_heads_cond"] = {v: [float(x) for x in c] for v, c in conds.items()}
    extra = {} if reference is None else {"dtype": dtype}
    r = finish(
        "weight",
        group,
        cfg,
        params_b if reference is None else reference,
        (cfg_p, a, b),
        transform,
        t0,
        objective=objective,
        rounds=rounds,
        info=info,
        **extra,
    )
    if dev != home:
        r.transform = r.transform.to(home)
        r.params_a = {k: v.to(home) for k, v in r.params_a.items()}
        r.params_b = {k: v.to(home) for k, v in r.params_b.items()}
    return r


def _run(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    options: WeightOptions,
    *,
    train_split: Any,
    context: MatchContext,
    **hooks: Any,
) -> MatchResult:
    return weight_matching(cfg, params_a, params_b, group, options=options, context=context,
                           **hooks)  # fmt: skip


WEIGHT = MatchingMethod("weight", "weight matching", WeightOptions, _run, consumes=True,
                        hooks=("consume",))  # fmt: skip
