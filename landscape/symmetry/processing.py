"""Function-preserving weight processing (docs/design.md §1, §3).

A fixed series of named steps, each taking and returning ``(cfg, params)`` and leaving the logits
unchanged; together they widen the exact residual gauge group from S_d (LayerNorm) to O(d):

1. :func:`fold_norm_biases`: ``(N(x)·γ + β)·W + b = N(x)·γ·W + (β·W + b)``; the norm bias moves into
   the reader biases (``b_Q``, ``b_K``, ``b_V``, ``b_in``, ``b_U``).
2. :func:`fold_norm_gains`: ``(N(x)·γ)·W = N(x)·(diag(γ)·W)``; the gain moves into the reader rows
   and disappears from the dict (a missing gain means 1).
3. :func:`center_writers`: ``W ← W·(I − 11ᵀ/d)`` for every writer; the stream then has zero mean,
   LayerNorm's mean subtraction is a no-op and LayerNorm equals RMSNorm: ``cfg.norm`` becomes
   ``"rms"``.

Each step is exact on parallel blocks (``block="parallel"``, both norms reading the stream that
enters the block) as on pre-norm ones: folding rewrites a norm and its own readers only, and
after centring every stream a norm reads, the block's input included, is a sum of centred writes.

Which group each state admits: :func:`landscape.symmetry.action.resid_needs`; :func:`prepare` runs
the steps a group level needs, and refuses a level no step makes exact (rotations of a model with
post-norm gains, :func:`landscape.symmetry.spec.resid_blocked`). The steps leave q/k norm gains
(``attn.q_norm``/``attn.k_norm``) and post-norm gains where they are: none of them has readers
to fold into. :func:`embed_width` is the one width-changing rewrite (a
semi-orthogonal residual gauge and its √d correction), run on a processed RMSNorm stream;
:func:`rescale_norm` then moves that correction out of the config (RMSNorm divides by the new
width, writers and readers rescaled), so the embedded model has the wider model's configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from landscape.errors import GroupNotAdmitted
from landscape.models import ModelConfig, Params, param_shapes
from landscape.models.layouts import layout_of
from landscape.symmetry.action import PROCESSING_ORDER, NormState, apply, norm_state, resid_needs
from landscape.symmetry.elements import Element, Transform, random_semi_orthogonal
from landscape.symmetry.spec import (
    RESID_GROUPS,
    SEMI_ORTH,
    fixed_gain_norms,
    resid_blocked,
    spec_for,
)

__all__ = [
    "NormState",
    "center_writers",
    "embed_width",
    "expand_kv_heads",
    "fold_norm_biases",
    "fold_norm_gains",
    "norm_state",
    "prepare",
    "process",
    "rescale_norm",
]


def fold_norm_biases(cfg: ModelConfig, params: Params) -> tuple[ModelConfig, Params]:
    """Move every norm bias β into its readers' biases: ``b ← b + β·W`` (contracting d_model).

    A bias-free model (``cfg.bias=False``) has no reader biases to receive β: it first gets zero
    biases everywhere (``bias=True``), which changes nothing else. Norms whose output is the
    stream itself (``spec.fixed_gain_norms``: after the residual sums) keep their biases.
    """
    spec = spec_for(cfg)
    fixed = set(fixed_gain_norms(cfg))
    has_norm_bias = any(k.endswith(".b") and spec.is_norm_param(k) for k in params)
    if has_norm_bias and not cfg.bias:
        cfg = cfg.replace(bias=True)
        dtype = next(iter(params.values())).dtype
        params = {**{n: torch.zeros(s, dtype=dtype) for n, s in param_shapes(cfg).items()
                     if n not in params}, **params}  # fmt: skip
        spec = spec_for(cfg)
    out = dict(params)
    for prefix, readers in spec.norm_readers.items():
        beta = None if prefix in fixed else out.pop(f"{prefix}.b", None)
        if beta is None:
            continue
        for w_name, b_name in readers:
            w = params[w_name].double()
            shift = torch.tensordot(beta.double(), w, dims=([0], [spec.axis_of(w_name)]))
            out[b_name] = (params[b_name].double() + shift).to(params[b_name].dtype)
    return cfg, out


def fold_norm_gains(cfg: ModelConfig, params: Params) -> tuple[ModelConfig, Params]:
    """Move every norm gain γ into its readers' rows, ``W ← diag(γ)·W``, and drop it.

    A norm bias sits after the gain (``N(x)·γ + β``), so norm biases are folded first. Norms
    whose output is the stream itself (``spec.fixed_gain_norms``) keep their gains.
    """
    if any(k.endswith(".b") and spec_for(cfg).is_norm_param(k) for k in params):
        cfg, params = fold_norm_biases(cfg, params)
    spec = spec_for(cfg)
    fixed = set(fixed_gain_norms(cfg))
    out = dict(params)
    for prefix, readers in spec.norm_readers.items():
        gamma = None if prefix in fixed else out.pop(f"{prefix}.w", None)
        if gamma is None:
            continue
        for w_name, _ in readers:
            w = params[w_name]
            axis = spec.axis_of(w_name)
            shape = [1] * w.ndim
            shape[axis] = -1
            out[w_name] = (w.double() * gamma.double().view(shape)).to(w.dtype)
    return cfg, out


def center_writers(cfg: ModelConfig, params: Params) -> tuple[ModelConfig, Params]:
    """Rewrite a LayerNorm stream as an RMSNorm one: ``W ← W·(I − 11ᵀ/d)`` for every writer.

    Every writer (``W_E``, ``b_E``, ``cls``, ``W_pos``, ``W_O``, ``b_O``, ``W_out``, ``b_out``)
    then writes zero-mean vectors, so the stream x has zero mean, ``LN(x) = RMSNorm(x)``
    (same ε), and the returned config says ``norm="rms"``. Norm gains and biases act after the
    normalisation and are untouched.

    With the norm after each residual sum (``BlockLayout.norm_sum``, BERT) the writers are
    centred and the norm stays LayerNorm: every writer's sum is normalised and LayerNorm ignores
    a shift along 1, so the function is kept, but the skip connection carries the norm's output
    ``N(z)·γ + β``, whose mean is not zero, so the stream is not centred and RMSNorm would change
    the function (``spec.resid_blocked``).
    """
    if cfg.norm != "ln":
        raise ValueError(
            "center_writers rewrites a LayerNorm stream as RMSNorm; this model already uses "
            "RMSNorm, whose function centring the writers would change"
        )
    out = dict(params)
    for name, axis in spec_for(cfg).writers:
        if name in params:
            w = params[name].double()
            out[name] = (w - w.mean(axis, keepdim=True)).to(params[name].dtype)
    if layout_of(cfg).norm_sum:  # the skip path carries N(z)·γ + β, whose mean is not zero
        return cfg, out
    return cfg.replace(norm="rms", d_norm=cfg.d_model), out


STEPS: dict[str, Callable[[ModelConfig, Params], tuple[ModelConfig, Params]]] = {
    "fold_norm_biases": fold_norm_biases,
    "fold_norm_gains": fold_norm_gains,
    "center_writers": center_writers,
}
assert tuple(STEPS) == PROCESSING_ORDER


def expand_kv_heads(cfg: ModelConfig, params: Params) -> tuple[ModelConfig, Params]:
    """Grouped-query attention written as multi-head attention: every query head gets its own
    copy of its key/value group's ``W_K``, ``b_K``, ``W_V``, ``b_V`` (the same function; query
    head h reads group h // (n_heads / kv_heads) in both). The copies are then free to differ,
    so matching the expanded models relaxes what grouped-query attention ties together: one QK
    and one OV map per group, and head permutations that move whole groups. A diagnostic of
    what that sharing costs; the merged model is multi-head, not the grouped-query model."""
    r = cfg.n_heads // cfg.kv_heads
    if r == 1:
        return cfg, dict(params)
    out = dict(params)
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}.attn"
        for name in ("W_K", "b_K", "W_V", "b_V"):
            if f"{p}.{name}" in params:
                out[f"{p}.{name}"] = params[f"{p}.{name}"].repeat_interleave(r, dim=0)
        if cfg.qk_norm == "full":  # a gain per key/value head: one per query head now
            out[f"{p}.k_norm.w"] = params[f"{p}.k_norm.w"].repeat_interleave(r, dim=0)
    return cfg.replace(n_kv_heads=0), out


def process(
    cfg: ModelConfig, params: Params, steps: tuple[str, ...] | list[str]
) -> tuple[ModelConfig, Params]:
    """Run the named steps in the canonical order (biases, gains, centring)."""
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown processing steps {sorted(unknown)}; expected {PROCESSING_ORDER}")
    for name in PROCESSING_ORDER:
        if name in steps:
            cfg, params = STEPS[name](cfg, params)
    return cfg, params


def prepare(
    cfg: ModelConfig, params: Params, group: str | Mapping[str, str]
) -> tuple[ModelConfig, Params]:
    """Run only the steps that make ``group`` (a level name or var → kind) exact on ``resid``."""
    if isinstance(group, str):
        kind = RESID_GROUPS.get(group)
    else:
        kind = group.get("resid")
    if kind is None:
        return cfg, params
    why = resid_blocked(cfg)
    if why and kind not in spec_for(cfg).variables["resid"].kinds:
        # folding the gains it can would leave the group inexact: refuse instead
        raise GroupNotAdmitted(f"{kind!r} on the residual stream cannot be made exact here: {why}")
    return process(cfg, params, resid_needs(norm_state(cfg, params), kind))


def embed_width(
    cfg: ModelConfig, params: Params, d_new: int, seed: int
) -> tuple[ModelConfig, Params]:
    """Embed the residual stream into a wider one, ``x ↦ x·G`` with G (d_model × d_new), G·Gᵀ = I.

    Writers become ``W·G``, readers ``Gᵀ·W``; ``‖x·G‖ = ‖x‖``, so RMSNorm is unchanged provided it
    still divides by the old width: ``cfg.d_norm`` keeps its value (the √d correction of
    docs/design.md §1). Needs an RMSNorm stream with folded gains (run :func:`prepare` with
    ``"orth"`` first).
    Not one of the steps of :func:`process`: it changes the width, which no group level asks for.
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


