"""Interpolation page, all pairs: the seeds × seeds heatmaps of the loss and accuracy barrier."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import MATRIX, key_of
from landscape.plots.theme import apply_theme, font_size, points, presentable

# sequential, colour-blind safe; 0 (no barrier, the diagonal) is the lightest
MATRIX_SCALE = "Viridis_r"


@presentable
def figure_barrier_matrix(result: dict[str, Any]) -> go.Figure:
    """Loss barrier (nats) and accuracy barrier (percentage points) of every pair of seeds, one
    heatmap each, the value written in every cell. The diagonal is each model against itself: 0 by
    definition (not measured), drawn and written as 0."""
    seeds = [str(s) for s in MATRIX.read(result, "seeds")]
    split, space = MATRIX.read(result, "split"), MATRIX.read(result, "space")
    label = key_of(MATRIX, result)
    # short panel titles, so that two panels fit one column; the split is in the figure title
    panels = (("barrier_loss", "loss barrier (nats)", "{:.3f}", 1.0),
              ("barrier_accuracy", "accuracy barrier (points)", "{:.1f}", points(1.0)))  # fmt: skip
    fig = make_subplots(rows=1, cols=2, subplot_titles=[p[1] for p in panels],
                        horizontal_spacing=0.24)  # fmt: skip
    for col, (key, title, fmt, unit) in enumerate(panels, start=1):
        z = [[unit * v for v in row] for row in MATRIX.read(result, key)]
        text = [["0" if i == j else fmt.format(v) for j, v in enumerate(row)]
                for i, row in enumerate(z)]  # fmt: skip
        fig.add_trace(
            go.Heatmap(
                z=z, x=seeds, y=seeds, text=text, texttemplate="%{text}",
                textfont={"size": font_size()}, colorscale=MATRIX_SCALE, zmin=0,
                name=title,
                colorbar={"x": 0.4 if col == 1 else 1.02, "len": 0.9, "thickness": 10},
                hovertemplate="A = %{y}, B = %{x}<br>" + title + ": %{z:.4f}<extra></extra>",
            ),
            row=1, col=col,
        )  # fmt: skip
        fig.update_xaxes(title_text="seed B", type="category", row=1, col=col)
        fig.update_yaxes(title_text="seed A" if col == 1 else None, type="category",
                         autorange="reversed", row=1, col=col)  # fmt: skip
    model = MATRIX.read(result, "model")
    apply_theme(fig, title=f"{model + ': ' if model else ''}{label}, {space}, {split} split")
    fig.update_xaxes(showgrid=False)
    fig.update_yaxes(showgrid=False)
    fig.update_layout(height=440, margin={"t": 100})  # the title above the panels' titles
    return fig
