"""Figures to files: PNG/SVG in a paper-ready theme (via kaleido), and the figure's data as CSV.

Kaleido drives a headless Chromium; the first export of a process takes a few seconds (browser
start), later ones well under a second. The app calls these lazily, only when a download is
clicked, so page renders never pay that cost.
"""

from __future__ import annotations

import io
import struct
import threading
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
import plotly.graph_objects as go

from landscape.errors import LandscapeError
from landscape.matching import matching_key
from landscape.plots.theme import FONT_FAMILY, FONT_SIZE, for_export, projector
from landscape.plots.triangle import fit_triangles, triangle_count

Size = Literal["single", "double", "slide"]


@dataclass(frozen=True)
class SizePreset:
    """An exported figure's size: ``width_px`` × ``height_px`` layout pixels with a base font
    of ``font_px``, drawn ``png_scale`` times larger as PNG.

    Paper sizes lay out at 144 px per inch, so a 16 px font prints at 8 pt when the figure is
    placed at its width (3.5 in in one column, 7 in across two) and a PNG at scale 300/144 has
    300 dpi; an SVG placed at that width prints its text at the same size. The slide is a
    16:9 screen, its font about 1/30 of its height so that the back row can read it.
    """

    name: str
    width_px: int
    height_px: int
    font_px: int
    png_scale: float
    label: str

    @property
    def scale(self) -> float:
        """How much larger than on screen every font, line and marker is drawn."""
        return self.font_px / FONT_SIZE


PX_PER_INCH = 144
PRINT_DPI = 300
SIZES: dict[str, SizePreset] = {
    "single": SizePreset("single", round(3.5 * PX_PER_INCH), round(2.6 * PX_PER_INCH), 16,
                         PRINT_DPI / PX_PER_INCH, "single column, 3.5 in (88 mm)"),
    "double": SizePreset("double", round(7.0 * PX_PER_INCH), round(3.0 * PX_PER_INCH), 16,
                         PRINT_DPI / PX_PER_INCH, "double column, 7 in (180 mm)"),
    "slide": SizePreset("slide", 1600, 900, 30, 1.0, "slide, 16:9 at 1600 × 900"),
}  # fmt: skip
DEFAULT_SIZE: Size = "double"
# the figure an export of no preset draws (``size=None``): the old paper figure
PAPER_WIDTH = SIZES[DEFAULT_SIZE].width_px
PAPER_HEIGHT = SIZES[DEFAULT_SIZE].height_px
PAPER_FONT = SIZES[DEFAULT_SIZE].font_px
_server = {"running": False}
_server_lock = threading.Lock()


def size_preset(size: str) -> SizePreset:
    """The preset named ``size``; a LandscapeError names the choices."""
    try:
        return SIZES[size]
    except KeyError:
        raise LandscapeError(
            f"unknown figure size {size!r}; use one of {', '.join(SIZES)}"
        ) from None


def paper_figure(fig: go.Figure, size: str = DEFAULT_SIZE, *, width: int | None = None,
                 height: int | None = None) -> go.Figure:  # fmt: skip
    """A copy of ``fig`` themed for print at preset ``size`` (:data:`SIZES`): white background,
    the preset's pixel size, and every font, line and marker scaled by the preset's font over
    the screen's (:func:`landscape.plots.theme.projector`), so ticks and legends print at the
    preset's font. What is drawn for the screen only (the λ marker) is left out. A horizontal
    legend that needs more than :data:`LEGEND_SHARE` of the preset's height makes the figure
    taller by the rows beyond it, so that the plot keeps its height in a narrow column. A figure
    of triangles is laid out for the box in rows (:func:`landscape.plots.triangle.fit_triangles`:
    its height is what its rows need, the preset's at most where they fit in it).
    ``width``/``height`` override the preset's."""
    preset = size_preset(size)
    screen = for_export(fig)
    out = projector(screen, preset.scale)
    box_width = width or preset.width_px
    if triangle_count(out):  # the triangles lay themselves out for the box, in rows
        fit_triangles(out, box_width, height or preset.height_px, preset.font_px)
        out.update_layout(paper_bgcolor="white", plot_bgcolor="white",
                          font={"family": FONT_FAMILY, "color": "black"})  # fmt: skip
        return out
    extra = 0
    if not height:  # rows beyond a fifth of the preset's height are added to it
        fits = max(1, int(LEGEND_SHARE * preset.height_px / _row_px(preset)))
        extra = max(0, legend_rows(out, box_width, preset.font_px) - fits) * _row_px(preset)
    out.update_layout(
        width=box_width,
        height=(height or preset.height_px) + extra,
        paper_bgcolor="white",
        plot_bgcolor="white",
    )
    out.update_layout(font={"family": FONT_FAMILY, "color": "black"})
    _room_between_panels(out, box_width, preset.font_px)
    return out


