"""The ``landscape`` command line (docs/design.md §5).

Every command takes ``--json`` (one JSON object on stdout; progress on stderr), ``--device`` and
``--threads`` (``landscape.threads``).
Bad input exits with status 2 and one line on stderr naming the problem; set
``LANDSCAPE_DEBUG=1`` to see tracebacks of unexpected errors. The commands' options are
``landscape.cli.parser``, their handlers ``landscape.cli.handlers``, what they print for people
``landscape.cli.summaries``; here they are parsed, run and written out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from landscape.cli import handlers  # noqa: F401  (importing it registers the commands)
from landscape.cli.parser import build_parser
from landscape.cli.running import COMMANDS, say, settings_listing
from landscape.cli.summaries import show, terminal_safe
from landscape.errors import LandscapeError


def _width(args: argparse.Namespace) -> int:
    """The model width that ``--threads auto`` is chosen for: the zoo model's, else 256."""
    from landscape.models.zoo import ZOO

    model = getattr(args, "model", None)
    return ZOO[model].config.d_model if isinstance(model, str) and model in ZOO else 256


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
        listing = settings_listing(args)  # --option help: the method's settings, not a run
        if listing is not None:
            print(listing)
            return 0
        if getattr(args, "figure", None):  # an existing figure is refused before the work
            from landscape.plots.files import check_figure_target

            check_figure_target(args.figure, args.force)
        from landscape.budget import long_work
        from landscape.device import resolve_device
        from landscape.threads import resolve_threads, using

        # the one place --device is resolved: everything below takes a torch.device
        args.device = resolve_device(args.device)
        # and --threads: torch's count for the command, restored after it; --yes lifts the
        # time limits (landscape.budget.check_work) for the command
        with using(resolve_threads(args.threads, _width(args))), long_work(args.yes):
            result = COMMANDS[args.command](args)
    except LandscapeError as e:
        say(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        say("interrupted; nothing partial was stored")
        return 130
    except Exception as e:  # unexpected: still one line unless debugging
        if os.environ.get("LANDSCAPE_DEBUG"):
            raise
        say(f"error: {type(e).__name__}: {e}")
        return 1
    if getattr(args, "figure", None):
        try:
            from landscape.plots.files import write_figures

            result["figures"] = write_figures(args.command, result, args.figure, args.size,
                                              force=args.force)  # fmt: skip
        except LandscapeError as e:  # the result stands; say that the figure failed
            say(f"error: {e}")
            print(_output(args, result))
            return 2
    # a broken function or a NaN check is never only a field: it is said on stderr too
    for warning in result.get("warnings", []):
        say(f"warning: {warning}")
    print(_output(args, result))
    return 0


def _output(args: argparse.Namespace, result: dict[str, Any]) -> str:
    """What stdout gets: one JSON object (``--json``), else the summary for people with every
    control character but its own line breaks written as a visible escape (names, labels and
    paths in it may come from files). JSON escapes C0 and, as ASCII, C1 itself; DEL, valid raw
    in JSON, is escaped here too, so no control character reaches the terminal either way."""
    if args.json:
        return json.dumps(_clean(result)).replace("\x7f", "\\u007f")
    return terminal_safe(show(args.command, result), keep="\n")


if __name__ == "__main__":
    sys.exit(main())
