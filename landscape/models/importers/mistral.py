"""Mistral (``model_type`` ``mistral``: MistralForCausalLM) into the canonical form.

The Llama layout (:mod:`.llama`) without biases; an explicit ``head_dim`` is read. Mistral's
sliding-window attention is implemented only where it changes nothing: a ``sliding_window``
of at least the context (or none) is accepted, a shorter one refused.
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.llama import convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "mistral"
FAMILY = "Mistral"


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, qkv_bias=False, o_bias=False)
