"""Gauge page: which gauges are exact, whether matching undoes them, and moving artifacts.

The six figures of a gauge sweep (``landscape.experiments.gauge.parts`` and ``.transport``): the
symmetry check, the scramble test, recovery under drift, trajectory transport, the claim check
and the transport table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.experiments.gauge.results import GROUP_LABEL
from landscape.plots.fields import (
    CLAIMS,
    CLAIMS_SUMMARY,
    RECOVERY,
    RECOVERY_POINT,
    SCRAMBLE,
    SCRAMBLE_SUMMARY,
    SYMMETRY_ROW,
    TRAJECTORY,
    TRAJECTORY_ROW,
    TRANSPORT_ROW,
)
from landscape.plots.theme import (
    LINE_WIDTH,
    NEUTRAL,
    PALETTE,
    ROWS_META,
    THIN_WIDTH,
    apply_theme,
    font_size,
    legend_above,
    presentable,
)

VALID_COLOUR, INVALID_COLOUR = PALETTE[2], PALETTE[3]
# The stream groups of the sweep with their labels, in the sweep's order.
GAUGE_LABEL = GROUP_LABEL
LOG_FLOOR = 1e-16  # log axes cannot show 0: smaller values are drawn at this floor
REFERENCE_LINE = {"dash": "dash", "color": "#222", "width": THIN_WIDTH}


def _floor(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else max(float(v), LOG_FLOOR) for v in values]


def _reference_line(fig: go.Figure, y: float, name: str) -> None:
    """A dashed horizontal reference across the whole plot, named in the legend. The line is a
    shape (it spans categorical axes edge to edge); a legend-only trace names it and carries the
    value into the CSV export."""
    fig.add_hline(y=y, line=REFERENCE_LINE)
    fig.add_trace(go.Scatter(x=[None], y=[y], mode="lines", name=name, line=REFERENCE_LINE))


# ---------------------------------------------------------------- 1. symmetry table


@presentable
def figure_symmetry_check(
    rows: Sequence[dict[str, Any]], *, tol: float = 1e-9, title: str | None = None
) -> go.Figure:
    """Measured max |Δlogits| of every symmetry level (``symmetry_table`` rows), log scale.

    Valid levels are green, invalid ones orange; the dashed line is the float64 tolerance below
    which a transform counts as function-preserving. ``title``: a heading drawn in the figure
    (a projector's page draws its section heading there, so that the figure starts higher).
    """
    names = [SYMMETRY_ROW.read(r, "group") for r in rows]
    values = [float(SYMMETRY_ROW.read(r, "max_abs_dlogits")) for r in rows]
    valid = [SYMMETRY_ROW.read(r, "valid") for r in rows]
    floored = _floor(values)
    fig = go.Figure()
    # a trace per verdict, so that the legend says what the colours mean
    # (in words short enough for one line beside the tolerance on a 1280-pixel projector)
    for verdict, ok_, colour in (("valid", True, VALID_COLOUR),
                                 ("invalid", False, INVALID_COLOUR)):  # fmt: skip
        at = [i for i, ok in enumerate(valid) if bool(ok) == ok_]
        if not at:
            continue
        fig.add_trace(go.Bar(
            y=[names[i] for i in at], x=[floored[i] for i in at], orientation="h",
            name=verdict, marker={"color": colour},
            customdata=[["valid" if ok_ else "invalid", values[i]] for i in at],
            hovertemplate="%{y}<br>%{customdata[0]}, max |Δlogits| = %{customdata[1]:.2e}"
                          "<extra></extra>",
        ))  # fmt: skip
    # the tolerance is a dashed line across the rows (a shape), named in the legend beside the
    # verdicts: a label of its own above the plot took a line that a projector's rows need
    tolerance = {"dash": "dash", "color": "#444", "width": THIN_WIDTH}
    fig.add_vline(x=tol, line=tolerance)
    fig.add_trace(go.Scatter(x=[tol], y=[None], mode="lines", name=f"tolerance {tol:g}",
                             line=tolerance))  # fmt: skip
    # a tick every three decades (the tolerance among them): every second decade tilted its
    # labels on top of one another at presentation size
    fig.update_xaxes(type="log", title_text="max |Δlogits| (float64)", exponentformat="power",
                     dtick=3)  # fmt: skip
    fig.update_yaxes(autorange="reversed", showgrid=False, categoryorder="array",
                     categoryarray=names)  # fmt: skip
    apply_theme(fig)
    # The legend on one line above the rows, across the whole figure (beside them it left the
    # bars too narrow for their ticks on a projector), under the heading when there is one. Every
    # row keeps its label (dtick): a row's height grows with its font on a projector (ROWS_META);
    # ten rows make a projector's figure PROJECTOR_HEIGHT tall, so that under the page's title
    # row it fits a 720-pixel screen.
    heading = {"text": title, "side": "top", "font": {"size": font_size() + 2}} if title else None
    fig.update_layout(
        height=max(260, 26 * len(rows) + 100), margin={"l": 20, "t": 10},
        legend={"orientation": "h", "xref": "container", "yref": "container", "x": 0, "y": 1,
                "xanchor": "left", "yanchor": "top", "title": heading},
        meta={ROWS_META: len(rows)},
    )  # fmt: skip
    fig.update_yaxes(dtick=1)
    fig.update_yaxes(automargin=True)
    return fig


# ---------------------------------------------------------------- 2. scramble test


@presentable
def figure_scramble(scramble: dict[str, Any]) -> go.Figure:
    """Scramble test: loss barrier between θ and g(θ), naive and after matching restricted to
    S_d, B_d and O(d), grouped by the group g was drawn from (mean over draws, log y).

    Matching within a group that contains g recovers it: the barrier drops to ~1e-8 (numerical
    noise); a group too small to contain g leaves a barrier of order 1e-1.
    """
    summary = SCRAMBLE.read(scramble, "summary")
    x = [SCRAMBLE_SUMMARY.read(s, "label") for s in summary]
    series = [("naive", "naive (no matching)", NEUTRAL)] + [
        (f"matched_{g}", f"matched in {label}", PALETTE[i])
        for i, (g, label) in enumerate(GAUGE_LABEL.items())
    ]
    fig = go.Figure()
    for key, name, colour in series:
        raw = [SCRAMBLE_SUMMARY.read(s, key) for s in summary]
        fig.add_trace(
            go.Bar(
                x=x,
                y=_floor(raw),
                name=name,
                marker={"color": colour},
                customdata=raw,
                hovertemplate=f"g ∈ %{{x}}<br>{name}<br>barrier %{{customdata:.2e}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="g drawn from", showgrid=False)
    fig.update_yaxes(type="log", title_text="test loss barrier (nats)", exponentformat="power")
    apply_theme(fig)
    fig.update_layout(
        barmode="group",
        height=380,
        legend=legend_above(),
    )
    return fig


# ---------------------------------------------------------------- 3. recovery under drift

RECOVERY_SERIES = (
    ("weights", "marginalised", "weights, sign-marginalised", PALETTE[3], "solid"),
    ("weights", "signed", "weights, signed correlation", PALETTE[3], "dot"),
    ("activations", "marginalised", "activations, sign-marginalised", PALETTE[0], "solid"),
    ("activations", "signed", "activations, signed correlation", PALETTE[0], "dot"),
)
# Where weights and activations agree exactly the lines coincide: weights are drawn first, wide
# with filled markers, activations on top, thin with open markers, so both stay visible.
SOURCE_STYLE = {
    "weights": {"width": 5.0, "marker": {"size": 9, "symbol": "circle"}},
    "activations": {"width": 2.0, "marker": {"size": 13, "symbol": "circle-open"}},
}


@presentable
def figure_recovery(recovery: dict[str, Any]) -> go.Figure:
    """Recovery of a B_d gauge under fine-tuning drift (``recovery_under_drift``).

    Left: share of coordinates mapped to the right place; right: share recovered exactly
    (place and sign), against fine-tuning steps k (categorical axis, each with its drift
    ‖θ_k − θ_0‖/‖θ_0‖ under it). Colour: from activations
    or weights; solid: sign-marginalised assignment, dotted: signed correlation. The grey line
    is the share of unflipped signs, where signed correlation plateaus.
    """
    curve = RECOVERY.read(recovery, "curve")
    drift = [RECOVERY_POINT.read(c, "drift") for c in curve]
    # each k with how far the fine-tuning moved the weights: flat lines then read as "recovered
    # however far it drifted", not as "nothing happened"
    steps = [RECOVERY_POINT.read(c, "steps") for c in curve]
    ks = [f"{k}<br>{d:.0%}" for k, d in zip(steps, drift, strict=True)]
    flipped = [RECOVERY_POINT.read(c, "flipped") for c in curve]
    unflipped = [None if f is None else 1 - f for f in flipped]
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        shared_yaxes=True,
        subplot_titles=["permutation right", "coordinate right (place and sign)"],
    )
    for col, metric in ((1, "perm"), (2, "coord")):
        for source, method, name, colour, dash in RECOVERY_SERIES:
            key = f"{source}_{method}_{metric}"
            style = SOURCE_STYLE[source]
            fig.add_trace(
                go.Scatter(
                    x=ks,
                    y=[RECOVERY_POINT.read(c, key) for c in curve],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line={"color": colour, "dash": dash, "width": style["width"]},
                    marker=style["marker"],
                    customdata=drift,
                    hovertemplate=f"{name}<br>k=%{{x}} steps (drift %{{customdata:.3f}})"
                    "<br>%{y:.1%}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_trace(
            go.Scatter(
                x=ks,
                y=unflipped,
                mode="lines",
                name="unflipped signs",
                legendgroup="unflipped",
                showlegend=col == 1,
                line={"color": "#999999", "dash": "dash", "width": THIN_WIDTH},
                hovertemplate="unflipped signs %{y:.1%}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="fine-tuning steps k<br>and the drift ‖θ_k − θ_0‖ / ‖θ_0‖",
                         type="category", row=1, col=col)  # fmt: skip
    fig.update_yaxes(
        title_text="share of coordinates", tickformat=".0%", range=[-0.03, 1.05], row=1, col=1
    )
    fig.update_yaxes(tickformat=".0%", range=[-0.03, 1.05], row=1, col=2)
    apply_theme(fig)
    fig.update_layout(
        height=440,
        margin={"t": 110, "b": 100},
        legend=legend_above(1.1),
    )
    fig.update_annotations(font={"size": font_size()})
    return fig


# ---------------------------------------------------------------- 4. trajectory transport


@presentable
def figure_trajectory(trajectory: dict[str, Any]) -> go.Figure:
    """Trajectory transport: coordinates recovered between checkpoint 0 and checkpoint t of one
    run, each stored in its own random B_d gauge, against the distance t in steps. Solid:
    local matches composed along the run; dotted: the endpoints matched directly. The ticks
    carry the drift ‖θ_t − θ_0‖/‖θ_0‖ under the steps."""
    rows = TRAJECTORY.read(trajectory, "rows")
    fig = go.Figure()
    colours = {"weights": PALETTE[3], "activations": PALETTE[0]}
    source_of = [TRAJECTORY_ROW.read(r, "source") for r in rows]
    sources = sorted(dict.fromkeys(source_of), key=lambda s: s != "weights")
    for source in sources:
        rs = [r for r, s in zip(rows, source_of, strict=True) if s == source]
        colour = colours.get(source, PALETTE[4])
        for key, label, dash in (
            ("local_coord", "composed local matches", "solid"),
            ("endpoint_coord", "endpoints matched", "dot"),
        ):
            name = f"{source}: {label}"
            fig.add_trace(
                go.Scatter(
                    x=[TRAJECTORY_ROW.read(r, "steps") for r in rs],
                    y=[TRAJECTORY_ROW.read(r, key) for r in rs],
                    mode="lines",
                    name=name,
                    line={
                        "color": colour,
                        "dash": dash,
                        "width": SOURCE_STYLE.get(source, {"width": LINE_WIDTH})["width"],
                    },
                    customdata=[TRAJECTORY_ROW.read(r, "drift") for r in rs],
                    hovertemplate=f"{name}<br>%{{x}} steps apart (drift %{{customdata:.3f}})"
                    "<br>%{y:.1%}<extra></extra>",
                )
            )
    # ticks with the drift from the first checkpoint under the steps: flat lines then read as
    # "recovered however far the run went", not as "nothing moved"
    first = [r for r, s in zip(rows, source_of, strict=True) if s == sources[0]] if rows else []
    marks = first[:: max(1, len(first) // 5)]
    fig.update_xaxes(
        title_text="distance along the trajectory (training steps)<br>and the drift "
        "‖θ_t − θ_0‖ / ‖θ_0‖",
        tickvals=[TRAJECTORY_ROW.read(r, "steps") for r in marks],
        ticktext=[f"{TRAJECTORY_ROW.read(r, 'steps')}<br>{TRAJECTORY_ROW.read(r, 'drift'):.0%}"
                  for r in marks],
    )  # fmt: skip
    fig.update_yaxes(title_text="coordinates recovered", tickformat=".0%", range=[-0.03, 1.05])
    apply_theme(fig)
    fig.update_layout(
        height=400,
        legend=legend_above(),
        margin={"b": 100},
    )
    return fig


# ---------------------------------------------------------------- 5. claim check


@presentable
def figure_claims(claims: dict[str, Any]) -> go.Figure:
    """Claim check: overlap of "the top-k coordinates for class c" re-made in a random gauge
    with the original claim, raw and after transport back (mean over classes and draws); for
    S_d and B_d also transported with the permutation alone. Dashed: the chance level k/d.
    A rotation has no permutation part, so that bar of O(d) is not drawn: its place says
    "n/a" and a line under the axis title says why."""
    summary = CLAIMS.read(claims, "summary")
    x = [CLAIMS_SUMMARY.read(s, "label") for s in summary]
    fig = go.Figure()
    missing = False
    for key, name, colour in (
        ("raw", "in the random gauge", NEUTRAL),
        ("perm_only", "transported, permutation only", PALETTE[1]),
        ("transported", "transported back", PALETTE[2]),
    ):
        ys = [CLAIMS_SUMMARY.read(s, key) for s in summary]
        missing = missing or any(v is None for v in ys)
        fig.add_trace(
            go.Bar(
                x=x,
                y=[0.0 if v is None else v for v in ys],  # a bar of no height carries "n/a"
                name=name,
                marker={"color": colour},
                text=["n/a" if v is None else f"{v:.2f}" for v in ys],
                textposition="outside",
                cliponaxis=False,
                textfont={"size": font_size() - 3},
                customdata=["not applicable" if v is None else f"{v:.2f}" for v in ys],
                hovertemplate=f"g ∈ %{{x}}<br>{name}<br>overlap %{{customdata}}<extra></extra>",
            )
        )
    chance = CLAIMS.read(claims, "chance")
    _reference_line(fig, chance, f"chance k/d = {chance:.3g}")
    note = "<br>n/a: a rotation has no permutation part to transport by" if missing else ""
    fig.update_xaxes(title_text=f"g drawn from{note}", showgrid=False)
    k = CLAIMS.read(claims, "k")
    fig.update_yaxes(title_text=f"top-{k} overlap with the original", range=[0, 1.12])
    apply_theme(fig)
    fig.update_layout(
        barmode="group",
        height=380 + (2 * font_size() if missing else 0),
        legend=legend_above(),
    )
    if missing:  # room for the note's line under the axis title
        fig.update_layout(margin={"b": 60 + 2 * font_size()})
    return fig


# ---------------------------------------------------------------- 6. transport table

TRANSPORT_MODES = (
    ("exact", "exact B_d", PALETTE[2]),
    ("perm-only", "permutation only", PALETTE[1]),
    ("none", "none", NEUTRAL),
)


def _kept_label(v: float | None, cap: float) -> str:
    """Bar label: "40%", or "18×" above the cap (short enough for a narrow bar)."""
    if v is None:
        return ""
    return f"{v / 100:.0f}×" if v > cap else f"{v:.0f}%"


@presentable
def figure_transport(rows: Sequence[dict[str, Any]], *, cap: float = 200.0) -> go.Figure:
    """Transport table: per artifact, the metric on B = g(A) as % of its value on A after moving
    the artifact exactly (B_d), by the permutation alone, or not at all.

    Every bar is labelled with its value; bars above ``cap`` % (an SAE's NMSE blowing up) are
    drawn cut at the cap and hatched, so the 100% line stays readable. Rows without a % (the
    AdamW distance) are left out; 100% is marked.
    """
    kept = [r for r in rows if TRANSPORT_ROW.read(r, "kept") is not None]
    artifacts = list(dict.fromkeys(TRANSPORT_ROW.read(r, "artifact") for r in kept))
    values = [float(TRANSPORT_ROW.read(r, "kept")) for r in kept]
    lo = min([0.0, *values])
    fig = go.Figure()
    for mode, name, colour in TRANSPORT_MODES:
        by = {TRANSPORT_ROW.read(r, "artifact"): r for r in kept
              if TRANSPORT_ROW.read(r, "mode") == mode}  # fmt: skip
        true = [float(TRANSPORT_ROW.read(by[a], "kept")) if a in by else None for a in artifacts]
        fig.add_trace(
            go.Bar(
                x=artifacts,
                y=[None if v is None else min(v, cap) for v in true],
                name=name,
                marker={
                    "color": colour,
                    "pattern": {
                        "shape": ["/" if v is not None and v > cap else "" for v in true],
                        "fgcolor": "white",
                    },
                },
                text=[_kept_label(v, cap) for v in true],
                textposition="outside",
                cliponaxis=False,
                textfont={"size": font_size() - 3},
                customdata=[
                    [
                        TRANSPORT_ROW.read(by[a], "metric"),
                        TRANSPORT_ROW.read(by[a], "value"),
                        TRANSPORT_ROW.read(by[a], "reference"),
                        v,
                    ]
                    if a in by
                    else ["", None, None, None]
                    for a, v in zip(artifacts, true, strict=True)
                ],
                hovertemplate=f"{name}<br>%{{x}}: %{{customdata[3]:.1f}}% of A<br>"
                "%{customdata[0]} %{customdata[1]:.4g} (A: %{customdata[2]:.4g})"
                "<extra></extra>",
            )
        )
    _reference_line(fig, 100.0, "100% = as on A")
    fig.update_xaxes(title_text="artifact moved from A to g(A)", showgrid=False)
    top = cap if max(values, default=0.0) > cap else max(120.0, max(values, default=0.0))
    fig.update_yaxes(title_text="metric on g(A), % of A", range=[lo, top * 1.12])
    apply_theme(fig)
    fig.update_layout(
        barmode="group",
        height=380,
        legend=legend_above(),
    )
    return fig
