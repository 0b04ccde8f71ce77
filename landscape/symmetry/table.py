"""The symmetry table: which group levels a model admits, measured (docs/design.md §1 table).

Every level gets a random element, applied with or without the exactness check, and the largest
logit change on a fixed probe batch (:func:`probe_inputs`); an invalid level gets a second row
measured after the processing steps that make it exact; a level that no processing makes exact
(rotations of a model with post-norm gains) gets its note saying which norm blocks it instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from landscape.fields import Fields
from landscape.models import ModelConfig, Params, architecture_of, forward
from landscape.models.registry import random_inputs
from landscape.symmetry.action import NormState, apply, norm_state, resid_needs
from landscape.symmetry.elements import Element, Transform, random_element, random_transform
from landscape.symmetry.processing import embed_width, prepare, process
from landscape.symmetry.spec import (
    GLOBAL_SIGN,
    INVERTIBLE,
    RESID_GROUPS,
    SEMI_ORTH,
    SIGNED_PERM,
    Spec,
    resid_blocked,
    spec_for,
)

PROBE_TOKENS = 128  # longest probe window (the zoo's contexts are shorter)
PROBE_LOGITS = 2**23  # most logits one probe batch may produce


def probe_inputs(
    cfg: ModelConfig,
    batch: int = 8,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    *,
    max_tokens: int | None = PROBE_TOKENS,
    max_logits: int | None = PROBE_LOGITS,
) -> torch.Tensor:
    """A fixed seeded input batch for measuring |Δlogits| (the one probe-input builder).

    Gaussian features (mlp) or pixels (vit) of ``dtype``, uniform random tokens (gpt). For token
    models ``max_tokens`` caps the window (None: the whole context) and ``max_logits`` shrinks
    the batch, to no fewer than 2 windows, so that it yields at most that many logits. Without
    the caps the probe of an imported model (context 8192, vocabulary 49152) is 8 windows of
    8,192 tokens: 24 GiB of float64 logits, which is where the symmetry table of SmolLM2 ran
    out of memory; with them it is 2 windows of 128 tokens (100 MB). The zoo's contexts and
    vocabularies are under both caps. The symmetry table and the gauge sweep use the defaults
    (float64); matching's function checks a float32 batch of 16
    (``landscape.matching.result.function_probe``).
    """
    gen = torch.Generator().manual_seed(seed)
    if architecture_of(cfg).inputs != "tokens":
        return random_inputs(cfg, batch, gen, dtype=dtype)
    n = cfg.n_ctx if max_tokens is None else min(cfg.n_ctx, max_tokens)
    if max_logits is not None:
        batch = max(2, min(batch, max_logits // (n * cfg.n_out)))
    return random_inputs(cfg, batch, gen, positions=n)


_ACTS_ON = {
    "perm": "resid S_d; FFN units S_f; heads S_H",
    "perm-global-sign": "resid S_d × {±I}; FFN units S_f; heads S_H",
    "signed-perm": "resid B_d (signed permutations); FFN units S_f; heads S_H",
    "orth": "resid O(d); FFN units S_f; heads S_H",
    "orth-mean": "resid O(d) fixing the mean direction 1; FFN units S_f; heads S_H",
    "qk": "inside each head: W_Q·M, W_K·M⁻ᵀ (M invertible)",
    "ov": "inside each head: W_V·N, N⁻¹·W_O (N invertible)",
    "scale": "FFN units: positive scalings",
}

# One row of :func:`symmetry_table` (landscape.fields): what it writes, and what the Gauge page's
# figure reads.
SYMMETRY_ROW = Fields("symmetry table row",
                      ("group", "acts_on", "valid", "max_abs_dlogits", "needs", "note"))


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
        acts = acts_on or _ACTS_ON[group.split(" ")[0]]
        if spec.family("experts") and group.split(" ")[0] in RESID_GROUPS:
            acts += " (in each expert); experts S_E with their router columns"
        return {
            "group": group,
            "acts_on": acts,
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
        "orth-mean": "A rotation that fixes 1 keeps LayerNorm's mean, but still mixes "
        "coordinates, so the gains must be folded first; after centring the stream stays "
        "mean-free, where LayerNorm with unit gain is RMSNorm.",
    }
    rows = []
    blocked = resid_blocked(cfg)  # post-norm gains: no processing makes rotations exact
    resid_kinds = spec.variables["resid"].kinds
    for group, kind in RESID_GROUPS.items():
        steps = resid_needs(state, kind)
        t = random_transform(spec, group, seed)
        if kind == GLOBAL_SIGN:  # show the flip itself, not the sign +1 half of the group
            e = t.elements["resid"]
            t = Transform({**t.elements, "resid": Element(kind, e.perm, -e.scale.abs())})
        d = dlogits(cfg, apply(spec, t, params, check=False))
        if kind not in resid_kinds:
            rows.extend(_blocked_rows(cfg, params, group, steps, seed, d, blocked, dlogits, row))
            continue
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
        rows.extend(_within_head_rows(cfg, params, spec, seed, dlogits, row))
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
    if SEMI_ORTH not in resid_kinds:  # the orth rows say why: no width change either
        return rows
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


def _within_head_rows(
    cfg: ModelConfig,
    params: Params,
    spec: Spec,
    seed: int,
    dlogits: Callable[[ModelConfig, Params], float],
    row: Callable[..., dict],
) -> list[dict]:
    """The within-head rows: ``qk`` and ``ov`` as declared (under rotary positions ``qk`` as
    maps commuting with RoPE, under GQA one map per key/value group), and under rotary
    positions the tempting invalid one, a general invertible QK map (shared by each key/value
    group, so only its mixing of frequency pairs is at fault), applied unchecked."""
    gqa = " (one map per key/value group)" if cfg.kv_heads != cfg.n_heads else ""
    rows = []
    for group in ("qk", "ov"):
        if not spec.family(group):  # qk under a q/k norm
            continue
        d = dlogits(cfg, apply(spec, random_transform(spec, group, seed), params))
        rope = group == "qk" and cfg.rot_dim
        note = ("Attention only sees q·kᵀ and v·W_O, so any invertible change of basis inside "
                "a head cancels.")  # fmt: skip
        acts = _ACTS_ON[group] + gqa
        if rope:
            free = ", invertible on the unrotated dimensions" if cfg.rot_dim < cfg.d_head else ""
            acts = ("inside each head: W_Q·M, W_K·M⁻ᵀ, M a scaled rotation per rotary frequency "
                    f"pair{free}{gqa}")  # fmt: skip
            note = ("RoPE rotates each frequency pair of q and k by a position-dependent angle; "
                    "a scaled rotation of the pair commutes with it, so q·kᵀ is kept at every "
                    "pair of positions.")  # fmt: skip
        rows.append(row(group, True, d, "", note, acts))
        if rope:
            v = spec.variables[spec.family("qk")[0]]
            gen = torch.Generator().manual_seed(seed)
            maps = spec.variables[v.over].size // v.group
            mixing = Transform({
                name: Element(INVERTIBLE, over=spec.variables[name].over, matrix=torch.stack(
                    [random_element(INVERTIBLE, v.size, gen).dense() for _ in range(maps)]
                ).repeat_interleave(v.group, 0))
                for name in spec.family("qk")
            })  # fmt: skip
            d2 = dlogits(cfg, apply(spec, mixing, params, check=False))
            rows.append(row(
                "qk (general invertible M)", False, d2, "not exact with rotary positions",
                "A general M mixes the frequency pairs, which RoPE rotates by different "
                "angles: q·R_t·M·M⁻¹·R_sᵀ·kᵀ needs M to commute with every rotation.",
                "inside each head: W_Q·M, W_K·M⁻ᵀ, M any invertible matrix" + gqa,
            ))  # fmt: skip
    return rows


def _blocked_rows(
    cfg: ModelConfig,
    params: Params,
    group: str,
    steps: tuple[str, ...],
    seed: int,
    d: float,
    why: str,
    dlogits: Callable[[ModelConfig, Params], float],
    row: Callable[..., dict],
) -> list[dict]:
    """The rows of a residual level no processing makes exact (``spec.resid_blocked``): the
    level as it is, and, where other models need steps for it, after those steps too (measured
    with ``check=False``), which shows that they do not help here."""
    needs = "not exact in any processing state"
    rows = [row(group, False, d, needs, f"Not exact: {why}.")]
    if steps:
        c2, p2 = process(cfg, params, steps)
        spec2 = spec_for(c2)
        d2 = dlogits(c2, apply(spec2, random_transform(spec2, group, seed), p2, check=False))
        rows.append(row(f"{group} after {' + '.join(steps)}", False, d2, needs,
                        f"Still not exact: {why}."))  # fmt: skip
    return rows


def admitted_symmetries(cfg: ModelConfig) -> list[dict[str, Any]]:
    """The gauge groups of ``cfg`` as imported (norm gains kept), read from its spec.

    One entry per residual group level (exact now, or the processing steps that make it exact)
    and per per-layer variable family (kinds admitted, sizes, grouped-query constraint).
    """
    spec = spec_for(cfg)
    state = NormState(cfg.norm, gains_folded=False, biases_folded=cfg.norm != "ln", centred=False)
    out: list[dict[str, Any]] = []
    for group, kind in RESID_GROUPS.items():
        steps = resid_needs(state, kind)
        entry = {"variable": "resid", "group": group, "size": cfg.d_model, "exact": not steps,
                 "needs": list(steps)}  # fmt: skip
        if kind not in spec.variables["resid"].kinds:
            entry.update(exact=False, needs=[], note=f"not exact: {resid_blocked(cfg)}")
        out.append(entry)
    for family in ("mlp", "heads", "qk", "ov", "experts"):
        names = spec.family(family)
        if not names:
            note = {
                "qk": "not declared: a q/k norm sits between W_Q/W_K and q·kᵀ, and a general "
                "within-head query/key map (or a rotary pair's scaled rotation) does not "
                "commute with it",
            }.get(family, "")
            if cfg.has_attn and note:
                out.append({"variable": family, "exact": False, "note": note})
            continue
        var = spec.variables[names[0]]
        entry: dict[str, Any] = {
            "variable": family,
            "layers": len(names),
            "size": var.size,
            "kinds": list(var.kinds),
            "exact": True,
        }
        if family in ("qk", "ov") and var.group > 1:
            entry["group"] = var.group
            entry["note"] = f"one map per key/value group, shared by its {var.group} query heads"
        if family == "qk" and var.rotary:
            entry["rotary"] = var.rotary
            entry["note"] = ("commuting with RoPE: a scaled rotation per frequency pair"
                             + (", invertible on the unrotated dimensions"
                                if var.rotary < var.size else "")
                             + ("; " + entry["note"] if "note" in entry else ""))  # fmt: skip
        if family == "heads" and var.group > 1:
            entry["group"] = var.group
            entry["note"] = (
                f"query heads move with their key/value group of {var.group}; "
                "K/V heads follow the induced group permutation"
            )
        if family == "mlp" and cfg.gated:
            entry["note"] = "signs and scales act on the up projection; the gate is only permuted"
        if family == "mlp" and var.over is not None:
            entry["note"] = "; ".join([*filter(None, [entry.get("note")]),
                                       "one element per expert, following its expert"])
        if family == "experts":
            entry["note"] = f"each expert moves with its router column; top {cfg.top_k} routing"
        out.append(entry)
    return out
