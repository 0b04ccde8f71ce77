"""The summary of ``merges``."""

from __future__ import annotations

from typing import Any

from landscape.cli.summaries.formatting import (
    _facts,
    _matching,
    _pairs_text,
    _pm,
    _secs,
    _wrap,
    columns,
    layout,
)
from landscape.numbers import number


@layout("merges")
def _show_merges(r: dict[str, Any]) -> list[str]:
    """Per path (the line, then each operator), the barrier naive, aligned and the gain."""
    pairs = [p["seeds"] for p in r["pairs"]]
    many = len(pairs) > 1
    aligned = _matching(r)
    rows = []
    for x in r["rows"]:
        row = {"operator": "straight line" if x["operator"] == "line" else x["operator"]}
        for metric, kind in (("loss", ""), ("accuracy", "%")):
            for col in ("naive", "aligned", "gain"):
                key = f"{metric}_{col}"
                row[f"{metric} {col}"] = _pm(kind, x[key], x.get(f"{key}_sem"), many)
        rows.append(row)
    spread = " ± s.e.m." if many else ""
    heads = {"loss naive": f"loss naive (nats){spread}", "loss aligned": "loss aligned",
             "loss gain": "gain", "accuracy naive": "accuracy naive",
             "accuracy aligned": "accuracy aligned", "accuracy gain": "gain"}  # fmt: skip
    title = (f"{r['model']}: barriers of mergekit's merge operators over {_pairs_text(pairs)}; "
             f"{r['split']} split, {r['points']} points on λ")  # fmt: skip
    facts = [
        ("alignment", aligned),
        ("operators", f"B the base, A − B the task vector at weight λ (λ = 1 is A); density "
                      f"{number(r['density'])}, DARE seed {r['merge_seed']}; mergekit "
                      f"{r['mergekit']}"),
        ("barriers", "against the chord between A and B; gain = naive − aligned (positive: "
                     "the alignment lowers the barrier)"),
        ("time", _secs(r.get("seconds"))),
    ]  # fmt: skip
    verdict = ("function checks: every alignment kept both functions" if r.get("function_ok", True)
               else "function checks: FAILED, see the warnings above")  # fmt: skip
    return [*_wrap("", title), "", *columns(rows, heads=heads), "", *_facts(facts), verdict]
