"""Functional models over flat parameter dicts in canonical names.

The architectures share one vocabulary of parameter names and one block loop, by default with
the pre-norm layout (below):

- ``mlp``: residual MLP. ``x0 = x·W_E + b_E``; each block
  ``x + W_out·act(W_in·N(x) + b_in) + b_out``; final norm, linear readout ``W_U``.
- ``vit``: pre-norm ViT. Patches are embedded by ``W_E`` (+ ``b_E``), a class token ``cls`` is
  prepended, learned positions ``W_pos`` added; attention + MLP blocks; the class token is read.
- ``gpt``: pre-norm causal language model with token embeddings (learned positions by default).
- ``bert`` and ``bert-cls``: bidirectional (unmasked) attention over token embeddings, every
  position read out (masked LM, or a bare encoder's hidden states) or the first token (sequence
  classification); imported BERTs have their norms after the residual sums (``postln``).

Optional extensions, all off by default (imported checkpoints, docs/design.md §3;
``landscape.models.importers``):

- ``pos``: ``"learned"`` (``W_pos``), ``"rotary"`` (RoPE on q and k, no ``W_pos``; the
  half-split pairing of dimension i with i + r/2 over the first ``rotary_dim`` = r dimensions of
  each head, base ``rotary_base``; with ``rotary_chunks`` n, of each of a head's n equal chunks)
  or ``"none"``.
- ``n_kv_heads`` < ``n_heads``: grouped-query attention. ``W_K``/``W_V`` (and ``b_K``/``b_V``) are
  [n_kv_heads, d_model, d_head]; query head h reads key/value head h // (n_heads / n_kv_heads),
  so consecutive query heads share a group. ``W_Q``/``W_O`` keep n_heads.
- ``mlp="gated"``: SwiGLU-style FFN, ``(act(x·W_gate + b_gate) ⊙ (x·W_in + b_in))·W_out + b_out``
  with ``W_gate`` [d_model, d_mlp] beside ``W_in``.
- ``bias=False``: no attention, FFN or unembedding biases (embedding/patch and norm parameters
  are unaffected); ``attn_scale`` > 0 replaces 1/√d_head; ``act="gelu_tanh"`` is the tanh
  approximation of GELU.
- ``channels`` > 0 (vit): images are [batch, channels, H, W] and a patch is flattened
  channel-major (channels × patch × patch, the order of a conv patch embedding's weight);
  ``channels=0`` keeps grey [batch, H, W] images.
- ``qk_norm``: an RMSNorm on queries and keys after their projection (and bias), before RoPE,
  always RMS whatever ``norm`` is, epsilon ``eps`` (:func:`qk_norm`). ``"head"`` (Qwen3):
  over each head's d_head entries, gains ``attn.q_norm.w``/``attn.k_norm.w`` [d_head] shared by
  every head; ``"full"`` (OLMo 2): over all n_heads·d_head query entries of a position
  (kv_heads·d_head for keys), gains [n_heads, d_head] and [kv_heads, d_head].
- ``attn_softcap`` c > 0: the scaled scores become ``c·tanh(scores / c)`` before the mask;
  ``logit_softcap`` c > 0 does the same to the logits (Gemma 2; :func:`_softcap`).
- ``windows``: per-layer sliding windows on the causal mask; with window w the query at t sees
  keys t − w + 1 … t (0: every earlier key; :func:`_window_mask`). ``rotary_bases``: a RoPE
  base per layer (Gemma 3 uses one on its sliding layers, another on its full ones).
- ``n_experts`` E > 0 with ``top_k`` k: every FFN is a sparse mixture of E experts, each an
  FFN of the kind ``mlp`` says (plain or gated) with its parameters at one index of a leading
  expert axis, ``Σ_e w_e·FFN_e(x)``; a router ``x·W_router + b_router`` [E] picks each
  position's k largest logits and weights them by a softmax over those k (0 elsewhere), as the
  Mixtral router does (:func:`routing`, :func:`_mixture`).
- ``head`` (with a layout that has ``heads``, BERT's): what runs between the read positions
  and ``W_U``. ``"mlm"``: ``N_head(act(x·W_in + b_in))`` (BERT's masked-LM transform; ``W_U`` is
  then the decoder); ``"pooler"``: ``tanh(x·W_in + b_in)`` (BERT's pooler, before its
  classifier); ``"linear"`` (default): nothing.

All matrices multiply on the right (``x @ W``). Canonical shapes:
``W_Q/W_K/W_V`` [n_heads, d_model, d_head], ``W_O`` [n_heads, d_head, d_model],
``W_in`` [d_model, d_mlp], ``W_out`` [d_mlp, d_model], ``W_U`` [d_model, n_out].

Norm parameters are optional: a missing gain means 1, a missing bias 0. That is how folded
parameter sets (gains and biases moved into the readers) run through the same forward.
RMSNorm is written as ``x·√d_norm / √(Σx² + d_norm·ε)`` so that a stream embedded into a wider
space (``d_norm`` < ``d_model``) keeps the original normalisation exactly.

Block layouts (``block``, :mod:`landscape.models.layouts`): where the norms of a block sit is a
registry entry, and one loop (:func:`_blocks`) reads its facts. Per block, with ``f`` the
attention sublayer, then the FFN:

- ``norm_in``: ``f(N(x))``, gains ``ln1`` (attention) and ``ln2`` (FFN). ``pre`` (the default)
  has these alone: ``x + attn(N1(x))``, then ``x + mlp(N2(x))``.
- ``norm_out``: ``x + N(f(·))``, gains ``ln1_post``, ``ln2_post``. ``post`` (OLMo 2) has these
  alone, ``x + N_1(attn(x))``, then ``x + N_2(mlp(x))``; ``sandwich`` (Gemma 2 and 3) both,
  ``x + N_1post(attn(N_1(x)))``, then ``x + N_2post(mlp(N_2(x)))``.
- ``parallel`` (GPT-NeoX / Pythia ``use_parallel_residual``): attention and the FFN read the same
  stream, ``x + attn(N1(x)) + mlp(N2(x))``, instead of the FFN reading ``x + attn(N1(x))``.
- ``norm_sum`` (``postln``, BERT): norms after the residual sums. ``x = N_embed(embed(x))``,
  then per block ``x = N1(x + attn(x))`` and ``x = N2(x + mlp(x))``; no final norm. The stream
  is a norm's output, ``N(z)·γ + β``, so the norm parameters sit on the stream itself.

Two kernel sets compute this function, handed to the one loop (:class:`Kernels`), and the caller
chooses (``forward(..., fast=)``): the reference (``fast=False``, :data:`REFERENCE`), one einsum
per term, which training uses and whose rounding the shipped checkpoints carry; and the
inference path (``fast=True``, :data:`FAST`), logits only, with fused norms, biases inside the
matrix products and attention by the faster kernel for the context length. They agree to
float32 rounding (tests/models/test_models.py). ``fast=None``, the default, keeps the rule every
caller relied on: :func:`default_fast`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from landscape.models.config import ModelConfig
from landscape.models.layouts import layout_of
from landscape.models.params import Params
from landscape.models.registry import architecture_of


def _norm(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    if cfg.norm == "ln":
        x = x - x.mean(-1, keepdim=True)
        x = x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.eps)
    else:
        dn = cfg.d_norm
        x = x * math.sqrt(dn) / torch.sqrt((x * x).sum(-1, keepdim=True) + dn * cfg.eps)
    w = params.get(f"{prefix}.w")
    if w is not None:
        x = x * w
    b = params.get(f"{prefix}.b")
    if b is not None:
        x = x + b
    return x


def _rms(x: torch.Tensor, dims: tuple[int, ...], w: torch.Tensor | None, eps: float
         ) -> torch.Tensor:  # fmt: skip
    """RMSNorm of ``x`` over its last ``dims`` (their sizes), gain ``w`` (None: 1): what
    F.rms_norm computes, in three passes over ``x``. The CPU's F.rms_norm runs as six separate
    operations; on one thread, 2,176 rows of 64: 0.158 ms against 0.144 here, 1,088 of 256: 0.49
    against 0.21, 512 of 576: 2.0 against 0.21 (the same values, bit for bit, in all three on that
    machine)."""
    axes = tuple(range(-len(dims), 0))
    n = math.prod(dims)
    scale = x.square().sum(axes, keepdim=True).div_(n).add_(eps).rsqrt_()
    return x * scale if w is None else x * scale * w


def _fused_norm(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    """``_norm`` for inference: F.layer_norm's fused kernel, or ``_rms``."""
    w, b = params.get(f"{prefix}.w"), params.get(f"{prefix}.b")
    d = x.shape[-1]
    if cfg.norm == "ln":
        return F.layer_norm(x, (d,), w, b, cfg.eps)
    if cfg.d_norm != d:
        return _norm(cfg, params, prefix, x)
    x = _rms(x, (d,), w, cfg.eps)
    return x if b is None else x + b


