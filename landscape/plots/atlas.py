"""Atlas page: seeds and their gauge copies in weight space, raw and aligned."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import ATLAS, ATLAS_POINT
from landscape.plots.theme import PALETTE, apply_theme, font_size, presentable


def _subtitle(result: dict[str, Any], space: str, name: str) -> str:
    """Panel title: the space's name, the variance its 2-D projection keeps and the orbit ratio
    (mean copy→seed distance over mean seed→seed distance), where known."""
    proj = ATLAS.read(result, "projection").upper()
    var = ATLAS.read(result, f"explained_{space}") or []
    ratio = ATLAS.read(result, f"orbit_ratio_{space}")
    bits = [f"{name}"]
    if var:
        bits.append(f"{proj} {100 * sum(var):.0f}% of variance")
    if ratio is not None:
        bits.append(f"orbit/seed distance {ratio:.2f}")
    return bits[0] + "".join(f"<br><span style='font-size:0.85em'>{b}</span>" for b in bits[1:])


@presentable
def figure_atlas(result: dict[str, Any]) -> go.Figure:
    """The atlas side by side: raw weight space (left), aligned to the reference (right).

    Colour is the seed; circles are trained seeds, crosses their random gauge copies (same
    function). Orbits spread in raw space and collapse onto their seed after alignment.
    """
    proj = ATLAS.read(result, "projection").upper()
    reference = ATLAS.read(result, "reference")
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.11,
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
                copies = [ATLAS_POINT.read(p, "copy") for p in pts]
                fig.add_trace(
                    go.Scatter(
                        x=[v[0] for v in xy], y=[v[1] for v in xy],
                        mode="markers", name=f"seed {s}" if kind == "seed" else f"seed {s} copies",
                        legendgroup=f"seed {s}", showlegend=col == 1 and kind == "seed",
                        marker={"color": colour, "symbol": symbol, "size": size,
                                "line": {"color": colour if kind != "seed" else "white",
                                         "width": 2 if kind != "seed" else 1}},
                        text=[f"seed {s}, {kind}" + (f" {c}" if c else "") for c in copies],
                        hovertemplate="%{text}<br>(%{x:.3g}, %{y:.3g})<extra></extra>",
                    ),  # fmt: skip
                    row=1, col=col,
                )  # fmt: skip
        fig.update_xaxes(title_text=f"{proj} 1", zeroline=False, row=1, col=col)
        fig.update_yaxes(title_text=f"{proj} 2", zeroline=False, row=1, col=col)
    apply_theme(fig)
    fig.update_layout(height=430, margin={"t": 100},
                      legend={"title": {"text": "● seed  × gauge copy"}})  # fmt: skip
    fig.update_annotations(font={"size": font_size()})
    return fig
