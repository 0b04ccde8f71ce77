"""Curvature along the line: the top Hessian eigenvalue (and trace) of the loss at points of
one pair's line beside its loss, naive and aligned; opt-in, computed on a click."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.layout import presentation
from app.components.long_runs import read_else_run
from app.components.tables import results_table
from app.memory import remember
from app.sections.interpolation.asked import Asked
from landscape.experiments.curvature import (
    CURVATURE,
    CURVATURE_LINE,
    CurvatureOptions,
    expected_products,
)
from landscape.matching import aligns
from landscape.page_defaults import method_group
from landscape.plots.curvature import figure_curvature
from landscape.plots.fields import key_of

TOP_K = (1, 3, 5)  # eigenvalues per point
POINTS = (3, 5, 9)  # points on λ, the endpoints included
PROBES = (0, 16)  # Hutchinson's probes (0: no trace)


def curvature_rows(made: dict[str, Any]) -> list[dict[str, Any]]:
    """The result's numbers, one row per line and λ: the batch's loss, the top eigenvalue and
    the trace (± its standard error) where probes were asked for."""
    rows = []
    for line in CURVATURE.read(made, "lines"):
        read = CURVATURE_LINE.read
        name = key_of(CURVATURE_LINE, line)
        loss, top = read(line, "loss"), read(line, "top_eigenvalue")
        trace, se = read(line, "trace"), read(line, "trace_se")
        for i, lam in enumerate(read(line, "lambdas")):
            rows.append({"alignment": name, "λ": lam, "loss (nats)": loss[i],
                         "top eigenvalue": top[i],
                         **({"trace": trace[i], "trace ± s.e.": se[i]}
                            if trace[i] is not None else {})})  # fmt: skip
    return rows


def curvature_along_line(asked: Asked) -> None:
    """Behind a toggle: one pair's curvature along its line, naive and aligned by a chosen
    method; read, else computed on a click beside its cost (Hessian-vector products at the
    seconds each took here, or unknown)."""
    name, pairs, chosen = asked.name, asked.pairs, asked.chosen
    st.subheader("Curvature along the line")
    st.caption(
        "Sharpness beside the loss: at points of the line between A and the aligned B, the "
        "largest eigenvalue of the loss's Hessian (Lanczos on Hessian-vector products; the "
        "Hessian is never formed) and, with probes, its trace (Hutchinson), on a fixed batch "
        "of the training split; naive (dashed) and aligned (solid). Where alignment removes "
        "the barrier, does the line also stay as flat as its ends? Each point takes tens of "
        "products, each about three passes of the model over the batch: computed once, on a "
        "click, then read from the cache."
    )
    remember("curvature_show", False, param="curvature", options=(False, True))
    if not st.toggle("Curvature along the line", key="curvature_show"):
        return
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    remember(f"curvature_pair_{name}", pairs[0], param="hv_pair", options=pairs,
             label="curvature pair")  # fmt: skip
    pair = c1.selectbox("Pair (A, B)", pairs, key=f"curvature_pair_{name}",
                        format_func=asked.pair_label)  # fmt: skip
    combos = [c for c in chosen if aligns(method_group(c)[0])] or ["naive"]
    remember("curvature_combo", combos[0], param="hv_method", options=combos,
             label="curvature method")  # fmt: skip
    combo = c1.selectbox("Aligned by", combos, key="curvature_combo")
    remember("curvature_top_k", 1, param="hv_top_k", options=TOP_K)
    top_k = c2.selectbox("Eigenvalues per point", TOP_K, key="curvature_top_k")
    remember("curvature_points", 3, param="hv_points", options=POINTS)
    points = c3.selectbox("Points on λ", POINTS, key="curvature_points")
    remember("curvature_probes", 0, param="hv_probes", options=PROBES)
    probes = c4.selectbox(
        "Trace probes",
        PROBES,
        key="curvature_probes",
        help="Rademacher probes of Hutchinson's trace estimate; 0: no trace",
    )
    method, group = method_group(combo)
    options = {"top_k": top_k, "points": points, "probes": probes}
    wanted = (name, tuple(pair), method, group, options, device())
    lines = 2 if aligns(method) else 1  # naive's line, and the aligned one

    def products() -> int:
        """Hessian-vector products both lines are expected to take."""
        cfg = state.checkpoint(name, pair[0]).cfg
        return lines * expected_products(cfg, CurvatureOptions(**options))

    made = read_else_run(
        lambda: state.curvature(*wanted, compute=False),
        lambda progress: state.curvature(*wanted, progress=progress),
        running="Matching, then the Hessian-vector products point by point …",
        done="The curvature along the line is ready",
        failed="The curvature failed",
        what="Curvature along the line",
        key="curvature",
        inputs=wanted,
        cost=lambda: [(f"about {products()} Hessian-vector products",
                       state.expected("curvature", name, device(), units=products()))],
        basis=f"at the seconds per product the curvature of {name} took here",
        unknown="each product is a double backward pass over the batch",
    )  # fmt: skip
    if made is None:
        return
    made_lines = CURVATURE.read(made, "lines")
    done = sum(sum(CURVATURE_LINE.read(x, "hessian_vector_products")) for x in made_lines)
    # the seconds per product its points took (stored with them) price the next run
    spent = sum(sum(CURVATURE_LINE.read(x, "point_seconds")) for x in made_lines)
    state.measured("curvature", name, device(), seconds=spent, units=done)
    show_warnings("Curvature along the line", made)
    rows = curvature_rows(made)
    figure(
        figure_curvature(made, presentation=presentation()),
        f"curvature-{name}-{pair[0]}-{pair[1]}-{method}-{group}",
        title="the curvature along the line beside its loss",
        key="curvature",
        data=rows,
        settings={
            "model": name,
            "seeds": list(pair),
            "alignment": combo,
            "eigenvalues": top_k,
            "points": points,
            "probes": probes,
            "batch": CURVATURE.read(made, "batch"),
            "split": CURVATURE.read(made, "split"),
        },  # fmt: skip
        tables={"Curvature along the line": rows},
    )
    results_table(pd.DataFrame(rows))
