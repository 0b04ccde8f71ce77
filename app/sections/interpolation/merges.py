"""The merge operators: mergekit's SLERP, TIES, DARE, … beside the straight line of one pair, naive
and aligned; opt-in."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device, pick_many
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.long_runs import read_else_run
from app.components.tables import on_screen, results_table
from app.memory import remember
from app.sections.interpolation.asked import Asked
from landscape.experiments.merging.mergekit import MERGE_METHODS
from landscape.experiments.merging.operators import DENSITY as MERGE_DENSITY
from landscape.experiments.merging.operators import OPERATORS as MERGE_OPERATORS
from landscape.experiments.merging.operators import POINTS as MERGE_POINTS
from landscape.matching import aligns
from landscape.page_defaults import method_group
from landscape.plots.fields import MERGE_ALIGNMENT, MERGES
from landscape.plots.interpolation import figure_merges
from landscape.plots.tidy import tidy_records


def merge_operators(asked: Asked) -> None:
    """Behind a toggle: one pair's merge operators beside its line, naive and aligned, each
    point merged by mergekit (said where it is not installed), read or computed on a click."""
    name, pairs, chosen, split = asked.name, asked.pairs, asked.chosen, asked.split
    st.subheader("Merge operators")
    st.caption(
        "mergekit's merge operators (SLERP, TIES, DARE, …) beside the straight line, for one "
        "pair, naive (dashed) and aligned (solid), each point merged by mergekit itself and "
        "evaluated here. The models share no base: B is the base and A − B the one task vector "
        "at weight λ, so each operator is a curve from B (λ = 0) towards A; TIES and DARE keep "
        f"a fraction {MERGE_DENSITY:g} of it (at λ = 1 they are not A), and every barrier is "
        "measured against the line's chord. Each point is one mergekit run, cached once made."
    )
    remember("merges_show", False, param="merges", options=(False, True))
    if st.toggle("Show the merge operators", key="merges_show"):
        if not state.mergekit_installed():
            st.info("The merge operators run mergekit, which is not installed here: "
                    "`pip install 'landscape[merge]'`.", icon=":material/info:")  # fmt: skip
        else:
            k1, k2, k3 = st.columns([2, 2, 3])
            remember(f"merges_pair_{name}", pairs[0], param="mg_pair", options=pairs,
                     label="merge pair")  # fmt: skip
            merge_pair = k1.selectbox("Pair (A, B)", pairs, key=f"merges_pair_{name}",
                                      format_func=asked.pair_label)  # fmt: skip
            aligned_combos = [c for c in chosen if aligns(method_group(c)[0])] or ["naive"]
            remember("merges_combo", aligned_combos[0], param="mg_method",
                     options=aligned_combos, label="merge method")  # fmt: skip
            merge_combo = k1.selectbox("Aligned by", aligned_combos, key="merges_combo")
            remember("merges_ops", list(MERGE_OPERATORS), param="mg_ops",
                     options=MERGE_METHODS, many=True)  # fmt: skip
            merge_ops = pick_many(k2, "Operators", MERGE_METHODS, key="merges_ops", wrap=True,
                                  help="linear is the straight line itself, through "
                                       "mergekit: a check of the round trip")  # fmt: skip
            remember("merges_points", MERGE_POINTS, param="mg_points", options=(3, 5, 9))
            merge_points = k3.select_slider("Points on λ", [3, 5, 9], key="merges_points")
            if merge_ops:
                method, group = method_group(merge_combo)
                ops = tuple(o for o in MERGE_METHODS if o in merge_ops)
                request = state.seeds_request(name, merge_pair, method, group,
                                              points=merge_points, split=split)  # fmt: skip
                wanted = (request, ops, device())
                n_merges = (2 if aligns(method) else 1) * len(ops) * merge_points
                merged = read_else_run(
                    lambda: state.merges(*wanted, compute=False),
                    lambda progress: state.merges(*wanted, progress=progress),
                    running="Merging with mergekit and evaluating …",
                    done="The merge operators are ready",
                    failed="The merge operators failed",
                    what="Merge operators",
                    key="merges",
                    inputs=wanted,
                    cost=lambda: [(f"{n_merges} merged points",
                                   state.expected("merge", name, device(), units=n_merges))],
                    basis=f"at the seconds per point the stored merges of {name} took",
                    unknown="each point is a merge by mergekit and an evaluation (a fresh "
                    "mergekit process for a Hugging Face model)",
                )  # fmt: skip
                if merged is not None:
                    R, A = MERGES.read, MERGE_ALIGNMENT.read  # the pair's, its alignments' fields
                    alignments = R(merged, "alignments")
                    state.measured("merge", name, device(),
                                   seconds=sum(A(al, "merge_seconds") for al in alignments),
                                   units=sum(A(al, "merges") for al in alignments))  # fmt: skip
                    for al in alignments:
                        show_warnings(f"Merge operators, {A(al, 'method')}/{A(al, 'group')}", al)
                    figure(
                        figure_merges(merged),
                        f"merges-{name}-{merge_pair[0]}-{merge_pair[1]}-{split}",
                        title="merge operators along the line",
                        key="merges",
                        data=tidy_records(state.merge_rows(merged), model=name, split=split),
                        settings={"model": name, "seeds": list(merge_pair),
                                  "alignment": merge_combo, "operators": list(ops),
                                  "points": merge_points, "split": split,
                                  "density": R(merged, "density"),
                                  "mergekit": R(merged, "mergekit")},
                    )  # fmt: skip
                    results_table(pd.DataFrame(on_screen(state.merge_rows(merged))))
