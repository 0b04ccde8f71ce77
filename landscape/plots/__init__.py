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


# ---------------------------------------------------------------- shared helpers

PI_TICKS = {
    "tickvals": [-3.141592653589793, -1.5707963267948966, 0.0, 1.5707963267948966,
                 3.141592653589793],
    "ticktext": ["−π", "−π/2", "0", "π/2", "π"],
}  # fmt: skip


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _font_size(presentation: bool) -> int:
    return 20 if presentation else 14


# ---------------------------------------------------------------- home: the symmetry levels


SYMMETRY_LEVELS = (
    ("Permutations", "S_n: FFN units and heads<br>relabelled"),
    ("Signed permutations", "B_d: residual coordinates<br>relabelled and sign-flipped"),
    ("Rotations", "O(d): any rotation of the residual<br>stream (norm gains folded)"),
    ("Within-head maps", "GL(d_head): W_Q·M, W_K·M⁻ᵀ and<br>W_V·N, N⁻¹·W_O inside every head"),
)


def figure_symmetry_levels(*, presentation: bool = False) -> go.Figure:
    """The four nested levels of weight-space symmetry, as nested boxes (innermost smallest).

    A schematic for the home page: each level contains the previous ones, and aligning under a
    larger group can only lower the barrier found by exact matching.
    """
    fig = go.Figure()
    size = _font_size(presentation)
    for i, (name, detail) in reversed(list(enumerate(SYMMETRY_LEVELS))):
        x0, x1 = 0.0, 0.40 + 0.20 * i
        y0, y1 = 0.0, 0.25 + 0.25 * i
        colour = PALETTE[i]
        fig.add_shape(
            type="rect", x0=x0, x1=x1, y0=y0, y1=y1,
            line={"color": colour, "width": 2.5}, fillcolor=_rgba(colour, 0.07), layer="above",
        )  # fmt: skip
        fig.add_annotation(
            x=x1 - 0.01, y=y1 - 0.015, xanchor="right", yanchor="top", showarrow=False,
            text=f"<b>{i + 1}. {name}</b><br><span style='font-size:{size - 3}px'>{detail}</span>",
            align="right", font={"size": size, "color": "#222"},
        )  # fmt: skip
    fig.update_xaxes(visible=False, range=[-0.01, 1.01])
    fig.update_yaxes(visible=False, range=[-0.01, 1.01])
    fig.update_layout(height=420 if presentation else 360, showlegend=False)
    theme(fig, presentation=presentation)
    fig.update_layout(margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig


# ---------------------------------------------------------------- interpolation curves


def figure_interpolation(
    series: Sequence[dict[str, Any]], *, split: str = "test", presentation: bool = False
) -> go.Figure:
    """Loss and accuracy against λ (λ = 1 is A), one line per series, mean over pairs.

    ``series``: ``{"label", "results": [barrier result, ...]}``, every result of a series on the
    same λ grid. The band spans the minimum to the maximum over pairs; endpoints are marked
    (A at λ = 1, B at λ = 0). The split is named on both axes.
    """
    import numpy as np
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        lam = np.asarray(s["results"][0]["lambdas"])
        for col, metric in ((1, "loss"), (2, "accuracy")):
            y = np.asarray([r[metric] for r in s["results"]])
            mean = y.mean(0)
            if len(y) > 1:
                fig.add_trace(
                    go.Scatter(
                        x=np.concatenate([lam, lam[::-1]]),
                        y=np.concatenate([y.max(0), y.min(0)[::-1]]),
                        fill="toself", fillcolor=_rgba(colour, 0.18), line={"width": 0},
                        hoverinfo="skip", showlegend=False, name=f"{s['label']} range",
                        legendgroup=s["label"],
                    ),  # fmt: skip
                    row=1, col=col,
                )  # fmt: skip
            fig.add_trace(
                go.Scatter(
                    x=lam, y=mean, mode="lines", name=s["label"], legendgroup=s["label"],
                    showlegend=col == 1, line={"color": colour, "width": 2.5},
                    hovertemplate=f"{s['label']}<br>λ=%{{x:.3f}}<br>{metric}=%{{y:.4f}}"
                                  "<extra></extra>",
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
            ends = [mean[np.argmin(np.abs(lam - 1.0))], mean[np.argmin(np.abs(lam))]]
            fig.add_trace(
                go.Scatter(
                    x=[1.0, 0.0], y=ends, mode="markers", showlegend=False,
                    legendgroup=s["label"], name=f"{s['label']} endpoints",
                    marker={"color": colour, "size": 10, "symbol": ["circle", "square"],
                            "line": {"color": "white", "width": 1}},
                    hovertemplate=["A (λ=1): %{y:.4f}<extra></extra>",
                                   "B (λ=0): %{y:.4f}<extra></extra>"],
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text="λ  (0 = B aligned, 1 = A)", range=[-0.03, 1.03],
                         row=1, col=col)  # fmt: skip
    fig.update_yaxes(title_text=f"{split} loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy", row=1, col=2)
    theme(fig, presentation=presentation)
    fig.update_layout(
        height=460 if presentation else 400,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        margin={"t": 50},
    )
    return fig


# ---------------------------------------------------------------- triangles


def figure_triangles(
    results: Sequence[dict[str, Any]],
    *,
    metric: str = "loss",
    titles: Sequence[str] | None = None,
    presentation: bool = False,
) -> go.Figure:
    """Loss or accuracy over the barycentric grid of θ_A, θ_B, θ_C, one ternary plot per result.

    All panels share one colour scale (the same ``coloraxis``). Corners are labelled with the
    seeds; hovering a point shows its mixture weights. Points in the basin (loss within ``tol`` of
    the corners' plane) are drawn with a dark outline; the basin fraction is in the panel title.
    """
    from plotly.subplots import make_subplots

    n = len(results)
    titles = list(titles or [f"{r['method']}/{r['group']}" for r in results])
    sub = [
        f"{t}<br>basin {100 * r['basin_fraction']:.0f}% (outlined)"
        for t, r in zip(titles, results, strict=True)
    ]
    fig = make_subplots(rows=1, cols=n, specs=[[{"type": "ternary"}] * n], subplot_titles=sub,
                        horizontal_spacing=0.08)  # fmt: skip
    values = [v for r in results for v in r[metric]]
    lo, hi = min(values), max(values)
    size = _font_size(presentation)
    marker_size = max(5.0, 190.0 / (results[0]["resolution"] + 1) / max(1, n / 3))
    for i, r in enumerate(results):
        pts = r["points"]
        basin = [e <= r["tol"] for e in r["excess_loss"]]
        fig.add_trace(
            go.Scatterternary(
                a=[p[0] for p in pts], b=[p[1] for p in pts], c=[p[2] for p in pts],
                mode="markers", name=titles[i], showlegend=False,
                marker={"color": r[metric], "coloraxis": "coloraxis", "size": marker_size,
                        "symbol": "hexagon",
                        "line": {"color": ["#222" if b else "rgba(0,0,0,0)" for b in basin],
                                 "width": 1.2}},
                customdata=[[m, e] for m, e in zip(r[metric], r["excess_loss"], strict=True)],
                hovertemplate="w_A=%{a:.2f}  w_B=%{b:.2f}  w_C=%{c:.2f}<br>"
                              f"{metric}=%{{customdata[0]:.4f}}<br>"
                              "loss above plane=%{customdata[1]:.4f}<extra></extra>",
            ),  # fmt: skip
            row=1, col=i + 1,
        )  # fmt: skip
        seeds = r.get("seeds", ["A", "B", "C"])
        key = "ternary" if i == 0 else f"ternary{i + 1}"
        axis = {"showticklabels": False, "ticks": "", "showgrid": False, "linecolor": "#444"}
        fig.layout[key].update(
            aaxis={**axis, "title": {"text": f"A (seed {seeds[0]})", "font": {"size": size - 1}}},
            baxis={**axis, "title": {"text": f"B ({seeds[1]})", "font": {"size": size - 1}}},
            caxis={**axis, "title": {"text": f"C ({seeds[2]})", "font": {"size": size - 1}}},
            bgcolor="white",
        )  # fmt: skip
    label = {"loss": "loss (nats)", "accuracy": "accuracy"}.get(metric, metric)
    split = results[0].get("split", "test")
    theme(fig, presentation=presentation)
    fig.update_layout(
        coloraxis={"colorscale": "Viridis_r" if metric == "loss" else "Viridis", "cmin": lo,
                   "cmax": hi, "colorbar": {"title": {"text": f"{split} {label}"}, "len": 0.9}},
        height=480 if presentation else 430,
        margin={"l": 40, "r": 40, "t": 100, "b": 40},
    )  # fmt: skip
    fig.update_annotations(font={"size": size})
    return fig


# ---------------------------------------------------------------- eigenangles


def figure_eigenangles(result: dict[str, Any], *, bins: int = 24, presentation: bool = False
                       ) -> go.Figure:  # fmt: skip
    """Histograms of eigenangles on (−π, π]: O_WM, the correction O_LM·O_WMᵀ, Haar-random.

    Densities (area 1 per histogram) share the bins so the three are directly comparable; a
    missing series (e.g. no learned matching) is left out.
    """
    import math

    fig = go.Figure()
    series = (("angles_wm", "O_WM (weight matching)", PALETTE[0]),
              ("angles_correction", "O_LM·O_WMᵀ (learned correction)", PALETTE[3]),
              ("angles_haar", "Haar-random rotation", "#888888"))  # fmt: skip
    width = 2 * math.pi / bins
    for key, name, colour in series:
        if not result.get(key):
            continue
        fig.add_trace(
            go.Histogram(
                x=result[key],
                name=name,
                histnorm="probability density",
                xbins={"start": -math.pi, "end": math.pi + 1e-9, "size": width},
                marker={"color": _rgba(colour, 0.35), "line": {"color": colour, "width": 1.5}},
                hovertemplate=f"{name}<br>angle %{{x}}<br>density %{{y:.3f}}<extra></extra>",
            )  # fmt: skip
        )
    fig.update_layout(barmode="overlay", bargap=0.0)
    fig.update_xaxes(title_text="eigenangle φ (rad)", range=[-math.pi, math.pi], **PI_TICKS)
    fig.update_yaxes(title_text="density")
    theme(fig, presentation=presentation)
    fig.update_layout(legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                      height=420 if presentation else 360)  # fmt: skip
    return fig


def figure_objective(values: Sequence[float], *, presentation: bool = False) -> go.Figure:
    """The weight-matching objective ‖θ_A − π(θ_B)‖² per coordinate-descent round."""
    fig = go.Figure(
        go.Scatter(
            x=list(range(len(values))),
            y=list(values),
            mode="lines+markers",
            name="‖θ_A − π(θ_B)‖²",
            line={"color": PALETTE[0], "width": 2.5},
            marker={"size": 8},
        )  # fmt: skip
    )
    fig.update_xaxes(title_text="round (0 = identity)", dtick=1)
    fig.update_yaxes(title_text="‖θ_A − π(θ_B)‖²")
    theme(fig, presentation=presentation)
    fig.update_layout(height=320 if not presentation else 380)
    return fig


def figure_lm_curve(curve: Sequence[dict[str, float]], *, presentation: bool = False) -> go.Figure:
    """Learned matching: merged-model training loss against step (``[{step, loss}]``)."""
    steps = [c["step"] for c in curve]
    loss = [c["loss"] for c in curve]
    fig = go.Figure(
        go.Scatter(
            x=steps,
            y=loss,
            mode="lines",
            name="merged loss",
            line={"color": PALETTE[3], "width": 1.5},
        )  # fmt: skip
    )
    if len(loss) >= 10:  # a running mean makes the trend readable under λ-sampling noise
        k = max(5, len(loss) // 20)
        smooth = [sum(loss[max(0, i - k + 1) : i + 1]) / len(loss[max(0, i - k + 1) : i + 1])
                  for i in range(len(loss))]  # fmt: skip
        fig.data[0].line.color = _rgba(PALETTE[3], 0.35)
        fig.add_trace(go.Scatter(x=steps, y=smooth, mode="lines", name=f"running mean ({k})",
                                 line={"color": PALETTE[3], "width": 2.5}))  # fmt: skip
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="train loss of the merge (nats)")
    theme(fig, presentation=presentation)
    fig.update_layout(
        height=320 if not presentation else 380,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


# ---------------------------------------------------------------- atlas


def figure_atlas(result: dict[str, Any], *, presentation: bool = False) -> go.Figure:
    """The atlas side by side: raw weight space (left), aligned to the reference (right).

    Colour is the seed; circles are trained seeds, crosses their random gauge copies (same
    function). Orbits spread in raw space and collapse onto their seed after alignment.
    """
    from plotly.subplots import make_subplots

    proj = result.get("projection", "pca").upper()

    def subtitle(space: str, name: str) -> str:
        var = result.get(f"explained_{space}") or []
        ratio = result.get(f"orbit_ratio_{space}")
        bits = [f"{name}"]
        if var:
            bits.append(f"{proj} {100 * sum(var):.0f}% of variance")
        if ratio is not None:
            bits.append(f"orbit/seed distance {ratio:.2f}")
        return bits[0] + "<br><span style='font-size:0.85em'>" + ", ".join(bits[1:]) + "</span>"

    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.11,
        subplot_titles=[subtitle("raw", "raw weights"),
                        subtitle("aligned", f"aligned to seed {result['reference']} (WM)")],
    )  # fmt: skip
    seeds = result["seeds"]
    for col, space in ((1, "raw"), (2, "aligned")):
        for i, s in enumerate(seeds):
            colour = PALETTE[i % len(PALETTE)]
            for kind, symbol, size in (("seed", "circle", 13), ("gauge copy", "x-thin-open", 11)):
                pts = [p for p in result["points"] if p["seed"] == s and p["kind"] == kind]
                if not pts:
                    continue
                fig.add_trace(
                    go.Scatter(
                        x=[p[space][0] for p in pts], y=[p[space][1] for p in pts],
                        mode="markers", name=f"seed {s}" if kind == "seed" else f"seed {s} copies",
                        legendgroup=f"seed {s}", showlegend=col == 1 and kind == "seed",
                        marker={"color": colour, "symbol": symbol, "size": size,
                                "line": {"color": colour if kind != "seed" else "white",
                                         "width": 2 if kind != "seed" else 1}},
                        text=[f"seed {s}, {kind}" + (f" {p['copy']}" if p["copy"] else "")
                              for p in pts],
                        hovertemplate="%{text}<br>(%{x:.3g}, %{y:.3g})<extra></extra>",
                    ),  # fmt: skip
                    row=1, col=col,
                )  # fmt: skip
        fig.update_xaxes(title_text=f"{proj} 1", zeroline=False, row=1, col=col)
        fig.update_yaxes(title_text=f"{proj} 2", zeroline=False, row=1, col=col)
    theme(fig, presentation=presentation)
    fig.update_layout(height=480 if presentation else 430, margin={"t": 80},
                      legend={"title": {"text": "● seed  × gauge copy"}})  # fmt: skip
    fig.update_annotations(font={"size": _font_size(presentation)})
    return fig


# ---------------------------------------------------------------- gauge sweeps

VALID_COLOUR, INVALID_COLOUR = PALETTE[2], PALETTE[3]
GAUGE_LABEL = {"perm": "S_d", "signed-perm": "B_d", "orth": "O(d)"}
LOG_FLOOR = 1e-16  # log axes cannot show 0: smaller values are drawn at this floor


def _floor(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else max(float(v), LOG_FLOOR) for v in values]


def figure_symmetry_check(
    rows: Sequence[dict[str, Any]], *, tol: float = 1e-9, presentation: bool = False
) -> go.Figure:
    """Measured max |Δlogits| of every symmetry level (``symmetry_table`` rows), log scale.

    Valid levels are green, invalid ones orange; the dashed line is the float64 tolerance below
    which a transform counts as function-preserving.
    """
    names = [r["group"] for r in rows]
    values = [float(r["max_abs_dlogits"]) for r in rows]
    fig = go.Figure(
        go.Bar(
            y=names,
            x=_floor(values),
            orientation="h",
            name="max |Δlogits|",
            marker={"color": [VALID_COLOUR if r["valid"] else INVALID_COLOUR for r in rows]},
            customdata=[
                ["valid" if r["valid"] else "invalid", v] for r, v in zip(rows, values, strict=True)
            ],
            hovertemplate="%{y}<br>%{customdata[0]}, max |Δlogits| = %{customdata[1]:.2e}"
            "<extra></extra>",
        )
    )
    fig.add_vline(
        x=tol,
        line={"dash": "dash", "color": "#444", "width": 1.5},
        annotation_text=f"tolerance {tol:g}",
        annotation_position="top",
    )
    fig.update_xaxes(type="log", title_text="max |Δlogits| (float64)", exponentformat="power")
    fig.update_yaxes(autorange="reversed", showgrid=False)
    theme(fig, presentation=presentation)
    fig.update_layout(
        height=max(300, 40 * len(rows) + 110), showlegend=False, margin={"l": 20, "t": 40}
    )
    fig.update_yaxes(automargin=True)
    return fig


def figure_scramble(scramble: dict[str, Any], *, presentation: bool = False) -> go.Figure:
    """Scramble test: loss barrier between θ and g(θ), naive and after matching restricted to
    S_d, B_d and O(d), grouped by the group g was drawn from (mean over draws, log y).

    Matching within a group that contains g recovers it: the barrier drops to ~1e-8 (numerical
    noise); a group too small to contain g leaves a barrier of order 1e-1.
    """
    summary = scramble["summary"]
    x = [s["label"] for s in summary]
    series = [("naive", "naive (no matching)", "#888888")] + [
        (f"matched_{g}", f"matched in {label}", PALETTE[i])
        for i, (g, label) in enumerate(GAUGE_LABEL.items())
    ]
    fig = go.Figure()
    for key, name, colour in series:
        raw = [s.get(key) for s in summary]
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
    theme(fig, presentation=presentation)
    fig.update_layout(
        barmode="group",
        height=420 if presentation else 380,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


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


def _reference_line(fig: go.Figure, y: float, name: str) -> None:
    """A dashed horizontal reference across the whole plot, named in the legend. The line is a
    shape (it spans categorical axes edge to edge); a legend-only trace names it and carries the
    value into the CSV export."""
    line = {"dash": "dash", "color": "#222", "width": 1.5}
    fig.add_hline(y=y, line=line)
    fig.add_trace(go.Scatter(x=[None], y=[y], mode="lines", name=name, line=line))


def figure_recovery(recovery: dict[str, Any], *, presentation: bool = False) -> go.Figure:
    """Recovery of a B_d gauge under fine-tuning drift (``recovery_under_drift``).

    Left: share of coordinates mapped to the right place; right: share recovered exactly
    (place and sign), against fine-tuning steps k (categorical axis). Colour: from activations
    or weights; solid: sign-marginalised assignment, dotted: signed correlation. The grey line
    is the share of unflipped signs, where signed correlation plateaus.
    """
    from plotly.subplots import make_subplots

    curve = recovery["curve"]
    ks = [str(c["steps"]) for c in curve]
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
                    y=[c.get(key) for c in curve],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line={"color": colour, "dash": dash, "width": style["width"]},
                    marker=style["marker"],
                    customdata=[c.get("drift") for c in curve],
                    hovertemplate=f"{name}<br>k=%{{x}} steps (drift %{{customdata:.3f}})"
                    "<br>%{y:.1%}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        unflipped = [None if c.get("flipped") is None else 1 - c["flipped"] for c in curve]
        fig.add_trace(
            go.Scatter(
                x=ks,
                y=unflipped,
                mode="lines",
                name="unflipped signs",
                legendgroup="unflipped",
                showlegend=col == 1,
                line={"color": "#999999", "dash": "dash", "width": 1.5},
                hovertemplate="unflipped signs %{y:.1%}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="fine-tuning steps k", type="category", row=1, col=col)
    fig.update_yaxes(
        title_text="share of coordinates", tickformat=".0%", range=[-0.03, 1.05], row=1, col=1
    )
    fig.update_yaxes(tickformat=".0%", range=[-0.03, 1.05], row=1, col=2)
    theme(fig, presentation=presentation)
    fig.update_layout(
        height=460 if presentation else 420,
        margin={"t": 110},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.1, "x": 0},
    )
    fig.update_annotations(font={"size": _font_size(presentation)})
    return fig


def figure_trajectory(trajectory: dict[str, Any], *, presentation: bool = False) -> go.Figure:
    """Trajectory transport: coordinates recovered between checkpoint 0 and checkpoint t of one
    run, each stored in its own random B_d gauge, against the distance t in steps. Solid:
    local matches composed along the run; dotted: the endpoints matched directly."""
    rows = trajectory["rows"]
    fig = go.Figure()
    colours = {"weights": PALETTE[3], "activations": PALETTE[0]}
    sources = sorted(dict.fromkeys(r["source"] for r in rows), key=lambda s: s != "weights")
    for source in sources:
        rs = [r for r in rows if r["source"] == source]
        colour = colours.get(source, PALETTE[4])
        for key, label, dash in (
            ("local_coord", "composed local matches", "solid"),
            ("endpoint_coord", "endpoints matched", "dot"),
        ):
            name = f"{source}: {label}"
            fig.add_trace(
                go.Scatter(
                    x=[r["steps"] for r in rs],
                    y=[r[key] for r in rs],
                    mode="lines",
                    name=name,
                    line={
                        "color": colour,
                        "dash": dash,
                        "width": SOURCE_STYLE.get(source, {"width": 2.5})["width"],
                    },
                    customdata=[r["drift"] for r in rs],
                    hovertemplate=f"{name}<br>%{{x}} steps apart (drift %{{customdata:.3f}})"
                    "<br>%{y:.1%}<extra></extra>",
                )
            )
    fig.update_xaxes(title_text="distance along the trajectory (training steps)")
    fig.update_yaxes(title_text="coordinates recovered", tickformat=".0%", range=[-0.03, 1.05])
    theme(fig, presentation=presentation)
    fig.update_layout(
        height=420 if presentation else 380,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


def figure_claims(claims: dict[str, Any], *, presentation: bool = False) -> go.Figure:
    """Claim check: overlap of "the top-k coordinates for class c" re-made in a random gauge
    with the original claim, raw and after transport back (mean over classes and draws); for
    S_d and B_d also transported with the permutation alone. Dashed: the chance level k/d."""
    summary = claims["summary"]
    x = [s["label"] for s in summary]
    fig = go.Figure()
    for key, name, colour in (
        ("raw", "in the random gauge", "#888888"),
        ("perm_only", "transported, permutation only", PALETTE[1]),
        ("transported", "transported back", PALETTE[2]),
    ):
        ys = [s.get(key) for s in summary]
        fig.add_trace(
            go.Bar(
                x=x,
                y=ys,
                name=name,
                marker={"color": colour},
                text=["" if v is None else f"{v:.2f}" for v in ys],
                textposition="outside",
                cliponaxis=False,
                textfont={"size": _font_size(presentation) - 3},
                hovertemplate=f"g ∈ %{{x}}<br>{name}<br>overlap %{{y:.2f}}<extra></extra>",
            )
        )
    chance = claims["chance"]
    _reference_line(fig, chance, f"chance k/d = {chance:.3g}")
    fig.update_xaxes(title_text="g drawn from", showgrid=False)
    fig.update_yaxes(title_text=f"top-{claims['k']} overlap with the original", range=[0, 1.12])
    theme(fig, presentation=presentation)
    fig.update_layout(
        barmode="group",
        height=420 if presentation else 380,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


TRANSPORT_MODES = (
    ("exact", "exact B_d", PALETTE[2]),
    ("perm-only", "permutation only", PALETTE[1]),
    ("none", "none", "#888888"),
)


def _kept_label(v: float | None, cap: float) -> str:
    """Bar label: "40%", or "18×" above the cap (short enough for a narrow bar)."""
    if v is None:
        return ""
    return f"{v / 100:.0f}×" if v > cap else f"{v:.0f}%"


def figure_transport(
    rows: Sequence[dict[str, Any]], *, cap: float = 200.0, presentation: bool = False
) -> go.Figure:
    """Transport table: per artifact, the metric on B = g(A) as % of its value on A after moving
    the artifact exactly (B_d), by the permutation alone, or not at all.

    Every bar is labelled with its value; bars above ``cap`` % (an SAE's NMSE blowing up) are
    drawn cut at the cap and hatched, so the 100% line stays readable. Rows without a % (the
    AdamW distance) are left out; 100% is marked.
    """
    kept = [r for r in rows if r.get("kept") is not None]
    artifacts = list(dict.fromkeys(r["artifact"] for r in kept))
    values = [float(r["kept"]) for r in kept]
    lo = min([0.0, *values])
    fig = go.Figure()
    for mode, name, colour in TRANSPORT_MODES:
        by = {r["artifact"]: r for r in kept if r["mode"] == mode}
        true = [float(by[a]["kept"]) if a in by else None for a in artifacts]
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
                textfont={"size": _font_size(presentation) - 3},
                customdata=[
                    [by[a]["metric"], by[a]["value"], by[a]["reference"], v]
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
    theme(fig, presentation=presentation)
    fig.update_layout(
        barmode="group",
        height=420 if presentation else 380,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig
