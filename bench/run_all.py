"""Every CPU benchmark in one run: ratios against peers and baselines, the forward's rate, threads.

    .venv/bin/python bench/run_all.py [--quick] [--big]

Sections: barrier curves (loss-landscapes, module loop), weight matching (rebasin), triangle
grids (module loop), growth with fitted exponents and the ratio table; then the forward's
GFLOP/s against the machine's sgemm (``bench_rate.py``) and the thread count chosen against
torch's default, idle and under load (``bench_threads.py``; vit-fashion and
gpt-shakespeare-d128). One torch thread outside those two sections, contenders interleaved in
the same process, medians of 5 (``--quick``: 3, and a shorter growth series). Peers are the
``bench`` extra (``pip install -e .[bench]`` or ``bench/requirements.txt``); a missing peer is
reported and its rows skipped. ``--big`` adds the 1.1B-parameter Llama pair of
``bench/bench_big.py`` (two float32 checkpoints of 4.4 GB on disk, peak RSS and time of
``pair-barrier``; tens of minutes on a laptop CPU). Nothing here asserts anything about time.
On a CUDA machine, ``bench/gpu.py`` runs the same measurements there.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench import (
    bench_big,
    bench_curve,
    bench_matching,
    bench_rate,
    bench_scaling,
    bench_threads,
    bench_triangle,
)
from bench.common import machine_line, ratio_table, version

PEERS = ("loss-landscapes", "rebasin")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats, shorter growth series")
    parser.add_argument("--big", action="store_true", help="also the 1.1B pair of bench_big.py")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 3 if args.quick else 5
    start = time.perf_counter()
    print(f"landscape benchmarks; {machine_line()}")
    print("peers: " + ", ".join(f"{p} {version(p)}" for p in PEERS) + "\n")
    ratios = []
    sections = [
        ("barrier curves", bench_curve.run),
        ("weight matching", bench_matching.run),
        ("triangle grids", bench_triangle.run),
    ]
    for title, run in sections:
        try:
            text, got = run(repeats)
        except ImportError as e:  # a peer is not installed
            print(f"== {title} == skipped: {e}\n")
            continue
        except Exception:
            print(f"== {title} == failed:\n{traceback.format_exc(limit=3)}")
            continue
        ratios += got
        print(f"== {title} ==\n{text}\n", flush=True)
    if args.quick:
        growth, _ = bench_scaling.run(
            widths=(64, 256, 1024), points=(5, 25, 100), batches=(64, 1024), repeats=repeats,
            budget_s=240,
        )  # fmt: skip
    else:
        growth, _ = bench_scaling.run(repeats=repeats)
    print(f"== growth ==\n{growth}\n", flush=True)
    print("== ratios (peer/ours > 1: ours is faster) ==")
    print(ratio_table(ratios) + "\n", flush=True)
    rate, _ = bench_rate.run(repeats=2 if args.quick else 3)
    print(f"== forward rate ==\n{rate}\n", flush=True)
    threads = bench_threads.run(("vit-fashion", "gpt-shakespeare-d128"), repeats=2)
    print(f"== threads: chosen against torch's default ==\n{threads}", flush=True)
    if args.big:
        print(f"\n== 1.1B Llama pair (bench_big) ==\n{bench_big.summary(bench_big.measure())}")
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
