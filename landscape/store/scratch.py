"""Scratch space on disk: tensors that wait in a temporary file while memory is needed."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from landscape.errors import LandscapeError


@contextlib.contextmanager
def kept_on_disk(tensors: dict[str, torch.Tensor], what: str
                 ) -> Iterator[Callable[[], dict[str, torch.Tensor]]]:  # fmt: skip
    """Keep ``tensors`` in a temporary file (under TMPDIR) for the block, so the caller can drop
    its own copy; yields a function that reads a fresh copy back. The file is removed after the
    block; a save that fails (a full disk) is one line naming ``what`` and the directory."""
    with tempfile.TemporaryDirectory(prefix="landscape-") as tmp:
        path = Path(tmp) / "tensors.pt"
        try:
            torch.save(tensors, path)
        except (OSError, RuntimeError) as e:
            raise LandscapeError(
                f"could not keep {what} in a temporary file under {tmp} ({e}); free some space "
                "there or point TMPDIR to another disk"
            ) from None
        del tensors  # this frame would otherwise keep them alive for the whole block
        yield lambda: torch.load(path, weights_only=True)
