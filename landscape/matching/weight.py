"""Weight matching (WM, DESIGN §1, "Matching"): data-free coordinate descent over the spec.

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
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Literal

import torch

from landscape.matching.methods import matching_kinds, prepare_pair
from landscape.matching.result import (
    MatchResult,
    aligned_distance,
    finish,
    moved,
    weight_distance,
)
from landscape.matching.solvers import head_cost, solve, solve_grouped_perm, solve_heads
from landscape.models import ModelConfig, Params
from landscape.symmetry import (
    ABS,
    GROUP_OF,
    ORTH,
    PERM,
    PERM_OF,
    Element,
    Spec,
    Transform,
    spec_for,
)

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
    return Element(PERM, perm, torch.ones(len(perm), dtype=torch.float64))


def _changed(old: Element | None, new: Element) -> bool:
    """Whether a monomial element changed (dense ones are judged by the objective)."""
    if not new.is_monomial:
        return False
    if old is None:
        return not (
            torch.equal(new.perm, torch.arange(len(new.perm))) and bool((new.scale == 1).all())
        )
    return not (torch.equal(old.perm, new.perm) and torch.equal(old.scale, new.scale))


def _sq_norm(p: Params) -> float:
    return float(sum(float(v.double().pow(2).sum()) for v in p.values()))


def weight_matching(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    *,
    max_rounds: int = 50,
    seed: int = 0,
) -> MatchResult:
    """Weight matching by coordinate descent over the spec's variables (module docstring).

    Starts at the identity; each round visits every variable once in a seeded random order and
    replaces its element by the best one with the others held fixed. Stops when a round changes
    no monomial element and (with a dense residual element) ``‖θ_A − π(θ_B)‖²`` improved by at
    most 1e-10 relative to ``‖θ_A‖² + ‖θ_B‖²``, or after ``max_rounds``.
    """
    t0 = time.perf_counter()
    cfg_p, a, b = prepare_pair(cfg, params_a, params_b, group)
    spec = spec_for(cfg_p)
    kinds = matching_kinds(spec, group)
    scale = _sq_norm(a) + _sq_norm(b)
    gen = torch.Generator().manual_seed(seed)
    names = list(kinds)
    elements: dict[str, Element] = {}
    objective = [weight_distance(a, b)]
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        changed = False
        order = [names[i] for i in torch.randperm(len(names), generator=gen).tolist()]
        if rounds == 1:  # the stream first: embeddings and unembedding involve nothing else
            order = ["resid"] + [v for v in order if v != "resid"]
        for var in order:
            # B' = π_{−v}(θ_B) is formed one touched parameter at a time inside the helpers
            if spec.variables[var].family == "heads":
                new = head_element(spec, var, a, b, elements)
            else:
                unsolved = set(names) - set(elements) - {var}
                m, m_abs = weight_similarity(spec, var, a, b, elements=elements, unsolved=unsolved)
                new = solve(kinds[var], m, unsigned=m_abs)
            changed |= _changed(elements.get(var), new)
            elements[var] = new
        objective.append(aligned_distance(spec, elements, a, b))
        settled = abs(objective[-2] - objective[-1]) <= 1e-10 * scale
        if not changed and (kinds["resid"] != ORTH or settled):
            break
    transform = Transform(dict(elements))
    return finish(
        "weight",
        group,
        cfg,
        params_b,
        cfg_p,
        a,
        b,
        transform,
        t0,
        objective=objective,
        rounds=rounds,
        info={"order": "random per round", "seed": seed, "converged": rounds < max_rounds},
    )
