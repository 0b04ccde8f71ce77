"""Barrier curves: ``evaluate_path`` against loss-landscapes and a per-λ module loop.

Same models (zoo checkpoints seeds 0 and 1 of mlp-digits and vit-digits), same 25 points
λ = 0, 1/24, …, 1, same data (the 497 digits of the test split, one batch), same process, one
torch thread. Peers:

- ``loss-landscapes`` ``linear_interpolation(model_start, model_end, metric, steps,
  deepcopy_model=True)`` with a ``Metric`` subclass returning (loss, accuracy). It walks
  ``start + i·(end − start)/steps`` for i = 1..steps in place and never evaluates the start
  itself, so B (λ = 0) is the start, A (λ = 1) the end, ``steps = 24``, and the start is
  evaluated once more through the same metric (timed with it).
- module loop: one ``nn.Module``, ``load_state_dict(λ·A + (1−λ)·B)`` per λ, then evaluate.

Rows that are not peers, in the detailed table only: "ours, vmap chunk N" forces the vectorised
pass with the chunk the library chose on the CPU before it switched to one plain forward per
mixture there; "module loop, R-row slices" is the module loop on the slices ``evaluate_path``
uses on the CPU, to show how much of the difference is the slice size alone. The peers get the
whole split as one batch, as their interfaces take it. Values are checked against ours
(max |Δloss| and |Δbarrier| below 1e-4). Prints ratios; asserts nothing about time.

"page faults" is the median count of minor page faults per run: temporaries the C allocator
had handed back to the system and the run touched again. Who pays them depends on what the
process freed before. Here the vectorised row frees large blocks early in every round, which
spares the peers' one-batch temporaries, so the ratios are those of a warmed process. Without
that row the peers fault on every forward and ours, on its 2 MB slices, hardly at all (vit-digits,
two runs: loss-landscapes 1.08× and 1.44× our time, the module loop 1.63× and 1.52×).

    .venv/bin/python bench/bench_curve.py
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
    module_loop_path,
    race,
    ratio_table,
    table,
    version,
    zoo_pair,
)
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.evaluation import (
    EvalOptions,
    _activation_elements,
    evaluate_path,
    slice_rows,
)
from landscape.models import loss_and_accuracy

POINTS = 25
MODELS = ("mlp-digits", "vit-digits")
TOLERANCE = 1e-4
# Activation elements per vectorised step that the library allowed on the CPU before it ran every
# model one plain forward per mixture there; the "ours, vmap" row keeps that chunk for comparison.
VMAP_BUDGET_ELEMENTS = 2**22


def loss_landscapes_path(a_module: Wrapped, b_module: Wrapped, x, y, steps: int):
    """(loss, accuracy) at λ = 0, 1/steps, …, 1 through loss-landscapes."""
    import loss_landscapes
    from loss_landscapes.metrics import Metric

    class LossAccuracy(Metric):
        def __call__(self, model_wrapper) -> tuple[float, float]:
            with torch.no_grad():
                logits = model_wrapper.forward(x)
                loss, acc = loss_and_accuracy(a_module.cfg, logits, y)
            return float(loss), float(acc)

    metric = LossAccuracy()
    start = metric(loss_landscapes.model_interface.model_wrapper.wrap_model(b_module))
    rest = loss_landscapes.linear_interpolation(
        b_module, a_module, metric, steps=steps, deepcopy_model=True
    )
    values = torch.tensor([start, *map(tuple, rest)], dtype=torch.float64)
    return values[:, 0], values[:, 1]


def _one_model(
    name: str, lambdas: torch.Tensor, repeats: int, dev: torch.device
) -> tuple[list, list[Ratio]]:
    cfg, (a, b) = zoo_pair(name)
    a, b = ({k: v.to(dev) for k, v in p.items()} for p in (a, b))
    x, y = (t.to(dev) for t in digits_test(cfg))
    batch = x.shape[0]
    ours_label = "ours, evaluate_path"
    fns = {ours_label: partial(evaluate_path, cfg, a, b, x, y, lambdas, EvalOptions(batch))}
    peers = {}
    if dev.type == "cpu":
        act = _activation_elements(cfg)
        vmap_chunk = min(len(lambdas), max(1, VMAP_BUDGET_ELEMENTS // (batch * act)))
        label = f"ours, vmap chunk {vmap_chunk}"
        fns[label] = partial(
            evaluate_path, cfg, a, b, x, y, lambdas, EvalOptions(batch, chunk=vmap_chunk)
        )
        peers[label] = False
    a_mod, b_mod, loop_mod = Wrapped(cfg, a), Wrapped(cfg, b), Wrapped(cfg, a)
    label = f"loss-landscapes {version('loss-landscapes')}"
    fns[label] = partial(loss_landscapes_path, a_mod, b_mod, x, y, len(lambdas) - 1)
    peers[label] = True
    fns["module loop"] = partial(module_loop_path, loop_mod, a, b, x, y, lambdas, batch)
    peers["module loop"] = True
    n_rows = slice_rows(cfg, batch, dev)
    if n_rows < batch:
        label = f"module loop, {n_rows}-row slices"
        fns[label] = partial(module_loop_path, loop_mod, a, b, x, y, lambdas, n_rows)
        peers[label] = False
    faults: dict[str, int] = {}
    results = race(fns, repeats, faults=faults)
    t_ours, (loss, acc) = results.pop(ours_label)
    ours = barrier_from_curve(lambdas, loss, acc)
    rows = [(name, ours_label, t_ours, 1.0, faults.get(ours_label, ""), 0.0, ours.barrier_loss)]
    ratios = []
    for label, (t, (p_loss, p_acc)) in results.items():
        theirs = barrier_from_curve(lambdas, p_loss, p_acc)
        d_loss = float((p_loss - loss).abs().max())
        d_barrier = abs(theirs.barrier_loss - ours.barrier_loss)
        ok = "yes" if max(d_loss, d_barrier) < TOLERANCE else "NO"
        rows.append(
            (name, label, t, t / t_ours, faults.get(label, ""), d_loss, theirs.barrier_loss)
        )
        if peers[label]:
            agree = f"max|Δloss| {d_loss:.1e}, |Δbarrier| {d_barrier:.1e} ({ok})"
            ratios.append(Ratio(f"curve, {len(lambdas)} points", name, label, t_ours, t, agree))
    return rows, ratios


def run(repeats: int = REPEATS, device: str | torch.device = "cpu") -> tuple[str, list[Ratio]]:
    """The detailed table and the summary ratios; ``device`` runs every contender there."""
    lambdas = torch.linspace(0, 1, POINTS, dtype=torch.float64)
    rows, ratios = [], []
    for name in MODELS:
        r, q = _one_model(name, lambdas, repeats, torch.device(device))
        rows += r
        ratios += q
    head = (
        f"barrier curve on {device}: {POINTS} points, digits test split (497, one batch), "
        f"median of {repeats}; {machine_line()}"
    )
    headers = ("model", "method", "seconds", "vs ours", "page faults", "max|Δloss|", "barrier")
    return head + "\n" + table(headers, rows), ratios


def main() -> None:
    torch.set_num_threads(1)
    text, ratios = run()
    print(text)
    print()
    print(ratio_table(ratios))


if __name__ == "__main__":
    main()