def qk_norm(
    cfg: ModelConfig, params: Params, prefix: str, which: str, x: torch.Tensor, fused: bool = False
) -> torch.Tensor:
    """The q/k norm (``cfg.qk_norm``) of queries (``which="q"``) or keys (``"k"``) ``x``
    [..., heads, d_head], with the gain ``{prefix}.{which}_norm.w`` (missing: 1).

    RMSNorm ``x·√n / √(Σx² + n·ε)`` over the n = d_head entries of each head (``"head"``) or the
    n = heads·d_head entries of each position (``"full"``), ε = ``cfg.eps``, whatever ``cfg.norm``
    is: Qwen3 and OLMo 2 normalise q and k by RMS alone. ``fused`` computes it by ``_rms``.
    """
    dims = x.shape[-1:] if cfg.qk_norm == "head" else x.shape[-2:]
    w = params.get(f"{prefix}.{which}_norm.w")
    if fused:
        return _rms(x, tuple(dims), w, cfg.eps)
    n, axes = math.prod(dims), tuple(range(-len(dims), 0))
    y = x * math.sqrt(n) / torch.sqrt((x * x).sum(axes, keepdim=True) + n * cfg.eps)
    return y if w is None else y * w


def _softcap(x: torch.Tensor, c: float) -> torch.Tensor:
    """``c·tanh(x / c)`` (in this order, as Gemma 2 computes it); c = 0 leaves x as it is."""
    return torch.tanh(x / c) * c if c else x


