"""The app's pages, in sidebar order: one ``st.Page`` per view, with a stable URL path."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).parent / "views"

# (file, title, icon, url path); the first is where the app's root address leads (``root``).
PAGE_SPECS = (
    ("home.py", "Home", ":material/landscape:", "home"),
    ("interpolation.py", "Interpolation curves", ":material/show_chart:", "interpolation"),
    ("triangle.py", "Triangle heatmaps", ":material/change_history:", "triangle"),
    ("ablation.py", "Llama ablation", ":material/tune:", "ablation"),
    ("surface.py", "Surface", ":material/terrain:", "surface"),
    ("eigenangles.py", "Eigenangles", ":material/rotate_right:", "eigenangles"),
    ("atlas.py", "Atlas", ":material/scatter_plot:", "atlas"),
    ("gauge.py", "Gauge sweeps", ":material/shuffle:", "gauge"),
    ("models.py", "Models", ":material/inventory_2:", "models"),
)


HOME = PAGE_SPECS[0][3]


def _forward() -> None:
    """Never drawn: ``app/main.py`` sends the root on to the first page before a page runs."""


def root() -> st.Page:
    """The hidden default page at the app's root. Streamlit serves its default page at the root
    and finds no page at that page's own path, so Home would have two addresses and ``/home``
    none; instead the root forwards to ``/home``, and every page has one address."""
    return st.Page(_forward, title=PAGE_SPECS[0][1], url_path="root", default=True,
                   visibility="hidden")  # fmt: skip


def pages() -> dict[str, st.Page]:
    """The pages by URL path, built afresh for each script run (st.Page belongs to a run)."""
    return {
        url: st.Page(VIEWS / file, title=title, icon=icon, url_path=url)
        for file, title, icon, url in PAGE_SPECS
    }
