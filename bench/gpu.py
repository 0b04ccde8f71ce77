"""The benchmarks on a CUDA device, in one call of under ten minutes.

    python bench/gpu.py [TABLE_PATH]        # default: $OUT/gpu_bench.txt, else ./gpu_bench.txt

Runs the barrier-curve comparison (ours, loss-landscapes and the module loop, all on the GPU)
and the growth series on CUDA with wider models, each section under a hard time guard (an
alarm that abandons the section, and a deadline inside the growth series). Weight matching
stays on the CPU by design (assignment in float64, DESIGN §1); learned matching runs its
forward and backward on the GPU. The table is printed and written to TABLE_PATH.

Without CUDA it says so in one line, skips the CUDA sections and runs a small smoke version of
the same code on the CPU (seconds), so the script can be checked anywhere.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench import bench_curve, bench_scaling
from bench.common import machine_line, ratio_table, version

TOTAL_S = 540  # leaves a minute of the ten for start-up and writing


class _Timeout(Exception):
    pass


def _guarded(title: str, seconds: int, fn: Callable[[], str]) -> str:
    """``fn()`` under an alarm of ``seconds``: its text, or one line saying why it stopped."""

    def alarm(signum, frame):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(max(1, int(seconds)))
    t0 = time.perf_counter()
    try:
        return f"== {title} ==\n{fn()}\n({time.perf_counter() - t0:.0f} s)"
    except _Timeout:
        return f"== {title} ==\nabandoned after the {seconds} s time guard"
    except Exception:  # one failing section must not lose the others' numbers
        return f"== {title} ==\nfailed:\n{traceback.format_exc(limit=3)}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def main() -> None:
    start = time.perf_counter()
    out_dir = os.environ.get("OUT")
    default = Path(out_dir) / "gpu_bench.txt" if out_dir else Path("gpu_bench.txt")
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    cuda = torch.cuda.is_available()
    lines = [
        f"landscape GPU benchmarks; {machine_line()}",
        f"peers: loss-landscapes {version('loss-landscapes')}, rebasin {version('rebasin')}",
    ]
    if cuda:
        lines.append(f"device: {torch.cuda.get_device_name(0)}")

        def curve() -> str:
            text, ratios = bench_curve.run(device="cuda")
            return text + "\n\n" + ratio_table(ratios)

        def growth() -> str:
            left = TOTAL_S - (time.perf_counter() - start) - 30
            widths = (128, 256, 512, 1024, 2048, 4096)
            text, _ = bench_scaling.run(
                "cuda", widths, (5, 25, 100, 400), (256, 1024, 4096, 16384), budget_s=left
            )
            return text

        lines.append(_guarded("barrier curves on CUDA", 180, curve))
        left = int(TOTAL_S - (time.perf_counter() - start))
        lines.append(_guarded("growth on CUDA", left, growth))
    else:
        lines.append("no CUDA device: skipping the CUDA sections; CPU smoke run of the same code")
        torch.set_num_threads(1)

        def smoke() -> str:
            text, _ = bench_scaling.run("cpu", (32, 64), (5, 9), (64, 128), budget_s=60, repeats=1)
            return text

        lines.append(_guarded("growth smoke on CPU", 120, smoke))
    text = "\n\n".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    print(text)
    print(f"\ntable written to {path} ({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
