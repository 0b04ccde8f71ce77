"""Apply a transform to a parameter dict, refusing what is not exact for its norm state.

:func:`apply` multiplies every axis with a role (``landscape.symmetry.spec``) by G, G⁻ᵀ or |G| of
its variable, in float64, and returns a new dict. Which residual kinds are exact depends on the
parameters' norm state (docs/design.md §1, its table), see :func:`resid_needs`: RMSNorm with gains
kept admits B_d (signed permutations); RMSNorm with folded gains O(d) and semi-orthogonal width
changes; LayerNorm admits S_d × {±I} (a global sign, the only sign pattern that commutes with
subtracting the mean) and becomes RMSNorm after ``processing.center_writers``. A model whose post
norms keep gains no reader can absorb (``spec.resid_blocked``) admits no rotation in any state: its
``resid`` variable lacks the kinds, and the refusal says which norm blocks them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from landscape.errors import GroupNotAdmitted
from landscape.models import ModelConfig, Params
from landscape.symmetry.elements import Element, Transform, rope_commuting_error
from landscape.symmetry.spec import (
    GLOBAL_SIGN,
    INVERTIBLE,
    ORTH,
    ORTH_MEAN,
    PERM,
    ROPE,
    SCALE,
    SCALED_PERM,
    SEMI_ORTH,
    SIGNED_PERM,
    Spec,
    Variable,
    resid_blocked,
    spec_for,
)

# Processing steps in the order they are run (landscape.symmetry.processing); resid_needs names
# the ones a residual kind needs.
PROCESSING_ORDER = ("fold_norm_biases", "fold_norm_gains", "center_writers")


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
    Rotations fixing the mean direction (``orth-mean``) take the same steps as O(d): after them
    the stream is centred, and such a G keeps it centred (``x·1 = 0 ⇒ x·G·1 = x·1 = 0``), so
    the rotated model is a LayerNorm model again, with unit gains (a LayerNorm format can hold
    it: ``landscape.models.exporters``).
    Norm biases move like the stream (β ← β·G, signs included), so they never need folding.
    """
    if kind in (PERM, GLOBAL_SIGN):
        return ()
    steps = []
    if kind in (ORTH, ORTH_MEAN, SEMI_ORTH) and not state.gains_folded:
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
        if e.perm.ndim != (1 if var.over is None else 2):
            raise ValueError(f"element for {var.name} must hold one permutation"
                             f"{' per slot of ' + var.over if var.over else ''}")  # fmt: skip
        if var.over is not None and not bool(
            (e.perm.sort(-1).values.cpu() == torch.arange(e.size)).all()
        ):
            raise ValueError(f"element for {var.name} is not one permutation per slot")
        ok = {
            PERM: bool((s == 1).all()),
            GLOBAL_SIGN: bool((s.abs() == 1).all() and (s == s[..., :1]).all()),
            SIGNED_PERM: bool((s.abs() == 1).all()),
            SCALE: bool((s > 0).all() and (e.perm.cpu() == torch.arange(s.shape[-1])).all()),
            SCALED_PERM: bool((s > 0).all()),
            INVERTIBLE: bool((s != 0).all()),  # e.g. a signed perm composed with a scaling
        }.get(e.kind, False)
    else:
        m = e.matrix
        eye = torch.eye(m.shape[-2], dtype=m.dtype, device=m.device)
        if e.kind in (ORTH, ORTH_MEAN, SEMI_ORTH):
            ok = bool((m @ m.transpose(-1, -2) - eye).abs().max() < 1e-9)
        else:
            ok = e.kind in (INVERTIBLE, ROPE)
            ok = ok and bool(torch.linalg.matrix_rank(m).min() == m.shape[-1])
            if e.kind == ROPE and ok and not bool(rope_commuting_error(m, var.rotary).max() < 1e-9):
                raise ValueError(
                    f"element for {var.name} does not commute with the rotary positions: it "
                    "must be one scaled rotation per frequency pair (spec module docstring)"
                )
        if e.kind == ORTH_MEAN:  # and G·1 = 1
            ok = ok and bool((m.sum(-1) - 1).abs().max() < 1e-9)
    if not ok:
        raise ValueError(f"element for {var.name} is not a valid {e.kind!r} element")
    if var.group > 1 and var.over is not None:  # one map per key/value group
        m = e.matrix.unflatten(0, (-1, var.group))
        spread = (m - m[:, :1]).abs().amax() / m.abs().amax().clamp_min(1e-300)
        if not bool(spread < 1e-12):
            raise ValueError(
                f"element for {var.name} must hold one map per key/value group: the "
                f"{var.group} query heads of a group share it (grouped-query attention)"
            )
    elif var.group > 1:
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
        why = resid_blocked(spec.cfg) if name == "resid" and e.kind not in var.kinds else ""
        if why:
            raise GroupNotAdmitted(f"{e.kind!r} on the residual stream is not exact here: {why}")
        _check_element(var, e)
        if var.over is not None:
            slots = len(e.perm if e.is_monomial else e.matrix)
            if slots != spec.variables[var.over].size:
                raise ValueError(f"element for {name} holds {slots} maps, expected one per slot "
                                 f"of {var.over} ({spec.variables[var.over].size})")  # fmt: skip
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
    if e.is_monomial:  # per-slot monomials: y'[k, ..., i] = scale[k, i] · y[k, ..., perm[k, i]]
        lead = (y.shape[0],) + (1,) * (y.ndim - 2) + (y.shape[-1],)
        perm, scale = e.perm.to(x.device).view(lead), e.scale.to(x.device).view(lead)
        z = y.gather(-1, perm.expand(y.shape)) * scale
        return z.movedim((0, -1), (slot_axis, axis))
    # one batched product per slot: [slots, rows, n] @ [slots, n, n]
    z = y.reshape(y.shape[0], -1, y.shape[-1]) @ e.matrix.to(x.device, y.dtype)
    return z.reshape(y.shape).movedim((0, -1), (slot_axis, axis))


def apply(spec: Spec, transform: Transform, params: Params, *, check: bool = True) -> Params:
    """The transformed parameters (a new dict; inputs are never modified).

    Every axis with a role is multiplied by G, G⁻ᵀ or |G| of its variable (module docstring), in
    float64 and cast back. With ``check`` (default) a transform that is not exact for the
    parameters' norm state is refused, naming the processing step that would make it exact. With
    ``check=False`` it is applied anyway (to measure how much the function changes); gains under a
    dense element are then left as they are. A semi-orthogonal ``resid`` changes the width: use
    :func:`landscape.symmetry.processing.embed_width`, which also fixes the config.
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
