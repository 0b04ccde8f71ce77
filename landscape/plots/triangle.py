"""Triangle page: loss or accuracy over the plane spanned by three aligned models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import TRIANGLE
from landscape.plots.theme import SCREEN_ONLY, apply_theme, font_size, points, presentable

METRIC_LABEL = {"loss": "loss (nats)", "accuracy": "accuracy (%)"}
# A triangle's side in screen pixels by the number of panels, so that a row of them fits a
# laptop's main column (and, scaled for a projector, a 1920-pixel screen's)
TRIANGLE_SIDE = {1: 380, 2: 340, 3: 210, 4: 150}
CORNER_ROOM = 80  # px beside a triangle for its B and C labels and the gap to the next panel
APEX_ROOM = 30  # px above the apex for the A label, under the panel's title
COLOUR_BAR = 110  # px for the colour bar and its title
NOTE_DROP = 30  # px from the triangles' base down to the note under them (below B and C)
HEXAGON = 0.95  # a hexagon's marker size over the grid spacing (measured: they tile, barely)
ACCURACY_TOL = 0.01  # the accuracy basin's slack: one percentage point below the corners' plane


def basin(result: dict[str, Any], metric: str = "loss") -> tuple[list[bool], str]:
    """Which grid points of a triangle are in the basin by ``metric``'s criterion, and that
    criterion in words.

    ``"loss"``: loss at most ``tol`` nats above the plane through the corners' losses (the
    result's own ``excess_loss`` and ``basin_fraction``). ``"accuracy"``: accuracy at most
    :data:`ACCURACY_TOL` below the plane through the corners' accuracies.
    """
    if metric == "loss":
        tol = TRIANGLE.read(result, "tol")
        inside = [e <= tol for e in TRIANGLE.read(result, "excess_loss")]
        return inside, f"loss at most {tol:g} nats above the corners' plane"
    if metric != "accuracy":
        raise ValueError(f"no basin criterion for {metric!r}; expected loss or accuracy")
    pts, acc = TRIANGLE.read(result, "points"), TRIANGLE.read(result, "accuracy")
    corner = [acc[min(range(len(pts)), key=lambda i, c=c: -pts[i][c])] for c in range(3)]
    plane = [sum(w * a for w, a in zip(p, corner, strict=True)) for p in pts]
    inside = [a >= q - ACCURACY_TOL - 1e-12 for a, q in zip(acc, plane, strict=True)]
    return inside, (f"accuracy at most {100 * ACCURACY_TOL:g} point below the corners' plane")


def basin_fraction(result: dict[str, Any], metric: str = "loss") -> float:
    """The share of grid points in the basin by ``metric``'s criterion (:func:`basin`; for the
    loss the result's own ``basin_fraction``)."""
    if metric == "loss":
        return TRIANGLE.read(result, "basin_fraction")
    inside, _ = basin(result, metric)
    return sum(inside) / len(inside)


