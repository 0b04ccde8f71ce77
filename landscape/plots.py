"""Pure figure builders: ``figure_x(result) -> plotly.graph_objects.Figure``.

The app, the CLI export and the README images all use these, so a figure looks the same
everywhere. One theme (:func:`theme`): white background, readable fonts, a colour-blind-safe
palette; ``presentation=True`` enlarges every font for seminars.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

# Colour-blind-safe palette (Okabe–Ito order), reused for every categorical series.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]


def theme(fig: go.Figure, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    size = 20 if presentation else 14
    fig.update_layout(
        template="simple_white",
        font={"family": "Helvetica, Arial, sans-serif", "size": size},
        colorway=PALETTE,
        margin={"l": 70, "r": 20, "t": 60 if title else 30, "b": 60},
        legend={"font": {"size": size - 2}},
        title={"text": title, "font": {"size": size + 2}} if title else None,
    )
    fig.update_xaxes(showgrid=True, gridcolor="#e5e5e5", ticks="outside")
    fig.update_yaxes(showgrid=True, gridcolor="#e5e5e5", ticks="outside")
    return fig


def figure_training_curves(
    runs: Sequence[dict[str, Any]], *, metric: str = "test_accuracy", presentation: bool = False
) -> go.Figure:
    """Test metric against training step, one line per run (``{"label", "curves"}``)."""
    fig = go.Figure()
    for i, run in enumerate(runs):
        c = run["curves"]
        fig.add_trace(
            go.Scatter(
                x=c["step"],
                y=c[metric],
                mode="lines",
                name=run["label"],
                line={"color": PALETTE[i % len(PALETTE)], "width": 2},
            )  # fmt: skip
        )
    label = {"test_accuracy": "test accuracy", "test_loss": "test loss (nats)",
             "train_loss": "train loss (nats)"}.get(metric, metric)  # fmt: skip
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text=label)
    return theme(fig, presentation=presentation)


def figure_zoo_overview(rows: Sequence[dict[str, Any]], *, presentation: bool = False) -> go.Figure:
    """Per zoo model, the test accuracy of every available seed (a dot per seed)."""
    fig = go.Figure()
    for i, row in enumerate(rows):
        accs = [s["test_accuracy"] for s in row["seeds"]]
        fig.add_trace(
            go.Box(
                y=accs,
                name=row["name"],
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker={"color": PALETTE[i % len(PALETTE)], "size": 8},
                line={"color": PALETTE[i % len(PALETTE)]},
                fillcolor="rgba(0,0,0,0)",
                hovertext=[f"seed {s['seed']}" for s in row["seeds"]],
            )  # fmt: skip
        )
    fig.update_yaxes(title_text="test accuracy (per prediction)")
    fig.update_layout(showlegend=False)
    return theme(fig, presentation=presentation)
