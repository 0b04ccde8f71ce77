"""What the command handlers share: the registry of commands (:func:`command`, ``COMMANDS``),
the one-line messages on stderr (:func:`say`, :func:`status`), the progress bar on stderr and
the matching method's settings as given on the command line (:func:`matching_settings`).
Torch-free, like the parser (the settings are typed by the method's declarations, imported when
they are read)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from landscape.cli.parser.arguments import LEARNED_CHECKS, LEARNED_OPTIONS
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


def matching_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The matching method's settings given on the command line, as its keywords: every
    ``--option KEY=VALUE``, typed from the method's declared options (an unknown key or a value
    that does not read as its type is one line naming the settings there are, or the type), and
    the ``--learned-*`` flags, learned matching's settings by their own names (refused with
    another method). A command without ``--method``, such as ``table``, gives them to its
    learned rows. A setting equal to the library's default is left out, so it reads the
    default's entry; one said twice (a flag and an ``--option``) is refused."""
    method = getattr(args, "method", "learned")
    flags = [flag for flag in LEARNED_OPTIONS if getattr(args, flag, None) is not None]
    texts = _key_values(getattr(args, "option", None) or [])
    if not flags and not texts:
        return {}
    if flags and method != "learned":
        named = ", ".join("--" + flag.replace("_", "-") for flag in flags)
        raise LandscapeError(f"{named}: for --method learned, not {method}")
    from landscape.matching import given_options, method_of

    entry = method_of(method)
    settings = {LEARNED_OPTIONS[f]: getattr(args, f) for f in flags}
    twice = [f"--{f.replace('_', '-')} and --option {LEARNED_OPTIONS[f]}" for f in flags
             if LEARNED_OPTIONS[f] in texts]  # fmt: skip
    if twice:
        raise LandscapeError(f"{'; '.join(twice)} set one setting: say it once")
    if entry.learned and "space" in texts:
        raise LandscapeError(f"--option space: {entry.title}'s space is the merge space the "
                             "line is measured in (--space where the command has it)")  # fmt: skip
    checked = LEARNED_CHECKS.keys() if entry.learned else set()
    for key in [k for k in texts if k in checked and texts[k].strip().lower() != "none"]:
        try:  # the learned flags' bounds (none, where a setting may be None, is its default)
            LEARNED_CHECKS[key](texts[key])
        except argparse.ArgumentTypeError as err:
            raise LandscapeError(f"--option {key}={texts[key]}: {err}") from None
    try:
        typed = entry.text_settings(texts)
    except LandscapeError as err:
        raise LandscapeError(f"--option: {err}") from None
    return given_options(method, {**settings, **typed})


def _key_values(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts (checked by the parser) by key; a key given twice is refused."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key in out:
            raise LandscapeError(f"--option {key}: given twice ({out[key]!r} and {value!r})")
        out[key] = value
    return out


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
