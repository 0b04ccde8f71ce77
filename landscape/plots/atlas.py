"""Atlas page: seeds and their gauge copies in weight space, raw and aligned."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import ATLAS, ATLAS_POINT
from landscape.plots.theme import PALETTE, ROWS_META, apply_theme, font_size, presentable


def _subtitle(result: dict[str, Any], space: str, name: str) -> str:
    """Panel title: the space's name, the variance its 2-D projection keeps and the orbit ratio
    (mean copy→seed distance over mean seed→seed distance), where known."""
    proj = (ATLAS.read(result, f"projection_{space}") or ATLAS.read(result, "projection")).upper()
    var = ATLAS.read(result, f"explained_{space}") or []
    ratio = ATLAS.read(result, f"orbit_ratio_{space}")
    bits = [f"{name}"]
    if var:
        bits.append(f"{proj} {100 * sum(var):.0f}% of variance")
    if ratio is not None:
        bits.append(f"orbit/seed distance {ratio:.2f}")
    if ATLAS.read(result, f"projection_{space}") not in (None, ATLAS.read(result, "projection")):
        bits.append(f"{proj}: too few distinct points for {ATLAS.read(result, 'projection')}")
    return bits[0] + "".join(f"<br><span style='font-size:0.85em'>{b}</span>" for b in bits[1:])


@presentable
def figure_atlas(result: dict[str, Any]) -> go.Figure:
    """The atlas side by side: raw weight space (left), aligned to the reference (right).

    Colour is the seed; circles are trained seeds, crosses their random gauge copies (same
    function). Orbits spread in raw space and collapse onto their seed after alignment. A copy
    equal to its seed is drawn exactly on it (the experiment projects identical checkpoints
    once); a note under the panels says how many, and the hover gives every point's distance to
    its seed in the full weight space.
    """
    reference = ATLAS.read(result, "reference")
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.15,  # the right panel's axis title clear of the left
        subplot_titles=[_subtitle(result, "raw", "raw weights"),
                        _subtitle(result, "aligned", f"aligned to seed {reference} (WM)")],
    )  # fmt: skip
    seeds = ATLAS.read(result, "seeds")
    points = ATLAS.read(result, "points")
    for col, space in ((1, "raw"), (2, "aligned")):
        for i, s in enumerate(seeds):
            colour = PALETTE[i % len(PALETTE)]
            for kind, symbol, size in (("seed", "circle", 13), ("gauge copy", "x-thin-open", 11)):
                pts = [
                    p
                    for p in points
                    if ATLAS_POINT.read(p, "seed") == s and ATLAS_POINT.read(p, "kind") == kind
                ]
                if not pts:
                    continue
                xy = [ATLAS_POINT.read(p, space) for p in pts]
                text = [f"seed {s}, {kind}" + (f" {c}" if c else "") + _distance(p, space)
                        for p, c in zip(pts, (ATLAS_POINT.read(p, "copy") for p in pts),
                                        strict=True)]  # fmt: skip
                fig.add_trace(
                    go.Scatter(
                        x=[v[0] for v in xy], y=[v[1] for v in xy],
                        mode="markers", name=f"seed {s}" if kind == "seed" else f"seed {s} copies",
                        legendgroup=f"seed {s}", showlegend=col == 1 and kind == "seed",
                        marker={"color": colour, "symbol": symbol, "size": size,
                                "line": {"color": colour if kind != "seed" else "white",
                                         "width": 2 if kind != "seed" else 1}},
                        text=text,
                        hovertemplate="%{text}<br>(%{x:.3g}, %{y:.3g})<extra></extra>",
                    ),  # fmt: skip
                    row=1, col=col,
                )  # fmt: skip
        proj = ATLAS.read(result, f"projection_{space}") or ATLAS.read(result, "projection")
        fig.update_xaxes(title_text=f"{proj.upper()} 1", zeroline=False, row=1, col=col)
        fig.update_yaxes(title_text=f"{proj.upper()} 2", zeroline=False, row=1, col=col)
    apply_theme(fig)
    # the symbol key on two lines at the entries' size: one line at the title's size was the
    # widest thing in the figure, and took the plots' width in presentation mode. The legend
    # hangs from the figure's top at its right edge and may use the figure's whole height (one
    # tied to the plot area scrolled, and hid seeds, at a projector's fonts); a figure of more
    # seeds than that height holds grows, on a projector with its fonts (ROWS_META). Its rows
    # are a step smaller than the ticks and close together (no gap between the seeds' groups),
    # so that the twelve seeds of mlp-digits fit a 1280×720 projector's figure; with a gap and
    # the ticks' size they ran past the screen's bottom.
    height = max(430, _legend_height(len(seeds)))
    fig.update_layout(height=height, margin={"t": 100},
                      legend={"title": {"text": "● seed<br>× gauge copy",
                                        "font": {"size": LEGEND_FONT}},
                              "font": {"size": LEGEND_FONT}, "tracegroupgap": 0,
                              "xref": "container", "yref": "container", "x": 1, "y": 1,
                              "xanchor": "right", "yanchor": "top", "maxheight": 1},
                      meta={ROWS_META: len(seeds)} if height > 430 else None)  # fmt: skip
    fig.update_annotations(font={"size": font_size()})
    on_seed = sum(ATLAS_POINT.read(p, "on_seed_aligned") for p in points)
    copies = sum(ATLAS_POINT.read(p, "kind") != "seed" for p in points)
    if on_seed:
        fig.add_annotation(
            text=f"aligned: {on_seed} of {copies} copies equal their seed, drawn on it (no jitter)",
            # below the axis titles by pixels, not by a share of the plot's height: at a
            # projector's fonts a share put it over the titles
            xref="paper", yref="paper", x=0.5, y=0, yshift=-80, xanchor="center", yanchor="top",
            showarrow=False, font={"size": font_size() - 2, "color": "#444"},
        )  # fmt: skip
        fig.update_layout(margin={"b": 110}, height=max(460, height))
    return fig


LEGEND_FONT = font_size() - 2  # px on a screen: the legend's entries and key


def _legend_height(entries: int) -> int:
    """The pixels a legend of ``entries`` seeds under its two-line key takes at a screen's
    fonts, with room for a projector's: there a row (1.3 lines and a 3-pixel gap) doubles its
    text while the figure grows by half its height (ROWS_META), hence 1.9 of the font a row."""
    return round(LEGEND_FONT * (3 + 1.9 * entries) + 40)


def _distance(point: dict[str, Any], space: str) -> str:
    """A copy's full-dimensional distance to its seed, for the hover ("" for a seed)."""
    d = ATLAS_POINT.read(point, f"distance_{space}")
    if ATLAS_POINT.read(point, "kind") == "seed" or d is None:
        return ""
    same = " (equal: drawn on its seed)" if ATLAS_POINT.read(point, f"on_seed_{space}") else ""
    return f"<br>distance to its seed {d:.3g}{same}"
