"""The app's pages, in sidebar order: one ``st.Page`` per view, with a stable URL path."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).parent / "views"

# (file, title, icon, url path); the first is the default page.
PAGE_SPECS = (
    ("home.py", "Home", ":material/landscape:", "home"),
    ("interpolation.py", "Interpolation curves", ":material/show_chart:", "interpolation"),
    ("triangle.py", "Triangle heatmaps", ":material/change_history:", "triangle"),
    ("eigenangles.py", "Eigenangles", ":material/rotate_right:", "eigenangles"),
    ("atlas.py", "Atlas", ":material/scatter_plot:", "atlas"),
    ("gauge.py", "Gauge sweeps", ":material/shuffle:", "gauge"),
    ("models.py", "Models", ":material/inventory_2:", "models"),
)


def pages() -> dict[str, st.Page]:
    """The pages by URL path, built afresh for each script run (st.Page belongs to a run)."""
    return {
        url: st.Page(VIEWS / file, title=title, icon=icon, url_path=url, default=i == 0)
        for i, (file, title, icon, url) in enumerate(PAGE_SPECS)
    }
