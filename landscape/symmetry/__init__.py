"""Weight-space symmetries of the zoo transformers: one spec per architecture, one ``apply``.

The spec (DESIGN §1, "Residual gauge G acts on ...")
-------------------------------------------------------
A :class:`Spec` declares, for every parameter name, which gauge variable acts on each axis::

    spec.variables["mlp0"]          -> Variable(name="mlp0", size=12, kinds=("perm",), ...)
    spec.axes["blocks.0.mlp.W_in"]  -> (Role("resid", "G^-T"), Role("mlp0", "G"))
    spec.axes["unembed.b_U"]        -> (None,)
    spec.touches("resid")           -> [("embed.W_E", 1, Role("resid", "G")), ...]

Every other fact (which axes a variable touches, which parameters write into the residual stream,
which read from it) is derived from ``spec.axes``, never written twice.

Variables: ``resid`` (the residual stream, size d_model), ``mlp{l}`` (FFN hidden units),
``heads{l}`` (attention heads), ``qk{l}`` and ``ov{l}`` (one d_head×d_head map per head; these are
*batched* over ``heads{l}``: ``Variable.over == "heads{l}"``).

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

Group elements
--------------
An :class:`Element` is one variable's group element, stored as a monomial matrix
(``G[perm[i], i] = scale[i]``: permutations, signed permutations, positive scalings) or as a dense
float64 matrix (orthogonal, semi-orthogonal, invertible; ``[h, n, n]`` for per-head variables). A
:class:`Transform` maps variable names to elements; a missing variable is the identity.
``g.compose(h)`` (also ``g @ h``) is "apply h, then g":
``apply(g @ h, θ) == apply(g, apply(h, θ))``.
Per-head maps are indexed by the head slot *after* the head permutation.

Extended architectures (``landscape.models`` extensions, imported checkpoints)
-----------------------------------------------------------------------------
- Grouped-query attention (``n_kv_heads`` < ``n_heads``, r = n_heads / n_kv_heads query heads per
  key/value group): ``heads{l}`` has ``Variable.group == r`` and admits only permutations that
  move whole groups of r consecutive query heads onto groups, in any order inside a group
  (S_r ≀ S_{n_kv}); ``W_K``/``W_V``/``b_K``/``b_V`` follow by the induced permutation of the
  groups (act ``"G/group"``). The within-head maps would have to be shared by a whole group, so
  ``qk{l}``/``ov{l}`` are not declared under GQA.
- Rotary positions: q and k are rotated by position-dependent 2×2 blocks between W_Q/W_K and the
  dot product, so only maps M commuting with every block would be exact (one complex scaling per
  frequency pair). ``qk{l}`` is not declared under RoPE; ``ov{l}`` is unaffected.
- Gated FFN, ``h = act(x·W_gate) ⊙ (x·W_in)``: ``mlp{l}`` admits signed permutations and positive
  (and signed) scalings, because the up projection is linear: flipping or scaling column i of
  ``W_in``/``b_in`` and undoing it on row i of ``W_out`` is exact for any activation. The gate
  only follows the permutation (act ``"P(G)"``): SiLU/GELU are neither odd nor homogeneous, so a
  gate unit can be neither flipped nor scaled.

Which residual groups are exact depends on the norm state (DESIGN §1 table), see
:func:`resid_needs`: RMSNorm with gains kept admits B_d (signed permutations); RMSNorm with folded
gains O(d) and semi-orthogonal width changes; LayerNorm admits S_d × {±I} (a global sign, the only
sign pattern that commutes with subtracting the mean) and becomes RMSNorm after
``processing.center_writers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from landscape.models import ModelConfig, Params, forward, param_shapes

G, INV_T, ABS = "G", "G^-T", "|G|"
GROUP_OF = "G/group"  # the permutation G induces on groups of Variable.group slots (GQA)
PERM_OF = "P(G)"  # the permutation part of a monomial G, without signs or scales (FFN gate)

# Kinds of group element. The first four form a chain of subgroups of O(d).
PERM = "perm"
GLOBAL_SIGN = "perm-global-sign"  # S_d × {±I}: a permutation times one global sign
SIGNED_PERM = "signed-perm"  # B_d = S_d ⋉ {±1}^d
ORTH = "orth"  # O(d)
SEMI_ORTH = "semi-orth"  # G (d_old × d_new), G·Gᵀ = I: width change
SCALE = "scale"  # positive diagonal
SCALED_PERM = "scaled-perm"  # permutation × positive diagonal (ReLU units)
INVERTIBLE = "invertible"  # GL(n)
KINDS = (PERM, GLOBAL_SIGN, SIGNED_PERM, ORTH, SEMI_ORTH, SCALE, SCALED_PERM, INVERTIBLE)
_CHAIN = (PERM, GLOBAL_SIGN, SIGNED_PERM, ORTH)
_MONOMIAL = (PERM, GLOBAL_SIGN, SIGNED_PERM, SCALE, SCALED_PERM)

# Group levels by name: the residual kind, plus permutations of FFN units and heads.
RESID_GROUPS = {
    "perm": PERM,
    "perm-global-sign": GLOBAL_SIGN,
    "signed-perm": SIGNED_PERM,
    "orth": ORTH,
}
GROUPS = (*RESID_GROUPS, "qk", "ov", "scale")

# Processing steps in the order they are run (landscape.symmetry.processing).
PROCESSING_ORDER = ("fold_norm_biases", "fold_norm_gains", "center_writers")


class Role(NamedTuple):
    """How ``var`` acts on one parameter axis: ``act`` ∈ {"G", "G^-T", "|G|", "G/group", "P(G)"}."""

    var: str
    act: str

    @property
    def transpose(self) -> bool:
        """True when the axis transforms by the inverse-transpose (a reader of ``var``)."""
        return self.act == INV_T


@dataclass(frozen=True)
class Variable:
    """One gauge variable: its size, the element kinds it admits, and its family/layer."""

    name: str
    size: int
    kinds: tuple[str, ...]
    family: str  # resid, mlp, heads, qk, ov
    layer: int | None = None
    over: str | None = None  # per-slot variable: one element per slot of this variable
    group: int = 1  # >1: permutations must move blocks of this many consecutive slots (GQA)


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


def spec_for(cfg: ModelConfig) -> Spec:
    """The symmetry spec of ``cfg``'s architecture (mlp, vit and gpt share this one builder)."""
    shapes = param_shapes(cfg)
    res_g, res_inv, res_abs = Role("resid", G), Role("resid", INV_T), Role("resid", ABS)
    variables = {"resid": Variable("resid", cfg.d_model, (*_CHAIN, SEMI_ORTH), "resid")}
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
            inner_maps = {qk: group == 1 and cfg.pos != "rotary", ov: group == 1}
            for v, declared in inner_maps.items():
                fam = v.rstrip("0123456789")
                if declared:
                    variables[v] = Variable(v, cfg.d_head, (ORTH, INVERTIBLE), fam, layer, over=hv)
            kv_head = Role(hv, G if group == 1 else GROUP_OF)
            for m, head, inner in (
                ("Q", Role(hv, G), Role(qk, G)),
                ("K", kv_head, Role(qk, INV_T)),
                ("V", kv_head, Role(ov, G)),
            ):
                inner = inner if inner.var in variables else None
                axes[f"{b}.attn.W_{m}"] = (head, res_inv, inner)
                bias(f"{b}.attn.b_{m}", (head, inner))
            inner_o = Role(ov, INV_T) if ov in variables else None
            axes[f"{b}.attn.W_O"] = (Role(hv, INV_T), inner_o, res_g)
            writer(f"{b}.attn.b_O")
            norm(f"{b}.ln1", tuple((f"{b}.attn.W_{m}", f"{b}.attn.b_{m}") for m in "QKV"))
        mv = f"mlp{layer}"
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
        norm(f"{b}.ln2", tuple(readers))
    norm("ln_final", (("unembed.W_U", "unembed.b_U"),))
    axes["unembed.W_U"] = (res_inv, None)
    bias("unembed.b_U", (None,))
    missing = set(shapes) - set(axes)
    assert not missing, f"spec misses {sorted(missing)}"
    return Spec(cfg, variables, axes, norm_readers)


