"""What the command handlers share: the registry of commands (:func:`command`, ``COMMANDS``),
the one-line messages on stderr (:func:`say`, :func:`status`), the progress bar on stderr and
learned matching's options as given on the command line. Torch-free, like the parser."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from landscape.cli.parser.arguments import LEARNED_OPTIONS
from landscape.cli.summaries import terminal_safe
from landscape.errors import LandscapeError
from landscape.progress import Progress, fraction

Handler = Callable[[argparse.Namespace], dict[str, Any]]
COMMANDS: dict[str, Handler] = {}  # command name → its handler (landscape.cli.handlers)


def command(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of command ``name``."""

    def register(fn: Handler) -> Handler:
        COMMANDS[name] = fn
        return fn

    return register


def learned_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--learned-*`` options given, as learned matching's keywords; refused with another
    method (a command without ``--method``, such as ``table``, gives them to its learned rows).
    One equal to the library's default is left out, so it reads the default's entry."""
    given = [flag for flag in LEARNED_OPTIONS if getattr(args, flag) is not None]
    if not given:
        return {}
    if getattr(args, "method", "learned") != "learned":
        flags = ", ".join("--" + flag.replace("_", "-") for flag in given)
        raise LandscapeError(f"{flags}: for --method learned, not {args.method}")
    from landscape.matching import given_options

    return given_options("learned", {LEARNED_OPTIONS[f]: getattr(args, f) for f in given})


def say(text: object) -> None:
    """``landscape: text`` as one line on stderr. Every message the command line prints there
    goes through here: it may echo names, labels, paths and text from files, so every control
    character is written as a visible escape (``landscape.cli.summaries.terminal_safe``)."""
    print(f"landscape: {terminal_safe(text)}", file=sys.stderr, flush=True)


def status(text: str) -> None:
    say(f"{text} ...")


@contextlib.contextmanager
def progress_bar(desc: str) -> Iterator[Progress]:
    """A progress bar on stderr fed by ``progress(stage, done, total)`` (``landscape.progress``):
    the bar shows the fraction done, the postfix the stage (and a count that is not a fraction)."""
    from tqdm import tqdm

    bar = tqdm(total=100, desc=terminal_safe(desc), file=sys.stderr, leave=False)

    def progress(stage: str, done: float, total: float) -> None:
        stage = terminal_safe(stage)  # it may name a member's label or a file
        bar.set_postfix_str(stage if total == 1 else f"{stage} {done:g}/{total:g}")
        bar.update(round(100 * fraction(done, total)) - bar.n)

    try:
        yield progress
    finally:
        bar.close()
