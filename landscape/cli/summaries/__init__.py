"""The command line's summaries for people: what ``landscape COMMAND`` prints without ``--json``.

Without --json a result is a summary for a person: the headline numbers first, with their
units (losses and barriers in nats, accuracies and shares in percent, times in s), four
significant digits, curves as a few rows, tables as columns within WIDTH characters. A command
with a layout in LAYOUTS gets it; any other result is laid out from its keys (human). --json
prints the result itself, unchanged (``landscape.cli``).

The layouts live by command family: :mod:`.checkpoints`, :mod:`.symmetries`, :mod:`.barriers`
(paths and planes), :mod:`.tables` (tables over pairs, seeds and variants) and :mod:`.merging`,
each registering its commands' layouts in ``LAYOUTS`` as it is imported; what they share is
:mod:`.formatting`.
"""

from __future__ import annotations

from typing import Any

# each module registers its commands' layouts as it is imported
from landscape.cli.summaries import (  # noqa: F401
    barriers,
    checkpoints,
    merging,
    symmetries,
    tables,
)
from landscape.cli.summaries.formatting import LAYOUTS, human, terminal_safe

__all__ = ["show", "terminal_safe"]


def show(command: str, result: dict[str, Any]) -> str:
    return "\n".join(LAYOUTS.get(command, human)(result))
