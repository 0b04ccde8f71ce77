"""Import Hugging Face checkpoints into the canonical form (docs/design.md §3).

A local directory with ``config.json`` and safetensors weights (``model.safetensors``, or shards
listed in ``model.safetensors.index.json``) is converted once into a :class:`Checkpoint`: a
:class:`ModelConfig` and a flat dict in the canonical parameter names and shapes. ``config.json``'s
``model_type`` picks the converter, one module per source family:

- ``gpt2`` (:mod:`.gpt2`): GPT2LMHeadModel, GPT2Model.
- ``llama`` (:mod:`.llama`): LlamaForCausalLM, LlamaModel; SmolLM2 and other Llama-architecture
  models.
- ``mistral`` (:mod:`.mistral`) and ``qwen2`` (:mod:`.qwen2`, Qwen2 and Qwen2.5): the Llama
  layout, Qwen2 with query, key and value biases.
- ``mixtral`` (:mod:`.mixtral`): MixtralForCausalLM; the Llama layout without biases, every
  MLP a sparse mixture of SwiGLU experts behind a top-k router (``ModelConfig.n_experts``).
- ``qwen3`` (:mod:`.qwen3`): the Llama layout with a per-head RMSNorm on queries and keys.
- ``qwen3_moe`` (:mod:`.qwen_moe`): Qwen3MoeForCausalLM; Qwen3's layout with every MLP a sparse
  mixture of SwiGLU experts, the routed weights renormalised over the top k or not
  (``norm_topk_prob``, ``ModelConfig.norm_top_k``); dense layers among them are refused, and so
  is ``qwen2_moe`` (Qwen2-MoE: a shared expert beside the routed ones).
- ``olmo2`` (:mod:`.olmo2`, OLMo 2): post-norm blocks (the norms on the attention and MLP
  outputs) and an RMSNorm over all heads' queries and keys.
- ``phi3`` (:mod:`.phi3`): Phi3ForCausalLM; the Llama layout with fused ``qkv_proj`` and
  ``gate_up_proj`` (read as their parts) and ``partial_rotary_factor`` honoured.
- ``gpt_neox`` (:mod:`.gpt_neox`): GPTNeoXForCausalLM, GPTNeoXModel; GPT-NeoX and Pythia.
  LayerNorm with biases, parallel attention and MLP (``use_parallel_residual``), a fused
  head-interleaved ``query_key_value``, rotary positions on part of each head (``rotary_pct``).
- ``gemma``, ``gemma2`` and ``gemma3_text`` (:mod:`.gemma`, one module for the three):
  GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM; (1 + w) norm gains and the √d
  embedding scale folded; Gemma 2 and 3 with norms before and after each sublayer, softcaps and
  sliding windows, Gemma 3 with per-head q/k norms and a rotary base per layer type. The
  multimodal ``gemma3`` is refused.
- ``vit`` (:mod:`.vit`): ViTForImageClassification, ViTModel.
- ``bert`` (:mod:`.bert`): BertForMaskedLM, BertForSequenceClassification, BertModel; norms
  after the residual sums (``block="postln"``), the token-type-0 row folded into the positions.

A ``.gguf`` file (a directory holding one) is read by :mod:`.gguf` into a Llama state dict and
converted the same way, after its header is bounded (:mod:`.gguf_header`: metadata arrays
against the memory budget, the sizes the model is built with against the tensors the file
holds); the tokenizer it stores is extracted once into the cache (checked against the file's
tokenizer metadata on every read), so its text is encoded with the model's own ids. What the
sources share (tensor sources, checked config readers) is :mod:`.common`. Adding a family: one
module with ``MODEL_TYPE``, ``FAMILY`` and ``convert`` (or, for several model types,
``MODEL_TYPES``: model_type → (family, converter), and ``REFUSED``: model_type → why not),
listed in ``_FAMILIES`` below.

Tied embeddings are untied: ``W_U = W_Eᵀ`` as a separate tensor (``meta["tied_embeddings"]``).
Biases a source lacks (Llama attention/MLP, ViT ``qkv_bias=False``, the GPT-2 unembedding) are
zeros, or absent with ``bias=False`` when the model has none at all. Which projections have
biases is read per family as transformers' modeling code reads ``attention_bias`` and
``mlp_bias`` (:data:`.defaults.BIASES`): Mistral, Qwen2, Qwen3, OLMo 2, Phi-3 and the Gemmas
ignore ``mlp_bias``, and so does the import, listing the field in ``meta["ignored_config"]`` and
the bias tensors in ``meta["ignored_tensors"]``.

Safety and memory: nothing is ever unpickled (a directory with only ``pytorch_model.bin`` is
refused); tensors are read one at a time through ``safetensors.safe_open`` and converted to
float32 (or the dtype asked for, e.g. bfloat16).

Every config field read is type- and range-checked (JSON ``true`` is not a layer count, ``32.0``
not a width), and a field that would change the function is implemented (and tested against
transformers' logits) or refused: rotary scaling of any kind, wherever it is written
(``rope_scaling``, ``rope_parameters``, ``type`` or ``rope_type``); sliding windows shorter than
the context in families without sliding attention (Llama, OLMo 2; Mistral, Phi-3, Qwen2/3 and
Gemma apply theirs); layer counts that disagree with the weights. A rotary or sliding-window
field missing from config.json takes transformers' default for that model type
(:mod:`.defaults`, compared with transformers' configuration classes by a test). Llama ignores
``partial_rotary_factor`` and so does the import (``meta["ignored_config"]``); Phi-3 and
GPT-NeoX honour it (NeoX as ``rotary_pct``), and so does the import
(``ModelConfig.rotary_dim``). A tied embedding is found under either name (a deduplicating saver
keeps only ``lm_head.weight``); an untied config (``tie_word_embeddings`` false, or absent where
the family's default is false) whose file has no head is refused, as transformers would give it
a random one. Shard names in an index stay inside the checkpoint directory. A
GGUF tensor the reader could not load (missing, or of another shape: it would be filled with
random values) is refused.

Every problem is one :class:`LandscapeError` line naming the file and the tensor or field.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import torch

from landscape.data.text import (
    NO_TOKENIZER,
    OTHER_TOKENIZER_FILES,
    Tokenizer,
    read_tokenizer_json,
)
from landscape.errors import LandscapeError
from landscape.models.checkpoint import Checkpoint, check_params
from landscape.models.config import ModelConfig
from landscape.models.importers import (
    bert,
    gemma,
    gpt2,
    gpt_neox,
    llama,
    mistral,
    mixtral,
    olmo2,
    phi3,
    qwen2,
    qwen3,
    qwen_moe,
    vit,
)
from landscape.models.importers.common import (
    DTYPES,
    Converter,
    _one_line,
    _SafetensorsSource,
    _shard,
    _show,
    _Source,
)
from landscape.models.importers.gguf import gguf_file, gguf_tokenizer, open_gguf
from landscape.models.params import Params, count_params
from landscape.models.registry import architecture_of
from landscape.models.registry import describe as registry_describe
from landscape.store.files import read_json

__all__ = [
    "DTYPES",
    "SUPPORTED",
    "checkpoint_tokenizer",
    "describe",
    "import_checkpoint",
    "inspect_checkpoint",
    "tokenizer_files",
]

_FAMILIES = (gpt2, llama, mistral, mixtral, qwen2, qwen3, qwen_moe, olmo2, phi3, gpt_neox, gemma,
             vit, bert)  # fmt: skip


def _model_types(module: Any) -> dict[str, tuple[str, Converter]]:
    """model_type → (family, converter) of one importer module."""
    if hasattr(module, "MODEL_TYPES"):
        return module.MODEL_TYPES
    return {module.MODEL_TYPE: (module.FAMILY, module.convert)}


_TYPES = {k: v for m in _FAMILIES for k, v in _model_types(m).items()}
SUPPORTED: dict[str, Converter] = {k: convert for k, (_, convert) in _TYPES.items()}
_FAMILY = {k: family for k, (family, _) in _TYPES.items()}
_REFUSED: dict[str, str] = {k: v for m in _FAMILIES for k, v in getattr(m, "REFUSED", {}).items()}


# ----------------------------------------------------------------------------- sources


def _open(path: str | os.PathLike, dtype: torch.dtype) -> tuple[dict[str, Any], _Source, str]:
    """(config dict, tensor source, format) for a checkpoint directory or a ``.gguf`` file."""
    p = Path(path)
    g = gguf_file(p)  # a .gguf file, or the one a directory without safetensors holds
    if g is not None:
        return open_gguf(g, dtype)
    if p.is_file() and p.suffix == ".safetensors":
        p = p.parent
    if not p.is_dir():
        raise LandscapeError(f"{p}: no such checkpoint directory or .gguf file")
    cfg_file = p / "config.json"
    single, index = p / "model.safetensors", p / "model.safetensors.index.json"
    if not single.is_file() and not index.is_file():
        pickles = [f.name for f in sorted(p.glob("*.bin")) + sorted(p.glob("*.pt*"))]
        if pickles:
            raise LandscapeError(
                f"{p}: only {pickles[0]} (a pickle) found; refusing to unpickle untrusted data; "
                "convert to safetensors"
            )
        raise LandscapeError(f"{p}: no model.safetensors, model.safetensors.index.json or .gguf")
    if not cfg_file.is_file():
        raise LandscapeError(f"{p}: missing config.json")
    config = read_json(cfg_file)
    if not isinstance(config, dict):
        raise LandscapeError(f"{cfg_file}: expected a JSON object")
    if single.is_file():
        return config, _SafetensorsSource.single(single, dtype), "safetensors"
    doc = read_json(index)
    try:
        weight_map = doc["weight_map"]
        files = {name: _shard(p, index, shard) for name, shard in weight_map.items()}
    except (KeyError, TypeError, AttributeError) as e:
        raise LandscapeError(f"{index}: not a safetensors index ({_one_line(e)})") from None
    return config, _SafetensorsSource(files, str(index), dtype), "safetensors (sharded)"


# ----------------------------------------------------------------------------- public API


def _convert(
    path: str | os.PathLike, dtype: torch.dtype
) -> tuple[ModelConfig, Params, dict[str, Any]]:
    if dtype not in DTYPES:
        raise LandscapeError(f"dtype {dtype} not supported; expected one of {DTYPES}")
    config, src, fmt = _open(path, dtype)
    label = str(Path(path) / "config.json") if fmt.startswith("safetensors") else src.label
    try:
        model_type = config.get("model_type")
        if isinstance(model_type, str) and model_type in _REFUSED:
            raise LandscapeError(f"{label}: {_REFUSED[model_type]}")
        if not isinstance(model_type, str) or model_type not in SUPPORTED:
            shown = repr(model_type) if isinstance(model_type, str) else _show(model_type)
            raise LandscapeError(
                f"{label}: unsupported model_type {shown[:40]}; supported: {', '.join(SUPPORTED)}"
            )
        try:
            cfg, params, meta = SUPPORTED[model_type](config, src, label)
        except ValueError as e:  # ModelConfig's own checks
            raise LandscapeError(f"{label}: {_one_line(e)}") from None
        ignored = sorted(set(src.names()) - src.used)
        source_count = sum(math.prod(src.shape(n)) for n in src.used)
    finally:
        src.close()
    check_params(cfg, params, src.label)
    meta = {
        "name": Path(path).name,
        "source": str(path),
        "format": fmt,
        "model_type": model_type,
        "architectures": config.get("architectures", []),
        **meta,
        "source_parameters": int(source_count),
        "ignored_tensors": ignored,
    }
    return cfg, params, meta


def import_checkpoint(path: str | os.PathLike, dtype: torch.dtype = torch.float32) -> Checkpoint:
    """Convert a local Hugging Face checkpoint (module docstring) into the canonical form.

    ``path``: a directory with ``config.json`` and safetensors weights (single or sharded), a
    ``.gguf`` file, or a directory holding one. Returns a :class:`Checkpoint` whose
    ``forward(cfg, params, x)`` equals the source model's logits (ViT without classifier: the
    final-norm class token; BertModel: the last hidden state). ``meta`` records the format,
    ``tied_embeddings`` and tensors the canonical form does not use (``ignored_tensors``, e.g. a
    ViT pooler).
    Raises :class:`LandscapeError` (one line, naming file and tensor) on any bad input.
    """
    cfg, params, meta = _convert(path, dtype)
    return Checkpoint(cfg, params, meta)


def describe(cfg: ModelConfig, model_type: str = "") -> str:
    """One line describing an imported architecture: the registry's line under the source
    family's name (:func:`landscape.models.registry.describe`)."""
    images = architecture_of(cfg).inputs == "images"
    return registry_describe(cfg, _FAMILY.get(model_type, "ViT" if images else "causal LM"))