def _window_mask(n_query: int, n_key: int, window: int, device: torch.device) -> torch.Tensor:
    """[queries, keys] True where key k is visible to query q: k ≤ q, and k > q − window when
    ``window`` > 0 (a sliding window on the causal mask)."""
    mask = torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril()
    return mask.triu(1 - window) if window else mask


def _act(cfg: ModelConfig, x: torch.Tensor) -> torch.Tensor:
    if cfg.act == "gelu":
        return F.gelu(x)
    if cfg.act == "relu":
        return F.relu(x)
    if cfg.act == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return F.silu(x)


def _bias(cfg: ModelConfig, params: Params, name: str) -> torch.Tensor | float:
    """A bias; a ``bias=False`` model may lack it, which means 0."""
    return params[name] if cfg.bias else params.get(name, 0.0)


def embed(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    """Residual stream before the first block, by the architecture's embedding (registry)."""
    return architecture_of(cfg).embed(cfg, params, inputs)


def rotary(cfg: ModelConfig, x: torch.Tensor, base: float = 0.0) -> torch.Tensor:
    """RoPE on [batch, pos, heads, d_head] (Su et al. 2021, eq. 34, half-split pairing).

    Dimension i < r/2 pairs with i + r/2 (r = ``rot_dim``) and the pair at position t is rotated
    by the angle t·base^(−2i/r); dimensions from r on pass unchanged. ``base`` 0 means
    ``cfg.rotary_base`` (a layer's own is ``cfg.rotary_base_of(layer)``). With
    ``rotary_chunks`` n > 1 each of a head's n equal chunks is rotated so, as a head of its own
    (the circuits space's joint form of a rotary model, landscape/models/circuits.py).
    """
    n = cfg.rotary_chunks
    if n > 1:  # each chunk of a head rotated as a head of its own
        heads = x.shape[-2]
        x = x.unflatten(-1, (n, -1)).flatten(-3, -2)  # (batch, pos, heads·n, d_head / n)
    r = cfg.rot_dim
    t = torch.arange(x.shape[1], device=x.device, dtype=torch.float64)
    base = base or cfg.rotary_base
    inv_freq = base ** (-torch.arange(0, r, 2, device=x.device, dtype=torch.float64) / r)
    angles = torch.outer(t, inv_freq)  # (pos, r/2)
    cos = angles.cos().to(x.dtype)[None, :, None, :]
    sin = angles.sin().to(x.dtype)[None, :, None, :]
    x1, x2, rest = x[..., : r // 2], x[..., r // 2 : r], x[..., r:]
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)
    return out.unflatten(-2, (heads, n)).flatten(-2) if n > 1 else out


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """``x @ w + b`` over the last axis of ``x``; the bias rides in the matrix product (addmm)."""
    if not isinstance(b, torch.Tensor):
        return x @ w if b == 0.0 else x @ w + b
    if x.ndim == 2:
        return torch.addmm(b, x, w)
    return torch.addmm(b, x.flatten(0, -2), w).unflatten(0, x.shape[:-1])


def _qkv_weights(
    cfg: ModelConfig, params: Params, prefix: str
) -> tuple[torch.Tensor, torch.Tensor | float]:
    """``W_Q | W_K | W_V`` side by side, [d_model, (n_heads + 2·kv_heads)·d_head], and their
    biases in the same order (0.0 for a bias-free model): one matrix product for all three."""
    mats = [params[f"{prefix}.W_{m}"] for m in "QKV"]
    w = torch.cat(mats).transpose(0, 1).flatten(1)
    biases = [_bias(cfg, params, f"{prefix}.b_{m}") for m in "QKV"]
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


def _attend(
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
        q = _linear(x[:, :n_query], w[:, : h * e], _part(b, 0, h * e)).unflatten(-1, (h, e))
        kv = _linear(x, w[:, h * e :], _part(b, h * e, None)).unflatten(-1, (2 * g, e))
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
        qkv = _linear(x, w, b).unflatten(-1, (h + 2 * g, e))  # (batch, pos, heads, d_head)
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
            mask = _window_mask(t, t, window, x.device) if window else None
            q, k, v = qkv[:, :, :h], qkv[:, :, h : h + g], qkv[:, :, h + g :]
            z = _fused_kernel(cfg, q, k, v, causal, mask)  # (batch, pos, n_heads, d_head)
        else:
            qkv = qkv.permute(2, 0, 1, 3).contiguous()  # (heads, batch, pos, d_head)
            z = _hand_attention(cfg, qkv[:h, :, : n_query or None], qkv[h:], window)
    w_o, b_o = params[f"{prefix}.W_O"].flatten(0, 1), _bias(cfg, params, f"{prefix}.b_O")
    return _linear(z.flatten(2), w_o, b_o)


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
    scores_t = _softcap(scores_t, cfg.attn_softcap)
    if architecture_of(cfg).causal:  # key t is hidden from the queries before it
        tk, tq = scores_t.shape[-2:]
        hidden = ~_window_mask(tq, tk, window, q.device).T  # (keys, queries)
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
        + _bias(cfg, params, f"{prefix}.b_{m}")
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
    scores = _softcap(scores, cfg.attn_softcap)
    if architecture_of(cfg).causal:
        t = x.shape[1]
        mask = _window_mask(t, t, cfg.window_of(layer), x.device)
        scores = scores.masked_fill(~mask, float("-inf"))
    pattern = scores.softmax(-1)
    if dropout is not None:
        pattern = dropout(pattern)
    z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)  # (batch, pos, n_heads, d_head)
    if cache is not None:
        cache[f"{prefix}.z"] = z
    out = torch.einsum("bqhe,hed->bqd", z, params[f"{prefix}.W_O"])
    return out + _bias(cfg, params, f"{prefix}.b_O")


def forward(
    cfg: ModelConfig,
    params: Params,
    inputs: torch.Tensor,
    cache: dict | None = None,
    *,
    fast: bool | None = None,
    dropout: Dropout | None = None,
) -> torch.Tensor:
    """Logits: mlp/vit/bert-cls [batch, n_out]; gpt/bert [batch, pos, n_out].

    If ``cache`` is a dict, it is filled with ``resid.{l}`` (the residual stream entering block l;
    ``resid.{n_layers}`` enters the final norm), ``blocks.{l}.mlp.hidden`` (post-activation) and
    ``blocks.{l}.attn.z`` (per-head outputs before W_O). ``fast`` chooses the implementation
    (:func:`forward_resid`). ``dropout`` (training) zeroes entries of the embedding too.
    """
    x = embed(cfg, params, inputs)
    if dropout is not None:
        x = dropout(x)
    return forward_resid(cfg, params, x, cache, fast=fast, dropout=dropout)


def forward_resid(
    cfg: ModelConfig,
    params: Params,
    x: torch.Tensor,
    cache: dict | None = None,
    *,
    fast: bool | None = None,
    dropout: Dropout | None = None,
) -> torch.Tensor:
    """``forward`` from the residual stream ``x`` that ``embed`` returns: the blocks, the final
    norm and the readout. ``embed`` is linear in the parameters, so a mixture of models can start
    from the same mixture of their embeddings (``curves.evaluate_mixtures``).

    One loop (:func:`_blocks`) with two kernel sets, equal up to float32 rounding.
    ``fast=False``: the reference (:data:`REFERENCE`); the shipped checkpoints were trained with
    its rounding, and retraining reproduces them bit for bit. ``fast=True``: the inference path
    (:data:`FAST`), faster, logits only (no ``cache``). ``fast=None`` follows
    :func:`default_fast`: the inference path exactly when no cache is asked for and autograd does
    not record. ``dropout`` (training; layouts with ``BlockLayout.dropout``, every one but
    ``postln``) zeroes entries of each attention pattern and of each block's attention and MLP
    outputs; it runs the reference.
    """
    if dropout is not None:
        if fast:
            raise ValueError("dropout runs the reference forward; pass fast=False or None")
        if not layout_of(cfg).dropout:
            raise ValueError(f"dropout is not built for {cfg.block!r} blocks")
        return _blocks(cfg, params, x, REFERENCE, cache, dropout)
    if fast is None:
        fast = default_fast(params, x, cache)
    elif fast and cache is not None:
        raise ValueError("the fast inference path fills no cache; pass fast=False or no cache")
    return _blocks(cfg, params, x, FAST if fast else REFERENCE, cache)


def default_fast(params: Params, x: torch.Tensor, cache: dict | None) -> bool:
    """The rule ``fast=None`` follows: the inference path for evaluation (no ``cache``, autograd
    not recording: under ``torch.no_grad`` or with no tensor requiring grad), the reference when
    autograd records (training, learned matching), so that training keeps the rounding the
    shipped checkpoints were made with."""
    return cache is None and not _records_grad(params, x)


def _records_grad(params: Params, x: torch.Tensor) -> bool:
    """Whether autograd records a forward of these parameters on ``x``."""
    if not torch.is_grad_enabled():
        return False
    return x.requires_grad or any(p.requires_grad for p in params.values())


class Dropout:
    """Training-time dropout drawn from its own seeded generator, so that a seed's training is
    reproducible whatever else draws random numbers: each entry is zeroed with probability ``p``
    and the rest scaled by 1 / (1 − ``p``)."""

    def __init__(self, p: float, seed: int, device: torch.device | str = "cpu") -> None:
        if not 0.0 < p < 1.0:
            raise ValueError(f"dropout probability must be in (0, 1), got {p}")
        self.p = p
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x, self.uniform(x.shape, x.device, x.dtype))

    def uniform(self, shape: torch.Size, device: torch.device, dtype: torch.dtype
                ) -> torch.Tensor:  # fmt: skip
        """The generator's next draws, one uniform in [0, 1) per entry of ``shape``."""
        return torch.rand(shape, generator=self.generator, device=device, dtype=dtype)

    def drop(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``x`` with the entries whose draw ``u`` < p zeroed and the rest scaled by 1/(1 − p).
        Apart from ``__call__`` (the solo case), batched training (one seed per slice of a
        ``torch.vmap``, ``landscape.models.batched``) draws each seed's ``u`` from its own
        generator and drops through this."""
        return x * (u >= self.p).to(x.dtype) / (1.0 - self.p)


def _keep(x: torch.Tensor) -> torch.Tensor:
    return x


def _reference_attention(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, *, layer: int, n_query: int,
    cache: dict | None, dropout: Dropout | None,
) -> torch.Tensor:  # fmt: skip
    """:func:`attention` as a kernel (every position's queries: ``n_query`` is 0 here)."""
    return attention(cfg, params, prefix, x, cache, layer=layer, dropout=dropout)


def _fast_attention(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, *, layer: int, n_query: int,
    cache: dict | None, dropout: Dropout | None,
) -> torch.Tensor:  # fmt: skip
    """:func:`_attend` as a kernel (it fills no cache and drops nothing)."""
    return _attend(cfg, params, prefix, x, n_query, layer=layer)


def _reference_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    return x @ w + b


def _reference_write(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float
                     ) -> torch.Tensor:  # fmt: skip
    return x + h @ w + b  # (x + h·W_out) + b_out: the rounding the shipped checkpoints carry


def _fast_write(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float
                ) -> torch.Tensor:  # fmt: skip
    return x + _linear(h, w, b)


@dataclass(frozen=True)
class Kernels:
    """One implementation of a block's parts, handed to the one block loop (:func:`_blocks`).

    ``norm(cfg, params, prefix, x)``: a norm of the stream; ``attention(cfg, params, prefix, x,
    *, layer, n_query, cache, dropout)``: an attention sublayer, its output projection included;
    ``linear(x, w, b)``: ``x·w + b``; ``write(x, h, w, b)``: the FFN's output ``h·w + b`` added to
    the stream ``x`` where the layout adds the bias last (``BlockLayout.ffn_bias_last``);
    ``class_token_only``: in the last block of a model that reads its class token, queries and
    everything after attention for the class token alone (keys and values of every position).
    """

    name: str
    norm: Callable[[ModelConfig, Params, str, torch.Tensor], torch.Tensor]
    attention: Callable[..., torch.Tensor]
    linear: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | float], torch.Tensor]
    write: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | float],
                    torch.Tensor]  # fmt: skip
    class_token_only: bool


