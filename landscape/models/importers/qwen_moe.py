"""Qwen mixtures of experts: Qwen3-MoE (``model_type`` ``qwen3_moe``: Qwen3MoeForCausalLM) into
the canonical form; Qwen2-MoE (``qwen2_moe``) refused.

Qwen3-MoE is Qwen3's layout (:mod:`.qwen3`: per-head q/k RMSNorm, ``attention_bias`` on all
four projections) with every MLP a sparse mixture of SwiGLU experts (:data:`.llama.QWEN_EXPERTS`):
the router ``mlp.gate`` and ``num_experts`` experts ``mlp.experts.{e}.gate_proj``/``up_proj``/
``down_proj`` of width ``moe_intermediate_size``, ``num_experts_per_tok`` routed a position.
Their weights are a softmax over every router logit kept on the top k, renormalised over those
k when ``norm_topk_prob`` is true (the canonical softmax over the top k logits) and not when it
is false (``ModelConfig.norm_top_k`` False). transformers writes the expert count as
``num_local_experts``, older files as ``num_experts``; either is read, and both set must agree.
Layers that ``mlp_only_layers`` or ``decoder_sparse_step`` (> 1) make dense MLPs are refused:
every canonical block of a mixture has experts. Unlike Qwen3, ``head_dim`` defaults to
hidden_size / num_attention_heads, and the sliding window applies to every layer when
``use_sliding_window`` is true (``layer_types`` and ``max_window_layers`` are not read). A
field missing from config.json takes Qwen3MoeConfig's default (:mod:`.defaults`, among them
``norm_topk_prob`` false). ``router_aux_loss_coef`` and ``output_router_logits`` act in
training only; ``intermediate_size`` sizes only dense layers, so it is not read. Reading the
on-disk layout (one tensor per expert), not transformers' in-memory one (experts fused into 3-D
tensors).

Qwen2-MoE (and Qwen1.5-MoE) adds a shared expert to every mixture, gated by a sigmoid of its own
router, which the canonical mixture cannot express; it is refused (``REFUSED``).
"""

from __future__ import annotations

from typing import Any

from landscape.models.config import ModelConfig
from landscape.models.importers.common import _Source
from landscape.models.importers.llama import QWEN_EXPERTS, LlamaVariant, convert_llama_like
from landscape.models.params import Params

MODEL_TYPE = "qwen3_moe"
FAMILY = "Qwen3-MoE"
VARIANT = LlamaVariant(qk_norm="head", sliding="every layer when used", model_type=MODEL_TYPE,
                       experts=QWEN_EXPERTS)  # fmt: skip
REFUSED = {
    "qwen2_moe": "model_type qwen2_moe (Qwen2-MoE, Qwen1.5-MoE) adds a shared expert "
    "(mlp.shared_expert, weighted by a sigmoid of mlp.shared_expert_gate) to every mixture of "
    "experts; the canonical mixture has no shared expert, so it is not supported",
}


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label, VARIANT)
