"""Tables as the pages show them: a symmetry table with valid and invalid rows coloured, and
results tables that hold a projector's width."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app.components.layout import presentation
from landscape.plots.theme import points

# the library's records keep an accuracy barrier as a fraction; a screen shows points
FRACTION, POINTS = "accuracy barrier (fraction)", "accuracy barrier (points)"

VALID_BG, INVALID_BG = "#e3f4ec", "#fbe6d9"


def styled_table(rows: list[dict[str, Any]], *, brief: bool = False):  # -> pandas Styler
    """A symmetry table (``landscape.symmetry.symmetry_table`` rows) as the pages show it:
    valid rows green, invalid ones orange, |Δlogits| in scientific notation. ``brief``: only
    what its figure needs (group, valid, |Δlogits|, the step that makes it valid), for a
    projector; what each acts on and why go to a details expander."""
    columns = {
        "group": [r["group"] for r in rows],
        # a non-breaking space: a narrow column (presentation mode) keeps the mark by its word
        "valid": ["✓\u00a0valid" if r["valid"] else "✗\u00a0invalid" for r in rows],
        "max |Δlogits|": [r["max_abs_dlogits"] for r in rows],
        "to make it valid": [r["needs"] or "—" for r in rows],
    }
    if not brief:
        columns |= {"acts on": [r["acts_on"] for r in rows], "why": [r["note"] for r in rows]}
    frame = pd.DataFrame(columns)
    colours = [VALID_BG if r["valid"] else INVALID_BG for r in rows]
    return (
        frame.style.apply(lambda col: [f"background-color: {c}" for c in colours], axis=0)
        .set_properties(subset=["group", "valid", "max |Δlogits|"], **{"white-space": "nowrap"})
        .format({"max |Δlogits|": "{:.1e}"})
    )


def on_screen(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Library records (merge operators, curved paths) as a screen shows them: the accuracy
    barrier in percentage points, its column named so."""
    return [{(POINTS if k == FRACTION else k): (points(v) if k == FRACTION else v)
             for k, v in r.items()} for r in rows]  # fmt: skip


def results_table(frame: pd.DataFrame) -> None:
    """A table of results: a data grid on a screen, a static table in presentation mode, whose
    cells wrap where a grid's fixed columns would run off a projector's width."""
    if presentation():
        st.table(frame.style.hide(axis="index"))
    else:
        st.dataframe(frame, hide_index=True)
