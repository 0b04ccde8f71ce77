"""Qwen3 (``model_type`` ``qwen3``: Qwen3ForCausalLM) into the canonical form.

The Llama layout (:mod:`.llama`) plus an RMSNorm on each head's queries and keys
(``self_attn.q_norm``/``k_norm``, gains [head_dim] shared by every head, applied after the
projection and before RoPE: ``qk_norm="head"``). ``head_dim`` is explicit (Qwen3Config's
default, 128, when config.json has none); ``attention_bias`` puts biases on all four
projections, as in Llama, and ``mlp_bias`` is ignored (Qwen3's MLP has none:
:data:`.defaults.BIASES`); embeddings are tied in the small sizes. Sliding windows on the layers
``layer_types`` names, with Qwen2's rules and defaults (:mod:`.qwen2`, :mod:`.defaults`); rotary
scaling of any kind is refused, as for Llama.
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.defaults import DEFAULTS
from landscape.models.importers.llama import LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "qwen3"
FAMILY = "Qwen3"
VARIANT = LlamaVariant(qk_norm="head", head_dim=DEFAULTS[MODEL_TYPE]["head_dim"],
                       sliding="by layer", model_type=MODEL_TYPE)  # fmt: skip


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, VARIANT)
