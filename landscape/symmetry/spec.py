"""The symmetry spec: which gauge variable acts on which parameter axis (docs/design.md §1,
"A residual gauge G acts on ...").

A :class:`Spec` declares, for every parameter name, which gauge variable acts on each axis::

    spec.variables["mlp0"]          -> Variable(name="mlp0", size=12, kinds=("perm",), ...)
    spec.axes["blocks.0.mlp.W_in"]  -> (Role("resid", "G^-T"), Role("mlp0", "G"))
    spec.axes["unembed.b_U"]        -> (None,)
    spec.touches("resid")           -> [("embed.W_E", 1, Role("resid", "G")), ...]

Every other fact (which axes a variable touches, which parameters write into the residual stream,
which read from it) is derived from ``spec.axes``, never written twice.

Variables: ``resid`` (the residual stream, size d_model), ``mlp{l}`` (FFN hidden units),
``heads{l}`` (attention heads), ``qk{l}`` and ``ov{l}`` (one d_head×d_head map per head; these are
*batched* over ``heads{l}``: ``Variable.over == "heads{l}"``), and with a mixture of experts
``experts{l}`` (the experts), over which ``mlp{l}`` is then batched.

A :class:`Role` says how an element G of the variable acts on one axis. With the convention
"act on axis a with matrix M" ≡ ``W'[..., i, ...] = Σ_j M[j, i] · W[..., j, ...]``
(right multiplication ``W·M`` along that axis), the three actions are

- ``"G"``: M = G. Writers into the stream (``W ← W·G``), FFN ``W_in``/``b_in`` columns,
  ``W_Q``/``b_Q`` under ``qk``, ``W_V``/``b_V`` under ``ov``, norm biases.
- ``"G^-T"``: M = G⁻ᵀ. Readers from the stream (``W ← G⁻¹·W``, which is ``Gᵀ·W`` for orthogonal
  G), ``W_out`` rows, ``W_K``/``b_K`` under ``qk``, ``W_O`` rows under ``ov`` (``W_O ← N⁻¹·W_O``).
  For a semi-orthogonal G (G·Gᵀ = I) the pseudo-inverse-transpose is G itself.
- ``"|G|"``: M = |G| (entrywise). Norm gains: ``N(x·G) = N(x)·G`` for a signed permutation G, and
  ``Gᵀ·diag(γ)·G = diag(γ·|G|)``, so the gain is permuted and never signed. Only monomial G act on
  gains; a rotation cannot move a gain, which is why O(d) needs the gains folded first.

Extended architectures (``landscape.models`` extensions, imported checkpoints)
-----------------------------------------------------------------------------
- Grouped-query attention (``n_kv_heads`` < ``n_heads``, r = n_heads / n_kv_heads query heads per
  key/value group): ``heads{l}`` has ``Variable.group == r`` and admits only permutations that
  move whole groups of r consecutive query heads onto groups, in any order inside a group
  (S_r ≀ S_{n_kv}); ``W_K``/``W_V``/``b_K``/``b_V`` follow by the induced permutation of the
  groups (act ``"G/group"``). The within-head maps are shared by a whole group:
  ``qk{l}``/``ov{l}`` have ``Variable.group == r`` and hold one map per query head, equal
  across each group (so a head permutation that moves whole groups carries them along as
  without GQA); the group's query heads take it per head (``W_Q·M``, ``N⁻¹·W_O``), its
  key/value head once (act ``"G^-T/kv"`` on ``W_K``/``b_K``: ``W_K·M⁻ᵀ``; ``"G/kv"`` on
  ``W_V``/``b_V``: ``W_V·N``). Every score ``(x·W_Q·M)(y·W_K·M⁻ᵀ)ᵀ`` of the group's heads and
  every output ``p·(y·W_V·N)·N⁻¹·W_O`` is unchanged; a map differing inside a group is not a
  symmetry.
- Rotary positions (``cfg.pos == "rotary"``, the first r = ``rotary_dim`` dimensions of a head
  rotated, dimension i paired with i + r/2, :func:`landscape.models.primitives.rotary`): q and k
  are multiplied on the right by a position-dependent R_t between W_Q/W_K and the dot product,
  ``s = q·R_t·R_sᵀ·kᵀ``, and ``q·M``, ``k·M⁻ᵀ`` keep it for all positions iff M commutes with
  every ``R_t·R_sᵀ``: on each frequency pair (i, i + r/2) a 2×2 block ``[[a, c], [−c, a]]`` (a
  scaled rotation a·I + b·J; a rotation's commutant, as the frequencies are distinct), zero
  between pairs and between rotated and unrotated dimensions, and any invertible block on the
  d_head − r unrotated dimensions (partial rotary). ``qk{l}`` then admits only that kind,
  ``rope-commuting`` (``Variable.rotary == r``); as a complex number a pair's block is one
  scaling ``w = a + ic`` (``(x_i + i·x_{i+r/2})·w``), and ``M⁻ᵀ`` is ``w/|w|²``, the same
  rotation. Per-layer bases change the frequencies, not the pairs. ``ov{l}`` is unaffected.
- Gated FFN, ``h = act(x·W_gate) ⊙ (x·W_in)``: ``mlp{l}`` admits signed permutations and positive
  (and signed) scalings, because the up projection is linear: flipping or scaling column i of
  ``W_in``/``b_in`` and undoing it on row i of ``W_out`` is exact for any activation. The gate
  only follows the permutation (act ``"P(G)"``): SiLU/GELU are neither odd nor homogeneous, so a
  gate unit can be neither flipped nor scaled.

- Q/K norms (``qk_norm``, Qwen3 "head", OLMo 2 "full"): an RMSNorm on q and k sits after
  W_Q/W_K, so the residual groups are untouched (W_Q, W_K still read the stream like any reader).
  Head permutations stay exact: the "head" gain is shared by every head, and the "full" norm
  divides by the RMS over all heads, which a permutation of heads keeps, while the gains
  [heads, d_head] move with their heads (``q_norm.w`` like ``W_Q``, ``k_norm.w`` with the
  key/value group, like ``W_K``). The within-head QK maps are not exact under a q/k norm, even
  without RoPE: W_Q·M and W_K·M⁻ᵀ cancel only in the bilinear q·kᵀ, and the norm sits between
  the projection and that product. It divides by ‖q‖ (of the head or of the whole position),
  which an M that is not orthogonal changes; and even an orthogonal M must commute with the
  per-coordinate gains (``N(q·M)·γ ≠ N(q)·γ·M``), which a rotation does not (nor a pair's
  scaled rotation under RoPE: its scale changes ‖q‖, its angle mixes two gains). ``qk{l}`` is
  therefore not declared under a q/k norm; ``ov{l}`` is unaffected (V and O have no norm).
- Post-norm blocks (``block="post"``, OLMo 2): ``x + N(f(x))`` with gains ``ln1_post``/``ln2_post``
  (role ``"|G|"``). A post norm's gain multiplies a block's output before the residual add, so
  no reader can absorb it (every later reader and the final norm see the sum of all blocks'
  outputs): :func:`fixed_gain_norms`. The RMS norm is odd and permutation-equivariant,
  ``N(a·G)·(γ·|G|) = N(a)·γ·G`` for a signed permutation G (W_O, W_out write ``a·G``), so B_d is
  exact; a rotation cannot move γ, even after ``fold_norm_gains`` (which folds only the final
  norm here), so the ``resid`` variable of such a model admits no orthogonal or semi-orthogonal
  kind (:func:`resid_blocked` says why).
- Sandwich blocks (``block="sandwich"``, Gemma 2 and 3: ``x + N_post(f(N(x)))``): the input
  norms ``ln1``/``ln2`` are pre-norm ones, read by Q, K, V and the FFN and folded like them;
  the output norms are post norms as above, so B_d is exact and rotations are not, folded or
  not. Softcaps (``c·tanh(s / c)`` on the scores and on the logits), sliding windows (a mask
  on the scores) and per-layer rotary bases act where every gauge has already cancelled, so
  they change no group.
- Norms after the residual sums (``block="postln"``, BERT): the stream is each norm's output, so
  the norm gains and biases act on the stream as before a norm (``|G|``, ``G``), every matrix
  after a norm reads it, and the head's layers (masked-LM transform, pooler) read it into a space
  of their own, which no variable acts on (``_postln``). No processing folds these norms, so
  rotations stay inexact, and with LayerNorm so do signed permutations: the ``resid`` variable
  admits S_d × {±I} (:func:`resid_blocked` says why).
- Parallel blocks (``block="parallel"``, GPT-NeoX: ``x + attn(N1(x)) + mlp(N2(x))``): the spec
  is the pre-norm one. Both norms read the one stream x entering the block, which every gauge
  maps to x·G as it maps the stream the MLP's norm reads in a pre-norm block, and the writers
  and readers are the same parameters; so every group of the pre-norm block is exact here, on
  the same conditions.

- Mixtures of experts (``n_experts`` E > 0, top k): each FFN is ``Σ_e w_e(x)·FFN_e(x)`` with
  the router's weights w, a softmax over each position's k largest logits ``x·W_router`` (or,
  ``norm_top_k`` False, those k entries of a softmax over all logits).
  ``experts{l}`` (family ``experts``, size E) permutes the experts: every expert parameter's
  leading axis and the router's column (``W_router``, ``b_router``) move together (role
  ``"G"``), so the logits are permuted, the same k experts are chosen and weighted alike, and
  the sum over experts only changes order. ``mlp{l}`` acts inside each expert as on a plain
  FFN (the same kinds: permutations, signs and scalings where the FFN's kind admits them), one
  element per expert slot (``Variable.over == "experts{l}"``, a per-slot monomial element:
  ``perm`` and ``scale`` [E, d_mlp]), indexed by the slot *after* the expert permutation like
  the within-head maps. The router reads the normalised stream, a reader like ``W_in``
  (``G^-T``, and ``ln2`` folds into it), so every residual group is exact on the conditions
  it has without experts. The experts' permutation is a symmetry only as a whole: an expert's
  column of the router is what routes to it.

Which residual groups are exact depends on the norm state (docs/design.md §1 table):
:func:`landscape.symmetry.action.resid_needs`, and on :func:`resid_blocked`.

Group levels (:data:`RESID_GROUPS`, :data:`SYMMETRY_LEVELS`) name a kind per variable;
:func:`group_kinds` turns a level into that mapping for one spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from landscape.models import ModelConfig, param_shapes
from landscape.models.layouts import layout_of

G, INV_T, ABS = "G", "G^-T", "|G|"
GROUP_OF = "G/group"  # the permutation G induces on groups of Variable.group slots (GQA)
# A per-slot map shared by groups of Variable.group slots, on an axis with one slot per group
# (GQA: a key/value head takes the map of its group's query heads): G, or its inverse-transpose
KV_G, KV_INV_T = "G/kv", "G^-T/kv"
PERM_OF = "P(G)"  # the permutation part of a monomial G, without signs or scales (FFN gate)

# Kinds of group element. The first four form a chain of subgroups of O(d).
PERM = "perm"
GLOBAL_SIGN = "perm-global-sign"  # S_d × {±I}: a permutation times one global sign
SIGNED_PERM = "signed-perm"  # B_d = S_d ⋉ {±1}^d
ORTH = "orth"  # O(d)
# O(d) fixing the mean direction: G·1 = 1 (so 1ᵀ·G = 1ᵀ), i.e. O(d−1) on the complement of 1.
# Between S_d and O(d): it keeps a centred (mean-free) stream centred, where LayerNorm with unit
# gain equals RMSNorm, so a LayerNorm format (GPT-2, GPT-NeoX) can hold the rotated model.
ORTH_MEAN = "orth-mean"
SEMI_ORTH = "semi-orth"  # G (d_old × d_new), G·Gᵀ = I: width change
SCALE = "scale"  # positive diagonal
SCALED_PERM = "scaled-perm"  # permutation × positive diagonal (ReLU units)
INVERTIBLE = "invertible"  # GL(n)
# Per-head maps commuting with RoPE: one scaled rotation a·I + b·J per frequency pair (the
# half-split pairs of dimension i with i + r/2), any invertible block on the unrotated dimensions
ROPE = "rope-commuting"
# Kinds whose elements are monomial matrices (a permutation with signs or scales)
MONOMIAL_KINDS = (PERM, GLOBAL_SIGN, SIGNED_PERM, SCALE, SCALED_PERM)
KINDS = (PERM, GLOBAL_SIGN, SIGNED_PERM, ORTH, ORTH_MEAN, SEMI_ORTH, SCALE, SCALED_PERM,
         INVERTIBLE, ROPE)  # fmt: skip
_CHAIN = (PERM, GLOBAL_SIGN, SIGNED_PERM, ORTH)

# Group levels by name: the residual kind, plus permutations of FFN units and heads.
RESID_GROUPS = {
    "perm": PERM,
    "perm-global-sign": GLOBAL_SIGN,
    "signed-perm": SIGNED_PERM,
    "orth": ORTH,
    "orth-mean": ORTH_MEAN,
}
# every level of the symmetry table: the residual ones, the within-head maps, FFN scalings
SYMMETRY_LEVELS = (*RESID_GROUPS, "qk", "ov", "scale")


class Role(NamedTuple):
    """How ``var`` acts on one parameter axis: ``act`` ∈ {"G", "G^-T", "|G|", "G/group", "P(G)",
    "G/kv", "G^-T/kv"}."""

    var: str
    act: str

    @property
    def transpose(self) -> bool:
        """True when the axis transforms by the inverse-transpose (a reader of ``var``)."""
        return self.act in (INV_T, KV_INV_T)


@dataclass(frozen=True)
class Variable:
    """One gauge variable: its size, the element kinds it admits, and its family/layer."""

    name: str
    size: int
    kinds: tuple[str, ...]
    family: str  # resid, mlp, heads, qk, ov, experts
    layer: int | None = None
    over: str | None = None  # per-slot variable: one element per slot of this variable
    # >1: permutations must move blocks of this many consecutive slots (GQA); for a per-slot
    # variable: one map shared by each block of this many consecutive slots of ``over``
    group: int = 1
    rotary: int = 0  # kind ROPE: dimensions of each slot that RoPE rotates (half-split pairs)

    @property
    def widest(self) -> str:
        """The largest kind the variable admits (the last one), e.g. what within-head maps are
        matched as."""
        return self.kinds[-1]


@dataclass(frozen=True, eq=False)
class Spec:
    """Symmetry spec of one architecture; see the module docstring for the data structure.

    ``norm_readers[prefix]`` lists the (weight, bias) pairs fed by the norm ``prefix`` (``ln1``
    feeds Q, K, V; ``ln2`` feeds ``W_in``; ``ln_final`` feeds ``W_U``): the folding steps use it.
    """

    cfg: ModelConfig
    variables: dict[str, Variable]
    axes: dict[str, tuple[Role | None, ...]]
    norm_readers: dict[str, tuple[tuple[str, str], ...]]

    def touches(self, var: str) -> list[tuple[str, int, Role]]:
        """Every (parameter, axis, role) that ``var`` acts on, in parameter order."""
        return [
            (name, axis, role)
            for name, roles in self.axes.items()
            for axis, role in enumerate(roles)
            if role is not None and role.var == var
        ]

    def is_norm_param(self, name: str) -> bool:
        return name.rsplit(".", 1)[0] in self.norm_readers

    def axis_of(self, name: str, var: str = "resid") -> int:
        """The first axis of parameter ``name`` that ``var`` acts on (StopIteration: none)."""
        return next(a for a, r in enumerate(self.axes[name]) if r is not None and r.var == var)

    @property
    def writers(self) -> list[tuple[str, int]]:
        """(parameter, resid axis) of everything added into the residual stream (W ← W·G)."""
        return [
            (n, a) for n, a, r in self.touches("resid") if r.act == G and not self.is_norm_param(n)
        ]

    @property
    def readers(self) -> list[tuple[str, int]]:
        """(parameter, resid axis) of everything reading a normalised stream (W ← G⁻¹·W)."""
        return [(n, a) for n, a, r in self.touches("resid") if r.act == INV_T]

    def family(self, family: str) -> list[str]:
        return [v.name for v in self.variables.values() if v.family == family]


def fixed_gain_norms(cfg: ModelConfig) -> tuple[str, ...]:
    """Norms whose gain no processing can fold: the output norms (``blocks.{l}.ln1_post``,
    ``ln2_post``), whose output is added to the stream, and the norms after the residual sums
    (``ln_embed``, ``blocks.{l}.ln1``, ``ln2``), whose output is the stream itself (module
    docstring); which a block has is its layout's fact (``BlockLayout.fixed_gain_norms``)."""
    layout = layout_of(cfg)
    embed = ("ln_embed",) if layout.embed_norm else ()
    per_block = layout.fixed_gain_norms(cfg.has_attn)
    return embed + tuple(f"blocks.{layer}.{n}" for layer in range(cfg.n_layers) for n in per_block)


