"""Interpolation page: loss and accuracy along the straight line between two aligned models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from landscape.matching import METHODS_BY_NAME
from landscape.plots.fields import (
    BARRIER,
    INTERPOLATION_SERIES,
    MERGE_ALIGNMENT,
    MERGE_CURVE,
    MERGES,
    WIDTH_ROW,
    WIDTHS,
    aligned,
    key_of,
)
from landscape.plots.theme import (
    ACCURACY_UNIT,
    LAMBDA_TITLE,
    LINE_WIDTH,
    PALETTE,
    SCREEN_ONLY,
    THIN_WIDTH,
    apply_theme,
    legend_above,
    method_style,
    naive_or_aligned,
    points,
    presentable,
    rgba,
)


def series_method(series: dict[str, Any]) -> str:
    """The method key (``"naive"``, ``"weight/orth"``, …) of an interpolation series: its own
    ``method``, else its results' method and group, else its label."""
    given = INTERPOLATION_SERIES.read(series, "method")
    if given is not None:
        return given
    first = INTERPOLATION_SERIES.read(series, "results")[0]
    if BARRIER.read(first, "method"):
        return key_of(BARRIER, first)
    return INTERPOLATION_SERIES.read(series, "label")


def series_aligns(series: dict[str, Any]) -> bool:
    """Whether the matching of an interpolation series moves B: its results' (a barrier
    result's ``aligns``, else its method's registry entry), else, for results that name no
    method, the registry entry of its method key's method (an unknown one counts as aligning).
    The naive series is the one that does not."""
    first = INTERPOLATION_SERIES.read(series, "results")[0]
    if BARRIER.read(first, "method"):
        return aligned(BARRIER, first)
    entry = METHODS_BY_NAME.get(series_method(series).partition("/")[0])
    return entry is None or entry.aligns


# How each merge space is drawn when a figure shows both: a method keeps its colour, dash and
# marker (so perm and orth of one method stay apart), and the space is the line's weight: weights
# thick and opaque with filled markers, circuits thin and faded with open markers.
SPACE_STYLE = {"weights": {"width": LINE_WIDTH, "opacity": 1.0, "open": False},
               "circuits": {"width": THIN_WIDTH, "opacity": 0.6, "open": True}}  # fmt: skip


