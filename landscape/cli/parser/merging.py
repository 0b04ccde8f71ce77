"""The parsers of the commands that write or merge aligned models: ``align`` and ``merges``."""

from __future__ import annotations

import argparse

from landscape.cli.parser.arguments import (
    GROUP_HELP,
    MERGE_DENSITY,
    MERGE_METHODS,
    MERGE_OPERATORS,
    MERGE_POINTS,
    METHOD_HELP,
    MODEL_HELP,
    PAIR_HELP,
    SPLIT_HELP,
    _distinct,
    _float_in,
    _learned_options,
    _points,
    _seed,
)
from landscape.names import BARRIER_GROUPS, METHODS


def add_align(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("align", parents=[common],
                       help="write B aligned to A (or their merge) as a checkpoint")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("alignment"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--out", required=True,
                   help="new folder to write: B's own format (a Hugging Face directory for a "
                        "model imported from one, else the landscape format)")  # fmt: skip
    p.add_argument("--merge", type=_float_in(0.0, 1.0), metavar="λ",
                   help="write the model at λ on the line instead (λ = 1 is A), and its loss "
                        "beside the curve's value there")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test",
                   help="data split the merge's loss is measured on")  # fmt: skip
    p.add_argument(
        "--mergekit-config",
        metavar="PATH",
        help="also write a mergekit YAML config there that merges A and the aligned "
        "B (run it with mergekit-yaml PATH OUT; pip install 'landscape[merge]')",
    )
    p.add_argument("--merge-method", choices=MERGE_METHODS, default="linear",
                   help="mergekit merge method of --mergekit-config (B is the base of the "
                        "methods that need one)")  # fmt: skip
    p.add_argument("--merge-weight", type=_float_in(0.0, 1.0), default=0.5, metavar="λ",
                   help="λ of --mergekit-config: A's weight (λ = 1 is A)")  # fmt: skip
    p.add_argument("--out-a", metavar="DIR",
                   help="new folder for A processed as B was (folded gains, centred writers), "
                        "which --mergekit-config needs when the group processes the "
                        "weights")  # fmt: skip


def add_merges(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "merges", parents=[common],
        help="mergekit's merge operators (SLERP, TIES, DARE) beside the straight line, naive and "
             "aligned",
        description="For every pair of --seeds (B, the later seed, aligned to A), naive and "
        "aligned by --method/--group: the loss and accuracy of mergekit's merge operators along "
        "λ, run through mergekit itself (pip install 'landscape[merge]'), beside the straight "
        "line at the same λ, and the table of their barriers, naive against aligned. Models "
        "share no base: B is the base and A − B the one task vector at weight λ, so every "
        "operator is a curve from B (λ = 0) towards A (λ = 1); slerp is t = λ from B. TIES and "
        "DARE keep --density of the task vector (not mergekit's default 1, which keeps it all); "
        "at λ = 1 they are not A, and every barrier is measured against the line's chord "
        "between A and B. mergekit reads Hugging Face directories: the pair must be a family of "
        "them, or a zoo model of Llama's layout (llama-shakespeare-d128).",
    )  # fmt: skip
    p.add_argument("model", help="imported family of Hugging Face checkpoints (`landscape "
                   "family`; seeds are member numbers), or llama-shakespeare-d128")  # fmt: skip
    p.add_argument("--seeds", type=_seed, nargs="+", required=True, metavar="S",
                   action=_distinct("merge"),
                   help="two or more seeds (or family members): every pair of them")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--operators", choices=MERGE_METHODS, nargs="+", default=list(MERGE_OPERATORS),
                   metavar="OP",
                   help=f"mergekit merge methods: {', '.join(MERGE_METHODS)} (linear is the "
                        "straight line itself, a check of the round trip)")  # fmt: skip
    p.add_argument("--points", type=_points, default=MERGE_POINTS,
                   help="λ points of every curve, λ = 0 and λ = 1 included (each point is one "
                        "mergekit run per operator and alignment)")  # fmt: skip
    p.add_argument("--density", type=_float_in(0.0, 1.0, open_low=True), default=MERGE_DENSITY,
                   help="fraction of the task vector TIES keeps (the largest entries) and DARE "
                        "keeps (at random, rescaled)")  # fmt: skip
    p.add_argument("--merge-seed", type=_seed, default=0, help="seed of DARE's random drop")
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    _learned_options(p)
