"""Barrier-curve evaluation: vectorised ``evaluate_path`` against a per-λ module loop.

Baseline: the usual way, one ``nn.Module`` whose parameters are overwritten with each
interpolated state (``load_state_dict``) and evaluated. Same models (two random inits), same 25
points, same data (497 random samples, the size of the digits test split), same process, same
batch. Each timing is the median of 5 runs after one warm-up, with one torch thread and with the
default. Prints ratios; asserts nothing about time.

    .venv/bin/python bench/bench_curve.py
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from landscape.barrier import evaluate_path
from landscape.models import ModelConfig, Params, forward, init_params, loss_and_accuracy

N, POINTS, REPEATS, BATCH = 497, 25, 5, 497

CONFIGS = {
    "mlp": ModelConfig("mlp", d_model=32, d_mlp=64, n_layers=2, n_out=10, d_in=64),
    "vit": ModelConfig(
        "vit",
        d_model=64,
        n_heads=4,
        d_head=16,
        d_mlp=128,
        n_layers=2,
        image_size=8,
        patch_size=2,
        n_out=10,
    ),
}


class Wrapped(torch.nn.Module):
    """An nn.Module around the functional model (parameter names cannot contain dots)."""

    def __init__(self, cfg: ModelConfig, params: Params) -> None:
        super().__init__()
        self.cfg = cfg
        self.names = list(params)
        for name, t in params.items():
            self.register_parameter(name.replace(".", "__"), torch.nn.Parameter(t.clone()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        params = {n: getattr(self, n.replace(".", "__")) for n in self.names}
        return forward(self.cfg, params, x)


def loop_path(module: Wrapped, a: Params, b: Params, x, y, lambdas) -> torch.Tensor:
    losses = []
    with torch.no_grad():
        for lam in lambdas.tolist():
            state = {k.replace(".", "__"): lam * a[k] + (1 - lam) * b[k] for k in a}
            module.load_state_dict(state)
            loss_sum = 0.0
            for s in range(0, x.shape[0], BATCH):
                loss, _ = loss_and_accuracy(module.cfg, module(x[s : s + BATCH]), y[s : s + BATCH])
                loss_sum += float(loss) * y[s : s + BATCH].numel()
            losses.append(loss_sum / y.numel())
    return torch.tensor(losses, dtype=torch.float64)


def median_time(fn, *args, **kwargs) -> tuple[float, object]:
    out = fn(*args, **kwargs)  # warm-up
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    default_threads = torch.get_num_threads()
    lambdas = torch.linspace(0, 1, POINTS, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for arch, cfg in CONFIGS.items():
        a, b = init_params(cfg, 0), init_params(cfg, 1)
        if arch == "mlp":
            x = torch.randn(N, cfg.d_in, generator=gen)
        else:
            x = torch.randn(N, cfg.image_size, cfg.image_size, generator=gen)
        y = torch.randint(0, cfg.n_out, (N,), generator=gen)
        module = Wrapped(cfg, a)
        for threads in sorted({1, default_threads}):
            torch.set_num_threads(threads)
            t_vec, (loss_vec, _) = median_time(
                evaluate_path, cfg, a, b, x, y, lambdas, batch_size=BATCH
            )
            t_loop, loss_loop = median_time(loop_path, module, a, b, x, y, lambdas)
            delta = float((loss_vec - loss_loop).abs().max())
            rows.append((arch, threads, "vmap evaluate_path", t_vec, delta))
            rows.append((arch, threads, "module loop", t_loop, delta))
    torch.set_num_threads(default_threads)

    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"{POINTS} points, {N} samples, batch {BATCH}, median of {REPEATS}")
    print(f"{os.cpu_count()} CPUs, default {default_threads} torch threads, load average {load}")
    header = (
        f"{'model':<5} {'threads':>7}  {'method':<19} {'seconds':>9} {'ratio':>7} {'max|Δ|':>9}"
    )
    print(header)
    print("-" * len(header))
    for arch in CONFIGS:
        mine = [r for r in rows if r[0] == arch]
        best = min(r[3] for r in mine)
        for r in mine:
            print(f"{r[0]:<5} {r[1]:>7}  {r[2]:<19} {r[3]:>9.4f} {r[3] / best:>6.2f}x {r[4]:>9.1e}")
        fastest = min(mine, key=lambda r: r[3])
        print(f"fastest for {arch}: {fastest[2]} with {fastest[1]} thread(s)\n")


if __name__ == "__main__":
    main()
