"""Triangle heatmaps: the plane through three models, one panel per alignment method."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device, has_circuits, model, pick_many, seed_format
from app.components.failures import show_error, show_warnings
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation
from app.components.long_runs import LongRun, ask_first, left_out
from app.components.needs import need_data, need_seeds
from app.components.text import plain
from app.memory import remember
from landscape import page_defaults as page
from landscape.experiments import TriangleOptions
from landscape.experiments.barriers.triangles import JOINT_METHOD
from landscape.matching import matching_keys, method_of
from landscape.names import BARRIER_GROUPS, METHODS
from landscape.page_defaults import method_group
from landscape.plots.fields import TRIANGLE
from landscape.plots.theme import points
from landscape.plots.tidy import tidy_triangles
from landscape.plots.triangle import (
    METRIC_LABEL,
    basin,
    basin_fraction,
    edge_value,
    figure_triangles,
)
from landscape.progress import within

page_header(
    "Triangle heatmaps",
    "θ = w_A·θ_A + w_B·π_B(θ_B) + w_C·π_C(θ_C) over a barycentric grid, with B and C aligned onto "
    "A. Corners are the three models. The outlined *basin* follows the colour: coloured by loss, "
    "a point is in it when its loss lies at most 0.05 nats above the plane through the corners' "
    "losses; by accuracy, when its accuracy lies at most one point below the plane through "
    "theirs. All panels share one colour scale.",
)

name = model()
seeds = need_seeds(name, 3)
need_data(name)
# a method that aligns comes under every group; naive, which does not, once
combos = matching_keys(METHODS, BARRIER_GROUPS)

with controls():
    c1, c2, c3 = st.columns([2, 3, 2])
    remember(f"tri_seeds_{name}", seeds[:3], param="seeds", options=seeds, many=True, most=3)
    chosen_seeds = pick_many(
        c1,
        "Three seeds (A, B, C)",
        seeds,
        max_selections=3,
        key=f"tri_seeds_{name}",
        format_func=seed_format(name),
        wrap=True,
    )
    remember("tri_combos", list(page.METHODS), param="methods",
             options=combos, many=True)  # fmt: skip
    chosen = pick_many(c2, "Method / group", combos, key="tri_combos", wrap=True)
    remember("tri_metric", "loss", param="colour", options=("loss", "accuracy"))
    metric = c3.radio("Colour", ["loss", "accuracy"], horizontal=True, key="tri_metric")
    remember("tri_split", page.SPLIT, param="split", options=("test", "train"))
    split = c3.radio("Data split", ["test", "train"], horizontal=True, key="tri_split")
    remember("tri_resolution", page.TRIANGLE_RESOLUTION, param="grid", options=range(4, 21))
    resolution = c1.slider("Grid resolution (steps per edge)", 4, 20, key="tri_resolution")
    space = "weights"
    if has_circuits(name):
        remember("tri_space", "weights", param="space", options=("weights", "circuits"))
        space = c3.radio(
            "Merge space",
            ["weights", "circuits"],
            horizontal=True,
            key="tri_space",
            help="weights: mix the parameters as stored. circuits: mix the heads' QK and OV "
            "circuits (with rotary positions, at every offset).",
        )
    joint = False
    if any(method_group(c)[0] == JOINT_METHOD for c in chosen):  # it changes those panels only
        remember("tri_joint", False, param="joint", options=(False, True))
        joint = c2.toggle(
            "Learned matching: align B and C together",
            key="tri_joint",
            help="Learn both transforms at once on mixtures drawn over the whole triangle, "
            "instead of B onto A and C onto A separately (learned panels only).",
        )

if len(chosen_seeds) != 3 or not chosen:
    st.info("Choose exactly three seeds and at least one method.")
    st.stop()

results, titles, failures = [], [], []
# the figure's place, filled at once: the triangles of earlier choices do not stay on the page
# (faded) while these are computed
figure_slot = st.empty()
figure_slot.info(
    f"The triangles of {plain(name)} (seeds {', '.join(map(str, chosen_seeds))}; "
    f"{', '.join(chosen)}; {split} split) appear here when they are evaluated.",
    icon=":material/hourglass_top:",
)
wanted = (name, tuple(chosen_seeds), tuple(chosen), resolution, split, space, joint)
n_points = (resolution + 1) * (resolution + 2) // 2


def _args(label: str) -> tuple:
    method, group = method_group(label)
    options = TriangleOptions(resolution=resolution, split=split, space=space,
                              joint=joint and method == JOINT_METHOD)  # fmt: skip
    return name, tuple(chosen_seeds), method, group, options, device()


# the page's own view (shipped, or cheap) is evaluated at once even before any grid of this
# model was measured here: it measures the seconds per point for the others
DEFAULT_VIEW = (name, tuple(seeds[:3]), tuple(page.METHODS), page.TRIANGLE_RESOLUTION,
                page.SPLIT, "weights", False)  # fmt: skip


def _estimates() -> list[tuple[str, float | None]]:
    """The triangles not stored yet, each with what its grid will cost at the seconds per point
    this machine measured (unknown, None, before any grid of this model was measured here,
    except on the page's own view: 0, it measures them; None too when learned matching that no
    triangle of these seeds has done must run first)."""
    todo = []
    for label in chosen:
        try:
            state.measured_triangle(state.triangle(*_args(label), compute=False), device(),
                                    _args(label)[4].joint)  # fmt: skip
        except state.NotCached:
            todo.append(label)
        except Exception:  # the loop below shows what fails
            continue
    per_point = state.grid_seconds(name, split, space, device())
    parts = []
    for label in todo:
        _, seeds, method, group, options, _ = _args(label)
        aligned = state.triangle_aligned(name, seeds, method, group, space, options.joint)
        unknown = method_of(method).learned and not aligned  # its optimiser runs first
        if per_point is None and wanted != DEFAULT_VIEW:
            unknown = True
        parts.append((f"{label}, {n_points} grid points",
                      None if unknown else (per_point or 0.0) * n_points))  # fmt: skip
    return parts


# before a long run the page says what it costs and waits for a click; cancelled or waiting,
# what is stored is drawn, the rest is named (left_out), and the page goes on
ready = ask_first("triangle", wanted, _estimates(),
                  "at the seconds per grid point measured on this machine",
                  "one evaluation of the model per grid point, after the alignments")  # fmt: skip
run = LongRun("Evaluating the triangles …", key="triangle", inputs=wanted) if ready else None
computing = run is not None and not run.cancelled
missing = []
for i, label in enumerate(chosen):
    try:
        part = None
        if computing:
            run(f"Triangle {label}", i, len(chosen))
            part = within(run, i / len(chosen), (i + 1) / len(chosen), f"{label} · ")
        results.append(state.triangle(*_args(label), progress=part, compute=computing))
        state.measured_triangle(results[-1], device(), _args(label)[4].joint)
        titles.append(label)
    except state.NotCached as err:
        if computing:
            failures.append((label, err))
        missing.append(f"{label}, {n_points} grid points")
    except Exception as err:
        failures.append((label, err))
if run is not None:
    run.close()
left_out(missing, cancelled=ready)
for label, err in failures:  # each on its own card, never folded into a box that says done
    show_error(f"Triangle {label}", err)

for t, r in zip(titles, results, strict=True):
    show_warnings(f"Triangle {t}", r)
if not results:
    figure_slot.empty()
else:
    with figure_slot.container():
        edge = [i / resolution for i in range(resolution + 1)]
        mark = remember("tri_mark", edge[resolution // 2], param="lam", options=edge)
        fig = figure_triangles(
            results, metric=metric, titles=titles, mark=mark, presentation=presentation()
        )
        # the value at the mark in the figure's unit: accuracy in percent, loss in nats
        at_mark = f"{METRIC_LABEL[metric]} at λ = {mark:.2f} (A–B)"
        unit, digits = (points(1.0), "{:.2f}") if metric == "accuracy" else (1.0, "{:.4f}")
        basin_column = f"{metric} basin (% of the grid)"  # in % on the page and in the report
        summary = pd.DataFrame(
            [
                {
                    "method": t,
                    basin_column: points(basin_fraction(r, metric)),
                    "max loss above plane (nats)": float(np.max(TRIANGLE.read(r, "excess_loss"))),
                    at_mark: unit * edge_value(r, metric, mark),
                }
                for t, r in zip(titles, results, strict=True)
            ]
        )
        figure(
            fig,
            f"triangle-{name}-{metric}-{split}",
            title=f"{metric} over the plane of three models",
            key="triangle",
            data=tidy_triangles(results, model=name),
            settings={
                "model": name,
                "seeds": list(chosen_seeds),
                "methods": titles,
                "split": split,
                "resolution": resolution,
                "space": space,
            },  # fmt: skip
            tables={"The triangles": summary.to_dict("records")},
        )
        # under the figure (its value is read above, from the session): the figure comes first
        st.select_slider(
            "Mark λ on the A–B edge (θ(λ) = λ·θ_A + (1−λ)·π(θ_B), the Interpolation page's line)",
            edge,
            key="tri_mark",
            format_func=lambda v: f"{v:.2f}",
        )
        if presentation():  # a static table fits a projector's width; its cells are the numbers
            st.table(summary.style.format({basin_column: "{:.0f}",
                                           "max loss above plane (nats)": "{:.4f}",
                                           at_mark: digits}).hide(axis="index"))  # fmt: skip
        else:
            st.dataframe(
                summary,
                hide_index=True,
                column_config={
                    basin_column: st.column_config.ProgressColumn(
                        min_value=0, max_value=100, format="%.0f%%"
                    ),
                    "max loss above plane (nats)": st.column_config.NumberColumn(format="%.4f"),
                    at_mark: st.column_config.NumberColumn(
                        format="%.2f" if metric == "accuracy" else "%.4f"
                    ),
                },
            )
        st.caption(
            f"Basin: {basin(results[0], metric)[1]}. Max loss above plane: over the grid, "
            f"{split} split. {len(results[0]['points'])} grid points in each triangle."
        )
