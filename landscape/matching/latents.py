"""Latents and group elements, for learned matching: a latent projected onto its group
(:func:`project`, several at once with one copy to the host), elements applied to parameters
differentiably (:func:`apply_dense`), elements packed onto the device, their determinant signs,
and per-head maps re-indexed between B's own heads and the slots of a head permutation.

A per-slot variable of a monomial kind (a mixture's units, one element per expert slot) has a
latent ``[slots, n, n]``: each slot's matrix is projected on its own, and the slots' elements
are one per-slot monomial element (``perm``, ``scale`` [slots, n]).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from landscape.matching.solvers import solve
from landscape.models import Params
from landscape.symmetry import ABS, GROUP_OF, PERM_OF, Element, Spec


def project(kind: str, z: torch.Tensor, group: int = 1, over: str | None = None) -> Element:
    """The element of ``kind`` nearest to Z: maximises ``tr(Gᵀ Z)`` over the group (float64).

    ``group`` > 1 (grouped-query heads): permutations moving blocks of that many slots.
    ``over`` (a per-slot variable, Z ``[slots, n, n]``): one element per slot, each slot's
    nearest (monomial kinds only).
    """
    return _solve_latent(kind, z.detach().to("cpu", torch.float64), group, over)


def _solve_latent(kind: str, z: torch.Tensor, group: int, over: str | None) -> Element:
    # solve maximises Σ_i s_i M[i, π(i)] with G[π(i), i] = s_i, i.e. tr(Gᵀ Mᵀ): pass M = Zᵀ
    if over is None:
        return solve(kind, z.T, group=group)
    slots = [solve(kind, zs.T, group=group) for zs in z]
    return Element(kind, torch.stack([e.perm for e in slots]),
                   torch.stack([e.scale for e in slots]), over=over)  # fmt: skip


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
            over = spec.variables[role.var].over
            if m.ndim == 3 and over is not None:  # one matrix per slot, on the slot's entries
                w = _per_slot(w, spec.axis_of(name, over), axis, m.to(w.dtype))
                continue
            w = (w.movedim(axis, -1) @ m.to(w.dtype)).movedim(-1, axis)
        out[name] = w
    return {name: out[name] for name in params}


def _per_slot(w: torch.Tensor, slot: int, axis: int, m: torch.Tensor) -> torch.Tensor:
    """``W'[s, .., i, ..] = Σ_j M[s, j, i]·W[s, .., j, ..]``: slot s's matrix on its entries."""
    moved = w.movedim((slot, axis), (0, -1))
    out = moved.reshape(moved.shape[0], -1, moved.shape[-1]) @ m
    return out.reshape(moved.shape).movedim((0, -1), (slot, axis))


def on_own_heads(inner: Element, heads: Element) -> Element:
    """Per-head maps indexed by slot after ``heads`` (slot i holds B's head ``heads.perm[i]``),
    re-indexed by B's own head numbers."""
    return Element(inner.kind, matrix=inner.matrix[torch.argsort(heads.perm)], over=inner.over)


def on_slots(inner: Element, heads: Element) -> Element:
    """Per-head maps indexed by B's own heads, re-indexed by slot after ``heads``."""
    return Element(inner.kind, matrix=inner.matrix[heads.perm], over=inner.over)


def det_sign(g: torch.Tensor) -> int:
    """sign det G of a dense matrix."""
    return int(torch.sign(torch.linalg.det(g)).item())


def element_det_sign(e: Element) -> int:
    """sign det G of an element on the host: a monomial's from its permutation's parity and its
    signs (no determinant, no device), a dense one's from its determinant."""
    if not e.is_monomial:
        return det_sign(e.matrix)
    perm, seen, odd = e.perm.tolist(), [False] * len(e.perm), 0
    for i in range(len(perm)):  # parity: a cycle of length k is k − 1 transpositions
        j, length = i, 0
        while not seen[j]:
            seen[j], j, length = True, perm[j], length + 1
        odd ^= max(length - 1, 0) & 1
    negative = int((e.scale < 0).sum()) & 1
    return -1 if odd ^ negative else 1


def same_element(a: Element, b: Element) -> bool:
    """Whether two elements of one variable are equal, exactly."""
    if a.is_monomial:
        return torch.equal(a.perm, b.perm) and torch.equal(a.scale, b.scale)
    return torch.equal(a.matrix, b.matrix)


def project_all(latents: list[tuple[str, torch.Tensor, int, str | None]]) -> list[Element]:
    """:func:`project` of several latents ``(kind, Z, group, over)`` with one copy to the host:
    the assignments run on the CPU, and one copy of all latents waits for the device once a
    step, not once a variable. Elements on the CPU."""
    if not latents:
        return []
    flat = torch.cat([z.detach().reshape(-1) for _, z, _, _ in latents]).to("cpu", torch.float64)
    out, at = [], 0
    for kind, z, group, over in latents:
        host = flat[at : at + z.numel()].view(z.shape)
        at += z.numel()
        out.append(_solve_latent(kind, host, group, over))
    return out


def dense_on(elements: list[Element], dev: torch.device) -> list[torch.Tensor]:
    """The elements as float32 matrices on ``dev``, from one copy of their permutations and
    signs (or dense matrices), the matrices built there (the same path on every device)."""
    if not elements:
        return []
    parts = [torch.cat([e.perm.double().reshape(-1), e.scale.double().reshape(-1)])
             if e.is_monomial else e.matrix.reshape(-1) for e in elements]  # fmt: skip
    packed = torch.cat(parts)
    if dev.type == "cuda":
        packed = packed.pin_memory()
    # float32 holds every unit index below 2²⁴ and every sign exactly, and is what the step uses
    packed = packed.to(dev, torch.float32, non_blocking=True)
    out, at = [], 0
    for e in elements:
        if e.is_monomial:  # per slot: a row of perm and scale a slot, one matrix each
            k, size = e.perm.numel(), e.perm.shape[-1]
            perm = packed[at : at + k].long().view(e.perm.shape)
            scale = packed[at + k : at + 2 * k].view(e.perm.shape)
            at += 2 * k
            m = torch.zeros(*e.perm.shape[:-1], size, size, dtype=torch.float32, device=dev)
            cols = torch.arange(size, device=dev)
            if e.perm.ndim == 2:
                m[torch.arange(len(perm), device=dev)[:, None], perm, cols] = scale
            else:
                m[perm, cols] = scale
        else:
            m = packed[at : at + e.matrix.numel()].view(e.matrix.shape)
            at += e.matrix.numel()
        out.append(m)
    return out