def inspect_checkpoint(path: str | os.PathLike) -> tuple[ModelConfig, dict[str, Any]]:
    """What a checkpoint is, without keeping it: its configuration and a JSON-serialisable
    summary (``landscape inspect PATH`` adds the symmetries it admits:
    :func:`landscape.sources.inspection`).

    Keys: ``path``, ``format``, ``model_type``, ``architectures``, ``architecture`` (one line),
    ``config`` (canonical :class:`ModelConfig` dict), ``parameters`` (canonical count, untied
    embeddings included), ``source_parameters`` (count in the file), ``tied_embeddings``,
    ``ignored_tensors``, ``ignored_config`` (fields the source model itself ignores, e.g. a Llama
    ``partial_rotary_factor``), and ``notes`` where the importer rewrote something the reader
    should know (BERT: the token-type-0 row folded into the positions).
    """
    cfg, _, meta = _convert(path, torch.float32)
    return cfg, {
        "path": str(path),
        "format": meta["format"],
        "model_type": meta["model_type"],
        "architectures": meta["architectures"],
        "architecture": describe(cfg, meta["model_type"]),
        "config": cfg.to_dict(),
        "parameters": count_params(cfg),
        "source_parameters": meta["source_parameters"],
        "tied_embeddings": bool(meta.get("tied_embeddings", False)),
        "readout": meta.get("readout", "logits"),
        "ignored_tensors": meta["ignored_tensors"],
        "ignored_config": meta.get("ignored_config", []),
        **({"notes": meta["notes"]} if meta.get("notes") else {}),
    }