def resid_blocked(cfg: ModelConfig) -> str:
    """Why no processing makes a rotation (or a width change) of the stream exact, and with
    LayerNorm after the residual sums why none makes a sign pattern other than ±I exact; ""
    when :func:`landscape.symmetry.action.resid_needs` names the steps that do.

    After the residual sums (``block="postln"``, BERT) the stream is a norm's output
    ``x = N(z)·γ + β`` and the skip connection carries it whole into the next sum, so a gauge
    must satisfy ``N(z·G)·γ' + β' = (N(z)·γ + β)·G``. Permutations and one global sign do
    (``γ' = |G|·γ``, ``β' = β·G``). A rotation cannot move γ, and no reader can absorb it: the
    skip path is no reader. LayerNorm subtracts the mean of z, which only ±I keeps among sign
    patterns; ``center_writers`` keeps the function (every writer's sum is normalised, and
    LayerNorm ignores shifts along 1) but not the mean of the skip path's N(z)·γ + β, so the
    stream never becomes an RMSNorm one (measured: tests/models/test_import_bert.py). RMSNorm
    after the sums keeps signed permutations.
    """
    if layout_of(cfg).norm_sum:
        why = (
            "with the norm after each residual sum (post-LN) the stream is the norm's output "
            "N(z)·γ + β, carried whole by the skip connection, where no reader can absorb γ: a "
            "rotation cannot move the gains"
        )
        if cfg.norm == "ln":
            why += (
                ", and centring the writers keeps the function but not the stream's mean, so "
                "LayerNorm keeps only ±I among sign patterns"
            )
        return why
    if not fixed_gain_norms(cfg):
        return ""
    return (
        "the post-norm gains (ln1_post, ln2_post) multiply each block's output before the "
        "residual add, where no reader can absorb them: a rotation cannot move them, even "
        "after fold_norm_gains"
    )


