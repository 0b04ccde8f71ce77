"""Shared pieces of the benchmarks: timing, peak memory, zoo data, modules for the peers, tables.

Every benchmark measures ratios inside one process (the peer and ours on the same model, the
same points, the same data, one after the other), takes the median of ``REPEATS`` runs after
one warm-up and asserts nothing about time.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import torch
from torch import nn

from landscape.models import ModelConfig, Params, forward, loss_and_accuracy

REPEATS = 5


def timed(
    fn: Callable[..., Any],
    repeats: int = REPEATS,
    warmup: int = 1,
    setup: Callable[[], Any] | None = None,
) -> tuple[float, Any]:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs, and its output.

    With ``setup``, every run is ``fn(setup())`` and only ``fn`` is timed (fresh copies of a
    model that ``fn`` changes in place).
    """

    def once() -> tuple[float, Any]:
        args = () if setup is None else (setup(),)
        t = time.perf_counter()
        out = fn(*args)
        return time.perf_counter() - t, out

    out = None
    for _ in range(warmup):
        _, out = once()
    times = []
    for _ in range(repeats):
        t, out = once()
        times.append(t)
    return (statistics.median(times) if times else float("nan")), out


def sgemm_gflops(n: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of an n² float32 matmul at the current thread count (median of ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    seconds, _ = timed(lambda: a @ b, repeats=repeats)
    return 2 * n**3 / seconds / 1e9


def race(
    fns: dict[str, Callable[..., Any]],
    repeats: int = REPEATS,
    setups: dict[str, Callable[[], Any]] | None = None,
    faults: dict[str, int] | None = None,
) -> dict[str, tuple[float, Any]]:
    """``timed`` for several functions, interleaved: round r runs each function once, so a
    change of machine load during the race hits all of them alike (medians per function).

    A ``faults`` dict receives each function's median count of minor page faults per run:
    memory the C allocator handed back to the system and that the run touched again. That
    cost depends on what the process freed before, so it is worth printing beside the times.
    """
    setups = setups or {}
    results = {k: timed(f, 0, 1, setups.get(k)) for k, f in fns.items()}  # warm-up, outputs
    times: dict[str, list[float]] = {k: [] for k in fns}
    counts: dict[str, list[int]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t, out = timed(f, 1, 0, setups.get(k))
            counts[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
            times[k].append(t)
            results[k] = (t, out)
    if faults is not None:
        faults.update({k: int(statistics.median(v)) for k, v in counts.items() if v})
    return {k: (statistics.median(times[k]), results[k][1]) for k in fns}


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch "
        f"thread(s), load average {load}"
    )


# ----------------------------------------------------------------------------- peak memory

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _status_kib(field: str) -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _trim() -> None:
    """Hand freed heap back to the system, so that the next peak is measured from a low start."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


@dataclass
class Peak:
    """Peak memory of one run above its start, MiB: host (resident set) and CUDA (allocator)."""

    host_mib: float
    cuda_mib: float | None
    how: str  # which host counter: "VmHWM" (reset per run), "ru_maxrss" or "tracemalloc"


def peak_memory(fn: Callable[[], Any], device: torch.device | None = None) -> Peak:
    """Run ``fn`` once and measure its peak memory above the start.

    Host: Linux's resident high-water mark (VmHWM), reset just before the run by writing 5 to
    /proc/self/clear_refs, minus the resident size at the start. Where that is unavailable,
    the growth of ``ru_maxrss`` (a lower bound: it only moves past the process's earlier peak)
    or, failing both, Python's tracemalloc peak (numpy and Python objects only, not torch's
    CPU allocator). CUDA: ``torch.cuda.max_memory_allocated`` above the allocated start.
    """
    _trim()
    cuda = device is not None and device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        cuda_start = torch.cuda.memory_allocated(device)
    start = _status_kib("VmRSS")
    how = "VmHWM"
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
    except OSError:
        how = "ru_maxrss"
    maxrss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if start is None:
        how = "tracemalloc"
        tracemalloc.start()
    fn()
    cuda_mib = None
    if cuda:
        torch.cuda.synchronize(device)
        cuda_mib = (torch.cuda.max_memory_allocated(device) - cuda_start) / 2**20
    if how == "tracemalloc":
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return Peak(peak / 2**20, cuda_mib, how)
    if how == "VmHWM":
        hwm = _status_kib("VmHWM")
        return Peak(max(0, hwm - start) / 1024, cuda_mib, how)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - maxrss_start
    return Peak(max(0, grown) / 1024, cuda_mib, how)


# ----------------------------------------------------------------------------- fits and tables


def loglog_exponent(sizes: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of log(value) against log(size): cost ∝ size^slope."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(v, 1e-12)) for v in values]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: floats with four significant digits, columns padded to fit."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


# ----------------------------------------------------------------------------- models and data


def zoo_pair(name: str, seeds: Sequence[int] = (0, 1)) -> tuple[ModelConfig, list[Params]]:
    """Zoo checkpoints of ``name`` (cached or shipped): its config and one float32 dict per seed."""
    from landscape.sources.zoo import get_checkpoint

    ckpts = [get_checkpoint(name, s) for s in seeds]
    return ckpts[0].cfg, [{k: v.detach().float() for k, v in c.params.items()} for c in ckpts]


def digits_test(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The digits test split (497 samples) in the input form ``cfg`` expects."""
    from landscape import data

    split = data.digits("test", flat=cfg.arch == "mlp")
    return split.inputs.float(), split.targets


class Wrapped(nn.Module):
    """An ``nn.Module`` around the functional model: one parameter per entry of the flat dict
    (dots become ``__``), the forward is ``models.forward``. What a peer tool that takes a
    module (loss-landscapes) or a state-dict loop sees."""

    def __init__(self, cfg: ModelConfig, params: Params) -> None:
        super().__init__()
        self.cfg = cfg
        self.names = sorted(params)  # one order for every model: peers pair parameters by position
        for name in self.names:
            t = params[name].detach().clone()
            self.register_parameter(name.replace(".", "__"), nn.Parameter(t))

    def params(self) -> Params:
        return {n: getattr(self, n.replace(".", "__")) for n in self.names}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return forward(self.cfg, self.params(), x)


def module_loop_path(
    module: Wrapped, a: Params, b: Params, x: torch.Tensor, y: torch.Tensor, lambdas, batch: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain baseline: per λ, load ``λ·A + (1−λ)·B`` into one module and evaluate it."""
    losses, accs = [], []
    with torch.no_grad():
        for lam in torch.as_tensor(lambdas).tolist():
            state = {k.replace(".", "__"): lam * a[k] + (1 - lam) * b[k] for k in a}
            module.load_state_dict(state)
            loss_sum = acc_sum = 0.0
            for s in range(0, x.shape[0], batch):
                yb = y[s : s + batch]
                loss, acc = loss_and_accuracy(module.cfg, module(x[s : s + batch]), yb)
                loss_sum += float(loss) * yb.numel()
                acc_sum += float(acc) * yb.numel()
            losses.append(loss_sum / y.numel())
            accs.append(acc_sum / y.numel())
    return torch.tensor(losses, dtype=torch.float64), torch.tensor(accs, dtype=torch.float64)


def random_residual_mlp(d_model: int, d_mlp: int, n_layers: int = 2) -> ModelConfig:
    """The residual MLP of the zoo (8×8 digits in, 10 classes out) at another width."""
    return ModelConfig("mlp", d_model=d_model, d_mlp=d_mlp, n_layers=n_layers, n_out=10, d_in=64)


@dataclass
class Ratio:
    """One line of the summary: our time against a peer's or a baseline's on the same work."""

    bench: str
    model: str
    peer: str  # "loss-landscapes 3.0.6", "module loop", ...
    ours_s: float
    peer_s: float
    agreement: str  # how the results compare, e.g. "max|Δloss| 3e-07"

    @property
    def ratio(self) -> float:
        """How many times longer the peer takes (> 1: ours is faster)."""
        return self.peer_s / self.ours_s


def ratio_table(ratios: Sequence[Ratio]) -> str:
    rows = [
        (r.bench, r.model, r.peer, r.ours_s, r.peer_s, f"{r.ratio:.2f}x", r.agreement)
        for r in ratios
    ]
    headers = ("benchmark", "model", "peer / baseline", "ours s", "peer s", "peer/ours", "agree")
    return table(headers, rows)
