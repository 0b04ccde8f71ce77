"""Triangle grids: ``evaluate_triangle`` throughput against a plain per-point module loop.

Three zoo checkpoints (seeds 0, 1, 2) of mlp-digits and vit-digits span the triangle; the grid
has resolution 10 (66 interpolated models), each evaluated on the 497 digits of the test split.
Throughput is interpolated models evaluated per second. The loop loads
``w_A·θ_A + w_B·θ_B + w_C·θ_C`` into one module per point (``load_state_dict``) and evaluates it.
Values are checked against ours (max |Δloss|). One torch thread, median of 5.

    .venv/bin/python bench/bench_triangle.py
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import (
    REPEATS,
    Ratio,
    Wrapped,
    digits_test,
    machine_line,
    race,
    ratio_table,
    table,
    zoo_pair,
)
from landscape.experiments.basins import barycentric_grid
from landscape.experiments.evaluation import EvalOptions, evaluate_triangle
from landscape.models import Params, loss_and_accuracy

RESOLUTION = 10
MODELS = ("mlp-digits", "vit-digits")


def module_loop_grid(module: Wrapped, corners: list[Params], points: torch.Tensor, x, y):
    """Loss per grid point: one module, its state overwritten per point."""
    losses = []
    with torch.no_grad():
        for w in points.tolist():
            state = {
                k.replace(".", "__"): sum(wc * p[k] for wc, p in zip(w, corners, strict=True))
                for k in corners[0]
            }
            module.load_state_dict(state)
            loss, _ = loss_and_accuracy(module.cfg, module(x), y)
            losses.append(float(loss))
    return torch.tensor(losses, dtype=torch.float64)


def run(repeats: int = REPEATS) -> tuple[str, list[Ratio]]:
    points = barycentric_grid(RESOLUTION)
    rows, ratios = [], []
    for name in MODELS:
        cfg, corners = zoo_pair(name, (0, 1, 2))
        x, y = digits_test(cfg)
        ours_fn = partial(evaluate_triangle, cfg, corners, x, y, RESOLUTION, EvalOptions(len(x)))
        loop_fn = partial(module_loop_grid, Wrapped(cfg, corners[0]), corners, points, x, y)
        res = race({"ours": ours_fn, "loop": loop_fn}, repeats)
        (t_ours, tri), (t_loop, loop_loss) = res["ours"], res["loop"]
        d = float((torch.tensor(tri.loss, dtype=torch.float64) - loop_loss).abs().max())
        k = len(points)
        rows.append((name, "ours, evaluate_triangle", t_ours, k / t_ours, 0.0))
        rows.append((name, "module loop", t_loop, k / t_loop, d))
        agree = f"max|Δloss| {d:.1e} ({'yes' if d < 1e-4 else 'NO'}); {k / t_ours:.0f} models/s"
        ratios.append(Ratio(f"triangle, {k} points", name, "module loop", t_ours, t_loop, agree))
    head = (
        f"triangle grid: resolution {RESOLUTION} ({len(points)} models), digits test split "
        f"(497), median of {repeats}; {machine_line()}"
    )
    headers = ("model", "method", "seconds", "models/s", "max|Δloss|")
    return head + "\n" + table(headers, rows), ratios


def main() -> None:
    torch.set_num_threads(1)
    text, ratios = run()
    print(text)
    print()
    print(ratio_table(ratios))


if __name__ == "__main__":
    main()
