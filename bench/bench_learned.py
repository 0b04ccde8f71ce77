"""Learned matching's speed on a 2-layer, width-64 GPT pair at one thread.

    python bench/bench_learned.py [--steps 300] [--model gpt-shakespeare] [--threads 1]

Runs learned/orth with its defaults (batches of 8,192 tokens, scoring every 25 steps) on seeds
0 and 1 of ``--model`` (a zoo model or family with text; the zoo's gpt-shakespeare needs its text
fetched) and prints the seconds, the seconds per step and, as the machine's yardstick measured
in the same process just before, the single-thread rate of a 1024² float32 matrix product, so a
run on a loaded machine can be read against an idle one. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import machine_line, sgemm_gflops
from landscape.matching.learned import learned_matching
from landscape.sources import Source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gpt-shakespeare")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--space", default="weights")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    a, b = Source(args.model, 0).load(), Source(args.model, 1).load()
    train = Source(args.model, 0).data_of(a).split("train")
    print(machine_line())
    print(f"sgemm 1024², {args.threads} thread(s): {sgemm_gflops():.1f} GFLOP/s")
    t = time.perf_counter()
    r = learned_matching(a.cfg, a.params, b.params, "orth", train, steps=args.steps,
                         space=args.space)  # fmt: skip
    seconds = time.perf_counter() - t
    i = r.info
    print(f"{args.model}: learned/orth {args.steps} steps, batch {i['batch_size']} windows of "
          f"{train.inputs.shape[1]}, space {args.space}: {seconds:.1f} s "
          f"({seconds / max(args.steps, 1):.3f} s/step, weight-matching start included), "
          f"selected step {i['selected_step']}")  # fmt: skip


if __name__ == "__main__":
    main()
