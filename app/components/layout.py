"""Where things go on a page: its header, its controls, figure beside explanation, and how
presentation mode rearranges them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import streamlit as st

# Presentation mode, for a projector at 1920×1080: text, tables and metrics about 1.5× larger
# (figures are redrawn larger by landscape.plots.theme.projector), metrics' deltas whole, the
# Controls popover wide enough for its choices' tags, and a sidebar wide enough for the page
# names at that size.
PRESENTATION_CSS = """
<style>
  html, body, [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
  [data-testid="stWidgetLabel"] p, [data-testid="stCaptionContainer"]
    { font-size: 1.45rem !important; }
  [data-testid="stMainBlockContainer"]
    { padding: 2.5rem 2.5rem 6rem 2.5rem !important; max-width: none !important; }
  h1 { font-size: 2.8rem !important; padding: 0 !important; }
  h2, h3 { font-size: 2rem !important; }
  [data-testid="stMetric"] [data-testid], [data-testid="stMetric"] [data-testid] p
    { white-space: normal !important; overflow: visible !important;
      text-overflow: clip !important; max-width: none !important; }
  [data-testid="stMetric"] [data-testid="stMetricValue"] [data-testid] p
    { font-size: 2.8rem !important; line-height: 1.25 !important; white-space: nowrap !important; }
  [data-testid="stMetricLabel"] p { font-size: 1.45rem !important; }
  [data-testid="stMetric"] [data-testid="stMetricDelta"] [data-testid] p,
  [data-testid="stMetric"] [data-testid="stMetricDeltaDescription"] [data-testid] p
    { font-size: 1.45rem !important; }
  [data-testid="stTable"] td, [data-testid="stTable"] th { font-size: 1.4rem !important; }
  [data-testid="stDataFrame"] { zoom: 1.4; width: calc(100% / 1.4) !important; }
  [data-testid="stPopoverBody"] { width: min(1400px, 70vw) !important; max-width: none !important; }
  [data-testid="stPopoverBody"] [data-baseweb="tag"] { max-width: none !important; }
  [data-testid="stPopoverBody"] [data-baseweb="tag"] span { max-width: none !important;
    overflow: visible !important; text-overflow: clip !important; }
  [data-testid="stSidebar"] { min-width: 22rem !important; }
  [data-testid="stSidebarNavLink"] span[label] p { font-size: 1.3rem !important;
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
</style>
"""


def presentation() -> bool:
    """Whether the sidebar's presentation mode is on (larger fonts, controls tucked away)."""
    return bool(st.session_state.get("presentation", False))


def page_header(title: str, intro: str) -> None:
    """Title and a short description; in presentation mode larger text everywhere and the
    description folded into a button beside the title, so that the figure comes first."""
    if not presentation():
        st.title(title)
        st.markdown(intro)
        return
    st.markdown(PRESENTATION_CSS, unsafe_allow_html=True)
    with st.container(horizontal=True, vertical_alignment="center", gap="large"):
        st.title(title, width="content")
        with st.popover("About this page", icon=":material/info:"):
            st.markdown(intro)


@contextlib.contextmanager
def controls() -> Iterator[None]:
    """Where a page's controls go: in plain view, or behind a button for seminars."""
    if presentation():
        with st.popover("Controls", icon=":material/tune:"):
            yield
    else:
        with st.container(border=True):
            yield


def side_by_side(spec: list[float], gap: str = "large") -> list[Any]:
    """Columns for a figure and its explanation; in presentation mode one below the other, so
    that the figure has the whole width of the screen."""
    if presentation():
        return [st.container() for _ in spec]
    return list(st.columns(spec, gap=gap))
