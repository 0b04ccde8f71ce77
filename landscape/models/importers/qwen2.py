"""Qwen2 and Qwen2.5 (``model_type`` ``qwen2``: Qwen2ForCausalLM) into the canonical form.

The Llama layout (:mod:`.llama`) with biases on the query, key and value projections and none on
the output projection whatever ``attention_bias`` says, and an MLP without biases whatever
``mlp_bias`` says (transformers' Qwen2 reads neither field: :data:`.defaults.BIASES`); tied
embeddings in the small sizes. Sliding-window attention on the layers ``layer_types`` names
(without it, the layers from ``max_window_layers`` on) when ``use_sliding_window`` is true.
Missing fields take Qwen2Config's defaults (:mod:`.defaults`): ``use_sliding_window`` false,
``max_window_layers`` 28, ``sliding_window`` 4096; sliding layers named with
``use_sliding_window`` false are refused (transformers cannot run that model).
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.llama import LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "qwen2"
FAMILY = "Qwen2"
VARIANT = LlamaVariant(sliding="by layer", model_type=MODEL_TYPE)


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, VARIANT)