@presentable
def figure_triangles(
    results: Sequence[dict[str, Any]],
    *,
    metric: str = "loss",
    titles: Sequence[str] | None = None,
    mark: float | None = None,
) -> go.Figure:
    """Loss (nats) or accuracy (percent) over the barycentric grid of θ_A, θ_B, θ_C, one
    ternary plot per result.

    All panels share one colour scale (the same ``coloraxis``). Corners are labelled with the
    seeds; hovering a point shows its mixture weights. Points in the basin by the criterion of
    the colour ``metric`` (:func:`basin`: loss within ``tol`` of the corners' plane, or accuracy
    within :data:`ACCURACY_TOL` of theirs) are drawn with a dark outline; the basin fraction is
    in the panel title and the criterion under the panels.
    ``mark``: a λ marked on the A–B edge of every panel, at the grid point nearest to
    θ(λ) = λ·θ_A + (1−λ)·θ_B (the interpolation line; its value in the hover), for the screen
    only (exports leave it out).
    """
    n = len(results)
    titles = list(titles or [f"{TRIANGLE.read(r, 'method')}/{TRIANGLE.read(r, 'group')}"
                             for r in results])  # fmt: skip
    sub = [
        f"{t}<br>basin {100 * basin_fraction(r, metric):.0f}%"  # the note under it says which
        for t, r in zip(titles, results, strict=True)
    ]
    fig = make_subplots(rows=1, cols=n, specs=[[{"type": "ternary"}] * n], subplot_titles=sub)
    unit = points(1.0) if metric == "accuracy" else 1.0  # accuracy drawn in percent
    values = [unit * v for r in results for v in TRIANGLE.read(r, metric)]
    lo, hi = min(values), max(values)
    size = font_size()
    # Pixel geometry, so that the triangles fill their panels and the hexagons tile them: each
    # triangle has a known side, its panel that side and room for the B and C labels, the
    # titles sit above the A label, and the figure is as wide as its panels (the app draws it
    # at that width; a projector scales the whole box, hexagons included).
    side = TRIANGLE_SIDE.get(n, TRIANGLE_SIDE[max(TRIANGLE_SIDE)])
    tri_h = side * 3**0.5 / 2
    panel = side + CORNER_ROOM
    plot_w = n * panel + COLOUR_BAR
    plot_h = tri_h + APEX_ROOM
    for i in range(n):
        key = "ternary" if i == 0 else f"ternary{i + 1}"
        # a ternary fills its domain's width: the domain is the triangle, the room beside it
        x0 = (i * panel + CORNER_ROOM / 2) / plot_w
        x1 = x0 + side / plot_w
        fig.layout[key].domain = {"x": [x0, x1], "y": [0, tri_h / plot_h]}
        fig.layout.annotations[i].update(x=(x0 + x1) / 2, y=1, yanchor="bottom")
    spacing = side / TRIANGLE.read(results[0], "resolution")
    marker_size = HEXAGON * spacing
    for i, r in enumerate(results):
        pts = TRIANGLE.read(r, "points")
        colour = [unit * v for v in TRIANGLE.read(r, metric)]
        excess = TRIANGLE.read(r, "excess_loss")
        inside, criterion = basin(r, metric)
        fig.add_trace(
            go.Scatterternary(
                a=[p[0] for p in pts], b=[p[1] for p in pts], c=[p[2] for p in pts],
                mode="markers", name=titles[i], showlegend=False,
                marker={"color": colour, "coloraxis": "coloraxis", "size": marker_size,
                        "symbol": "hexagon",
                        "line": {"color": ["#222" if b else "rgba(0,0,0,0)" for b in inside],
                                 "width": 1.2}},
                customdata=[[m, e] for m, e in zip(colour, excess, strict=True)],
                hovertemplate="w_A=%{a:.2f}  w_B=%{b:.2f}  w_C=%{c:.2f}<br>"
                              f"{metric}=%{{customdata[0]:.4f}}<br>"
                              "loss above plane=%{customdata[1]:.4f}<extra></extra>",
            ),  # fmt: skip
            row=1, col=i + 1,
        )  # fmt: skip
        if mark is not None:
            at = _edge_point(pts, mark)
            fig.add_trace(
                go.Scatterternary(
                    a=[pts[at][0]], b=[pts[at][1]], c=[pts[at][2]], mode="markers",
                    name=f"{titles[i]} at λ", showlegend=False, cliponaxis=False,
                    meta=SCREEN_ONLY,
                    marker={"color": "white", "size": 14, "symbol": "diamond",
                            "line": {"color": "#222", "width": 2}},
                    hovertemplate=f"θ(λ={pts[at][0]:.2f}) on A–B<br>{metric}="
                                  f"{colour[at]:.4f}<extra></extra>",
                ),  # fmt: skip
                row=1, col=i + 1,
            )  # fmt: skip
        seeds = TRIANGLE.read(r, "seeds")
        key = "ternary" if i == 0 else f"ternary{i + 1}"
        axis = {"showticklabels": False, "ticks": "", "showgrid": False, "linecolor": "#444"}
        fig.layout[key].update(
            aaxis={**axis, "title": {"text": f"A (seed {seeds[0]})", "font": {"size": size - 1}}},
            baxis={**axis, "title": {"text": f"B ({seeds[1]})", "font": {"size": size - 1}}},
            caxis={**axis, "title": {"text": f"C ({seeds[2]})", "font": {"size": size - 1}}},
            bgcolor="white",
        )  # fmt: skip
    label = METRIC_LABEL.get(metric, metric)
    split = TRIANGLE.read(results[0], "split")
    apply_theme(fig)
    margin = {"l": 20, "r": 20, "t": 60, "b": 60}
    fig.update_layout(
        coloraxis={"colorscale": "Viridis_r" if metric == "loss" else "Viridis", "cmin": lo,
                   "cmax": hi, "colorbar": {"title": {"text": f"{split} {label}"}, "len": 0.9,
                                            "x": n * panel / plot_w, "xanchor": "left"}},
        width=round(plot_w + margin["l"] + margin["r"]),
        height=round(plot_h + margin["t"] + margin["b"]),
        margin=margin,
    )  # fmt: skip
    fig.update_annotations(font={"size": size})
    fig.add_annotation(
        text=f"outlined: the {metric} basin, {criterion}", xref="paper", yref="paper",
        x=0.5, y=-NOTE_DROP / plot_h, xanchor="center", yanchor="top", showarrow=False,
        font={"size": size - 2, "color": "#444"}, name=NOTE,
    )  # fmt: skip
    return fig


