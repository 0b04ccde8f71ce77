"""Matching: find the symmetry transform π that aligns model B to model A (DESIGN §1, "Matching").

Every method returns a :class:`MatchResult` holding π (a :class:`landscape.symmetry.Transform`
acting on B *as processed*), the processed A and the aligned B = π(θ_B), so that the barrier
``max_λ L(λθ_A + (1−λ)π(θ_B)) − …`` is measured between models whose functions are exactly those
of the inputs.

Conventions
-----------
- **Processing.** A group level (``perm``, ``perm-global-sign``, ``signed-perm``, ``orth``) may
  need function-preserving processing to be exact on the residual stream (fold norm gains for
  O(d); rewrite LayerNorm as RMSNorm for B_d and O(d)). :func:`prepare_pair` runs
  ``processing.prepare`` on A and B the same way; the result's ``cfg`` is the processed config.
- **Orientation.** The transform uses the spec's convention: the residual element G acts on
  writers as ``W ← W·G`` (so B's stream x_B becomes x_B·G ≈ x_A); a monomial element has
  ``G[perm[i], i] = scale[i]``, i.e. aligned unit i is ``scale[i] ·`` B's unit ``perm[i]``, which
  is exactly the solvers' convention (``perm[i] = j``: B's unit j goes to A's slot i). Dense
  solutions of the solvers map column vectors (``aligned b = X b``), so G = Xᵀ.
- **Gauge variables matched.** ``resid`` gets the group's residual kind; FFN units ``mlp{l}``
  and heads ``heads{l}`` are permutations in every group, except gated (SwiGLU) FFN units under
  ``signed-perm`` and ``orth``, which are signed permutations (the sign acts on the linear up
  projection; the gate, role ``P(G)``, is only permuted and enters the assignment unsigned like
  a norm gain). Grouped-query heads (``Variable.group`` = r > 1) move as whole key/value groups:
  the cost of pairing A's group I with B's group J is the best assignment of their r query
  heads, and the groups are then assigned on those costs (K/V weights, role ``G/group``, are
  repeated per query head for the circuit cost). The within-head maps ``qk{l}``/``ov{l}`` are
  never matched: the head cost is invariant to them.
- **Memory.** Nothing holds a transformed copy of the whole model during the descent: B' is
  formed one touched parameter at a time (in float64, cast from the stored dtype), so weight
  matching keeps the inputs, their processed forms and the final aligned B.

Weight matching (WM)
--------------------
Coordinate descent over the variables. For variable v, with every other variable held at its
current element (B' = π_{−v}(θ_B)), the similarity of A's unit i with B's unit j is

    M[i, j] = Σ_{(W, axis) touched by v} ⟨W_A[.., i, ..], W_B'[.., j, ..]⟩

(the contraction over every other axis), and v's element maximises ``Σ_i s_i M[i, π(i)]`` over
its group: linear assignment (perm), assignment on |M| with ``s_i = sign M[i, π(i)]``
(signed perm), Procrustes ``G = (UVᵀ)ᵀ`` with ``M = UΣVᵀ`` (orth, float64). Norm gains move by
|G|, never signed: their cross-products ``γ_A[i]γ_B[j]`` are added to the assignment score
outside the absolute value. Heads minimise the QK/OV circuit cost
``‖Q_A K_Aᵀ − Q_B K_Bᵀ‖² + ‖V_A O_A − V_B O_B‖²`` in d_head×d_head form
(:func:`landscape.matching.solvers.head_cost`). Variables are visited in a fresh seeded random
order each
round (as in weight-matching practice: a fixed order can cycle between two partial optima),
except that the first round starts with ``resid``, and while a variable is still unvisited the
parameters it touches are left out of the others' similarity (their cross-products would pair
unaligned units: noise that traps the descent, worst for O(d)).
The objective recorded per round is ``‖θ_A − π(θ_B)‖²`` over every parameter (float64).

Activation matching (AM)
------------------------
The same solvers on correlations of activations of both models on one fixed batch: the residual
stream at every layer boundary (all positions pooled, standardised per layer, optionally
without the first position), the FFN hidden units and the heads' outputs written into the
residual stream (``z_h·W_O[h]``, invariant to the within-head maps; B's taken in A's residual
coordinates through the matched G). One pass suffices: hidden units do not depend on the residual
gauge, and the residual element is found first. On a LayerNorm model rewritten as RMSNorm
(centred writers) the stream never leaves 1^⊥, so O(d) activation matching cannot see the sign
of G along 1: the readers' (unused) component along 1 may come out flipped, which changes
neither the function nor any interpolated model (every writer stays centred).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from landscape.matching.solvers import head_cost, solve_heads, solve_orth, solve_perm
from landscape.models import ModelConfig, Params, forward
from landscape.symmetry import (
    ABS,
    GLOBAL_SIGN,
    GROUP_OF,
    ORTH,
    PERM,
    PERM_OF,
    RESID_GROUPS,
    SIGNED_PERM,
    Element,
    Spec,
    Transform,
    apply,
    spec_for,
)
from landscape.symmetry.processing import prepare

METHODS = ("naive", "weight", "activation", "learned")
FUNCTION_TOLERANCE = 1e-4  # float32 max |Δlogits| (DESIGN §1)
PROBE_TOKENS = 128  # longest probe window (the zoo's contexts are shorter)
PROBE_LOGITS = 2**23  # most logits one probe batch may produce

__all__ = [
    "METHODS",
    "MatchResult",
    "activation_matching",
    "function_check",
    "function_warnings",
    "match",
    "matching_kinds",
    "naive",
    "prepare_pair",
    "probe_inputs",
    "weight_distance",
    "weight_matching",
    "worst_check",
]


@dataclass
class MatchResult:
    """One alignment of B to A.

    ``transform`` acts on B as processed (``params_b == apply(spec_for(cfg), transform, B_proc)``);
    ``params_a`` is the processed A. ``objective`` is recorded per round (WM: ``‖θ_A − π(θ_B)‖²``;
    AM and LM: before and after). ``det_flips`` counts sign changes of det G_resid during learned
    matching; ``lm_curve`` is its merged training loss ``[{step, loss}]``. ``function_check`` is
    ``max |Δlogits|`` of π(θ_B) (processed config) against the unprocessed θ_B on a fixed probe
    batch, float32 forward; ``function_check_a`` the same for the processed A against A (None
    until :func:`match` fills it in). ``info`` holds method-specific facts (kept JSON-safe).
    """

    method: str
    group: str
    transform: Transform
    cfg: ModelConfig
    params_a: Params
    params_b: Params
    objective: list[float] = field(default_factory=list)
    rounds: int = 0
    det_flips: int = 0
    lm_curve: list[dict[str, float]] = field(default_factory=list)
    function_check: float = 0.0
    function_check_a: float | None = None  # processed A against A; set by ``match``
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def resid_matrix(self) -> torch.Tensor:
        """The residual element G as a dense float64 [d, d] matrix (writers ``W ← W·G``).

        Its eigenangles (``landscape.experiments.eigen.eigenangles``) show how far the alignment
        is from a
        coordinate relabelling; the identity when ``resid`` was not matched.
        """
        g = self.transform.matrix("resid")
        return torch.eye(self.cfg.d_model, dtype=torch.float64) if g is None else g

    def to_dict(self) -> dict[str, Any]:
        """Everything but tensors: scalars, curves, the processed config and the resid kind."""
        kinds = {k: e.kind for k, e in self.transform.elements.items()}
        return {
            "method": self.method,
            "group": self.group,
            "cfg": self.cfg.to_dict(),
            "kinds": kinds,
            "objective": list(self.objective),
            "rounds": self.rounds,
            "det_flips": self.det_flips,
            "lm_curve": list(self.lm_curve),
            "function_check": self.function_check,
            "function_check_a": self.function_check_a,
            "seconds": self.seconds,
            "info": self.info,
        }

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict())


# ----------------------------------------------------------------------------- shared helpers


def matching_kinds(spec: Spec, group: str) -> dict[str, str]:
    """Kind per matched variable: the group's residual kind, permutations of FFN units and heads.

    Gated FFN units (SwiGLU) admit signed permutations (signs act on the linear up projection,
    the gate is only permuted): with a signed or orthogonal residual group they are matched as
    signed permutations; ``perm`` keeps plain permutations everywhere.
    """
    if group not in RESID_GROUPS:
        raise ValueError(f"matching needs a group in {tuple(RESID_GROUPS)}, got {group!r}")
    kinds = {"resid": RESID_GROUPS[group]}
    signed = RESID_GROUPS[group] in (SIGNED_PERM, ORTH)
    for v in spec.family("mlp"):
        kinds[v] = SIGNED_PERM if signed and SIGNED_PERM in spec.variables[v].kinds else PERM
    kinds.update({v: PERM for v in spec.family("heads")})
    return kinds


def prepare_pair(
    cfg: ModelConfig, params_a: Params, params_b: Params, group: str
) -> tuple[ModelConfig, Params, Params]:
    """Process A and B with the steps that make ``group`` exact (the same steps for both)."""
    cfg_a, a = prepare(cfg, params_a, group)
    cfg_b, b = prepare(cfg, params_b, group)
    if cfg_a != cfg_b or set(a) != set(b):
        raise ValueError("A and B process differently: are they the same architecture?")
    return cfg_a, a, b


def probe_inputs(cfg: ModelConfig, batch: int = 16, seed: int = 0) -> torch.Tensor:
    """A fixed, seeded probe batch for function checks (Gaussian features/pixels, random tokens).

    Token windows are at most ``PROBE_TOKENS`` long and the batch shrinks for large vocabularies,
    so the check of an imported model (context 8192, vocabulary 49152) stays a few MB of logits.
    """
    gen = torch.Generator().manual_seed(seed)
    if cfg.arch == "mlp":
        return torch.randn(batch, cfg.d_in, generator=gen)
    if cfg.arch == "vit":
        channels = (cfg.channels,) if cfg.channels else ()
        return torch.randn(batch, *channels, cfg.image_size, cfg.image_size, generator=gen)
    n = min(cfg.n_ctx, PROBE_TOKENS)
    batch = max(2, min(batch, PROBE_LOGITS // (n * cfg.n_out)))
    return torch.randint(0, cfg.d_vocab, (batch, n), generator=gen)


def function_check(
    cfg: ModelConfig, params_b: Params, cfg_aligned: ModelConfig, aligned_b: Params
) -> float:
    """``max |Δlogits|`` of aligned B against the original B on :func:`probe_inputs`, float32."""
    x = probe_inputs(cfg)

    def f32(p: Params) -> Params:
        return {k: v.detach().to("cpu", torch.float32) for k, v in p.items()}

    with torch.no_grad():
        ref = forward(cfg, f32(params_b), x)
        out = forward(cfg_aligned, f32(aligned_b), x)
    return float((ref - out).abs().max())


def worst_check(values: Iterable[float | None]) -> float:
    """The largest function check, NaN if any is NaN (Python's ``max`` drops a NaN that is not
    first); None entries (not checked) are skipped. 0.0 for no values."""
    checks = [float(v) for v in values if v is not None]
    if any(math.isnan(v) for v in checks):
        return math.nan
    return max(checks, default=0.0)


def function_warnings(
    checks: Mapping[str, float | None], tol: float = FUNCTION_TOLERANCE
) -> list[str]:
    """One line per function check that is NaN or above ``tol`` (max |Δlogits|, float32).

    ``checks`` maps what was checked (e.g. "B aligned to A") to its value; None means not
    checked and is skipped. A NaN check means the logits themselves are not finite on the probe
    batch, so the function cannot be said to be preserved either.
    """
    out = []
    for what, v in checks.items():
        if v is None:
            continue
        if math.isnan(v):
            out.append(f"function check of {what} is NaN: its logits are not finite")
        elif v > tol:
            out.append(
                f"function check of {what} is {v:.3g}, above the tolerance {tol:g}: "
                "it does not compute the same function"
            )
    return out


def weight_distance(a: Params, b: Params) -> float:
    """``‖θ_A − θ_B‖²`` summed over every parameter, float64 (one parameter at a time)."""
    return float(sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in a))


def _sq_norm(p: Params) -> float:
    return float(sum(float(v.double().pow(2).sum()) for v in p.values()))


def _moved(spec: Spec, elements: dict[str, Element], params: Params, name: str) -> torch.Tensor:
    """One parameter under ``elements`` (float64): the transform, one tensor at a time."""
    t = Transform(elements)
    return apply(spec, t, {name: params[name].double()}, check=False)[name]


def _aligned_distance(spec: Spec, elements: dict[str, Element], a: Params, b: Params) -> float:
    """``‖θ_A − π(θ_B)‖²`` without materialising π(θ_B): parameter by parameter, float64."""
    return float(sum(float((a[k].double() - _moved(spec, elements, b, k)).pow(2).sum()) for k in a))


def _identity_element(kind: str, n: int) -> Element:
    if kind == ORTH:
        return Element(kind, matrix=torch.eye(n, dtype=torch.float64))
    return Element(kind, torch.arange(n), torch.ones(n, dtype=torch.float64))


def _finish(
    method: str,
    group: str,
    cfg: ModelConfig,
    params_b: Params,
    cfg_p: ModelConfig,
    a: Params,
    b: Params,
    transform: Transform,
    t0: float,
    **fields: Any,
) -> MatchResult:
    """Apply π to processed B (checked: exact for its norm state) and fill in the result."""
    dtype = next(iter(params_b.values())).dtype
    aligned = {k: v.to(dtype) for k, v in apply(spec_for(cfg_p), transform, b).items()}
    a = {k: v.to(dtype) for k, v in a.items()}
    check = function_check(cfg, params_b, cfg_p, aligned)
    return MatchResult(
        method,
        group,
        transform,
        cfg_p,
        a,
        aligned,
        function_check=check,
        seconds=time.perf_counter() - t0,
        **fields,
    )


def naive(cfg: ModelConfig, params_a: Params, params_b: Params, group: str = "perm") -> MatchResult:
    """No alignment: π = identity (after the same processing as the matched methods)."""
    t0 = time.perf_counter()
    cfg_p, a, b = prepare_pair(cfg, params_a, params_b, group)
    obj = [weight_distance(a, b)]
    return _finish("naive", group, cfg, params_b, cfg_p, a, b, Transform({}), t0, objective=obj)


# ----------------------------------------------------------------------------- solving by kind


def _solve(kind: str, m: torch.Tensor, m_abs: torch.Tensor | None) -> Element:
    """The element of ``kind`` maximising ``Σ_i s_i M[i, π(i)] + M_abs[i, π(i)]`` (orth: tr GM).

    ``M_abs`` collects axes acted on by |G| (norm gains): they see the permutation, not signs.
    """
    n = m.shape[0]
    extra = torch.zeros_like(m) if m_abs is None else m_abs
    ones = torch.ones(n, dtype=torch.float64)
    rows = torch.arange(n)
    if kind == PERM:
        return Element(kind, solve_perm(m + extra), ones)
    if kind == SIGNED_PERM:
        perm = solve_perm(m.abs() + extra)
        return Element(kind, perm, torch.where(m[rows, perm] < 0, -1.0, 1.0).double())
    if kind == GLOBAL_SIGN:
        best = None
        for sign in (1.0, -1.0):
            perm = solve_perm(sign * m + extra)
            score = float((sign * m + extra)[rows, perm].sum())
            if best is None or score > best[0]:
                best = (score, Element(kind, perm, sign * ones))
        return best[1]
    if kind == ORTH:
        return Element(kind, matrix=solve_orth(m).T.contiguous())
    raise ValueError(f"no solver for kind {kind!r}")


def _weight_similarity(
    spec: Spec,
    var: str,
    a: Params,
    b: Params,
    unsolved: set[str],
    elements: dict[str, Element] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``M[i, j] = Σ ⟨W_A[.., i, ..], W_B'[.., j, ..]⟩`` over the axes ``var`` touches.

    ``B' = π_{−v}(θ_B)``: ``elements`` (every variable but ``var``) are applied to one touched
    parameter of B at a time, so no transformed copy of the whole model is ever held.
    Returns (M over G and G⁻ᵀ axes, M over |G| and P(G) axes or None). For the orthogonal and
    monomial ±1 elements matched here G⁻ᵀ = G, so readers and writers add up alike; norm gains
    (|G|) and gated-FFN gates (P(G), only permuted) see the permutation, never signs. A parameter
    with an axis of a variable in ``unsolved`` (not visited yet) is left out: its other axis is
    still unaligned, and its cross-product would be noise that can trap the descent.
    """
    n = spec.variables[var].size
    others = {k: e for k, e in (elements or {}).items() if k != var}
    m = torch.zeros(n, n, dtype=torch.float64)
    m_abs = None
    for name, axis, role in spec.touches(var):
        if name not in a:  # folded away by processing
            continue
        if any(r is not None and r.var in unsolved for r in spec.axes[name]):
            continue
        x = a[name].double().movedim(axis, 0).reshape(n, -1)
        y = _moved(spec, others, b, name).movedim(axis, 0).reshape(n, -1)
        if role.act in (ABS, PERM_OF):
            m_abs = x @ y.T if m_abs is None else m_abs + x @ y.T
        else:
            m = m + x @ y.T
    return m, m_abs