def spec_for(cfg: ModelConfig) -> Spec:
    """The symmetry spec of ``cfg``'s architecture (mlp, vit and gpt share this one builder)."""
    shapes, layout = param_shapes(cfg), layout_of(cfg)
    res_g, res_inv, res_abs = Role("resid", G), Role("resid", INV_T), Role("resid", ABS)
    resid_kinds = (PERM, GLOBAL_SIGN, SIGNED_PERM)
    if not resid_blocked(cfg):
        resid_kinds = (*_CHAIN, ORTH_MEAN, SEMI_ORTH)
    if layout.norm_sum and cfg.norm == "ln":  # resid_blocked: LayerNorm's mean, too
        resid_kinds = (PERM, GLOBAL_SIGN)
    variables = {"resid": Variable("resid", cfg.d_model, resid_kinds, "resid")}
    axes: dict[str, tuple[Role | None, ...]] = {}
    norm_readers: dict[str, tuple[tuple[str, str], ...]] = {}

    def writer(name: str) -> None:
        if name in shapes:
            axes[name] = (None,) * (len(shapes[name]) - 1) + (res_g,)

    def norm(prefix: str, readers: tuple[tuple[str, str], ...]) -> None:
        axes[f"{prefix}.w"] = (res_abs,)
        # the bias is added after the norm, a vector like x itself; an RMSNorm stream rewritten
        # from LayerNorm by center_writers may still carry one, so it is declared for both norms
        axes[f"{prefix}.b"] = (res_g,)
        norm_readers[prefix] = readers

    def bias(name: str, roles: tuple[Role | None, ...]) -> None:
        if name in shapes:  # bias-free models (cfg.bias=False) lack it
            axes[name] = roles

    def post_norm(prefix: str) -> None:
        # a post norm's gain has no readers (module docstring): it is permuted, never folded
        if f"{prefix}.w" in shapes:
            axes[f"{prefix}.w"] = (res_abs,)

    for name in ("embed.W_E", "embed.b_E", "embed.cls", "pos_embed.W_pos"):
        writer(name)
    mlp_kinds = (PERM, SCALE, SCALED_PERM) if cfg.act == "relu" else (PERM,)
    if cfg.gated:  # module docstring: the linear up projection carries signs and scales
        mlp_kinds = (PERM, SIGNED_PERM, SCALE, SCALED_PERM)
    group = cfg.n_heads // cfg.kv_heads if cfg.has_attn else 1
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        if cfg.has_attn:
            hv, qk, ov = f"heads{layer}", f"qk{layer}", f"ov{layer}"
            variables[hv] = Variable(hv, cfg.n_heads, (PERM,), "heads", layer, group=group)
            # module docstring: under RoPE only maps commuting with the rotation; under GQA
            # one map per key/value group; a q/k norm blocks the QK maps
            qk_kinds = (ROPE,) if cfg.rot_dim else (ORTH, INVERTIBLE)
            if cfg.qk_norm == "none":
                variables[qk] = Variable(qk, cfg.d_head, qk_kinds, "qk", layer, over=hv,
                                         group=group, rotary=cfg.rot_dim)  # fmt: skip
            variables[ov] = Variable(ov, cfg.d_head, (ORTH, INVERTIBLE), "ov", layer, over=hv,
                                     group=group)  # fmt: skip
            kv_head = Role(hv, G if group == 1 else GROUP_OF)
            for m, head, inner in (
                ("Q", Role(hv, G), Role(qk, G)),
                ("K", kv_head, Role(qk, INV_T if group == 1 else KV_INV_T)),
                ("V", kv_head, Role(ov, G if group == 1 else KV_G)),
            ):
                inner = inner if inner.var in variables else None
                axes[f"{b}.attn.W_{m}"] = (head, res_inv, inner)
                bias(f"{b}.attn.b_{m}", (head, inner))
            inner_o = Role(ov, INV_T) if ov in variables else None
            axes[f"{b}.attn.W_O"] = (Role(hv, INV_T), inner_o, res_g)
            writer(f"{b}.attn.b_O")
            if cfg.qk_norm == "full":  # gains move with their heads, key gains with their group
                axes[f"{b}.attn.q_norm.w"] = (Role(hv, G), None)
                axes[f"{b}.attn.k_norm.w"] = (kv_head, None)
            elif cfg.qk_norm == "head":  # one gain shared by every head: nothing acts on it
                axes[f"{b}.attn.q_norm.w"] = axes[f"{b}.attn.k_norm.w"] = (None,)
            if layout.plain_norms:
                norm(f"{b}.ln1", tuple((f"{b}.attn.W_{m}", f"{b}.attn.b_{m}") for m in "QKV"))
            post_norm(f"{b}.ln1_post")
        mv = f"mlp{layer}"
        if cfg.moe:
            _experts(cfg, layer, mlp_kinds, variables, axes, norm_readers)
            post_norm(f"{b}.ln2_post")
            continue
        variables[mv] = Variable(mv, cfg.d_mlp, mlp_kinds, "mlp", layer)
        axes[f"{b}.mlp.W_in"] = (res_inv, Role(mv, G))
        bias(f"{b}.mlp.b_in", (Role(mv, G),))
        readers = [(f"{b}.mlp.W_in", f"{b}.mlp.b_in")]
        if cfg.gated:
            axes[f"{b}.mlp.W_gate"] = (res_inv, Role(mv, PERM_OF))
            bias(f"{b}.mlp.b_gate", (Role(mv, PERM_OF),))
            readers.append((f"{b}.mlp.W_gate", f"{b}.mlp.b_gate"))
        axes[f"{b}.mlp.W_out"] = (Role(mv, INV_T), res_g)
        writer(f"{b}.mlp.b_out")
        if layout.plain_norms:
            norm(f"{b}.ln2", tuple(readers))
        post_norm(f"{b}.ln2_post")
    norm("ln_final", (("unembed.W_U", "unembed.b_U"),))
    axes["unembed.W_U"] = (res_inv, None)
    bias("unembed.b_U", (None,))
    if layout.norm_sum:
        _postln(cfg, axes, norm_readers)
    missing = set(shapes) - set(axes)
    assert not missing, f"spec misses {sorted(missing)}"
    return Spec(cfg, variables, axes, norm_readers)


