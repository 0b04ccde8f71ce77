"""The circuits space's line: the joint form against every endpoint in circuit form.

The line between two models' circuits can be evaluated two ways (landscape/models/circuits.py):
each endpoint rewritten in circuit form (heads d + 1 wide), or both rewritten together in the
joint form (heads 2·d_head wide), which ``circuit_forms`` takes where it is narrower. Both give
the same curve; this prints how much faster the joint form evaluates it, the memory of one
layer's attention parameters in each, and how far the two curves are apart (float32 rounding).

Per model: zoo checkpoints seeds 0 and 1 (shipped or cached) on the first ``--rows`` samples of
the test split, or, for ``gpt-width768``, two random 2-layer GPTs of GPT-2's widths (d = 768,
12 heads of 64) on random tokens. ``--points`` values of λ, the same process, interleaved
repeats, torch threads set explicitly (``--threads``). Prints ratios; asserts nothing.

    .venv/bin/python bench/bench_circuits.py --threads 1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import machine_line, race, table
from landscape import threads as T
from landscape.experiments.evaluation import evaluate_path
from landscape.models import ModelConfig, Params, init_params
from landscape.models.circuits import circuit_form, circuit_forms
from landscape.models.registry import random_inputs

MODELS = ("vit-fashion-d128", "vit-fashion-d256", "gpt-shakespeare-d128", "gpt-width768")


def pair(name: str, rows: int) -> tuple[ModelConfig, Params, Params, torch.Tensor, torch.Tensor]:
    """A model's two endpoints and evaluation data (module docstring)."""
    if name == "gpt-width768":
        cfg = ModelConfig(arch="gpt", d_model=768, d_mlp=3072, n_layers=2, n_out=512,
                          d_vocab=512, n_heads=12, d_head=64, n_ctx=128)  # fmt: skip
        pa, pb = init_params(cfg, 0), init_params(cfg, 1)
        x = random_inputs(cfg, rows, torch.Generator().manual_seed(0))
        return cfg, pa, pb, x, torch.roll(x, -1, dims=1)
    from landscape.sources import data_of
    from landscape.sources.zoo import get_checkpoint

    a, b = get_checkpoint(name, 0), get_checkpoint(name, 1)
    test = data_of(a).evaluation("test")
    pa, pb = ({k: v.float() for k, v in c.params.items()} for c in (a, b))
    return a.cfg, pa, pb, test.inputs[:rows], test.targets[:rows]


def routes(cfg: ModelConfig, pa: Params, pb: Params, x: torch.Tensor, y: torch.Tensor,
           points: int) -> dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:  # fmt: skip
    """The curve by each route, rewrite included."""

    def circuit() -> tuple[torch.Tensor, torch.Tensor]:
        cfg_c, ca = circuit_form(cfg, pa)
        return evaluate_path(cfg_c, ca, circuit_form(cfg, pb)[1], x, y, points)

    def joint() -> tuple[torch.Tensor, torch.Tensor]:
        cfg_j, (ja, jb) = circuit_forms(cfg, [pa, pb])
        return evaluate_path(cfg_j, ja, jb, x, y, points)

    return {"circuit form": circuit, "joint form": joint}


def attention_mb(forms: list[Params]) -> float:
    """MB of the first layer's attention parameters over both endpoints (a tensor that two
    endpoints share counted once)."""
    seen = {id(t): t for f in forms for k, t in f.items() if k.startswith("blocks.0.attn.")}
    return sum(t.numel() * t.element_size() for t in seen.values()) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--rows", type=int, default=512, help="test samples (windows for a GPT)")
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with T.using(args.threads):
        print(machine_line())
        for name in args.models:
            cfg, pa, pb, x, y = pair(name, args.rows if "gpt" not in name else args.rows // 8)
            cfg_c, circ = circuit_form(cfg, pa)[0], [circuit_form(cfg, p)[1] for p in (pa, pb)]
            cfg_j, joint = circuit_forms(cfg, [pa, pb])
            widths = f"{cfg_c.d_head} / {cfg_j.d_head}"
            memory = f"{attention_mb(circ):.2f} / {attention_mb(joint):.2f}"
            out = race(routes(cfg, pa, pb, x, y, args.points), repeats=args.repeats)
            (tc, (lc, ac)), (tj, (lj, aj)) = out["circuit form"], out["joint form"]
            gaps = [f"{(u - v).abs().max():.1e}" for u, v in ((lc, lj), (ac, aj))]
            rows.append([name, widths, memory, f"{tc:.2f}", f"{tj:.2f}", f"{tc / tj:.2f}×", *gaps])
    print(table(["model", "head width (circuit / joint)", "layer 0 attention MB (both ends)",
                 "circuit form s", "joint form s", "speed-up", "max |Δloss|", "max |Δacc|"],
                rows))  # fmt: skip


if __name__ == "__main__":
    main()