@presentable
def figure_interpolation(
    series: Sequence[dict[str, Any]], *, split: str = "test", mark: float | None = None
) -> go.Figure:
    """Loss and accuracy against λ (λ = 1 is A), one line per series, mean over pairs.

    ``series``: ``{"label", "results": [barrier result, ...]}``, every result of a series on the
    same λ grid; optional ``method`` (``"naive"`` or ``"method/group"``: its colour, dash and
    marker from :func:`~landscape.plots.theme.method_style`; by default the results' own method
    and group, else the label) and ``space`` (``"circuits"`` with open markers). When both
    spaces are drawn, the colour, dash and marker stay the method's and the line's weight is the
    space's (:data:`SPACE_STYLE`: weights thick, circuits thin and faded), and the legend names
    each method once and the two line weights. Accuracy is drawn in percent. The band spans the
    minimum to the maximum over pairs; endpoints are marked in the series' own marker (A at
    λ = 1, B at λ = 0). The split is named on both axes.
    ``mark``: a λ marked by a dotted vertical line and a diamond on every curve at the grid point
    nearest to it (the merged model θ(λ)), its value in the hover; drawn for the screen only
    (:data:`~landscape.plots.theme.SCREEN_ONLY`: exports leave it out).
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    spaces = {INTERPOLATION_SERIES.read(s, "space") for s in series}
    both = {"weights", "circuits"} <= spaces  # the line style then says the space
    named = set()  # methods already in the legend, when both spaces are drawn
    for s in series:
        label = INTERPOLATION_SERIES.read(s, "label")
        results = INTERPOLATION_SERIES.read(s, "results")
        key = series_method(s)
        style = method_style(key)
        colour = style.colour
        circuits = INTERPOLATION_SERIES.read(s, "space") == "circuits"
        symbol = f"{style.symbol}-open" if circuits else style.symbol
        line = style.line(LINE_WIDTH)
        group, entry, in_legend = label, label, True
        opacity = 1.0
        if both:  # one legend entry per method (colour, dash, marker), the spaces keyed below
            look = SPACE_STYLE["circuits" if circuits else "weights"]
            line["width"], opacity = look["width"], look["opacity"]
            group, entry, in_legend = key, key, key not in named
            named.add(key)
        lam = np.asarray(BARRIER.read(results[0], "lambdas"))
        for col, metric, unit in ((1, "loss", 1.0), (2, "accuracy", points(1.0))):
            y = unit * np.asarray([BARRIER.read(r, metric) for r in results])
            value = "%{y:.4f}" if metric == "loss" else "%{y:.2f}%"
            mean = y.mean(0)
            if len(y) > 1:
                fig.add_trace(
                    go.Scatter(
                        x=np.concatenate([lam, lam[::-1]]),
                        y=np.concatenate([y.max(0), y.min(0)[::-1]]),
                        fill="toself", fillcolor=rgba(colour, 0.18), line={"width": 0},
                        hoverinfo="skip", showlegend=False, name=f"{label} range",
                        legendgroup=group,
                    ),  # fmt: skip
                    row=1, col=col,
                )  # fmt: skip
            fig.add_trace(
                go.Scatter(
                    x=lam, y=mean, mode="lines+markers", name=entry, legendgroup=group,
                    showlegend=col == 1 and in_legend, line=line, opacity=opacity,
                    marker={"color": colour, "symbol": symbol, "size": 8, "maxdisplayed": 8},
                    hovertemplate=f"{label}<br>λ=%{{x:.3f}}<br>{metric}={value}<extra></extra>",
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
            ends = [mean[np.argmin(np.abs(lam - 1.0))], mean[np.argmin(np.abs(lam))]]
            fig.add_trace(
                go.Scatter(
                    x=[1.0, 0.0], y=ends, mode="markers", showlegend=False,
                    legendgroup=group, name=f"{label} endpoints",
                    marker={"color": colour, "size": 10, "symbol": symbol,
                            "line": {"color": "white", "width": 1}},
                    hovertemplate=[f"A (λ=1): {value}<extra></extra>",
                                   f"B (λ=0): {value}<extra></extra>"],
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
            if mark is not None:
                at = int(np.argmin(np.abs(lam - mark)))
                fig.add_trace(
                    go.Scatter(
                        x=[lam[at]], y=[mean[at]], mode="markers", showlegend=False,
                        legendgroup=group, name=f"{label} at λ", meta=SCREEN_ONLY,
                        marker={"color": colour, "size": 13, "symbol": "diamond",
                                "line": {"color": "#222", "width": 1.5}},
                        hovertemplate=f"{label}<br>θ(λ={lam[at]:.2f}): {metric} {value}"
                                      "<extra></extra>",
                    ),  # fmt: skip
                    row=1, col=col,
                )  # fmt: skip
    if both:
        for space, look in SPACE_STYLE.items():  # a key to the two line weights
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name=space,
                                     line={"color": "#444", "width": look["width"]},
                                     opacity=look["opacity"],
                                     marker={"color": "#444", "size": 8, "symbol":
                                             "circle-open" if look["open"] else "circle"}),
                          row=1, col=1)  # fmt: skip
    if mark is not None:
        fig.add_vline(x=mark, line={"dash": "dot", "color": "#444", "width": THIN_WIDTH},
                      row="all", col="all", name=SCREEN_ONLY)  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text=LAMBDA_TITLE, range=[-0.03, 1.03],
                         row=1, col=col)  # fmt: skip
    fig.update_yaxes(title_text=f"{split} loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy (%)", row=1, col=2)
    apply_theme(fig)
    fig.update_layout(
        height=400,
        legend=legend_above(),
        margin={"t": 50},
    )
    return fig


@presentable
def figure_widths(result: dict[str, Any], *, split: str = "test"
                  ) -> go.Figure:  # fmt: skip
    """Barriers between A (width d) and narrower models embedded into width d, against B's
    width (``experiments.barriers.widths.width_barriers``): loss and accuracy barrier, one line per
    method, widths on a log₂ axis with d on the right."""
    rows = WIDTHS.read(result, "rows")
    d = WIDTHS.read(result, "d_model")
    methods = list(dict.fromkeys(WIDTH_ROW.read(r, "method") for r in rows))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    for method in methods:
        mine = sorted((r for r in rows if WIDTH_ROW.read(r, "method") == method),
                      key=lambda r: WIDTH_ROW.read(r, "width"))  # fmt: skip
        widths = [WIDTH_ROW.read(r, "width") for r in mine]
        style = method_style(key_of(WIDTH_ROW, mine[0]))
        for col, metric, unit in ((1, "barrier_loss", 1.0), (2, "barrier_accuracy", points(1.0))):
            fig.add_trace(
                go.Scatter(
                    x=widths, y=[unit * WIDTH_ROW.read(r, metric) for r in mine],
                    mode="lines+markers",
                    name=method, legendgroup=method, showlegend=col == 1,
                    line=style.line(LINE_WIDTH),
                    marker={"size": 9, "symbol": style.symbol, "color": style.colour},
                    hovertemplate=f"{method}<br>width %{{x}}<br>%{{y:.4f}}<extra></extra>",
                ),  # fmt: skip
                row=1, col=col,
            )  # fmt: skip
    ticks = sorted({WIDTH_ROW.read(r, "width") for r in rows} | {d})
    for col in (1, 2):
        fig.update_xaxes(title_text=f"width of B (A: {d})", type="log", tickvals=ticks,
                         ticktext=[str(t) for t in ticks], row=1, col=col)  # fmt: skip
    fig.update_yaxes(title_text=f"{split} loss barrier (nats)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy barrier (points)", rangemode="tozero",
                     row=1, col=2)  # fmt: skip
    apply_theme(fig)
    fig.update_layout(height=400, legend=legend_above(),
                      margin={"t": 50})  # fmt: skip
    return fig


# one colour per merge path (landscape.experiments.merging.mergekit.MERGE_METHODS), the line black
_PATH_COLOUR = {"line": "#000000", "linear": PALETTE[5], "slerp": PALETTE[0],
                "ties": PALETTE[1], "dare_ties": PALETTE[3], "task_arithmetic": PALETTE[2],
                "dare_linear": PALETTE[4], "breadcrumbs": PALETTE[6],
                "della": PALETTE[2]}  # fmt: skip


@presentable
def figure_merges(result: dict[str, Any]) -> go.Figure:
    """One pair's merge operators against λ (``experiments.merging.operators.pair_merges``):
    loss and accuracy of the straight line (black) and of each mergekit operator (its colour), the
    aligned pair solid with filled markers, the naive pair dashed with open markers. λ = 0 is B
    for every operator; λ = 1 is A for the line and SLERP only."""
    lam = MERGES.read(result, "lambdas")
    split = MERGES.read(result, "split")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    alignments = MERGES.read(result, "alignments")
    for k, al in enumerate(alignments):
        naive = not aligned(MERGE_ALIGNMENT, al)  # drawn as the naive pair
        which = key_of(MERGE_ALIGNMENT, al)
        paths = {"line": MERGE_ALIGNMENT.read(al, "line"), **MERGE_ALIGNMENT.read(al, "operators")}
        for path, curve in paths.items():
            colour = _PATH_COLOUR.get(path, PALETTE[7])
            name = "straight line" if path == "line" else path
            for col, metric, unit in ((1, "loss", 1.0), (2, "accuracy", points(1.0))):
                fig.add_trace(
                    go.Scatter(
                        x=lam, y=[unit * v for v in MERGE_CURVE.read(curve, metric)],
                        mode="lines+markers", name=f"{name} · {which}",
                        legendgroup=f"{path}-{k}", showlegend=col == 1,
                        **naive_or_aligned(colour, naive, 7),
                        hovertemplate=f"{name} · {which}<br>λ = %{{x:.3g}}<br>%{{y:.4f}}"
                                      "<extra></extra>",
                    ),
                    row=1, col=col,
                )  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text="λ (0 = B, the base, 1 = A)", row=1, col=col)
    fig.update_yaxes(title_text=f"{split} loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text=f"{split} accuracy (%)", row=1, col=2)
    apply_theme(fig)
    fig.update_layout(height=440, legend=legend_above(), margin={"t": 80})
    return fig


# what a method does to B, for the note on a method whose barrier is above naive's
_DOES = {"activation": "matching the activations", "weight": "matching the weights",
         "learned": "learning the transform"}  # fmt: skip


# How far a barrier must lie above naive's to be called above it: more than both an absolute
# margin (loss in nats; accuracy as a fraction, 0.5 percentage points) and a share of naive's
# barrier. Barriers of an untrained pair differ by thousandths of a nat, and equal barriers are
# never "above".
ABOVE_NAIVE_MARGIN = {"loss": 0.01, "accuracy": 0.005}
ABOVE_NAIVE_SHARE = 0.05


def clearly_above(ours: float, naive: float, metric: str) -> bool:
    """Whether barrier ``ours`` exceeds ``naive``'s by more than the margins above."""
    return ours - naive > max(ABOVE_NAIVE_MARGIN[metric], ABOVE_NAIVE_SHARE * abs(naive))


