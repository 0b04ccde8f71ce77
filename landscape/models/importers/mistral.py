"""Mistral (``model_type`` ``mistral``: MistralForCausalLM) into the canonical form.

The Llama layout (:mod:`.llama`) without biases (``attention_bias`` and ``mlp_bias`` are
ignored, as transformers' Mistral ignores them: :data:`.defaults.BIASES`); an explicit
``head_dim`` is read. Mistral's sliding-window attention: a ``sliding_window`` that is set
applies to every layer, each query seeing the last ``sliding_window`` positions
(``ModelConfig.windows``); absent, it is MistralConfig's default, 4096 (:mod:`.defaults`), and
``null`` switches it off. Mistral has no ``use_sliding_window`` and reads no ``layer_types``:
both are ignored, as transformers ignores them (``meta["ignored_config"]``).
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.llama import LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "mistral"
FAMILY = "Mistral"
VARIANT = LlamaVariant(sliding="every layer", model_type=MODEL_TYPE)


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, VARIANT)
