"""Self-attention, both ways the forward computes it: the reference (:func:`attention`, one
einsum per term, the activation cache and dropout) and the inference path (:func:`attend`: one
matrix product for queries, keys and values, then the fused kernel or attention by hand, as the
context length and head width make faster).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from landscape.models.config import ModelConfig
from landscape.models.params import Params
from landscape.models.primitives import (
    Dropout,
    bias_of,
    fused_linear,
    qk_norm,
    rotary,
    softcap,
    window_mask,
)
from landscape.models.registry import architecture_of


def _qkv_weights(
    cfg: ModelConfig, params: Params, prefix: str
) -> tuple[torch.Tensor, torch.Tensor | float]:
    """``W_Q | W_K | W_V`` side by side, [d_model, (n_heads + 2·kv_heads)·d_head], and their
    biases in the same order (0.0 for a bias-free model): one matrix product for all three."""
    mats = [params[f"{prefix}.W_{m}"] for m in "QKV"]
    w = torch.cat(mats).transpose(0, 1).flatten(1)
    biases = [bias_of(cfg, params, f"{prefix}.b_{m}") for m in "QKV"]
    if not any(isinstance(b, torch.Tensor) for b in biases):
        return w, 0.0
    parts = [
        b.flatten(-2) if isinstance(b, torch.Tensor) else w.new_zeros(m.shape[0] * m.shape[2])
        for b, m in zip(biases, mats, strict=True)
    ]
    return w, torch.cat(parts)


# Contexts up to this length, without a causal mask and with heads narrower than ``WIDE_HEAD``,
# use the hand-written attention below; longer, causal or wider ones the fused kernel
# (F.scaled_dot_product_attention). Measured on the CPU, one thread (fastest of 7 rounds): 128
# rows of 17 positions and 4 heads, d_head 8 (vit-digits) 0.98 ms by hand against 1.22 fused,
# d_head 16 (vit-fashion) 1.29 against 1.19; 64 rows of 8 heads of 32 (vit-fashion-d256) 2.12
# against 1.44; a gpt-shakespeare forward (64 positions, causal) 20–25% faster fused, which also
# won at 65 and 197 positions without a mask. Queries of the class token alone (``n_query``) go
# to the fused kernel at every width: 128 rows, 4 heads of 8, 0.35 ms by hand against 0.20 fused;
# 64 rows, 8 heads of 32, 1.66 against 0.50.
SHORT_CONTEXT = 32
WIDE_HEAD = 16


def _fused_attention_ok(q: torch.Tensor, causal: bool, n_keys: int, n_query: int = 0) -> bool:
    """Whether the fused kernel is the faster choice for queries ``q`` [..., d_head] (rule above).
    Not under ``torch.func.vmap``: the CPU kernel has no batching rule there and would run one
    slice at a time."""
    # A private call, kept because nothing public answers "is this tensor batched by vmap":
    # torch.func.debug_unwrap is documented for debugging only and also unwraps grad transforms,
    # and a flag passed down by every vmap caller would silently take the slow path when one
    # forgets it. Either way the attention is the same up to rounding; only the speed differs.
    if torch._C._functorch.is_batchedtensor(q):
        return False
    return bool(n_query) or causal or n_keys > SHORT_CONTEXT or q.shape[-1] >= WIDE_HEAD


def _fused_kernel(
    cfg: ModelConfig, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """F.scaled_dot_product_attention on position-major blocks: ``q`` [batch, queries, n_heads,
    d_head], ``k`` and ``v`` [batch, keys, kv_heads, d_head] (views, no copies); returns
    [batch, queries, n_heads, d_head]."""
    return F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=mask,
        is_causal=causal and mask is None,
        scale=cfg.attn_scale or None,
        enable_gqa=k.shape[2] != q.shape[2],
    ).transpose(1, 2)


def attend(
    cfg: ModelConfig,
    params: Params,
    prefix: str,
    x: torch.Tensor,
    n_query: int = 0,
    *,
    layer: int = 0,
) -> torch.Tensor:
    """``attention`` for inference, on ``x`` [batch, pos, d_model]; the queries of the first
    ``n_query`` positions only when ``n_query`` > 0 (keys and values cover every position).

    One matrix product gives queries, keys and values (keys and values alone, and a small one for
    the few queries, when ``n_query`` > 0). Then the fused kernel or ``_hand_attention``, as
    ``_fused_attention_ok`` chooses; softcapped scores, which the kernel cannot cap, always go by
    hand. The sliding window of block ``layer`` reaches the kernel as an explicit mask.
    """
    h, g, e = cfg.n_heads, cfg.kv_heads, cfg.d_head
    w, b = _qkv_weights(cfg, params, prefix)
    window = cfg.window_of(layer)
    causal = architecture_of(cfg).causal
    if n_query and cfg.pos != "rotary":
        q = fused_linear(x[:, :n_query], w[:, : h * e], _part(b, 0, h * e)).unflatten(-1, (h, e))
        kv = fused_linear(x, w[:, h * e :], _part(b, h * e, None)).unflatten(-1, (2 * g, e))
        if cfg.qk_norm != "none":
            q = qk_norm(cfg, params, prefix, "q", q, fused=True)
            k = qk_norm(cfg, params, prefix, "k", kv[:, :, :g], fused=True)
            kv = torch.cat([k, kv[:, :, g:]], dim=2)
        plain = not (causal or window or cfg.attn_softcap)  # every key visible to every query
        if plain and _fused_attention_ok(q, causal, x.shape[1], n_query):
            z = _fused_kernel(cfg, q, kv[:, :, :g], kv[:, :, g:], causal=False)
        else:
            kv = kv.permute(2, 0, 1, 3).contiguous()  # (2·kv_heads, batch, pos, d_head)
            z = _hand_attention(cfg, q.permute(2, 0, 1, 3), kv, window)
    else:
        qkv = fused_linear(x, w, b).unflatten(-1, (h + 2 * g, e))  # (batch, pos, heads, d_head)
        if cfg.qk_norm != "none":  # before RoPE, as the projections' output
            q = qk_norm(cfg, params, prefix, "q", qkv[:, :, :h], fused=True)
            k = qk_norm(cfg, params, prefix, "k", qkv[:, :, h : h + g], fused=True)
            qkv = torch.cat([q, k, qkv[:, :, h + g :]], dim=2)
        if cfg.pos == "rotary":  # the same rotation for queries and keys
            qk = rotary(cfg, qkv[:, :, : h + g], cfg.rotary_base_of(layer))
            qkv = torch.cat([qk, qkv[:, :, h + g :]], dim=2)
        fused = not n_query and not cfg.attn_softcap
        if fused and _fused_attention_ok(qkv, causal, x.shape[1]):
            t = x.shape[1]
            mask = window_mask(t, t, window, x.device) if window else None
            q, k, v = qkv[:, :, :h], qkv[:, :, h : h + g], qkv[:, :, h + g :]
            z = _fused_kernel(cfg, q, k, v, causal, mask)  # (batch, pos, n_heads, d_head)
        else:
            qkv = qkv.permute(2, 0, 1, 3).contiguous()  # (heads, batch, pos, d_head)
            z = _hand_attention(cfg, qkv[:h, :, : n_query or None], qkv[h:], window)
    w_o, b_o = params[f"{prefix}.W_O"].flatten(0, 1), bias_of(cfg, params, f"{prefix}.b_O")
    return fused_linear(z.flatten(2), w_o, b_o)


def _part(b: torch.Tensor | float, start: int, stop: int | None) -> torch.Tensor | float:
    """Entries ``start:stop`` of a bias; 0.0 (no bias) stays 0.0."""
    return b[start:stop] if isinstance(b, torch.Tensor) else b


def _hand_attention(
    cfg: ModelConfig, q: torch.Tensor, kv: torch.Tensor, window: int = 0
) -> torch.Tensor:
    """Softmax attention on head-major blocks: queries ``q`` [n_heads, batch, queries, d_head]
    (the first positions), keys then values ``kv`` [2·kv_heads, batch, keys, d_head], a causal
    sliding ``window`` when > 0. Returns the per-head outputs [batch, queries, n_heads, d_head].

    The scores are built transposed, [keys, queries]: the softmax over keys then runs along a
    strided axis, vectorised across queries, and the small products come out [d_head, queries],
    each about twice as fast as in the textbook layout for the short contexts here. The h/g query
    heads of one group (grouped-query attention) read their key/value head without copies.
    """
    h, g, e = cfg.n_heads, cfg.kv_heads, cfg.d_head
    k, v = kv[:g, None], kv[g:, None]  # (kv_heads, 1, batch, keys, d_head)
    q = q.unflatten(0, (g, h // g))  # (kv_heads, h/g, batch, queries, d_head)
    scores_t = k @ q.transpose(-1, -2)  # (kv_heads, h/g, batch, keys, queries)
    scores_t = scores_t * cfg.attn_scale if cfg.attn_scale else scores_t / math.sqrt(e)
    scores_t = softcap(scores_t, cfg.attn_softcap)
    if architecture_of(cfg).causal:  # key t is hidden from the queries before it
        tk, tq = scores_t.shape[-2:]
        hidden = ~window_mask(tq, tk, window, q.device).T  # (keys, queries)
        scores_t = scores_t.masked_fill(hidden, float("-inf"))
    z_t = v.transpose(-1, -2) @ scores_t.softmax(-2)  # (kv_heads, h/g, batch, d_head, queries)
    return z_t.flatten(0, 1).permute(1, 3, 0, 2)


def attention(
    cfg: ModelConfig,
    params: Params,
    prefix: str,
    x: torch.Tensor,
    cache: dict | None = None,
    *,
    layer: int = 0,
    dropout: Dropout | None = None,
) -> torch.Tensor:
    """Attention of block ``layer`` (its sliding window and rotary base) on the normalised
    stream ``x`` [batch, pos, d_model], parameters under ``prefix``; ``dropout`` (training)
    zeroes entries of the pattern."""
    q, k, v = (
        torch.einsum("bpd,hde->bphe", x, params[f"{prefix}.W_{m}"])
        + bias_of(cfg, params, f"{prefix}.b_{m}")
        for m in "QKV"
    )  # (batch, pos, heads, d_head); k and v have kv_heads
    if cfg.qk_norm != "none":
        q, k = qk_norm(cfg, params, prefix, "q", q), qk_norm(cfg, params, prefix, "k", k)
    if cfg.pos == "rotary":
        base = cfg.rotary_base_of(layer)
        q, k = rotary(cfg, q, base), rotary(cfg, k, base)
    if cfg.kv_heads != cfg.n_heads:  # grouped-query: each key/value head serves a run of queries
        k = k.repeat_interleave(cfg.n_heads // cfg.kv_heads, dim=2)
        v = v.repeat_interleave(cfg.n_heads // cfg.kv_heads, dim=2)
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k)
    # dividing by √d_head (not multiplying by its inverse) keeps the original rounding
    scores = scores * cfg.attn_scale if cfg.attn_scale else scores / math.sqrt(cfg.d_head)
    scores = softcap(scores, cfg.attn_softcap)
    if architecture_of(cfg).causal:
        t = x.shape[1]
        mask = window_mask(t, t, cfg.window_of(layer), x.device)
        scores = scores.masked_fill(~mask, float("-inf"))
    pattern = scores.softmax(-1)
    if dropout is not None:
        pattern = dropout(pattern)
    z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)  # (batch, pos, n_heads, d_head)
    if cache is not None:
        cache[f"{prefix}.z"] = z
    out = torch.einsum("bqhe,hed->bqd", z, params[f"{prefix}.W_O"])
    return out + bias_of(cfg, params, f"{prefix}.b_O")
