"""How an experiment runs, as one argument: where it computes, which cache it reads and fills,
who hears its progress and how many CPU threads torch uses (:class:`RunContext`).

None of these changes a result or a cache key: they are kept apart from what an entry point
measures (its request and its options), so that the entry points take one ``context`` instead
of four keywords each. :func:`in_context` gives an entry point the context's threads: set once,
at the outermost entry point, and handed down with none asked (a nested call does not choose
again).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import torch

from landscape.device import CPU
from landscape.progress import Progress, within
from landscape.store.cache import Cache
from landscape.threads import resolve_threads, using

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class RunContext:
    """Where and how an entry point runs.

    ``device``: where it computes (resolved by the caller, ``landscape.device.resolve_device``);
    ``cache``: the disk cache (None: ``Cache()``, the default one); ``progress``: who hears its
    stages (``landscape.progress``); ``threads``: torch's CPU threads for the call (None: leave
    the count as it is; ``"auto"``: ``landscape.threads.choose_threads``; a count).
    """

    device: torch.device = CPU
    cache: Cache | None = None
    progress: Progress | None = None
    threads: int | str | None = None

    def within(self, lo: float, hi: float, prefix: str = "") -> RunContext:
        """The context of a part of the work, from fraction ``lo`` to ``hi`` of the whole
        (:func:`landscape.progress.within`)."""
        return replace(self, progress=within(self.progress, lo, hi, prefix))

    def hearing(self, progress: Progress | None) -> RunContext:
        """The same context with ``progress`` heard instead."""
        return replace(self, progress=progress)


RUN = RunContext()  # the default: the CPU, the default cache, no progress, torch's threads


def in_context(fn: F) -> F:
    """Run an entry point that takes ``context: RunContext`` with the context's threads (and
    hand the context on with none asked, so that nested entry points keep that count)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        context = bound.arguments.get("context")
        if context is None or context.threads is None:
            return fn(*args, **kwargs)
        bound.arguments["context"] = replace(context, threads=None)
        with using(resolve_threads(context.threads)):
            return fn(*bound.args, **bound.kwargs)

    return wrapper  # type: ignore[return-value]
