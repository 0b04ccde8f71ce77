"""Weight matching with the objective weighted by part of the model, against the plain one.

``bench/wm_anatomy.py`` shows where an aligned pair's midpoint loses its loss. On the zoo's
ViTs the first attention block and the embedding carry most of it while holding a few percent of
‖θ_A − π(θ_B)‖², which the MLPs dominate. Weighting a part by w (both models' parameters of that
part multiplied by w before matching: the group acts linearly on every parameter, so the
transform found is one for the unweighted pair too) makes the descent spend its effort there.
Each setting's transform is applied to the unweighted pair and the line measured::

    python bench/wm_weighting.py vit-fashion-d128 --weights attn0=4 embed=4,attn0=4
    python bench/wm_weighting.py gpt-shakespeare-d128-drop0.3 --weights attn0=4

A setting is ``part=w[,part=w…]`` with the parts of ``bench/wm_anatomy.py``
(embed, attn{l}, mlp{l}, readout); ``plain`` is the unweighted objective.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from wm_anatomy import load_pair, part_of  # noqa: E402

from landscape.experiments.basins import barrier_from_curve  # noqa: E402
from landscape.experiments.evaluation import EvalOptions, evaluate_path  # noqa: E402
from landscape.matching import weight_matching  # noqa: E402
from landscape.matching.methods import prepare_pair  # noqa: E402
from landscape.symmetry import apply, spec_for  # noqa: E402


def parse(setting: str) -> dict[str, float]:
    if setting == "plain":
        return {}
    return {k: float(v) for k, v in (kv.split("=") for kv in setting.split(","))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--seeds", nargs=2, type=int, default=[0, 1])
    p.add_argument("--group", default="orth")
    p.add_argument("--weights", nargs="+", default=["attn0=4"])
    p.add_argument("--points", type=int, default=11)
    p.add_argument("--limit", type=int, default=None, help="evaluate on the first N rows")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="append the rows here as JSON lines")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    a, b, data, x, y = load_pair(args.model, args.seeds, "test", args.limit)
    cfg, pa, pb = prepare_pair(a.cfg, a.params, b.params, args.group)
    spec = spec_for(cfg)
    lam = torch.linspace(0, 1, args.points, dtype=torch.float64)
    opts = EvalOptions(**data.eval_options(cfg, x))
    print(f"{'setting':24} {'barrier':>8} {'acc. b.':>8} {'objective':>11} {'rounds':>6} "
          f"{'s':>6}")  # fmt: skip
    for setting in ["plain", *args.weights]:
        w = parse(setting)
        # norm gains are left as they are (folded to 1 for rotations, and matching folds them)
        scaled = [{k: v if ".ln" in k or k.startswith("ln_") else v * w.get(part_of(k), 1.0)
                   for k, v in p_.items()} for p_ in (pa, pb)]  # fmt: skip
        t0 = time.perf_counter()
        r = weight_matching(cfg, *scaled, args.group)
        seconds = time.perf_counter() - t0
        aligned = apply(spec, r.transform, pb)
        objective = sum(float((pa[k] - aligned[k]).double().pow(2).sum()) for k in pa)
        loss, acc = evaluate_path(cfg, pa, aligned, x, y, lam, opts)
        c = barrier_from_curve(lam, loss, acc)
        row = {"model": args.model, "group": args.group, "setting": setting,
               "barrier_loss": c.barrier_loss, "barrier_accuracy": c.barrier_accuracy,
               "objective": objective, "rounds": r.rounds, "seconds": round(seconds, 1),
               "points": args.points, "rows": len(x)}  # fmt: skip
        print(f"{setting:24} {c.barrier_loss:8.3f} {c.barrier_accuracy:8.3f} {objective:11.1f} "
              f"{r.rounds:6d} {seconds:6.1f}", flush=True)  # fmt: skip
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
