"""The session's figures, for the export report: every figure a page drew, under the title of
the page that drew it."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

FIGURES = "_session_figures"  # session key: {identity: ReportFigure}, in the order first drawn
LATEST = "_session_figures_latest"  # session key: {figure key: identity of its last drawing}
PAGE = "_session_page"  # session key: the title of the page this run draws
REPORT_LIMIT = 100  # figures the report keeps: past it, the one first drawn is dropped


def figure_registry() -> dict[str, Any]:
    """The session's figures by identity (:func:`register_figure`): every figure drawn this
    session (a :class:`landscape.plots.export.ReportFigure`), in the order first drawn. The dict
    itself, so that a download prepared on click sees the figures drawn after it was offered."""
    return st.session_state.setdefault(FIGURES, {})


def figure_identity(key: str, entry: Any) -> str:
    """What tells one drawing of a figure from another: its key on the page, its file name and
    its settings (another model, other seeds, methods or split make another figure)."""
    settings = json.dumps(entry.settings, sort_keys=True, default=str)
    return f"{key}\n{entry.name}\n{settings}"


def register_figure(key: str, entry: Any) -> None:
    """Remember the figure drawn under ``key``, for the export report. Every figure a page drew
    is kept: drawn under other settings (another model, seeds, methods) it joins the earlier
    ones, which stay; drawn again with the same (a rerun, a moved λ marker) it replaces its
    earlier version and keeps its place. At most :data:`REPORT_LIMIT` are kept, the first
    drawn dropped first."""
    registry = figure_registry()
    identity = figure_identity(key, entry)
    registry[identity] = entry
    st.session_state.setdefault(LATEST, {})[key] = identity
    while len(registry) > REPORT_LIMIT:
        del registry[next(iter(registry))]


def session_figures() -> list[Any]:
    """Every figure this session has drawn (its latest version), in the order first drawn."""
    return list(figure_registry().values())


def on_page(title: str) -> None:
    """Say which page this run draws (``app/main.py``, before the page runs): its figures are
    reported under its title."""
    st.session_state[PAGE] = title


def page_title() -> str:
    """The title of the page this run draws ("" before :func:`on_page`)."""
    return st.session_state.get(PAGE, "")
