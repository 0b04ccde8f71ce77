"""What every importer shares: tensor sources, checked config readers, shared conversions.

A source gives tensors by their native name, one at a time, and checks each against the shape
the converter expects (:class:`_Source.take`); errors name the file and the tensor. Every config
field a converter reads goes through a reader here (``_int``, ``_num``, ``_flag``, ``_act``,
``_heads``): a field of the wrong type or range is one line naming it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.params import Params

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
        super().__init__(label, dtype)
        self._stack = ExitStack()
        self._handles: dict[Path, Any] = {}
        self._where: dict[str, Path] = {}
        self._layouts: dict[Path, tuple[int, dict[str, Any]]] = {}
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
        f = self._where[name]
        try:
            got = _read_plain(f, self._layouts.setdefault(f, _layout(f)), name)
            return self._handles[f].get_tensor(name) if got is None else got
        except Exception as e:
            raise LandscapeError(
                f"{self.file_of(name)}: cannot read tensor {name} ({_one_line(e)})"
            ) from None

    def close(self) -> None:
        self._stack.close()


# safetensors dtype codes read with plain file reads (others go through safe_open)
_PLAIN_DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16,
                 "F16": torch.float16, "I64": torch.int64, "I32": torch.int32,
                 "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8}  # fmt: skip


def _layout(f: Path) -> tuple[int, dict[str, Any]]:
    """(offset of the data, the header's entries) of a safetensors file (already validated by
    safe_open: an 8-byte little-endian header length, the JSON header, then the data)."""
    with open(f, "rb") as h:
        n = int.from_bytes(h.read(8), "little")
        return 8 + n, json.loads(h.read(n))


def _read_plain(f: Path, layout: tuple[int, dict[str, Any]], name: str) -> torch.Tensor | None:
    """Tensor ``name`` of ``f`` read into fresh memory with plain file reads; None for a dtype
    (or a byte order) this reader leaves to safe_open.

    safe_open maps the whole file and copies each tensor out of the map, and every page it
    touches stays resident in this process until the file is closed: reading a large checkpoint
    through it holds the file's size in file-backed memory on top of the converted tensors. A
    plain read goes through the page cache without mapping it, so the process holds only the
    tensors it keeps.
    """
    start, header = layout
    entry = header[name]
    dtype = _PLAIN_DTYPES.get(entry["dtype"])
    if dtype is None or sys.byteorder != "little":  # the file is little-endian
        return None
    lo, hi = entry["data_offsets"]
    shape = tuple(entry["shape"])
    out = torch.empty(shape, dtype=dtype)
    if hi - lo != out.numel() * out.element_size():
        raise ValueError(f"{hi - lo} bytes stored for shape {shape} of {entry['dtype']}")
    if hi > lo:
        with open(f, "rb", buffering=0) as h:
            h.seek(start + lo)
            view = memoryview(out.view(-1).view(torch.uint8).numpy())
            done = 0
            while done < len(view):
                got = h.readinto(view[done:])
                if not got:
                    raise ValueError("the file ends inside the tensor")
                done += got
    return out


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


class _PartsSource(_Source):
    """``base`` with fused tensors also readable as their parts, so that a converter written for
    separate projections reads a fused layout (Phi-3's ``qkv_proj`` and ``gate_up_proj`` as the
    Llama ``q_proj``, ``k_proj``, ... ).

    ``parts[name] = (fused, fused_shape, start, stop)``: part ``name`` is rows ``start:stop`` of
    tensor ``fused``, which is checked against ``fused_shape`` (errors name the fused tensor, the
    one in the file) and counted as used in ``base``.
    """

    def __init__(self, base: _Source, parts: dict[str, tuple[str, tuple[int, ...], int, int]]):
        super().__init__(base.label, base.dtype)
        self.base, self.parts = base, parts
        self.used = base.used  # what the import reports as read is what the file holds
        self._last: tuple[str, torch.Tensor] | None = None  # the parts of one tensor come in a row

    def names(self) -> list[str]:
        return self.base.names()

    def shape(self, name: str) -> tuple[int, ...]:
        return self.base.shape(name)

    def file_of(self, name: str) -> str:
        return self.base.file_of(name)

    def has(self, name: str) -> bool:
        return self.base.has(self.parts[name][0] if name in self.parts else name)

    def take(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        if name not in self.parts:
            return self.base.take(name, shape)
        fused, fused_shape, start, stop = self.parts[name]
        if self._last is None or self._last[0] != fused:
            self._last = (fused, self.base.take(fused, fused_shape))
        part = self._last[1][start:stop]
        assert tuple(part.shape) == tuple(shape), (name, part.shape, shape)
        return part


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


# ----------------------------------------------------------------------------- config readers


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


# No size, count or length a converter reads comes near this (widths, vocabularies, context
# lengths and windows of real models are below 2**24); a larger value is a broken or hostile
# config, refused by name before any tensor shape or allocation is derived from it.
INT_LIMIT = 2**31 - 1


def _int(config: dict[str, Any], label: str, *keys: str, default: Any = _REQUIRED,
         low: int = 1, high: int = INT_LIMIT) -> int:  # fmt: skip
    got = _field(config, label, keys, default)
    if got is None:
        return default
    k, v = got
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise LandscapeError(f"{label}: {k} must be an integer >= {low}, got {_show(v)}")
    if v > high:
        raise LandscapeError(f"{label}: {k} {_show(v)} is larger than {high}")
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


def _encoder_attention(
    src: _Source, s: str, b: str, attention: str, d: int, h: int, qkv_bias: bool = True
) -> Params:
    """The attention of one layer of a BERT-style encoder (BERT, ViT): query, key and value
    under ``{s}{attention}.`` (``attention.self`` in BERT, ``attention.attention`` in ViT) and the
    output projection under ``{s}attention.output.dense``, in canonical names under ``b``.
    ``qkv_bias=False``: the model has no q/k/v biases, read as zeros."""
    t, e = src.take, d // h
    p: Params = {}
    for m, theirs in (("Q", "query"), ("K", "key"), ("V", "value")):
        name = f"{s}{attention}.{theirs}"
        p[f"{b}attn.W_{m}"] = _heads_in(t(f"{name}.weight", (d, d)), h, e)
        bias = t(f"{name}.bias", (d,)) if qkv_bias else torch.zeros(d, dtype=src.dtype)
        p[f"{b}attn.b_{m}"] = bias.reshape(h, e)
    p[f"{b}attn.W_O"] = _heads_out(t(f"{s}attention.output.dense.weight", (d, d)), h, e)
    p[f"{b}attn.b_O"] = t(f"{s}attention.output.dense.bias", (d,))
    return p


def _encoder_mlp(src: _Source, s: str, b: str, d: int, f: int) -> Params:
    """The FFN of one layer of a BERT-style encoder: ``{s}intermediate.dense`` in,
    ``{s}output.dense`` out, in canonical names under ``b``."""
    t = src.take
    return {
        f"{b}mlp.W_in": t(f"{s}intermediate.dense.weight", (f, d)).T.contiguous(),
        f"{b}mlp.b_in": t(f"{s}intermediate.dense.bias", (f,)),
        f"{b}mlp.W_out": t(f"{s}output.dense.weight", (d, f)).T.contiguous(),
        f"{b}mlp.b_out": t(f"{s}output.dense.bias", (d,)),
    }


def _embedding(
    config: dict[str, Any],
    src: _Source,
    label: str,
    name: str,
    shape: tuple[int, int],
    default_tied: bool,
    head: str = "lm_head.weight",
) -> tuple[bool, torch.Tensor]:
    """(tied, W_E as stored [vocab, d]).

    Tied when the config says so (``default_tied`` when it is silent). An untied config whose
    file has no ``head`` (``lm_head.weight``; GPT-NeoX files name it ``embed_out.weight``, BERT
    ``cls.predictions.decoder.weight``) is refused: transformers builds that model with a
    randomly initialised head, whose logits no import can give. A tied pair written by a
    deduplicating saver keeps the shared tensor under the head's name only, so a tied embedding
    is read from ``head`` when ``name`` is absent. A tied config with both tensors stored and
    different is refused: readers disagree on it (older ones overwrite the head with the
    embedding, newer ones keep both untied).
    """
    tied = _flag(config, label, "tie_word_embeddings", default_tied)
    if not tied and not src.has(head):
        said = ("is false" if config.get("tie_word_embeddings") is not None
                else "is absent (false for this family)")  # fmt: skip
        raise LandscapeError(
            f"{label}: tie_word_embeddings {said} but the file has no {head}: transformers "
            "would use a randomly initialised head; set tie_word_embeddings to true if the head "
            "is the embedding"
        )
    if tied and not src.has(name) and src.has(head):
        return True, src.take(head, shape)
    w_e = src.take(name, shape)
    if tied and src.has(head) and not torch.equal(src.take(head, shape), w_e):
        raise LandscapeError(
            f"{label}: tie_word_embeddings is true but {head} differs from {name}; "
            "set tie_word_embeddings to false if the head is separate"
        )
    return tied, w_e


# A converter: (config.json as a dict, its tensors, the label errors name) → (config, canonical
# parameters, metadata of the import).
Converter = Callable[[dict[str, Any], _Source, str], tuple[ModelConfig, Params, dict]]
