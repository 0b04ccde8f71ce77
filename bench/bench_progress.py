"""How often long work reports its progress: the longest silence between two reports.

A page's bar moves only when the computation reports (``landscape.progress``); a silence of
minutes looks hung. Each request runs with an empty cache of its own and a recorder as its
``progress``; the table gives the number of reports, the longest gap between two (from the start
to the first, between any two, from the last to the end) and the stage after it::

    python bench/bench_progress.py                       # the zoo's transformer requests
    python bench/bench_progress.py --model mlp-digits --methods weight/perm --threads 2

The issue's target is a report at least every 2 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landscape.progress import Progress  # noqa: E402


def recorder() -> tuple[Progress, list[tuple[float, str]]]:
    seen: list[tuple[float, str]] = []

    def hear(stage: str, done: float, total: float) -> None:
        seen.append((time.perf_counter(), stage))

    return hear, seen


def longest_silence(t0: float, t1: float, seen: list[tuple[float, str]]) -> tuple[float, str]:
    """The longest gap between consecutive moments of ``t0, reports…, t1`` and what ended it."""
    moments = [(t0, "start"), *seen, (t1, "end")]
    gaps = [(b[0] - a[0], b[1]) for a, b in zip(moments, moments[1:], strict=False)]
    return max(gaps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    models = ["vit-fashion-d128", "gpt-shakespeare-d128-drop0.3"]
    p.add_argument("--model", nargs="+", default=models)
    p.add_argument("--methods", nargs="+", default=["naive/orth", "weight/orth", "learned/orth"])
    p.add_argument("--steps", type=int, default=60, help="learned matching's steps")
    p.add_argument("--points", type=int, default=25)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from landscape.experiments.barriers.pipeline import barrier
    from landscape.matching import method_of

    rows = [("model", "method", "seconds", "reports", "longest silence s", "ended by")]
    # the fetched data, not a download into each empty cache
    os.environ.setdefault("LANDSCAPE_DATA", str(Path.home() / ".cache/landscape/data"))
    for model in args.model:
        for combo in args.methods:
            method, group = combo.split("/")
            takes_steps = any(s.name == "steps" for s in method_of(method).declared())
            options = {"steps": args.steps} if takes_steps else None
            with tempfile.TemporaryDirectory(prefix="landscape-progress-") as d:
                os.environ["LANDSCAPE_CACHE"] = d
                hear, seen = recorder()
                t0 = time.perf_counter()
                barrier(model, (0, 1), method, group, points=args.points, options=options,
                        progress=hear)  # fmt: skip
                t1 = time.perf_counter()
            gap, stage = longest_silence(t0, t1, seen)
            rows.append((model, combo, f"{t1 - t0:.1f}", str(len(seen)), f"{gap:.2f}", stage))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"threads {args.threads}; learned steps {args.steps}; points {args.points}")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
