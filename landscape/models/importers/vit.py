"""ViT (``model_type`` ``vit``: ViTForImageClassification, ViTModel) into the canonical form.

LayerNorm, conv patch embedding over channels × patch² (flattened channel-major, as
``patchify``), class token, biases. Without a classifier the readout ``W_U`` is the identity and
the model returns the final-norm class token (``last_hidden_state[:, 0]``); the pooler (dense +
tanh) is not part of the canonical form and is left out.
"""

from __future__ import annotations

from typing import Any

import torch

from landscape.models.config import ModelConfig
from landscape.models.importers.common import (
    _act,
    _encoder_attention,
    _encoder_mlp,
    _flag,
    _heads,
    _int,
    _layers,
    _num,
    _prefix,
    _Source,
)
from landscape.models.params import Params

MODEL_TYPE = "vit"
FAMILY = "ViT"


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _int(config, label, "hidden_size")
    h = _heads(config, label, d, ("num_attention_heads",))
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    size, patch = _int(config, label, "image_size"), _int(config, label, "patch_size")
    channels = _int(config, label, "num_channels", default=3)
    classifier = src.has("classifier.weight")
    n_out = (src.shape("classifier.weight") or (0,))[0] if classifier else d
    cfg = ModelConfig(
        "vit",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=n_out,
        n_heads=h,
        d_head=d // h,
        image_size=size,
        patch_size=patch,
        norm="ln",
        act=_act(config, label, "hidden_act", "gelu"),
        eps=_num(config, label, "layer_norm_eps", 1e-12),
        channels=channels,
    )
    t = src.take
    pre = _prefix(src, ("embeddings.cls_token",), ("vit.", ""))
    _layers(src, label, f"{pre}encoder.layer.", n_layers, "num_hidden_layers")
    emb = f"{pre}embeddings."
    conv = t(f"{emb}patch_embeddings.projection.weight", (d, channels, patch, patch))
    p: Params = {
        "embed.W_E": conv.reshape(d, cfg.d_in).T.contiguous(),  # channel-major, as patchify
        "embed.b_E": t(f"{emb}patch_embeddings.projection.bias", (d,)),
        "embed.cls": t(f"{emb}cls_token", (1, 1, d)).reshape(d),
        "pos_embed.W_pos": t(f"{emb}position_embeddings", (1, cfg.n_ctx, d)).reshape(cfg.n_ctx, d),
    }
    qkv_bias = _flag(config, label, "qkv_bias", True)
    for layer in range(n_layers):
        s, b = f"{pre}encoder.layer.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "layernorm_before"), ("ln2", "layernorm_after")):
            p[f"{b}{ours}.w"] = t(f"{s}{theirs}.weight", (d,))
            p[f"{b}{ours}.b"] = t(f"{s}{theirs}.bias", (d,))
        p.update(_encoder_attention(src, s, b, "attention.attention", d, h, qkv_bias))
        p.update(_encoder_mlp(src, s, b, d, f))
    p["ln_final.w"] = t(f"{pre}layernorm.weight", (d,))
    p["ln_final.b"] = t(f"{pre}layernorm.bias", (d,))
    if classifier:
        p["unembed.W_U"] = t("classifier.weight", (n_out, d)).T.contiguous()
        p["unembed.b_U"] = t("classifier.bias", (n_out,))
        readout = "classifier logits"
    else:
        p["unembed.W_U"] = torch.eye(d, dtype=src.dtype)
        p["unembed.b_U"] = torch.zeros(d, dtype=src.dtype)
        readout = "final-norm class token (identity readout; pooler left out)"
    return cfg, p, {"readout": readout}
