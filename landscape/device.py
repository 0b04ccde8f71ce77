"""Device choice: CUDA when available, else CPU; overridable everywhere."""

from __future__ import annotations

import os
import platform

import torch

from landscape.errors import LandscapeError

CPU = torch.device("cpu")  # the default of library functions: devices come resolved (CLI, app)


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None``/``"auto"`` → CUDA if available else CPU; otherwise the named device, checked:
    cpu, cuda or cuda:N (N below this machine's count of CUDA devices), and mps where this
    machine has it. Anything else is a one-line error here, before any work and before a cached
    result could be served labelled with a device that never ran it."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda", "mps"):
        raise LandscapeError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise LandscapeError(f"device {device!r} requested but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise LandscapeError(f"device {device!r} requested but this machine has "
                                 f"{torch.cuda.device_count()} CUDA device(s)")  # fmt: skip
    if dev.type == "mps" and not (torch.backends.mps.is_available()):
        raise LandscapeError(f"device {device!r} requested but MPS (Apple's GPU) is not "
                             "available here")  # fmt: skip
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise LandscapeError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto")
    return dev


def _cpu_identity() -> tuple[str, str]:
    """(vendor, widest vector extension) of this CPU, from /proc/cpuinfo where there is one.

    Math libraries dispatch on both: the same instruction set takes other code paths on another
    vendor's CPU, so two machines round alike only when both agree.
    """
    vendor, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id":
                    vendor = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        return platform.machine() or "unknown", "unknown"
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "baseline"
    return vendor, isa


def kernel_fingerprint() -> dict[str, str]:
    """What decides how CPU training rounds: the torch build, the kernel set ATen dispatches to
    (``ATEN_CPU_CAPABILITY`` can lower it), the BLAS's own dispatch (``MKL_CBWR`` pins it) and
    the CPU's vendor and widest vector extension.

    Training is bit-identical between two runs only when the fingerprints are equal; across
    fingerprints it agrees within :data:`landscape.sources.zoo.REPRODUCIBLE_METRICS` (README,
    "Training is seeded").
    """
    vendor, isa = _cpu_identity()
    return {
        "torch": torch.__version__,
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "cpu_vendor": vendor,
        "cpu_isa": isa,
    }
