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

Rotary positions rotate q and k by position between the two factors, and a q/k norm
(``qk_norm``) divides them by their RMS there, so their product is no single matrix: such
models have no circuit form and are refused.
"""

from __future__ import annotations

import math

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
    if cfg.pos == "rotary":
        raise LandscapeError(
            "the circuits space needs attention without rotary positions: RoPE rotates q and k "
            "by position between W_Q and W_K, so QKᵀ is no single matrix (use --space weights)"
        )
    if cfg.qk_norm != "none":
        raise LandscapeError(
            "the circuits space needs attention without a q/k norm: it divides q and k by their "
            "RMS between W_Q and W_K, so QKᵀ is no single matrix (use --space weights)"
        )


def check_space(space: str) -> None:
    if space not in SPACES:
        raise LandscapeError(f"unknown space {space!r}; expected one of {', '.join(SPACES)}")


def circuit_config(cfg: ModelConfig) -> ModelConfig:
    """The configuration of the circuit form: heads of width d (+ 1 with biases), one key/value
    head, the original score scale."""
    check_circuit_form(cfg)
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
