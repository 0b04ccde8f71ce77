"""Run a peer's module as ``__main__`` with its CUDA placements mapped to the CPU.

    python bench/peer_on_cpu.py MODULE [ARGS ...]

The module is imported first (its imports, the bulk of a short run's wall time) and then run;
the run alone is timed and its seconds said on stderr as the last line,
``peer_on_cpu: ran in S s after imports``.

mergekit's aligner places every tensor on CUDA by name (``.cuda()``, ``device="cuda"``, a
safetensors file opened on ``"cuda"``), so on a machine without CUDA it stops at its first
tensor. Where CUDA is missing this launcher maps those placements to the CPU
(``torch.Tensor.to``, ``torch.Tensor.cuda``, ``safetensors.safe_open``) and then runs the module
unchanged; where CUDA is present it changes nothing. Only where tensors live changes, never
what is computed (the peer computes in float32 either way). Nothing of the peer is copied here.
"""

from __future__ import annotations

import importlib
import runpy
import sys
import time

import torch

RAN = "peer_on_cpu: ran in"


def _on_cpu(device: object) -> object:
    cuda = (isinstance(device, str) and device.startswith("cuda")) or (
        isinstance(device, torch.device) and device.type == "cuda"
    )
    return "cpu" if cuda else device


def map_cuda_to_cpu() -> None:
    """Every CUDA placement of torch tensors and safetensors files goes to the CPU."""
    import safetensors

    to, safe_open = torch.Tensor.to, safetensors.safe_open

    def moved(self: torch.Tensor, *args: object, **kw: object) -> torch.Tensor:
        if "device" in kw:
            kw["device"] = _on_cpu(kw["device"])
        return to(self, *(_on_cpu(a) for a in args), **kw)

    def opened(path: str, framework: str, device: object = "cpu") -> object:
        return safe_open(path, framework=framework, device=_on_cpu(device))

    torch.Tensor.to = moved
    torch.Tensor.cuda = lambda self, *args, **kw: self
    safetensors.safe_open = opened


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/peer_on_cpu.py MODULE [ARGS ...]")
    if not torch.cuda.is_available():
        map_cuda_to_cpu()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    importlib.import_module(module)
    t0 = time.perf_counter()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        print(f"{RAN} {time.perf_counter() - t0:.6f} s after imports", file=sys.stderr)
