"""Eigenangles page: how far the rotations found by matching are from the identity, and the
barrier after every weight-matching round and learned-matching checkpoint."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.plots.fields import (
    EIGENANGLES,
    ITERATION_ROUND,
    ITERATIONS,
    LEARNED_CHECKPOINT,
    LM_STEP,
    Fields,
)
from landscape.plots.theme import (
    BLACK,
    LINE_WIDTH,
    NEUTRAL,
    PALETTE,
    THIN_WIDTH,
    apply_theme,
    legend_above,
    points,
    presentable,
    rgba,
)

# One colour per series of the iteration figures: rotations as O_WM above, the learned start
# from the identity as the correction, permutations apart from both.
GROUP_STYLE = {"perm": ("permutations (perm)", PALETTE[1]),
               "signed-perm": ("signed permutations", PALETTE[2]),
               "orth": ("rotations (orth)", PALETTE[0])}  # fmt: skip
INIT_STYLE = {"weight": ("from weight matching", PALETTE[0]),
              "identity": ("from the identity", PALETTE[3])}  # fmt: skip

PI_TICKS = {
    "tickvals": [-3.141592653589793, -1.5707963267948966, 0.0, 1.5707963267948966,
                 3.141592653589793],
    "ticktext": ["−π", "−π/2", "0", "π/2", "π"],
}  # fmt: skip


@presentable
def figure_eigenangles(result: dict[str, Any], *, bins: int = 24
                       ) -> go.Figure:  # fmt: skip
    """Histograms of eigenangles on (−π, π]: O_WM, the correction O_LM·O_WMᵀ, Haar-random.

    Densities (area 1 per histogram) share the bins so the three are directly comparable; a
    missing series (e.g. no learned matching) is left out. The Haar reference is the pooled
    angles of ``haar_draws`` seeded Haar-random O(d) matrices (their average density), named so
    in the legend.
    """
    fig = go.Figure()
    draws = EIGENANGLES.read(result, "haar_draws")
    haar = ("Haar-random O(d): one draw" if (draws or 1) == 1
            else f"Haar-random O(d): average of {draws} seeded draws")  # fmt: skip
    series = (("angles_wm", "O_WM (weight matching)", PALETTE[0]),
              ("angles_correction", "O_LM·O_WMᵀ (learned correction)", PALETTE[3]),
              ("angles_haar", haar, NEUTRAL))  # fmt: skip
    width = 2 * math.pi / bins
    for key, name, colour in series:
        angles = EIGENANGLES.read(result, key)
        if not angles:
            continue
        fig.add_trace(
            go.Histogram(
                x=angles,
                name=name,
                histnorm="probability density",
                xbins={"start": -math.pi, "end": math.pi + 1e-9, "size": width},
                marker={
                    "color": rgba(colour, 0.35),
                    "line": {"color": colour, "width": THIN_WIDTH},
                },
                hovertemplate=f"{name}<br>angle %{{x}}<br>density %{{y:.3f}}<extra></extra>",
            )  # fmt: skip
        )
    fig.update_layout(barmode="overlay", bargap=0.0)
    fig.update_xaxes(title_text="eigenangle φ (rad)", range=[-math.pi, math.pi], **PI_TICKS)
    fig.update_yaxes(title_text="density")
    apply_theme(fig)
    fig.update_layout(legend=legend_above(), height=360)
    return fig


def integer_step(n: int, most: int = 10) -> int:
    """The tick step of an axis of the integers 0 … n−1: 1, 2 or 5 times a power of ten, the
    smallest that puts at most ``most`` ticks on it (every integer of 53 rounds would overlap)."""
    power = 1
    while True:
        for m in (1, 2, 5):
            if (n - 1) <= most * m * power:
                return m * power
        power *= 10


@presentable
def figure_objective(values: Sequence[float]) -> go.Figure:
    """The weight-matching objective ‖θ_A − π(θ_B)‖² per coordinate-descent round."""
    fig = go.Figure(
        go.Scatter(
            x=list(range(len(values))),
            y=list(values),
            mode="lines+markers",
            name="‖θ_A − π(θ_B)‖²",
            line={"color": PALETTE[0], "width": LINE_WIDTH},
            marker={"size": 8},
        )  # fmt: skip
    )
    fig.update_xaxes(title_text="round (0 = identity)", tick0=0, dtick=integer_step(len(values)))
    fig.update_yaxes(title_text="‖θ_A − π(θ_B)‖²")
    apply_theme(fig)
    fig.update_layout(height=320)
    return fig


@presentable
def figure_lm_curve(curve: Sequence[dict[str, float]]) -> go.Figure:
    """Learned matching: merged-model training loss against step (``[{step, loss}]``).

    From 10 steps on, a running mean over the last ``k = max(5, n // 20)`` steps is drawn over
    the raw loss (faded).
    """
    steps = [LM_STEP.read(c, "step") for c in curve]
    loss = [LM_STEP.read(c, "loss") for c in curve]
    fig = go.Figure(
        go.Scatter(
            x=steps,
            y=loss,
            mode="lines",
            name="merged loss",
            line={"color": PALETTE[3], "width": THIN_WIDTH},
        )  # fmt: skip
    )
    if len(loss) >= 10:  # a running mean makes the trend readable under λ-sampling noise
        k = max(5, len(loss) // 20)
        smooth = [sum(loss[max(0, i - k + 1) : i + 1]) / len(loss[max(0, i - k + 1) : i + 1])
                  for i in range(len(loss))]  # fmt: skip
        fig.data[0].line.color = rgba(PALETTE[3], 0.35)
        fig.add_trace(go.Scatter(x=steps, y=smooth, mode="lines", name=f"running mean ({k})",
                                 line={"color": PALETTE[3], "width": LINE_WIDTH}))  # fmt: skip
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="train loss of the merge (nats)")
    apply_theme(fig)
    fig.update_layout(
        height=320,
        legend=legend_above(),
    )
    return fig


# the ring around the checkpoint learned matching returns, and what it means
RETURNED = "returned (lowest merged loss on a training slice)"


def _barrier_panels(result: dict[str, Any], rows_key: str, kind: Fields, series: str, x: str,
                    styles: dict[str, tuple[str, str]], x_title: str,
                    mark: str | None = None) -> go.Figure:  # fmt: skip
    """Loss barrier (left) and accuracy barrier (right) against ``x``, one line per ``series``
    value of the rows in ``result[rows_key]``, in the order the rows name them. ``mark``: a
    true/false field of the rows; the rows where it holds get a ring (:data:`RETURNED`)."""
    rows = ITERATIONS.read(result, rows_key)
    split, space = ITERATIONS.read(result, "split"), ITERATIONS.read(result, "space")
    names = list(dict.fromkeys(kind.read(r, series) for r in rows))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    rings = []  # (label, the series' marked rows), drawn after every line
    for i, name in enumerate(names):
        label, colour = styles.get(name, (str(name), PALETTE[i % len(PALETTE)]))
        mine = sorted((r for r in rows if kind.read(r, series) == name),
                      key=lambda r: kind.read(r, x))  # fmt: skip
        if mark:
            rings.append((label, [r for r in mine if kind.read(r, mark)]))
        xs = [kind.read(r, x) for r in mine]
        for col, metric in ((1, "loss"), (2, "accuracy")):
            unit = points(1.0) if metric == "accuracy" else 1.0
            fig.add_trace(
                go.Scatter(
                    x=xs, y=[unit * kind.read(r, f"barrier_{metric}") for r in mine],
                    mode="lines+markers", name=label, legendgroup=label, showlegend=col == 1,
                    line={"color": colour, "width": LINE_WIDTH}, marker={"size": 7},
                    hovertemplate=f"{label}<br>{x} %{{x}}<br>{metric} barrier %{{y:.4f}}"
                                  "<extra></extra>",
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
    # black rings after every line, so that the legend names the lines first and the ring's
    # entry is no series' colour
    for label, ringed in rings:
        if not ringed:
            continue
        for col, metric in ((1, "loss"), (2, "accuracy")):
            unit = points(1.0) if metric == "accuracy" else 1.0
            fig.add_trace(
                go.Scatter(
                    x=[kind.read(r, x) for r in ringed],
                    y=[unit * kind.read(r, f"barrier_{metric}") for r in ringed],
                    mode="markers", name=RETURNED, legendgroup=RETURNED, cliponaxis=False,
                    showlegend=col == 1 and not any(t.name == RETURNED for t in fig.data),
                    marker={"symbol": "circle-open", "size": 17, "color": BLACK,
                            "line": {"width": 2}},
                    hovertemplate=f"{label}: returned at {x} %{{x}}<extra></extra>",
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
    where = "" if space == "weights" else f", {space} space"
    for col in (1, 2):
        fig.update_xaxes(title_text=x_title, row=1, col=col)
    fig.update_yaxes(title_text=f"{split} loss barrier (nats{where})", rangemode="tozero",
                     row=1, col=1)  # fmt: skip
    fig.update_yaxes(title_text=f"{split} accuracy barrier (points{where})", rangemode="tozero",
                     row=1, col=2)  # fmt: skip
    apply_theme(fig)
    fig.update_layout(height=360, legend=legend_above())
    return fig


@presentable
def figure_round_barriers(result: dict[str, Any]) -> go.Figure:
    """Iterated weight matching: the loss and accuracy barriers after each coordinate-descent
    round (0 = identity, the naive barrier), one line per group (``result["rounds"]`` of
    ``experiments.iteration_barriers``)."""
    return _barrier_panels(result, "rounds", ITERATION_ROUND, "group", "round", GROUP_STYLE,
                           "weight-matching round (0 = identity)")  # fmt: skip


@presentable
def figure_checkpoint_barriers(result: dict[str, Any]
                               ) -> go.Figure:  # fmt: skip
    """Learned matching: the loss and accuracy barriers of the transform at each scoring
    checkpoint (step 0 = its start), one line per start (``result["checkpoints"]`` of
    ``experiments.iteration_barriers``); a ring marks the checkpoint each start returns."""
    return _barrier_panels(result, "checkpoints", LEARNED_CHECKPOINT, "init", "step",
                           INIT_STYLE, "learned-matching step", mark="selected")  # fmt: skip
