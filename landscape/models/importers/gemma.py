"""Gemma, Gemma 2 and Gemma 3 text models (``model_type`` ``gemma``, ``gemma2``, ``gemma3_text``:
GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM) into the canonical form.

The order of operations follows transformers' ``modeling_gemma``, ``modeling_gemma2`` and
``modeling_gemma3``. What the three share:

- RMSNorm is ``x·rsqrt(mean(x²) + eps)·(1 + w)``: the gain ``1 + w`` is folded at import (the
  canonical gain is 1 + w; :func:`landscape.models.exporters.export_hf` writes gain − 1).
- The token embedding is multiplied by √hidden_size, which transformers keeps as a float32
  tensor (``torch.tensor(hidden_size**0.5)``) and casts to the weights' dtype: the same number is
  folded into ``W_E``. The unembedding reads the unscaled table, so ``W_U = W_Eᵀ`` stays a
  separate tensor (``meta["tied_embeddings"]``), and the exporter divides the scale out again.
- A gated FFN ``act(x·W_gate) ⊙ (x·W_in)`` with the tanh GELU (GeGLU), grouped-query attention
  with an explicit ``head_dim`` (256 when absent, transformers' default), rotary positions in
  the half-split layout, no biases unless ``attention_bias`` (then q, k, v and o have them).

Per family:

- **Gemma**: pre-norm blocks. The activation is ``hidden_act``, whose legacy value ``gelu``
  transformers reads as the tanh GELU; older transformers read ``hidden_activation`` instead,
  so when both are set they must name the same function.
- **Gemma 2**: sandwich blocks (``block="sandwich"``): ``input_layernorm`` → ``ln1``,
  ``post_attention_layernorm`` → ``ln1_post``, ``pre_feedforward_layernorm`` → ``ln2``,
  ``post_feedforward_layernorm`` → ``ln2_post``. Scores are scaled by
  ``query_pre_attn_scalar``^(−1/2) (``attn_scale``) and softcapped (``attn_logit_softcapping``
  → ``attn_softcap``), logits too (``final_logit_softcapping`` → ``logit_softcap``); absent
  fields take transformers' defaults (50 and 30), ``null`` switches a cap off. Layers marked
  ``sliding_attention`` in ``layer_types`` (every other one from layer 0 when it is absent) see
  the last ``sliding_window`` positions (``windows``).
- **Gemma 3 text**: Gemma 2's blocks with q/k norms (``qk_norm="head"``, (1 + w) gains) and a
  RoPE base per layer type (``rope_parameters.sliding_attention`` and ``.full_attention``, or
  the older ``rope_local_base_freq`` and ``rope_theta``; ``rotary_bases``); ``layer_types`` or,
  without it, ``sliding_window_pattern`` (every 6th layer full). transformers' Gemma 3
  attention never applies ``attn_logit_softcapping``, so a value there is ignored as it is
  (``meta["ignored_config"]``); the final-logit cap is applied when set.

Refused, one line each: bidirectional attention (``use_bidirectional_attention``), rotary
scaling of any kind (``rope_scaling``, ``rope_parameters`` of another type), layer types other
than sliding and full attention, a null ``sliding_window`` on sliding layers (transformers
cannot run it), and the multimodal ``gemma3`` (a vision tower and a language model under one
config: import a text-only checkpoint, ``gemma3_text``).
"""

from __future__ import annotations

from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.importers.common import (
    _act,
    _embedding,
    _heads_in,
    _heads_out,
    _int,
    _layers,
    _num,
    _prefix,
    _show,
    _Source,
)
from landscape.models.importers.defaults import DEFAULTS, read_biases
from landscape.models.importers.llama import _rope_theta
from landscape.models.params import Params

SLIDING, FULL = "sliding_attention", "full_attention"

REFUSED = {
    "gemma3": "model_type gemma3 is the multimodal Gemma 3 (a vision tower and a language "
    "model); import a text-only checkpoint (model_type gemma3_text, Gemma3ForCausalLM)",
}


