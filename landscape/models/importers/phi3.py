"""Phi-3 (``model_type`` ``phi3``: Phi3ForCausalLM) into the canonical form.

The Llama layout (:mod:`.llama`: RMSNorm, rotary positions, grouped-query attention, SwiGLU,
no biases, tied or untied embeddings) with two fused projections, read as their parts:

- ``self_attn.qkv_proj`` [(n_heads + 2·kv_heads)·d_head, d]: the query rows, then the key rows,
  then the value rows, each head's d_head rows together (transformers slices it in that order).
- ``mlp.gate_up_proj`` [2·d_mlp, d]: the gate rows, then the up rows
  (``gate, up = chunk(2)``; the MLP computes ``up · act(gate)``).

Unlike Llama, Phi-3 honours ``partial_rotary_factor`` (in ``rope_parameters`` or at the top
level): the first ``int(d_head·factor)`` dimensions of each head are rotated, the rest pass
(``rotary_dim``). Rotary scaling of any kind (``longrope``, and ``su`` or ``yarn``, which
transformers reads as ``longrope``) is refused, and with it ``original_max_position_embeddings``,
which only ``longrope`` reads. A ``sliding_window`` applies to every layer whenever one is set
(there is no ``use_sliding_window`` switch, and none by default): each query sees the last
``sliding_window`` positions (``ModelConfig.windows``). Defaults are Phi-3's own
(:mod:`.defaults`; ``rms_norm_eps`` 1e-5); Phi-3 has no biases, and ``attention_bias`` and
``mlp_bias``, Llama fields it does not read, are ignored (:data:`.defaults.BIASES`).
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _heads, _int, _PartsSource, _prefix, _Source
from landscape.models.importers.llama import LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "phi3"
FAMILY = "Phi-3"
VARIANT = LlamaVariant(partial_rotary=True, sliding="every layer", model_type=MODEL_TYPE)

# Phi3Config's defaults outside the rotary and window fields (those are in .defaults)
_DEFAULTS = {"rms_norm_eps": 1e-5}


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    config = dict(config)
    for key, value in _DEFAULTS.items():
        if config.get(key) is None:
            config[key] = value
    d = _int(config, label, "hidden_size")
    h = _int(config, label, "num_attention_heads")
    kv = _int(config, label, "num_key_value_heads", default=h)
    e = _int(config, label, "head_dim", default=0) or d // _heads(
        config, label, d, ("num_attention_heads",)
    )
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    pre = _prefix(src, ("embed_tokens.weight", "norm.weight"), ("model.", ""))
    parts: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for layer in range(n_layers):
        s = f"{pre}layers.{layer}."
        qkv, rows = f"{s}self_attn.qkv_proj.weight", (h + 2 * kv) * e
        for name, start, stop in (("q", 0, h * e), ("k", h * e, (h + kv) * e),
                                  ("v", (h + kv) * e, rows)):  # fmt: skip
            parts[f"{s}self_attn.{name}_proj.weight"] = (qkv, (rows, d), start, stop)
        gate_up = f"{s}mlp.gate_up_proj.weight"
        parts[f"{s}mlp.gate_proj.weight"] = (gate_up, (2 * f, d), 0, f)
        parts[f"{s}mlp.up_proj.weight"] = (gate_up, (2 * f, d), f, 2 * f)
    view = _PartsSource(src, parts)
    return convert_llama_like(config, view, label, VARIANT)
