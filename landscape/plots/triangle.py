"""Triangle page: loss or accuracy over the plane spanned by three aligned models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import TRIANGLE
from landscape.plots.theme import apply_theme, font_size

METRIC_LABEL = {"loss": "loss (nats)", "accuracy": "accuracy"}


def figure_triangles(
    results: Sequence[dict[str, Any]],
    *,
    metric: str = "loss",
    titles: Sequence[str] | None = None,
    presentation: bool = False,
) -> go.Figure:
    """Loss or accuracy over the barycentric grid of θ_A, θ_B, θ_C, one ternary plot per result.

    All panels share one colour scale (the same ``coloraxis``). Corners are labelled with the
    seeds; hovering a point shows its mixture weights. Points in the basin (loss within ``tol`` of
    the corners' plane) are drawn with a dark outline; the basin fraction is in the panel title.
    """
    n = len(results)
    titles = list(titles or [f"{TRIANGLE.read(r, 'method')}/{TRIANGLE.read(r, 'group')}"
                             for r in results])  # fmt: skip
    sub = [
        f"{t}<br>basin {100 * TRIANGLE.read(r, 'basin_fraction'):.0f}% (outlined)"
        for t, r in zip(titles, results, strict=True)
    ]
    fig = make_subplots(rows=1, cols=n, specs=[[{"type": "ternary"}] * n], subplot_titles=sub,
                        horizontal_spacing=0.08)  # fmt: skip
    values = [v for r in results for v in TRIANGLE.read(r, metric)]
    lo, hi = min(values), max(values)
    size = font_size(presentation)
    marker_size = max(5.0, 190.0 / (TRIANGLE.read(results[0], "resolution") + 1) / max(1, n / 3))
    for i, r in enumerate(results):
        pts = TRIANGLE.read(r, "points")
        colour = TRIANGLE.read(r, metric)
        excess = TRIANGLE.read(r, "excess_loss")
        basin = [e <= TRIANGLE.read(r, "tol") for e in excess]
        fig.add_trace(
            go.Scatterternary(
                a=[p[0] for p in pts], b=[p[1] for p in pts], c=[p[2] for p in pts],
                mode="markers", name=titles[i], showlegend=False,
                marker={"color": colour, "coloraxis": "coloraxis", "size": marker_size,
                        "symbol": "hexagon",
                        "line": {"color": ["#222" if b else "rgba(0,0,0,0)" for b in basin],
                                 "width": 1.2}},
                customdata=[[m, e] for m, e in zip(colour, excess, strict=True)],
                hovertemplate="w_A=%{a:.2f}  w_B=%{b:.2f}  w_C=%{c:.2f}<br>"
                              f"{metric}=%{{customdata[0]:.4f}}<br>"
                              "loss above plane=%{customdata[1]:.4f}<extra></extra>",
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
    apply_theme(fig, presentation=presentation)
    fig.update_layout(
        coloraxis={"colorscale": "Viridis_r" if metric == "loss" else "Viridis", "cmin": lo,
                   "cmax": hi, "colorbar": {"title": {"text": f"{split} {label}"}, "len": 0.9}},
        height=480 if presentation else 430,
        margin={"l": 40, "r": 40, "t": 100, "b": 40},
    )  # fmt: skip
    fig.update_annotations(font={"size": size})
    return fig