def embed_scale(d_model: int, dtype: torch.dtype) -> torch.Tensor:
    """√d_model as Gemma multiplies its embeddings by it: a float32 number (transformers stores
    ``torch.tensor(hidden_size**0.5)``) cast to the weights' dtype (bfloat16 rounds √3072 =
    55.43 to 55.5). The importer folds it into ``W_E``, the exporter divides it out."""
    return torch.tensor(d_model**0.5, dtype=torch.float32).to(dtype)


def _softcap(config: dict[str, Any], label: str, key: str, default: float) -> float:
    """A softcap: ``default`` when the field is absent (transformers' dataclass default), 0
    (off) when it is ``null``, else a positive number."""
    if key not in config:
        return default
    return 0.0 if config[key] is None else _num(config, label, key)


def _gemma1_act(config: dict[str, Any], label: str) -> str:
    """Gemma's FFN activation: ``hidden_act`` as transformers reads it (legacy ``gelu`` is the
    tanh GELU), which an older reader's ``hidden_activation`` must agree with."""
    act = config.get("hidden_act")
    hidden_act = "gelu_pytorch_tanh" if act in (None, "gelu") else act
    ours = _act({"hidden_act": hidden_act}, label, "hidden_act", "gelu_pytorch_tanh")
    if config.get("hidden_activation") is not None:
        theirs = _act(config, label, "hidden_activation", "gelu_pytorch_tanh")
        if theirs != ours:
            raise LandscapeError(
                f"{label}: hidden_activation {_show(config['hidden_activation'])} disagrees "
                f"with hidden_act {_show(act)} (read as {hidden_act}); transformers versions "
                "read different ones"
            )
    return ours


