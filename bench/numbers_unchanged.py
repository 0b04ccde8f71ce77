"""The numbers a refactor must not move: record them once, then check them after every step.

    python bench/numbers_unchanged.py --record bench/numbers_before.json
    python bench/numbers_unchanged.py --check bench/numbers_before.json

Runs, each in a fresh cache so every number is computed by the code under test:
``table mlp-digits --pairs 3``, ``controls mlp-digits --pairs 1``, ``gauge-sweep mlp-digits``
and ``pair-barrier`` on two imported checkpoints (mlp-digits seeds 0 and 1 written as checkpoint
directories, evaluated on digits). ``--check`` compares every number in the JSON outputs
(timings and cache flags left out) to the recorded ones and prints the largest difference;
it exits 1 when one exceeds ``--tol`` (default 1e-6) or a field appears or disappears.
Floats are compared on one machine and one torch thread: CPU kernels of another instruction set,
and another thread count, round differently.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Fields that describe the run (time, memory, cache, temporary paths) rather than its result.
VOLATILE = {"seconds", "matching_seconds", "compute_seconds", "peak_rss_mb",
            "compute_peak_rss_mb", "cached", "hit", "cache_key", "path", "root",
            "saved"}  # fmt: skip


def _run(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "landscape.cli", *args, "--json"],
                          capture_output=True, text=True, env=env)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"landscape {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def collect() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # one thread: ``--threads auto`` would follow the machine's load, and float32 results
        # (function checks) round differently on another thread count
        env = {**os.environ, "LANDSCAPE_CACHE": str(Path(tmp) / "cache"), "PYTHONHASHSEED": "0",
               "LANDSCAPE_THREADS": "1"}  # fmt: skip
        runs = {
            "table": ["table", "mlp-digits", "--pairs", "3"],
            "controls": ["controls", "mlp-digits", "--pairs", "1"],
            "gauge-sweep": ["gauge-sweep", "mlp-digits"],
        }
        for name, args in runs.items():
            print(f"running {name} …", file=sys.stderr, flush=True)
            out[name] = _run(args, env)
        dirs = []
        for seed in (0, 1):
            d = Path(tmp) / f"ckpt{seed}"
            _run(["train", "mlp-digits", "--seed", str(seed), "--save", str(d)], env)
            dirs.append(str(d))
        for group in ("perm", "orth"):
            name = f"pair-barrier weight/{group}"
            print(f"running {name} …", file=sys.stderr, flush=True)
            out[name] = _run(["pair-barrier", *dirs, "--data", "digits", "--method", "weight",
                              "--group", group], env)  # fmt: skip
    return out


def numbers(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a JSON object by its path; strings and booleans kept for equality."""
    flat: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in VOLATILE:
                flat.update(numbers(v, f"{prefix}/{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            flat.update(numbers(v, f"{prefix}[{i}]"))
    elif not (isinstance(obj, str) and obj.startswith(tempfile.gettempdir())):  # run's own dirs
        flat[prefix] = obj
    return flat


def compare(before: dict[str, Any], after: dict[str, Any], tol: float) -> int:
    a, b = numbers(before), numbers(after)
    bad = sorted(set(a) ^ set(b))
    worst, where = 0.0, ""
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            if math.isnan(x) and math.isnan(y):
                continue
            d = abs(x - y)
            if d > worst or math.isnan(d):
                worst, where = d, k
            if not d <= tol:
                bad.append(k)
        elif x != y:
            bad.append(k)
    print(f"{len(a)} values compared; largest difference {worst:.3g} at {where or '—'}")
    for k in bad[:20]:
        print(f"  differs: {k}: {a.get(k, '(missing)')} → {b.get(k, '(missing)')}")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="write the numbers to this file")
    mode.add_argument("--check", type=Path, help="compare with the numbers in this file")
    ap.add_argument("--tol", type=float, default=1e-6)
    args = ap.parse_args()
    result = collect()
    if args.record:
        args.record.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(numbers(result))} values in {args.record}")
        return
    raise SystemExit(compare(json.loads(args.check.read_text()), result, args.tol))


if __name__ == "__main__":
    main()
