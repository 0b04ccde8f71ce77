"""GGUF files, read through transformers (needs the ``gguf`` and ``accelerate`` packages:
``pip install 'landscape[import]'``), which dequantises them into a Llama model whose state dict
is then converted like a safetensors checkpoint. No pickle is involved. A tensor the reader could
not load (missing, or of another shape: it would be filled with random values) is refused.

A GGUF file also carries its model's tokenizer (vocabulary, merges, special tokens).
:func:`gguf_tokenizer` writes it out once as a ``tokenizer.json`` in the cache, so text for a
GGUF model is encoded with the ids it was trained on (:mod:`landscape.data.text`) instead of
bytes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.importers.common import _DictSource, _one_line, _Source


def open_gguf(f: Path, dtype: torch.dtype) -> tuple[dict[str, Any], _Source, str]:
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


def gguf_file(checkpoint: str | os.PathLike) -> Path | None:
    """The GGUF file a checkpoint path names: the file itself, or the first by name in a
    directory without safetensors weights; None otherwise. The importer reads checkpoints and
    the text encoder finds their tokenizer by this one rule."""
    p = Path(checkpoint)
    if p.is_file():
        return p if p.suffix == ".gguf" else None
    if p.is_dir() and not any(
        (p / n).is_file() for n in ("model.safetensors", "model.safetensors.index.json")
    ):
        found = sorted(p.glob("*.gguf"))
        return found[0] if found else None
    return None


def _file_digest(f: Path) -> str:
    h = hashlib.sha256()
    with f.open("rb") as fh:
        while chunk := fh.read(1 << 23):
            h.update(chunk)
    return h.hexdigest()


def gguf_tokenizer(f: Path) -> tuple[Path | None, str]:
    """``(tokenizer.json path, note)`` for the tokenizer stored in the GGUF file ``f``.

    Extracted once through transformers and kept in the cache root under the file's sha256
    (``tokenizers/<digest>.json``), written whole (a temporary file renamed), so a second call
    reads it without transformers. ``(None, why)`` when it cannot be extracted (the reader's
    packages missing, or a file without a tokenizer); the caller then falls back and says so.
    """
    from landscape.store.paths import cache_root

    out = cache_root() / "tokenizers" / f"{_file_digest(f)}.json"
    if out.is_file():
        return out, f"the tokenizer stored in {f.name}"
    try:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError:
        return None, f"{f.name}'s tokenizer needs transformers and gguf to read"
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name)
        backend = tok.backend_tokenizer
    except Exception as e:
        return None, f"{f.name}'s tokenizer could not be read ({_one_line(e)[:120]})"
    finally:
        hf_logging.set_verbosity(verbosity)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    backend.save(str(tmp))
    os.replace(tmp, out)
    return out, f"the tokenizer stored in {f.name}"