def _experts(
    cfg: ModelConfig,
    layer: int,
    mlp_kinds: tuple[str, ...],
    variables: dict[str, Variable],
    axes: dict[str, tuple[Role | None, ...]],
    norm_readers: dict[str, tuple[tuple[str, str], ...]],
) -> None:
    """The spec of block ``layer``'s mixture of experts (``cfg.n_experts`` > 0; module
    docstring): ``experts{l}`` permutes the experts, each with its router column, and
    ``mlp{l}``, one element per expert slot (``over="experts{l}"``), acts on each expert's units
    as on a plain FFN's. The router reads the normalised stream like every other reader."""
    b, ev, mv = f"blocks.{layer}", f"experts{layer}", f"mlp{layer}"
    res_g, res_inv = Role("resid", G), Role("resid", INV_T)
    variables[ev] = Variable(ev, cfg.n_experts, (PERM,), "experts", layer)
    variables[mv] = Variable(mv, cfg.d_mlp, mlp_kinds, "mlp", layer, over=ev)
    shapes = param_shapes(cfg)
    expert, unit = Role(ev, G), Role(mv, G)
    declared = {
        "W_router": (res_inv, expert),
        "b_router": (expert,),
        "W_in": (expert, res_inv, unit),
        "b_in": (expert, unit),
        "W_gate": (expert, res_inv, Role(mv, PERM_OF)),
        "b_gate": (expert, Role(mv, PERM_OF)),
        "W_out": (expert, Role(mv, INV_T), res_g),
        "b_out": (expert, res_g),
    }
    for leaf, roles in declared.items():
        if f"{b}.mlp.{leaf}" in shapes:
            axes[f"{b}.mlp.{leaf}"] = roles
    if layout_of(cfg).plain_norms:
        units = ("router", "in", "gate") if cfg.gated else ("router", "in")
        pairs = tuple((f"{b}.mlp.W_{u}", f"{b}.mlp.b_{u}") for u in units)
        axes[f"{b}.ln2.w"], axes[f"{b}.ln2.b"] = (Role("resid", ABS),), (res_g,)
        norm_readers[f"{b}.ln2"] = pairs


