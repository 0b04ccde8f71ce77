"""The app's pages, in sidebar order: one ``st.Page`` per view, with a stable URL path."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).parent / "views"

# (file, title, icon, url path); the first is the default page.
PAGE_SPECS = (
    ("home.py", "Home", "⛰", "home"),
    ("interpolation.py", "Interpolation curves", "📈", "interpolation"),
    ("triangle.py", "Triangle heatmaps", "🔺", "triangle"),
    ("eigenangles.py", "Eigenangles", "🌀", "eigenangles"),
    ("atlas.py", "Atlas", "🗺", "atlas"),
    ("models.py", "Models", "🗂", "models"),
)

PAGES: dict[str, st.Page] = {
    url: st.Page(VIEWS / file, title=title, icon=icon, url_path=url, default=i == 0)
    for i, (file, title, icon, url) in enumerate(PAGE_SPECS)
}
