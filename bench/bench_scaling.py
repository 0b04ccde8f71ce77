"""How cost grows: matching against width, barrier evaluation against points and batch size.

Series (one torch thread on the CPU; every point the median of 5 after one warm-up):

- weight matching (group perm) of two random residual MLPs against d_model (d_mlp 256) and
  against d_mlp (d_model 128): seconds per coordinate-descent round (``max_rounds=2``; random
  models would otherwise take a varying number of rounds), solver and similarity on the CPU;
- one learned-matching step (group perm, identity start) against the same widths: the time
  between consecutive ``progress`` calls, which is exactly one projected straight-through update
  (projection by assignment, merged forward and backward, Adam step);
- barrier-curve evaluation (``evaluate_path``) of mlp-digits and vit-digits against the number
  of points (digits test split) and against the batch size (random inputs, 25 points, one batch).

Peak memory per point: resident-set high-water mark above the start on the CPU (reset per run,
see ``common.peak_memory``), ``torch.cuda.max_memory_allocated`` on CUDA. Exponents are
least-squares slopes of log time (and log memory) against log size. A deadline skips the rest
of a series (and says so) rather than overrun.

    .venv/bin/python bench/bench_scaling.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import (
    REPEATS,
    digits_test,
    loglog_exponent,
    machine_line,
    peak_memory,
    random_residual_mlp,
    table,
    timed,
    zoo_pair,
)
from landscape.experiments.context import RunContext
from landscape.experiments.evaluation import EvalOptions, evaluate_path
from landscape.matching import MatchContext, weight_matching
from landscape.matching.learned import learned_matching
from landscape.models import ModelConfig, init_params

WIDTHS = (64, 128, 256, 512, 1024, 2048)
POINTS = (5, 10, 25, 50, 100, 200)
BATCHES = (64, 256, 1024, 4096)


@dataclass
class Series:
    name: str
    size_label: str
    sizes: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    mib: list[float] = field(default_factory=list)
    note: str = ""

    def exponent(self, values: Sequence[float]) -> str:
        pts = [(s, v) for s, v in zip(self.sizes, values, strict=True) if v > 0]
        if len(pts) < 2:
            return "-"
        return f"{loglog_exponent([p[0] for p in pts], [p[1] for p in pts]):.2f}"


class _Split:
    """The digits training split flattened, as learned matching reads it."""

    def __init__(self) -> None:
        from landscape import data

        split = data.digits("train", flat=True)
        self.inputs, self.targets = split.inputs.float(), split.targets


def wm_round_seconds(cfg: ModelConfig, a, b) -> float:
    r = weight_matching(cfg, a, b, "perm", max_rounds=2)
    return r.seconds / r.rounds


def lm_step_seconds(cfg: ModelConfig, a, b, split, device: torch.device) -> float:
    """Median time of one learned-matching step: gaps between ``progress`` calls 1→2 … 4→5
    (step 6, the last, also scores the transform, and step 1 follows the start's scoring)."""
    stamps: list[float] = []

    def stamp(stage: str, done: float, total: float) -> None:
        stamps.append(time.perf_counter())

    learned_matching(
        cfg, a, b, "perm", split, init="identity", steps=6, eval_every=10**6, eval_size=256,
        context=MatchContext(device=device, progress=stamp),
    )  # fmt: skip
    gaps = sorted(stamps[i + 1] - stamps[i] for i in range(4))
    return (gaps[1] + gaps[2]) / 2


def _measure(
    series: Series,
    sizes: Sequence[int],
    make: Callable[[int], Callable[[], object]],
    deadline: float,
    repeats: int,
    device: torch.device,
    per_call: Callable[[object], float] | None = None,
) -> Series:
    """Time (median) and peak memory of ``make(size)()`` for each size until the deadline.

    ``per_call`` turns a call's output into its own time (per round, per step) when the call
    measures itself; otherwise the wall time of the call is used.
    """
    for size in sizes:
        if time.perf_counter() > deadline:
            series.note = f"stopped before {size}: time guard"
            break
        fn = make(size)
        if per_call is None:
            t, _ = timed(fn, repeats)
        else:
            fn()  # warm-up
            t = sorted(per_call(fn()) for _ in range(repeats))[repeats // 2]
        series.sizes.append(size)
        series.seconds.append(t)
        series.mib.append(peak_memory(fn, device).cuda_mib or 0.0)
        if device.type != "cuda":
            series.mib[-1] = peak_memory(fn).host_mib
    return series


def run(
    device: str | torch.device = "cpu",
    widths: Sequence[int] = WIDTHS,
    points: Sequence[int] = POINTS,
    batches: Sequence[int] = BATCHES,
    budget_s: float = 600.0,
    repeats: int = REPEATS,
) -> tuple[str, list[Series]]:
    dev = torch.device(device)
    start = time.perf_counter()
    n_series = 6 + 4
    out: list[Series] = []

    def deadline() -> float:  # an equal share of what is left for each remaining series
        left = budget_s - (time.perf_counter() - start)
        return time.perf_counter() + left / max(1, n_series - len(out))

    def pair(d: int, f: int):
        cfg = random_residual_mlp(d, f)
        return cfg, init_params(cfg, 0), init_params(cfg, 1)

    split = _Split()
    for label, shape in (("d_model", lambda w: (w, 256)), ("d_mlp", lambda w: (128, w))):

        def wm(w: int, shape=shape):
            return partial(wm_round_seconds, *pair(*shape(w)))

        def lm(w: int, shape=shape):
            return partial(lm_step_seconds, *pair(*shape(w)), split, dev)

        s = Series(
            f"weight matching, s/round ({'d_mlp 256' if label == 'd_model' else 'd_model 128'})",
            label,
        )
        out.append(_measure(s, widths, wm, deadline(), repeats, torch.device("cpu"), float))
        s = Series(f"learned matching, s/step ({dev.type})", label)
        out.append(_measure(s, widths, lm, deadline(), repeats, dev, float))

    for name in ("mlp-digits", "vit-digits"):
        cfg, (a, b) = zoo_pair(name)
        x, y = digits_test(cfg)
        x, y = x.to(dev), y.to(dev)
        a = {k: v.to(dev) for k, v in a.items()}
        b = {k: v.to(dev) for k, v in b.items()}

        def by_points(k: int, cfg=cfg, a=a, b=b, x=x, y=y):
            return partial(evaluate_path, cfg, a, b, x, y, k, EvalOptions(len(x)),
                           context=RunContext(dev))  # fmt: skip

        def by_batch(n: int, cfg=cfg, a=a, b=b, x=x):
            gen = torch.Generator().manual_seed(n)
            idx = torch.randint(0, len(x), (n,), generator=gen).to(dev)
            xs = x[idx] + 0.01 * torch.randn(x[idx].shape, generator=gen).to(dev)
            ys = torch.randint(0, cfg.n_out, (n,), generator=gen).to(dev)
            return partial(evaluate_path, cfg, a, b, xs, ys, 25, EvalOptions(n),
                           context=RunContext(dev))  # fmt: skip

        s = Series(f"barrier curve {name}, s (batch 497)", "points")
        out.append(_measure(s, points, by_points, deadline(), repeats, dev))
        s = Series(f"barrier curve {name}, s (25 points)", "batch")
        out.append(_measure(s, batches, by_batch, deadline(), repeats, dev))

    rows = []
    for s in out:
        cells = ", ".join(f"{n}: {t:.3g}" for n, t in zip(s.sizes, s.seconds, strict=True))
        mem = ", ".join(f"{m:.0f}" for m in s.mib)
        rows.append(
            (s.name, s.size_label, cells, s.exponent(s.seconds), mem, s.exponent(s.mib), s.note)
        )
    head = (
        f"growth on {dev.type}: seconds per size, fitted exponent (time ∝ size^k), peak MiB "
        f"above start; median of {repeats}; {machine_line()}"
    )
    headers = ("series", "size", "seconds", "k time", "peak MiB", "k mem", "note")
    return head + "\n" + table(headers, rows), out


def main() -> None:
    torch.set_num_threads(1)
    text, _ = run()
    print(text)


if __name__ == "__main__":
    main()