# ---------------------------------------------------------------- the triangles in a file's box

NOTE = "basin-note"  # the name of the annotation under the panels that says what is outlined
# An export lays its triangles out for its own box (:func:`fit_triangles`), with text measured
# in font sizes: a character at most CHAR_EM wide, a line LINE_EM high, and a triangle's side at
# least MIN_SIDE_EM (8 at a 16 px font: 128 px, 0.9 in in print), so that its hexagons and
# outlines still read in one column.
CHAR_EM = 0.6
LINE_EM = 1.3
MIN_SIDE_EM = 8.0
LABEL_GAP = 3  # px plotly puts between a bottom corner and its label


def text_width(text: str, font_px: float) -> float:
    """The width of ``text`` at ``font_px`` (its longest line), at most: CHAR_EM a character."""
    return max(len(line) for line in text.split("<br>")) * CHAR_EM * font_px


def triangle_count(fig: go.Figure) -> int:
    """How many ternary panels ``fig`` has (0: not a figure of triangles)."""
    return sum(k.startswith("ternary") for k in fig.layout.to_plotly_json())


def _key(i: int) -> str:
    return "ternary" if i == 0 else f"ternary{i + 1}"


def _resolution(trace: Any) -> int:
    """The grid resolution of a panel's hexagons: its weights take resolution + 1 values."""
    return len({round(a, 6) for a in trace.a}) - 1


