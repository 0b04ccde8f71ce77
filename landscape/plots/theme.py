"""The one theme of every figure: palette, fonts, line widths and shared layout pieces.

White background, a colour-blind-safe palette and fonts readable when printed in a paper;
``presentation=True`` enlarges every font for seminars. Builders draw their traces, then call
:func:`apply_theme` last, so a figure looks the same in the app, the CLI export and the
README.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

# Colour-blind-safe palette (Okabe–Ito order), reused for every categorical series.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# Grey for the baseline a figure compares against (naive, Haar-random, no transport).
NEUTRAL = "#888888"
GRID = "#e5e5e5"
FONT_FAMILY = "Helvetica, Arial, sans-serif"
LINE_WIDTH = 2.5  # a figure's main data lines
THIN_WIDTH = 1.5  # reference lines, outlines and noisy raw series under a smoothed one


def font_size(presentation: bool) -> int:
    """Base font size in px: 14 on screen, 20 for seminars (titles +2, legends −2)."""
    return 20 if presentation else 14


def rgba(hex_colour: str, alpha: float) -> str:
    """``"#RRGGBB"`` with opacity ``alpha`` as a CSS ``rgba(r,g,b,alpha)`` string."""
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def legend_above(y: float = 1.02) -> dict[str, Any]:
    """A horizontal legend just above the plot area, left-aligned (``y`` in paper units)."""
    return {"orientation": "h", "yanchor": "bottom", "y": y, "x": 0}


def apply_theme(
    fig: go.Figure, *, presentation: bool = False, title: str | None = None
) -> go.Figure:
    """Apply the house style to ``fig`` in place and return it: template, fonts, palette,
    margins, light grid lines and outside ticks on every axis."""
    size = font_size(presentation)
    fig.update_layout(
        template="simple_white",
        font={"family": FONT_FAMILY, "size": size},
        colorway=PALETTE,
        margin={"l": 70, "r": 20, "t": 60 if title else 30, "b": 60},
        legend={"font": {"size": size - 2}},
        title={"text": title, "font": {"size": size + 2}} if title else None,
    )
    fig.update_xaxes(showgrid=True, gridcolor=GRID, ticks="outside")
    fig.update_yaxes(showgrid=True, gridcolor=GRID, ticks="outside")
    return fig
