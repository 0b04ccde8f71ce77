"""Curved paths (``landscape curve``, the Interpolation page's "Curved path"): the trained curve's
loss and accuracy against λ beside the straight line's, naive and aligned."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import CURVED, CURVED_ALIGNMENT, CURVED_PATH
from landscape.plots.theme import (
    ACCURACY_UNIT,
    LINE_WIDTH,
    PALETTE,
    THIN_WIDTH,
    apply_theme,
    legend_above,
    method_key,
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
    entry carries its loss barrier. λ = 1 is A, λ = 0 the (aligned) B, for both paths."""
    lam = CURVED.read(result, "lambdas")
    split = CURVED.read(result, "split")
    kind = KIND_WORDS.get(CURVED.read(result, "kind"), CURVED.read(result, "kind"))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    for k, al in enumerate(CURVED.read(result, "alignments")):
        method = CURVED_ALIGNMENT.read(al, "method")
        naive = method == "naive"
        which = "naive" if naive else method_key(method, CURVED_ALIGNMENT.read(al, "group"))
        for path, name in (("line", "straight line"), ("curve", kind)):
            c = CURVED_ALIGNMENT.read(al, path)
            label = f"{name} · {which} (barrier {CURVED_PATH.read(c, 'barrier_loss'):.3g} nats)"
            for col, metric, unit in ((1, "loss", 1.0), (2, "accuracy", points(1.0))):
                fig.add_trace(
                    go.Scatter(
                        x=lam, y=[unit * v for v in CURVED_PATH.read(c, metric)],
                        mode="lines+markers", name=label, legendgroup=f"{path}-{k}",
                        showlegend=col == 1,
                        line={"color": _COLOUR[path], "width": THIN_WIDTH if naive else LINE_WIDTH,
                              "dash": "dash" if naive else "solid"},
                        marker={"size": 7, "color": _COLOUR[path],
                                "symbol": "circle-open" if naive else "circle"},
                        hovertemplate=f"{name} · {which}<br>λ = %{{x:.3g}}<br>%{{y:.4f}}"
                                      "<extra></extra>",
                    ),
                    row=1, col=col,
                )  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text="λ (0: B aligned; 1: A)", row=1, col=col)
    fig.update_yaxes(title_text=f"{split} loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy ({ACCURACY_UNIT})", row=1, col=2)
    apply_theme(fig)
    fig.update_layout(height=440, legend=legend_above(), margin={"t": 100})
    return fig
