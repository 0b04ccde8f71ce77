"""Curved paths (``landscape curve``, the Interpolation page's "Curved path"): the trained curve's
loss and accuracy against λ beside the straight line's, naive and aligned; and spawned children
(``landscape spawn``, the Interpolation page's "Spawned children"): their barrier against the
step they were spawned at."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import (
    CURVED,
    CURVED_ALIGNMENT,
    CURVED_PATH,
    SPAWN,
    SPAWN_ROW,
    aligned,
    key_of,
)
from landscape.plots.theme import (
    LAMBDA_TITLE,
    PALETTE,
    apply_theme,
    legend_above,
    naive_or_aligned,
    points,
    presentable,
)

KIND_WORDS = {"bezier": "Bézier curve", "chain": "polygonal chain"}
# the straight line black (as beside the merge operators), the curve in the palette's first colour
_COLOUR = {"line": "#000000", "curve": PALETTE[0]}


@presentable
def figure_curve(result: dict[str, Any]) -> go.Figure:
    """One pair's curved path against λ (``experiments.barriers.curved.curve``): loss and accuracy
    of the straight line (black) and of the trained curve (colour) at the line's λ, the aligned
    pair solid with filled markers, the naive pair dashed with open markers; each trace's legend
    entry carries its loss barrier (nats). λ = 1 is A, λ = 0 the (aligned) B, for both paths."""
    lam = CURVED.read(result, "lambdas")
    split = CURVED.read(result, "split")
    kind = KIND_WORDS.get(CURVED.read(result, "kind"), CURVED.read(result, "kind"))
    # wide enough a gap that the accuracy axis's title clears the loss panel on a projector
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16)
    for k, al in enumerate(CURVED.read(result, "alignments")):
        naive = not aligned(CURVED_ALIGNMENT, al)  # drawn as the naive pair
        which = key_of(CURVED_ALIGNMENT, al)
        for path, name in (("line", "straight line"), ("curve", kind)):
            c = CURVED_ALIGNMENT.read(al, path)
            label = f"{name} · {which}: barrier {CURVED_PATH.read(c, 'barrier_loss'):.3g}"
            for col, metric, unit in ((1, "loss", 1.0), (2, "accuracy", points(1.0))):
                fig.add_trace(
                    go.Scatter(
                        x=lam, y=[unit * v for v in CURVED_PATH.read(c, metric)],
                        mode="lines+markers", name=label, legendgroup=f"{path}-{k}",
                        showlegend=col == 1,
                        **naive_or_aligned(_COLOUR[path], naive, 7),
                        hovertemplate=f"{name} · {which}<br>λ = %{{x:.3g}}<br>%{{y:.4f}}"
                                      "<extra></extra>",
                    ),
                    row=1, col=col,
                )  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text=LAMBDA_TITLE, row=1, col=col)
    fig.update_yaxes(title_text=f"{split} loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy (%)", row=1, col=2)  # short: fits a projector
    apply_theme(fig)
    fig.update_layout(height=460, legend=legend_above(), margin={"t": 110})
    return fig


@presentable
def figure_spawn(result: dict[str, Any]) -> go.Figure:
    """The children's barrier against the step they were spawned at
    (``experiments.spawn.spawn``): loss barrier (left) and accuracy barrier (right), naive
    dashed with open markers and aligned solid, error bars the s.e.m. over pairs of children
    where there are more than two."""
    steps = SPAWN.read(result, "steps")
    split = SPAWN.read(result, "split")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16)
    rows = SPAWN.read(result, "rows")
    alignments = list(
        dict.fromkeys((SPAWN_ROW.read(r, "method"), SPAWN_ROW.read(r, "group")) for r in rows)
    )
    # naive last, dashed over the aligned curve: where the two agree both stay visible
    for colour, (method, group) in reversed(
        list(zip(("#000000", PALETTE[0]), alignments, strict=False))
    ):
        mine = sorted((r for r in rows if (SPAWN_ROW.read(r, "method"),
                                           SPAWN_ROW.read(r, "group")) == (method, group)),
                      key=lambda r: SPAWN_ROW.read(r, "step"))  # fmt: skip
        naive = not aligned(SPAWN_ROW, mine[0])  # drawn as the naive pair
        which = key_of(SPAWN_ROW, mine[0])
        for col, metric, unit in ((1, "loss", 1.0), (2, "accuracy", points(1.0))):
            sems = [SPAWN_ROW.read(r, f"barrier_{metric}_sem") for r in mine]
            fig.add_trace(
                go.Scatter(
                    x=[SPAWN_ROW.read(r, "step") for r in mine],
                    y=[unit * SPAWN_ROW.read(r, f"barrier_{metric}") for r in mine],
                    error_y=None if all(s is None for s in sems) else
                    {"type": "data", "array": [unit * (s or 0.0) for s in sems]},
                    mode="lines+markers", name=which, legendgroup=which, showlegend=col == 1,
                    **naive_or_aligned(colour, naive, 8),
                    hovertemplate=f"{which}<br>spawned at step %{{x}}<br>%{{y:.4f}}"
                                  "<extra></extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text=f"spawn step k (of {steps})", row=1, col=col)
    fig.update_yaxes(title_text=f"{split} loss barrier (nats)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy barrier (points)", rangemode="tozero",
                     row=1, col=2)  # fmt: skip
    apply_theme(fig)
    fig.update_layout(height=420, legend=legend_above(), margin={"t": 80})
    return fig
