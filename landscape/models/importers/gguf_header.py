"""A GGUF file's header, metadata and tensor table, read and bounded before anything is built.

transformers reads a GGUF file by building a Python object for every metadata entry (a token, a
merge, a score) and then a model of the size the metadata claims, so a small file that lies in
its metadata costs gigabytes and minutes before anything fails. :func:`read_header` walks the
file with plain reads instead and refuses, in one line naming the field, what does not fit:

- the structure: every count, string and array within the file's bytes, every tensor's data
  inside the file and not overlapping another's, known value and tensor types;
- the metadata's arrays against the memory budget (``budget.check_gguf_entries``), counted
  before they are walked;
- :func:`check_model` (the weights' side): the sizes the model is built with
  (``{arch}.block_count``, ``.embedding_length``, ``.vocab_size`` or the token count,
  ``.feed_forward_length``, the attention heads and their width) against the tensors the file
  holds, so the model transformers builds is no larger than the file's own weights.

The tokenizer's identity (:attr:`GGUFHeader.tokenizer_digest`) is a sha256 over the bytes of the
metadata entries transformers builds the tokenizer from.
"""

from __future__ import annotations

import hashlib
import math
import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from landscape.budget import check_gguf_entries
from landscape.errors import LandscapeError

_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
# value type → (struct format, size) of the scalar types
_SCALARS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
            6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}  # fmt: skip
_MAX_DIMS = 4  # GGML_MAX_DIMS
# metadata transformers converts the tokenizer from: its entries, the architecture that picks
# the converter, and the name that can change the architecture (a "mistral" llama)
_TOKENIZER_KEYS = ("general.architecture", "general.name")


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[int, ...]  # GGUF order: dims[0] is the row length (a Linear's input width)
    kind: int  # GGML tensor type
    start: int  # byte offset in the file
    nbytes: int

    @property
    def rows(self) -> int:
        """The outer size: a Linear weight's output features, an embedding's vocabulary."""
        return self.dims[-1] if len(self.dims) > 1 else self.dims[0]


@dataclass(frozen=True)
class GGUFHeader:
    """What :func:`read_header` found: scalar metadata, array lengths, the tensor table."""

    path: Path
    scalars: dict[str, Any]
    arrays: dict[str, int]  # key → number of entries
    tensors: dict[str, Tensor] = field(repr=False)
    tokenizer_digest: str  # "" when the file stores no tokenizer

    @property
    def architecture(self) -> str:
        arch = self.scalars.get("general.architecture")
        return arch if isinstance(arch, str) else ""

    @property
    def has_tokenizer(self) -> bool:
        return "tokenizer.ggml.model" in self.scalars or "tokenizer.ggml.tokens" in self.arrays


