"""GGUF files, read through transformers (needs the ``gguf`` and ``accelerate`` packages:
``pip install 'landscape[import]'``), which dequantises them into a Llama model whose state dict
is then converted like a safetensors checkpoint. No pickle is involved. A tensor the reader could
not load (missing, or of another shape: it would be filled with random values) is refused.

Before transformers sees a file, its header, metadata and tensor table are read and bounded
(:mod:`.gguf_header`): metadata arrays against the memory budget, the model's sizes against the
tensors the file holds. transformers' lazy imports are not thread-safe (two app sessions loading
at once can see a half-imported module), so every call into transformers here holds one lock,
and an ImportError raised inside it is reported as what it is, not as a missing package.

A GGUF file also carries its model's tokenizer (vocabulary, merges, special tokens).
:func:`gguf_tokenizer` extracts it once into the cache as a ``tokenizer.json``, so text for a
GGUF model is encoded with the ids it was trained on (:mod:`landscape.data.text`); the stored
copy is checked against the file's tokenizer metadata on every read.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.importers.common import _DictSource, _one_line, _Source
from landscape.models.importers.gguf_header import check_model, read_header
from landscape.store.files import read_json
from landscape.store.paths import cache_root

# transformers imports its parts lazily on first use, and two threads doing that at once can
# fail with an ImportError from a half-initialised module: one call into it at a time
_TRANSFORMERS_LOCK = threading.RLock()


def _packages(f: Path, *names: str) -> None:
    """Refuse in one line when a package the GGUF reader needs is not installed (checked
    without importing it, so an ImportError raised later is not mistaken for this)."""
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        raise LandscapeError(
            f"{f}: reading GGUF needs the {', '.join(missing)} package"
            f"{'s' if len(missing) > 1 else ''} (pip install 'landscape[import]')"
        )


def _import_failed(f: Path, e: ImportError) -> LandscapeError:
    return LandscapeError(
        f"{f}: transformers failed to import one of its own modules ({_one_line(e)})"
    )


def open_gguf(f: Path, dtype: torch.dtype) -> tuple[dict[str, Any], _Source, str]:
    """Read a GGUF file through transformers (dequantised), after bounding its header
    (module docstring); no pickle is involved."""
    _packages(f, "transformers", "gguf", "accelerate")
    check_model(read_header(f))
    with _TRANSFORMERS_LOCK, _quiet_transformers(f, "transformers cannot read this GGUF file"):
        from transformers import AutoModelForCausalLM

        # The reader fills tensors it cannot load (missing, or of another shape) with random
        # values and logs a multi-line report: the report is silenced and its findings become
        # one error.
        model, info = AutoModelForCausalLM.from_pretrained(
            str(f.parent),
            gguf_file=f.name,
            dtype=torch.float32,
            ignore_mismatched_sizes=True,
            output_loading_info=True,
        )
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


def _stored(out: Path, source: str) -> str | None:
    """The tokenizer JSON stored at ``out`` if it was extracted from tokenizer metadata whose
    digest is ``source`` and is whole; None otherwise (missing, truncated, swapped for another
    file's, edited), and the caller extracts it again."""
    if not out.exists():
        return None
    try:
        doc = read_json(out)
    except LandscapeError:  # unreadable, not a regular file, truncated, too large
        return None
    if not isinstance(doc, dict) or doc.get("gguf_tokenizer") != source:
        return None
    text = doc.get("tokenizer")
    if not isinstance(text, str) or _digest(text) != doc.get("sha256"):
        return None
    return text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _extract(f: Path) -> str:
    """The tokenizer stored in ``f`` as tokenizer.json text, converted by transformers."""
    _packages(f, "transformers", "gguf")
    with _quiet_transformers(f, "its tokenizer cannot be read"):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name
                                             ).backend_tokenizer.to_str()  # fmt: skip


@contextlib.contextmanager
def _quiet_transformers(f: Path, failure: str) -> Iterator[None]:
    """A block that calls into transformers for ``f``: its logging at errors only, an
    ImportError raised inside it reported as a failed import (:func:`_import_failed`), any
    other error one line naming ``f`` and ``failure``."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError as e:
        raise _import_failed(f, e) from None
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    except LandscapeError:
        raise
    except ImportError as e:
        raise _import_failed(f, e) from None
    except Exception as e:
        raise LandscapeError(f"{f}: {failure} ({_one_line(e)[:160]})") from None
    finally:
        hf_logging.set_verbosity(verbosity)


def gguf_tokenizer(f: Path) -> tuple[str | None, str]:
    """``(tokenizer.json text, what it is)`` for the tokenizer stored in the GGUF file ``f``;
    ``(None, why)`` when the file stores none.

    Extracted once through transformers and kept in the cache root under the digest of the
    file's tokenizer metadata (``tokenizers/gguf-<digest>.json``, written whole: a temporary
    file renamed), with that digest and the text's own sha256: a stored copy that does not
    match (truncated, another file's, edited) is extracted again, never used. A tokenizer that
    cannot be extracted is a LandscapeError, never a quiet fallback to other ids.
    """
    header = read_header(f)  # bounded before transformers builds anything from it
    if not header.has_tokenizer:
        return None, f"{f.name} stores no tokenizer"
    source = header.tokenizer_digest
    out = cache_root() / "tokenizers" / f"gguf-{source}.json"
    what = f"the tokenizer stored in {f.name}"
    with _TRANSFORMERS_LOCK:  # one extraction at a time; a second caller reads the first's
        text = _stored(out, source)
        if text is None:
            text = _extract(f)
            doc = {"gguf_tokenizer": source, "sha256": _digest(text), "tokenizer": text}
            tmp = out.with_name(f"{out.name}.tmp{os.getpid()}-{threading.get_ident()}")
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(doc))
                os.replace(tmp, out)
            except OSError:  # not kept (a full disk, a read-only cache): extracted next time
                tmp.unlink(missing_ok=True)
    return text, what
