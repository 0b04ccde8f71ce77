"""Import Hugging Face checkpoints into the canonical form (DESIGN §3, "Imported checkpoints").

A local directory with ``config.json`` and safetensors weights (``model.safetensors``, or shards
listed in ``model.safetensors.index.json``) is converted once into a :class:`Checkpoint`: a
:class:`ModelConfig` and a flat dict in the canonical parameter names and shapes. ``config.json``'s
``model_type`` picks the converter:

- ``gpt2`` (GPT2LMHeadModel, GPT2Model): LayerNorm, fused QKV ``Conv1D`` (weights stored
  [in, out], already right-multiplying), learned positions, tied embeddings, biases, GELU (tanh).
- ``llama`` (LlamaForCausalLM, LlamaModel; SmolLM2 and other Llama-architecture models):
  RMSNorm, rotary positions (Hugging Face's half-split layout), grouped-query attention, SwiGLU,
  tied or untied embeddings, no biases.
- ``vit`` (ViTForImageClassification, ViTModel): LayerNorm, conv patch embedding over
  channels × patch², class token, biases. Without a classifier the readout ``W_U`` is the
  identity and the model returns the final-norm class token (``last_hidden_state[:, 0]``); the
  pooler (dense + tanh) is not part of the canonical form and is left out.

Tied embeddings are untied: ``W_U = W_Eᵀ`` as a separate tensor (``meta["tied_embeddings"]``).
Biases a source lacks (Llama attention/MLP, ViT ``qkv_bias=False``, the GPT-2 unembedding) are
zeros, or absent with ``bias=False`` when the model has none at all.

Safety and memory: nothing is ever unpickled (a directory with only ``pytorch_model.bin`` is
refused); tensors are read one at a time through ``safetensors.safe_open`` and converted to
float32 (or the dtype asked for, e.g. bfloat16). A ``.gguf`` file (a directory holding one) is
read through ``transformers`` (needs the ``gguf`` package: ``pip install 'landscape[import]'``),
which dequantises it into a Llama model whose state dict is converted the same way.

Every config field read is type- and range-checked (JSON ``true`` is not a layer count, ``32.0``
not a width), and a field that would change the function is implemented (and tested against
transformers' logits) or refused: rotary scaling of any kind, wherever it is written
(``rope_scaling``, ``rope_parameters``, ``type`` or ``rope_type``); sliding windows shorter than
the context; layer counts that disagree with the weights. Llama ignores ``partial_rotary_factor``
and so does the import (``meta["ignored_config"]``). A tied embedding is found under either name
(a deduplicating saver keeps only ``lm_head.weight``). Shard names in an index stay inside the
checkpoint directory. A GGUF tensor the reader could not load (missing, or of another shape:
it would be filled with random values) is refused.

Every problem is one :class:`LandscapeError` line naming the file and the tensor or field.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig, Params, param_shapes
from landscape.models.zoo import Checkpoint, check_params
from landscape.symmetry import RESID_GROUPS, NormState, resid_needs, spec_for

__all__ = ["SUPPORTED", "import_checkpoint", "inspect_checkpoint"]

DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


# ----------------------------------------------------------------------------- tensor sources


class _Source:
    """Tensors by native name, read one at a time; errors name the file and the tensor."""

    def __init__(self, label: str, dtype: torch.dtype) -> None:
        self.label = label
        self.dtype = dtype
        self.used: set[str] = set()

    def names(self) -> list[str]:
        raise NotImplementedError

    def shape(self, name: str) -> tuple[int, ...]:
        raise NotImplementedError

    def file_of(self, name: str) -> str:
        return self.label

    def _read(self, name: str) -> torch.Tensor:
        raise NotImplementedError

    def has(self, name: str) -> bool:
        return name in self._names_set

    @property
    def _names_set(self) -> set[str]:
        if not hasattr(self, "_cached_names"):
            self._cached_names = set(self.names())
        return self._cached_names

    def take(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """Tensor ``name`` checked against ``shape``, in the target dtype."""
        if not self.has(name):
            raise LandscapeError(f"{self.label}: missing tensor {name}")
        found = tuple(self.shape(name))
        if found != tuple(shape):
            raise LandscapeError(
                f"{self.file_of(name)}: tensor {name} has shape {found}, expected {tuple(shape)}"
            )
        self.used.add(name)
        t = self._read(name)
        if not t.is_floating_point():
            raise LandscapeError(f"{self.file_of(name)}: tensor {name} is not floating point")
        return t.to(self.dtype)

    def close(self) -> None:
        pass


class _SafetensorsSource(_Source):
    """One ``model.safetensors`` or the shards of ``model.safetensors.index.json``."""

    def __init__(self, files: dict[str, Path], label: str, dtype: torch.dtype) -> None:
        from safetensors import safe_open

        super().__init__(label, dtype)
        self._stack = ExitStack()
        self._handles: dict[Path, Any] = {}
        self._where: dict[str, Path] = {}
        keys: dict[Path, set[str]] = {}
        for name, f in files.items():
            if f not in self._handles:
                if not f.is_file():
                    self._stack.close()
                    raise LandscapeError(f"{label}: shard {f.name} is missing (tensor {name})")
                try:
                    self._handles[f] = self._stack.enter_context(safe_open(str(f), "pt"))
                    keys[f] = set(self._handles[f].keys())
                except Exception as e:  # SafetensorError, OSError; one line either way
                    self._stack.close()
                    raise LandscapeError(
                        f"{f}: not a valid safetensors file ({_one_line(e)})"
                    ) from None
            if name not in keys[f]:  # an index naming a tensor its shard lacks
                self._stack.close()
                raise LandscapeError(f"{f}: shard lacks tensor {name} listed in {label}")
            self._where[name] = f

    @classmethod
    def single(cls, f: Path, dtype: torch.dtype) -> _SafetensorsSource:
        from safetensors import safe_open

        try:
            with safe_open(str(f), "pt") as h:
                names = list(h.keys())
        except Exception as e:
            raise LandscapeError(f"{f}: not a valid safetensors file ({_one_line(e)})") from None
        return cls(dict.fromkeys(names, f), str(f), dtype)

    def names(self) -> list[str]:
        return list(self._where)

    def file_of(self, name: str) -> str:
        return str(self._where.get(name, self.label))

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._handles[self._where[name]].get_slice(name).get_shape())

    def _read(self, name: str) -> torch.Tensor:
        try:
            return self._handles[self._where[name]].get_tensor(name)
        except Exception as e:
            raise LandscapeError(
                f"{self.file_of(name)}: cannot read tensor {name} ({_one_line(e)})"
            ) from None

    def close(self) -> None:
        self._stack.close()


class _DictSource(_Source):
    """Tensors already in memory (a state dict from the GGUF reader)."""

    def __init__(self, tensors: dict[str, torch.Tensor], label: str, dtype: torch.dtype) -> None:
        super().__init__(label, dtype)
        self._tensors = tensors

    def names(self) -> list[str]:
        return list(self._tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._tensors[name].shape)

    def _read(self, name: str) -> torch.Tensor:
        return self._tensors[name]


def _open(path: str | os.PathLike, dtype: torch.dtype) -> tuple[dict[str, Any], _Source, str]:
    """(config dict, tensor source, format) for a checkpoint directory or a ``.gguf`` file."""
    p = Path(path)
    if p.is_file() and p.suffix == ".gguf":
        return _open_gguf(p, dtype)
    if p.is_file() and p.suffix == ".safetensors":
        p = p.parent
    if not p.is_dir():
        raise LandscapeError(f"{p}: no such checkpoint directory or .gguf file")
    cfg_file = p / "config.json"
    single, index = p / "model.safetensors", p / "model.safetensors.index.json"
    if not single.is_file() and not index.is_file():
        ggufs = sorted(p.glob("*.gguf"))
        if ggufs:
            return _open_gguf(ggufs[0], dtype)
        pickles = [f.name for f in sorted(p.glob("*.bin")) + sorted(p.glob("*.pt*"))]
        if pickles:
            raise LandscapeError(
                f"{p}: only {pickles[0]} (a pickle) found; refusing to unpickle untrusted data; "
                "convert to safetensors"
            )
        raise LandscapeError(f"{p}: no model.safetensors, model.safetensors.index.json or .gguf")
    if not cfg_file.is_file():
        raise LandscapeError(f"{p}: missing config.json")
    try:
        config = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LandscapeError(f"{cfg_file}: not valid JSON ({_one_line(e)})") from None
    if not isinstance(config, dict):
        raise LandscapeError(f"{cfg_file}: expected a JSON object")
    if single.is_file():
        return config, _SafetensorsSource.single(single, dtype), "safetensors"
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        files = {name: _shard(p, index, shard) for name, shard in weight_map.items()}
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
        raise LandscapeError(f"{index}: not a safetensors index ({_one_line(e)})") from None
    return config, _SafetensorsSource(files, str(index), dtype), "safetensors (sharded)"


def _shard(root: Path, index: Path, shard: Any) -> Path:
    """A shard named by the index, kept inside the checkpoint directory.

    The check is on the name, not the resolved path: a hostile index cannot reach other files
    (``../x``, absolute paths), while shards that are links into a download cache still load, as
    a linked ``model.safetensors`` does.
    """
    if not isinstance(shard, str):
        raise LandscapeError(f"{index}: shard name {_show(shard)} is not a string")
    parts = Path(shard).parts
    if not parts or Path(shard).is_absolute() or ".." in parts or "\\" in shard or ":" in shard:
        raise LandscapeError(
            f"{index}: shard {_show(shard)} is outside the checkpoint directory; refusing it"
        )
    return root / shard


def _open_gguf(f: Path, dtype: torch.dtype) -> tuple[dict[str, Any], _Source, str]:
    """Read a GGUF file through transformers (dequantised); no pickle is involved."""
    try:
        import accelerate  # noqa: F401  (transformers needs both to read GGUF)
        import gguf  # noqa: F401
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise LandscapeError(
            f"{f}: reading GGUF needs the transformers, gguf and accelerate packages "
            "(pip install 'landscape[import]')"
        ) from None
    # The reader fills tensors it cannot load (missing, or of another shape) with random values
    # and logs a multi-line report: the report is silenced and its findings become one error.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            str(f.parent),
            gguf_file=f.name,
            dtype=torch.float32,
            ignore_mismatched_sizes=True,
            output_loading_info=True,
        )
    except Exception as e:
        raise LandscapeError(f"{f}: transformers cannot read this GGUF file ({_one_line(e)})"
                             ) from None  # fmt: skip
    finally:
        hf_logging.set_verbosity(verbosity)
    mismatched = sorted(info.get("mismatched_keys") or ())
    if mismatched:
        name, found, expected = mismatched[0]
        raise LandscapeError(
            f"{f}: tensor {name} has shape {tuple(found)}, expected {tuple(expected)}"
        )
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        raise LandscapeError(f"{f}: missing tensor {missing[0]} (of {len(missing)} missing)")
    config = model.config.to_dict()
    tensors = {k: v.detach() for k, v in model.state_dict().items()}
    return config, _DictSource(tensors, str(f), dtype), "gguf"


# ----------------------------------------------------------------------------- converters


# Every config field a converter reads goes through one of the readers below: a field of the
# wrong type or range is one line naming it, never a TypeError later or a model that quietly
# computes something else (JSON's true is not 1, 32.0 is not a width).

_REQUIRED: Any = object()


def _show(v: Any) -> str:
    s = json.dumps(v, default=str)
    return s if len(s) <= 40 else s[:37] + "..."


def _field(config: dict[str, Any], label: str, keys: tuple[str, ...], default: Any) -> Any:
    """(key, value) of the first of ``keys`` set (aliases must agree); ``None`` when unset."""
    found = [(k, config[k]) for k in keys if config.get(k) is not None]
    if not found:
        if default is _REQUIRED:
            raise LandscapeError(f"{label}: config.json lacks {keys[0]}")
        return None
    for k, v in found[1:]:
        if v != found[0][1] or type(v) is not type(found[0][1]):
            raise LandscapeError(
                f"{label}: {k} {_show(v)} disagrees with {found[0][0]} {_show(found[0][1])}"
            )
    return found[0]


def _int(config: dict[str, Any], label: str, *keys: str, default: Any = _REQUIRED,
         low: int = 1) -> int:  # fmt: skip
    got = _field(config, label, keys, default)
    if got is None:
        return default
    k, v = got
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise LandscapeError(f"{label}: {k} must be an integer >= {low}, got {_show(v)}")
    return v


def _num(config: dict[str, Any], label: str, key: str, default: Any = _REQUIRED) -> float:
    """A positive finite number (norm epsilons, rotary bases)."""
    got = _field(config, label, (key,), default)
    if got is None:
        return float(default)
    v = got[1]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise LandscapeError(f"{label}: {key} must be a positive number, got {_show(v)}")
    return float(v)


def _flag(config: dict[str, Any], label: str, key: str, default: bool) -> bool:
    got = _field(config, label, (key,), default)
    if got is None:
        return default
    if not isinstance(got[1], bool):
        raise LandscapeError(f"{label}: {key} must be true or false, got {_show(got[1])}")
    return got[1]


def _heads(config: dict[str, Any], label: str, d: int, keys: tuple[str, ...]) -> int:
    """Attention heads that split the width ``d`` evenly (d_head = d / heads)."""
    h = _int(config, label, *keys)
    if d % h:
        raise LandscapeError(f"{label}: {keys[0]} {h} does not divide the width {d}")
    return h


def _layers(src: _Source, label: str, stem: str, n_layers: int, key: str) -> None:
    """The file holds exactly ``n_layers`` blocks ``{stem}{i}.``: a smaller count would silently
    drop layers, a larger one is a missing tensor."""
    pattern = re.compile(re.escape(stem) + r"(\d+)\.")
    found = {int(m.group(1)) for n in src.names() if (m := pattern.match(n))}
    count = max(found) + 1 if found else 0
    if count != n_layers:
        raise LandscapeError(
            f"{label}: {key} is {n_layers} but the weights hold {count} layers ({stem}N)"
        )


_ACTS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def _act(config: dict[str, Any], label: str, key: str, default: str) -> str:
    got = _field(config, label, (key,), default)
    name = default if got is None else got[1]
    if not isinstance(name, str) or name not in _ACTS:
        raise LandscapeError(
            f"{label}: unsupported {key} {_show(name)}; supported: {', '.join(_ACTS)}"
        )
    return _ACTS[name]


def _prefix(src: _Source, probes: tuple[str, ...], prefixes: tuple[str, ...]) -> str:
    """The prefix under which the base model is stored (LM-head models nest it); any of
    ``probes`` marks it, since a tied embedding may be stored under the head's name only."""
    for pre in prefixes:
        if any(src.has(pre + probe) for probe in probes):
            return pre
    raise LandscapeError(f"{src.label}: missing tensor {prefixes[0]}{probes[0]}")