def rescale_norm(cfg: ModelConfig, params: Params, d_norm: int) -> tuple[ModelConfig, Params]:
    """The same function with RMSNorm dividing by another width: ``cfg.d_norm ← n``.

    With ``c = √(n / d_norm)``, every writer and every norm bias is multiplied by c and every
    reader (the matrices fed by a norm) by 1/c. The stream becomes c·x, and since
    ``c²·d_norm = n``,

        N_n(c·x) = c·x·√n / √(c²Σx² + n·ε) = c · x·√d_norm / √(Σx² + d_norm·ε) = c·N(x)

    exactly, ε included; a norm bias β is added after the norm, so it scales with it (c·β), and
    the readers' 1/c gives back ``(N(x)·γ + β)·W``. Gains are untouched.

    This is the √d correction of a width change (docs/design.md §1) written into the weights: after
    :func:`embed_width` into width d_new the stream still divides by its old width;
    ``rescale_norm(..., d_new)`` makes it a model of the wider configuration itself, whose
    parameters can be interpolated with a model trained at that width.
    """
    if cfg.norm != "rms":
        raise ValueError(
            "rescale_norm sets the width RMSNorm divides by; LayerNorm averages over the actual "
            "width (rewrite it as RMSNorm first: center_writers)"
        )
    if d_norm < 1:
        raise ValueError(f"d_norm must be positive, got {d_norm}")
    if d_norm == cfg.d_norm:
        return cfg, dict(params)
    spec = spec_for(cfg)
    c = math.sqrt(d_norm / cfg.d_norm)
    scale = {name: c for name, _ in spec.writers}
    scale.update({f"{p}.b": c for p in spec.norm_readers})
    scale.update({name: 1.0 / c for name, _ in spec.readers})
    out = {k: (v.double() * scale[k]).to(v.dtype) if k in scale else v for k, v in params.items()}
    return cfg.replace(d_norm=d_norm), out
