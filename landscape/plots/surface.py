"""The Surface page's figures: a loss or accuracy surface as a contour map and in 3-D, the
models marked and the straight paths between them drawn on it (docs/design.md §1, *Surfaces*);
on the contour map, training paths projected onto the surface's plane, each with its projection
error in the legend.

Loss is coloured (and raised, in 3-D) on a log scale: a surface spans the basin's hundredths of
a nat and the rim's tens, and on a linear scale the basin is one colour. Hovering shows the
loss itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from landscape.plots.fields import SURFACE, SURFACE_PATH, SURFACE_POINT, SURFACE_RUN, key_of
from landscape.plots.theme import (
    GRID,
    LINE_WIDTH,
    PALETTE,
    apply_theme,
    font_size,
    points,
    presentable,
)

VIEWS = ("contour", "3d")
METRICS = ("loss", "accuracy")
POINT_COLOUR = "#000000"
# the straight paths A–B, A–C, B–C: palette colours other than the colour scale's ends
PATH_COLOURS = (PALETTE[3], PALETTE[4], PALETTE[1])
PATH_DASH = "dash"  # the page says what the dashed lines are: no legend beside the colour bar
# training paths: colours apart from the straight paths' and the colour scale's ends
RUN_COLOURS = (PALETTE[6], PALETTE[5], PALETTE[2], PALETTE[0])


def _value(metric: str, v: float) -> float:
    """What is drawn for a value: log₁₀ of a loss, an accuracy in percent."""
    if metric == "accuracy":
        return points(v)
    return math.log10(v) if v > 0 else -math.inf


def _unit(metric: str) -> str:
    return "accuracy (%)" if metric == "accuracy" else "loss (nats, log scale)"


def axis_titles(result: Mapping[str, Any]) -> tuple[str, str]:
    """The plane's axes: α and β along the two random directions or Hessian eigenvectors, or
    the Gram–Schmidt coordinates of the plane through three models (weight-space distances)."""
    if SURFACE.read(result, "kind") == "directions":
        if SURFACE.read(result, "directions") == "hessian":
            return "α (along Hessian eigenvector 1)", "β (along Hessian eigenvector 2)"
        if SURFACE.read(result, "directions") == "trajectory":
            return ("α (path's principal direction 1, × its reach)",
                    "β (path's principal direction 2, × its reach)")  # fmt: skip
        return "α (along direction 1)", "β (along direction 2)"
    return "along B − A (weight distance)", "towards C, ⊥ B − A"


def surface_title(result: Mapping[str, Any]) -> str:
    model = SURFACE.read(result, "model")
    seeds = SURFACE.read(result, "seeds")
    split = SURFACE.read(result, "split")
    if SURFACE.read(result, "kind") == "directions":
        seed = seeds[0] if seeds else ""
        if SURFACE.read(result, "directions") == "hessian":
            return (f"{model} seed {seed}, {split} split<br>filter-normalised top two Hessian "
                    "eigenvectors")  # fmt: skip
        if SURFACE.read(result, "directions") == "trajectory":
            info = SURFACE.read(result, "trajectory") or {}
            share = sum(info.get("explained", [])[:2])
            return (f"{model} seed {seed}, {split} split<br>the plane of its training path (top "
                    f"two principal directions: {100 * share:.0f}% of Σ‖θ_t − θ‖²)")  # fmt: skip
        return (f"{model} seed {seed}, {split} split<br>filter-normalised random directions "
                f"(seed {SURFACE.read(result, 'directions_seed')})")  # fmt: skip
    how = key_of(SURFACE, result)
    seeds_text = ", ".join(map(str, seeds))
    # two lines: one would run the width of a projector's figure
    return f"{model} seeds {seeds_text}, {split} split<br>the plane through the three ({how})"


def _ticks(metric: str, values: Sequence[float]) -> dict[str, Any]:
    """Colour-bar ticks of a log-scaled loss labelled with the loss itself."""
    if metric == "accuracy":
        return {"title": {"text": "accuracy (%)"}}
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = math.floor(min(finite)), math.ceil(max(finite))
    ticks = [e + math.log10(m) for e in range(lo, hi + 1) for m in (1, 2, 5)
             if min(finite) - 0.05 <= e + math.log10(m) <= max(finite) + 0.05]  # fmt: skip
    return {"title": {"text": "loss (nats)"}, "tickvals": ticks,
            "ticktext": [f"{10**t:.3g}" for t in ticks]}  # fmt: skip


def _grid(result: Mapping[str, Any], metric: str) -> list[list[float]]:
    return [[_value(metric, v) for v in row] for row in SURFACE.read(result, metric)]


def _point_text(p: Mapping[str, Any]) -> str:
    return (f"{SURFACE_POINT.read(p, 'label')}<br>loss {SURFACE_POINT.read(p, 'loss'):.4g}"
            f"<br>accuracy {points(SURFACE_POINT.read(p, 'accuracy')):.2f}%")  # fmt: skip


def _short(label: str) -> str:
    """A model's label on the figure: ``seed 3`` of ``mlp-digits seed 3``."""
    return label.rsplit(" ", 2)[-2] + " " + label.rsplit(" ", 1)[-1] if " " in label else label