def checkpoint_tokenizer(checkpoint: str | os.PathLike | None) -> Tokenizer:
    """The tokenizer of a checkpoint, for ``landscape.data.text.token_corpus``: its directory's
    ``tokenizer.json``, else the one a GGUF checkpoint stores (extracted once into the cache;
    an error when it cannot be), else none, saying what was looked for."""
    if checkpoint is None:
        return NO_TOKENIZER
    p = Path(checkpoint)
    d = p.parent if p.is_file() else p
    f = d / "tokenizer.json"
    if f.is_file():
        return read_tokenizer_json(f)
    g = gguf_file(p)
    if g is None:
        others = [n for n in OTHER_TOKENIZER_FILES if (d / n).is_file()]
        why = f"no tokenizer.json ({others[0]} is not read)" if others else "no tokenizer.json"
        return Tokenizer(None, what=why)
    text, what = gguf_tokenizer(g)
    return Tokenizer(text, "gguf" if text is not None else "", what, str(g))


def tokenizer_files(checkpoint: str | os.PathLike | None) -> list[Path]:
    """The files :func:`checkpoint_tokenizer` reads for ``checkpoint`` (its ``tokenizer.json``
    and its GGUF file, or the path itself), for ``landscape.data.text.encoding_sources``."""
    if checkpoint is None:
        return []
    p = Path(checkpoint)
    return [(p.parent if p.is_file() else p) / "tokenizer.json", gguf_file(p) or p]
