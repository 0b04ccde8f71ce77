"""The circuit form of a transformer: every head rewritten as its full QK and OV circuits.

A head reads the stream ``x`` (after its norm) and computes scores ``s·(x W_Q + b_Q)(x W_K +
b_K)ᵀ`` and output ``A·(x W_V + b_V)·W_O``. With the bias folded into an extra input coordinate
(``x̃ = [x, 1]``, ``Q̃ = [W_Q; b_Q]``, ``K̃ = [W_K; b_K]``, ``Ṽ = [W_V; b_V]``, each (d + 1) × d_head)
the head depends on its factors only through the two products

    QK circuit  C = Q̃ K̃ᵀ   ((d + 1) × (d + 1)),      OV circuit  E = Ṽ W_O   ((d + 1) × d),

which is why W_Q → W_Q·M, W_K → W_K·M⁻ᵀ (and V/O likewise) leave the function unchanged. The
circuit form is an ordinary model of the same architecture whose heads have width d + 1 and
whose factors are these products:

    W_Q′ = C[:d],  b_Q′ = C[d],  W_K′ = [I | 0],  b_K′ = e_{d+1},
    W_V′ = [I | 0],  b_V′ = e_{d+1},  W_O′ = E,

with a single key/value head shared by every query head and the original score scale kept in
``attn_scale``. Its queries are ``x̃ C`` and its keys and values are ``x̃`` itself, so it computes
exactly the function of the original (up to rounding); a model without biases needs no extra
coordinate (width d, ``W_K′ = W_V′ = I``).

The straight line between the circuit forms of A and π(B) averages the products ``QKᵀ`` and
``VO``, not the factors: it is a different path from the line between the factored weights, the
*circuits* merge space next to the *weights* one (docs/design.md §1, "Loss barrier"). Every other
parameter (embeddings, norms, FFN, unembedding) is the same in both spaces.

The circuit form's heads are d + 1 wide, however narrow the model's (d_head = 32 against 257 on
a width-256 ViT), and its W_Q′ holds a (d + 1)² matrix per head (2 GB a layer at width 4096). A
line needs less: between two models, or any mixture of n, the mixed circuits are

    Σ_c w_c·Q̃_c K̃_cᵀ = [Q̃_1 | … | Q̃_n]·[w_1·K̃_1 | … | w_n·K̃_n]ᵀ,
    Σ_c w_c·Ṽ_c W_O,c = [Ṽ_1 | … | Ṽ_n]·[w_1·W_O,1; … ; w_n·W_O,n],

heads of width n·d_head whose factors are *linear in the weights* w. So endpoint c of the *joint
form* (:func:`circuit_forms`) carries every endpoint's W_Q and W_V side by side, its own W_K and
W_O in its block and zeros elsewhere (its biases likewise): it computes c's function, and every
mixture of the joint endpoints is the same mixture of their circuits, the circuits line itself.
The joint form is used where it is the narrower (n·d_head < d + 1: every zoo transformer's
lines and triangles); a line's curve by it is 1.1× (width-128 ViT) to 1.8× (width 256) and 2.4×
(GPT-2's widths) faster than by the circuit form and the same to float32 rounding
(bench/bench_circuits.py; in float64, tests/models/test_circuits.py).

Rotary positions rotate q and k by position between the two factors, so a head's QK circuit is
one matrix per offset Δ = s − t between query and key, ``Q̃ R_Δ K̃ᵀ``, and there is no circuit
form. The joint form still exists: with each chunk of its heads rotated as a head of its own
(``rotary_chunks``), ``Σ_c (R_t q_c)·(R_s w_c·k_c) = Σ_c w_c·q_c R_{s−t} k_cᵀ``, so every mixture
of the joint endpoints is the same mixture of their circuits at every offset. For a rotary model
the circuits space is that line, evaluated in the joint form whatever its width. A q/k norm
(``qk_norm``) divides q and k by their RMS between the factors, which no mixture of circuits
describes: such models are refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.params import Params
from landscape.models.registry import architecture_of
from landscape.names import SPACES


def check_circuit_form(cfg: ModelConfig) -> None:
    """Refuse, in one line, a model that has no circuit form."""
    if not architecture_of(cfg).attention:
        raise LandscapeError(
            f"the circuits space rewrites attention heads; this {cfg.arch} model has none "
            "(use --space weights)"
        )
    if cfg.qk_norm != "none":
        raise LandscapeError(
            "the circuits space needs attention without a q/k norm: it divides q and k by their "
            "RMS between W_Q and W_K, so QKᵀ is no single matrix (use --space weights)"
        )


def has_circuits(cfg: ModelConfig) -> bool:
    """Whether ``cfg`` has a circuits merge space (:func:`check_circuit_form` says why not)."""
    try:
        check_circuit_form(cfg)
    except LandscapeError:
        return False
    return True


def check_space(space: str) -> None:
    if space not in SPACES:
        raise LandscapeError(f"unknown space {space!r}; expected one of {', '.join(SPACES)}")


def circuit_config(cfg: ModelConfig) -> ModelConfig:
    """The configuration of the circuit form: heads of width d (+ 1 with biases), one key/value
    head, the original score scale. A rotary model has none (module docstring)."""
    check_circuit_form(cfg)
    if cfg.pos == "rotary":
        raise LandscapeError(
            "a rotary model has no circuit form: RoPE rotates q and k by position between W_Q "
            "and W_K, so QKᵀ is no single matrix (circuit_forms rewrites such models jointly)"
        )
    width = cfg.d_model + (1 if cfg.bias else 0)
    scale = cfg.attn_scale or 1.0 / math.sqrt(cfg.d_head)
    return cfg.replace(d_head=width, n_kv_heads=1, attn_scale=scale, rotary_dim=0)


def _augmented(params: Params, prefix: str, m: str, bias: bool) -> torch.Tensor:
    """``[W; b]`` per head: [heads, d (+1), d_head]."""
    w = params[f"{prefix}.W_{m}"]
    if not bias:
        return w
    b = params.get(f"{prefix}.b_{m}")
    b = torch.zeros_like(w[:, :1]) if b is None else b[:, None]
    return torch.cat([w, b], dim=1)


def circuit_form(cfg: ModelConfig, params: Params) -> tuple[ModelConfig, Params]:
    """The circuit form (module docstring): its configuration and parameters. Differentiable in
    ``params`` (products only), so learned matching can optimise through it."""
    cfg_c = circuit_config(cfg)
    d, bias = cfg.d_model, cfg.bias
    r = cfg.n_heads // cfg.kv_heads  # query heads per key/value head
    out = dict(params)
    like = params["blocks.0.attn.W_Q"]
    eye = torch.eye(d, cfg_c.d_head, dtype=like.dtype, device=like.device)[None]
    unit = torch.zeros(1, cfg_c.d_head, dtype=like.dtype, device=like.device)
    if bias:
        unit[0, d] = 1.0
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}.attn"
        q, k, v = (_augmented(params, p, m, bias) for m in "QKV")
        k = k.repeat_interleave(r, dim=0)
        v = v.repeat_interleave(r, dim=0)
        c = q @ k.transpose(1, 2)  # [heads, d (+1), d (+1)]
        out[f"{p}.W_Q"] = c[:, :d]
        out[f"{p}.W_K"] = eye
        out[f"{p}.W_V"] = eye
        out[f"{p}.W_O"] = v @ params[f"{p}.W_O"]  # [heads, d (+1), d]
        if bias:
            out[f"{p}.b_Q"] = c[:, d]
            out[f"{p}.b_K"] = unit
            out[f"{p}.b_V"] = unit
    return cfg_c, out


def joint_width(cfg: ModelConfig, n: int) -> int | None:
    """Head width of the joint form of ``n`` endpoints (module docstring), None where the
    circuit form is narrower (or as narrow); a rotary model has only the joint form."""
    width = n * cfg.d_head
    narrower = width < cfg.d_model + (1 if cfg.bias else 0)
    return width if narrower or cfg.pos == "rotary" else None


def circuit_forms_config(cfg: ModelConfig, n: int) -> ModelConfig:
    """The configuration :func:`circuit_forms` gives ``n`` endpoints of ``cfg``."""
    width = joint_width(cfg, n)
    if width is None:
        return circuit_config(cfg)
    check_circuit_form(cfg)
    scale = cfg.attn_scale or 1.0 / math.sqrt(cfg.d_head)
    if cfg.pos == "rotary":  # each endpoint's chunk rotated as its own heads were
        return cfg.replace(d_head=width, attn_scale=scale, rotary_dim=cfg.rot_dim,
                           rotary_chunks=n)  # fmt: skip
    return cfg.replace(d_head=width, attn_scale=scale, rotary_dim=0)


def circuit_forms(
    cfg: ModelConfig, endpoints: Sequence[Params]
) -> tuple[ModelConfig, list[Params]]:
    """``endpoints`` (of one ``cfg``) rewritten so that every mixture of them is the same mixture
    of their circuits: the joint form (module docstring) where it is narrower, else each in
    circuit form. Each keeps its function; the two routes give the same lines and triangles to
    rounding. Differentiable in the parameters (concatenations and products only)."""
    n = len(endpoints)
    if n == 0:
        raise ValueError("no endpoints to rewrite")
    cfg_j = circuit_forms_config(cfg, n)
    if joint_width(cfg, n) is None:
        return cfg_j, [circuit_form(cfg, p)[1] for p in endpoints]
    outs = [dict(p) for p in endpoints]
    for layer in range(cfg.n_layers):
        pre = f"blocks.{layer}.attn"
        shared = ["W_Q", "W_V"] + (["b_Q", "b_V"] if cfg.bias else [])
        own = {"W_K": -1, "W_O": -2, **({"b_K": -1} if cfg.bias else {})}
        for m in shared:  # every endpoint's queries and values, one tensor for all
            joint = torch.cat([_part(cfg, p, pre, m) for p in endpoints], dim=-1)
            for out in outs:
                out[f"{pre}.{m}"] = joint
        for m, dim in own.items():  # endpoint c's keys and output map in block c, zeros elsewhere
            parts = [_part(cfg, p, pre, m) for p in endpoints]
            zeros = torch.zeros_like(parts[0])
            for c, out in enumerate(outs):
                out[f"{pre}.{m}"] = torch.cat(
                    [x if i == c else zeros for i, x in enumerate(parts)], dim=dim
                )
    return cfg_j, outs


def _part(cfg: ModelConfig, params: Params, prefix: str, m: str) -> torch.Tensor:
    """One attention parameter of an endpoint; a bias the model may omit (zeros)."""
    t = params.get(f"{prefix}.{m}")
    if t is not None:
        return t
    heads = cfg.n_heads if m == "b_Q" else cfg.kv_heads
    like = params[f"{prefix}.W_Q"]
    return torch.zeros(heads, cfg.d_head, dtype=like.dtype, device=like.device)
