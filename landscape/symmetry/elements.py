"""Group elements (docs/design.md §1): one variable's :class:`Element`, a whole model's
:class:`Transform`.

An :class:`Element` is one variable's group element, stored as a monomial matrix
(``G[perm[i], i] = scale[i]``: permutations, signed permutations, positive scalings) or as a dense
float64 matrix (orthogonal, semi-orthogonal, invertible; ``[h, n, n]`` for per-head variables). A
:class:`Transform` maps variable names to elements; a missing variable is the identity.
``g.compose(h)`` (also ``g @ h``) is "apply h, then g":
``apply(g @ h, θ) == apply(g, apply(h, θ))``.
Per-head maps are indexed by the head slot *after* the head permutation.

Seeded random elements of every kind (:func:`random_element`, :func:`random_transform`) are the
inputs of every "same outputs" test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from landscape.symmetry.spec import (
    _CHAIN,
    ABS,
    GLOBAL_SIGN,
    GROUP_OF,
    INV_T,
    INVERTIBLE,
    KV_G,
    KV_INV_T,
    MONOMIAL_KINDS,
    ORTH,
    ORTH_MEAN,
    PERM,
    PERM_OF,
    ROPE,
    SCALE,
    SCALED_PERM,
    SEMI_ORTH,
    SIGNED_PERM,
    G,
    Spec,
    group_kinds,
)


@dataclass(frozen=True, eq=False)
class Element:
    """One variable's group element.

    Monomial form: ``G[perm[i], i] = scale[i]`` (``perm`` long, ``scale`` float64), so acting on an
    axis is ``W'[..., i, ...] = scale[i] · W[..., perm[i], ...]``. Dense form: ``matrix`` float64,
    ``[n_in, n_out]`` or ``[slots, n, n]`` for a per-slot variable (``over`` names the slots).
    A per-slot variable of a monomial kind (a mixture's units, one permutation per expert) may
    hold its elements in monomial form too: ``perm`` and ``scale`` [slots, n], one row a slot.
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
        return self.perm.shape[-1] if self.is_monomial else self.matrix.shape[-2]

    def dense(self) -> torch.Tensor:
        """The element as a float64 matrix (``[slots, n, n]`` for per-slot variables), on the
        element's device."""
        if not self.is_monomial:
            return self.matrix
        n, dev = self.perm.shape[-1], self.perm.device
        cols = torch.arange(n, device=dev)
        if self.perm.ndim == 2:  # one monomial matrix per slot
            m = torch.zeros(len(self.perm), n, n, dtype=torch.float64, device=dev)
            slots = torch.arange(len(self.perm), device=dev)[:, None]
            m[slots, self.perm, cols] = self.scale.to(torch.float64)
            return m
        m = torch.zeros(n, n, dtype=torch.float64, device=dev)
        m[self.perm, cols] = self.scale
        return m

    def to(self, device: str | torch.device) -> Element:
        """The same element with its tensors on ``device``."""

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return Element(self.kind, move(self.perm), move(self.scale), move(self.matrix), self.over)

    def inverse(self) -> Element:
        """G⁻¹ (for a semi-orthogonal G: the left inverse Gᵀ, which undoes the width change)."""
        if self.is_monomial:
            inv = torch.argsort(self.perm, dim=-1)
            return Element(self.kind, inv, (1.0 / self.scale).gather(-1, inv), over=self.over)
        if self.kind in (ORTH, ORTH_MEAN, SEMI_ORTH):
            return Element(self.kind, matrix=self.matrix.transpose(-1, -2), over=self.over)
        return Element(self.kind, matrix=torch.linalg.inv(self.matrix), over=self.over)

    def acting(self, act: str, group: int = 1) -> Element | None:
        """The element acting on an axis with role ``act`` (None: it cannot act there).

        ``group`` is the variable's block size, used by ``"G/group"``, and for per-slot maps
        shared by groups of slots by ``"G/kv"``/``"G^-T/kv"`` (the map of each group's first
        slot, for an axis with one slot per group).
        """
        if act == G:
            return self
        if act in (KV_G, KV_INV_T):
            if self.over is None:
                return None
            shared = Element(self.kind, matrix=self.matrix[::group], over=self.over)
            return shared if act == KV_G else shared.acting(INV_T)
        if act in (GROUP_OF, PERM_OF):
            if not self.is_monomial:
                return None
            if act == PERM_OF:
                return Element(PERM, self.perm, torch.ones_like(self.scale), over=self.over)
            blocks = self.perm[::group] // group
            return Element(PERM, blocks, torch.ones(len(blocks), dtype=torch.float64))
        if self.is_monomial:
            s = self.scale.abs() if act == ABS else 1.0 / self.scale
            return Element(self.kind, self.perm, s, over=self.over)
        if act == ABS:
            return None
        if self.kind in (ORTH, ORTH_MEAN, SEMI_ORTH):
            return self  # G⁻ᵀ = G (pseudo-inverse-transpose for semi-orthogonal)
        inv_t = torch.linalg.inv(self.matrix).transpose(-1, -2)
        return Element(self.kind, matrix=inv_t, over=self.over)


def _join(a: str, b: str) -> str:
    """Kind of a product of elements of kinds a and b."""
    if a == b:
        return a
    if a in _CHAIN and b in _CHAIN:
        return max(a, b, key=_CHAIN.index)
    if ORTH_MEAN in (a, b) and {a, b} - {ORTH_MEAN} <= set(_CHAIN):
        # S_d fixes the mean direction too; a sign pattern other than +I (or O(d)) does not
        return ORTH_MEAN if {a, b} <= {ORTH_MEAN, PERM} else ORTH
    if {a, b} <= {PERM, SCALE, SCALED_PERM}:
        return SCALED_PERM
    if SEMI_ORTH in (a, b) and {a, b} - {SEMI_ORTH} <= set(_CHAIN):
        return SEMI_ORTH
    return INVERTIBLE


def _matmul(a: Element, b: Element) -> Element:
    """The element with matrix A·B (acting on an axis: first A, then B)."""
    kind = _join(a.kind, b.kind)
    if a.is_monomial and b.is_monomial:  # per slot too: a row of perm and scale a slot
        perm, scale = a.perm.gather(-1, b.perm), a.scale.gather(-1, b.perm) * b.scale
        return Element(kind, perm, scale, over=a.over or b.over)
    return Element(kind, matrix=a.dense() @ b.dense(), over=a.over or b.over)


def _permute_slots(m: torch.Tensor, slots: Element | None) -> torch.Tensor:
    """Per-slot matrices ``m[perm[i]]``: follow the slots through a permutation."""
    return m if slots is None else m[slots.perm.to(m.device)]


def follow_slots(e: Element, slots: Element | None) -> Element:
    """A per-slot element with its slots taken through the permutation ``slots``: slot i gets
    the map of slot ``slots.perm[i]`` (dense maps and per-slot monomials alike)."""
    if slots is None:
        return e
    if e.is_monomial:
        return Element(e.kind, _permute_slots(e.perm, slots), _permute_slots(e.scale, slots),
                       over=e.over)  # fmt: skip
    return Element(e.kind, matrix=_permute_slots(e.matrix, slots), over=e.over)


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
                a = follow_slots(a, self.elements.get(a.over))
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
                moved = follow_slots(e, None if slots is None else slots.inverse())
                if moved.is_monomial:
                    out[var] = moved.inverse()
                else:
                    out[var] = Element(e.kind, matrix=torch.linalg.inv(moved.matrix), over=e.over)
        return Transform(out)

    def matrix(self, var: str) -> torch.Tensor | None:
        """Dense float64 matrix of ``var``'s element (None for the identity)."""
        e = self.elements.get(var)
        return None if e is None else e.dense()

    def to(self, device: str | torch.device) -> Transform:
        """The same transform with every element on ``device``."""
        return Transform({k: e.to(device) for k, e in self.elements.items()})

    def to_tensors(self, prefix: str = "") -> tuple[dict[str, torch.Tensor], dict[str, dict]]:
        """The transform as named tensors (``{prefix}{var}.perm``, ``.scale`` or ``.matrix``)
        and a JSON-able description (variable → kind and slots), for a cache entry;
        :meth:`from_tensors` reads them back."""
        tensors: dict[str, torch.Tensor] = {}
        about: dict[str, dict] = {}
        for var, e in self.elements.items():
            parts = {"perm": e.perm, "scale": e.scale, "matrix": e.matrix}
            for part, t in parts.items():
                if t is not None:
                    tensors[f"{prefix}{var}.{part}"] = t.detach().cpu().contiguous()
            about[var] = {"kind": e.kind, "over": e.over}
        return tensors, about

    @staticmethod
    def from_tensors(
        tensors: Mapping[str, torch.Tensor], about: Mapping[str, Mapping], prefix: str = ""
    ) -> Transform:
        """The transform :meth:`to_tensors` wrote (a KeyError names a missing tensor)."""
        out = {}
        for var, d in about.items():
            parts = {p: tensors.get(f"{prefix}{var}.{p}") for p in ("perm", "scale", "matrix")}
            if parts["matrix"] is None and (parts["perm"] is None or parts["scale"] is None):
                raise KeyError(f"the transform's tensors for {var!r} are missing")
            out[var] = Element(d["kind"], parts["perm"], parts["scale"], parts["matrix"],
                               d.get("over"))  # fmt: skip
        return Transform(out)


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


def mean_basis(n: int, dtype: torch.dtype = torch.float64,
               device: torch.device | str = "cpu") -> torch.Tensor:  # fmt: skip
    """The Householder reflection H (n × n, ``H = Hᵀ = H⁻¹``) that swaps e₁ and ``1/√n``: its
    first column is the mean direction, the other n − 1 an orthonormal basis of its complement
    (the mean-free vectors). Deterministic, so every machine embeds and restricts alike."""
    v = -torch.full((n,), n**-0.5, dtype=dtype, device=device)
    v[0] += 1.0
    norm2 = v @ v
    eye = torch.eye(n, dtype=dtype, device=device)
    if float(norm2) == 0.0:  # n = 1: e₁ is the mean direction
        return eye
    return eye - 2.0 * torch.outer(v, v) / norm2


def fix_mean(r: torch.Tensor) -> torch.Tensor:
    """The n × n rotation that fixes ``1/√n`` and acts as ``r`` ((n−1) × (n−1), orthogonal) on
    the basis of its complement given by :func:`mean_basis`: ``H·diag(1, r)·H``. Every
    element of the ``orth-mean`` kind (O(d) with ``G·1 = 1``) is one of these."""
    n = r.shape[-1] + 1
    h = mean_basis(n, r.dtype, r.device)
    block = torch.zeros(n, n, dtype=r.dtype, device=r.device)
    block[0, 0] = 1.0
    block[1:, 1:] = r
    return h @ block @ h


def mean_free_part(m: torch.Tensor) -> torch.Tensor:
    """``m`` (n × n) restricted to the complement of the mean direction on both sides, in the
    basis of :func:`mean_basis`: ``(H·m·H)[1:, 1:]``, (n−1) × (n−1); the inverse of
    :func:`fix_mean` on its image."""
    h = mean_basis(m.shape[-1], m.dtype, m.device)
    return (h @ m @ h)[1:, 1:]


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
    if kind == ORTH_MEAN:
        return Element(kind, matrix=fix_mean(random_orthogonal(n - 1, gen)))
    if kind == INVERTIBLE:
        # condition number at most e, so float32 round-off stays far below the test tolerance
        u = torch.rand(n, generator=gen, dtype=torch.float64) - 0.5
        m = random_orthogonal(n, gen) * torch.exp(u) @ random_orthogonal(n, gen)
        return Element(kind, matrix=m)
    if kind == ROPE:
        raise ValueError("a rope-commuting map needs its rotary width: use random_rope_commuting")
    raise ValueError(f"no random element of kind {kind!r} (width changes: use embed_width)")


def random_rope_commuting(n: int, rotary: int, gen: torch.Generator) -> torch.Tensor:
    """A random map of size ``n`` commuting with RoPE on its first ``rotary`` dimensions
    (half-split pairs i, i + rotary/2): per pair the block ``[[a, c], [−c, a]]`` of a scaled
    rotation (scale e^u, u ~ U(−½, ½), angle uniform), a random invertible block (condition at
    most e) on the unrotated dimensions. float64."""
    h = rotary // 2
    rho = torch.exp(torch.rand(h, generator=gen, dtype=torch.float64) - 0.5)
    angle = (2 * torch.rand(h, generator=gen, dtype=torch.float64) - 1) * torch.pi
    a, c = rho * angle.cos(), rho * angle.sin()
    m = torch.zeros(n, n, dtype=torch.float64)
    i = torch.arange(h)
    m[i, i], m[i + h, i + h], m[i, i + h], m[i + h, i] = a, a, c, -c
    if n > rotary:
        m[rotary:, rotary:] = random_element(INVERTIBLE, n - rotary, gen).dense()
    return m


def rope_commuting_error(m: torch.Tensor, rotary: int) -> torch.Tensor:
    """How far each map of ``m`` [..., n, n] is from commuting with RoPE on its first
    ``rotary`` dimensions (kind ``rope-commuting``): the largest entry that breaks the block
    structure, relative to the map's largest entry. [...]"""
    h = rotary // 2
    i = torch.arange(h, device=m.device)
    expected = torch.zeros_like(m)
    a = (m[..., i, i] + m[..., i + h, i + h]) / 2
    c = (m[..., i, i + h] - m[..., i + h, i]) / 2
    expected[..., i, i], expected[..., i + h, i + h] = a, a
    expected[..., i, i + h], expected[..., i + h, i] = c, -c
    expected[..., rotary:, rotary:] = m[..., rotary:, rotary:]
    top = m.abs().amax((-1, -2)).clamp_min(1e-300)
    return (m - expected).abs().amax((-1, -2)) / top


def random_grouped_perm(n: int, group: int, gen: torch.Generator) -> Element:
    """A random permutation of ``n`` slots moving blocks of ``group`` consecutive slots as blocks
    (any order inside a block): S_group ≀ S_(n/group), e.g. query heads with their KV group."""
    blocks = torch.randperm(n // group, generator=gen)
    perm = torch.cat([b * group + torch.randperm(group, generator=gen) for b in blocks.tolist()])
    return Element(PERM, perm, torch.ones(n, dtype=torch.float64))


def random_transform(spec: Spec, kinds: Mapping[str, str] | str, seed: int) -> Transform:
    """A seeded random element: ``kinds`` maps variables to kinds, or names a group level."""
    if isinstance(kinds, str):
        kinds = group_kinds(spec, kinds)
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, var in spec.variables.items():  # spec order, so the seed fixes every element
        if name not in kinds:
            continue
        if var.over is not None and kinds[name] in MONOMIAL_KINDS:  # a mixture's units
            drawn = [random_element(kinds[name], var.size, gen)
                     for _ in range(spec.variables[var.over].size)]  # fmt: skip
            perm, scale = (torch.stack([getattr(e, k) for e in drawn]) for k in ("perm", "scale"))
            out[name] = Element(kinds[name], perm, scale, over=var.over)
        elif var.over is not None:  # one map per slot, shared by groups of var.group slots
            maps = spec.variables[var.over].size // var.group
            if kinds[name] == ROPE:
                mats = [random_rope_commuting(var.size, var.rotary, gen) for _ in range(maps)]
            else:
                mats = [random_element(kinds[name], var.size, gen).dense() for _ in range(maps)]
            m = torch.stack(mats).repeat_interleave(var.group, 0)
            out[name] = Element(kinds[name], matrix=m, over=var.over)
        elif var.group > 1 and kinds[name] == PERM:
            out[name] = random_grouped_perm(var.size, var.group, gen)
        else:
            out[name] = random_element(kinds[name], var.size, gen)
    unknown = set(kinds) - set(out)
    if unknown:
        raise KeyError(f"variables {sorted(unknown)} are not in the spec")
    return Transform(out)
