"""The parsers of the commands about the symmetries themselves: ``symmetries`` (measured),
``eigenangles`` (the rotations found), ``gauge-sweep`` and ``transport`` (random gauges,
artifacts moved across them) and ``recover`` (planted and aligned back).
"""

from __future__ import annotations

import argparse

from landscape.cli.parser.arguments import (
    MODEL_HELP,
    POINTS_HELP,
    RECOVER_LEVELS,
    _count,
    _distinct,
    _executor,
    _float_in,
    _points,
    _run_steps,
    _seed,
)
from landscape.names import METHODS, MONOMIAL_GROUPS


def add_symmetries(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("symmetries", parents=[common],
                       help="measure Δlogits under a random element of every group")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP + ", or a checkpoint directory")
    p.add_argument("--seed", type=_seed, help="checkpoint seed (zoo models)")
    p.add_argument("--norm", choices=["rms", "ln"],
                   help="instead of the checkpoint, a fresh random model of the same shape "
                        "with this norm (to compare RMSNorm with LayerNorm)")  # fmt: skip
    p.add_argument("--draw", type=_seed, default=0, help="seed of the random group elements")


def add_eigenangles(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("eigenangles", parents=[common],
                       help="eigenangles of the weight-matching and learned rotations")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("rotation"),
                   help="models A and B (seeds or member numbers); the rotations align B to "
                        "A")  # fmt: skip
    p.add_argument("--iterations", action="store_true",
                   help="also the barrier per weight-matching round (perm and orth) and per "
                        "learned-matching checkpoint (from the identity and from weight "
                        "matching), under the key iterations")  # fmt: skip
    p.add_argument("--max-rounds", type=_count, help="cap on weight-matching rounds "
                   "(with --iterations; default: weight matching's own)")  # fmt: skip
    p.add_argument("--checkpoints", type=_count, help="learned-matching checkpoints after "
                   "the start (with --iterations; default 6)")  # fmt: skip
    p.add_argument("--points", type=_points, help="λ points of every line "
                   "(with --iterations; default 11)")  # fmt: skip


def add_gauge_sweep(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("gauge-sweep", parents=[common],
                       help="which coordinate claims survive random gauges")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seed", type=_seed, default=0, help="checkpoint seed (or member number)")
    p.add_argument("--draws", type=_count, default=3, help="random gauges per group")
    p.add_argument("--parts", nargs="+", default=None,
                   help="table scramble recovery trajectory claims (default: all)")  # fmt: skip
    p.add_argument("--steps", type=_run_steps(0), nargs="+", default=[0, 10, 30, 100, 300],
                   help="fine-tuning steps of drift for the recovery part")  # fmt: skip
    p.add_argument("--trajectory-steps", type=_run_steps(1), default=1500,
                   help="training steps of the run the trajectory part stores")  # fmt: skip
    p.add_argument("--trajectory-every", type=_count, default=10,
                   help="steps between the checkpoints it stores, each in its own random "
                        "gauge")  # fmt: skip
    p.add_argument("--lr", type=_float_in(0, 1, open_low=True), default=None,
                   help="learning rate of the recovery part's fine-tuning (default: the "
                        "model's own, a family's record or the zoo recipe's)")  # fmt: skip
    _executor(p, "the draws of every part")


def add_transport(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("transport", parents=[common],
                       help="move probes, SAEs, LoRA, optimizer state across gauges")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seed", type=_seed, default=0, help="checkpoint seed (or member number)")
    p.add_argument("--gauge-seed", type=_seed, default=0, help="seed of the random gauge g")
    p.add_argument("--artifact", help="transport this artifact (.safetensors + .json sidecar)")
    p.add_argument("--to-seed", type=_seed,
                   help="with --artifact: into this seed's coordinates")  # fmt: skip
    p.add_argument("--group", choices=MONOMIAL_GROUPS, default="signed-perm",
                   help="with --artifact: the group of g, or of the matching into --to-seed's "
                        "coordinates")  # fmt: skip
    p.add_argument("--mode", choices=["exact", "perm-only", "none"], default="exact",
                   help="with --artifact: exact (the whole transform), perm-only (its signs "
                        "dropped) or none (the artifact unchanged)")  # fmt: skip
    p.add_argument("--out", help="with --artifact: where to write the transported artifact")
    p.add_argument("--lora-steps", type=_count, default=150,
                   help="without --artifact: steps of the table's LoRA adapter")  # fmt: skip
    p.add_argument("--adamw-steps", type=_count, default=30,
                   help="without --artifact: AdamW steps before the state is moved, and again "
                        "after, in the table's optimizer row")  # fmt: skip


def add_recover(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "recover", parents=[common],
        help="scramble a model with a planted symmetry and align it back: units recovered",
        description="For each group level: a random function-preserving element of the level "
        "(seed --draw) applied to the model, the scrambled model's function checked, then "
        "aligned back to the original by --method; the fraction of units recovered (slots "
        "and signs of permutations; columns within a tolerance of rotations and within-head "
        "maps), the distance ‖found − planted⁻¹‖_F / ‖planted⁻¹‖_F, the barrier between the "
        "original and the recovered model, and the matching's seconds (docs/design.md §5).",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP + ", or a checkpoint path")
    p.add_argument("--seed", type=_seed, help="checkpoint seed (zoo models) or member number")
    p.add_argument("--groups", nargs="+", choices=RECOVER_LEVELS, metavar="LEVEL",
                   help="group levels to plant, each on its own (default: perm signed-perm "
                        "orth qk ov, those the model admits; also perm-global-sign, "
                        "orth-mean)")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight",
                   help="how the scrambled model is aligned back: weight, activation or learned "
                        "matching, or naive (not at all: the control)")  # fmt: skip
    p.add_argument("--draw", type=_seed, default=0, help="seed of the planted elements")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="precision of the scramble and the matching (float64: every score is "
                        "the algorithm's, not float32 storage's)")  # fmt: skip
    p.add_argument("--points", type=_points, default=11, help=POINTS_HELP)
    p.add_argument("--text", help="UTF-8 text file: a language-model path's data")
    p.add_argument("--data", choices=["digits", "fashion"], help="image data: a classifier path's")
    p.add_argument("--data-dir", help="directory of the Fashion-MNIST IDX files")
