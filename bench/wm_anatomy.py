"""Where an aligned pair's midpoint loses its loss: one part of the model at a time.

For a pair aligned by a method (read from the cache, else computed), with θ_A the processed A,
θ_B' the aligned B and θ_mid = ½(θ_A + θ_B'), each part of the model (the embedding, each
block's attention, each block's MLP, the readout) gets three numbers:

- ``share of distance``: its share of the matching objective ‖θ_A − θ_B'‖², where weight
  matching spends its effort;
- ``alone``: the loss of θ_A with only this part averaged, minus A's loss: what averaging this
  part costs by itself;
- ``removed``: the midpoint's loss minus the loss of θ_mid with this part set to A's values:
  how much of the midpoint's excess this part carries, with every other part averaged.

The parts' ``alone`` sum to the midpoint excess only when they do not interact; the gap says
how much they do. Norm gains are folded into the readers for the orthogonal group, so they are
not parts of their own::

    python bench/wm_anatomy.py vit-fashion-d128 --methods weight/orth learned/orth
    python bench/wm_anatomy.py gpt-shakespeare-d128-drop0.3 --methods weight/orth

Learned matching is read from the cache when it is there (``landscape barrier … --method
learned`` stores it); computing it here takes minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landscape.experiments.barriers.alignment import align  # noqa: E402
from landscape.experiments.evaluation import EvalOptions, evaluate_path  # noqa: E402
from landscape.sources import Source, data_of  # noqa: E402


def part_of(name: str) -> str:
    """The part of the model a parameter belongs to: embed, attn{l}, mlp{l} or readout."""
    m = re.match(r"blocks\.(\d+)\.(attn|mlp|ln1|ln2)\.", name)
    if m:
        layer, kind = m.groups()
        return f"{'attn' if kind in ('attn', 'ln1') else 'mlp'}{layer}"
    if name.startswith(("unembed.", "ln_final.")):
        return "readout"
    return "embed"


def _place(part: str) -> tuple[int, int, str]:
    """embed, then the blocks in order (attention before MLP), then the readout."""
    if part in ("embed", "readout"):
        return (0 if part == "embed" else 2, 0, part)
    return (1, int(re.sub(r"\D", "", part)), part)


def load_pair(model: str, seeds, split: str, limit: int | None):
    """Seeds A and B of ``model``, A's data and its ``split`` (the first ``limit`` rows)."""
    a, b = Source(model, seeds[0]).load(), Source(model, seeds[1]).load()
    data = data_of(a)
    ev = data.evaluation(split)
    x, y = ev.inputs, ev.targets
    if limit:
        x, y = x[:limit], y[:limit]
    return a, b, data, x, y


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--seeds", nargs=2, type=int, default=[0, 1])
    p.add_argument("--methods", nargs="+", default=["weight/orth", "learned/orth"])
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=None, help="evaluate on the first N rows")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write the rows here as JSON lines")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    a, b, data, x, y = load_pair(args.model, args.seeds, args.split, args.limit)

    rows = []
    for combo in args.methods:
        method, group = combo.split("/")
        t0 = time.perf_counter()
        al = align(a, b, method, group, options=data.match_options(a.cfg, method))
        seconds = time.perf_counter() - t0
        cfg, pa, pb = al.cfg, al.params_a, al.params_b
        opts = EvalOptions(**data.eval_options(cfg, x))

        def loss(params: dict[str, torch.Tensor], cfg=cfg, opts=opts) -> float:
            lam = torch.ones(1, dtype=torch.float64)  # λ = 1: the first endpoint itself
            return float(evaluate_path(cfg, params, params, x, y, lam, opts)[0][0])

        mid = {k: 0.5 * (pa[k] + pb[k]) for k in pa}
        loss_a, loss_b, loss_mid = loss(pa), loss(pb), loss(mid)
        excess = loss_mid - 0.5 * (loss_a + loss_b)
        parts = sorted({part_of(k) for k in pa}, key=_place)
        dist = {q: sum(float((pa[k] - pb[k]).double().pow(2).sum()) for k in pa if part_of(k) == q)
                for q in parts}  # fmt: skip
        total = sum(dist.values())
        head = {"model": args.model, "method": combo, "loss_a": loss_a, "loss_b": loss_b,
                "loss_mid": loss_mid, "midpoint_excess": excess, "matching_s": round(seconds, 1),
                "cached": al.cached}  # fmt: skip
        print(json.dumps(head), flush=True)
        print(f"{'part':8} {'share of distance':>18} {'alone':>8} {'removed':>8}")
        for q in parts:
            alone = loss({k: (mid[k] if part_of(k) == q else pa[k]) for k in pa}) - loss_a
            removed = loss_mid - loss({k: (pa[k] if part_of(k) == q else mid[k]) for k in pa})
            row = {**head, "part": q, "share_of_distance": dist[q] / total, "alone": alone,
                   "removed": removed}  # fmt: skip
            rows.append(row)
            print(f"{q:8} {dist[q] / total:18.3f} {alone:8.3f} {removed:8.3f}", flush=True)
        print(f"sum of alone {sum(r['alone'] for r in rows if r['method'] == combo):.3f} against "
              f"the midpoint excess {excess:.3f}\n", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
