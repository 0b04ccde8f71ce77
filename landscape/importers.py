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

Every problem is one :class:`LandscapeError` line naming the file and the tensor.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig, Params, param_shapes
from landscape.symmetry import RESID_GROUPS, NormState, resid_needs, spec_for
from landscape.zoo import Checkpoint, check_params

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
        for name, f in files.items():
            if f not in self._handles:
                if not f.is_file():
                    raise LandscapeError(f"{label}: shard {f.name} is missing (tensor {name})")
                try:
                    self._handles[f] = self._stack.enter_context(safe_open(str(f), "pt"))
                except Exception as e:  # SafetensorError, OSError; one line either way
                    self._stack.close()
                    raise LandscapeError(
                        f"{f}: not a valid safetensors file ({_one_line(e)})"
                    ) from None
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
        files = {name: p / shard for name, shard in weight_map.items()}
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        raise LandscapeError(f"{index}: not a safetensors index ({_one_line(e)})") from None
    return config, _SafetensorsSource(files, str(index), dtype), "safetensors (sharded)"


def _open_gguf(f: Path, dtype: torch.dtype) -> tuple[dict[str, Any], _Source, str]:
    """Read a GGUF file through transformers (dequantised); no pickle is involved."""
    try:
        import gguf  # noqa: F401  (transformers needs it to read GGUF)
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise LandscapeError(
            f"{f}: reading GGUF needs the transformers and gguf packages "
            "(pip install 'landscape[import]')"
        ) from None
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(f.parent), gguf_file=f.name, dtype=torch.float32
        )
    except Exception as e:
        raise LandscapeError(f"{f}: transformers cannot read this GGUF file ({_one_line(e)})"
                             ) from None  # fmt: skip
    config = model.config.to_dict()
    tensors = {k: v.detach() for k, v in model.state_dict().items()}
    return config, _DictSource(tensors, str(f), dtype), "gguf"


# ----------------------------------------------------------------------------- converters


