"""Models page: how well every zoo model trained (and its training curves)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from landscape.plots.fields import TRAINING_CURVES, TRAINING_RUN, ZOO_ROW, ZOO_SEED
from landscape.plots.theme import PALETTE, apply_theme, points, presentable

CURVE_LABEL = {"test_accuracy": "test accuracy (%)", "test_loss": "test loss (nats)",
               "train_loss": "train loss (nats)"}  # fmt: skip
ROW_HEIGHT = 26  # px a model's row takes in the accuracy overview (screen fonts)


@presentable
def figure_training_curves(
    runs: Sequence[dict[str, Any]], *, metric: str = "test_accuracy"
) -> go.Figure:
    """Test metric against training step, one line per run (``{"label", "curves"}``); an
    accuracy in percent."""
    fig = go.Figure()
    unit = points(1.0) if metric.endswith("accuracy") else 1.0
    for i, run in enumerate(runs):
        c = TRAINING_RUN.read(run, "curves")
        fig.add_trace(
            go.Scatter(
                x=TRAINING_CURVES.read(c, "step"),
                y=[unit * v for v in TRAINING_CURVES.read(c, metric)],
                mode="lines",
                name=TRAINING_RUN.read(run, "label"),
                line={"color": PALETTE[i % len(PALETTE)], "width": 2},
            )  # fmt: skip
        )
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text=CURVE_LABEL.get(metric, metric))
    return apply_theme(fig)


@presentable
def figure_zoo_overview(rows: Sequence[dict[str, Any]], *, title: str | None = None) -> go.Figure:
    """Per zoo model, the test accuracy (percent) of every available seed (a dot per seed);
    ``title``, a heading drawn in the figure (a projector's page puts its heading there).

    One row per model, its name written whole and level on the y axis (in the table's order,
    top to bottom): names as alike as ``gpt-shakespeare-d128`` and
    ``gpt-shakespeare-d128-drop0.3`` are read in full, on a laptop and on a projector.
    """
    fig = go.Figure()
    names = [ZOO_ROW.read(row, "name") for row in rows]
    for i, row in enumerate(rows):
        seeds = ZOO_ROW.read(row, "seeds")
        accs = [points(ZOO_SEED.read(s, "test_accuracy")) for s in seeds]
        fig.add_trace(
            go.Box(
                x=accs,
                name=names[i],
                orientation="h",
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker={"color": PALETTE[i % len(PALETTE)], "size": 8},
                line={"color": PALETTE[i % len(PALETTE)]},
                fillcolor="rgba(0,0,0,0)",
                hovertext=[f"seed {ZOO_SEED.read(s, 'seed')}" for s in seeds],
            )  # fmt: skip
        )
    fig.update_xaxes(title_text="test accuracy (%)")  # per prediction: the caption says
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=names,
                     showgrid=False, automargin=True)  # fmt: skip
    apply_theme(fig, title=title)
    # rows of a fixed height: a projector's figure (at least PROJECTOR_HEIGHT) keeps every row
    # apart at its doubled fonts; the left margin grows to the longest name (automargin)
    fig.update_layout(showlegend=False, height=max(260, ROW_HEIGHT * len(rows) + 110),
                      margin={"l": 20})  # fmt: skip
    return fig