# ----------------------------------------------------------------------------- group elements


@dataclass(frozen=True, eq=False)
class Element:
    """One variable's group element.

    Monomial form: ``G[perm[i], i] = scale[i]`` (``perm`` long, ``scale`` float64), so acting on an
    axis is ``W'[..., i, ...] = scale[i] · W[..., perm[i], ...]``. Dense form: ``matrix`` float64,
    ``[n_in, n_out]`` or ``[slots, n, n]`` for a per-slot variable (``over`` names the slots).
    """

    kind: str
    perm: torch.Tensor | None = None
    scale: torch.Tensor | None = None
    matrix: torch.Tensor | None = None
    over: str | None = None

    @property
    def is_monomial(self) -> bool:
        return self.perm is not None

    @property
    def size(self) -> int:
        """Input size (rows of G)."""
        return len(self.perm) if self.is_monomial else self.matrix.shape[-2]

    def dense(self) -> torch.Tensor:
        """The element as a float64 matrix (``[slots, n, n]`` for per-slot variables)."""
        if not self.is_monomial:
            return self.matrix
        n = len(self.perm)
        m = torch.zeros(n, n, dtype=torch.float64)
        m[self.perm, torch.arange(n)] = self.scale
        return m

    def inverse(self) -> Element:
        """G⁻¹ (for a semi-orthogonal G: the left inverse Gᵀ, which undoes the width change)."""
        if self.is_monomial:
            inv = torch.argsort(self.perm)
            return Element(self.kind, inv, (1.0 / self.scale)[inv])
        if self.kind in (ORTH, SEMI_ORTH):
            return Element(self.kind, matrix=self.matrix.transpose(-1, -2), over=self.over)
        return Element(self.kind, matrix=torch.linalg.inv(self.matrix), over=self.over)

    def acting(self, act: str, group: int = 1) -> Element | None:
        """The element acting on an axis with role ``act`` (None: it cannot act there).

        ``group`` is the variable's block size, used by ``"G/group"``.
        """
        if act == G:
            return self
        if act in (GROUP_OF, PERM_OF):
            if not self.is_monomial:
                return None
            if act == PERM_OF:
                return Element(PERM, self.perm, torch.ones_like(self.scale))
            blocks = self.perm[::group] // group
            return Element(PERM, blocks, torch.ones(len(blocks), dtype=torch.float64))
        if self.is_monomial:
            s = self.scale.abs() if act == ABS else 1.0 / self.scale
            return Element(self.kind, self.perm, s)
        if act == ABS:
            return None
        if self.kind in (ORTH, SEMI_ORTH):
            return self  # G⁻ᵀ = G (pseudo-inverse-transpose for semi-orthogonal)
        inv_t = torch.linalg.inv(self.matrix).transpose(-1, -2)
        return Element(self.kind, matrix=inv_t, over=self.over)


