"""What the commands' parsers share: the choices and defaults mirrored from the library
(a test keeps them equal), the help texts several commands use, the options every command
takes, the help formatter and the parser class, the argument types checked while parsing, and
the option groups of learned matching and of Ray's executor.

Built without torch, numpy or scipy, so that ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import Any

from landscape.budget import MAX_STEPS
from landscape.errors import LandscapeError, check_seed, did_you_mean

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
SURFACE_DIRECTIONS = ("random", "hessian", "trajectory")
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
            raise argparse.ArgumentTypeError(f"must lie in {bracket}{low:g}, {high:g}], got {text}")
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
LEARNED_BATCH = {"rows": 64, "tokens": 8192}  # matching.learning's BATCH_ROWS, BATCH_TOKENS
LEARNED_INITS = ("weight", "identity")


def _learned_init(text: str) -> str:
    if text not in LEARNED_INITS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LEARNED_INITS)}, got "
                                         f"{text!r}")  # fmt: skip
    return text


# the bounds the learned flags are read with, by setting: --option KEY=VALUE with learned
# matching is read through them too, so that a flag and its --option refuse alike
LEARNED_CHECKS: dict[str, Callable[[str], Any]] = {
    "steps": _count, "batch_size": _count, "lr": _float_in(0, 10, open_low=True),
    "init": _learned_init,
}  # fmt: skip


def _setting(text: str) -> str:
    """``KEY=VALUE``, a setting of the matching method (typed against the method's declared
    options when the command runs, ``landscape.cli.running.matching_settings``), or ``help``
    (the method's settings listed, ``landscape.cli.running.settings_listing``)."""
    if text == "help":
        return text
    key, eq, _ = text.partition("=")
    if not eq or not key.strip() or key != key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE or help, got {text!r}")
    return text


def _learned_options(p: argparse.ArgumentParser, when: str = "with --method learned") -> None:
    """The matching method's settings: ``--option KEY=VALUE`` for any setting the method
    declares, and learned matching's own flags; unset ones keep the library's defaults (and
    cache keys). ``when`` says where the learned flags apply."""
    p.add_argument("--option", type=_setting, action="append", metavar="KEY=VALUE",
                   help="a setting of the matching method by its name, typed as the method "
                        "declares it (repeatable; e.g. --option max_rounds=20 with --method "
                        "weight, --option steps=100 with --method learned; --option help lists "
                        "the method's settings with their types, defaults and meaning; an "
                        "unknown name is refused with the method's settings named; default: "
                        "the method's own)")  # fmt: skip
    d = LEARNED_DEFAULTS
    p.add_argument("--learned-steps", type=LEARNED_CHECKS["steps"],
                   help=f"{when}: optimisation steps "
                        f"(default: {d['steps']})")  # fmt: skip
    p.add_argument("--learned-batch", type=LEARNED_CHECKS["batch_size"],
                   help=f"{when}: rows per batch (default: "
                        f"{LEARNED_BATCH['rows']} images, or {LEARNED_BATCH['tokens']:,} tokens "
                        "of a language model's windows)")  # fmt: skip
    p.add_argument("--learned-lr", type=LEARNED_CHECKS["lr"],
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