# The reference: one einsum or matrix product per term, the cache, dropout; training runs it and
# the shipped checkpoints carry its rounding.
REFERENCE = Kernels("reference", _norm, _reference_attention, _reference_linear,
                    _reference_write, class_token_only=False)  # fmt: skip
# The inference path: fused norms, biases inside the matrix products, ``_attend``; logits only.
FAST = Kernels("fast", _fused_norm, _fast_attention, _linear, _fast_write, class_token_only=True)


def _blocks(
    cfg: ModelConfig,
    params: Params,
    x: torch.Tensor,
    kernels: Kernels,
    cache: dict | None = None,
    dropout: Dropout | None = None,
) -> torch.Tensor:
    """The blocks, the final norm (or the head) and the readout from the stream ``x``, with the
    norms where the block layout puts them (:func:`landscape.models.layouts.layout_of`, module
    docstring), computed by ``kernels``; ``dropout`` on the attention and FFN outputs added to the
    stream (the reference's)."""
    arch, layout = architecture_of(cfg), layout_of(cfg)
    norm, linear = kernels.norm, kernels.linear
    drop = dropout if dropout is not None else _keep
    if layout.embed_norm:
        x = norm(cfg, params, "ln_embed", x)
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        if cache is not None:
            cache[f"resid.{layer}"] = x
        x_in = x
        if arch.attention:
            last = layer == cfg.n_layers - 1
            reads_one = kernels.class_token_only and last and arch.readout == "class token"
            n_query = 1 if reads_one else 0
            xn = norm(cfg, params, f"{b}.ln1", x) if layout.norm_in else x
            out = kernels.attention(cfg, params, f"{b}.attn", xn, layer=layer, n_query=n_query,
                                    cache=cache, dropout=dropout)  # fmt: skip
            if layout.norm_out:
                out = norm(cfg, params, f"{b}.ln1_post", out)
            if n_query:  # everything after attention is per position
                x, x_in = x[:, :n_query], x_in[:, :n_query]
            x = x + drop(out)
            if layout.norm_sum:
                x = norm(cfg, params, f"{b}.ln1", x)
        x_ffn = x_in if layout.parallel else x  # parallel: the FFN reads the block's input
        xn = norm(cfg, params, f"{b}.ln2", x_ffn) if layout.norm_in else x_ffn
        out: torch.Tensor | None
        if cfg.moe:  # a mixture of experts: its output is a weighted sum, not one write
            out = _mixture(cfg, params, f"{b}.mlp", xn, linear, layout.gate_first, cache)
        else:
            h = _hidden(cfg, params, f"{b}.mlp", xn, linear, layout.gate_first)
            if cache is not None:
                cache[f"{b}.mlp.hidden"] = h
            w_out, b_out = params[f"{b}.mlp.W_out"], _bias(cfg, params, f"{b}.mlp.b_out")
            if layout.ffn_bias_last and dropout is None:
                x, out = kernels.write(x, h, w_out, b_out), None  # written into the stream
            else:
                out = linear(h, w_out, b_out)
        if out is not None:
            if layout.norm_out:
                out = norm(cfg, params, f"{b}.ln2_post", out)
            x = x + drop(out)
        if layout.norm_sum:
            x = norm(cfg, params, f"{b}.ln2", x)
    if cache is not None:
        cache[f"resid.{cfg.n_layers}"] = x
    if arch.readout == "class token":
        x = x[:, 0]
    if layout.final_norm:
        x = norm(cfg, params, "ln_final", x)
    if cfg.head != "linear":
        x = linear(x, params["head.W_in"], params["head.b_in"])
        x = norm(cfg, params, "head.ln", _act(cfg, x)) if cfg.head == "mlm" else torch.tanh(x)
    logits = linear(x, params["unembed.W_U"], _bias(cfg, params, "unembed.b_U"))
    return _softcap(logits, cfg.logit_softcap)


