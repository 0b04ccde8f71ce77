"""The one progress protocol of long work: ``progress(stage, done, total)``.

``done`` of ``total`` in any unit (steps, draws, batches, or a fraction with ``total = 1``);
the fraction done is ``done / total``. Every long computation takes ``progress: Progress | None``
and reports through it; the CLI draws a bar on stderr, the app a ``st.progress`` bar.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, stage: str, done: float, total: float, /) -> None: ...


def fraction(done: float, total: float) -> float:
    """``done / total``, and 1 for an empty total (nothing to do is done)."""
    return done / total if total else 1.0


def tell(progress: Progress | None, stage: str, done: float, total: float = 1.0) -> None:
    """Report to ``progress`` if there is one."""
    if progress is not None:
        progress(stage, done, total)


def within(progress: Progress | None, lo: float, hi: float, prefix: str = "") -> Progress | None:
    """``progress`` of a part of the work that runs from fraction ``lo`` to ``hi`` of the whole:
    the part's ``done/total`` is mapped to ``lo + (hi − lo)·done/total`` (reported with total 1)
    and its stages are prefixed with ``prefix``."""
    if progress is None:
        return None

    def part(stage: str, done: float, total: float) -> None:
        progress(prefix + stage, lo + (hi - lo) * fraction(done, total), 1.0)

    return part