LEGEND_SHARE = 0.2  # of an export's height, the most its legend takes before the figure grows


def _row_px(preset: SizePreset) -> int:
    """The height of one row of a horizontal legend at the preset's font (plotly: about 1.6
    lines of text with its gaps)."""
    return round(1.6 * preset.font_px)


def legend_rows(fig: go.Figure, width: int, font_px: float) -> int:
    """How many rows a horizontal legend of ``fig`` takes across ``width`` pixels at a font of
    ``font_px`` (0 for a figure with no horizontal legend): its entries, each its text at about
    0.55 em a character and the symbol's 40 px, packed left to right as plotly packs them."""
    layout = fig.layout
    if layout.showlegend is False or layout.legend.orientation != "h":
        return 0
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    if not names:
        return 0
    margin = (layout.margin.l or 0) + (layout.margin.r or 0)
    room, rows, used = max(1.0, width - margin), 1, 0.0
    for name in names:
        need = 0.55 * font_px * len(name) + 40 * font_px / FONT_SIZE
        if used and used + need > room:
            rows, used = rows + 1, 0.0
        used += need
    return rows


PANEL_GAP_PX = 110  # a right panel's tick labels and axis title at a 16 px font


def _room_between_panels(fig: go.Figure, width: int, font_px: int) -> None:
    """Widen the gap between two side-by-side panels until the right one's tick labels and axis
    title fit in it: a screen figure's gap is a share of its width, so a single-column export
    would draw the right panel's y title over the left panel's curve."""
    layout = fig.layout.to_plotly_json()
    if "xaxis2" not in layout or "xaxis3" in layout:
        return
    (a0, a1), (b0, b1) = fig.layout.xaxis.domain, fig.layout.xaxis2.domain
    need = PANEL_GAP_PX * (font_px / 16) / width
    if a1 >= b0 or b0 - a1 >= need:  # overlapping or stacked axes, or room enough already
        return
    panel = (b1 - a0 - need) / 2
    fig.update_layout(xaxis={"domain": [a0, a0 + panel]}, xaxis2={"domain": [b1 - panel, b1]})


def _browser_found() -> bool:
    """Whether a Chromium browser is there for kaleido to drive (``BROWSER_PATH``, one on the
    path or in a typical place, or one kaleido fetched earlier). Without one, starting kaleido's
    server waited forever instead of failing; True where this cannot be told (kaleido then
    says)."""
    try:
        from choreographer.browsers.chromium import Chromium
    except ImportError:
        return True
    return bool(Chromium.find_browser(skip_local=False))


