"""Triangle heatmaps: the plane through three models, one panel per alignment method."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from app.components import (
    combo_label,
    controls,
    device,
    figure,
    has_heads,
    model,
    need_seeds,
    page_header,
    parse_combo,
    presentation,
    seed_format,
    show_error,
    show_warnings,
)
from landscape.matching import GROUPS, METHODS
from landscape.plots.triangle import figure_triangles

page_header(
    "Triangle heatmaps",
    "θ = w_A·θ_A + w_B·π_B(θ_B) + w_C·π_C(θ_C) over a barycentric grid, with B and C aligned onto "
    "A. Corners are the three models; a point counts as *basin* when its loss lies at most 0.05 "
    "nats above the plane through the corners' losses. All panels share one colour scale.",
)

name = model()
seeds = need_seeds(name, 3)
combos = ["naive"] + [combo_label(m, g) for m in METHODS if m != "naive" for g in GROUPS]

with controls():
    c1, c2, c3 = st.columns([2, 3, 2])
    chosen_seeds = c1.multiselect(
        "Three seeds (A, B, C)",
        seeds,
        default=seeds[:3],
        max_selections=3,
        key=f"tri_seeds_{name}",
        format_func=seed_format(name),
    )
    chosen = c2.multiselect(
        "Method / group", combos, default=["naive", "weight/perm", "weight/orth"], key="tri_combos"
    )
    metric = c3.radio("Colour", ["loss", "accuracy"], horizontal=True, key="tri_metric")
    split = c3.radio("Data split", ["test", "train"], horizontal=True, key="tri_split")
    resolution = c1.slider("Grid resolution (steps per edge)", 4, 20, 10, key="tri_resolution")
    space = "weights"
    if has_heads(name):
        space = c3.radio(
            "Merge space",
            ["weights", "circuits"],
            horizontal=True,
            key="tri_space",
            help="weights: mix the parameters as stored. circuits: mix the heads' QK and OV "
            "circuits (not for rotary positions).",
        )
    joint = c2.toggle(
        "Learned matching: align B and C together",
        key="tri_joint",
        help="Learn both transforms at once on mixtures drawn over the whole triangle, instead "
        "of B onto A and C onto A separately (learned panels only).",
    )

if len(chosen_seeds) != 3 or not chosen:
    st.info("Choose exactly three seeds and at least one method.")
    st.stop()

results, titles = [], []
with st.status("Evaluating the triangles …", expanded=False) as status:
    for label in chosen:
        method, group = parse_combo(label)
        status.update(label=f"Evaluating {label} …")
        try:
            results.append(
                state.triangle(
                    name,
                    tuple(chosen_seeds),
                    method,
                    group,
                    resolution,
                    split,
                    device(),
                    space,
                    joint and method == "learned",
                )
            )
            titles.append(label)
        except Exception as err:
            show_error(f"Triangle {label}", err)
    status.update(label=f"{len(results)} triangle(s) ready", state="complete")

for t, r in zip(titles, results, strict=True):
    show_warnings(f"Triangle {t}", r)
if results:
    fig = figure_triangles(results, metric=metric, titles=titles, presentation=presentation())
    figure(fig, f"triangle-{name}-{metric}-{split}", key="triangle")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "method": t,
                    "basin fraction": r["basin_fraction"],
                    f"max loss above plane ({split})": float(np.max(r["excess_loss"])),
                    "grid points": len(r["points"]),
                }
                for t, r in zip(titles, results, strict=True)
            ]
        ),
        hide_index=True,
        column_config={"basin fraction": st.column_config.ProgressColumn(min_value=0, max_value=1)},
    )
