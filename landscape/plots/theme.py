"""The one theme of every figure: palette, fonts, line widths and shared layout pieces.

White background, a colour-blind-safe palette and fonts readable when printed in a paper.
Builders draw their traces, then call :func:`apply_theme`, so a figure looks the same in the app,
the CLI export and the README. Every builder draws for the screen; decorated with
:func:`presentable` it takes ``presentation=True`` and returns that figure through
:func:`projector` (fonts, lines and markers doubled, one figure to a 1080-pixel screen).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec

import plotly.graph_objects as go

from landscape.matching import METHODS_BY_NAME
from landscape.names import method_key  # the key of METHOD_DASH

# A colour-blind-safe palette, reused for every categorical series: twelve
# colours, so that up to twelve series (the mlp-digits zoo's seeds on the Atlas) never share one.
# The first eight are fixed (figures already printed use them; the methods' colours and named
# roles index them); the last four (wine, indigo, olive, purple) were chosen for their distance
# from the eight and the grey baseline, with and without deuteranopia (test_pictures.py).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#882255", "#332288", "#999933", "#AA4499"]  # fmt: skip
BLACK = PALETTE[7]
# Grey for the baseline a figure compares against (naive, Haar-random, no transport).
NEUTRAL = "#888888"
GRID = "#e5e5e5"
FONT_FAMILY = "Helvetica, Arial, sans-serif"
LINE_WIDTH = 2.5  # a figure's main data lines
THIN_WIDTH = 1.5  # reference lines, outlines and noisy raw series under a smoothed one


# ---------------------------------------------------------------- method styles
# Every curve of a matching method is told apart by its colour, its dash and its marker, so that
# a figure printed in grey or seen with a colour-vision deficiency still names its lines. Colour
# is the matching method, the marker its group, and every method/group its own dash.
METHOD_COLOUR = {"naive": NEUTRAL, "activation": PALETTE[1], "weight": PALETTE[0],
                 "learned": PALETTE[3]}  # fmt: skip
# λ: diamond
GROUP_SYMBOL = {"perm": "circle", "signed-perm": "triangle-up", "orth": "square",
                "orth-mean": "square-open"}  # fmt: skip
METHOD_DASH = {
    "naive": "dot",
    "activation/perm": "dashdot",
    "activation/signed-perm": "longdashdot",
    "activation/orth": "10px,3px,2px,3px,2px,3px",
    "weight/perm": "dash",
    "weight/signed-perm": "longdash",
    "weight/orth": "solid",
    "learned/perm": "4px,2px",
    "learned/signed-perm": "14px,3px,3px,3px",
    "learned/orth": "20px,3px",
    "activation/orth-mean": "10px,3px,2px,3px",
    "weight/orth-mean": "6px,2px",
    "learned/orth-mean": "20px,3px,6px,3px",
}


@dataclass(frozen=True)
class MethodStyle:
    """How the curves of one method/group are drawn: ``colour`` (hex), plotly ``dash`` and
    marker ``symbol``."""

    colour: str
    dash: str
    symbol: str

    def line(self, width: float = 2.5) -> dict[str, Any]:
        return {"color": self.colour, "width": width, "dash": self.dash}


def naive_or_aligned(colour: str, naive: bool, size: float) -> dict[str, Any]:
    """The line and marker of one path drawn naive and aligned in one figure (merge operators,
    curved paths, spawned children): naive thin, dashed, open markers; aligned solid, filled."""
    return {"line": {"color": colour, "width": THIN_WIDTH if naive else LINE_WIDTH,
                     "dash": "dash" if naive else "solid"},
            "marker": {"size": size, "color": colour,
                       "symbol": "circle-open" if naive else "circle"}}  # fmt: skip


def method_style(key: str) -> MethodStyle:
    """The one style of a method key (``"method/group"``, e.g. ``"weight/orth"``, or the name
    alone of a method that aligns nothing, ``"naive"``), the same in every figure: a method
    that aligns nothing (its registry entry's ``aligns``) has a circle, the others their
    group's marker. An unknown key keeps its method's colour (black for an unknown method, drawn
    as one that aligns), a solid line and a cross."""
    method, _, group = key.partition("/")
    entry = METHODS_BY_NAME.get(method)
    moves = entry is None or entry.aligns
    return MethodStyle(
        colour=METHOD_COLOUR.get(method, BLACK),
        dash=METHOD_DASH.get(method_key(method, group or None, aligns=moves), "solid"),
        symbol=GROUP_SYMBOL.get(group or "perm", "x") if moves else "circle",
    )


# sRGB as a viewer without green cones sees it: the standard full-severity deuteranopia matrix,
# applied to linear RGB.
_DEUTERANOPIA = ((0.367322, 0.860646, -0.227968),
                 (0.280085, 0.672501, 0.047413),
                 (-0.011820, 0.042940, 0.968881))  # fmt: skip


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _srgb(c: float) -> float:
    c = min(1.0, max(0.0, c))
    return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055


def deuteranopia(hex_colour: str) -> str:
    """``"#RRGGBB"`` as it looks with deuteranopia (full severity), as ``"#RRGGBB"``."""
    h = hex_colour.lstrip("#")
    rgb = [_linear(int(h[i : i + 2], 16) / 255) for i in (0, 2, 4)]
    sim = [_srgb(sum(m * c for m, c in zip(row, rgb, strict=True))) for row in _DEUTERANOPIA]
    return "#" + "".join(f"{round(255 * c):02X}" for c in sim)


def colour_distance(a: str, b: str) -> float:
    """CIE76 ΔE between two ``"#RRGGBB"`` colours (about 2.3 is just noticeable; under 15 two
    thin lines are easily confused)."""
    return float(sum((x - y) ** 2 for x, y in zip(_lab(a), _lab(b), strict=True)) ** 0.5)


def _lab(hex_colour: str) -> tuple[float, float, float]:
    h = hex_colour.lstrip("#")
    r, g, b = (_linear(int(h[i : i + 2], 16) / 255) for i in (0, 2, 4))
    xyz = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


FONT_SIZE = 14  # px, the base font of a screen figure: ticks and legends; titles +2
# For a projector (presentation mode): every font, line width and marker size times this, and a
# figure as tall as a 1920×1080 screen leaves under the page title.
PROJECTOR_SCALE = 2.0
# A figure of one row per item (a bar per group) says so in its layout's ``meta``
# ({ROWS_META: n}): on a projector its rows grow with their font, so that no label is dropped.
ROWS_META = "rows"
PROJECTOR_HEIGHT = 540  # under a compact title row, the whole figure on a 720-pixel screen
# plotly's own defaults, for sizes a figure leaves unset
_PLOTLY_LINE, _PLOTLY_MARKER, _PLOTLY_AXIS_LINE, _PLOTLY_TICK_LEN = 2.0, 6.0, 1.0, 5.0


def font_size() -> int:
    """The base font size of a screen figure in px (a projector's is doubled by
    :func:`projector`)."""
    return FONT_SIZE


def rgba(hex_colour: str, alpha: float) -> str:
    """``"#RRGGBB"`` with opacity ``alpha`` as a CSS ``rgba(r,g,b,alpha)`` string."""
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# Accuracy barriers are shown in percentage points everywhere on screen (a drop of accuracy from
# 0.95 to 0.70 below the chord is 25 points); results keep the fraction.
ACCURACY_POINTS = 100.0
ACCURACY_UNIT = "percentage points"


# λ in one notation on every figure: θ(λ) = λ·θ_A + (1−λ)·π(θ_B), so 0 is (aligned) B, 1 is A
LAMBDA_TITLE = "λ (0 = B aligned, 1 = A)"


def points(fraction: float) -> float:
    """An accuracy barrier (a fraction of the test set) in percentage points."""
    return ACCURACY_POINTS * fraction


# A trace's ``meta`` or a shape's ``name`` that marks it as drawn for the screen only (the λ
# marker a slider moves): exports, CSV files and the report leave it out (:func:`for_export`).
SCREEN_ONLY = "screen-only"


def for_export(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` without what is drawn for the screen only (:data:`SCREEN_ONLY`
    traces and shapes): what a file of the figure shows."""
    spec = fig.to_plotly_json()
    spec["data"] = [t for t in spec.get("data", []) if t.get("meta") != SCREEN_ONLY]
    layout = spec.get("layout", {})
    if "shapes" in layout:
        layout["shapes"] = [s for s in layout["shapes"] if s.get("name") != SCREEN_ONLY]
    return go.Figure(spec)


def legend_above(y: float = 1.02) -> dict[str, Any]:
    """A horizontal legend just above the plot area, left-aligned (``y`` in paper units)."""
    return {"orientation": "h", "yanchor": "bottom", "y": y, "x": 0}


def apply_theme(fig: go.Figure, *, title: str | None = None) -> go.Figure:
    """Apply the house style to ``fig`` in place and return it: template, fonts, palette,
    margins, light grid lines and outside ticks on every axis."""
    size = FONT_SIZE
    fig.update_layout(
        template="simple_white",
        font={"family": FONT_FAMILY, "size": size},
        colorway=PALETTE,
        # a title's every line gets its own room above the plot (the Surface's has two)
        margin={
            "l": 70,
            "r": 20,
            "t": 36 + 24 * (title.count("<br>") + 1) if title else 30,
            "b": 60,
        },  # fmt: skip
        legend={"font": {"size": size}},  # as the ticks: one text size for what is read
        title={"text": title, "font": {"size": size + 2}} if title else None,
    )
    fig.update_xaxes(showgrid=True, gridcolor=GRID, ticks="outside")
    fig.update_yaxes(showgrid=True, gridcolor=GRID, ticks="outside")
    return fig


def projector(fig: go.Figure, scale: float = PROJECTOR_SCALE) -> go.Figure:
    """``fig`` for a projector: a new figure with every size ``scale`` times the screen's.

    Fonts (the base font and every title, axis, tick, legend, colour-bar, annotation and text
    font set on its own), trace line widths, marker sizes and their outlines, shape lines, axis
    lines and ticks, and the margins; sizes left unset are scaled from plotly's defaults, so
    nothing stays at its screen size. Bars keep filling their plot (their size is the data's);
    hexagon grids grow with their triangle, by √scale. The height becomes
    :data:`PROJECTOR_HEIGHT` (at least), one figure to a 720-pixel screen; a figure with a
    width of its own grows as a whole instead, its box and its hexagons by √scale.
    """
    spec = fig.to_plotly_json()
    layout = spec.get("layout", {})
    layout.setdefault("font", {}).setdefault("size", FONT_SIZE)
    _scale_fonts(layout, scale)
    for key, axis in list(layout.items()):
        if key.startswith(("xaxis", "yaxis")):
            _scale_axis(axis, scale)
        elif key.startswith("ternary"):
            for name in ("aaxis", "baxis", "caxis"):
                _scale_axis(axis.setdefault(name, {}), scale)
    for note in layout.get("annotations", []):  # offsets in pixels grow as the margins do
        for key in ("xshift", "yshift"):
            if key in note:
                note[key] = note[key] * (1 + scale) / 2
    for shape in layout.get("shapes", []):
        line = shape.setdefault("line", {})
        line["width"] = line.get("width", _PLOTLY_LINE) * scale
    margin = layout.get("margin", {})
    for side in ("l", "r", "t", "b"):
        if side in margin:
            margin[side] = margin[side] * (1 + scale) / 2  # room for larger labels, not double
    # a figure drawn to a pixel box of its own (the triangles) grows as a whole, by √scale (a
    # 1920-pixel screen against a laptop's); any other is one figure to a 720-pixel screen
    grow = scale**0.5 if layout.get("width") and layout.get("height") else None
    if grow is not None:
        layout["width"], layout["height"] = (round(layout[k] * grow) for k in ("width", "height"))
    else:
        meta = layout.get("meta")
        rows = isinstance(meta, dict) and meta.get(ROWS_META)
        grown = (layout.get("height") or 0) * ((1 + scale) / 2 if rows else 1)
        layout["height"] = max(PROJECTOR_HEIGHT, round(grown))
    for trace in spec.get("data", []):
        _scale_trace(trace, scale, grow)
    # the spec is a validated figure's with sizes scaled: validating it again took 30–50 ms a
    # figure, most of a presentation page's drawing; later changes to the figure are validated
    fig = go.Figure(spec, _validate=False)
    fig._validate = True
    return fig


P = ParamSpec("P")


def presentable(builder: Callable[P, go.Figure]) -> Callable[..., go.Figure]:
    """A screen figure builder that also takes ``presentation=True``: then its figure goes
    through :func:`projector` (the app's presentation mode)."""

    @functools.wraps(builder)
    def build(*args: Any, presentation: bool = False, **kwargs: Any) -> go.Figure:
        fig = builder(*args, **kwargs)
        return projector(fig) if presentation else fig

    return build


def _scale_fonts(node: Any, scale: float) -> None:
    """Every ``size`` of a font dict anywhere under ``node`` (title, tickfont, legend, colour
    bar, annotations, ...), in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("font") and isinstance(value, dict) and "size" in value:
                value["size"] = _times(value["size"], scale)
            _scale_fonts(value, scale)
    elif isinstance(node, list):
        for value in node:
            _scale_fonts(value, scale)


def _scale_axis(axis: dict[str, Any], scale: float) -> None:
    axis["linewidth"] = axis.get("linewidth", _PLOTLY_AXIS_LINE) * scale
    axis["tickwidth"] = axis.get("tickwidth", _PLOTLY_AXIS_LINE) * scale
    axis["ticklen"] = axis.get("ticklen", _PLOTLY_TICK_LEN) * scale


def _scale_trace(trace: dict[str, Any], scale: float, grow: float | None = None) -> None:
    kind = trace.get("type", "scatter")
    mode = trace.get("mode", "")
    _scale_fonts(trace, scale)
    if kind in ("scatter", "scatterternary", "box", "scatter3d"):
        line = trace.setdefault("line", {})
        line["width"] = line.get("width", _PLOTLY_LINE) * scale
    marker = trace.get("marker")
    if marker is None and "markers" not in mode:
        return
    marker = trace.setdefault("marker", {})
    if kind == "scatterternary" and marker.get("symbol") == "hexagon":
        # A grid of hexagons tiles its triangle, which grows with the figure's box rather than
        # its fonts: about √scale (a 1920-pixel screen against a laptop's).
        scale = grow if grow is not None else scale**0.5
    if "line" in marker and "width" in marker["line"]:
        marker["line"]["width"] = _times(marker["line"]["width"], scale)
    if kind in ("scatter", "scatterternary", "box", "scatter3d") and (
        "markers" in mode or kind == "box"
    ):
        marker["size"] = _times(marker.get("size", _PLOTLY_MARKER), scale)


def _times(value: Any, scale: float) -> Any:
    """A size or a list of sizes, times ``scale``."""
    if isinstance(value, (list, tuple)):
        return [v * scale for v in value]
    return value * scale