def _layer_kinds(config: dict[str, Any], label: str, n_layers: int, version: int) -> list[str]:
    """``sliding_attention`` or ``full_attention`` per layer: ``layer_types``, or the family's
    pattern when it is absent (Gemma 2: sliding on even layers; Gemma 3: every
    ``sliding_window_pattern``-th layer full, by default every 6th)."""
    kinds = config.get("layer_types")
    if kinds is None:
        if version == 2:
            return [SLIDING if i % 2 == 0 else FULL for i in range(n_layers)]
        every = _int(config, label, "sliding_window_pattern",
                     default=DEFAULTS["gemma3_text"]["sliding_window_pattern"])  # fmt: skip
        return [SLIDING if (i + 1) % every else FULL for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers:
        raise LandscapeError(
            f"{label}: layer_types must list one kind per layer ({n_layers}), got {_show(kinds)}"
        )
    odd = [k for k in kinds if k not in (SLIDING, FULL)]
    if odd:
        raise LandscapeError(f"{label}: layer type {_show(odd[0])} is not supported "
                             f"(only {SLIDING} and {FULL})")  # fmt: skip
    return kinds


def _windows(
    config: dict[str, Any], label: str, kinds: list[str], model_type: str
) -> tuple[int, ...]:
    """The sliding window of every layer (0: full attention); ``sliding_window`` absent is the
    family's default (:mod:`.defaults`). ``sliding_window_size``, an older name transformers no
    longer reads, must agree with the window transformers reads."""
    if SLIDING not in kinds:
        return ()
    if "sliding_window" in config and config["sliding_window"] is None:
        raise LandscapeError(
            f"{label}: sliding_window is null but layer_types has sliding layers "
            "(transformers cannot run that model)"
        )
    default = DEFAULTS[model_type]["sliding_window"]
    if config.get("sliding_window") is None and config.get("sliding_window_size") is not None:
        old = _int(config, label, "sliding_window_size")
        if old != default:
            raise LandscapeError(
                f"{label}: sliding_window_size {old} without sliding_window: transformers reads "
                f"sliding_window alone (absent: {default})"
            )
    window = _int(config, label, "sliding_window", "sliding_window_size", default=default)
    return tuple(window if k == SLIDING else 0 for k in kinds)


def _gemma3_bases(config: dict[str, Any], label: str, kinds: list[str]) -> tuple[float, ...]:
    """RoPE base per layer: ``rope_parameters`` keyed by layer type, with the older top-level
    fields (``rope_theta``, ``rope_local_base_freq``, a ``rope_scaling`` that transformers
    merges into the full-attention entry) as aliases that must agree; transformers' defaults
    (:mod:`.defaults`) 1e6 (full) and 1e4 (sliding)."""
    rope = config.get("rope_parameters")
    if rope is not None and (not isinstance(rope, dict) or set(rope) - {SLIDING, FULL}):
        raise LandscapeError(
            f"{label}: rope_parameters must map {SLIDING} and {FULL} to rotary parameters, "
            f"got {_show(rope)}"
        )
    rope = rope or {}
    full, local = f"rope_parameters.{FULL}", f"rope_parameters.{SLIDING}"
    places = {**config, full: rope.get(FULL), local: rope.get(SLIDING)}  # the dicts by name
    defaults = DEFAULTS["gemma3_text"]
    bases = {
        FULL: _rope_theta(places, label, dicts=("rope_scaling", full),
                          default=defaults["rope_theta"]),
        SLIDING: _rope_theta(places, label, "rope_local_base_freq", dicts=(local,),
                             default=defaults["rope_local_base_freq"]),
    }  # fmt: skip
    return tuple(bases[k] for k in kinds)


def _convert(
    config: dict[str, Any], src: _Source, label: str, version: int
) -> tuple[ModelConfig, Params, dict]:
    """Gemma ``version`` 1, 2 or 3 (module docstring)."""
    model_type = ("gemma", "gemma2", "gemma3_text")[version - 1]
    defaults = DEFAULTS[model_type]
    if config.get("use_bidirectional_attention"):
        raise LandscapeError(f"{label}: use_bidirectional_attention is not supported "
                             "(causal attention only)")  # fmt: skip
    d = _int(config, label, "hidden_size")
    h = _int(config, label, "num_attention_heads")
    kv = _int(config, label, "num_key_value_heads", default=16 if version == 1 else 4)
    if h % kv:
        raise LandscapeError(f"{label}: num_key_value_heads {kv} does not divide "
                             f"num_attention_heads {h}")  # fmt: skip
    e = _int(config, label, "head_dim", default=256)
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    n_ctx = _int(config, label, "max_position_embeddings",
                 default=defaults["max_position_embeddings"])  # fmt: skip
    qkv_bias, o_bias, _, ignored = read_biases(config, label, model_type)  # an MLP without
    bias = qkv_bias or o_bias
    places = [config, config.get("rope_parameters"), config.get("rope_scaling")]
    places += [places[1].get(k) for k in (FULL, SLIDING) if isinstance(places[1], dict)]
    if any(isinstance(r, dict) and r.get("partial_rotary_factor") not in (None, 1) for r in places):
        ignored.append("partial_rotary_factor")  # Gemma's default rotary rotates whole heads
    options: dict[str, Any] = {}
    if version == 1:
        act = _gemma1_act(config, label)
        theta = _rope_theta(config, label, default=defaults["rope_theta"])
    else:
        act = _act(config, label, "hidden_activation", "gelu_pytorch_tanh")
        kinds = _layer_kinds(config, label, n_layers, version)
        scalar = _num(config, label, "query_pre_attn_scalar", defaults["query_pre_attn_scalar"])
        options = {
            "block": "sandwich",
            "attn_scale": scalar**-0.5,
            "windows": _windows(config, label, kinds, model_type),
        }
        # transformers' defaults for absent caps: 50 and 30 for Gemma 2, none for Gemma 3
        cap = 30.0 if version == 2 else 0.0
        options["logit_softcap"] = _softcap(config, label, "final_logit_softcapping", cap)
        if version == 2:
            options["attn_softcap"] = _softcap(config, label, "attn_logit_softcapping", 50.0)
            theta = _rope_theta(config, label, default=defaults["rope_theta"])
        else:
            options["qk_norm"] = "head"
            if _softcap(config, label, "attn_logit_softcapping", 0.0):
                ignored.append("attn_logit_softcapping")  # transformers' Gemma 3 ignores it
            bases = _gemma3_bases(config, label, kinds)
            theta = bases[kinds.index(FULL)] if FULL in kinds else bases[0]
            options["rotary_bases"] = bases
    cfg = ModelConfig(
        "gpt",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=vocab,
        n_heads=h,
        d_head=e,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="rms",
        act=act,
        eps=_num(config, label, "rms_norm_eps", 1e-6),
        pos="rotary",
        rotary_base=theta,
        n_kv_heads=0 if kv == h else kv,
        mlp="gated",
        bias=bias,
        **options,
    )
    t = src.take

    def gain(name: str, n: int = d) -> torch.Tensor:
        return 1 + t(name, (n,))  # Gemma's RMSNorm multiplies by (1 + w)

    zeros = lambda *shape: torch.zeros(shape, dtype=src.dtype)  # noqa: E731
    pre = _prefix(src, ("embed_tokens.weight", "norm.weight"), ("model.", ""))
    _layers(src, label, f"{pre}layers.", n_layers, "num_hidden_layers")
    tied, w_e = _embedding(config, src, label, f"{pre}embed_tokens.weight", (vocab, d), True)
    p: Params = {"embed.W_E": w_e * embed_scale(d, src.dtype)}
    for layer in range(n_layers):
        s, b = f"{pre}layers.{layer}.", f"blocks.{layer}."
        p[f"{b}ln1.w"] = gain(f"{s}input_layernorm.weight")
        if version == 1:
            p[f"{b}ln2.w"] = gain(f"{s}post_attention_layernorm.weight")
        else:
            p[f"{b}ln1_post.w"] = gain(f"{s}post_attention_layernorm.weight")
            p[f"{b}ln2.w"] = gain(f"{s}pre_feedforward_layernorm.weight")
            p[f"{b}ln2_post.w"] = gain(f"{s}post_feedforward_layernorm.weight")
        for m, n in (("Q", h), ("K", kv), ("V", kv)):
            name = f"{s}self_attn.{m.lower()}_proj"
            p[f"{b}attn.W_{m}"] = _heads_in(t(f"{name}.weight", (n * e, d)), n, e)
            if bias:
                p[f"{b}attn.b_{m}"] = (
                    t(f"{name}.bias", (n * e,)).reshape(n, e) if qkv_bias else zeros(n, e)
                )
        if version == 3:
            p[f"{b}attn.q_norm.w"] = gain(f"{s}self_attn.q_norm.weight", e)
            p[f"{b}attn.k_norm.w"] = gain(f"{s}self_attn.k_norm.weight", e)
        p[f"{b}attn.W_O"] = _heads_out(t(f"{s}self_attn.o_proj.weight", (d, h * e)), h, e)
        for ours, theirs, shape in (("W_gate", "gate", (f, d)), ("W_in", "up", (f, d)),
                                    ("W_out", "down", (d, f))):  # fmt: skip
            p[f"{b}mlp.{ours}"] = t(f"{s}mlp.{theirs}_proj.weight", shape).T.contiguous()
            if bias:  # the FFN never has biases
                p[f"{b}mlp.b_{ours[2:]}"] = zeros(shape[0])
        if bias:
            p[f"{b}attn.b_O"] = t(f"{s}self_attn.o_proj.bias", (d,)) if o_bias else zeros(d)
    p["ln_final.w"] = gain(f"{pre}norm.weight")
    p["unembed.W_U"] = (w_e if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    if bias:
        p["unembed.b_U"] = zeros(vocab)
    return cfg, p, {"tied_embeddings": tied, "ignored_config": ignored}


def convert_gemma(
    config: dict[str, Any], src: _Source, label: str
) -> tuple[ModelConfig, Params, dict]:
    return _convert(config, src, label, 1)


def convert_gemma2(
    config: dict[str, Any], src: _Source, label: str
) -> tuple[ModelConfig, Params, dict]:
    return _convert(config, src, label, 2)


def convert_gemma3(
    config: dict[str, Any], src: _Source, label: str
) -> tuple[ModelConfig, Params, dict]:
    return _convert(config, src, label, 3)


# model_type → (family, converter): one module for the three generations
MODEL_TYPES = {
    "gemma": ("Gemma", convert_gemma),
    "gemma2": ("Gemma 2", convert_gemma2),
    "gemma3_text": ("Gemma 3", convert_gemma3),
}