def _get(config: dict[str, Any], label: str, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if config.get(k) is not None:
            return config[k]
    if default is None:
        raise LandscapeError(f"{label}: config.json lacks {keys[0]}")
    return default


_ACTS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def _act(name: str, label: str) -> str:
    if name not in _ACTS:
        raise LandscapeError(f"{label}: unsupported activation {name!r}; supported: {list(_ACTS)}")
    return _ACTS[name]


def _prefix(src: _Source, probe: str, prefixes: tuple[str, ...]) -> str:
    """The prefix under which ``probe`` is stored (LM-head models nest the base model)."""
    for pre in prefixes:
        if src.has(pre + probe):
            return pre
    raise LandscapeError(f"{src.label}: missing tensor {prefixes[0]}{probe}")


def _heads_in(w: torch.Tensor, n: int, e: int) -> torch.Tensor:
    """nn.Linear weight [n·e, d] (y = x·Wᵀ) → [n, d, e]."""
    return w.reshape(n, e, -1).transpose(1, 2).contiguous()


def _heads_out(w: torch.Tensor, n: int, e: int) -> torch.Tensor:
    """nn.Linear weight [d, n·e] → W_O [n, e, d]."""
    return w.T.reshape(n, e, -1).contiguous()


def _gpt2(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _get(config, label, "n_embd", "hidden_size")
    h = _get(config, label, "n_head", "num_attention_heads")
    f = _get(config, label, "n_inner", default=4 * d)
    n_layers = _get(config, label, "n_layer", "num_hidden_layers")
    vocab = _get(config, label, "vocab_size")
    if config.get("scale_attn_by_inverse_layer_idx"):
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
        n_ctx=_get(config, label, "n_positions", "n_ctx"),
        norm="ln",
        act=_act(config.get("activation_function", "gelu_new"), label),
        eps=config.get("layer_norm_epsilon", 1e-5),
        attn_scale=0.0 if config.get("scale_attn_weights", True) else 1.0,
    )
    e = cfg.d_head
    pre = _prefix(src, "wte.weight", ("transformer.", ""))
    t = src.take
    p: Params = {
        "embed.W_E": t(f"{pre}wte.weight", (vocab, d)),
        "pos_embed.W_pos": t(f"{pre}wpe.weight", (cfg.n_ctx, d)),
    }
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
    tied = _tied(config, src)
    p["unembed.W_U"] = (p["embed.W_E"] if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    p["unembed.b_U"] = torch.zeros(vocab, dtype=src.dtype)
    return cfg, p, {"tied_embeddings": tied}


def _tied(config: dict[str, Any], src: _Source) -> bool:
    """Whether the unembedding is the token embedding: transformers ties them whenever the config
    says so (a stored ``lm_head.weight`` is then overwritten), and a file without one is tied."""
    return bool(config.get("tie_word_embeddings")) or not src.has("lm_head.weight")


def _rope_theta(config: dict[str, Any], label: str) -> float:
    rope = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    kind = rope.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind != "default":
        raise LandscapeError(f"{label}: rotary scaling {kind!r} is not supported (only default)")
    return float(config.get("rope_theta") or rope.get("rope_theta") or 10000.0)


def _llama(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _get(config, label, "hidden_size")
    h = _get(config, label, "num_attention_heads")
    kv = _get(config, label, "num_key_value_heads", default=h)
    e = _get(config, label, "head_dim", default=d // h)
    f = _get(config, label, "intermediate_size")
    n_layers = _get(config, label, "num_hidden_layers")
    vocab = _get(config, label, "vocab_size")
    attn_bias, mlp_bias = bool(config.get("attention_bias")), bool(config.get("mlp_bias"))
    partial = float(config.get("partial_rotary_factor") or 1.0)
    cfg = ModelConfig(
        "gpt",
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=vocab,
        n_heads=h,
        d_head=e,
        d_vocab=vocab,
        n_ctx=_get(config, label, "max_position_embeddings", default=2048),
        norm="rms",
        act=_act(config.get("hidden_act", "silu"), label),
        eps=config.get("rms_norm_eps", 1e-6),
        pos="rotary",
        rotary_base=_rope_theta(config, label),
        rotary_dim=0 if partial == 1.0 else int(e * partial),
        n_kv_heads=0 if kv == h else kv,
        mlp="gated",
        bias=attn_bias or mlp_bias,
    )
    t = src.take
    zeros = lambda *shape: torch.zeros(shape, dtype=src.dtype)  # noqa: E731
    pre = _prefix(src, "embed_tokens.weight", ("model.", ""))
    p: Params = {"embed.W_E": t(f"{pre}embed_tokens.weight", (vocab, d))}
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
    tied = _tied(config, src)
    p["unembed.W_U"] = (p["embed.W_E"] if tied else t("lm_head.weight", (vocab, d))).T.contiguous()
    if cfg.bias:
        p["unembed.b_U"] = zeros(vocab)
    return cfg, p, {"tied_embeddings": tied}


def _vit(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    d = _get(config, label, "hidden_size")
    h = _get(config, label, "num_attention_heads")
    f = _get(config, label, "intermediate_size")
    n_layers = _get(config, label, "num_hidden_layers")
    size, patch = _get(config, label, "image_size"), _get(config, label, "patch_size")
    channels = _get(config, label, "num_channels", default=3)
    classifier = src.has("classifier.weight")
    n_out = src.shape("classifier.weight")[0] if classifier else d
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
        act=_act(config.get("hidden_act", "gelu"), label),
        eps=config.get("layer_norm_eps", 1e-12),
        channels=channels,
    )
    e, t = cfg.d_head, src.take
    pre = _prefix(src, "embeddings.cls_token", ("vit.", ""))
    emb = f"{pre}embeddings."
    conv = t(f"{emb}patch_embeddings.projection.weight", (d, channels, patch, patch))
    p: Params = {
        "embed.W_E": conv.reshape(d, cfg.d_in).T.contiguous(),  # channel-major, as patchify
        "embed.b_E": t(f"{emb}patch_embeddings.projection.bias", (d,)),
        "embed.cls": t(f"{emb}cls_token", (1, 1, d)).reshape(d),
        "pos_embed.W_pos": t(f"{emb}position_embeddings", (1, cfg.n_ctx, d)).reshape(cfg.n_ctx, d),
    }
    qkv_bias = config.get("qkv_bias", True)
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
        if model_type not in SUPPORTED:
            raise LandscapeError(
                f"{label}: unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED)}"
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
    ``ignored_tensors``, ``symmetries`` (:func:`admitted_symmetries`).
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
        "symmetries": admitted_symmetries(cfg),
    }