def above_naive(series: Sequence[dict[str, Any]], *, split: str = "test") -> list[dict[str, Any]]:
    """Every series whose barrier lies clearly above naive's (:func:`clearly_above`) for the
    same pairs, split and space.

    A series is compared with the naive series of its space on the pairs both hold (a result's
    ``seeds``; results without them are paired in order): the mean loss barrier and the mean
    accuracy barrier over those pairs. One record per series above naive in either: ``label``,
    ``metrics`` (those above), the two means of each (``loss``, ``naive_loss``, ``accuracy``,
    ``naive_accuracy``), ``pairs`` and ``note``, a sentence for the page.
    """

    def key(r: dict[str, Any], i: int) -> Any:
        seeds = BARRIER.read(r, "seeds")
        return tuple(seeds) if seeds and all(x != "" for x in seeds) else i

    out = []
    for space in dict.fromkeys(INTERPOLATION_SERIES.read(s, "space") for s in series):
        mine = [s for s in series if INTERPOLATION_SERIES.read(s, "space") == space]
        naive = next((s for s in mine if not series_aligns(s)), None)
        if naive is None:
            continue
        base = {key(r, i): r for i, r in enumerate(INTERPOLATION_SERIES.read(naive, "results"))}
        for s in mine:
            if s is naive:
                continue
            results = INTERPOLATION_SERIES.read(s, "results")
            both = [(r, base[k]) for i, r in enumerate(results) if (k := key(r, i)) in base]
            if not both:
                continue
            record: dict[str, Any] = {"label": INTERPOLATION_SERIES.read(s, "label"),
                                      "pairs": len(both), "metrics": []}  # fmt: skip
            for metric in ("loss", "accuracy"):
                field_ = f"barrier_{metric}"
                ours = float(np.mean([r[field_] for r, _ in both]))
                theirs = float(np.mean([n[field_] for _, n in both]))
                record[metric], record[f"naive_{metric}"] = ours, theirs
                if clearly_above(ours, theirs, metric):
                    record["metrics"].append(metric)
            if not record["metrics"]:
                continue
            method = series_method(s).partition("/")[0]
            what = " and ".join(
                f"loss barrier {record[m]:.3f} against {record[f'naive_{m}']:.3f} nats"
                if m == "loss"
                else f"accuracy barrier {points(record[m]):.1f} against "
                f"{points(record[f'naive_{m}']):.1f} {ACCURACY_UNIT}"
                for m in record["metrics"]
            )
            over = f"{len(both)} pair" + ("s" if len(both) > 1 else "")
            record["note"] = (
                f"{record['label']} is above naive here ({what}, {split} split, {over}): "
                f"{_DOES.get(method, 'this alignment')} does not reduce this barrier."
            )
            out.append(record)
    return out
