"""Where things go on a page: its header, its controls, figure beside explanation, and how
presentation mode rearranges them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import streamlit as st

# Presentation mode, for a projector at 1280×720 to 1920×1080: text, tables and metrics about
# 1.5× larger (figures are redrawn larger by landscape.plots.theme.projector), the sidebar
# folded away (app/sidebar.py) and the page's top compact, so that the first figure is on the
# first screen; metrics' deltas whole, the Controls popover (for the presenter, not the room)
# wide enough for its choices' tags at a smaller size, a slider's value above its thumb, and the
# sidebar (for the presenter, brought back by its button) a little smaller, its words whole.
PRESENTATION_CSS = """
<style>
  html, body, [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
  [data-testid="stWidgetLabel"] p, [data-testid="stCaptionContainer"]
    { font-size: 1.45rem !important; }
  [data-testid="stMainBlockContainer"]
    { padding: 2.6rem 2rem 6rem 2rem !important; max-width: none !important; }
  h1 { font-size: 2.2rem !important; padding: 0 !important; }
  h2, h3 { font-size: 1.7rem !important; }
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
  [data-testid="stPopoverBody"] { width: min(1400px, 94vw) !important; max-width: none !important;
    max-height: calc(100vh - 8rem) !important; overflow-y: auto !important; }
  [data-testid="stPopoverBody"] [data-testid="stWidgetLabel"] p,
  [data-testid="stPopoverBody"] [data-testid="stMarkdownContainer"] p
    { font-size: 1.1rem !important; }
  [data-testid="stPopoverBody"] [data-baseweb="tag"] { max-width: none !important; }
  [data-testid="stPopoverBody"] [data-baseweb="tag"] span { max-width: none !important;
    overflow: visible !important; text-overflow: clip !important; }
  [data-testid="stSidebarNavLink"] span[label] p { font-size: 1.2rem !important;
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
    word-break: normal !important; overflow-wrap: normal !important; }
  [data-testid="stSidebar"] p { word-break: normal !important; overflow-wrap: normal !important; }
  [data-testid="stSidebar"] [data-testid="stWidgetLabel"] p,
  [data-testid="stSidebar"] label [data-testid="stMarkdownContainer"] p,
  [data-testid="stSidebar"] [data-testid="stCaptionContainer"],
  [data-testid="stSidebar"] [data-baseweb="select"] div { font-size: 1.2rem !important; }
  [data-testid="stSliderThumbValue"] { transform: translateY(-0.6rem); }
</style>
"""
HEADER_ROW = "_presentation_header_row"  # session key: the title's row, where Controls go too


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
    row = st.container(horizontal=True, vertical_alignment="center", gap="medium")
    with row:
        st.title(title, width="content")
        with st.popover("About this page", icon=":material/info:"):
            st.markdown(intro)
    st.session_state[HEADER_ROW] = row  # this run's: controls() puts its button there


@contextlib.contextmanager
def controls() -> Iterator[None]:
    """Where a page's controls go: in plain view, or behind a button for seminars (beside the
    title, so that the figure starts on the first screen)."""
    if presentation():
        row = st.session_state.pop(HEADER_ROW, None)
        with row if row is not None else contextlib.nullcontext():
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
