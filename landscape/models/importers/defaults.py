"""transformers' own defaults for the rotary and sliding-window fields (and a mixture of
experts' sizes and routing, Qwen3-MoE's), by ``model_type``: what a config.json without the
field means to the model transformers builds from it.

A field missing from config.json takes the value of the installed transformers' configuration
class (``Qwen2Config``, ``MistralConfig``, ...), which differ per family: a Qwen2 file without
``use_sliding_window`` has no window (false), one without ``max_window_layers`` slides from
layer 28 on, a Mistral file without ``sliding_window`` slides 4096 positions, a Phi-3 file not
at all; a Qwen3-MoE file without ``norm_topk_prob`` does not renormalise its routed weights.
``tests/models/test_import_defaults.py`` compares every entry with those classes, so a drift in
transformers fails a test instead of changing logits quietly.

Fields a family does not read are absent from its entry. ``None``: the field is unset by
default (no window).

:data:`BIASES` says, per family, which projections transformers' modeling code gives a bias
and from which config field: ``attention_bias`` and ``mlp_bias`` look alike across families but
are read by few of them. Mistral, Qwen2, Qwen3, Qwen3-MoE, OLMo 2, Phi-3 and the Gemmas build
their MLP without biases whatever ``mlp_bias`` says (Qwen3-MoE's router and experts have none);
Qwen2 always has query, key and value biases and never an output bias; Mistral, Mixtral and
Phi-3 have no attention biases at all (Mixtral's router and experts none either); GPT-NeoX's
MLP always has them. A field a family does not read is ignored as transformers ignores it (the
importers list it in ``meta["ignored_config"]``, and the bias tensors it would have named in
``meta["ignored_tensors"]``); the exporters write the biases the same table gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from landscape.models.importers.common import _flag

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
    "mixtral": {"rope_theta": 1000000.0, "max_position_embeddings": 131072, "sliding_window": None},
    "qwen2": _QWEN,
    "qwen3": {**_QWEN, "head_dim": 128},
    # no head_dim (hidden_size / heads), no max_window_layers; and the mixture's sizes
    "qwen3_moe": {
        **{k: v for k, v in _QWEN.items() if k != "max_window_layers"},
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
        "norm_topk_prob": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": None,  # none: every layer a mixture
    },
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


# one bias setting: a config field that switches it (read as true or false, with the family's
# default), or a fixed value whatever config.json says
Switch = str | bool


@dataclass(frozen=True)
class Biases:
    """Which projections of a family have biases (module docstring): ``qkv`` the query, key and
    value projections (GPT-NeoX: its fused ``query_key_value``), ``o`` the attention output,
    ``mlp`` every MLP projection; each a config field or a fixed bool. ``defaults``: the
    family's configuration class's default of each field it reads."""

    qkv: Switch
    o: Switch
    mlp: Switch
    defaults: tuple[tuple[str, bool], ...] = ()

    @property
    def read(self) -> frozenset[str]:
        """The bias fields the family reads."""
        return frozenset(s for s in (self.qkv, self.o, self.mlp) if isinstance(s, str))


_ATTN = Biases("attention_bias", "attention_bias", False, (("attention_bias", False),))

# transformers' modeling_<family>.py, the nn.Linear(..., bias=...) of each projection
BIASES: dict[str, Biases] = {
    "llama": Biases(
        "attention_bias",
        "attention_bias",
        "mlp_bias",
        (("attention_bias", False), ("mlp_bias", False)),
    ),
    "mistral": Biases(False, False, False),
    "mixtral": Biases(False, False, False),
    "qwen2": Biases(True, False, False),
    "qwen3": _ATTN,
    "qwen3_moe": _ATTN,
    "olmo2": _ATTN,
    "phi3": Biases(False, False, False),
    "gemma": _ATTN,
    "gemma2": _ATTN,
    "gemma3_text": _ATTN,
    "gpt_neox": Biases("attention_bias", "attention_bias", True, (("attention_bias", True),)),
}
BIAS_FIELDS = ("attention_bias", "mlp_bias")


def read_biases(config: dict[str, Any], label: str, model_type: str
                ) -> tuple[bool, bool, bool, list[str]]:  # fmt: skip
    """(q/k/v biases, output bias, MLP biases, bias fields set but not read) of a config of
    ``model_type`` as transformers builds its model (:data:`BIASES`); a field the family reads
    must be true or false."""
    table = BIASES[model_type]
    defaults = dict(table.defaults)

    def on(switch: Switch) -> bool:
        if isinstance(switch, bool):
            return switch
        return _flag(config, label, switch, defaults[switch])

    unread = [k for k in BIAS_FIELDS if k not in table.read and config.get(k) is not None]
    return on(table.qkv), on(table.o), on(table.mlp), unread