def _render(fig: go.Figure, fmt: str, scale: float = 1.0) -> bytes:
    """One image via a kaleido browser kept open for the process (started on first use)."""
    import kaleido  # drives a headless browser: loaded only when an image is asked for

    with _server_lock:
        if not _server["running"]:
            if not _browser_found():
                raise RuntimeError("no Chromium browser found: install one (the Debian "
                                   "package chromium) or set BROWSER_PATH to it")  # fmt: skip
            kaleido.start_sync_server(silence_warnings=True)
            _server["running"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "kopts ignored when using a server"
        return fig.to_image(format=fmt, scale=scale)


def to_png(fig: go.Figure, size: str = DEFAULT_SIZE, *, scale: float | None = None,
           **box: Any) -> bytes:  # fmt: skip
    """PNG bytes of the figure at preset ``size``; ``scale`` multiplies the pixel size (default
    the preset's: 300 dpi for paper sizes). ``box``: ``width``/``height`` overrides."""
    preset = size_preset(size)
    scale = preset.png_scale if scale is None else scale
    return with_dpi(_render(paper_figure(fig, size, **box), "png", scale),
                    scale * PX_PER_INCH)  # fmt: skip


def with_dpi(png: bytes, dpi: float) -> bytes:
    """``png`` with a pHYs chunk saying ``dpi`` (pixels per metre, as PNG stores it), just after
    its header, any pHYs it had replaced: a page-layout program then places it at the size it
    was drawn for."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    per_metre = round(dpi / 0.0254)
    body = b"pHYs" + struct.pack(">IIB", per_metre, per_metre, 1)
    chunk = struct.pack(">I", 9) + body + struct.pack(">I", zlib.crc32(body))
    out, at = [png[:8]], 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, end = png[at + 4 : at + 8], at + 12 + length
        if kind != b"pHYs":
            out.append(png[at:end])
        if kind == b"IHDR":
            out.append(chunk)
        at = end
    return b"".join(out)


def to_svg(fig: go.Figure, size: str = DEFAULT_SIZE, **box: Any) -> bytes:
    """SVG bytes of the figure at preset ``size`` (vector: fonts stay text)."""
    return _render(paper_figure(fig, size, **box), "svg")


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
    CSV holds everything that is drawn in a file (not the screen's λ marker).
    """
    frames = []
    for i, tr in enumerate(for_export(fig).data):
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


# ---------------------------------------------------------------- the export report


@dataclass
class ReportFigure:
    """One figure of a report: its file name, the figure, the settings that made it (model,
    seeds, method, group, space, split, points, …), the cache keys of the results drawn, the
    tables shown beside it on the page (title → rows, e.g. the barriers of the curves), the
    page it was drawn on and what it shows (``title``, e.g. "barrier per round"). The report
    heads it with :attr:`heading`, never with its file name alone."""

    name: str
    figure: go.Figure
    settings: dict[str, Any]
    cache_keys: list[str]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    page: str = ""
    title: str = ""

    @property
    def heading(self) -> str:
        """What the figure shows, in words: its page and title, then the model, the method(s),
        the seeds and the split of its settings (:func:`describe`), e.g. "Eigenangles: the
        rotation's eigenangles — mlp-digits, weight/orth and learned/orth, seeds 0 and 1". The
        file name only where neither page nor title is known."""
        head = ": ".join(x for x in (self.page, self.title) if x) or self.name
        about = describe(self.settings)
        return f"{head} — {about}" if about else head

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "heading": self.heading, "page": self.page,
                "title": self.title, "settings": self.settings, "cache_keys": self.cache_keys,
                "tables": self.tables}  # fmt: skip


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def describe(settings: dict[str, Any]) -> str:
    """A figure's settings in words, for its heading: the model (or the entries compared), the
    method(s) (``methods``; ``method`` with its ``group``; an ``alignment``; a ``group``
    alone), the seeds (``seeds``, ``seed``, ``pairs`` as ``0 ↔ 1``, ``parent seed``) and the
    split, each only where the settings hold it."""
    parts: list[str] = []
    if settings.get("model"):
        parts.append(str(settings["model"]))
    elif settings.get("entries"):
        parts.append(_and([str(e) for e in settings["entries"]]))
    if settings.get("methods"):
        parts.append(_and([str(m) for m in settings["methods"]]))
    elif settings.get("method"):
        method, group = str(settings["method"]), settings.get("group")
        parts.append(method if "/" in method or not group else matching_key(method, group))
    elif settings.get("alignment"):
        parts.append(str(settings["alignment"]))
    elif settings.get("group"):
        parts.append(f"group {settings['group']}")
    seeds, pairs = settings.get("seeds"), settings.get("pairs")
    if isinstance(seeds, (list, tuple)) and seeds:
        parts.append(("seed " if len(seeds) == 1 else "seeds ") + _and([str(s) for s in seeds]))
    elif settings.get("seed") is not None:
        parts.append(f"seed {settings['seed']}")
    elif isinstance(pairs, (list, tuple)) and pairs:
        parts.append("seeds " + _and([f"{a} ↔ {b}" for a, b in pairs]))
    elif settings.get("parent seed") is not None:
        parts.append(f"parent seed {settings['parent seed']}")
    if settings.get("split"):
        parts.append(f"{settings['split']} split")
    return ", ".join(parts)


