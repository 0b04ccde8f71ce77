"""Is weight matching's answer the pair's or the machine's? One request under several kernel sets.

    .venv/bin/python bench/bench_repro.py [--model vit-fashion-d128] [--group orth] [--points 25]

Runs ``landscape barrier MODEL --seeds 0 1 --method weight --group G --json`` in a child process
per setting, each with an empty cache of its own, and prints the barrier, the objective and the
rounds of each against the first. The settings change how every product rounds: ATen's kernel
set (``ATEN_CPU_CAPABILITY`` = default, avx2, and the machine's own), one and two threads, and
the BLAS's own code path (``MKL_CBWR``: the compatible path and AVX2's), which is as far as one
machine gets to another CPU's, or a GPU's, rounding. On a CUDA machine ``--device cuda`` adds the
GPU. Nothing here asserts anything; the table is the finding.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = str(Path(sys.executable).parent / "landscape")
# (label, environment, threads)
SETTINGS = [
    ("own kernels, 1 thread", {}, 1),
    ("own kernels, 2 threads", {}, 2),
    ("ATen avx2, 1 thread", {"ATEN_CPU_CAPABILITY": "avx2"}, 1),
    ("ATen avx2, 2 threads", {"ATEN_CPU_CAPABILITY": "avx2"}, 2),
    ("ATen default, 1 thread", {"ATEN_CPU_CAPABILITY": "default"}, 1),
    ("ATen default, 2 threads", {"ATEN_CPU_CAPABILITY": "default"}, 2),
    ("BLAS compatible path, 1 thread", {"MKL_CBWR": "COMPATIBLE"}, 1),
    ("BLAS AVX2 path, 2 threads", {"MKL_CBWR": "AVX2"}, 2),
]


def one(model: str, group: str, points: int, env: dict[str, str], threads: int,
        device: str = "cpu", root: str | None = None) -> dict:  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="landscape-repro-") as cache:
        # another checkout's code (the code before a change) runs as a module from its root
        cli = [CLI] if root is None else [sys.executable, "-m", "landscape.cli"]
        cmd = [*cli, "barrier", model, "--seeds", "0", "1", "--method", "weight", "--group",
               group, "--points", str(points), "--threads", str(threads), "--device", device,
               "--json"]  # fmt: skip
        extra = {} if root is None else {"PYTHONPATH": root}
        env = {**os.environ, **env, **extra, "LANDSCAPE_CACHE": cache}
        t = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=root, env=env)
        result = json.loads(out.stdout)
        result["wall_s"] = time.perf_counter() - t
        result["aten"] = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
            capture_output=True, text=True, env={**os.environ, **env},
        ).stdout.strip()  # fmt: skip
        return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="vit-fashion-d128")
    p.add_argument("--group", default="orth")
    p.add_argument("--points", type=int, default=25)
    p.add_argument("--device", action="append", default=[], help="also run on this device")
    p.add_argument("--root", help="run another checkout's code (e.g. the code before a change)")
    p.add_argument("--settings", type=int, nargs="+", help="only these rows of the list (0-based)")
    args = p.parse_args()
    settings = [*SETTINGS, *((f"device {d}", {}, 1) for d in args.device)]
    if args.settings:
        settings = [settings[i] for i in args.settings]
    rows = []
    for label, env, threads in settings:
        device = label.split()[-1] if label.startswith("device ") else "cpu"
        r = one(args.model, args.group, args.points, env, threads, device, args.root)
        rows.append((label, r))
        print(f"{label}: barrier {r['barrier_loss']:.6f}, {r['wall_s']:.0f} s", file=sys.stderr,
              flush=True)  # fmt: skip
    first = rows[0][1]
    head = (f"{'setting':32s} {'ATen':8s} {'barrier':>10s} {'Δ barrier':>10s} "
            f"{'accuracy b.':>11s} {'objective':>14s} {'Δ objective':>11s} {'rounds':>6s} "
            f"{'matching s':>10s}")  # fmt: skip
    print(f"weight/{args.group} barrier of {args.model} 0-1, {args.points} points, test split\n")
    print(head)
    for label, r in rows:
        rel = (r["barrier_loss"] - first["barrier_loss"]) / abs(first["barrier_loss"])
        # code from before these fields existed says nothing of the objective or the rounds
        obj, first_obj = r.get("matching_objective"), first.get("matching_objective")
        rel_obj = math.nan if obj is None else (obj - first_obj) / abs(first_obj)
        print(f"{label:32s} {r['aten']:8s} {r['barrier_loss']:10.6f} {rel:+10.2e} "
              f"{r['barrier_accuracy']:11.5f} {obj or math.nan:14.6f} {rel_obj:+11.2e} "
              f"{r.get('matching_rounds', 0):6d} {r['matching_seconds']:10.1f}")  # fmt: skip
    spread = max(r["barrier_loss"] for _, r in rows) - min(r["barrier_loss"] for _, r in rows)
    print(f"\nlargest difference: {spread:.3g} nats "
          f"({spread / abs(first['barrier_loss']):.2e} of the barrier)")  # fmt: skip


if __name__ == "__main__":
    main()
