"""Curvature along a path (``landscape curvature``): the batch's loss, the top Hessian eigenvalue
and the Hessian's trace against λ, naive against aligned; and, with ``--per-block``, each
block's top eigenvalue against λ."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

# the result and one line per alignment, declared beside their producer
from landscape.experiments.curvature import CURVATURE, CURVATURE_LINE
from landscape.plots.fields import aligned, key_of
from landscape.plots.theme import (
    PALETTE,
    apply_theme,
    legend_above,
    method_style,
    naive_or_aligned,
    presentable,
)

LAMBDA_AXIS = "λ (0: B aligned; 1: A)"


def _name(line: dict[str, Any]) -> str:
    return key_of(CURVATURE_LINE, line)


def _positive(values: list[Any]) -> bool:
    return all(v is not None and v > 0 for v in values)


def _log_axis(values: list[Any]) -> dict[str, Any]:
    """A log axis (ticks at 1, 2 and 5 of each decade) when every value is positive: the
    eigenvalues of a barrier's top span decades."""
    return {"type": "log", "dtick": "D2"} if _positive(values) else {}


@presentable
def figure_curvature(result: dict[str, Any]) -> go.Figure:
    """Loss on the batch (left), top Hessian eigenvalue (middle; a log axis when every value is
    positive) and Hutchinson's trace with ± one standard error (right) against λ, one line per
    alignment: naive dashed with open markers, aligned solid. Where the barrier is gone, an
    aligned line's curvature stays at its endpoints' level; the naive line's rises or falls
    where the loss rises."""
    split = CURVATURE.read(result, "split")
    lines = CURVATURE.read(result, "lines")
    traced = any(t is not None for x in lines for t in CURVATURE_LINE.read(x, "trace"))
    titles = ("loss", "top Hessian eigenvalue", "Hessian trace (Hutchinson)")
    cols = 3 if traced else 2  # no probes: no trace panel
    fig = make_subplots(rows=1, cols=cols, horizontal_spacing=0.09 if traced else 0.14,
                        subplot_titles=titles[:cols])  # fmt: skip
    tops = []
    for line in lines:
        name = _name(line)
        naive = not aligned(CURVATURE_LINE, line)  # drawn as the naive line
        style = naive_or_aligned(method_style(name).colour, naive, 8)
        lam = CURVATURE_LINE.read(line, "lambdas")
        top = CURVATURE_LINE.read(line, "top_eigenvalue")
        tops += top
        trace = CURVATURE_LINE.read(line, "trace")
        se = CURVATURE_LINE.read(line, "trace_se")
        panels = [(1, CURVATURE_LINE.read(line, "loss"), None), (2, top, None)]
        if traced:
            panels.append((3, trace, [s or 0.0 for s in se]))
        for col, values, errors in panels:
            fig.add_trace(
                go.Scatter(
                    x=lam, y=values, mode="lines+markers", name=name, legendgroup=name,
                    showlegend=col == 1, **style,
                    error_y=None if errors is None else {"type": "data", "array": errors},
                    hovertemplate=f"{name}<br>λ = %{{x:.3g}}<br>%{{y:.4g}}<extra></extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
    for col in range(1, cols + 1):
        fig.update_xaxes(title_text=LAMBDA_AXIS, row=1, col=col)
    fig.update_yaxes(title_text=f"{split} batch loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text="λ_max", row=1, col=2, **_log_axis(tops))
    if traced:
        fig.update_yaxes(title_text="tr H", row=1, col=3)
    apply_theme(fig)
    fig.update_layout(height=460, legend=legend_above(1.14), margin={"t": 120})
    return fig


@presentable
def figure_curvature_blocks(result: dict[str, Any]) -> go.Figure:
    """Each block's top Hessian eigenvalue (the Hessian restricted to its parameters) against
    λ, one panel per alignment, one colour per block."""
    lines = CURVATURE.read(result, "lines")
    fig = make_subplots(rows=1, cols=len(lines), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[_name(x) for x in lines])  # fmt: skip
    values = []
    for col, line in enumerate(lines, start=1):
        lam = CURVATURE_LINE.read(line, "lambdas")
        naive = not aligned(CURVATURE_LINE, line)
        for k, (block, tops) in enumerate(CURVATURE_LINE.read(line, "blocks").items()):
            values += tops
            fig.add_trace(
                go.Scatter(
                    x=lam, y=tops, mode="lines+markers", name=block, legendgroup=block,
                    showlegend=col == 1,
                    **naive_or_aligned(PALETTE[k % len(PALETTE)], naive, 7),
                    hovertemplate=f"{block}<br>λ = %{{x:.3g}}<br>%{{y:.4g}}<extra></extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
        fig.update_xaxes(title_text=LAMBDA_AXIS, row=1, col=col)
    fig.update_yaxes(title_text="block's top eigenvalue", **_log_axis(values))
    apply_theme(fig)
    fig.update_layout(height=460, legend=legend_above(1.14), margin={"t": 120})
    return fig