def _postln(
    cfg: ModelConfig,
    axes: dict[str, tuple[Role | None, ...]],
    norm_readers: dict[str, tuple[tuple[str, str], ...]],
) -> None:
    """The spec of norms after the residual sums (``BlockLayout.norm_sum``, BERT), from the
    pre-norm one.

    The stream is each norm's output ``N(z)·γ + β``, so gains and biases act on the stream as in
    a pre-norm block (``γ ← |G|·γ``, ``β ← β·G``) and every matrix after a norm reads the stream
    (``G^-T``) whatever it follows: ``ln_embed`` feeds the first block, ``ln1`` the FFN of its
    block, ``ln2`` the next block or the head. There is no ``ln_final``. The norms keep their
    readers here (so their parameters are norm parameters, never writers), but no processing
    folds them (:func:`fixed_gain_norms`). The head's layers (``head.W_in``: the masked-LM
    transform or the pooler) read the stream; their outputs, the head's norm and ``W_U`` behind
    them live in the head's own space, which no gauge acts on.
    """
    res_inv, res_abs, res_g = Role("resid", INV_T), Role("resid", ABS), Role("resid", G)
    for name in ("ln_final.w", "ln_final.b"):
        del axes[name]
    axes["ln_embed.w"], axes["ln_embed.b"] = (res_abs,), (res_g,)

    def ffn(layer: int) -> tuple[tuple[str, str], ...]:
        units = ("in", "gate") if cfg.gated else ("in",)
        units = ("router", *units) if cfg.moe else units
        return tuple((f"blocks.{layer}.mlp.W_{u}", f"blocks.{layer}.mlp.b_{u}") for u in units)

    def entering(layer: int) -> tuple[tuple[str, str], ...]:
        """What reads the stream that enters block ``layer`` (the head after the last)."""
        if layer == cfg.n_layers:
            return (("head.W_in", "head.b_in") if cfg.head != "linear"
                    else ("unembed.W_U", "unembed.b_U"),)  # fmt: skip
        if not cfg.has_attn:
            return ffn(layer)
        return tuple((f"blocks.{layer}.attn.W_{m}", f"blocks.{layer}.attn.b_{m}") for m in "QKV")

    norm_readers.clear()
    norm_readers["ln_embed"] = entering(0)
    for layer in range(cfg.n_layers):
        if cfg.has_attn:
            norm_readers[f"blocks.{layer}.ln1"] = ffn(layer)
        norm_readers[f"blocks.{layer}.ln2"] = entering(layer + 1)
    if cfg.head != "linear":
        axes["head.W_in"], axes["head.b_in"] = (res_inv, None), (None,)
        axes["unembed.W_U"] = (None, None)
        if cfg.head == "mlm":
            axes["head.ln.w"], axes["head.ln.b"] = (None,), (None,)


