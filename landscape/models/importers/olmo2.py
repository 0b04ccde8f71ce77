"""OLMo 2 (``model_type`` ``olmo2``: Olmo2ForCausalLM) into the canonical form.

Post-norm blocks (``block="post"``): each sublayer reads the raw stream and its output is
normalised before the residual add, ``x + N(attn(x))`` (``post_attention_layernorm``) then
``x + N(mlp(x))`` (``post_feedforward_layernorm``); the final norm is kept. Queries and keys
pass an RMSNorm over all heads of a position (``self_attn.q_norm`` [heads·head_dim], ``k_norm``
[kv_heads·head_dim]) after the projection and before RoPE: ``qk_norm="full"``. Otherwise the
Llama layout (:mod:`.llama`): RoPE, grouped-query attention, SwiGLU, no biases unless
``attention_bias`` (then on all four projections; ``mlp_bias`` is ignored, OLMo 2's MLP has
none: :data:`.defaults.BIASES`), ``rms_norm_eps`` 1e-5 by default. Refused as
for Llama: rotary scaling of any kind.
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.llama import LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "olmo2"
FAMILY = "OLMo 2"
VARIANT = LlamaVariant(qk_norm="full", block="post", eps=1e-5, model_type=MODEL_TYPE)


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, VARIANT)