@presentable
def figure_surface(result: Mapping[str, Any], *, metric: str = "loss",
                   view: str = "contour") -> go.Figure:  # fmt: skip
    """``metric`` over the surface's grid as a contour map (``view="contour"``) or a 3-D
    surface (``"3d"``), with the models marked and the straight paths between them drawn (in
    3-D at their own measured values, which lie on the surface)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    xs, ys = SURFACE.read(result, "x"), SURFACE.read(result, "y")
    z = _grid(result, metric)
    # the hover's value: a loss in nats, an accuracy in percent (never the log or a fraction)
    unit = points(1.0) if metric == "accuracy" else 1.0
    raw = [[unit * v for v in row] for row in SURFACE.read(result, metric)]
    flat = [v for row in z for v in row]
    colorbar = _ticks(metric, flat)
    scale = "Viridis" if metric == "loss" else "Viridis_r"  # the basin dark either way
    shown = f"{metric} %{{customdata:.4g}}" + ("%" if metric == "accuracy" else " nats")
    hover = "x %{x:.3g}<br>y %{y:.3g}<br>" + shown + "<extra></extra>"
    title_x, title_y = axis_titles(result)
    fig = go.Figure()
    paths = SURFACE.read(result, "paths")
    models = SURFACE.read(result, "points")
    if view == "contour":
        fig.add_trace(go.Contour(x=xs, y=ys, z=z, customdata=raw, colorscale=scale,
                                 colorbar=colorbar, contours={"coloring": "heatmap"},
                                 line={"width": 0.5}, ncontours=24, hovertemplate=hover,
                                 name=metric, showlegend=False))  # fmt: skip
        for k, path in enumerate(paths):
            fig.add_trace(go.Scatter(
                x=SURFACE_PATH.read(path, "x"), y=SURFACE_PATH.read(path, "y"), mode="lines",
                line={"color": PATH_COLOURS[k % 3], "width": LINE_WIDTH, "dash": PATH_DASH},
                name=f"straight path {_path_label(path)}",
                customdata=[unit * v for v in SURFACE_PATH.read(path, metric)],
                hovertemplate=f"{_path_label(path)}<br>{shown}<extra></extra>",
            ))  # fmt: skip
        runs = SURFACE.read(result, "trajectories")
        for k, run in enumerate(runs):
            fig.add_trace(_run_trace(run, RUN_COLOURS[k % len(RUN_COLOURS)]))
        fig.add_trace(go.Scatter(
            x=[SURFACE_POINT.read(p, "x") for p in models],
            y=[SURFACE_POINT.read(p, "y") for p in models],
            mode="markers+text", text=[_short(SURFACE_POINT.read(p, "label")) for p in models],
            textposition="top center", textfont={"size": font_size() + 2, "color": POINT_COLOUR},
            marker={"color": "white", "size": 12, "symbol": "circle",
                    "line": {"color": POINT_COLOUR, "width": 2}},
            hovertext=[_point_text(p) for p in models], hoverinfo="text", name="models",
            showlegend=False,
        ))  # fmt: skip
        fig.update_xaxes(title_text=title_x, showgrid=False)
        fig.update_yaxes(title_text=title_y, showgrid=False)
        if SURFACE.read(result, "kind") == "plane":  # distances: one unit is one unit
            fig.update_xaxes(constrain="domain")  # the box shrinks to the data, not the range
            fig.update_yaxes(scaleanchor="x", scaleratio=1, constrain="domain")
        apply_theme(fig, title=surface_title(result))
        fig.update_layout(showlegend=False, height=540)
        if runs:  # the paths and their projection errors, below the map (the colour bar is right)
            fig.update_layout(showlegend=True, height=620,
                              legend={"orientation": "h", "yanchor": "top", "y": -0.3,
                                      "xanchor": "left", "x": 0})  # fmt: skip
        return fig
    fig.add_trace(go.Surface(x=xs, y=ys, z=z, customdata=raw, colorscale=scale,
                             colorbar=colorbar, hovertemplate=hover, name=metric,
                             showscale=True, opacity=0.95))  # fmt: skip
    lift = 0.01 * (max(flat) - min(flat) or 1.0)  # drawn just above the surface, not inside it
    for k, path in enumerate(paths):
        fig.add_trace(go.Scatter3d(
            x=SURFACE_PATH.read(path, "x"), y=SURFACE_PATH.read(path, "y"),
            z=[_value(metric, v) + lift for v in SURFACE_PATH.read(path, metric)],
            mode="lines", line={"color": PATH_COLOURS[k % 3], "width": 6},
            name=f"straight path {_path_label(path)}", hoverinfo="name",
        ))  # fmt: skip
    fig.add_trace(go.Scatter3d(
        x=[SURFACE_POINT.read(p, "x") for p in models],
        y=[SURFACE_POINT.read(p, "y") for p in models],
        z=[_value(metric, SURFACE_POINT.read(p, metric)) + lift for p in models],
        mode="markers+text", text=[_short(SURFACE_POINT.read(p, "label")) for p in models],
        marker={"color": "white", "size": 6, "line": {"color": POINT_COLOUR, "width": 2}},
        textfont={"size": font_size() + 2, "color": POINT_COLOUR},
        hovertext=[_point_text(p) for p in models], hoverinfo="text", name="models",
    ))  # fmt: skip
    ztitle = "log₁₀ loss" if metric == "loss" else "accuracy (%)"
    apply_theme(fig, title=surface_title(result))
    size = font_size()

    def axis(text: str) -> dict[str, Any]:
        # No tick labels: 3-D tick labels grow far faster than their font size (at a projector's
        # doubled font they cover the surface); the contour map and the colour bar carry the
        # numbers, the 3-D view the shape
        return {"title": {"text": text, "font": {"size": size}}, "showticklabels": False,
                "ticks": "", "showgrid": True, "gridcolor": GRID}  # fmt: skip

    # the axes named in a word or two (a long title in a 3-D scene runs into its neighbour; the
    # contour map beside it says them in full), the camera close enough that the surface, not
    # the empty box around it, fills the figure
    short_x, short_y = (("α", "β") if SURFACE.read(result, "kind") != "plane"
                        else ("B − A", "⊥, towards C"))  # fmt: skip
    fig.update_layout(
        scene={"xaxis": axis(short_x), "yaxis": axis(short_y), "zaxis": axis(ztitle),
               "aspectmode": "manual", "aspectratio": {"x": 1, "y": 1, "z": 0.6},
               "camera": {"eye": {"x": 1.15, "y": -1.3, "z": 0.8}},
               "domain": {"x": [0, 1], "y": [0, 1]}},
        showlegend=False, height=540, margin={"l": 10, "r": 10, "b": 10},
    )  # fmt: skip
    return fig


def run_label(run: Mapping[str, Any]) -> str:
    """A training path's legend entry: its seed and the share of its displacement outside the
    plane (and, where the run here did not end on its checkpoint, how far from it)."""
    text = (f"seed {SURFACE_RUN.read(run, 'seed')}'s training path: "
            f"{100 * SURFACE_RUN.read(run, 'error'):.1f}% outside the plane")  # fmt: skip
    gap = SURFACE_RUN.read(run, "end_gap")
    if gap:
        text += f" (ends {100 * gap:.2g}% from its checkpoint)"
    return text


def _run_trace(run: Mapping[str, Any], colour: str) -> go.Scatter:
    """A training path on the contour map: its snapshots joined in step order, the
    initialisation a square, each point's step and projection error on hover."""
    steps, errors = SURFACE_RUN.read(run, "steps"), SURFACE_RUN.read(run, "errors")
    n = len(steps)
    return go.Scatter(
        x=SURFACE_RUN.read(run, "x"), y=SURFACE_RUN.read(run, "y"), mode="lines+markers",
        line={"color": colour, "width": LINE_WIDTH},
        marker={"color": colour, "size": [11] + [5] * (n - 1),
                "symbol": ["square"] + ["circle"] * (n - 1),
                "line": {"color": POINT_COLOUR, "width": 1}},
        name=run_label(run), customdata=[[t, 100 * e] for t, e in zip(steps, errors, strict=True)],
        hovertemplate=(f"seed {SURFACE_RUN.read(run, 'seed')}, step %{{customdata[0]}}<br>"
                       "%{customdata[1]:.1f}% of its displacement outside the plane"
                       "<extra></extra>"),
    )  # fmt: skip


def _path_label(path: Mapping[str, Any]) -> str:
    a, _, b = SURFACE_PATH.read(path, "label").partition("–")
    return f"{_short(a)}–{_short(b)}"
