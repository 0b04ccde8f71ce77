"""The barrier matrix: every pair of the chosen seeds under one of the chosen methods, measured on
a click and kept in the session."""

from __future__ import annotations

import itertools

import streamlit as st

from app import state
from app.components.choices import device, pick_many
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.layout import presentation
from app.components.long_runs import UNKNOWN, duration, run_in_status
from app.memory import remember
from app.sections.interpolation.asked import Asked
from app.sections.interpolation.curves import costs
from landscape.experiments.barriers.matrix import PAIR as MATRIX_PAIR
from landscape.experiments.barriers.matrix import MatrixOptions
from landscape.page_defaults import method_group
from landscape.plots.fields import MATRIX
from landscape.plots.matrix import figure_barrier_matrix
from landscape.plots.tidy import tidy_matrix


def barrier_matrix(asked: Asked) -> None:
    """The loss and accuracy barrier of every pair of the seeds chosen here, under one of the
    methods and one of the merge spaces chosen above: what a click will cost, then the matrix,
    kept in the session for these choices."""
    name, seeds, chosen, spaces = asked.name, asked.seeds, asked.chosen, asked.spaces
    split, points, seed_label = asked.split, asked.points, asked.seed_label
    st.subheader("Every pair: the barrier matrix")
    st.caption(
        "The loss and accuracy barrier of every pair of the chosen seeds, each B aligned to the "
        "smaller seed A as in the curves above and read from the same cache. The diagonal is "
        "each model against itself: 0 by definition. One alignment per pair."
    )
    m1, m2, m3 = st.columns([3, 2, 1], vertical_alignment="bottom")
    remember(f"matrix_seeds_{name}", seeds[: min(len(seeds), 3)], param="mseeds",
             options=seeds, many=True)  # fmt: skip
    matrix_seeds = pick_many(m1, "Seeds", seeds, key=f"matrix_seeds_{name}",
                             format_func=seed_label)  # fmt: skip
    matrix_combo = m2.selectbox("Method / group", chosen, key="matrix_combo")
    matrix_space = (m2.radio("Merge space of the matrix", spaces, horizontal=True,
                             key="matrix_space") if len(spaces) > 1 else spaces[0])  # fmt: skip
    wanted = (name, tuple(sorted(matrix_seeds)), matrix_combo, matrix_space, split, points)
    kept = st.session_state.get("matrix_result")
    if len(matrix_seeds) >= 2 and (kept is None or kept["wanted"] != wanted):
        # what a click will cost: the pairs not stored, at the time the stored curves of the
        # method took to match here (unknown where none is stored)
        todo = costs(asked, [matrix_combo], [matrix_space],
                     list(itertools.combinations(sorted(matrix_seeds), 2)), quick=None)
        known = [sec for _, sec in todo if sec is not None]
        if not todo:
            cost = "Every pair is stored: read at once."
        elif len(known) == len(todo):
            cost = (f"{len(todo)} pair(s) not stored: their matching about "
                    f"{duration(sum(known))} (as long as the stored curves of the same method "
                    "took to match), then one line evaluation each.")  # fmt: skip
        else:
            cost = (f"{len(todo)} pair(s) not stored: {UNKNOWN} (no curve of "
                    f"{matrix_combo} is stored for this model).")  # fmt: skip
        st.caption(cost)
    if m3.button("Measure", key="matrix_run", disabled=len(matrix_seeds) < 2,
                 icon=":material/grid_on:"):  # fmt: skip
        method, group = method_group(matrix_combo)
        made = run_in_status(
            lambda progress: state.barrier_matrix(
                name, sorted(matrix_seeds), method, group,
                MatrixOptions(points=points, split=split, space=matrix_space), device(),
                progress=progress,
            ),
            running=f"Aligning {len(matrix_seeds) * (len(matrix_seeds) - 1) // 2} pairs …",
            done="The barrier matrix is ready",
            failed="The barrier matrix failed",
            what="The barrier matrix",
        )  # fmt: skip
        if made is not None:
            st.session_state["matrix_result"] = {"wanted": wanted, "result": made}
    kept = st.session_state.get("matrix_result")
    if kept is not None and kept["wanted"] == wanted:
        matrix = kept["result"]
        show_warnings("The barrier matrix", matrix)
        figure(
            figure_barrier_matrix(matrix, presentation=presentation()),
            f"barrier-matrix-{name}-{split}",
            title="the barrier matrix of every pair",
            key="matrix",
            data=tidy_matrix(matrix),
            settings={
                "model": name,
                "seeds": MATRIX.read(matrix, "seeds"),
                "method": MATRIX.read(matrix, "method"),
                "group": MATRIX.read(matrix, "group"),
                "space": MATRIX.read(matrix, "space"),
                "split": split,
                "points": points,
            },  # fmt: skip
            cache_keys=[MATRIX_PAIR.read(p, "cache_key") for p in MATRIX.read(matrix, "pairs")],
        )
