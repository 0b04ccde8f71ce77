"""Device choice: CUDA when available, else CPU; overridable everywhere."""

from __future__ import annotations

import torch

from landscape.errors import LandscapeError


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None``/``"auto"`` → CUDA if available else CPU; otherwise the named device, checked."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise LandscapeError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise LandscapeError(f"device {device!r} requested but CUDA is not available here")
    return dev
