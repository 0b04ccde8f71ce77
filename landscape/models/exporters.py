"""Write canonical parameters back in a Hugging Face source's own format (the importers'
inverse), so an aligned or merged model leaves the tool as a checkpoint that transformers, and
any tool built on it, loads.

:func:`export_hf` takes the configuration and parameters (aligned B, or a merge, in the
coordinates the alignment left them: norm gains folded for rotations) and the source directory
they were imported from; it writes ``config.json`` (the source's, with ``tie_word_embeddings``
set to what the tensors are), ``model.safetensors`` in the source's tensor names and layouts and
the tokenizer files beside them. A model the source architecture cannot express is refused
with the reason. Which biases a format holds is read from ``config.json`` as the importers read
it (:data:`landscape.models.importers.defaults.BIASES`): a bias field the family ignores is
ignored here too.

- **GPT-2** (LayerNorm, Conv1D layout): a LayerNorm stream, or one that processing centred into
  RMSNorm while it is still mean-free, where LayerNorm with unit gain equals RMSNorm: after
  permutations and after rotations fixing the mean direction (``--group orth-mean``), written
  with unit gains and the folded norm biases in the readers' biases. Signed permutations and
  other rotations move the mean direction and are refused (:func:`_layernorm_stream`). GPT-2
  has no unembedding bias: one folded there is written through W_U's mean direction, which
  LayerNorm's mean-free output never reads, and a final-norm bias of ones.
- **Llama**, **Mistral**, **Qwen2**, **Qwen3** and **OLMo 2** (RMSNorm, gated MLP, rotary
  positions, grouped-query heads; Qwen2's q/k/v biases; the q/k norm gains of Qwen3, per head,
  and OLMo 2, over all heads; OLMo 2's post-norm blocks): every group the alignment admits. A
  folded gain is written as ones; an unembedding that no longer equals the embedding's
  transpose (a folded final gain) is written as its own ``lm_head.weight``. The q/k norm and
  post-norm gains are never folded (no processing step can), and alignment refuses rotations of
  OLMo 2 before anything is written. A model whose q/k norm or norm placement is not the
  format's is refused.
- **GPT-NeoX / Pythia** (LayerNorm, parallel or sequential blocks, head-interleaved fused
  ``query_key_value``): as GPT-2 (permutations, the global sign and rotations fixing the mean
  direction; signed permutations and other rotations are refused with the reason).
  The unembedding is written as ``embed_out.weight`` unless it is still tied. Each layer also
  gets the causal-mask and rotary buffers older writers stored (:func:`_neox_buffers`), which
  transformers 5 ignores and mergekit's GPT-NeoX definition requires.
- **Phi-3** (the Llama layout with fused ``qkv_proj`` and ``gate_up_proj``): the Llama
  writer's tensors, the projections fused again (q | k | v rows, gate | up rows); no biases.
- **Gemma**, **Gemma 2** and **Gemma 3** text (``gemma``, ``gemma2``, ``gemma3_text``): the
  import's folds undone, gains written as gain − 1 (a folded gain as 0) and ``W_E`` divided by
  the √d it was multiplied by. The head is tied when ``W_Uᵀ·√d`` still equals ``W_E`` bit for
  bit (true after permutations and sign flips), else written as ``lm_head.weight`` with
  ``tie_word_embeddings`` false, which transformers' Gemma classes load as a separate head
  (after a merge, or a rotated Gemma's folded final gain). A width change (``d_norm`` ≠
  ``d_model``), a bias the format lacks or another block layout is refused. Gemma 2 and 3
  admit no rotation (their post norms): alignment refuses it before anything is written.
- **BERT** (LayerNorm after the residual sums; BertForMaskedLM and
  BertForSequenceClassification): permutations and the global sign, the groups a post-LN
  stream admits (no processing changes its norms). The type-0 row the import folded into the
  positions stays there: the written model has one token type, its row zero
  (``type_vocab_size`` 1). A gauged decoder no longer equals the word embedding (the head's
  transform has its own space), so it is written untied. A BertModel (identity readout, pooler
  left out at import) is refused.

A model that came from no Hugging Face directory but has Llama's layout (the zoo's
``llama-shakespeare-d128``) is written as a Llama directory with the configuration
:func:`llama_config` makes for it (``export_hf(…, source=None, config=…)``); the zoo's other
models have no Hugging Face format.

Files are written whole: into a temporary folder beside ``out``, renamed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.importers.defaults import read_biases
from landscape.models.importers.gemma import embed_scale
from landscape.models.layouts import block_layout, layout_of
from landscape.models.params import Params
from landscape.models.registry import architecture_of, describe
from landscape.store.files import new_folder, read_json

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "tokenizer.model",
                   "generation_config.json")  # fmt: skip


def _biases(config: dict[str, Any]) -> tuple[bool, bool, bool, list[str]]:
    """The biases the format has, as transformers reads ``config`` (the importers' table,
    :data:`landscape.models.importers.defaults.BIASES`)."""
    return read_biases(config, "config.json", config["model_type"])


def _gain(params: Params, name: str, d: int, dtype: torch.dtype) -> torch.Tensor:
    """A norm gain, or ones where processing folded it into its readers."""
    return params[name] if name in params else torch.ones(d, dtype=dtype)


# A writer whose rows' mean is below this fraction of its largest entry writes into the
# mean-free subspace (round-off of a rotation fixing 1 stays ~1e-7; any other rotation leaves
# means of the order of the entries themselves)
MEAN_FREE = 1e-5
_WRITERS = ("embed.W_E", "embed.b_E", "pos_embed.W_pos", ".attn.W_O", ".attn.b_O",
            ".mlp.W_out", ".mlp.b_out")  # fmt: skip


def _uncentred_writer(p: Params) -> str | None:
    """The first writer into the stream (last axis d_model) whose rows do not have zero mean."""
    for name, w in p.items():
        if name.endswith(_WRITERS):
            w = w.double()
            if bool(w.mean(-1).abs().max() > MEAN_FREE * (1.0 + float(w.abs().max()))):
                return name
    return None


def _refuse_layernorm(family: str, why: str) -> LandscapeError:
    return LandscapeError(
        f"{family}'s format has LayerNorm only, which equals the RMSNorm of this alignment on a "
        f"mean-free stream only: {why}; align with --group orth-mean (rotations fixing the mean "
        "direction) or --group perm"
    )


def _layernorm_stream(cfg: ModelConfig, p: Params, family: str) -> Params:
    """``p`` as a LayerNorm-only format (GPT-2, GPT-NeoX) holds it, or a one-line refusal.

    A LayerNorm stream is written as it is. A stream that processing centred into RMSNorm
    (``landscape.symmetry.processing.center_writers``) is one too as long as it is still
    mean-free: there LayerNorm subtracts nothing and equals RMSNorm (same ε), so the norms are
    written as LayerNorms with their gains (ones where folded) and biases (zeros where folded
    into the readers' biases). That holds after permutations and after rotations fixing the
    mean direction (``--group orth-mean``), not after sign flips or other rotations, which move
    1: an uncentred writer is refused (and a group that may move 1 before the matching,
    :func:`check_hf_writable`).

    The format has no unembedding bias: one (the final norm's bias folded there) is written
    through W_U's mean direction, which LayerNorm's mean-free output never reads, and a final
    bias of ones, exactly and linearly in (W_U, b_U), so that mergekit's linear merge of two
    written models is the written merge.
    """
    if cfg.norm != "ln":
        if cfg.d_norm != cfg.d_model:
            raise _refuse_layernorm(family, "its norm divides by another width")
        writer = _uncentred_writer(p)
        if writer is not None:
            raise _refuse_layernorm(family, f"the stream is no longer mean-free ({writer})")
    out = dict(p)
    d = cfg.d_model
    like = p["embed.W_E"]
    for name in [f"blocks.{i}.{n}" for i in range(cfg.n_layers) for n in ("ln1", "ln2")] + [
        "ln_final"
    ]:
        out.setdefault(f"{name}.w", torch.ones(d, dtype=like.dtype, device=like.device))
        out.setdefault(f"{name}.b", torch.zeros(d, dtype=like.dtype, device=like.device))
    b_u = out.pop("unembed.b_U", None)
    if b_u is not None and bool(b_u.abs().max() > 0):
        # LayerNorm's output N has zero mean (N·1 = 0), so with a unit final gain a row r added
        # to every row of W_U changes nothing there, and a final bias of ones then adds
        # 1ᵀ·W_U + d·r: r = (b_U − 1ᵀ·W_U)/d writes b_U exactly, linearly in (W_U, b_U), so a
        # merge of two such files is the file of their merge
        if "ln_final.w" in p or bool(out["ln_final.b"].abs().max() > 0):
            raise LandscapeError(f"{family} has no unembedding bias, and this model has one "
                                 "beside its final norm's own gain or bias")  # fmt: skip
        w_u = p["unembed.W_U"].double()  # [d, vocab]
        r = (b_u.double() - w_u.sum(0)) / d
        out["unembed.W_U"] = (w_u + r).to(like.dtype)
        out["ln_final.b"] = torch.ones_like(out["ln_final.b"])
    return out


def _gpt2(cfg: ModelConfig, p: Params, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    p = _layernorm_stream(cfg, p, "GPT-2")
    h, e, d = cfg.n_heads, cfg.d_head, cfg.d_model
    dtype = p["embed.W_E"].dtype
    out = {"transformer.wte.weight": p["embed.W_E"], "transformer.wpe.weight": p["pos_embed.W_pos"]}
    for layer in range(cfg.n_layers):
        s, b = f"transformer.h.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            out[f"{s}{theirs}.weight"] = _gain(p, f"{b}{ours}.w", d, dtype)
            out[f"{s}{theirs}.bias"] = p[f"{b}{ours}.b"]
        # Conv1D: [in, out]; Q | K | V side by side, each head's columns together
        out[f"{s}attn.c_attn.weight"] = torch.cat(
            [p[f"{b}attn.W_{m}"].transpose(0, 1).reshape(d, h * e) for m in "QKV"], dim=1
        )
        out[f"{s}attn.c_attn.bias"] = torch.cat([p[f"{b}attn.b_{m}"].reshape(h * e)
                                                 for m in "QKV"])  # fmt: skip
        out[f"{s}attn.c_proj.weight"] = p[f"{b}attn.W_O"].reshape(h * e, d)
        out[f"{s}attn.c_proj.bias"] = p[f"{b}attn.b_O"]
        out[f"{s}mlp.c_fc.weight"] = p[f"{b}mlp.W_in"]
        out[f"{s}mlp.c_fc.bias"] = p[f"{b}mlp.b_in"]
        out[f"{s}mlp.c_proj.weight"] = p[f"{b}mlp.W_out"]
        out[f"{s}mlp.c_proj.bias"] = p[f"{b}mlp.b_out"]
    out["transformer.ln_f.weight"] = _gain(p, "ln_final.w", d, dtype)
    out["transformer.ln_f.bias"] = p["ln_final.b"]
    _head(out, p, config, "transformer.wte.weight")
    return out


# (block, qk_norm) of the Llama-layout formats that differ from Llama's ("pre", "none")
_LAYOUTS = {"qwen3": ("pre", "head"), "olmo2": ("post", "full")}


def _llama(cfg: ModelConfig, p: Params, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    if cfg.norm != "rms":
        raise LandscapeError(f"{config.get('model_type')}'s format has RMSNorm only")
    block, qk_norm = _LAYOUTS.get(config.get("model_type"), ("pre", "none"))
    if (cfg.block, cfg.qk_norm) != (block, qk_norm):
        raise LandscapeError(
            f"{config.get('model_type')}'s format has block {block!r} and qk_norm {qk_norm!r}; "
            f"this model has {cfg.block!r} and {cfg.qk_norm!r}"
        )
    h, e, d, g = cfg.n_heads, cfg.d_head, cfg.d_model, cfg.kv_heads
    dtype = p["embed.W_E"].dtype
    qkv_bias, o_bias, mlp_bias, _ = _biases(config)
    for name, v in p.items():  # a bias the format has no place for must be zero
        allowed = (
            (qkv_bias and any(f".attn.b_{m}" in name for m in "QKV"))
            or (o_bias and ".attn.b_O" in name)
            or (mlp_bias and ".mlp.b_" in name)
        )
        if name.rsplit(".", 1)[-1].startswith("b_") and not allowed and bool(v.abs().max() > 0):
            raise LandscapeError(f"this {config.get('model_type')} checkpoint has no bias {name}, "
                                 "and the model has one")  # fmt: skip
    out = {"model.embed_tokens.weight": p["embed.W_E"]}
    for layer in range(cfg.n_layers):
        s, b = f"model.layers.{layer}.", f"blocks.{layer}."
        if block_layout(block).norm_in:
            out[f"{s}input_layernorm.weight"] = _gain(p, f"{b}ln1.w", d, dtype)
            out[f"{s}post_attention_layernorm.weight"] = _gain(p, f"{b}ln2.w", d, dtype)
        else:  # OLMo 2: the same name on the attention output, then the MLP output's norm
            out[f"{s}post_attention_layernorm.weight"] = p[f"{b}ln1_post.w"]
            out[f"{s}post_feedforward_layernorm.weight"] = p[f"{b}ln2_post.w"]
        if qk_norm != "none":  # [d_head], or [heads, d_head] flattened as OLMo 2 stores it
            for m in "qk":
                out[f"{s}self_attn.{m}_norm.weight"] = p[f"{b}attn.{m}_norm.w"].reshape(-1)
        for m, n in (("Q", h), ("K", g), ("V", g)):
            name = f"{s}self_attn.{m.lower()}_proj"
            out[f"{name}.weight"] = p[f"{b}attn.W_{m}"].transpose(1, 2).reshape(n * e, d)
            if qkv_bias:
                out[f"{name}.bias"] = p[f"{b}attn.b_{m}"].reshape(n * e)
        out[f"{s}self_attn.o_proj.weight"] = p[f"{b}attn.W_O"].reshape(h * e, d).T
        if o_bias:
            out[f"{s}self_attn.o_proj.bias"] = p[f"{b}attn.b_O"]
        for ours, theirs in (("W_gate", "gate"), ("W_in", "up"), ("W_out", "down")):
            out[f"{s}mlp.{theirs}_proj.weight"] = p[f"{b}mlp.{ours}"].T
            if mlp_bias:
                out[f"{s}mlp.{theirs}_proj.bias"] = p[f"{b}mlp.b_{ours[2:]}"]
    out["model.norm.weight"] = _gain(p, "ln_final.w", d, dtype)
    _head(out, p, config, "model.embed_tokens.weight")
    return out


def _neox(cfg: ModelConfig, p: Params, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    p = _layernorm_stream(cfg, p, "GPT-NeoX")
    if layout_of(cfg).parallel != bool(config.get("use_parallel_residual", True)):
        raise LandscapeError(f"this model's {cfg.block} blocks differ from the source's "
                             "use_parallel_residual")  # fmt: skip
    attn_bias, _, _, _ = _biases(config)
    for name, v in p.items():  # biases the format has no place for must be zero
        no_place = name == "unembed.b_U" or (not attn_bias and ".attn.b_" in name)
        if no_place and bool(v.abs().max() > 0):
            raise LandscapeError(f"this GPT-NeoX has no bias {name}, and the model has one")
    h, e, d = cfg.n_heads, cfg.d_head, cfg.d_model
    dtype = p["embed.W_E"].dtype
    out = {"gpt_neox.embed_in.weight": p["embed.W_E"]}
    for layer in range(cfg.n_layers):
        s, b = f"gpt_neox.layers.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm")):
            out[f"{s}{theirs}.weight"] = _gain(p, f"{b}{ours}.w", d, dtype)
            out[f"{s}{theirs}.bias"] = p[f"{b}{ours}.b"]
        # nn.Linear [out, in]; per head its q, k and v rows in turn (the importer's inverse)
        qkv = torch.stack([p[f"{b}attn.W_{m}"].transpose(1, 2) for m in "QKV"], dim=1)
        out[f"{s}attention.query_key_value.weight"] = qkv.reshape(3 * d, d)
        out[f"{s}attention.dense.weight"] = p[f"{b}attn.W_O"].reshape(h * e, d).T
        if attn_bias:
            qkv_b = torch.stack([p[f"{b}attn.b_{m}"] for m in "QKV"], dim=1)
            out[f"{s}attention.query_key_value.bias"] = qkv_b.reshape(3 * d)
            out[f"{s}attention.dense.bias"] = p[f"{b}attn.b_O"]
        out[f"{s}mlp.dense_h_to_4h.weight"] = p[f"{b}mlp.W_in"].T
        out[f"{s}mlp.dense_h_to_4h.bias"] = p[f"{b}mlp.b_in"]
        out[f"{s}mlp.dense_4h_to_h.weight"] = p[f"{b}mlp.W_out"].T
        out[f"{s}mlp.dense_4h_to_h.bias"] = p[f"{b}mlp.b_out"]
    out.update(_neox_buffers(cfg))
    out["gpt_neox.final_layer_norm.weight"] = _gain(p, "ln_final.w", d, dtype)
    out["gpt_neox.final_layer_norm.bias"] = p["ln_final.b"]
    _head(out, p, config, "gpt_neox.embed_in.weight", "embed_out.weight")
    return out


def _neox_buffers(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The buffers transformers 4 wrote into every GPT-NeoX layer (Pythia's files hold them):
    the causal mask ``attention.bias`` (bool, [1, 1, n_ctx, n_ctx]), ``attention.masked_bias``
    (−1e9) and the rotary ``inv_freq``. transformers 5 recomputes them and ignores the stored
    ones, as the importer does; mergekit's GPT-NeoX definition requires them, so a file without
    them cannot be merged."""
    n, r = cfg.n_ctx, cfg.rotary_dim or cfg.d_head
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n)
    inv_freq = 1.0 / cfg.rotary_base ** (torch.arange(0, r, 2, dtype=torch.float32) / r)
    out = {}
    for layer in range(cfg.n_layers):
        s = f"gpt_neox.layers.{layer}.attention."
        out[f"{s}bias"] = mask
        out[f"{s}masked_bias"] = torch.tensor(-1e9)
        out[f"{s}rotary_emb.inv_freq"] = inv_freq
    return out


def _phi3(cfg: ModelConfig, p: Params, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    out = _llama(cfg, p, config)  # Phi-3 has no biases (BIASES): every one must be zero
    for layer in range(cfg.n_layers):
        a, m = f"model.layers.{layer}.self_attn.", f"model.layers.{layer}.mlp."
        out[f"{a}qkv_proj.weight"] = torch.cat([out.pop(f"{a}{x}_proj.weight") for x in "qkv"])
        out[f"{m}gate_up_proj.weight"] = torch.cat([out.pop(f"{m}{x}_proj.weight")
                                                    for x in ("gate", "up")])  # fmt: skip
    return out


def _gemma(cfg: ModelConfig, p: Params, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Gemma 1/2/3 (module docstring): the inverse of :mod:`landscape.models.importers.gemma`."""
    model_type = config.get("model_type")
    if cfg.norm != "rms" or cfg.d_norm != cfg.d_model:
        raise LandscapeError(f"{model_type}'s format has RMSNorm over the whole width only; this "
                             "model's norm divides by another width (a width change)")  # fmt: skip
    block = "pre" if model_type == "gemma" else "sandwich"
    qk_norm = "head" if model_type == "gemma3_text" else "none"
    if (cfg.block, cfg.qk_norm) != (block, qk_norm):
        raise LandscapeError(
            f"{model_type}'s format has block {block!r} and qk_norm {qk_norm!r}; "
            f"this model has {cfg.block!r} and {cfg.qk_norm!r}"
        )
    h, e, d, g = cfg.n_heads, cfg.d_head, cfg.d_model, cfg.kv_heads
    bias = _biases(config)[0]  # q, k, v and o together
    for name, v in p.items():  # a bias the format has no place for must be zero
        allowed = bias and ".attn.b_" in name
        if name.rsplit(".", 1)[-1].startswith("b_") and not allowed and bool(v.abs().max() > 0):
            raise LandscapeError(f"{model_type} has no bias {name}, and the model has one")
    w_e = p["embed.W_E"]
    dtype = w_e.dtype

    def gain(name: str, n: int = d) -> torch.Tensor:  # Gemma's norms multiply by (1 + w)
        return p[name] - 1 if name in p else torch.zeros(n, dtype=dtype)

    scale = embed_scale(d, dtype)
    w_u = p["unembed.W_U"].T
    tied = bool(torch.equal(w_u * scale, w_e))
    out = {"model.embed_tokens.weight": w_u if tied else w_e / scale}
    for layer in range(cfg.n_layers):
        s, b = f"model.layers.{layer}.", f"blocks.{layer}."
        out[f"{s}input_layernorm.weight"] = gain(f"{b}ln1.w")
        if block_layout(block).norm_out:
            out[f"{s}post_attention_layernorm.weight"] = gain(f"{b}ln1_post.w")
            out[f"{s}pre_feedforward_layernorm.weight"] = gain(f"{b}ln2.w")
            out[f"{s}post_feedforward_layernorm.weight"] = gain(f"{b}ln2_post.w")
        else:
            out[f"{s}post_attention_layernorm.weight"] = gain(f"{b}ln2.w")
        for m, n in (("Q", h), ("K", g), ("V", g)):
            name = f"{s}self_attn.{m.lower()}_proj"
            out[f"{name}.weight"] = p[f"{b}attn.W_{m}"].transpose(1, 2).reshape(n * e, d)
            if bias:  # zeros where the model has none
                out[f"{name}.bias"] = p.get(
                    f"{b}attn.b_{m}", torch.zeros(n, e, dtype=dtype)
                ).reshape(n * e)
        if qk_norm == "head":
            out[f"{s}self_attn.q_norm.weight"] = gain(f"{b}attn.q_norm.w", e)
            out[f"{s}self_attn.k_norm.weight"] = gain(f"{b}attn.k_norm.w", e)
        out[f"{s}self_attn.o_proj.weight"] = p[f"{b}attn.W_O"].reshape(h * e, d).T
        if bias:
            out[f"{s}self_attn.o_proj.bias"] = p.get(f"{b}attn.b_O", torch.zeros(d, dtype=dtype))
        for ours, theirs in (("W_gate", "gate"), ("W_in", "up"), ("W_out", "down")):
            out[f"{s}mlp.{theirs}_proj.weight"] = p[f"{b}mlp.{ours}"].T
    out["model.norm.weight"] = gain("ln_final.w")
    config["tie_word_embeddings"] = tied
    if not tied:
        out["lm_head.weight"] = w_u
    return out


def _head(
    out: dict[str, torch.Tensor],
    p: Params,
    config: dict[str, Any],
    embed: str,
    head: str = "lm_head.weight",
) -> None:
    """Tie the head to the embedding when the tensors still allow it, else write it."""
    w_u = p["unembed.W_U"].T
    tied = bool(torch.equal(w_u, out[embed]))
    config["tie_word_embeddings"] = tied
    if not tied:
        out[head] = w_u


def _bert(cfg: ModelConfig, p: Params, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    if not layout_of(cfg).norm_sum or cfg.norm != "ln":
        raise LandscapeError("BERT's format has LayerNorm after the residual sums only")
    heads = {"mlm": "BertForMaskedLM", "pooler": "BertForSequenceClassification"}
    if cfg.head not in heads:
        raise LandscapeError(
            "a BertModel is imported with an identity readout and without its pooler, which its "
            "format cannot hold once gauged: write BertForMaskedLM or "
            "BertForSequenceClassification checkpoints"
        )
    named = (config.get("architectures") or [heads[cfg.head]])[0]
    if named != heads[cfg.head]:
        raise LandscapeError(f"the source is a {named}; this model has a {heads[cfg.head]} head")
    h, e, d = cfg.n_heads, cfg.d_head, cfg.d_model
    dtype = p["embed.W_E"].dtype
    emb = "bert.embeddings."
    # the canonical positions carry the type-0 row; the written model has that one type, zero
    out = {f"{emb}word_embeddings.weight": p["embed.W_E"],
           f"{emb}position_embeddings.weight": p["pos_embed.W_pos"],
           f"{emb}token_type_embeddings.weight": torch.zeros(1, d, dtype=dtype),
           f"{emb}LayerNorm.weight": _gain(p, "ln_embed.w", d, dtype),
           f"{emb}LayerNorm.bias": p["ln_embed.b"]}  # fmt: skip
    config["type_vocab_size"] = 1
    for layer in range(cfg.n_layers):
        s, b = f"bert.encoder.layer.{layer}.", f"blocks.{layer}."
        for m, theirs in (("Q", "query"), ("K", "key"), ("V", "value")):
            out[f"{s}attention.self.{theirs}.weight"] = (
                p[f"{b}attn.W_{m}"].transpose(1, 2).reshape(h * e, d)
            )
            out[f"{s}attention.self.{theirs}.bias"] = p[f"{b}attn.b_{m}"].reshape(h * e)
        out[f"{s}attention.output.dense.weight"] = p[f"{b}attn.W_O"].reshape(h * e, d).T
        out[f"{s}attention.output.dense.bias"] = p[f"{b}attn.b_O"]
        for ours, theirs in (("ln1", "attention.output.LayerNorm"), ("ln2", "output.LayerNorm")):
            out[f"{s}{theirs}.weight"] = _gain(p, f"{b}{ours}.w", d, dtype)
            out[f"{s}{theirs}.bias"] = p[f"{b}{ours}.b"]
        out[f"{s}intermediate.dense.weight"] = p[f"{b}mlp.W_in"].T
        out[f"{s}intermediate.dense.bias"] = p[f"{b}mlp.b_in"]
        out[f"{s}output.dense.weight"] = p[f"{b}mlp.W_out"].T
        out[f"{s}output.dense.bias"] = p[f"{b}mlp.b_out"]
    w_u, b_u = p["unembed.W_U"].T, p["unembed.b_U"]
    if cfg.head == "pooler":
        out["bert.pooler.dense.weight"] = p["head.W_in"].T
        out["bert.pooler.dense.bias"] = p["head.b_in"]
        out["classifier.weight"], out["classifier.bias"] = w_u, b_u
        config.setdefault("tie_word_embeddings", True)  # BertConfig's default; no decoder here
        return out
    tr = "cls.predictions.transform."
    out[f"{tr}dense.weight"], out[f"{tr}dense.bias"] = p["head.W_in"].T, p["head.b_in"]
    out[f"{tr}LayerNorm.weight"] = _gain(p, "head.ln.w", d, dtype)
    out[f"{tr}LayerNorm.bias"] = p["head.ln.b"]
    # tied, the decoder is the word embedding and its bias cls.predictions.bias; untied,
    # BertForMaskedLM reads the decoder's own weight and bias (both biases are written)
    tied = bool(torch.equal(w_u, p["embed.W_E"]))
    config["tie_word_embeddings"] = tied
    out["cls.predictions.bias"] = b_u
    if not tied:
        out["cls.predictions.decoder.weight"], out["cls.predictions.decoder.bias"] = w_u, b_u
    return out


EXPORTERS = {"gpt2": _gpt2, "llama": _llama, "mistral": _llama, "qwen2": _llama,
             "qwen3": _llama, "olmo2": _llama, "gpt_neox": _neox, "phi3": _phi3,
             "gemma": _gemma, "gemma2": _gemma, "gemma3_text": _gemma,
             "bert": _bert}  # fmt: skip


def hf_config(source: str | os.PathLike) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face ``source`` directory, refused in one line where
    there is no writer for it: not such a directory, not a JSON object, or a ``model_type``
    with no format here (:data:`EXPORTERS`)."""
    src = Path(source)
    if src.suffix == ".gguf" or not (src / "config.json").is_file():
        raise LandscapeError(f"{src}: not a Hugging Face directory with config.json (a .gguf "
                             "source is written in the landscape format instead)")  # fmt: skip
    config = read_json(src / "config.json")
    if not isinstance(config, dict):
        raise LandscapeError(f"{src / 'config.json'}: expected a JSON object")
    model_type = config.get("model_type")
    if model_type not in EXPORTERS:
        raise LandscapeError(f"writing model_type {model_type!r} is not supported; "
                             f"supported: {', '.join(EXPORTERS)}")  # fmt: skip
    return config


def llama_config(cfg: ModelConfig) -> dict[str, Any]:
    """The Llama ``config.json`` of a model that came from no Hugging Face directory (a zoo
    model) but has Llama's layout: a causal language model over tokens, pre-norm RMSNorm over
    the whole width, rotary positions over whole heads with one base, a SiLU-gated MLP, no
    biases, plain attention and a linear head (the zoo's ``llama-shakespeare-d128``). Written
    with :func:`export_hf`, transformers' LlamaForCausalLM computes its logits. Anything else
    is refused in one line naming the first thing Llama's format lacks: the zoo's GPTs
    (RMSNorm with learned positions, which no Hugging Face family has) and ViTs (images)."""
    arch = architecture_of(cfg)
    needs = [
        (arch.inputs == "tokens" and arch.causal and arch.readout == "every position",
         "a causal language model over tokens"),
        (cfg.norm == "rms" and cfg.d_norm == cfg.d_model, "RMSNorm over the whole width"),
        (cfg.pos == "rotary" and cfg.rotary_dim in (0, cfg.d_head) and not cfg.rotary_bases,
         "rotary positions over whole heads (not learned positions)"),
        (cfg.mlp == "gated" and cfg.act == "silu", "a SiLU-gated MLP"),
        (not cfg.moe, "one MLP a block (no mixture of experts)"),
        (not cfg.bias, "no biases"),
        (cfg.block == "pre" and cfg.qk_norm == "none" and cfg.head == "linear",
         "pre-norm blocks without q/k norms and a linear head"),
        (cfg.attn_scale == 0.0 and cfg.attn_softcap == 0.0 and cfg.logit_softcap == 0.0
         and not cfg.windows, "plain attention (no scale, soft-cap or windows of its own)"),
    ]  # fmt: skip
    for ok, what in needs:
        if not ok:
            raise LandscapeError(f"a model without a Hugging Face source is written in Llama's "
                                 f"format, which needs {what}; this model is a "
                                 f"{describe(cfg)}")  # fmt: skip
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "vocab_size": cfg.d_vocab, "hidden_size": cfg.d_model,
            "intermediate_size": cfg.d_mlp, "num_hidden_layers": cfg.n_layers,
            "num_attention_heads": cfg.n_heads, "num_key_value_heads": cfg.kv_heads,
            "head_dim": cfg.d_head, "hidden_act": "silu", "max_position_embeddings": cfg.n_ctx,
            "rms_norm_eps": cfg.eps, "rope_theta": cfg.rotary_base,
            "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False}  # fmt: skip


def hf_tensors(cfg: ModelConfig, params: Params, config: dict[str, Any]
               ) -> dict[str, torch.Tensor]:  # fmt: skip
    """``params`` as the tensors of ``config``'s format (its names and layouts; ``config`` from
    :func:`hf_config`), or a one-line refusal naming what the format cannot hold (module
    docstring)."""
    if cfg.moe:  # no writer lays out experts (Mixtral's format is read, not written)
        raise LandscapeError(f"writing a mixture of experts ({cfg.n_experts} experts a block) "
                             f"in {config['model_type']}'s format is not supported")  # fmt: skip
    return EXPORTERS[config["model_type"]](cfg, params, config)


LAYERNORM_FORMATS = {"gpt2": "GPT-2", "gpt_neox": "GPT-NeoX"}


def check_hf_writable(cfg: ModelConfig, params: Params, source: str | os.PathLike | None, *,
                      moves_mean: bool = False,
                      config: dict[str, Any] | None = None
                      ) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """Refuse, writing nothing, what :func:`export_hf` would refuse for ``params`` in the format of
    ``source``: the same two steps (:func:`hf_config`, :func:`hf_tensors`); else the config.json and
    the tensor names it would write (what a mergekit definition must hold). Called before an
    alignment with B processed for its group, so that a model or group the format cannot hold is
    refused before the matching, not after it. ``moves_mean``: the group's elements need not fix the
    mean direction (signed permutations, O(d)), which a LayerNorm format cannot hold once processing
    centred the stream into RMSNorm. ``config``: the format's configuration instead of the source's
    (:func:`llama_config`)."""
    config = dict(config) if config is not None else hf_config(source)
    family = LAYERNORM_FORMATS.get(config["model_type"])
    if family is not None and moves_mean and cfg.norm != "ln":
        raise _refuse_layernorm(family, "this alignment's group moves the mean direction")
    return config, list(hf_tensors(cfg, params, config))


def export_hf(
    cfg: ModelConfig,
    params: Params,
    source: str | os.PathLike | None,
    out: str | os.PathLike,
    *,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``params`` as a checkpoint of the Hugging Face ``source`` directory's family in
    ``out`` (module docstring); returns what was written. ``out`` must not exist yet.
    ``config``: the configuration to write instead of the source's (a model with no source,
    :func:`llama_config`; no tokenizer files then)."""
    from safetensors.torch import save_file

    if source is None and config is None:
        raise LandscapeError("a model without a Hugging Face source needs the format's config")
    src, dst = (None if source is None else Path(source)), Path(out)
    config = dict(config) if config is not None else hf_config(src)
    if dst.exists() or dst.is_symlink():
        raise LandscapeError(f"{dst} exists; choose a new folder")
    if not dst.parent.is_dir():
        raise LandscapeError(f"{dst.parent} does not exist")
    model_type = config["model_type"]
    tensors = hf_tensors(cfg, params, config)
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    # written whole into a folder of this call's own, then renamed: never another's, never half
    with new_folder(dst) as tmp:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        copied = [f for f in TOKENIZER_FILES if src is not None and (src / f).is_file()]
        for f in copied:
            shutil.copy2(src / f, tmp / f)
    return {"path": str(dst), "format": "safetensors", "model_type": model_type,
            "tensors": len(tensors), "tied_embeddings": config["tie_word_embeddings"],
            "tokenizer_files": copied}  # fmt: skip
