"""Mixtral (``model_type`` ``mixtral``: MixtralForCausalLM) into the canonical form.

The Llama layout (:mod:`.llama`) without biases, every MLP a sparse mixture of experts
(``ModelConfig.n_experts``, ``top_k``): a router ``block_sparse_moe.gate`` and
``num_local_experts`` SwiGLU experts (``w1`` the gate, ``w3`` the up projection, ``w2`` the down
projection), ``num_experts_per_tok`` of them routed a position by a softmax over the router's
logits renormalised over the top k, which is the canonical forward's softmax over the top k
logits. ``router_jitter_noise``, ``router_aux_loss_coef`` and ``output_router_logits`` act in
training only. Mixtral's sliding window, when set, applies to every layer, as Mistral's; absent,
it is MixtralConfig's default, none (:mod:`.defaults`). Reading the on-disk layout (one tensor
per expert), not transformers' in-memory one (experts fused into 3-D tensors).
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.llama import MIXTRAL_EXPERTS, LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "mixtral"
FAMILY = "Mixtral"
VARIANT = LlamaVariant(sliding="every layer", model_type=MODEL_TYPE, experts=MIXTRAL_EXPERTS)


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, VARIANT)
