"""The Llama ablation (``landscape ablation``; the Ablation page): one change at a time from the
dropout GPT to the Llama entry, and the barrier each leaves."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.matching import matching_key
from landscape.plots.fields import (
    ABLATION,
    ABLATION_CELL,
    ABLATION_CURVE,
    ABLATION_SEED,
    ABLATION_STEP,
    key_of,
)
from landscape.plots.interpolation import SPACE_STYLE, figure_interpolation
from landscape.plots.theme import (
    NEUTRAL,
    THIN_WIDTH,
    apply_theme,
    legend_above,
    method_style,
    presentable,
    rgba,
)

# the barrier the paper's claim asks of an aligned pair, drawn as a reference
TARGET_BARRIER = 0.05


def row_label(method: str, group: str, calibrated: bool = False) -> str:
    """How an ablation row is named: the method's key, and ", calibrated" for the line whose
    every model has its temperature fitted."""
    return matching_key(method, group) + (", calibrated" if calibrated else "")


def step_cell(step: dict[str, Any], method: str, group: str, space: str,
              calibrated: bool = False) -> dict[str, Any] | None:  # fmt: skip
    """The cell of one ablation entry for (method, group) in ``space``, calibrated or not
    (None: not measured)."""
    for c in ABLATION_STEP.read(step, "cells"):
        if (ABLATION_CELL.read(c, "method"), ABLATION_CELL.read(c, "group"),
                ABLATION_CELL.read(c, "space"),
                ABLATION_CELL.read(c, "calibrated")) == (method, group, space,
                                                          calibrated):  # fmt: skip
            return c
    return None


@presentable
def figure_ablation(result: dict[str, Any], *, method: str = "learned", group: str = "orth",
                    calibrated: bool = False) -> go.Figure:  # fmt: skip
    """The barrier ``method``/``group`` (``calibrated``: with every model's temperature fitted)
    leaves per ablation entry (one row each, the base on
    top), every pair a small dot and the mean with its standard error a large marker, in each
    merge space measured (weights filled, circuits open); beside it, each entry's test loss
    (mean over seeds, each seed a dot). A dotted line marks :data:`TARGET_BARRIER`."""
    steps = ABLATION.read(result, "steps")
    split = ABLATION.read(result, "split")
    labels = [ABLATION_STEP.read(s, "label") for s in steps]
    colour = method_style(matching_key(method, group)).colour
    name = row_label(method, group, calibrated)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.68, 0.32],
                        horizontal_spacing=0.04)  # fmt: skip
    spaces = [sp for sp in SPACE_STYLE
              if any(step_cell(s, method, group, sp, calibrated) for s in steps)]  # fmt: skip
    for space in spaces:
        look = SPACE_STYLE[space]
        shift = 0.0 if len(spaces) == 1 else (-0.15 if space == "weights" else 0.15)
        rows = [(i, step_cell(s, method, group, space, calibrated)) for i, s in enumerate(steps)]
        rows = [(i, c) for i, c in rows if c is not None]
        dots_x, dots_y = [], []
        for i, c in rows:
            for v in ABLATION_CELL.read(c, "per_pair_loss"):
                dots_x.append(v)
                dots_y.append(i + shift)
        fig.add_trace(go.Scatter(
            x=dots_x, y=dots_y, mode="markers", showlegend=False, name=f"{space}: pairs",
            marker={"color": rgba(colour, 0.55), "size": 7,
                    "symbol": "circle-open" if look["open"] else "circle"},
            hovertemplate="pair barrier %{x:.3f} nats<extra></extra>",
        ), row=1, col=1)  # fmt: skip
        fig.add_trace(go.Scatter(
            x=[ABLATION_CELL.read(c, "barrier_loss") for _, c in rows],
            y=[i + shift for i, _ in rows], mode="markers",
            name=f"{name}, {space} space",
            error_x={"type": "data", "array": [ABLATION_CELL.read(c, "barrier_loss_sem")
                                               for _, c in rows],
                     "color": colour, "thickness": look["width"]},
            marker={"color": colour, "size": 13, "opacity": look["opacity"],
                    "symbol": "diamond-open" if look["open"] else "diamond",
                    "line": {"color": colour, "width": 2}},
            customdata=[labels[i] for i, _ in rows],
            hovertemplate="%{customdata}<br>mean %{x:.3f} nats<extra></extra>",
        ), row=1, col=1)  # fmt: skip
    fig.add_vline(x=TARGET_BARRIER, line={"dash": "dot", "color": "#444", "width": THIN_WIDTH},
                  row=1, col=1)  # fmt: skip
    seed_x, seed_y = [], []
    for i, s in enumerate(steps):
        for r in ABLATION_STEP.read(s, "seeds"):
            seed_x.append(ABLATION_SEED.read(r, "test_loss"))
            seed_y.append(i)
    fig.add_trace(go.Scatter(x=seed_x, y=seed_y, mode="markers", showlegend=False,
                             name="seeds' test loss",
                             marker={"color": rgba(NEUTRAL, 0.7), "size": 7},
                             hovertemplate="seed test loss %{x:.3f} nats<extra></extra>"),
                  row=1, col=2)  # fmt: skip
    fig.add_trace(go.Scatter(x=[ABLATION_STEP.read(s, "test_loss") for s in steps],
                             y=list(range(len(steps))), mode="markers", name="test loss (mean)",
                             marker={"color": "#222", "size": 11, "symbol": "line-ns-open",
                                     "line": {"width": 3}},
                             hovertemplate="mean test loss %{x:.3f} nats<extra></extra>"),
                  row=1, col=2)  # fmt: skip
    fig.update_yaxes(tickvals=list(range(len(steps))), ticktext=labels, autorange="reversed",
                     row=1, col=1)  # fmt: skip
    fig.update_xaxes(title_text=f"{split} loss barrier (nats), {name}",
                     rangemode="tozero", row=1, col=1)  # fmt: skip
    fig.update_xaxes(title_text=f"{split} loss (nats)", row=1, col=2)
    apply_theme(fig)
    fig.update_layout(height=120 + 46 * len(steps), legend=legend_above(), margin={"t": 60})
    return fig


def ablation_series(result: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """One entry's curves as the Interpolation figure's series: one per (method, group, space),
    every pair's curve (:func:`landscape.plots.interpolation.figure_interpolation`)."""
    step = next((s for s in ABLATION.read(result, "steps")
                 if ABLATION_STEP.read(s, "model") == model), None)  # fmt: skip
    if step is None:
        raise KeyError(f"the ablation has no entry {model!r}")
    series = []
    lambdas = ABLATION.read(result, "lambdas")
    for c in ABLATION_STEP.read(step, "cells"):
        method, group = ABLATION_CELL.read(c, "method"), ABLATION_CELL.read(c, "group")
        space = ABLATION_CELL.read(c, "space")
        if ABLATION_CELL.read(c, "calibrated"):  # the Interpolation figure draws methods
            continue
        key = key_of(ABLATION_CELL, c)
        results = [{"lambdas": lambdas,
                    "loss": ABLATION_CURVE.read(k, "loss"),
                    "accuracy": ABLATION_CURVE.read(k, "accuracy"),
                    "seeds": ABLATION_CURVE.read(k, "seeds"), "model": model,
                    "method": method, "group": group, "space": space}
                   for k in ABLATION_CELL.read(c, "curves")]  # fmt: skip
        series.append({"label": f"{key} ({space})", "method": key, "space": space,
                       "results": results})  # fmt: skip
    return series


def figure_ablation_curves(result: dict[str, Any], model: str) -> go.Figure:
    """One ablation entry's curves: every (method, group, space), mean and range over pairs
    (the calibrated control's are in the table, not here: its losses are at other temperatures
    than the line's)."""
    return figure_interpolation(ablation_series(result, model),
                                split=ABLATION.read(result, "split"))  # fmt: skip