def versions() -> dict[str, str]:
    """Versions of the library, python and the packages a figure's numbers depend on (read
    from the installed metadata: torch is not imported for this)."""
    import platform
    from importlib import metadata

    out = {"python": platform.python_version()}
    for package in ("landscape", "torch", "numpy", "scipy", "plotly"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


def report_html(figures: list[ReportFigure], *, title: str = "Landscape report",
                environment: dict[str, str] | None = None, created: str = "") -> str:  # fmt: skip
    """One self-contained HTML page with every figure (interactive; plotly.js inlined once, so it
    opens offline; without the screen's λ marker), each headed by what it shows
    (:attr:`ReportFigure.heading`), with its tables (the barriers beside a curve), a table of
    its settings, file name and cache keys, and the versions it was made with. Values
    read as text (a list of methods as ``naive · weights, weight/perm · weights``); every text
    from a result or a setting is escaped."""
    import html
    import math

    from plotly.offline import get_plotlyjs

    def text(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "—"
        if isinstance(v, (list, tuple)):
            return ", ".join(text(x) if not isinstance(x, (list, tuple))
                             else "(" + ", ".join(text(y) for y in x) + ")" for x in v)  # fmt: skip
        if isinstance(v, dict):
            return "; ".join(f"{k}: {text(x)}" for k, x in v.items())
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    def cell(v: Any) -> str:
        return html.escape(text(v))

    def table(title: str, rows: list[dict[str, Any]]) -> list[str]:
        columns = list(dict.fromkeys(k for r in rows for k in r))
        return [
            f"<h3>{html.escape(title)}</h3>",
            '<table class="data"><tr>' + "".join(f"<th>{cell(c)}</th>" for c in columns)
            + "</tr>",
            *("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>"
              for r in rows),
            "</table>",
        ]  # fmt: skip

    env = environment if environment is not None else versions()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:" + FONT_FAMILY + ";margin:2rem;max-width:1100px}"
        "table{border-collapse:collapse;margin:.5rem 0 1rem}"
        "td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;font-size:.9rem}"
        "code{font-size:.8rem}section{margin-bottom:3rem}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(figures)} figure(s){'; made ' + html.escape(created) if created else ''}.</p>",
        '<h2>Versions</h2><table id="versions">',
        *(f"<tr><th>{cell(k)}</th><td>{cell(v)}</td></tr>" for k, v in env.items()),
        "</table>",
    ]
    for i, f in enumerate(figures):
        div = f"figure-{i}"
        parts += [
            f'<section class="figure" id="section-{i}"><h2>{html.escape(f.heading)}</h2>',
            for_export(f.figure).to_html(full_html=False, include_plotlyjs=False, div_id=div),
            *(line for title, rows in f.tables.items() if rows for line in table(title, rows)),
            '<table class="settings">',
            *(f"<tr><th>{cell(k)}</th><td>{cell(v)}</td></tr>" for k, v in f.settings.items()),
            f"<tr><th>file name</th><td>{cell(f.name)}</td></tr>",
            "<tr><th>cache keys</th><td>"
            + ("<br>".join(f"<code>{cell(k)}</code>" for k in f.cache_keys) or "—")
            + "</td></tr></table></section>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)