def _join(a: str, b: str) -> str:
    """Kind of a product of elements of kinds a and b."""
    if a == b:
        return a
    if a in _CHAIN and b in _CHAIN:
        return max(a, b, key=_CHAIN.index)
    if {a, b} <= {PERM, SCALE, SCALED_PERM}:
        return SCALED_PERM
    if SEMI_ORTH in (a, b) and {a, b} - {SEMI_ORTH} <= set(_CHAIN):
        return SEMI_ORTH
    return INVERTIBLE


def _matmul(a: Element, b: Element) -> Element:
    """The element with matrix A·B (acting on an axis: first A, then B)."""
    kind = _join(a.kind, b.kind)
    if a.is_monomial and b.is_monomial:
        return Element(kind, a.perm[b.perm], a.scale[b.perm] * b.scale)
    return Element(kind, matrix=a.dense() @ b.dense(), over=a.over or b.over)


def _permute_slots(m: torch.Tensor, slots: Element | None) -> torch.Tensor:
    """Per-slot matrices ``m[perm[i]]``: follow the slots through a permutation."""
    return m if slots is None else m[slots.perm]


@dataclass(frozen=True, eq=False)
class Transform:
    """A group element of the whole model: variable name → :class:`Element` (missing: identity)."""

    elements: Mapping[str, Element] = field(default_factory=dict)

    def compose(self, other: Transform) -> Transform:
        """``self ∘ other``: apply ``other`` first, then ``self``.

        Plain variables multiply as matrices along the axis, ``G = G_other · G_self``. Per-slot
        maps are indexed by the slot after the permutation, so for head permutation π of ``self``
        ``M[i] = M_other[π(i)] · M_self[i]``.
        """
        out: dict[str, Element] = {}
        for var in dict.fromkeys([*other.elements, *self.elements]):
            a, b = other.elements.get(var), self.elements.get(var)
            if a is not None and a.over is not None:
                a = Element(
                    a.kind, matrix=_permute_slots(a.matrix, self.elements.get(a.over)), over=a.over
                )
            out[var] = a if b is None else b if a is None else _matmul(a, b)
        return Transform(out)

    def __matmul__(self, other: Transform) -> Transform:
        return self.compose(other)

    def inverse(self) -> Transform:
        """g⁻¹ with ``g⁻¹ ∘ g = g ∘ g⁻¹ = identity`` (left inverse for width changes)."""
        out = {}
        for var, e in self.elements.items():
            if e.over is None:
                out[var] = e.inverse()
            else:
                slots = self.elements.get(e.over)
                m = _permute_slots(e.matrix, None if slots is None else slots.inverse())
                out[var] = Element(e.kind, matrix=torch.linalg.inv(m), over=e.over)
        return Transform(out)

    def matrix(self, var: str) -> torch.Tensor | None:
        """Dense float64 matrix of ``var``'s element (None for the identity)."""
        e = self.elements.get(var)
        return None if e is None else e.dense()