def _grouped_perm(score: torch.Tensor, group: int) -> torch.Tensor:
    """Permutation maximising ``Σ_i score[i, π(i)]`` that moves blocks of ``group`` slots.

    Grouped-query heads (S_r ≀ S_{n/r}): block I of A and block J of B score the best assignment
    of their r query heads to each other; the blocks are then assigned on those scores, and each
    chosen pair of blocks keeps its inner assignment. Exact optimum over the wreath product.
    """
    if group == 1:
        return solve_perm(score)
    nb = score.shape[0] // group
    inner: dict[tuple[int, int], torch.Tensor] = {}
    block = torch.empty(nb, nb, dtype=torch.float64)
    for i in range(nb):
        for j in range(nb):
            sub = score[i * group : (i + 1) * group, j * group : (j + 1) * group]
            inner[i, j] = solve_perm(sub)
            block[i, j] = sub[torch.arange(group), inner[i, j]].sum()
    blocks = solve_perm(block)
    return torch.cat([int(j) * group + inner[i, int(j)] for i, j in enumerate(blocks)])


def _head_element(
    spec: Spec, var: str, a: Params, b: Params, elements: dict[str, Element] | None = None
) -> Element:
    """Head permutation minimising the QK/OV circuit cost (invariant to within-head maps).

    Weights shared by a group of query heads (role ``"G/group"``: grouped-query K and V) are
    repeated for every query head of their group, so the cost is per query head, and the
    assignment moves whole groups (:func:`_grouped_perm`) when ``Variable.group`` > 1.
    """
    v = spec.variables[var]
    p = f"blocks.{v.layer}.attn"
    others = {k: e for k, e in (elements or {}).items() if k != var}
    ws = []
    for side in (a, b):
        for w in (f"{p}.W_{m}" for m in "QKVO"):
            t = side[w].double() if side is a else _moved(spec, others, side, w)
            axis, role = next((i, r) for i, r in enumerate(spec.axes[w]) if r and r.var == var)
            if role.act == GROUP_OF:
                t = t.repeat_interleave(v.group, dim=axis)
            ws.append(t)
    cost = head_cost(*ws)
    perm = solve_heads(cost) if v.group == 1 else _grouped_perm(-cost, v.group)
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