def _hidden(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, linear: Callable,
    gate_first: bool = False,
) -> torch.Tensor:  # fmt: skip
    """The FFN's hidden units (after the activation, and the gate of a gated FFN) on ``x``;
    ``gate_first``: the gate's product before the up projection's (``BlockLayout.gate_first``)."""

    def lin(name: str) -> torch.Tensor:
        return linear(x, params[f"{prefix}.W_{name}"], _bias(cfg, params, f"{prefix}.b_{name}"))

    if not cfg.gated:
        return _act(cfg, lin("in"))
    if gate_first:
        gate = lin("gate")
        return _act(cfg, gate) * lin("in")
    h = lin("in")
    return _act(cfg, lin("gate")) * h


def routing(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor,
            linear: Callable = _reference_linear) -> torch.Tensor:  # fmt: skip
    """The router's weights [..., n_experts] on the normalised stream ``x``: the ``top_k``
    largest router logits ``x·W_router + b_router``, a softmax over those alone, and 0 for every
    other expert (the Mixtral-style router: a softmax over all logits renormalised over the top
    k is the same). Ties go to the lower expert index, as ``torch.topk`` keeps them."""
    logits = linear(x, params[f"{prefix}.W_router"], _bias(cfg, params, f"{prefix}.b_router"))
    top, idx = logits.topk(cfg.top_k, dim=-1)
    return torch.zeros_like(logits).scatter(-1, idx, top.softmax(-1))


