"""The summary of ``zoo``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from landscape.cli.summaries.formatting import (
    columns,
    layout,
)


def _seed_ranges(seeds: Sequence[int]) -> str:
    """0, 1, 2, 5 → 0–2, 5."""
    out: list[tuple[int, int]] = []
    for s in sorted(seeds):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in out) or "none"


@layout("zoo")
def _show_zoo(r: dict[str, Any]) -> list[str]:
    rows = [{"name": m["name"], "dataset": m["dataset"], "parameters": m["parameters"],
             "seeds": (_seed_ranges(m.get("shipped_seeds") or []) if m.get("ships", True)
                       else "not shipped"),
             "description": f"{m['description']}\n{m['architecture']}"}
            for m in r["models"]]  # fmt: skip
    return [f"{len(rows)} zoo models; the seeds shown are shipped and load at once, any other is "
            "trained on first use", "", *columns(rows)]  # fmt: skip
