"""GGUF files, read through transformers (needs the ``gguf`` and ``accelerate`` packages:
``pip install 'landscape[import]'``), which dequantises them into a Llama model whose state dict
is then converted like a safetensors checkpoint. No pickle is involved. A tensor the reader could
not load (missing, or of another shape: it would be filled with random values) is refused.
"""

from __future__ import annotations

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