def fit_triangles(fig: go.Figure, width: int, height: int, font_px: float) -> go.Figure:
    """Lay the panels of ``fig`` (:func:`figure_triangles`'s, its fonts already at an export's
    base ``font_px``) out for a box ``width`` px wide, in place, and return it.

    The screen's layout (one row, the colour bar on the right, at the screen's sizes) squeezed
    into one printed column drew its corner labels over each other, cut its note and left the
    triangles a few millimetres wide. Here the panels go in rows of as many as keep a side of at
    least MIN_SIDE_EM fonts, each as large as the box's ``height`` allows (the figure grows past
    it only where the triangles would fall under that side, and shrinks to what its rows need);
    the colour bar lies flat under them and the note under it, wrapped to the width. Every title,
    corner label, the bar and the note are placed by their measured size inside the box, none
    over another; the hexagons are sized to tile their new triangles.
    """
    import textwrap

    n = triangle_count(fig)
    layout = fig.layout
    pad = 0.25 * font_px
    margin = round(0.5 * font_px)
    plot_w = width - 2 * margin
    titles = list(layout.annotations[:n])
    note = next(a for a in layout.annotations if a.name == NOTE)
    title_font = titles[0].font.size or font_px
    corner_font = layout.ternary.aaxis.title.font.size or font_px
    note_font = note.font.size or font_px
    labels = [[layout[_key(i)][f"{c}axis"].title.text for c in "abc"] for i in range(n)]

    # heights of what stands above, beside and below a triangle, and the horizontal room a
    # panel needs beside its side: half its B label left of it and half its C label right of it
    title_h = max(t.text.count("<br>") + 1 for t in titles) * LINE_EM * title_font
    apex_h = (1 / 3 + 0.9) * corner_font + pad  # the A label's baseline stands 1/3 em above
    base_h = LABEL_GAP + 1.1 * corner_font + pad  # B and C hang under their corners
    room = max(text_width(b, corner_font) + text_width(c, corner_font)
               for _, b, c in labels) / 2 + 2 * LABEL_GAP + 2 * pad  # fmt: skip
    widest = max(max(text_width(t.text, title_font) for t in titles),
                 max(text_width(a, corner_font) for a, _, _ in labels))  # fmt: skip
    floor = max(MIN_SIDE_EM * font_px, widest + pad - room)
    thickness = round(0.75 * font_px)
    bar_pad = round(pad)
    bar_h = 2 * LINE_EM * font_px + thickness + 2 * bar_pad  # its title above, numbers under
    chars = max(10, int(plot_w / (CHAR_EM * note_font)))
    note_text = "<br>".join(textwrap.wrap(note.text.replace("<br>", " "), chars))
    note_h = (note_text.count("<br>") + 1) * LINE_EM * note_font
    root3 = 3**0.5

    def fixed(rows: int) -> float:
        return rows * (title_h + apex_h + base_h) + bar_h + note_h + 2 * pad

    best: tuple[float, int] | None = None
    for cols in range(1, n + 1):
        rows = -(-n // cols)
        by_width = plot_w / cols - room
        by_height = (height - 2 * margin - fixed(rows)) / rows * 2 / root3
        side = min(by_width, max(by_height, floor))
        if by_width >= floor and (best is None or side >= best[0]):
            best = (side, cols)
    side, cols = best or (plot_w - room, 1)
    rows = -(-n // cols)
    tri_h = side * root3 / 2
    box_h = round(fixed(rows) + rows * tri_h + 2 * margin)
    plot_h = box_h - 2 * margin  # the half pixel rounded goes under the note

    def paper_y(px: float) -> float:  # px down from the top of the plot area
        return 1 - px / plot_h

    for i in range(n):
        row, col = divmod(i, cols)
        in_row = min(cols, n - row * cols)
        left = (plot_w - in_row * (side + room)) / 2 + col * (side + room) + room / 2
        top = row * (title_h + apex_h + tri_h + base_h) + title_h + apex_h
        layout[_key(i)].domain = {"x": [left / plot_w, (left + side) / plot_w],
                                  "y": [paper_y(top + tri_h), paper_y(top)]}  # fmt: skip
        titles[i].update(x=(left + side / 2) / plot_w, xanchor="center", y=paper_y(top - apex_h),
                         yanchor="bottom")  # fmt: skip
    below = rows * (title_h + apex_h + tri_h + base_h) + pad
    layout.coloraxis.colorbar.update(
        orientation="h", x=0.5, xanchor="center", y=paper_y(below), yanchor="top",
        len=min(1.0, cols * (side + room) / plot_w) * 0.8, lenmode="fraction",
        thickness=thickness, ypad=bar_pad, xpad=0, title={"side": "top"},
    )  # fmt: skip
    note.update(text=note_text, x=0.5, xanchor="center", y=paper_y(below + bar_h + pad),
                yanchor="top")  # fmt: skip
    for trace in fig.data:
        if getattr(trace.marker, "symbol", None) == "hexagon":
            trace.marker.size = HEXAGON * side / _resolution(trace)
    fig.update_layout(width=width, height=box_h,
                      margin={"l": margin, "r": margin, "t": margin, "b": margin,
                              "autoexpand": False})  # fmt: skip
    return fig


def _edge_point(points: Sequence[Sequence[float]], lam: float) -> int:
    """The index of the grid point on the A–B edge (w_C = 0) nearest to w_A = ``lam``."""
    edge = [i for i, p in enumerate(points) if abs(p[2]) < 1e-9]
    return min(edge, key=lambda i: abs(points[i][0] - lam))


def edge_value(result: dict[str, Any], metric: str, lam: float) -> float:
    """``metric`` of a triangle at the A–B edge point nearest to w_A = ``lam`` (what ``mark``
    shows)."""
    return float(TRIANGLE.read(result, metric)[_edge_point(TRIANGLE.read(result, "points"), lam)])