def identity() -> Transform:
    return Transform({})


def compose(g: Transform, h: Transform) -> Transform:
    """``g ∘ h``: ``apply(compose(g, h), θ) == apply(g, apply(h, θ))``."""
    return g.compose(h)


def inverse(g: Transform) -> Transform:
    return g.inverse()


def as_matrix(g: Transform, var: str) -> torch.Tensor | None:
    return g.matrix(var)


# ----------------------------------------------------------------------------- random elements


def random_orthogonal(n: int, gen: torch.Generator) -> torch.Tensor:
    """Haar-random O(n) in float64 (QR of a Gaussian with the signs of diag(R) fixed)."""
    q, r = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def random_semi_orthogonal(d_old: int, d_new: int, gen: torch.Generator) -> torch.Tensor:
    """G of shape (d_old, d_new) with orthonormal rows, G·Gᵀ = I (float64)."""
    q, r = torch.linalg.qr(torch.randn(d_new, d_old, generator=gen, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).T.contiguous()


def random_element(kind: str, n: int, gen: torch.Generator) -> Element:
    """A random element of the given kind acting on size ``n``."""
    ones = torch.ones(n, dtype=torch.float64)
    if kind == PERM:
        return Element(kind, torch.randperm(n, generator=gen), ones)
    if kind == GLOBAL_SIGN:
        sign = 1.0 if torch.rand(1, generator=gen).item() < 0.5 else -1.0
        return Element(kind, torch.randperm(n, generator=gen), sign * ones)
    if kind == SIGNED_PERM:
        s = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return Element(kind, torch.randperm(n, generator=gen), s)
    if kind in (SCALE, SCALED_PERM):
        s = torch.exp(0.5 * torch.randn(n, generator=gen, dtype=torch.float64))
        p = torch.randperm(n, generator=gen) if kind == SCALED_PERM else torch.arange(n)
        return Element(kind, p, s)
    if kind == ORTH:
        return Element(kind, matrix=random_orthogonal(n, gen))
    if kind == INVERTIBLE:
        # condition number at most e, so float32 round-off stays far below the test tolerance
        u = torch.rand(n, generator=gen, dtype=torch.float64) - 0.5
        m = random_orthogonal(n, gen) * torch.exp(u) @ random_orthogonal(n, gen)
        return Element(kind, matrix=m)
    raise ValueError(f"no random element of kind {kind!r} (width changes: use embed_width)")


def random_grouped_perm(n: int, group: int, gen: torch.Generator) -> Element:
    """A random permutation of ``n`` slots moving blocks of ``group`` consecutive slots as blocks
    (any order inside a block): S_group ≀ S_(n/group), e.g. query heads with their KV group."""
    blocks = torch.randperm(n // group, generator=gen)
    perm = torch.cat([b * group + torch.randperm(group, generator=gen) for b in blocks.tolist()])
    return Element(PERM, perm, torch.ones(n, dtype=torch.float64))


def group_kinds(spec: Spec, group: str) -> dict[str, str]:
    """Kind per variable of a named group level.

    ``perm``/``perm-global-sign``/``signed-perm``/``orth``: that kind on ``resid`` plus
    permutations of every layer's FFN units and heads. ``qk``/``ov``: invertible maps inside every
    head. ``scale``: positive scalings of every layer's FFN units (exact for ReLU only).
    """
    if group in RESID_GROUPS:
        kinds = {"resid": RESID_GROUPS[group]}
        kinds.update({v: PERM for v in spec.family("mlp") + spec.family("heads")})
        return kinds
    if group in ("qk", "ov"):
        return {v: INVERTIBLE for v in spec.family(group)}
    if group == "scale":
        return {v: SCALE for v in spec.family("mlp")}
    raise ValueError(f"unknown group {group!r}; expected one of {GROUPS}")


def random_transform(spec: Spec, kinds: Mapping[str, str] | str, seed: int) -> Transform:
    """A seeded random element: ``kinds`` maps variables to kinds, or names a group level."""
    if isinstance(kinds, str):
        kinds = group_kinds(spec, kinds)
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, var in spec.variables.items():  # spec order, so the seed fixes every element
        if name not in kinds:
            continue
        if var.group > 1 and kinds[name] == PERM:
            out[name] = random_grouped_perm(var.size, var.group, gen)
        elif var.over is None:
            out[name] = random_element(kinds[name], var.size, gen)
        else:
            slots = spec.variables[var.over].size
            mats = [random_element(kinds[name], var.size, gen).dense() for _ in range(slots)]
            out[name] = Element(kinds[name], matrix=torch.stack(mats), over=var.over)
    unknown = set(kinds) - set(out)
    if unknown:
        raise KeyError(f"variables {sorted(unknown)} are not in the spec")
    return Transform(out)


# ----------------------------------------------------------------------------- norm state


@dataclass(frozen=True)
class NormState:
    """Processing state of a parameter set (see ``landscape.symmetry.processing``)."""

    norm: str  # "rms" or "ln"
    gains_folded: bool  # no norm gains left in the dict
    biases_folded: bool  # no norm biases left in the dict
    centred: bool  # every writer has zero mean along d_model

    def to_dict(self) -> dict[str, object]:
        return {
            "norm": self.norm,
            "gains_folded": self.gains_folded,
            "biases_folded": self.biases_folded,
            "centred": self.centred,
        }


def norm_state(cfg: ModelConfig, params: Params) -> NormState:
    """Norm kind, whether gains/biases are folded, whether all writers are centred."""
    spec = spec_for(cfg)
    keys = [k for k in params if spec.is_norm_param(k)]
    centred = True
    for name, axis in spec.writers:
        w = params[name].double()
        if w.mean(axis).abs().max() > 1e-6 * (1.0 + w.abs().max()):
            centred = False
            break
    return NormState(
        cfg.norm,
        gains_folded=not any(k.endswith(".w") for k in keys),
        biases_folded=not any(k.endswith(".b") for k in keys),
        centred=centred,
    )


def resid_needs(state: NormState, kind: str) -> tuple[str, ...]:
    """Processing steps that make ``kind`` on the residual stream exact (empty: exact now).

    LayerNorm subtracts the mean: only G with G·1 = ±1 and 1ᵀ·G = ±1ᵀ commute with it, i.e.
    within B_d only S_d × {±I}. Rewriting LN as RMSNorm (``center_writers``) removes that
    constraint. A rotation cannot move per-channel gains, so O(d) also needs ``fold_norm_gains``.
    Norm biases move like the stream (β ← β·G, signs included), so they never need folding.
    """
    if kind in (PERM, GLOBAL_SIGN):
        return ()
    steps = []
    if kind in (ORTH, SEMI_ORTH) and not state.gains_folded:
        steps.append("fold_norm_gains")
    if state.norm == "ln":
        steps.append("center_writers")
    return tuple(steps)


def _check_element(var: Variable, e: Element) -> None:
    if e.kind not in var.kinds:
        hint = ""
        if var.family == "mlp" and e.kind in (SCALE, SCALED_PERM):
            hint = " (positive scaling commutes only with a ReLU: needs act='relu')"
        raise ValueError(f"{var.name} admits kinds {var.kinds}, not {e.kind!r}{hint}")
    if e.size != var.size:
        raise ValueError(f"element for {var.name} has size {e.size}, expected {var.size}")
    if e.over != var.over:
        raise ValueError(f"element for {var.name} must hold one map per slot of {var.over}")
    if e.is_monomial:
        s = e.scale
        ok = {
            PERM: bool((s == 1).all()),
            GLOBAL_SIGN: bool((s.abs() == 1).all() and (s == s[0]).all()),
            SIGNED_PERM: bool((s.abs() == 1).all()),
            SCALE: bool((s > 0).all() and (e.perm == torch.arange(len(s))).all()),
            SCALED_PERM: bool((s > 0).all()),
            INVERTIBLE: bool((s != 0).all()),  # e.g. a signed perm composed with a scaling
        }.get(e.kind, False)
    else:
        m = e.matrix
        eye = torch.eye(m.shape[-2], dtype=m.dtype)
        if e.kind in (ORTH, SEMI_ORTH):
            ok = bool((m @ m.transpose(-1, -2) - eye).abs().max() < 1e-9)
        else:
            ok = e.kind == INVERTIBLE and bool(torch.linalg.matrix_rank(m).min() == m.shape[-1])
    if not ok:
        raise ValueError(f"element for {var.name} is not a valid {e.kind!r} element")
    if var.group > 1:
        blocks = e.perm.view(-1, var.group) // var.group if e.is_monomial else None
        if blocks is None or not bool((blocks == blocks[:, :1]).all()):
            raise ValueError(
                f"element for {var.name} must move whole key/value groups of {var.group} "
                "query heads (grouped-query attention)"
            )


def check_transform(spec: Spec, transform: Transform, params: Params) -> None:
    """Raise ValueError unless ``transform`` is an exact symmetry of ``params`` as processed."""
    state = norm_state(spec.cfg, params)
    for name, e in transform.elements.items():
        if name not in spec.variables:
            raise KeyError(f"{name!r} is not a gauge variable of this {spec.cfg.arch}")
        var = spec.variables[name]
        _check_element(var, e)
        steps = resid_needs(state, e.kind) if name == "resid" else ()
        if steps:
            raise ValueError(
                f"{e.kind!r} on the residual stream is not exact for this {_describe(state)}: "
                f"run {' and '.join(steps)} first (landscape.symmetry.processing)"
            )


def _describe(state: NormState) -> str:
    norm = "LayerNorm" if state.norm == "ln" else "RMSNorm"
    return f"{norm} stream with {'folded' if state.gains_folded else 'per-channel'} gains"


# ----------------------------------------------------------------------------- apply


def _act(x: torch.Tensor, axis: int, e: Element) -> torch.Tensor:
    """``x'[..., i, ...] = Σ_j G[j, i] · x[..., j, ...]`` along ``axis``."""
    if e.is_monomial:
        shape = [1] * x.ndim
        shape[axis] = -1
        return x.index_select(axis, e.perm.to(x.device)) * e.scale.to(x.device).view(shape)
    return (x.movedim(axis, -1) @ e.matrix.to(x.device)).movedim(-1, axis)


def _act_slots(x: torch.Tensor, axis: int, slot_axis: int, e: Element) -> torch.Tensor:
    """Per-slot maps: slot k of ``slot_axis`` is multiplied by ``M[k]`` along ``axis``."""
    y = x.movedim((slot_axis, axis), (0, -1))
    m = e.matrix.to(x.device)
    m = m.reshape(m.shape[0], *([1] * (y.ndim - 2)), *m.shape[1:])
    y = (y.unsqueeze(-2) @ m).squeeze(-2)
    return y.movedim((0, -1), (slot_axis, axis))


def apply(spec: Spec, transform: Transform, params: Params, *, check: bool = True) -> Params:
    """The transformed parameters (a new dict; inputs are never modified).

    Every axis with a role is multiplied by G, G⁻ᵀ or |G| of its variable (module docstring), in
    float64 and cast back. With ``check`` (default) a transform that is not exact for the
    parameters' norm state is refused, naming the processing step that would make it exact. With
    ``check=False`` it is applied anyway (to measure how much the function changes); gains under a
    dense element are then left as they are. A semi-orthogonal ``resid`` changes the width: use
    :func:`embed_width`, which also fixes the config.
    """
    if check:
        check_transform(spec, transform, params)
    out: Params = {}
    for name, w in params.items():
        roles = spec.axes.get(name)
        if roles is None:
            raise KeyError(f"{name!r} is not a parameter of this {spec.cfg.arch}")
        if len(roles) != w.ndim:
            raise ValueError(f"{name} has {w.ndim} axes, the spec expects {len(roles)}")
        acting = [
            (axis, transform.elements[r.var].acting(r.act, spec.variables[r.var].group))
            for axis, r in enumerate(roles)
            if r is not None and r.var in transform.elements
        ]
        acting = [(axis, e) for axis, e in acting if e is not None]
        if not acting:
            out[name] = w
            continue
        x = w.to(torch.float64)
        # plain variables first, then per-slot maps (indexed by the slot after permutation)
        for axis, e in sorted(acting, key=lambda ae: ae[1].over is not None):
            if e.over is None:
                x = _act(x, axis, e)
            else:
                slot_axis = next(a for a, r in enumerate(roles) if r and r.var == e.over)
                x = _act_slots(x, axis, slot_axis, e)
        out[name] = x.to(w.dtype)
    return out


# ----------------------------------------------------------------------------- width change


def embed_width(
    cfg: ModelConfig, params: Params, d_new: int, seed: int
) -> tuple[ModelConfig, Params]:
    """Embed the residual stream into a wider one, ``x ↦ x·G`` with G (d_model × d_new), G·Gᵀ = I.

    Writers become ``W·G``, readers ``Gᵀ·W``; ``‖x·G‖ = ‖x‖``, so RMSNorm is unchanged provided it
    still divides by the old width: ``cfg.d_norm`` keeps its value (the √d correction of DESIGN
    §1). Needs an RMSNorm stream with folded gains (run ``landscape.symmetry.processing.prepare(cfg,
    params, "orth")`` first).
    """
    if d_new < cfg.d_model:
        raise ValueError(f"embed_width widens the stream; got d_new={d_new} < {cfg.d_model}")
    steps = resid_needs(norm_state(cfg, params), SEMI_ORTH)
    if steps:
        raise ValueError(
            f"embed_width needs {' and '.join(steps)} first (landscape.symmetry.processing)"
        )
    gen = torch.Generator().manual_seed(seed)
    g = Element(SEMI_ORTH, matrix=random_semi_orthogonal(cfg.d_model, d_new, gen))
    new = apply(spec_for(cfg), Transform({"resid": g}), params)
    return cfg.replace(d_model=d_new, d_norm=cfg.d_norm), new


# ----------------------------------------------------------------------------- table


def probe_inputs(
    cfg: ModelConfig, batch: int = 8, seed: int = 0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """A fixed seeded input batch for measuring |Δlogits|."""
    gen = torch.Generator().manual_seed(seed)
    if cfg.arch == "mlp":
        return torch.randn(batch, cfg.d_in, generator=gen, dtype=dtype)
    if cfg.arch == "vit":
        channels = (cfg.channels,) if cfg.channels else ()
        shape = (batch, *channels, cfg.image_size, cfg.image_size)
        return torch.randn(*shape, generator=gen, dtype=dtype)
    return torch.randint(0, cfg.d_vocab, (batch, cfg.n_ctx), generator=gen)


_ACTS_ON = {
    "perm": "resid S_d; FFN units S_f; heads S_H",
    "perm-global-sign": "resid S_d × {±I}; FFN units S_f; heads S_H",
    "signed-perm": "resid B_d (signed permutations); FFN units S_f; heads S_H",
    "orth": "resid O(d); FFN units S_f; heads S_H",
    "qk": "inside each head: W_Q·M, W_K·M⁻ᵀ (M invertible)",
    "ov": "inside each head: W_V·N, N⁻¹·W_O (N invertible)",
    "scale": "FFN units: positive scalings",
}


def symmetry_table(
    cfg: ModelConfig, params: Params, seed: int = 0, dtype: torch.dtype = torch.float64
) -> list[dict[str, object]]:
    """Which symmetries this model admits, measured.

    For every group level (and the tempting invalid ones: signed permutations or rotations of a
    LayerNorm stream, rotations with unfolded gains, positive scalings of non-ReLU units, a width
    change without the √d correction) a random element is applied (``check=False`` for invalid
    ones) and max |Δlogits| is measured on :func:`probe_inputs`. Invalid levels get a second row
    measured after the processing steps that make them exact (compared with the original logits).
    Rows: ``group``, ``acts_on``, ``valid``, ``max_abs_dlogits``, ``needs``, ``note``.
    """
    # processing builds on this module, so it is imported where needed
    from landscape.symmetry.processing import prepare

    params = {k: v.to(dtype) for k, v in params.items()}
    x = probe_inputs(cfg, seed=seed, dtype=dtype)
    base = forward(cfg, params, x)
    state = norm_state(cfg, params)
    spec = spec_for(cfg)
    gains = [v for k, v in params.items() if k.endswith(".w") and spec.is_norm_param(k)]
    uniform_gains = all(bool((g == g.flatten()[0]).all()) for g in gains)

    def dlogits(c: ModelConfig, p: Params) -> float:
        return float((forward(c, p, x) - base).abs().max())

    def row(group: str, valid: bool, d: float, needs: str, note: str, acts_on: str = "") -> dict:
        return {
            "group": group,
            "acts_on": acts_on or _ACTS_ON[group.split(" ")[0]],
            "valid": bool(valid),
            "max_abs_dlogits": d,
            "needs": needs,
            "note": note,
        }

    notes = {
        "perm": "Relabelling coordinates, FFN units and heads commutes with every norm and "
        "activation: exact for every model.",
        "perm-global-sign": "Flipping the whole stream's sign commutes with subtracting the "
        "mean and with the norm; gains are permuted, norm biases flip with the stream.",
        "signed-perm": "RMSNorm only divides by the norm, which per-coordinate sign flips keep; "
        "LayerNorm also subtracts the mean, and flipping some coordinates changes the mean.",
        "orth": "A rotation keeps the norm but mixes coordinates, so a per-channel gain cannot "
        "follow it and LayerNorm's mean (along 1) is not preserved.",
    }
    rows = []
    for group, kind in RESID_GROUPS.items():
        steps = resid_needs(state, kind)
        t = random_transform(spec, group, seed)
        if kind == GLOBAL_SIGN:  # show the flip itself, not the sign +1 half of the group
            e = t.elements["resid"]
            t = Transform({**t.elements, "resid": Element(kind, e.perm, -e.scale.abs())})
        d = dlogits(cfg, apply(spec, t, params, check=False))
        note = notes[group]
        if steps and d < 1e-6 and uniform_gains and state.norm == "rms":
            note += " (Exact here only because every gain is equal; trained gains break it.)"
        rows.append(row(group, not steps, d, ", ".join(steps), note))
        if steps:
            c2, p2 = prepare(cfg, params, group)
            t2 = random_transform(spec_for(c2), group, seed)
            d2 = dlogits(c2, apply(spec_for(c2), t2, p2))
            rows.append(
                row(
                    f"{group} after {' + '.join(steps)}",
                    True,
                    d2,
                    "",
                    "The processing steps are function-preserving and make this group "
                    "exact: logits compared with the unprocessed model.",
                )
            )
    if cfg.has_attn:
        for group in ("qk", "ov"):
            if not spec.family(group):  # not declared under GQA or (qk) rotary positions
                continue
            d = dlogits(cfg, apply(spec, random_transform(spec, group, seed), params))
            rows.append(
                row(
                    group,
                    True,
                    d,
                    "",
                    "Attention only sees q·kᵀ and v·W_O, so any "
                    "invertible change of basis inside a head cancels.",
                )
            )
    relu = cfg.act == "relu" or cfg.gated
    if cfg.gated:
        t = random_transform(spec, {v: SIGNED_PERM for v in spec.family("mlp")}, seed)
        rows.append(
            row(
                "signed-perm (gated FFN units)",
                True,
                dlogits(cfg, apply(spec, t, params)),
                "",
                "The up projection is linear: a sign flip of a W_in column and the matching "
                "W_out row cancels; the gate column is only permuted (SiLU is not odd).",
                "FFN units: signed permutations of W_in/W_out, permutations of W_gate",
            )
        )
    d = dlogits(cfg, apply(spec, random_transform(spec, "scale", seed), params, check=False))
    rows.append(
        row(
            "scale",
            relu,
            d,
            "" if relu else "act='relu' or a gated FFN (no processing step)",
            "ReLU(s·z) = s·ReLU(z) for s > 0, so W_in columns scale by s and W_out rows "
            "by 1/s; GELU and SiLU are not positively homogeneous.",
        )
    )
    # width change: a semi-orthogonal embedding into d + d/2 coordinates, on the folded model
    steps = resid_needs(state, SEMI_ORTH)
    c2, p2 = prepare(cfg, params, "orth")
    d_new = cfg.d_model + max(cfg.d_model // 2, 1)
    c3, p3 = embed_width(c2, p2, d_new, seed)
    after = f" after {' + '.join(steps)}" if steps else ""
    acts = f"resid: semi-orthogonal G ({cfg.d_model}×{d_new}), G·Gᵀ = I"
    rows.append(
        row(
            f"semi-orth (width {cfg.d_model}→{d_new}){after}",
            True,
            dlogits(c3, p3),
            "",
            "Writers W·G, readers Gᵀ·W; RMSNorm still divides by the old width "
            "(d_norm), so the norm of every vector is unchanged.",
            acts,
        )
    )
    c4 = c3.replace(d_norm=d_new)
    rows.append(
        row(
            f"semi-orth (width {cfg.d_model}→{d_new}), √d not corrected",
            False,
            dlogits(c4, p3),
            "keep d_norm at the old width",
            "RMSNorm's √d constant must stay the old width: dividing by the new width "
            f"rescales every normalised vector by √({d_new}/{cfg.d_model}).",
            acts,
        )
    )
    return rows
