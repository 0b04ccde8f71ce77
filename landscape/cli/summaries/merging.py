"""The summary of ``merges``."""

from __future__ import annotations

from typing import Any

from landscape.cli.summaries.formatting import (
    _facts,
    _matching,
    _pairs_text,
    _pm,
    _secs,
    _verdict,
    _wrap,
    columns,
    layout,
)
from landscape.numbers import number


@layout("merges")
def _show_merges(r: dict[str, Any]) -> list[str]:
    """Per path (the line, then each operator), the barrier naive, aligned and the gain."""
    from landscape.experiments.merging.operators import MERGES_RESULT, MERGES_ROW, PAIR_MERGES

    R, X = MERGES_RESULT.read, MERGES_ROW.read  # the result's and its rows' declared fields
    pairs = [PAIR_MERGES.read(p, "seeds") for p in R(r, "pairs")]
    many = len(pairs) > 1
    aligned = _matching(r, MERGES_RESULT)
    rows = []
    for x in R(r, "rows"):
        operator = X(x, "operator")
        row = {"operator": "straight line" if operator == "line" else operator}
        for metric, kind in (("loss", ""), ("accuracy", "%")):
            for col in ("naive", "aligned", "gain"):
                key = f"{metric}_{col}"
                row[f"{metric} {col}"] = _pm(kind, X(x, key), X(x, f"{key}_sem"), many)
        rows.append(row)
    spread = " ± s.e.m." if many else ""
    heads = {"loss naive": f"loss naive (nats){spread}", "loss aligned": "loss aligned",
             "loss gain": "gain", "accuracy naive": "accuracy naive",
             "accuracy aligned": "accuracy aligned", "accuracy gain": "gain"}  # fmt: skip
    title = (f"{R(r, 'model')}: barriers of mergekit's merge operators over "
             f"{_pairs_text(pairs)}; {R(r, 'split')} split, {R(r, 'points')} points on "
             "λ")  # fmt: skip
    facts = [
        ("alignment", aligned),
        ("operators", f"B the base, A − B the task vector at weight λ (λ = 1 is A); density "
                      f"{number(R(r, 'density'))}, DARE seed {R(r, 'merge_seed')}; mergekit "
                      f"{R(r, 'mergekit')}"),
        ("barriers", "against the chord between A and B; gain = naive − aligned (positive: "
                     "the alignment lowers the barrier)"),
        ("time", _secs(R(r, "seconds"))),
    ]  # fmt: skip
    return [*_wrap("", title), "", *columns(rows, heads=heads), "", *_facts(facts),
            _verdict(r, MERGES_RESULT)]  # fmt: skip
