"""transformers' own defaults for the rotary and sliding-window fields, by ``model_type``: what a
config.json without the field means to the model transformers builds from it.

A field missing from config.json takes the value of the installed transformers' configuration
class (``Qwen2Config``, ``MistralConfig``, ...), which differ per family: a Qwen2 file without
``use_sliding_window`` has no window (false), one without ``max_window_layers`` slides from
layer 28 on, a Mistral file without ``sliding_window`` slides 4096 positions, a Phi-3 file not
at all. ``tests/models/test_import_defaults.py`` compares every entry with those classes, so a
drift in transformers fails a test instead of changing logits quietly.

Fields a family does not read are absent from its entry. ``None``: the field is unset by
default (no window).
"""

from __future__ import annotations

from typing import Any

_LLAMA = {"rope_theta": 10000.0, "max_position_embeddings": 2048}
_QWEN = {
    "rope_theta": 10000.0,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "use_sliding_window": False,
    "max_window_layers": 28,
}

DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "olmo2": _LLAMA,
    "gemma": {"rope_theta": 10000.0, "max_position_embeddings": 8192},
    "mistral": {"rope_theta": 10000.0, "max_position_embeddings": 131072, "sliding_window": 4096},
    "qwen2": _QWEN,
    "qwen3": {**_QWEN, "head_dim": 128},
    "phi3": {
        "rope_theta": 10000.0,
        "partial_rotary_factor": 1.0,
        "max_position_embeddings": 4096,
        "sliding_window": None,
    },
    "gemma2": {
        "rope_theta": 10000.0,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "query_pre_attn_scalar": 256,
    },
    "gemma3_text": {
        "rope_theta": 1000000.0,  # full-attention layers
        "rope_local_base_freq": 10000.0,  # sliding layers
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,  # every 6th layer full
        "query_pre_attn_scalar": 256,
    },
}


def default(model_type: str, field: str) -> Any:
    """transformers' default for ``field`` of ``model_type`` (module docstring)."""
    return DEFAULTS[model_type][field]
