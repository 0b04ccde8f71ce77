"""Figures on a page: each with its PNG/SVG/CSV downloads and registered for the session's
export report, and the report's download."""

from __future__ import annotations

import time
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app import state
from app.components.layout import presentation
from landscape.plots import export


def figure(
    fig: go.Figure, name: str, *, title: str = "", data: Any = None, key: str | None = None,
    settings: dict[str, Any] | None = None, cache_keys: list[str] | None = None,
    tables: dict[str, list[dict[str, Any]]] | None = None,
) -> None:  # fmt: skip
    """A plotly figure with PNG/SVG (at the chosen export size) and CSV downloads, generated
    only on click, and registered for the session's export report.

    ``name``: the files' name. ``title``: what the figure shows, in words; the report heads the
    figure with the page, this title and the model, method(s) and seeds of ``settings``.
    ``data``: the figure's tidy table (``landscape.plots.tidy``: a DataFrame or records), its
    CSV; without, the CSV is the traces' points. ``settings`` (model, seeds, method, group,
    space, split, points, …), ``cache_keys`` and ``tables`` (title → rows: the numbers the page
    shows beside the figure) go into the report beside the figure.
    """
    key = key or name
    # a figure drawn to a pixel box of its own (the triangles) is shown at that width
    width = "content" if fig.layout.width else "stretch"
    # a projector shows no toolbar: it covered the top of a figure's title (drag to zoom and
    # double-click to reset still work)
    config = {"displaylogo": False, "displayModeBar": not presentation()}
    st.plotly_chart(fig, theme=None, key=f"fig-{key}", config=config, width=width)
    state.register_figure(key, export.ReportFigure(name, fig, dict(settings or {}),
                                                   list(cache_keys or []), dict(tables or {}),
                                                   page=state.page_title(),
                                                   title=title))  # fmt: skip
    if presentation():
        return
    row = st.container(horizontal=True, gap="small", vertical_alignment="bottom")
    size = row.selectbox(
        "Export size",
        list(export.SIZES),
        index=list(export.SIZES).index(export.DEFAULT_SIZE),
        key=f"size-{key}",
        format_func=lambda s: export.SIZES[s].label,
        width=240,
        label_visibility="collapsed",
        help="PNG and SVG size; fonts are scaled so that the text prints readably at it",
    )
    preset = export.SIZES[size]
    dpi = "" if size == "slide" else f", {round(preset.png_scale * export.PX_PER_INCH)} dpi"
    # Callables are run only when the button is clicked, so renders never start kaleido.
    row.download_button(
        "PNG",
        data=lambda: export.to_png(fig, size),
        file_name=f"{name}-{size}.png",
        mime="image/png",
        key=f"png-{key}",
        on_click="ignore",
        help=f"{preset.label}{dpi}",
    )
    row.download_button(
        "SVG",
        data=lambda: export.to_svg(fig, size),
        file_name=f"{name}-{size}.svg",
        mime="image/svg+xml",
        key=f"svg-{key}",
        on_click="ignore",
        help=f"Vector, {preset.label}",
    )
    row.download_button(
        "CSV",
        data=lambda: export.to_csv(fig if data is None else data),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv-{key}",
        on_click="ignore",
        help="The plotted numbers, one measured value per row",
    )


def report_button() -> None:
    """A download of the export report: every figure this session drew (each page's figures
    under every setting drawn, :func:`app.state.register_figure`), with its settings, cache keys
    and the versions, in one HTML file. Built on click, from the figures drawn by then (the
    page below this button included)."""
    registry = state.figure_registry()

    def build() -> bytes:
        created = time.strftime("%Y-%m-%d %H:%M %Z")
        return export.report_html(list(registry.values()), created=created).encode()

    st.download_button(
        "Export report",
        data=build,
        file_name="landscape-report.html",
        mime="text/html",
        key="report",
        on_click="ignore",
        icon=":material/description:",
        help="One HTML file with every figure drawn this session, a page's under each of its "
        f"settings shown (the last {state.REPORT_LIMIT}; interactive, opens offline), each "
        "titled by its page, model, method and seeds, with the settings that made it, its "
        "cache keys and the library versions",
    )