# ----------------------------------------------------------------------------- weight matching


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
                new = _head_element(spec, var, a, b, elements)
            else:
                unsolved = set(names) - set(elements) - {var}
                m, m_abs = _weight_similarity(spec, var, a, b, unsolved, elements)
                new = _solve(kinds[var], m, m_abs)
            changed |= _changed(elements.get(var), new)
            elements[var] = new
        objective.append(_aligned_distance(spec, elements, a, b))
        settled = abs(objective[-2] - objective[-1]) <= 1e-10 * scale
        if not changed and (kinds["resid"] != ORTH or settled):
            break
    transform = Transform(dict(elements))
    return _finish(
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


# ----------------------------------------------------------------------------- activation matching


def _collect(
    cfg: ModelConfig, params: Params, inputs: torch.Tensor, device: torch.device
) -> dict[str, torch.Tensor]:
    cache: dict[str, torch.Tensor] = {}
    x = inputs.to(device)
    if x.is_floating_point():
        x = x.double()
    with torch.no_grad():
        forward(cfg, {k: v.to(device, torch.float64) for k, v in params.items()}, x, cache)
    return {k: v.cpu() for k, v in cache.items()}


def _pool(x: torch.Tensor, n: int, drop_first: bool) -> torch.Tensor:
    """All positions pooled into rows: [batch(, pos), ..., n] → [rows, n]."""
    if drop_first and x.ndim >= 3:
        x = x[:, 1:]
    return x.reshape(-1, n)


def _correlation(xa: torch.Tensor, xb: torch.Tensor, per_coordinate: bool) -> torch.Tensor:
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


def activation_matching(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    inputs: torch.Tensor,
    *,
    drop_first: bool = False,
    device: str | torch.device | None = None,
) -> MatchResult:
    """Activation matching on one fixed batch ``inputs`` (module docstring).

    Residual stream: the correlation matrices of every layer boundary ``resid.{l}``
    (l = 0..n_layers, all positions pooled) are standardised per layer and summed, then solved
    by the residual kind (Pearson correlation for permutation kinds; centred, per-layer scaled
    cross-covariance for O(d), which z-scoring per coordinate would not respect). FFN units:
    Pearson correlation of ``mlp.hidden``. Heads: cosine similarity of each head's residual write
    ``z_h·W_O[h]`` (B's mapped through G), assigned as a permutation. ``drop_first`` leaves out
    position 0 (attention sinks of text models).
    """
    t0 = time.perf_counter()
    dev = torch.device(device) if device is not None else torch.device("cpu")
    cfg_p, a, b = prepare_pair(cfg, params_a, params_b, group)
    spec = spec_for(cfg_p)
    kinds = matching_kinds(spec, group)
    ca, cb = _collect(cfg_p, a, inputs, dev), _collect(cfg_p, b, inputs, dev)
    d = cfg_p.d_model
    per_coord = kinds["resid"] != ORTH
    pooled = [
        (_pool(ca[f"resid.{i}"], d, drop_first), _pool(cb[f"resid.{i}"], d, drop_first))
        for i in range(cfg_p.n_layers + 1)
    ]
    m = sum(_correlation(xa, xb, per_coord) for xa, xb in pooled)
    elements = {"resid": _solve(kinds["resid"], m, None)}
    g = elements["resid"].dense()
    similarity = float((g.T * m).sum()) if kinds["resid"] == ORTH else 0.0
    for layer in range(cfg_p.n_layers):
        bl = f"blocks.{layer}"
        h_a = _pool(ca[f"{bl}.mlp.hidden"], cfg_p.d_mlp, drop_first)
        h_b = _pool(cb[f"{bl}.mlp.hidden"], cfg_p.d_mlp, drop_first)
        mv = f"mlp{layer}"  # gated units: a flipped up projection flips the unit's sign
        elements[mv] = _solve(kinds[mv], _correlation(h_a, h_b, True), None)
        if cfg_p.has_attn:
            heads = []
            for cache, p, rot in ((ca, a, None), (cb, b, g)):
                w_o = p[f"{bl}.attn.W_O"].double()
                o = torch.einsum("bphe,hed->hbpd", cache[f"{bl}.attn.z"], w_o)
                o = o.reshape(o.shape[0], o.shape[1], -1, d)
                if drop_first:
                    o = o[:, :, 1:]
                o = o.reshape(o.shape[0], -1, d)
                if rot is not None:
                    o = o @ rot  # B's writes in A's residual coordinates
                o = o.reshape(o.shape[0], -1)
                heads.append(o / (o.norm(dim=1, keepdim=True) + 1e-12))
            hv = f"heads{layer}"
            perm = _grouped_perm(heads[0] @ heads[1].T, spec.variables[hv].group)
            elements[hv] = Element(PERM, perm, torch.ones(len(perm), dtype=torch.float64))
    transform = Transform(elements)
    objective = [weight_distance(a, b), _aligned_distance(spec, transform.elements, a, b)]
    return _finish(
        "activation",
        group,
        cfg,
        params_b,
        cfg_p,
        a,
        b,
        transform,
        t0,
        objective=objective,
        rounds=1,
        info={"batch": int(inputs.shape[0]), "drop_first": drop_first, "similarity": similarity},
    )


# ----------------------------------------------------------------------------- one entry


def match(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    method: str,
    group: str,
    *,
    train_split: Any = None,
    seed: int = 0,
    device: str | torch.device | None = None,
    **kw: Any,
) -> MatchResult:
    """Align B to A with ``method`` ∈ {naive, weight, activation, learned} under ``group``.

    ``train_split`` (a ``data.Split``) is needed by learned matching (training batches) and by
    activation matching (its first ``kw.get("batch", 512)`` rows, a fixed batch, unless
    ``inputs`` is given). Other keywords go to the method. Every method's B is function-checked
    against the input B; here the processed A is checked against the input A as well
    (``function_check_a``): processing both endpoints must preserve both functions.
    """
    if method == "naive":
        r = naive(cfg, params_a, params_b, group)
    elif method == "weight":
        r = weight_matching(cfg, params_a, params_b, group, seed=seed, **kw)
    elif method == "activation":
        inputs = kw.pop("inputs", None)
        batch = kw.pop("batch", 512)
        if inputs is None:
            if train_split is None:
                raise ValueError("activation matching needs inputs or a train_split")
            inputs = train_split.inputs[:batch]
        r = activation_matching(cfg, params_a, params_b, group, inputs, device=device, **kw)
    elif method == "learned":
        if train_split is None:
            raise ValueError("learned matching needs a train_split")
        from landscape.matching.learned import learned_matching

        r = learned_matching(
            cfg, params_a, params_b, group, train_split, seed=seed, device=device, **kw
        )
    else:
        raise ValueError(f"unknown matching method {method!r}; expected one of {METHODS}")
    r.function_check_a = function_check(cfg, params_a, r.cfg, r.params_a)
    return r
