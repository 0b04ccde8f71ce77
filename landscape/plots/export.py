"""Figures to files: PNG/SVG in a paper-ready theme (via kaleido), and the figure's data as CSV.

Kaleido drives a headless Chromium; the first export of a process takes a few seconds (browser
start), later ones well under a second. The app calls these lazily, only when a download is
clicked, so page renders never pay that cost.
"""

from __future__ import annotations

import io
import threading
import warnings
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from landscape.plots.theme import FONT_FAMILY

PAPER_WIDTH = 900  # px at scale 1: about a full text width at 300 dpi with scale 2.5
PAPER_HEIGHT = 420
PAPER_FONT = 16
_server = {"running": False}
_server_lock = threading.Lock()


def paper_figure(fig: go.Figure, *, width: int | None = None, height: int | None = None
                 ) -> go.Figure:  # fmt: skip
    """A copy of ``fig`` themed for print: white background, fixed size, readable fonts."""
    out = go.Figure(fig)
    h = height or fig.layout.height or PAPER_HEIGHT
    out.update_layout(
        width=width or PAPER_WIDTH,
        height=h,
        paper_bgcolor="white",
        plot_bgcolor="white",
        font={"family": FONT_FAMILY, "size": PAPER_FONT, "color": "black"},
    )
    return out


def _render(fig: go.Figure, fmt: str, scale: float = 1.0) -> bytes:
    """One image via a kaleido browser kept open for the process (started on first use)."""
    import kaleido  # drives a headless browser: loaded only when an image is asked for

    with _server_lock:
        if not _server["running"]:
            kaleido.start_sync_server(silence_warnings=True)
            _server["running"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "kopts ignored when using a server"
        return fig.to_image(format=fmt, scale=scale)


def to_png(fig: go.Figure, *, scale: float = 2.5, **size: Any) -> bytes:
    """PNG bytes of the paper-themed figure (``scale`` multiplies the pixel size)."""
    return _render(paper_figure(fig, **size), "png", scale)


def to_svg(fig: go.Figure, **size: Any) -> bytes:
    """SVG bytes of the paper-themed figure (vector: fonts stay text)."""
    return _render(paper_figure(fig, **size), "svg")


def _columns(trace: Any) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {}
    for attr in ("x", "y", "z", "a", "b", "c"):
        v = getattr(trace, attr, None)
        if v is not None and not isinstance(v, str):
            cols[attr] = list(v)
    marker = getattr(trace, "marker", None)
    colour = getattr(marker, "color", None) if marker is not None else None
    if (
        colour is not None
        and not isinstance(colour, str)
        and len(cols)
        and len(colour) == len(next(iter(cols.values())))
    ):
        cols["value"] = list(colour)
    return cols


def figure_frame(fig: go.Figure) -> pd.DataFrame:
    """The data of every trace in long form: ``trace, point, x, y[, z, a, b, c, value]``.

    Bands drawn as closed polygons and endpoint markers are included as their own traces, so the
    CSV holds everything that is drawn.
    """
    frames = []
    for i, tr in enumerate(fig.data):
        cols = _columns(tr)
        if not cols:
            continue
        n = max(len(v) for v in cols.values())
        cols = {k: v for k, v in cols.items() if len(v) == n}
        frame = pd.DataFrame(cols)
        frame.insert(0, "point", range(n))
        frame.insert(0, "trace", tr.name if tr.name is not None else f"trace {i}")
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["trace", "point"])
    return pd.concat(frames, ignore_index=True)


def to_csv(data: Any) -> bytes:
    """CSV bytes of a figure's data (``figure_frame``), a DataFrame or a list of records."""
    if isinstance(data, go.Figure):
        data = figure_frame(data)
    elif not isinstance(data, pd.DataFrame):
        data = pd.DataFrame(data)
    buf = io.StringIO()
    data.to_csv(buf, index=False)
    return buf.getvalue().encode()
