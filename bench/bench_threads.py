"""Torch thread count: every workload at each thread count and at the automatic choice, idle
and under load.

Workloads (zoo checkpoints, seeds 0 and 1): a 5-point barrier curve on the test split
(``evaluate_path``), 5 rounds of weight matching and 10 steps of learned matching, both under
rotations. "Under load" runs other processes that keep every core busy (one single-threaded
1024² sgemm loop per core) for the whole measurement.
For each workload the table gives the seconds at 1 … N threads, the choice of
:func:`landscape.threads.choose_threads` and the ratio of the choice's time to the best fixed
count's (1.00: the choice is as good as the best), and the time at torch's default count (its
count at start-up, one thread per core) over the choice's (above 1: choosing paid). Asserts
nothing about time.

    .venv/bin/python bench/bench_threads.py [--models vit-fashion vit-fashion-d256 ...]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import machine_line, table, timed
from landscape import threads as T
from landscape.experiments.evaluation import evaluate_path
from landscape.matching.learned import learned_matching
from landscape.matching.weight import weight_matching
from landscape.sources import data_of
from landscape.sources.zoo import get_checkpoint

# torch's own count, read before anything here sets one (the "default" of the table)
TORCH_DEFAULT = min(torch.get_num_threads(), T.cores())
MODELS = ("vit-fashion", "vit-fashion-d256", "gpt-shakespeare-d128")


def _spin(stop: mp.Event) -> None:  # one busy core
    torch.set_num_threads(1)
    a = torch.randn(1024, 1024)
    while not stop.is_set():
        a @ a


class Load:
    """Another process on every core for the ``with`` block (nothing when ``on`` is false)."""

    def __init__(self, on: bool) -> None:
        self.on, self.procs, self.stop = on, [], None

    def __enter__(self) -> Load:
        if self.on:
            ctx = mp.get_context("spawn")
            self.stop = ctx.Event()
            self.procs = [ctx.Process(target=_spin, args=(self.stop,)) for _ in range(T.cores())]
            for p in self.procs:
                p.start()
            time.sleep(2.0)  # let them start spinning
        return self

    def __exit__(self, *exc: object) -> None:
        if self.on:
            self.stop.set()
            for p in self.procs:
                p.join()


def workloads(name: str) -> dict[str, tuple[int, object]]:
    """name → (model width, a function of no arguments that runs the workload once)."""
    a, b = get_checkpoint(name, 0), get_checkpoint(name, 1)
    data = data_of(a)
    test, train = data.evaluation("test"), data.split("train")
    pa = {k: v.float() for k, v in a.params.items()}
    pb = {k: v.float() for k, v in b.params.items()}
    cfg = a.cfg
    x, y = test.inputs, test.targets
    out = {
        f"{name}: curve, 5 points": lambda: evaluate_path(cfg, pa, pb, x, y, 5),
        f"{name}: weight matching, orth, 5 rounds": lambda: weight_matching(
            cfg, pa, pb, "orth", max_rounds=5
        ),
        f"{name}: learned, orth, 10 steps": lambda: learned_matching(
            cfg, pa, pb, "orth", train, steps=10, eval_every=1000
        ),
    }
    return {k: (cfg.d_model, f) for k, f in out.items()}


def seconds(fn: Callable[[], object], n: int, repeats: int) -> float:
    """Median seconds of ``fn`` at ``n`` torch threads, after one warm-up run."""
    with T.using(n):
        return timed(fn, repeats)[0]


def run(models: Sequence[str] = MODELS, repeats: int = 2, load: Sequence[bool] = (False, True)
        ) -> str:  # fmt: skip
    """The thread table, idle and under load, as text."""
    counts = list(range(1, T.cores() + 1))
    jobs = {k: v for m in models for k, v in workloads(m).items()}
    out = []
    for loaded in load:
        rows = []
        with Load(loaded):
            state = "under load" if loaded else "idle"
            for label, (width, fn) in jobs.items():
                times = {n: seconds(fn, n, repeats) for n in counts}
                choice = T.choose_threads(width)
                t_choice = times[choice]
                rows.append(
                    [
                        label,
                        *(f"{times[n]:.3f}" for n in counts),
                        str(choice),
                        f"{t_choice / min(times.values()):.2f}",
                        f"{times[TORCH_DEFAULT] / t_choice:.2f}",
                    ]
                )
                print("  ", state, rows[-1], flush=True)
        headers = ["workload", *(f"{n} thread(s) s" for n in counts), "choice",
                   "choice / best", f"torch default ({TORCH_DEFAULT}) / choice"]  # fmt: skip
        out.append(f"{machine_line()} | {state}\n{table(headers, rows)}")
    return "\n\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print(run(args.models, args.repeats))


if __name__ == "__main__":
    main()