def _heads_in(w: torch.Tensor, n: int, e: int) -> torch.Tensor:
    """nn.Linear weight [n·e, d] (y = x·Wᵀ) → [n, d, e]."""
    return w.reshape(n, e, -1).transpose(1, 2).contiguous()


def _heads_out(w: torch.Tensor, n: int, e: int) -> torch.Tensor:
    """nn.Linear weight [d, n·e] → W_O [n, e, d]."""
    return w.T.reshape(n, e, -1).contiguous()


def _gpt2(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _int(config, label, "n_embd", "hidden_size")
    h = _heads(config, label, d, ("n_head", "num_attention_heads"))
    f = _int(config, label, "n_inner", default=4 * d)
    n_layers = _int(config, label, "n_layer", "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    # n_ctx is a legacy alias the model no longer reads: a fallback, not checked against n_positions
    n_ctx = _int(config, label, "n_positions", default=0) or _int(config, label, "n_ctx")
    if _flag(config, label, "scale_attn_by_inverse_layer_idx", False):
        raise LandscapeError(f"{label}: scale_attn_by_inverse_layer_idx is not supported")
    cfg = ModelConfig(
        "gpt",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=vocab,
        n_heads=h,
        d_head=d // h,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="ln",
        act=_act(config, label, "activation_function", "gelu_new"),
        eps=_num(config, label, "layer_norm_epsilon", 1e-5),
        attn_scale=0.0 if _flag(config, label, "scale_attn_weights", True) else 1.0,
    )
    e = cfg.d_head
    pre = _prefix(src, ("wte.weight", "ln_f.weight"), ("transformer.", ""))
    _layers(src, label, f"{pre}h.", n_layers, "n_layer")
    t = src.take
    # GPT2Config ties by default
    tied, w_e = _embedding(config, src, label, f"{pre}wte.weight", (vocab, d), default_tied=True)
    p: Params = {"embed.W_E": w_e, "pos_embed.W_pos": t(f"{pre}wpe.weight", (cfg.n_ctx, d))}
    for layer in range(n_layers):
        s, b = f"{pre}h.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            p[f"{b}{ours}.w"] = t(f"{s}{theirs}.weight", (d,))
            p[f"{b}{ours}.b"] = t(f"{s}{theirs}.bias", (d,))
        qkv = t(f"{s}attn.c_attn.weight", (d, 3 * d))  # Conv1D: [in, out], x·W
        qkv_b = t(f"{s}attn.c_attn.bias", (3 * d,))
        for i, m in enumerate("QKV"):
            w = qkv[:, i * d : (i + 1) * d]
            p[f"{b}attn.W_{m}"] = w.reshape(d, h, e).transpose(0, 1).contiguous()
            p[f"{b}attn.b_{m}"] = qkv_b[i * d : (i + 1) * d].reshape(h, e).clone()
        p[f"{b}attn.W_O"] = t(f"{s}attn.c_proj.weight", (d, d)).reshape(h, e, d)
        p[f"{b}attn.b_O"] = t(f"{s}attn.c_proj.bias", (d,))
        p[f"{b}mlp.W_in"] = t(f"{s}mlp.c_fc.weight", (d, f))
        p[f"{b}mlp.b_in"] = t(f"{s}mlp.c_fc.bias", (f,))
        p[f"{b}mlp.W_out"] = t(f"{s}mlp.c_proj.weight", (f, d))
        p[f"{b}mlp.b_out"] = t(f"{s}mlp.c_proj.bias", (d,))
    p["ln_final.w"] = t(f"{pre}ln_f.weight", (d,))
    p["ln_final.b"] = t(f"{pre}ln_f.bias", (d,))
    p["unembed.W_U"] = (w_e if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    p["unembed.b_U"] = torch.zeros(vocab, dtype=src.dtype)
    return cfg, p, {"tied_embeddings": tied}


def _embedding(
    config: dict[str, Any],
    src: _Source,
    label: str,
    name: str,
    shape: tuple[int, int],
    default_tied: bool,
) -> tuple[bool, torch.Tensor]:
    """(tied, W_E as stored [vocab, d]).

    Tied when the config says so (``default_tied`` when it is silent) or when the file has no
    ``lm_head.weight``. A tied pair written by a deduplicating saver keeps the shared tensor under
    the head's name only, so a tied embedding is read from ``lm_head.weight`` when ``name`` is
    absent. A tied config with both tensors stored and different is refused: readers disagree
    on it (older ones overwrite the head with the embedding, newer ones keep both untied).
    """
    head = "lm_head.weight"
    tied = _flag(config, label, "tie_word_embeddings", default_tied) or not src.has(head)
    if tied and not src.has(name) and src.has(head):
        return True, src.take(head, shape)
    w_e = src.take(name, shape)
    if tied and src.has(head) and not torch.equal(src.take(head, shape), w_e):
        raise LandscapeError(
            f"{label}: tie_word_embeddings is true but {head} differs from {name}; "
            "set tie_word_embeddings to false if the head is separate"
        )
    return tied, w_e


# Keys a rope dict of the default kind may hold; anything else (a factor, original context,
# per-layer-type entries) belongs to a scaling kind this importer does not implement.
_ROPE_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}


def _rope_theta(config: dict[str, Any], label: str) -> float:
    """RoPE base of a Llama config; every scaling kind is refused.

    The scaling may sit in ``rope_scaling`` (older files, kind under ``type`` or ``rope_type``)
    or ``rope_parameters`` (newer files), and the base in either dict or at the top level.
    Readers differ on which place wins, so every place is read: any kind other than default
    anywhere, or two different bases, is refused rather than resolved by a guess.
    """
    thetas: list[tuple[str, Any]] = []
    for where in ("rope_scaling", "rope_parameters"):
        rope = config.get(where)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            raise LandscapeError(f"{label}: {where} must be an object, got {_show(rope)}")
        for key in ("rope_type", "type"):
            if rope.get(key) not in (None, "default"):
                raise LandscapeError(
                    f"{label}: {where}.{key} {_show(rope[key])} is not supported "
                    "(only default rotary positions)"
                )
        extra = sorted(set(rope) - _ROPE_KEYS)
        if extra:
            raise LandscapeError(
                f"{label}: {where}.{extra[0]} is not supported (only default rotary positions)"
            )
        if rope.get("rope_theta") is not None:
            thetas.append((f"{where}.rope_theta", rope["rope_theta"]))
    if config.get("rope_theta") is not None:
        thetas.append(("rope_theta", config["rope_theta"]))
    for key, v in thetas:
        _num({key: v}, label, key)
    for key, v in thetas[1:]:
        if float(v) != float(thetas[0][1]):
            raise LandscapeError(f"{label}: {key} {_show(v)} disagrees with {thetas[0][0]} "
                                 f"{_show(thetas[0][1])}")  # fmt: skip
    return float(thetas[0][1]) if thetas else 10000.0


def _llama(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _int(config, label, "hidden_size")
    h = _int(config, label, "num_attention_heads")
    kv = _int(config, label, "num_key_value_heads", default=h)
    if h % kv:
        raise LandscapeError(f"{label}: num_key_value_heads {kv} does not divide "
                             f"num_attention_heads {h}")  # fmt: skip
    # an explicit head_dim may differ from d / heads (the projections' shapes are checked)
    e = _int(config, label, "head_dim", default=0)
    e = e or d // _heads(config, label, d, ("num_attention_heads",))
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    n_ctx = _int(config, label, "max_position_embeddings", default=2048)
    attn_bias = _flag(config, label, "attention_bias", False)
    mlp_bias = _flag(config, label, "mlp_bias", False)
    window = _int(config, label, "sliding_window", default=0, low=0)  # 0: no window
    if window and window < n_ctx and _flag(config, label, "use_sliding_window", True):
        raise LandscapeError(
            f"{label}: sliding_window {window} is shorter than max_position_embeddings {n_ctx}; "
            "sliding-window attention is not supported"
        )
    kinds = config.get("layer_types")
    if kinds is not None and (not isinstance(kinds, list) or set(kinds) - {"full_attention"}):
        raise LandscapeError(f"{label}: layer_types {_show(kinds)} is not supported "
                             "(only full_attention)")  # fmt: skip
    theta = _rope_theta(config, label)
    # Llama rotates the whole head whatever partial_rotary_factor says (its default rotary
    # ignores the field), so the field is recorded as ignored rather than applied.
    places = (config, config.get("rope_scaling") or {}, config.get("rope_parameters") or {})
    partial = any(r.get("partial_rotary_factor") not in (None, 1) for r in places)
    ignored_config = ["partial_rotary_factor"] if partial else []
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
        eps=_num(config, label, "rms_norm_eps", 1e-6),
        pos="rotary",
        rotary_base=theta,
        n_kv_heads=0 if kv == h else kv,
        mlp="gated",
        bias=attn_bias or mlp_bias,
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
        p[f"{b}ln1.w"] = t(f"{s}input_layernorm.weight", (d,))
        p[f"{b}ln2.w"] = t(f"{s}post_attention_layernorm.weight", (d,))
        for m, n in (("Q", h), ("K", kv), ("V", kv)):
            name = f"{s}self_attn.{m.lower()}_proj"
            p[f"{b}attn.W_{m}"] = _heads_in(t(f"{name}.weight", (n * e, d)), n, e)
            if cfg.bias:
                bias = t(f"{name}.bias", (n * e,)).reshape(n, e) if attn_bias else zeros(n, e)
                p[f"{b}attn.b_{m}"] = bias
        p[f"{b}attn.W_O"] = _heads_out(t(f"{s}self_attn.o_proj.weight", (d, h * e)), h, e)
        for ours, theirs, shape in (("W_gate", "gate", (f, d)), ("W_in", "up", (f, d)),
                                    ("W_out", "down", (d, f))):  # fmt: skip
            p[f"{b}mlp.{ours}"] = t(f"{s}mlp.{theirs}_proj.weight", shape).T.contiguous()
            if cfg.bias:
                b_name = f"{b}mlp.b_{ours[2:]}"
                p[b_name] = (
                    t(f"{s}mlp.{theirs}_proj.bias", shape[:1]) if mlp_bias else zeros(shape[0])
                )
        if cfg.bias:
            o_bias = t(f"{s}self_attn.o_proj.bias", (d,)) if attn_bias else zeros(d)
            p[f"{b}attn.b_O"] = o_bias
    p["ln_final.w"] = t(f"{pre}norm.weight", (d,))
    p["unembed.W_U"] = (w_e if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    if cfg.bias:
        p["unembed.b_U"] = zeros(vocab)
    return cfg, p, {"tied_embeddings": tied, "ignored_config": ignored_config}


def _vit(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _int(config, label, "hidden_size")
    h = _heads(config, label, d, ("num_attention_heads",))
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    size, patch = _int(config, label, "image_size"), _int(config, label, "patch_size")
    channels = _int(config, label, "num_channels", default=3)
    classifier = src.has("classifier.weight")
    n_out = (src.shape("classifier.weight") or (0,))[0] if classifier else d
    cfg = ModelConfig(
        "vit",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=n_out,
        n_heads=h,
        d_head=d // h,
        image_size=size,
        patch_size=patch,
        norm="ln",
        act=_act(config, label, "hidden_act", "gelu"),
        eps=_num(config, label, "layer_norm_eps", 1e-12),
        channels=channels,
    )
    e, t = cfg.d_head, src.take
    pre = _prefix(src, ("embeddings.cls_token",), ("vit.", ""))
    _layers(src, label, f"{pre}encoder.layer.", n_layers, "num_hidden_layers")
    emb = f"{pre}embeddings."
    conv = t(f"{emb}patch_embeddings.projection.weight", (d, channels, patch, patch))
    p: Params = {
        "embed.W_E": conv.reshape(d, cfg.d_in).T.contiguous(),  # channel-major, as patchify
        "embed.b_E": t(f"{emb}patch_embeddings.projection.bias", (d,)),
        "embed.cls": t(f"{emb}cls_token", (1, 1, d)).reshape(d),
        "pos_embed.W_pos": t(f"{emb}position_embeddings", (1, cfg.n_ctx, d)).reshape(cfg.n_ctx, d),
    }
    qkv_bias = _flag(config, label, "qkv_bias", True)
    for layer in range(n_layers):
        s, b = f"{pre}encoder.layer.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "layernorm_before"), ("ln2", "layernorm_after")):
            p[f"{b}{ours}.w"] = t(f"{s}{theirs}.weight", (d,))
            p[f"{b}{ours}.b"] = t(f"{s}{theirs}.bias", (d,))
        for m, theirs in (("Q", "query"), ("K", "key"), ("V", "value")):
            name = f"{s}attention.attention.{theirs}"
            p[f"{b}attn.W_{m}"] = _heads_in(t(f"{name}.weight", (d, d)), h, e)
            bias = t(f"{name}.bias", (d,)) if qkv_bias else torch.zeros(d, dtype=src.dtype)
            p[f"{b}attn.b_{m}"] = bias.reshape(h, e)
        p[f"{b}attn.W_O"] = _heads_out(t(f"{s}attention.output.dense.weight", (d, d)), h, e)
        p[f"{b}attn.b_O"] = t(f"{s}attention.output.dense.bias", (d,))
        p[f"{b}mlp.W_in"] = t(f"{s}intermediate.dense.weight", (f, d)).T.contiguous()
        p[f"{b}mlp.b_in"] = t(f"{s}intermediate.dense.bias", (f,))
        p[f"{b}mlp.W_out"] = t(f"{s}output.dense.weight", (d, f)).T.contiguous()
        p[f"{b}mlp.b_out"] = t(f"{s}output.dense.bias", (d,))
    p["ln_final.w"] = t(f"{pre}layernorm.weight", (d,))
    p["ln_final.b"] = t(f"{pre}layernorm.bias", (d,))
    if classifier:
        p["unembed.W_U"] = t("classifier.weight", (n_out, d)).T.contiguous()
        p["unembed.b_U"] = t("classifier.bias", (n_out,))
        readout = "classifier logits"
    else:
        p["unembed.W_U"] = torch.eye(d, dtype=src.dtype)
        p["unembed.b_U"] = torch.zeros(d, dtype=src.dtype)
        readout = "final-norm class token (identity readout; pooler left out)"
    return cfg, p, {"readout": readout}


Converter = Callable[[dict[str, Any], _Source, str], tuple[ModelConfig, Params, dict]]
SUPPORTED: dict[str, Converter] = {"gpt2": _gpt2, "llama": _llama, "vit": _vit}
_FAMILY = {"gpt2": "GPT-2", "llama": "Llama", "vit": "ViT"}


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
    final-norm class token). ``meta`` records the format, ``tied_embeddings`` and tensors the
    canonical form does not use (``ignored_tensors``, e.g. a ViT pooler).
    Raises :class:`LandscapeError` (one line, naming file and tensor) on any bad input.
    """
    cfg, params, meta = _convert(path, dtype)
    return Checkpoint(cfg, params, meta)


def describe(cfg: ModelConfig, model_type: str = "") -> str:
    """One line describing an imported architecture."""
    family = _FAMILY.get(model_type, "ViT" if cfg.arch == "vit" else "causal LM")
    parts = [
        f"{family}: d={cfg.d_model}, {cfg.n_layers} layers × {cfg.n_heads} heads of {cfg.d_head}",
        f"{'SwiGLU' if cfg.gated else cfg.act.upper()} MLP {cfg.d_mlp}",
        "RMSNorm" if cfg.norm == "rms" else "LayerNorm",
    ]
    if cfg.kv_heads != cfg.n_heads:
        parts.append(f"grouped-query attention ({cfg.kv_heads} key/value heads)")
    parts.append({"rotary": "rotary positions", "learned": "learned positions"}.get(cfg.pos, ""))
    return ", ".join(x for x in parts if x)


def admitted_symmetries(cfg: ModelConfig) -> list[dict[str, Any]]:
    """The gauge groups of ``cfg`` as imported (norm gains kept), read from its spec.

    One entry per residual group level (exact now, or the processing steps that make it exact)
    and per per-layer variable family (kinds admitted, sizes, grouped-query constraint).
    """
    spec = spec_for(cfg)
    state = NormState(cfg.norm, gains_folded=False, biases_folded=cfg.norm != "ln", centred=False)
    out: list[dict[str, Any]] = []
    for group, kind in RESID_GROUPS.items():
        steps = resid_needs(state, kind)
        out.append(
            {
                "variable": "resid",
                "group": group,
                "size": cfg.d_model,
                "exact": not steps,
                "needs": list(steps),
            }
        )
    for family in ("mlp", "heads", "qk", "ov"):
        names = spec.family(family)
        if not names:
            note = {
                "qk": "not declared: rotary positions and grouped-query attention restrict "
                "within-head query/key maps",
                "ov": "not declared: under grouped-query attention the value/output map must be "
                "shared by a key/value group",
            }.get(family, "")
            if cfg.has_attn and note:
                out.append({"variable": family, "exact": False, "note": note})
            continue
        var = spec.variables[names[0]]
        entry: dict[str, Any] = {
            "variable": family,
            "layers": len(names),
            "size": var.size,
            "kinds": list(var.kinds),
            "exact": True,
        }
        if family == "heads" and var.group > 1:
            entry["group"] = var.group
            entry["note"] = (
                f"query heads move with their key/value group of {var.group}; "
                "K/V heads follow the induced group permutation"
            )
        if family == "mlp" and cfg.gated:
            entry["note"] = "signs and scales act on the up projection; the gate is only permuted"
        out.append(entry)
    return out


def inspect_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """What a checkpoint is, without keeping it: JSON-serialisable summary for ``landscape
    inspect PATH``.

    Keys: ``path``, ``format``, ``model_type``, ``architectures``, ``architecture`` (one line),
    ``config`` (canonical :class:`ModelConfig` dict), ``parameters`` (canonical count, untied
    embeddings included), ``source_parameters`` (count in the file), ``tied_embeddings``,
    ``ignored_tensors``, ``ignored_config`` (fields the source model itself ignores, e.g. a Llama
    ``partial_rotary_factor``), ``symmetries`` (:func:`admitted_symmetries`).
    """
    cfg, _, meta = _convert(path, torch.float32)
    return {
        "path": str(path),
        "format": meta["format"],
        "model_type": meta["model_type"],
        "architectures": meta["architectures"],
        "architecture": describe(cfg, meta["model_type"]),
        "config": cfg.to_dict(),
        "parameters": sum(math.prod(s) for s in param_shapes(cfg).values()),
        "source_parameters": meta["source_parameters"],
        "tied_embeddings": bool(meta.get("tied_embeddings", False)),
        "readout": meta.get("readout", "logits"),
        "ignored_tensors": meta["ignored_tensors"],
        "ignored_config": meta.get("ignored_config", []),
        "symmetries": admitted_symmetries(cfg),
    }
