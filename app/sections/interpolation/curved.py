"""The curved path: a Bézier curve or polygonal chain between A and B whose control point is
trained, beside the straight line; opt-in."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.layout import presentation
from app.components.long_runs import read_else_run
from app.components.tables import on_screen, results_table
from app.memory import remember
from app.sections.interpolation.asked import Asked
from landscape.experiments import seeds_request
from landscape.experiments.barriers.curved import KINDS as CURVE_KINDS
from landscape.experiments.barriers.curved import STEPS as CURVE_STEPS
from landscape.experiments.barriers.curved import CurveOptions
from landscape.matching import aligns
from landscape.page_defaults import method_group
from landscape.plots.curves import KIND_WORDS, figure_curve
from landscape.plots.fields import CURVED, CURVED_ALIGNMENT
from landscape.plots.tidy import tidy_curve


def curved_path(asked: Asked) -> None:
    """Behind a toggle: one pair's trained curve beside its line, naive and aligned, with its
    table; read, else trained (on a click when long or of unknown time)."""
    name, pairs, chosen = asked.name, asked.pairs, asked.chosen
    split, points = asked.split, asked.points
    st.subheader("Curved path")
    st.caption(
        "A curve between A and B whose control point is trained on the training split with A "
        "and B fixed (a Bézier curve (1−t)²A + 2t(1−t)θ + t²B, or the polygonal chain A → θ → "
        "B), started at the midpoint, so that before training it is the straight line. Its loss "
        "and accuracy on the chosen split at the line's λ, beside the line's, naive (dashed) "
        "and aligned (solid); barriers against the same chord. Trained once (seconds for the "
        "small models), then read from the cache."
    )
    remember("curve_show", False, param="curve", options=(False, True))
    if st.toggle("Curved path", key="curve_show"):
        q1, q2, q3 = st.columns([2, 2, 3])
        remember(f"curve_pair_{name}", pairs[0], param="cv_pair", options=pairs,
                 label="curve pair")  # fmt: skip
        curve_pair = q1.selectbox("Pair (A, B)", pairs, key=f"curve_pair_{name}",
                                  format_func=asked.pair_label)  # fmt: skip
        curve_combos = [c for c in chosen if aligns(method_group(c)[0])] or ["naive"]
        remember("curve_combo", curve_combos[0], param="cv_method", options=curve_combos,
                 label="curve method")  # fmt: skip
        curve_combo = q1.selectbox("Aligned by", curve_combos, key="curve_combo")
        remember("curve_kind", CURVE_KINDS[0], param="cv_kind", options=CURVE_KINDS)
        curve_kind = q2.radio("Curve", CURVE_KINDS, format_func=KIND_WORDS.get, key="curve_kind")
        step_options = sorted({100, 250, CURVE_STEPS, 1000, 2000})
        remember("curve_steps", CURVE_STEPS, param="cv_steps", options=step_options)
        curve_steps = q3.select_slider("Training steps", step_options, key="curve_steps")
        method, group = method_group(curve_combo)
        request = seeds_request(name, curve_pair, method, group, points=points, split=split)
        wanted = (request, CurveOptions(kind=curve_kind, steps=curve_steps), device())
        trainings = 2 if aligns(method) else 1  # naive's curve, and the aligned pair's
        made = read_else_run(
            lambda: state.curve(*wanted, compute=False),
            lambda progress: state.curve(*wanted, progress=progress),
            running="Training the curve and evaluating it beside the line …",
            done="The curved path is ready",
            failed="The curved path failed",
            what="Curved path",
            key="curve",
            inputs=wanted,
            cost=lambda: [(f"{trainings} curve(s) of {curve_steps} training steps",
                           state.expected("curve", name, device(),
                                          units=trainings * curve_steps))],
            basis=f"at the seconds per training step the stored curves of {name} took",
            unknown="each trains its control point on the training split",
        )  # fmt: skip
        if made is not None:
            R, A = CURVED.read, CURVED_ALIGNMENT.read  # the result's and its alignments' fields
            alignments = R(made, "alignments")
            state.measured("curve", name, device(),
                           seconds=sum(A(al, "training_seconds") for al in alignments),
                           units=R(made, "steps") * len(alignments))  # fmt: skip
            show_warnings("Curved path", made)
            curve_table = on_screen(state.curve_rows(made))
            figure(
                figure_curve(made, presentation=presentation()),
                f"curve-{name}-{curve_pair[0]}-{curve_pair[1]}-{curve_kind}-{split}",
                title="the curved path beside the line",
                key="curve",
                data=tidy_curve(made),
                settings={"model": name, "seeds": list(curve_pair), "alignment": curve_combo,
                          "curve": curve_kind, "bends": R(made, "bends"), "steps": curve_steps,
                          "lr": R(made, "lr"), "batch size": R(made, "batch_size"),
                          "points": points, "split": split},
                cache_keys=[k for al in alignments
                            for k in (A(al, "line_cache_key"), A(al, "cache_key"))],
                tables={f"Barriers of the line and the curve, {split} split": curve_table},
            )  # fmt: skip
            results_table(pd.DataFrame(curve_table))