def group_kinds(spec: Spec, group: str, *, gated_signs: bool = False) -> dict[str, str]:
    """Kind per variable of a named group level (the one map from a level to its kinds).

    ``perm``/``perm-global-sign``/``signed-perm``/``orth``/``orth-mean``: the kind on ``resid`` plus
    permutations of every layer's FFN units and heads (FFN units first, then heads: the order
    weight matching's seeded visiting order is drawn over), and of a mixture's experts (last, so
    the order of the others is the one drawn without experts). ``qk``/``ov``: invertible maps
    inside every head (under rotary positions the QK maps commute with RoPE, kind
    ``rope-commuting``). ``scale``: positive scalings of every layer's FFN units (exact for ReLU
    only).

    ``gated_signs``: with a signed or orthogonal residual kind, FFN units that admit signed
    permutations (gated FFNs: the sign acts on the linear up projection, the gate is only
    permuted) get signed permutations instead of permutations. Matching sets it (a sign of a
    gated unit is a symmetry it should find); random elements of a level and the symmetry table
    keep the level's plain unit permutations.
    """
    if group in RESID_GROUPS:
        resid = RESID_GROUPS[group]
        signed = gated_signs and resid in (SIGNED_PERM, ORTH, ORTH_MEAN)
        kinds = {"resid": resid}
        for v in spec.family("mlp"):
            kinds[v] = SIGNED_PERM if signed and SIGNED_PERM in spec.variables[v].kinds else PERM
        kinds.update({v: PERM for v in spec.family("heads")})
        kinds.update({v: PERM for v in spec.family("experts")})
        return kinds
    if group in ("qk", "ov"):
        return {v: spec.variables[v].widest for v in spec.family(group)}
    if group == "scale":
        return {v: SCALE for v in spec.family("mlp")}
    raise ValueError(f"unknown group {group!r}; expected one of {SYMMETRY_LEVELS}")
