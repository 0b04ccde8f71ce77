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
  always RMS whatever ``norm`` is, epsilon ``eps`` (``primitives.qk_norm``). ``"head"`` (Qwen3):
  over each head's d_head entries, gains ``attn.q_norm.w``/``attn.k_norm.w`` [d_head] shared by
  every head; ``"full"`` (OLMo 2): over all n_heads·d_head query entries of a position
  (kv_heads·d_head for keys), gains [n_heads, d_head] and [kv_heads, d_head].
- ``attn_softcap`` c > 0: the scaled scores become ``c·tanh(scores / c)`` before the mask;
  ``logit_softcap`` c > 0 does the same to the logits (Gemma 2; ``primitives.softcap``).
- ``windows``: per-layer sliding windows on the causal mask; with window w the query at t sees
  keys t − w + 1 … t (0: every earlier key; ``primitives.window_mask``). ``rotary_bases``: a
  RoPE base per layer (Gemma 3 uses one on its sliding layers, another on its full ones).
- ``n_experts`` E > 0 with ``top_k`` k: every FFN is a sparse mixture of E experts, each an
  FFN of the kind ``mlp`` says (plain or gated) with its parameters at one index of a leading
  expert axis, ``Σ_e w_e·FFN_e(x)``; a router ``x·W_router + b_router`` [E] picks each
  position's k largest logits and weights them by a softmax over those k (0 elsewhere), as the
  Mixtral router does (:mod:`landscape.models.ffn`); ``norm_top_k`` False weights them by
  their entries of a softmax over all E logits instead, not renormalised (Qwen3-MoE's
  ``norm_topk_prob`` false).
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

This module holds the block loop, the kernel sets and the entry points; the parts they compose
live beside it: ``landscape.models.primitives`` (norms, activations, RoPE, linear maps, dropout),
``landscape.models.self_attention`` (both attentions) and ``landscape.models.ffn`` (the FFN and
the mixture of experts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from landscape.models.config import ModelConfig
from landscape.models.ffn import hidden_units, mixture
from landscape.models.layouts import layout_of
from landscape.models.params import Params
from landscape.models.primitives import (
    Dropout,
    activation,
    bias_of,
    fused_linear,
    fused_norm,
    reference_linear,
    reference_norm,
    softcap,
)
from landscape.models.registry import architecture_of
from landscape.models.self_attention import attend, attention


def embed(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    """Residual stream before the first block, by the architecture's embedding (registry)."""
    return architecture_of(cfg).embed(cfg, params, inputs)


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
    """:func:`attend` as a kernel (it fills no cache and drops nothing)."""
    return attend(cfg, params, prefix, x, n_query, layer=layer)


def _reference_write(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float
                     ) -> torch.Tensor:  # fmt: skip
    return x + h @ w + b  # (x + h·W_out) + b_out: the rounding the shipped checkpoints carry


def _fast_write(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float
                ) -> torch.Tensor:  # fmt: skip
    return x + fused_linear(h, w, b)


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
REFERENCE = Kernels("reference", reference_norm, _reference_attention, reference_linear,
                    _reference_write, class_token_only=False)  # fmt: skip
# The inference path: fused norms, biases inside the matrix products, ``attend``; logits only.
FAST = Kernels("fast", fused_norm, _fast_attention, fused_linear, _fast_write,
               class_token_only=True)  # fmt: skip


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
            out = mixture(cfg, params, f"{b}.mlp", xn, linear, layout.gate_first, cache)
        else:
            h = hidden_units(cfg, params, f"{b}.mlp", xn, linear, layout.gate_first)
            if cache is not None:
                cache[f"{b}.mlp.hidden"] = h
            w_out, b_out = params[f"{b}.mlp.W_out"], bias_of(cfg, params, f"{b}.mlp.b_out")
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
        x = norm(cfg, params, "head.ln", activation(cfg, x)) if cfg.head == "mlm" else torch.tanh(x)
    logits = linear(x, params["unembed.W_U"], bias_of(cfg, params, "unembed.b_U"))
    return softcap(logits, cfg.logit_softcap)


def loss_and_accuracy(
    cfg: ModelConfig, logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy (nats) and accuracy over every prediction in the batch."""
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    loss = F.cross_entropy(logits, targets)
    acc = (logits.argmax(-1) == targets).float().mean()
    return loss, acc
