"""Llama (``model_type`` ``llama``: LlamaForCausalLM, LlamaModel; SmolLM2 and other
Llama-architecture models) into the canonical form.

RMSNorm, rotary positions (Hugging Face's half-split layout), grouped-query attention, SwiGLU,
tied or untied embeddings, no biases (zeros, or ``bias=False`` when the model has none at all).
Rotary scaling of any kind is refused, wherever it is written; sliding windows shorter than the
context are refused; ``partial_rotary_factor`` is ignored as Llama ignores it
(``meta["ignored_config"]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.importers.common import (
    _act,
    _embedding,
    _flag,
    _heads,
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
from landscape.models.layouts import block_layout
from landscape.models.params import Params

MODEL_TYPE = "llama"
FAMILY = "Llama"


@dataclass(frozen=True)
class ExpertLayout:
    """Where a family of the Llama layout keeps its mixture of experts, and which config.json
    fields size it (:func:`_read_experts`).

    ``stem``: the block's module holding the router ``gate`` and the experts ``experts.{e}.``;
    ``names``: each expert's gate, up and down projections. ``count``: the fields of the
    expert count (aliases, which must agree where both are set); ``width``: the field of each
    expert's width. ``norm_field``: the field saying whether the top k's weights are
    renormalised (``ModelConfig.norm_top_k``; "" always renormalised). ``sparse_fields``: the
    family reads ``decoder_sparse_step`` and ``mlp_only_layers``, which can make layers dense
    MLPs (refused: every canonical block of a mixture has experts). A field missing from
    config.json takes the family's default (:data:`.defaults.DEFAULTS`) where it has one, and is
    required where it has none.
    """

    stem: str
    names: tuple[str, str, str]
    count: tuple[str, ...]
    width: str = "intermediate_size"
    norm_field: str = ""
    sparse_fields: bool = False


# Mixtral: block_sparse_moe, w1 the gate, w3 the up projection, w2 the down one
MIXTRAL_EXPERTS = ExpertLayout("block_sparse_moe", ("w1", "w3", "w2"), ("num_local_experts",))
# Qwen3-MoE: mlp.gate and mlp.experts.{e}.{gate,up,down}_proj; transformers writes the count
# as num_local_experts, older files as num_experts
QWEN_EXPERTS = ExpertLayout("mlp", ("gate_proj", "up_proj", "down_proj"),
                            ("num_local_experts", "num_experts"), "moe_intermediate_size",
                            "norm_topk_prob", sparse_fields=True)  # fmt: skip


@dataclass(frozen=True)
class LlamaVariant:
    """How a family reads the Llama layout (:func:`convert_llama_like`), Llama's own reading by
    default.

    ``qk_norm``: the q/k norm gains ``self_attn.q_norm``/``k_norm`` (``ModelConfig.qk_norm``:
    "head" [head_dim] as Qwen3 stores them, "full" [heads·head_dim] as OLMo 2 does).
    ``block="post"``: OLMo 2's norms on the sublayer outputs, ``post_attention_layernorm`` after
    attention and ``post_feedforward_layernorm`` after the MLP, no ``input_layernorm`` (in the
    pre-norm layout ``post_attention_layernorm`` is the norm before the MLP). ``head_dim`` and
    ``eps``: the family's defaults when config.json has no ``head_dim`` (0: hidden_size /
    num_attention_heads) or ``rms_norm_eps``. ``partial_rotary``: the family rotates the first
    ``partial_rotary_factor``·d_head dimensions of each head (Phi-3), where Llama ignores the
    field. ``sliding``: how the family applies ``sliding_window`` (:func:`_layer_windows`).
    ``model_type``: whose defaults and biases (:mod:`.defaults`) a config.json field takes.
    ``experts``: every MLP is a sparse mixture of SwiGLU experts, stored as the
    :class:`ExpertLayout` says (Mixtral's, Qwen3-MoE's), stacked on the expert axis
    (``ModelConfig.n_experts``, ``top_k``, ``norm_top_k``).
    """

    qk_norm: str = "none"
    block: str = "pre"
    head_dim: int = 0
    eps: float = 1e-6
    partial_rotary: bool = False
    sliding: str = ""
    model_type: str = MODEL_TYPE
    experts: ExpertLayout | None = None


LLAMA = LlamaVariant()


# Keys a rope dict of the default kind may hold; anything else (a factor, original context,
# per-layer-type entries) belongs to a scaling kind this importer does not implement.
_ROPE_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
_ROPE_DICTS = ("rope_scaling", "rope_parameters")


def _rope_theta(
    config: dict[str, Any],
    label: str,
    top: str = "rope_theta",
    *,
    dicts: tuple[str, ...] = _ROPE_DICTS,
    default: float = 10000.0,
) -> float:
    """RoPE base of a Llama config; every scaling kind is refused.

    The scaling may sit in ``rope_scaling`` (older files, kind under ``type`` or ``rope_type``)
    or ``rope_parameters`` (newer files), and the base in either dict or at the top level
    (``top``: ``rope_theta``; GPT-NeoX writes ``rotary_emb_base``). Readers differ on which place
    wins, so every place is read: any kind other than default anywhere, or two different bases,
    is refused rather than resolved by a guess. ``dicts`` names the rope dicts (Gemma 3 keeps
    one per layer type, ``rope_parameters.full_attention`` and ``.sliding_attention``); without
    a base anywhere it is ``default``.
    """
    thetas = _rope_values(config, label, "rope_theta", top, dicts)
    for key, v in thetas:
        _num({key: v}, label, key)
    _agreed(thetas, label)
    return float(thetas[0][1]) if thetas else default


def _rope_values(
    config: dict[str, Any], label: str, key: str, top: str, dicts: tuple[str, ...] = _ROPE_DICTS
) -> list[tuple[str, Any]]:
    """Every place ``key`` of the rotary positions is written, as (where, value): in the rope
    dicts ``dicts`` (``rope_scaling``, ``rope_parameters``; each checked to be of the default
    kind) and at the top level under ``top``."""
    found: list[tuple[str, Any]] = []
    for where in dicts:
        rope = config.get(where)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            raise LandscapeError(f"{label}: {where} must be an object, got {_show(rope)}")
        for kind in ("rope_type", "type"):
            if rope.get(kind) not in (None, "default"):
                raise LandscapeError(
                    f"{label}: {where}.{kind} {_show(rope[kind])} is not supported "
                    "(only default rotary positions)"
                )
        extra = sorted(set(rope) - _ROPE_KEYS)
        if extra:
            raise LandscapeError(
                f"{label}: {where}.{extra[0]} is not supported (only default rotary positions)"
            )
        if rope.get(key) is not None:
            found.append((f"{where}.{key}", rope[key]))
    scaling, params = config.get("rope_scaling"), config.get("rope_parameters")
    if dicts == _ROPE_DICTS and scaling and params and scaling != params:
        # transformers takes a non-empty rope_scaling in place of rope_parameters whole (older
        # versions read only rope_scaling): a base or factor only in rope_parameters is lost.
        # Checked after the kinds above, so that an unsupported kind is what the line names.
        raise LandscapeError(
            f"{label}: rope_scaling {_show(scaling)} and rope_parameters {_show(params)} are "
            "both set and differ (transformers reads rope_scaling in place of rope_parameters)"
        )
    if config.get(top) is not None:
        found.append((top, config[top]))
    return found


def _agreed(found: list[tuple[str, Any]], label: str) -> None:
    """Numbers read from several places (:func:`_rope_values`) are one value, or refused."""
    for where, v in found[1:]:
        if float(v) != float(found[0][1]):
            raise LandscapeError(f"{label}: {where} {_show(v)} disagrees with {found[0][0]} "
                                 f"{_show(found[0][1])}")  # fmt: skip


def _rotary_dim(config: dict[str, Any], label: str, d_head: int, top: str,
                default: float) -> int:  # fmt: skip
    """Head dimensions rotated by a family that honours ``partial_rotary_factor`` (in the rope
    dicts, or at the top level under ``top``; ``default`` when unset): ``int(d_head·factor)``,
    as transformers computes it, 0 meaning every dimension. A factor outside (0, 1] or an odd
    count (transformers would then rotate one dimension more, at other frequencies) is refused.
    """
    found = _rope_values(config, label, "partial_rotary_factor", top)
    for where, v in found:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise LandscapeError(f"{label}: {where} must be a number, got {_show(v)}")
    _agreed(found, label)
    where, factor = found[0] if found else (top, default)
    if not 0 < factor <= 1:
        raise LandscapeError(f"{label}: {where} must lie in (0, 1], got {_show(factor)}")
    r = int(d_head * factor)
    if r % 2:
        raise LandscapeError(f"{label}: {where} {_show(factor)} rotates {r} of {d_head} head "
                             "dimensions, an odd number; not supported")  # fmt: skip
    return 0 if r == d_head else r


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    return convert_llama_like(config, src, label)


_SLIDING, _FULL = "sliding_attention", "full_attention"


def _window(config: dict[str, Any], label: str, defaults: dict[str, Any]) -> int | None:
    """``sliding_window`` of a family with sliding attention: the family's default when absent,
    None (no window) when null; 0 is refused (transformers' mask would hide every key)."""
    if config.get("sliding_window", "absent") is None:
        return None
    return _int(config, label, "sliding_window", default=defaults["sliding_window"])


def _layer_windows(
    config: dict[str, Any],
    label: str,
    n_layers: int,
    n_ctx: int,
    sliding: str,
    defaults: dict[str, Any],
) -> tuple[tuple[int, ...], list[str]]:
    """(the sliding window of every layer (0: full attention), fields the family ignores), as
    transformers applies them; a field missing from config.json takes the family's default
    (``defaults``, :mod:`.defaults`).

    ``sliding`` is ``"every layer"`` (Mistral, Phi-3: a ``sliding_window`` that is set applies
    to every layer; neither reads ``use_sliding_window`` or ``layer_types``), ``"every layer
    when used"`` (Qwen3-MoE: the window applies to every layer when ``use_sliding_window`` is
    true and is dropped when it is false; ``layer_types`` and ``max_window_layers`` are not
    read), ``"by layer"``
    (Qwen2, Qwen3: ``layer_types`` names each layer's kind; without it the layers from
    ``max_window_layers`` on slide; ``use_sliding_window`` false drops the window, so sliding
    layers named with it are a model transformers cannot run, refused), or ``""`` (Llama,
    OLMo 2: no sliding attention, so a window shorter than the context, or a sliding layer type,
    is refused rather than guessed at).
    """
    if sliding == "every layer":
        ignored = [k for k in ("use_sliding_window", "layer_types") if k in config]
        window = _window(config, label, defaults)
        return ((window,) * n_layers if window else ()), ignored
    if sliding == "every layer when used":
        ignored = [k for k in ("layer_types", "max_window_layers") if k in config]
        if not _flag(config, label, "use_sliding_window", defaults["use_sliding_window"]):
            return (), ignored + (["sliding_window"] if config.get("sliding_window") else [])
        window = _window(config, label, defaults)
        return ((window,) * n_layers if window else ()), ignored
    kinds = config.get("layer_types")
    if kinds is not None:
        if not isinstance(kinds, list) or len(kinds) != n_layers or set(kinds) - {_SLIDING, _FULL}:
            raise LandscapeError(f"{label}: layer_types {_show(kinds)[:80]} is not supported "
                                 f"(one of {_FULL} or {_SLIDING} per layer)")  # fmt: skip
    if not sliding:
        window = _int(config, label, "sliding_window", default=0, low=0)  # 0 or null: none
        use = _flag(config, label, "use_sliding_window", True)
        if kinds is not None and _SLIDING in kinds:
            raise LandscapeError(f"{label}: layer_types {_show(kinds)[:80]} is not supported "
                                 f"(only {_FULL})")  # fmt: skip
        if window and window < n_ctx and use:
            raise LandscapeError(
                f"{label}: sliding_window {window} is shorter than max_position_embeddings "
                f"{n_ctx}; sliding-window attention is not supported for this family"
            )
        return (), []
    window = _window(config, label, defaults)
    use = _flag(config, label, "use_sliding_window", defaults["use_sliding_window"])
    raw, window = window, window if use else None  # false drops it whatever layer_types says
    if kinds is None:
        first = _int(config, label, "max_window_layers", low=0,
                     default=defaults["max_window_layers"])  # fmt: skip
        kinds = [_SLIDING if window and i >= first else _FULL for i in range(n_layers)]
    if _SLIDING in kinds and not window:
        why = [] if raw else ["no sliding_window"]
        if not use:
            why.append("use_sliding_window is " + ("false" if "use_sliding_window" in config
                                                   else "absent (false)"))  # fmt: skip
        raise LandscapeError(f"{label}: layer_types has sliding layers but {' and '.join(why)}; "
                             "transformers cannot run that model")  # fmt: skip
    windows = tuple(window if k == _SLIDING else 0 for k in kinds)
    return (windows if any(windows) else ()), []


def _default(defaults: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``default=`` the family's default of the first of ``keys`` it has (none: required)."""
    return next(({"default": defaults[k]} for k in keys if k in defaults), {})


def _read_experts(config: dict[str, Any], label: str, layout: ExpertLayout | None,
                  n_layers: int, defaults: dict[str, Any]) -> tuple[int, int, bool]:  # fmt: skip
    """(experts, experts routed a position, whether their weights are renormalised) of a
    family whose every MLP is a mixture stored as ``layout`` says ((0, 0, True) without one);
    layers the config makes dense MLPs are refused, naming the field."""
    if layout is None:
        return 0, 0, True
    n = _int(config, label, *layout.count, **_default(defaults, *layout.count))
    top_k = _int(config, label, "num_experts_per_tok", **_default(defaults, "num_experts_per_tok"))
    if top_k > n:
        named = next((k for k in layout.count if config.get(k) is not None), layout.count[0])
        raise LandscapeError(f"{label}: num_experts_per_tok {top_k} exceeds {named} {n}")
    norm = True
    if layout.norm_field:
        norm = _flag(config, label, layout.norm_field, defaults[layout.norm_field])
    if layout.sparse_fields:
        _sparse_layers(config, label, n_layers, defaults)
    return n, top_k, norm


def _sparse_layers(config: dict[str, Any], label: str, n_layers: int,
                   defaults: dict[str, Any]) -> None:  # fmt: skip
    """Refuse a config whose ``decoder_sparse_step`` or ``mlp_only_layers`` makes a layer a dense
    MLP (layer i has experts when it is not in ``mlp_only_layers`` and i + 1 is a multiple of
    ``decoder_sparse_step``, as transformers builds it)."""
    step = _int(config, label, "decoder_sparse_step", default=defaults["decoder_sparse_step"])
    only = config.get("mlp_only_layers", defaults["mlp_only_layers"])
    only = [] if only is None else only
    if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                         for i in only):  # fmt: skip
        raise LandscapeError(f"{label}: mlp_only_layers must be a list of layer indices, got "
                             f"{_show(only)}")  # fmt: skip
    layers = range(n_layers)
    for field, value, dense in (
        ("mlp_only_layers", only, [i for i in layers if i in only]),
        ("decoder_sparse_step", step, [i for i in layers if (i + 1) % step]),
    ):
        if dense:
            raise LandscapeError(
                f"{label}: {field} {_show(value)} makes layers {_show(dense)} dense MLPs; a "
                "mixture of experts with dense layers is not supported"
            )


def convert_llama_like(
    config: dict[str, Any], src: _Source, label: str, variant: LlamaVariant = LLAMA
) -> tuple[ModelConfig, Params, dict]:
    """The Llama layout: Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, OLMo 2; Phi-3
    through a source that splits its fused projections; each family's reading of it is its
    ``variant`` (:class:`LlamaVariant`). The biases are the family's (:data:`.defaults.BIASES`, read
    by ``model_type``): a bias field the family does not read is listed in
    ``meta["ignored_config"]`` and its tensors stay unread (``meta["ignored_tensors"]``).
    """
    qk_norm, block, head_dim, eps = variant.qk_norm, variant.block, variant.head_dim, variant.eps
    partial_rotary, sliding = variant.partial_rotary, variant.sliding
    model_type, experts = variant.model_type, variant.experts
    defaults = DEFAULTS[model_type]
    d = _int(config, label, "hidden_size")
    h = _int(config, label, "num_attention_heads")
    kv = _int(config, label, "num_key_value_heads", default=h)
    if h % kv:
        raise LandscapeError(f"{label}: num_key_value_heads {kv} does not divide "
                             f"num_attention_heads {h}")  # fmt: skip
    # an explicit head_dim may differ from d / heads (the projections' shapes are checked)
    e = _int(config, label, "head_dim", default=head_dim)
    e = e or d // _heads(config, label, d, ("num_attention_heads",))
    width = experts.width if experts else "intermediate_size"  # each expert's, in a mixture
    f = _int(config, label, width, **_default(defaults, width))
    n_layers = _int(config, label, "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    n_ctx = _int(config, label, "max_position_embeddings",
                 default=defaults["max_position_embeddings"])  # fmt: skip
    qkv_bias, o_bias, mlp_bias, unread = read_biases(config, label, model_type)
    windows, ignored_config = _layer_windows(config, label, n_layers, n_ctx, sliding, defaults)
    ignored_config += unread
    theta = _rope_theta(config, label, default=defaults["rope_theta"])
    n_experts, top_k, norm_top_k = _read_experts(config, label, experts, n_layers, defaults)
    # Llama rotates the whole head whatever partial_rotary_factor says (its default rotary
    # ignores the field), so the field is recorded as ignored rather than applied.
    places = (config, config.get("rope_scaling") or {}, config.get("rope_parameters") or {})
    partial = any(r.get("partial_rotary_factor") not in (None, 1) for r in places)
    ignored_config += ["partial_rotary_factor"] if partial and not partial_rotary else []
    rotary_dim = 0
    if partial_rotary:
        rotary_dim = _rotary_dim(config, label, e, "partial_rotary_factor",
                                 defaults["partial_rotary_factor"])  # fmt: skip
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
        act=_act(config, label, "hidden_act", "silu"),
        eps=_num(config, label, "rms_norm_eps", eps),
        pos="rotary",
        rotary_base=theta,
        rotary_dim=rotary_dim,
        n_kv_heads=0 if kv == h else kv,
        mlp="gated",
        bias=qkv_bias or o_bias or mlp_bias,
        block=block,
        qk_norm=qk_norm,
        windows=windows,
        n_experts=n_experts,
        top_k=top_k,
        norm_top_k=norm_top_k,
    )
    t = src.take
    zeros = lambda *shape: torch.zeros(shape, dtype=src.dtype)  # noqa: E731
    pre = _prefix(src, ("embed_tokens.weight", "norm.weight"), ("model.", ""))
    _layers(src, label, f"{pre}layers.", n_layers, "num_hidden_layers")
    # LlamaConfig does not tie by default
    tied, w_e = _embedding(config, src, label, f"{pre}embed_tokens.weight", (vocab, d), False)
    p: Params = {"embed.W_E": w_e}
    for layer in range(n_layers):
        s, b = f"{pre}layers.{layer}.", f"blocks.{layer}."
        if block_layout(block).norm_in:
            p[f"{b}ln1.w"] = t(f"{s}input_layernorm.weight", (d,))
            p[f"{b}ln2.w"] = t(f"{s}post_attention_layernorm.weight", (d,))
        else:
            p[f"{b}ln1_post.w"] = t(f"{s}post_attention_layernorm.weight", (d,))
            p[f"{b}ln2_post.w"] = t(f"{s}post_feedforward_layernorm.weight", (d,))
        if qk_norm != "none":
            for m, n in (("q", h), ("k", kv)):
                shape = (e,) if qk_norm == "head" else (n * e,)
                gain = t(f"{s}self_attn.{m}_norm.weight", shape)
                p[f"{b}attn.{m}_norm.w"] = gain if qk_norm == "head" else gain.reshape(n, e)
        for m, n in (("Q", h), ("K", kv), ("V", kv)):
            name = f"{s}self_attn.{m.lower()}_proj"
            p[f"{b}attn.W_{m}"] = _heads_in(t(f"{name}.weight", (n * e, d)), n, e)
            if cfg.bias:
                bias = t(f"{name}.bias", (n * e,)).reshape(n, e) if qkv_bias else zeros(n, e)
                p[f"{b}attn.b_{m}"] = bias
        p[f"{b}attn.W_O"] = _heads_out(t(f"{s}self_attn.o_proj.weight", (d, h * e)), h, e)
        if experts:  # the router and experts have no biases (zeros where attention has some)
            moe = f"{s}{experts.stem}."
            p[f"{b}mlp.W_router"] = t(f"{moe}gate.weight", (n_experts, d)).T.contiguous()
            for ours, theirs, shape in zip(("W_gate", "W_in", "W_out"), experts.names,
                                           ((f, d), (f, d), (d, f)), strict=True):  # fmt: skip
                p[f"{b}mlp.{ours}"] = torch.stack([
                    t(f"{moe}experts.{e}.{theirs}.weight", shape).T for e in range(n_experts)
                ])  # fmt: skip
            if cfg.bias:
                p[f"{b}mlp.b_router"] = zeros(n_experts)
                for name, size in (("in", f), ("gate", f), ("out", d)):
                    p[f"{b}mlp.b_{name}"] = zeros(n_experts, size)
        else:
            for ours, theirs, shape in (("W_gate", "gate", (f, d)), ("W_in", "up", (f, d)),
                                        ("W_out", "down", (d, f))):  # fmt: skip
                p[f"{b}mlp.{ours}"] = t(f"{s}mlp.{theirs}_proj.weight", shape).T.contiguous()
                if cfg.bias:
                    b_name = f"{b}mlp.b_{ours[2:]}"
                    p[b_name] = (t(f"{s}mlp.{theirs}_proj.bias", shape[:1]) if mlp_bias
                                 else zeros(shape[0]))  # fmt: skip
        if cfg.bias:
            p[f"{b}attn.b_O"] = t(f"{s}self_attn.o_proj.bias", (d,)) if o_bias else zeros(d)
    p["ln_final.w"] = t(f"{pre}norm.weight", (d,))
    p["unembed.W_U"] = (w_e if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    if cfg.bias:
        p["unembed.b_U"] = zeros(vocab)
    return cfg, p, {"tied_embeddings": tied, "ignored_config": ignored_config}