def _mixture(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, linear: Callable,
    gate_first: bool, cache: dict | None,
) -> torch.Tensor:  # fmt: skip
    """A sparse mixture of experts on ``x`` [..., d_model]: ``Σ_e w_e(x)·FFN_e(x)`` with the
    router's weights ``w`` (:func:`routing`; zero outside each position's top k) and expert e an
    FFN of the config's kind (plain or gated) with the parameters at index e of the expert axis.

    Every expert runs on every position and the unrouted ones are weighted by an exact 0: the
    same function as running each expert on its own positions, with no data-dependent shapes, so
    it is deterministic on every device and runs under ``torch.vmap`` (batched training, the
    vmapped evaluation of mixtures); it costs ``n_experts / top_k`` times the routed work, which
    is nothing at the zoo's sizes. Both kernel sets compute it alike. With a ``cache`` it holds
    ``{prefix}.hidden`` [..., n_experts, d_mlp] (every expert's units at every position) and
    ``{prefix}.routing`` [..., n_experts] (the weights).
    """
    w = routing(cfg, params, prefix, x, linear)

    def lin(name: str) -> torch.Tensor:  # [..., n_experts, d_mlp]
        b = _bias(cfg, params, f"{prefix}.b_{name}")
        return torch.einsum("...d,edf->...ef", x, params[f"{prefix}.W_{name}"]) + b

    if not cfg.gated:
        h = _act(cfg, lin("in"))
    elif gate_first:
        gate = lin("gate")
        h = _act(cfg, gate) * lin("in")
    else:
        up = lin("in")
        h = _act(cfg, lin("gate")) * up
    if cache is not None:
        cache[f"{prefix}.hidden"], cache[f"{prefix}.routing"] = h, w
    y = torch.einsum("...ef,efd->...ed", h, params[f"{prefix}.W_out"])
    y = y + _bias(cfg, params, f"{prefix}.b_out")
    return torch.einsum("...e,...ed->...d", w, y)


def loss_and_accuracy(
    cfg: ModelConfig, logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy (nats) and accuracy over every prediction in the batch."""
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    loss = F.cross_entropy(logits, targets)
    acc = (logits.argmax(-1) == targets).float().mean()
    return loss, acc
