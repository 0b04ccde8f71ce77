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
    from landscape.matching import METHODS_BY_NAME, given_options, method_of

    entry = method_of(method)
    if flags and not entry.learned:  # the flags spell the settings of a method that learns
        named = ", ".join("--" + flag.replace("_", "-") for flag in flags)
        learning = " or ".join(m.name for m in METHODS_BY_NAME.values() if m.learned)
        raise LandscapeError(f"{named}: for --method {learning}, not {method}")
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
        raise LandscapeError(f"--option: {err}{_declared_elsewhere(entry, texts)}") from None
    return given_options(method, {**settings, **typed})


def _declared_elsewhere(entry: Any, texts: dict[str, str]) -> str:
    """What an error adds for keys ``entry`` does not declare that other methods do: whose
    settings they are (``; 'steps' is a setting of learned matching (--method learned)``)."""
    from landscape.matching import declaring

    own = {s.name for s in entry.declared()}
    said = []
    for key in (k for k in texts if k not in own):
        owners = [m for m in declaring(key) if m.name != entry.name]
        if owners:
            whose = " and of ".join(f"{m.title} (--method {m.name})" for m in owners)
            said.append(f"; {key!r} is a setting of {whose}")
    return "".join(said)


def settings_listing(args: argparse.Namespace) -> str | None:
    """What ``--option help`` prints instead of running the command: every setting the chosen
    method declares (a command without ``--method``: learned matching's, for its learned rows),
    each with its type, default and help, as ``--option`` reads it; None when not asked."""
    if OPTION_HELP not in (getattr(args, "option", None) or []):
        return None
    from landscape.matching import method_of

    entry = method_of(getattr(args, "method", "learned"))
    declared = entry.declared()
    head = f"{entry.title} (--method {entry.name})"
    if not declared:
        return f"{head} has no settings"
    width = max(len(s.name) for s in declared)
    lines = [f"{head}: its settings, each given as --option KEY=VALUE"]
    for s in declared:
        default = "none" if s.default is None else s.default
        lines.append(f"  {s.name.ljust(width)}  {s.kind()}, default {default}: {s.help}")
    return "\n".join(lines)


OPTION_HELP = "help"  # --option help: the method's settings listed (settings_listing)


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
