"""GPT-NeoX and Pythia (``model_type`` ``gpt_neox``: GPTNeoXForCausalLM, GPTNeoXModel) into the
canonical form.

LayerNorm with biases; parallel blocks ``x + attn(N1(x)) + mlp(N2(x))`` when
``use_parallel_residual`` (the default), else the sequential pre-norm block
(``ModelConfig.block``); a plain MLP (``hidden_act``, GELU by default) with biases; attention
biases when ``attention_bias`` (the default); an untied unembedding ``embed_out.weight`` (the
name transformers writes; ``lm_head.weight`` is read as well) without bias, or a tied one.

Fused attention: ``attention.query_key_value`` [3·d, d] holds, head after head, that head's
query, key and value rows (transformers views it as [heads, 3·d_head] and chunks each head's
rows into q, k, v), so head i's query is rows ``3i·e : 3i·e + e``; the bias likewise.

Rotary positions on the first ``int(d_head·rotary_pct)`` dimensions of each head (``rotary_pct``
or ``rope_parameters.partial_rotary_factor``, 0.25 when neither is set), base
``rotary_emb_base`` or ``rope_parameters.rope_theta`` (10000). NeoX pairs dimension i with
i + r/2 inside the rotated block (``rotate_half``), as :func:`landscape.models.primitives.rotary`
does, so no rows are reordered. transformers' NeoX reads neither a top-level ``rope_theta`` nor a
top-level ``partial_rotary_factor``; either is recorded in ``meta["ignored_config"]``. Rotary
scaling of any kind is refused, as for Llama; so is an odd rotated count and a ``head_dim`` other
than hidden_size / num_attention_heads (transformers' attention and rotary would disagree on it).
Causal-mask and inverse-frequency buffers stored by older writers (``attention.bias``,
``attention.masked_bias``, ``rotary_emb.inv_freq``) are recomputed by transformers on load, and
left unread here (``meta["ignored_tensors"]``).
"""

from __future__ import annotations

from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.importers.common import (
    _act,
    _embedding,
    _flag,
    _heads,
    _heads_out,
    _int,
    _layers,
    _num,
    _prefix,
    _Source,
)
from landscape.models.importers.defaults import read_biases
from landscape.models.importers.llama import _rope_theta, _rotary_dim
from landscape.models.params import Params

MODEL_TYPE = "gpt_neox"
FAMILY = "GPT-NeoX"


def _head_name(src: _Source, label: str) -> str:
    """The unembedding's name: ``embed_out.weight`` (Pythia, and transformers' writer) or
    ``lm_head.weight``; both at once is ambiguous and refused."""
    names = [n for n in ("embed_out.weight", "lm_head.weight") if src.has(n)]
    if len(names) > 1:
        raise LandscapeError(f"{label}: both embed_out.weight and lm_head.weight are stored; "
                             "keep one unembedding")  # fmt: skip
    return names[0] if names else "embed_out.weight"


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _int(config, label, "hidden_size")
    h = _heads(config, label, d, ("num_attention_heads",))
    e = d // h
    if _int(config, label, "head_dim", default=e) != e:
        raise LandscapeError(f"{label}: head_dim {config['head_dim']} differs from hidden_size / "
                             f"num_attention_heads = {e}; not supported")  # fmt: skip
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    n_ctx = _int(config, label, "max_position_embeddings", default=2048)
    attn_bias, _, _, unread = read_biases(config, label, MODEL_TYPE)  # the MLP's always there
    parallel = _flag(config, label, "use_parallel_residual", True)
    theta = _rope_theta(config, label, top="rotary_emb_base")
    rotary_dim = _rotary_dim(config, label, e, "rotary_pct", 0.25)
    # top-level rope_theta and partial_rotary_factor: fields NeoX does not read
    ignored_config = [
        k for k in ("rope_theta", "partial_rotary_factor") if config.get(k) is not None
    ] + unread
    cfg = ModelConfig(
        "gpt",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=vocab,
        n_heads=h,
        d_head=e,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="ln",
        act=_act(config, label, "hidden_act", "gelu"),
        eps=_num(config, label, "layer_norm_eps", 1e-5),
        pos="rotary",
        rotary_base=theta,
        rotary_dim=rotary_dim,
        block="parallel" if parallel else "pre",
    )
    t = src.take
    zeros = lambda *shape: torch.zeros(shape, dtype=src.dtype)  # noqa: E731
    pre = _prefix(src, ("embed_in.weight", "final_layer_norm.weight"), ("gpt_neox.", ""))
    _layers(src, label, f"{pre}layers.", n_layers, "num_hidden_layers")
    head = _head_name(src, label)
    # GPTNeoXConfig does not tie by default
    tied, w_e = _embedding(config, src, label, f"{pre}embed_in.weight", (vocab, d), False, head)
    p: Params = {"embed.W_E": w_e}
    for layer in range(n_layers):
        s, b = f"{pre}layers.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm")):
            p[f"{b}{ours}.w"] = t(f"{s}{theirs}.weight", (d,))
            p[f"{b}{ours}.b"] = t(f"{s}{theirs}.bias", (d,))
        qkv = t(f"{s}attention.query_key_value.weight", (3 * d, d)).reshape(h, 3, e, d)
        if attn_bias:
            qkv_b = t(f"{s}attention.query_key_value.bias", (3 * d,)).reshape(h, 3, e)
        for i, m in enumerate("QKV"):
            p[f"{b}attn.W_{m}"] = qkv[:, i].transpose(1, 2).contiguous()  # [heads, d, e]
            p[f"{b}attn.b_{m}"] = qkv_b[:, i].clone() if attn_bias else zeros(h, e)
        p[f"{b}attn.W_O"] = _heads_out(t(f"{s}attention.dense.weight", (d, d)), h, e)
        p[f"{b}attn.b_O"] = t(f"{s}attention.dense.bias", (d,)) if attn_bias else zeros(d)
        p[f"{b}mlp.W_in"] = t(f"{s}mlp.dense_h_to_4h.weight", (f, d)).T.contiguous()
        p[f"{b}mlp.b_in"] = t(f"{s}mlp.dense_h_to_4h.bias", (f,))
        p[f"{b}mlp.W_out"] = t(f"{s}mlp.dense_4h_to_h.weight", (d, f)).T.contiguous()
        p[f"{b}mlp.b_out"] = t(f"{s}mlp.dense_4h_to_h.bias", (d,))
    p["ln_final.w"] = t(f"{pre}final_layer_norm.weight", (d,))
    p["ln_final.b"] = t(f"{pre}final_layer_norm.bias", (d,))
    p["unembed.W_U"] = (w_e if tied else t(head, (vocab, d))).T.contiguous()
    p["unembed.b_U"] = zeros(vocab)
    return cfg, p, {"tied_embeddings": tied, "ignored_config": ignored_config}
