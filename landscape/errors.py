"""One error type for bad input: the CLI prints its message on one line and exits non-zero."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LandscapeError(Exception):
    """A problem with the user's input or environment, stated in one line."""


class FieldError(LandscapeError):
    """Bad or missing input that one named argument fixes. ``str()`` is the command line's
    sentence, naming its flag; ``plain`` says the same without a flag and ``field`` names the
    argument, so that a form can point to its own field instead (the app's import form)."""

    def __init__(self, message: str, *, field: str, plain: str) -> None:
        super().__init__(message)
        self.field, self.plain = field, plain


class GroupNotAdmitted(LandscapeError, ValueError):
    """A symmetry group asked of a model whose architecture admits it in no processing state
    (e.g. rotations of a post-norm stream). Also a ValueError, as the symmetry engine's other
    refusals of an element are."""


# Seeds are scaled and offset (1000·seed + draw) into 64-bit generator seeds; below 2**32 every
# derived seed fits, where a larger one overflowed deep inside torch.
SEED_LIMIT = 2**32


def check_seed(seed: int, what: str = "seed") -> int:
    """``seed`` if 0 ≤ seed < 2**32, else a one-line error naming ``what``."""
    if not 0 <= seed < SEED_LIMIT:
        raise LandscapeError(f"{what} must be non-negative and below 2**32, got {seed}")
    return seed


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the known name closest to a misspelt ``name``, else ``""``:
    the tail of a one-line error about an unknown name."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]}?" if close else ""
