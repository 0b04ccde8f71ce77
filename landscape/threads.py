"""How many threads torch computes with on the CPU: chosen by measurement, not inherited.

Torch starts with one thread per core. On a small machine that is often the slowest choice:
the zoo's operations are small, and when another process holds the cores every extra thread
waits for one (on a loaded 2-core machine a 5-point curve ran 3× slower on two threads than on
one). The rule here, :func:`choose_threads`, takes the smaller of two numbers:

- the **ceiling** of the workload: the fewest threads within 10% of the fastest on a small
  model block of the workload's width (a norm, a GELU MLP with hidden width 4·d, on a batch of
  rows), timed at 1 … N threads. It is measured once per machine and width (rounded up to a
  power of two) while the cores are free, and kept in ``threads.json`` in the cache root; a
  calibration made under load is used but not kept;
- the **free cores** now: the cores this process may run on, less the time other processes
  kept them busy over a short sample (``/proc/stat``; where there is none, every core counts
  as free).

So a loaded machine gets one thread and an idle one as many as the work can use. Every
command takes ``--threads`` (a count, or ``auto`` for this rule), the library's entry points
take ``threads=`` (:func:`threaded`) and the app's slider starts at the same choice. Training
always runs on one thread whatever is asked: its bits are fixed only for one thread count
(:func:`landscape.models.runs.train_model`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import torch

from landscape.device import kernel_fingerprint
from landscape.errors import LandscapeError
from landscape.store.paths import cache_root

AUTO = "auto"
CALIBRATION_VERSION = 1
WITHIN = 0.9  # the ceiling: the fewest threads reaching this fraction of the fastest speed
SAMPLE_S = 0.1  # how long /proc/stat is watched for other processes' work
# More threads than cores only wait for one another; a few per core are allowed (a count set
# for a larger machine still runs), thousands are refused (each is an OS thread torch starts).
THREADS_PER_CORE = 4

F = TypeVar("F", bound=Callable[..., Any])


def cores() -> int:
    """The CPUs this process may run on (its affinity set, else the machine's count)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, _quota() or n))


def _quota() -> int | None:
    """Whole CPUs of a cgroup v2 quota (``cpu.max``), when one is set."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, math.floor(int(quota) / int(period)))


def _cpu_times() -> dict[str, tuple[int, int]] | None:
    """Per CPU of the affinity set: (busy, total) jiffies, from ``/proc/stat``."""
    try:
        allowed = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        lines = Path("/proc/stat").read_text().splitlines()
    except (AttributeError, OSError):
        return None
    out = {}
    for line in lines:
        name, *fields = line.split()
        if name in allowed:
            v = [int(x) for x in fields[:8]]
            idle = v[3] + v[4]  # idle + iowait
            out[name] = (sum(v) - idle, sum(v))
    return out or None


def _own_cpu_seconds() -> float:
    return time.process_time()


def free_cores(sample_s: float = SAMPLE_S) -> int:
    """Cores not kept busy by other processes over the next ``sample_s`` seconds (≥ 1)."""
    n = cores()
    before, own = _cpu_times(), _own_cpu_seconds()
    if before is None:
        return n
    time.sleep(sample_s)
    after, own = _cpu_times(), _own_cpu_seconds() - own
    if after is None:
        return n
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = sum(after[c][0] - before[c][0] for c in after if c in before) / hz - own
    total = sum(after[c][1] - before[c][1] for c in after if c in before) / hz
    if total <= 0:
        return n
    busy_cores = max(0.0, busy) / total * len(after)
    # a core counts as taken when more than a quarter of it was busy
    return max(1, min(n, math.floor(len(after) - busy_cores + 0.75)))


def _bucket(width: int) -> int:
    return 1 << max(5, min(13, math.ceil(math.log2(max(1, width)))))


def _block_seconds(width: int, n: int, repeats: int = 5) -> float:
    """Median seconds of one norm + GELU MLP block of ``width`` at ``n`` threads."""
    rows = max(64, min(4096, int(4e8 / (8 * width * width))))  # ~0.4 GFLOP a block
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, width, generator=g)
    w_in = torch.randn(width, 4 * width, generator=g) / width**0.5
    w_out = torch.randn(4 * width, width, generator=g) / (2 * width**0.5)
    gain = torch.ones(width)

    def block() -> torch.Tensor:
        h = torch.rms_norm(x, (width,), gain, 1e-5)
        return x + torch.nn.functional.gelu(h @ w_in) @ w_out

    with using(n):
        block()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            block()
            times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def calibrate(width: int) -> int:
    """The fewest threads within :data:`WITHIN` of the fastest on a block of ``width``."""
    seconds = {n: _block_seconds(width, n) for n in range(1, cores() + 1)}
    best = min(seconds.values())
    return min(n for n, s in seconds.items() if best / s >= WITHIN)


def _store() -> Path:
    return cache_root() / "threads.json"


def _machine_key(width: int) -> str:
    fp = kernel_fingerprint()
    return f"v{CALIBRATION_VERSION}|{fp['cpu_vendor']}|{fp['cpu_isa']}|{cores()}|{_bucket(width)}"


def ceiling(width: int) -> int:
    """The calibrated ceiling for ``width`` (measured on first use; kept when measured idle)."""
    if cores() == 1:
        return 1
    key, path = _machine_key(width), _store()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):  # a damaged store: measured again and rewritten
        known = {}
    if isinstance(known.get(key), int):
        return known[key]
    idle = free_cores() == cores()
    n = calibrate(_bucket(width))
    if idle and free_cores() == cores():  # idle before and after: worth keeping
        known[key] = n
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
            tmp.replace(path)
    return n


def choose_threads(width: int = 256) -> int:
    """The thread count for work of model width ``width``: min(ceiling, free cores now)."""
    n = cores()
    if n == 1:
        return 1
    free = free_cores()
    return 1 if free == 1 else min(ceiling(width), free)


def max_threads() -> int:
    """The largest thread count accepted: :data:`THREADS_PER_CORE` per core this process may
    run on (:func:`cores`)."""
    return THREADS_PER_CORE * cores()


def parse_threads(spec: int | str | None) -> int | str | None:
    """``None`` (leave torch as it is), ``"auto"`` or a count from 1 to :func:`max_threads`;
    anything else is refused."""
    if spec is None or spec == AUTO:
        return spec
    try:
        n = int(spec)
    except (TypeError, ValueError):
        raise LandscapeError(f"threads must be a whole number or 'auto', got {spec!r}") from None
    if n < 1 or str(n) != str(spec).strip():
        raise LandscapeError(f"threads must be a whole number ≥ 1 or 'auto', got {spec!r}")
    if n > max_threads():
        raise LandscapeError(
            f"threads must be at most {max_threads()} ({THREADS_PER_CORE} per core of the "
            f"{cores()} this process may run on), got {n}"
        )
    return n


def resolve_threads(spec: int | str | None, width: int = 256) -> int:
    """The count ``spec`` asks for: ``"auto"`` → :func:`choose_threads`, ``None`` → torch's."""
    spec = parse_threads(spec)
    if spec is None:
        return torch.get_num_threads()
    return choose_threads(width) if spec == AUTO else spec


@contextlib.contextmanager
def using(n: int) -> Iterator[int]:
    """Run the block with ``n`` torch threads, then restore the count before it."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def threaded(fn: F) -> F:
    """Give a library entry point a ``threads=`` keyword (None: leave torch's count as it is;
    ``"auto"``: :func:`choose_threads` for a width-256 workload; a count)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, threads: int | str | None = None, **kwargs: Any) -> Any:
        if threads is None:
            return fn(*args, **kwargs)
        with using(resolve_threads(threads)):
            return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    extra = inspect.Parameter("threads", inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation="int | str | None")  # fmt: skip
    params = list(sig.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    wrapper.__signature__ = sig.replace(parameters=[*params[:at], extra, *params[at:]])
    return wrapper  # type: ignore[return-value]