class _Walker:
    """Sequential little-endian reads from a memory map, each checked against its end."""

    def __init__(self, buf: mmap.mmap, label: str) -> None:
        self.buf, self.label, self.pos, self.end = buf, label, 0, len(buf)

    def need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            raise LandscapeError(
                f"{self.label}: {what} needs {n} bytes but the file ends {self.end - self.pos} "
                "bytes later (truncated or not a GGUF file)"
            )

    def scalar(self, kind: int, what: str) -> Any:
        fmt, size = _SCALARS[kind]
        self.need(size, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return v

    def skip_string(self, what: str) -> None:
        n = self.scalar(10, what)
        self.need(n, what)
        self.pos += n

    def string(self, what: str) -> str:
        start = self.pos
        self.skip_string(what)
        raw = self.buf[start + 8 : self.pos]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise LandscapeError(f"{self.label}: {what} is not UTF-8") from None


def _show_key(key: str) -> str:
    return key if len(key) <= 60 and key.isprintable() else repr(key[:57]) + "..."


def read_header(f: str | os.PathLike) -> GGUFHeader:
    """The header of the GGUF file ``f``, bounded (module docstring); one LandscapeError line
    naming the file and the field otherwise."""
    path = Path(f)
    label = str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 24:
                raise LandscapeError(f"{label}: not a GGUF file ({size} bytes)")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _read(buf, path, label)
    except OSError as e:
        raise LandscapeError(f"{label}: cannot read ({e.strerror or e})") from None


def _read(buf: mmap.mmap, path: Path, label: str) -> GGUFHeader:
    w = _Walker(buf, label)
    if buf[:4] != _MAGIC:
        raise LandscapeError(f"{label}: not a GGUF file (no GGUF magic)")
    w.pos = 4
    version = w.scalar(4, "the version")
    if version not in (2, 3):
        raise LandscapeError(f"{label}: GGUF version {version} is not supported (2 or 3)")
    n_tensors = w.scalar(10, "the tensor count")
    n_kv = w.scalar(10, "the metadata count")
    # the smallest entry: a key (8-byte length) and a type; a tensor: name, dims, type, offset
    w.need(n_kv * 12, f"{n_kv} metadata entries")
    scalars: dict[str, Any] = {}
    arrays: dict[str, int] = {}
    entries = 0
    digest = hashlib.sha256()
    for _ in range(n_kv):
        start = w.pos
        key = w.string("a metadata key")
        kind = w.scalar(4, f"the type of {_show_key(key)}")
        if kind in _SCALARS:
            scalars[key] = w.scalar(kind, _show_key(key))
        elif kind == _STRING:
            scalars[key] = w.string(_show_key(key))
        elif kind == _ARRAY:
            item = w.scalar(4, f"the entry type of {_show_key(key)}")
            count = w.scalar(10, f"the length of {_show_key(key)}")
            entries += count
            # before the entries are walked: the budget holds them, or one line refuses
            check_gguf_entries(label, _show_key(key), count, entries)
            arrays[key] = count
            if item in _SCALARS:
                w.need(count * _SCALARS[item][1], f"{count} entries of {_show_key(key)}")
                w.pos += count * _SCALARS[item][1]
            elif item == _STRING:
                w.need(count * 8, f"{count} entries of {_show_key(key)}")
                for _ in range(count):
                    w.skip_string(f"an entry of {_show_key(key)}")
            else:
                raise LandscapeError(f"{label}: {_show_key(key)} holds entries of type {item}; "
                                     "not supported (nested arrays)")  # fmt: skip
        else:
            raise LandscapeError(f"{label}: {_show_key(key)} has unknown value type {kind}")
        if key.startswith("tokenizer.") or key in _TOKENIZER_KEYS:
            digest.update(buf[start : w.pos])
    w.need(n_tensors * 24, f"{n_tensors} tensor entries")
    table: list[tuple[str, tuple[int, ...], int, int]] = []
    for _ in range(n_tensors):
        name = w.string("a tensor name")
        n_dims = w.scalar(4, f"the rank of tensor {_show_key(name)}")
        if n_dims > _MAX_DIMS:
            raise LandscapeError(f"{label}: tensor {_show_key(name)} has {n_dims} dimensions "
                                 f"(at most {_MAX_DIMS})")  # fmt: skip
        dims = tuple(w.scalar(10, f"the shape of {_show_key(name)}") for _ in range(n_dims))
        kind = w.scalar(4, f"the type of {_show_key(name)}")
        offset = w.scalar(10, f"the offset of {_show_key(name)}")
        table.append((name, dims, kind, offset))
    align = scalars.get("general.alignment", 32)
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1):
        raise LandscapeError(f"{label}: general.alignment {align!r} is not a power of two")
    data = -(-w.pos // align) * align
    tensors = _tensors(table, data, len(buf), label)
    tokenizer = "tokenizer.ggml.model" in scalars or "tokenizer.ggml.tokens" in arrays
    return GGUFHeader(path, scalars, arrays, tensors, digest.hexdigest() if tokenizer else "")


def _tensors(
    table: list[tuple[str, tuple[int, ...], int, int]], data: int, size: int, label: str
) -> dict[str, Tensor]:
    """The tensor table with each tensor's bytes, inside the file and disjoint."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # optional package

    out: dict[str, Tensor] = {}
    for name, dims, kind, offset in table:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        except (ValueError, KeyError):
            raise LandscapeError(f"{label}: tensor {_show_key(name)} has unknown type {kind}"
                                 ) from None  # fmt: skip
        count = math.prod(dims)
        if count % block:
            raise LandscapeError(f"{label}: tensor {_show_key(name)} of shape {dims} is not a "
                                 f"whole number of its type's {block}-value blocks")  # fmt: skip
        t = Tensor(name, dims, kind, data + offset, count // block * type_size)
        if t.start + t.nbytes > size:
            raise LandscapeError(f"{label}: tensor {_show_key(name)} ({t.nbytes} bytes at "
                                 f"{t.start}) ends past the file ({size} bytes)")  # fmt: skip
        if name in out:
            raise LandscapeError(f"{label}: tensor {_show_key(name)} is listed twice")
        out[name] = t
    last = None
    for t in sorted(out.values(), key=lambda t: t.start):
        if last is not None and t.start < last.start + last.nbytes and t.nbytes:
            raise LandscapeError(f"{label}: tensors {_show_key(last.name)} and "
                                 f"{_show_key(t.name)} share bytes")  # fmt: skip
        last = t if t.nbytes else last
    return out


_BLOCK = re.compile(r"blk\.(\d+)\.")


def check_model(header: GGUFHeader) -> None:
    """The sizes the model is built with (``{arch}.*`` metadata) are those of the tensors the
    file holds: a block count, FFN width or head count claiming more, or a width or vocabulary
    other than the embedding's, is refused in one line naming the field and the limit."""
    arch, label = header.architecture, str(header.path)
    if not arch:
        raise LandscapeError(f"{label}: general.architecture is missing")
    s, t = header.scalars, header.tensors

    def size(key: str) -> int | None:
        v = s.get(f"{arch}.{key}")
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise LandscapeError(f"{label}: {arch}.{key} must be a count, got {v!r}")
        return v

    def refuse(key: str, value: int, limit: str, how: str = "exceeds") -> None:
        raise LandscapeError(f"{label}: {key} {value} {how} {limit}")

    blocks = {int(m.group(1)) for n in t if (m := _BLOCK.match(n))}
    n_blocks = size("block_count")
    if n_blocks is not None and n_blocks > len(blocks):
        refuse(f"{arch}.block_count", n_blocks,
               f"the {len(blocks)} blocks whose tensors the file holds")  # fmt: skip
    embed = t.get("token_embd.weight")
    if embed is not None and len(embed.dims) == 2:
        d, vocab = embed.dims
        width = size("embedding_length")
        if width is not None and width != d:
            refuse(f"{arch}.embedding_length", width, f"token_embd.weight's width {d}",
                   "does not match")  # fmt: skip
        v = size("vocab_size")
        key = f"{arch}.vocab_size"
        if v is None and "tokenizer.ggml.tokens" in header.arrays:  # transformers' fallback
            v, key = header.arrays["tokenizer.ggml.tokens"], "the tokenizer.ggml.tokens count"
        if v is not None and v != vocab:
            refuse(key, v, f"token_embd.weight's {vocab} rows", "does not match")
    ffn = [x for x in (t.get(f"blk.{i}.ffn_up.weight") for i in sorted(blocks)[:1]) if x]
    f = size("feed_forward_length")
    if f is not None and ffn and f > ffn[0].rows:
        refuse(f"{arch}.feed_forward_length", f, f"{ffn[0].name}'s {ffn[0].rows} rows")
    first = min(blocks) if blocks else 0
    q = t.get(f"blk.{first}.attn_q.weight") or t.get(f"blk.{first}.attn_qkv.weight")
    k = t.get(f"blk.{first}.attn_k.weight") or t.get(f"blk.{first}.attn_qkv.weight")
    # the fields transformers may take as a head's width, by architecture
    widths = [(f"{arch}.{w}", x) for w in ("rope.dimension_count", "attention.key_length")
              if (x := size(w))]  # fmt: skip
    for key, n, w in (("attention.head_count", size("attention.head_count"), q),
                      ("attention.head_count_kv", size("attention.head_count_kv"), k)):  # fmt: skip
        if not n or w is None:
            continue
        if n > w.rows:
            refuse(f"{arch}.{key}", n, f"{w.name}'s {w.rows} rows")
        for width_key, e in widths:
            if n * e > w.rows:
                refuse(f"{arch}.{key} {n} × {width_key}", e, f"{w.name}'s {w.rows} rows")
