"""The ``landscape`` command line's parser: every command, option, choice and help text.

Built without torch, numpy or scipy, so that ``--help`` answers at once (the handlers in
``landscape.cli`` import what they need when they run). :func:`build_parser` assembles the
commands in the order ``landscape --help`` lists them, each added by its group's module:
:mod:`.checkpoints`, :mod:`.symmetries`, :mod:`.barriers` and :mod:`.merging`; what they
share (choices, help texts, argument types, the common options) is :mod:`.arguments`.
"""

from __future__ import annotations

import argparse

from landscape.cli.parser import barriers, checkpoints, merging, symmetries
from landscape.cli.parser.arguments import (
    FIGURE_COMMANDS,
    FIGURE_SIZES,
    _common,
    _figure_path,
    _Parser,
)

__all__ = ["build_parser"]

# every command, in the order `landscape --help` lists them
COMMAND_PARSERS = (
    checkpoints.add_zoo,
    checkpoints.add_train,
    checkpoints.add_data,
    checkpoints.add_cache,
    symmetries.add_symmetries,
    barriers.add_barrier,
    barriers.add_curve,
    barriers.add_curvature,
    barriers.add_spawn,
    merging.add_align,
    barriers.add_triangle,
    barriers.add_surface,
    symmetries.add_eigenangles,
    symmetries.add_gauge_sweep,
    symmetries.add_transport,
    barriers.add_table,
    barriers.add_ablation,
    barriers.add_kv_sharing,
    barriers.add_matrix,
    merging.add_merges,
    barriers.add_controls,
    barriers.add_widths,
    checkpoints.add_inspect,
    checkpoints.add_family,
    barriers.add_pair_barrier,
    symmetries.add_recover,
)


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="landscape",
        description="Weight-space symmetries and linear mode connectivity of transformers.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add in COMMAND_PARSERS:
        add(sub, common)

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
