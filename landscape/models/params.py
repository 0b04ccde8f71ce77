"""Parameters: flat dicts of tensors in canonical names, their shapes and their initialisation.

Names and shapes (docs/design.md §3, right multiplication ``x @ W``): the embedding of
the architecture (:mod:`landscape.models.registry`), then per block ``ln1`` (attention models),
``attn.W_Q/W_K/W_V`` [heads, d_model, d_head] with ``b_Q/b_K/b_V`` [heads, d_head], ``attn.W_O``
[n_heads, d_head, d_model], ``b_O``, ``ln2``, ``mlp.W_in`` (and ``W_gate``) [d_model, d_mlp],
``mlp.W_out`` [d_mlp, d_model] with their biases; then ``ln_final`` and ``unembed.W_U``
[d_model, n_out], ``b_U``. Norms have a gain ``w`` and, for LayerNorm, a bias ``b``.

A mixture of experts (``n_experts`` E > 0) has the router ``mlp.W_router`` [d_model, E] (and
``b_router`` [E]) and every FFN parameter with a leading expert axis: ``mlp.W_in`` (and
``W_gate``) [E, d_model, d_mlp], ``b_in`` [E, d_mlp], ``W_out`` [E, d_mlp, d_model], ``b_out``
[E, d_model].

A q/k norm (``qk_norm``) adds gains ``attn.q_norm.w``/``attn.k_norm.w``: [d_head] each for
"head", [n_heads, d_head] and [kv_heads, d_head] for "full". Which norms a block has follows
from its layout (:mod:`landscape.models.layouts`): ``ln1``/``ln2`` at the sublayers' inputs or
after the residual sums, ``ln1_post`` after the attention output and ``ln2_post`` after the FFN
output where the layout has output norms (OLMo 2's post-norm blocks have these alone). Norms after
the residual sums come with ``ln_embed`` after the embedding instead of ``ln_final``, and a head
(``head.*``) may sit before ``W_U``.
"""

from __future__ import annotations

import math

import torch

from landscape.models.config import ModelConfig
from landscape.models.layouts import layout_of
from landscape.models.registry import architecture_of

Params = dict[str, torch.Tensor]


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter of a freshly initialised model and its shape (norm gains/biases included).

    The order is part of the contract: :func:`init_params` draws from one generator in it.
    """
    d, f, h, e = cfg.d_model, cfg.d_mlp, cfg.n_heads, cfg.d_head
    arch, layout = architecture_of(cfg), layout_of(cfg)
    shapes: dict[str, tuple[int, ...]] = dict(arch.embedding(cfg))
    if arch.positions and cfg.pos == "learned":
        shapes["pos_embed.W_pos"] = (cfg.n_ctx, d)

    def norm(prefix: str) -> None:
        shapes[f"{prefix}.w"] = (d,)
        if cfg.norm == "ln":
            shapes[f"{prefix}.b"] = (d,)

    if layout.embed_norm:
        norm("ln_embed")
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        if arch.attention:
            if layout.plain_norms:
                norm(f"{b}.ln1")
            for m in "QKV":
                hm = h if m == "Q" else cfg.kv_heads
                shapes[f"{b}.attn.W_{m}"] = (hm, d, e)
                shapes[f"{b}.attn.b_{m}"] = (hm, e)
            if cfg.qk_norm == "head":
                shapes[f"{b}.attn.q_norm.w"] = shapes[f"{b}.attn.k_norm.w"] = (e,)
            elif cfg.qk_norm == "full":
                shapes[f"{b}.attn.q_norm.w"] = (h, e)
                shapes[f"{b}.attn.k_norm.w"] = (cfg.kv_heads, e)
            shapes[f"{b}.attn.W_O"] = (h, e, d)
            shapes[f"{b}.attn.b_O"] = (d,)
            if layout.norm_out:
                norm(f"{b}.ln1_post")
        if layout.plain_norms:
            norm(f"{b}.ln2")
        # a mixture of experts: the router, then every FFN parameter with a leading expert axis
        experts = (cfg.n_experts,) if cfg.moe else ()
        if cfg.moe:
            shapes[f"{b}.mlp.W_router"] = (d, cfg.n_experts)
            shapes[f"{b}.mlp.b_router"] = (cfg.n_experts,)
        shapes[f"{b}.mlp.W_in"] = (*experts, d, f)
        shapes[f"{b}.mlp.b_in"] = (*experts, f)
        if cfg.gated:
            shapes[f"{b}.mlp.W_gate"] = (*experts, d, f)
            shapes[f"{b}.mlp.b_gate"] = (*experts, f)
        shapes[f"{b}.mlp.W_out"] = (*experts, f, d)
        shapes[f"{b}.mlp.b_out"] = (*experts, d)
        if layout.norm_out:
            norm(f"{b}.ln2_post")
    if layout.final_norm:
        norm("ln_final")
    if cfg.head != "linear":  # the head's layers (masked-LM transform, pooler) before W_U
        shapes["head.W_in"], shapes["head.b_in"] = (d, d), (d,)
        if cfg.head == "mlm":
            norm("head.ln")
    shapes["unembed.W_U"] = (d, cfg.n_out)
    shapes["unembed.b_U"] = (cfg.n_out,)
    if not cfg.bias:
        shapes = {k: v for k, v in shapes.items() if not _is_dropped_bias(k)}
    return shapes


def _is_dropped_bias(name: str) -> bool:
    """The biases a ``bias=False`` model lacks: attention, FFN and unembedding."""
    parts = name.split(".")
    return parts[-1].startswith("b_") and parts[-2] in ("attn", "mlp", "unembed")


def init_params(cfg: ModelConfig, seed: int, dtype: torch.dtype = torch.float32) -> Params:
    """Seeded initialisation: N(0, 1/fan_in) matrices, zero biases, unit gains, small embeddings.

    Lookup tables (token embeddings), positions and the class token are N(0, 0.02²); matrices
    writing into the residual stream (``W_out``, ``W_O``) are scaled by 1/√(2·n_layers).
    """
    gen = torch.Generator().manual_seed(seed)
    tokens = architecture_of(cfg).inputs == "tokens"
    params: Params = {}
    for name, shape in param_shapes(cfg).items():
        leaf = name.rsplit(".", 1)[1]
        if leaf == "w":
            t = torch.ones(shape)
        elif leaf.startswith("b_") or leaf == "b":
            t = torch.zeros(shape)
        elif leaf in ("W_pos", "cls") or (leaf == "W_E" and tokens):
            t = 0.02 * torch.randn(shape, generator=gen)
        else:
            fan_in = shape[-2] if leaf != "W_O" else shape[0] * shape[1]
            if leaf in ("W_Q", "W_K", "W_V"):
                fan_in = shape[1]
            t = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
            if leaf in ("W_out", "W_O"):
                t = t / math.sqrt(2 * cfg.n_layers)  # keep the residual stream's scale bounded
        params[name] = t.to(dtype)
    return params


def count_params(cfg: ModelConfig) -> int:
    """Number of scalars in :func:`param_shapes`."""
    return sum(math.prod(s) for s in param_shapes(cfg).values())
