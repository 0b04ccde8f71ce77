"""GPT-2 (``model_type`` ``gpt2``: GPT2LMHeadModel, GPT2Model) into the canonical form.

LayerNorm, fused QKV ``Conv1D`` (weights stored [in, out], already right-multiplying), learned
positions, tied embeddings, biases, GELU (tanh). The unembedding has no bias: ``b_U`` is zeros.
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
    _int,
    _layers,
    _num,
    _prefix,
    _Source,
)
from landscape.models.params import Params

MODEL_TYPE = "gpt2"
FAMILY = "GPT-2"


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _int(config, label, "n_embd", "hidden_size")
    h = _heads(config, label, d, ("n_head", "num_attention_heads"))
    f = _int(config, label, "n_inner", default=4 * d)
    n_layers = _int(config, label, "n_layer", "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    # n_ctx is a legacy alias the model no longer reads: a fallback, not checked against n_positions
    n_ctx = _int(config, label, "n_positions", default=0) or _int(config, label, "n_ctx")
    if _flag(config, label, "scale_attn_by_inverse_layer_idx", False):
        raise LandscapeError(f"{label}: scale_attn_by_inverse_layer_idx is not supported")
    cfg = ModelConfig(
        "gpt",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=vocab,
        n_heads=h,
        d_head=d // h,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="ln",
        act=_act(config, label, "activation_function", "gelu_new"),
        eps=_num(config, label, "layer_norm_epsilon", 1e-5),
        attn_scale=0.0 if _flag(config, label, "scale_attn_weights", True) else 1.0,
    )
    e = cfg.d_head
    pre = _prefix(src, ("wte.weight", "ln_f.weight"), ("transformer.", ""))
    _layers(src, label, f"{pre}h.", n_layers, "n_layer")
    t = src.take
    # GPT2Config ties by default
    tied, w_e = _embedding(config, src, label, f"{pre}wte.weight", (vocab, d), default_tied=True)
    p: Params = {"embed.W_E": w_e, "pos_embed.W_pos": t(f"{pre}wpe.weight", (cfg.n_ctx, d))}
    for layer in range(n_layers):
        s, b = f"{pre}h.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            p[f"{b}{ours}.w"] = t(f"{s}{theirs}.weight", (d,))
            p[f"{b}{ours}.b"] = t(f"{s}{theirs}.bias", (d,))
        qkv = t(f"{s}attn.c_attn.weight", (d, 3 * d))  # Conv1D: [in, out], x·W
        qkv_b = t(f"{s}attn.c_attn.bias", (3 * d,))
        for i, m in enumerate("QKV"):
            w = qkv[:, i * d : (i + 1) * d]
            p[f"{b}attn.W_{m}"] = w.reshape(d, h, e).transpose(0, 1).contiguous()
            p[f"{b}attn.b_{m}"] = qkv_b[i * d : (i + 1) * d].reshape(h, e).clone()
        p[f"{b}attn.W_O"] = t(f"{s}attn.c_proj.weight", (d, d)).reshape(h, e, d)
        p[f"{b}attn.b_O"] = t(f"{s}attn.c_proj.bias", (d,))
        p[f"{b}mlp.W_in"] = t(f"{s}mlp.c_fc.weight", (d, f))
        p[f"{b}mlp.b_in"] = t(f"{s}mlp.c_fc.bias", (f,))
        p[f"{b}mlp.W_out"] = t(f"{s}mlp.c_proj.weight", (f, d))
        p[f"{b}mlp.b_out"] = t(f"{s}mlp.c_proj.bias", (d,))
    p["ln_final.w"] = t(f"{pre}ln_f.weight", (d,))
    p["ln_final.b"] = t(f"{pre}ln_f.bias", (d,))
    p["unembed.W_U"] = (w_e if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    p["unembed.b_U"] = torch.zeros(vocab, dtype=src.dtype)
    return cfg, p, {"tied_embeddings": tied}
