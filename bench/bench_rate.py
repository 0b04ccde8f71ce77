"""The forward's rate: barrier-curve evaluation in GFLOP/s against the machine's sgemm.

For each model (zoo seeds 0 and 1, the test split as ``data_of`` gives it): a 5-point curve
through ``evaluate_path`` with the library's own batching, at 1 thread and at the thread
count :func:`landscape.threads.choose_threads` picks for the model's width. The FLOPs are those
of every call torch's flop counter knows (matmuls, convolutions) plus the CPU's fused attention
(``4·B·H·Tq·Tk·D``, counted in full even where causal masking lets the kernel skip blocks),
counted once in the same process. Columns:

- **GFLOP/s per thread**: counted FLOPs / median seconds / threads;
- **share of sgemm**: that rate over a 1024² float32 sgemm on one thread, timed in the same
  process (the issue's target is ≥ 0.8);
- **matmuls alone**: every counted call replayed on random tensors of the same shapes, with
  nothing between them (each distinct shape timed and multiplied by how often it occurs), as a
  share of the same sgemm rate: an optimistic ceiling for these shapes on this machine's BLAS
  (the operands stay in cache while one call is timed again and again);
- **forward / matmuls alone**: how much of that ceiling the whole forward reaches (1.0: every
  second of the forward is spent in the counted calls at their own speed).

Medians of ``repeats`` runs after one warm-up. Asserts nothing about time.

    .venv/bin/python bench/bench_rate.py [--models vit-fashion vit-fashion-d256 ...]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import flop_registry

from bench.common import machine_line, sgemm_gflops, table, timed
from landscape import threads as T
from landscape.experiments.evaluation import evaluate_path
from landscape.sources import data_of
from landscape.sources.zoo import get_checkpoint

MODELS = ("vit-fashion", "vit-fashion-d256", "gpt-shakespeare-d128")
POINTS = 5
_SDPA_CPU = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument as its shape and dtype (a leaf of the argument tree)."""

    shape: tuple[int, ...]
    dtype: torch.dtype


def _shape(x: Any) -> Any:
    return TensorSpec(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x


def _fresh(x: Any) -> Any:
    if not isinstance(x, TensorSpec):
        return x
    if x.dtype.is_floating_point:
        return torch.randn(x.shape, dtype=x.dtype)
    return torch.zeros(x.shape, dtype=x.dtype)


class CountedCalls(TorchDispatchMode):
    """Records every call the FLOP count covers, by operator and argument shapes, and its
    FLOPs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()  # by a text key of operator and shapes
        self.flops_of: dict[str, int] = {}
        self.spec_of: dict[str, tuple[Any, Any, Any]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is _SDPA_CPU:
            q, k = args[0], args[1]
            b, h, tq, d = q.shape
            flops = 4 * b * h * tq * k.shape[-2] * d
        elif func.overloadpacket in flop_registry:
            flops = flop_registry[func.overloadpacket](*args, **kwargs, out_val=out)
        else:
            return out
        spec = (func, tree_map(_shape, args), tree_map(_shape, kwargs))
        key = repr(spec)
        self.calls[key] += 1
        self.flops_of[key] = int(flops)
        self.spec_of[key] = spec
        return out

    @property
    def flops(self) -> int:
        return sum(n * self.flops_of[k] for k, n in self.calls.items())

    def replay_seconds(self, repeats: int) -> float:
        """Seconds the counted calls take alone: each distinct call timed on random tensors of
        its shapes, times how often the forward made it."""
        total = 0.0
        for key, n in self.calls.items():
            func, args, kwargs = self.spec_of[key]
            a, kw = tree_map(_fresh, args), tree_map(_fresh, kwargs)
            seconds, _ = timed(lambda func=func, a=a, kw=kw: func(*a, **kw), repeats=repeats)
            total += n * seconds
        return total


def curve_job(name: str) -> tuple[int, Callable[[], object]]:
    """(width, a 5-point curve of seeds 0 and 1 on the test split as a function)."""
    a, b = get_checkpoint(name, 0), get_checkpoint(name, 1)
    test = data_of(a).evaluation("test")
    cfg, pa, pb = a.cfg, *({k: v.float() for k, v in c.params.items()} for c in (a, b))
    return cfg.d_model, lambda: evaluate_path(cfg, pa, pb, test.inputs, test.targets, POINTS)


def run(models: tuple[str, ...] = MODELS, repeats: int = 3) -> tuple[str, list[dict[str, Any]]]:
    """The rate table as text, and its rows."""
    before = torch.get_num_threads()
    rows, out = [], []
    try:
        with T.using(1):
            sgemm = sgemm_gflops()
        for name in models:
            width, job = curve_job(name)
            with T.using(1):
                counter = CountedCalls()
                with counter:
                    job()
                flops = counter.flops
                alone = counter.replay_seconds(repeats)
            for n in sorted({1, T.choose_threads(width)}):
                with T.using(n):
                    seconds, _ = timed(job, repeats)
                per_thread = flops / seconds / n / 1e9
                row = {"model": name, "threads": n, "seconds": seconds, "gflop": flops / 1e9,
                       "gflops_per_thread": per_thread, "share_of_sgemm": per_thread / sgemm,
                       "matmuls_alone_share": flops / alone / 1e9 / sgemm,
                       "forward_over_alone": alone / (seconds * n) if n == 1 else None}  # fmt: skip
                rows.append(row)
                out.append([name, n, f"{seconds:.3f}", f"{flops / 1e9:.1f}",
                            f"{per_thread:.1f}", f"{row['share_of_sgemm']:.2f}",
                            f"{row['matmuls_alone_share']:.2f}",
                            "" if n > 1 else f"{row['forward_over_alone']:.2f}"])  # fmt: skip
    finally:
        torch.set_num_threads(before)
    text = (
        f"1024² sgemm on one thread: {sgemm:.1f} GFLOP/s; {POINTS}-point curves, test split\n"
        + table(
            [
                "model",
                "threads",
                "seconds",
                "GFLOP",
                "GFLOP/s per thread",
                "share of sgemm",
                "matmuls alone",
                "forward / matmuls alone",
            ],
            out,
        )  # fmt: skip
    )
    return text, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    print(run(tuple(args.models), args.repeats)[0])


if __name__ == "__main__":
    main()
