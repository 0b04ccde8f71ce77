"""The barrier table under the curves: one row per method (and merge space), mean ± s.e.m.
over the pairs, drawn static while the curves are measured and as a grid once they are."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import has_heads
from app.components.layout import presentation
from app.components.long_runs import left_out
from app.sections.interpolation.asked import Asked
from landscape.experiments import PAPER_REFERENCE
from landscape.matching import worst_check
from landscape.numbers import mean_pm
from landscape.plots.fields import BARRIER, INTERPOLATION_SERIES
from landscape.plots.interpolation import ABOVE_NAIVE_MARGIN, ABOVE_NAIVE_SHARE, series_aligns
from landscape.plots.theme import points as in_points

# the table's columns as the page formats them; a projector shows the table without the details
TABLE_COLUMNS = {
    "method": st.column_config.TextColumn(width="small"),
    "max |Δlogits|": st.column_config.NumberColumn(format="%.1e"),
    "pairs": st.column_config.NumberColumn(width="small"),
}
DETAIL_COLUMNS = ["pairs", "max |Δlogits|"]


def _mean_sem(value: tuple[float, float], n: int, places: int) -> str:
    """Mean ± s.e.m. over pairs; with one pair there is no spread to show, so it says n = 1,
    the mean to ``places`` decimals (loss 4, accuracy points 2: one notation down a column)."""
    return mean_pm(*value) if n > 1 else f"{value[0]:.{places}f} (n = 1)"


def static(frame: pd.DataFrame):  # -> pandas Styler
    """The barrier table as a static table (cells wrap): the check in scientific notation."""
    return frame.style.format({"max |Δlogits|": "{:.1e}"}, na_rep="—",
                              subset=[c for c in ["max |Δlogits|"] if c in frame]
                              ).hide(axis="index")  # fmt: skip


def _differs_or_says(column: pd.Series, name: str) -> bool:
    """Whether a column is worth its width: the space when the rows differ in it, the paper's
    numbers when any row has one."""
    if name == "space":
        return column.nunique() > 1
    return bool((column != "").any())


def versus_naive(series: dict, above: dict | None) -> str:
    """A row's word against naive on the same pairs (``above``: its record of
    ``above_naive``, None when neither barrier is clearly above naive's)."""
    if not series_aligns(series):  # naive itself
        return "—"
    if above is None:
        return "not above naive"
    return "above naive in " + " and ".join(above["metrics"])


def _beside_accuracy(row: dict, key: str, value: str) -> dict:
    """``row`` with ``key: value`` right after the accuracy barrier, where it is read."""
    keys = list(row)
    at = keys.index("accuracy barrier (points)") + 1
    return {**{k: row[k] for k in keys[:at]}, key: value, **{k: row[k] for k in keys[at:]}}


def report_rows(table: pd.DataFrame) -> list[dict]:
    """The barrier table for the export report: every column, NaN as None, the function check
    in the page's scientific notation (1.3e-05, where the report's numbers have four digits)."""

    def cell(k: str, v: object) -> object:
        if isinstance(v, float) and v != v:
            return None
        return f"{v:.1e}" if k == "max |Δlogits|" and isinstance(v, float) else v

    return [{k: cell(k, v) for k, v in r.items()} for r in table.to_dict("records")]


def row(asked: Asked, combo: str, space: str, method: str, group: str,
        results: list[dict]) -> dict:  # fmt: skip
    """The table's row of one method in one merge space: its barriers over the pairs measured
    (``results``), the worst function check, the paper's number beside a circuits row."""
    loss = state.mean_sem([BARRIER.read(r, "barrier_loss") for r in results])
    acc = state.mean_sem([in_points(BARRIER.read(r, "barrier_accuracy")) for r in results])
    # the paper measured transformers in the circuits space: its numbers beside those rows only
    paper = (state.paper_value(method, group, asked.arch)
             if space == "circuits" and has_heads(asked.name) else "")  # fmt: skip
    return {
        "method": combo,
        "space": space,
        # the split is in the table's title
        "loss barrier (nats)": _mean_sem(loss, len(results), 4),
        "accuracy barrier (points)": _mean_sem(acc, len(results), 2),
        "pairs": len(results),
        # NaN stays NaN
        "max |Δlogits|": worst_check(BARRIER.read(r, "function_check") for r in results),
        "paper (circuits)": paper,
    }


def _table_notes(shown: pd.DataFrame) -> None:
    """What the barrier table's columns mean, and the paper's numbers beside circuits rows."""
    st.caption(
        "Mean ± standard error over pairs (Table-2 layout); the accuracy barrier in percentage "
        "points (a drop from 95% to 70% accuracy below the chord is 25 points). vs naive: "
        "whether the method's barrier lies above naive's on the same pairs (by more than "
        f"{ABOVE_NAIVE_MARGIN['loss']:g} nats or {in_points(ABOVE_NAIVE_MARGIN['accuracy']):g} "
        f"points, and {ABOVE_NAIVE_SHARE:.0%} of naive's barrier). max |Δlogits| "
        "checks that the aligned B computes the same function as B; in the circuits space a "
        "warning above names any circuit form that does not keep its model's function."
    )
    if "paper (circuits)" in shown:
        ref = PAPER_REFERENCE
        learned = ", ".join(f"{v} ({k})" for k, v in ref["learned/orth"].items())
        st.caption(
            f"paper (circuits): the paper's Table 2 (test-loss barriers in the circuits space, "
            f"independently trained ViTs and GPT-2), beside the circuits rows: naive "
            f"{ref['naive']}, weight matching {ref['weight']}, learned rotations {learned}."
        )


def final_table(slot, rows: list[dict], series: list[dict], above: dict[str, dict],
                missing: list[str], cancelled: bool) -> pd.DataFrame:  # fmt: skip
    """The table in its place (``slot``), once every curve is measured or read: a grid (static
    and without its details on a projector), beside naive's when naive was measured, with what
    is said of it under it: the methods above naive, what the columns mean, and what a
    cancelled (or, not ``cancelled``, a waiting) run left out. Returns the table."""
    if rows and any(not series_aligns(s) for s in series):
        for i, (r, s) in enumerate(zip(rows, series, strict=True)):
            said = above.get(INTERPOLATION_SERIES.read(s, "label"))
            rows[i] = _beside_accuracy(r, "vs naive", versus_naive(s, said))
    table = pd.DataFrame(rows)
    with slot.container():  # the table and what is said of it, in the table's place
        if rows:
            same = [c for c in ("space", "paper (circuits)")
                    if c in table and not _differs_or_says(table[c], c)]  # fmt: skip
            shown = table.drop(columns=same)
            if presentation():  # a static table, without its details, fits a projector's width
                st.table(static(shown.drop(columns=DETAIL_COLUMNS)))
                with st.expander("Details: pairs, function check"):
                    st.table(static(shown))
            else:
                st.dataframe(shown, hide_index=True, column_config=TABLE_COLUMNS)
        for a in above.values():
            st.warning(a["note"], icon=":material/trending_up:")
        if rows:
            _table_notes(shown)
        left_out(missing, cancelled=cancelled)
    return table
