"""Eigenangles: how far the weight-matching rotation is from a relabelling, and what LM fixes;
on request, the barrier after every weight-matching round and learned-matching checkpoint."""

from __future__ import annotations

import streamlit as st

from app import state
from app.components.choices import device, model, seed_format
from app.components.failures import Fix, show_error, show_warnings
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation, side_by_side
from app.components.long_runs import ask_first, read_else_run
from app.components.needs import data_fix, need_seeds
from app.components.text import plain
from app.memory import remember
from landscape import page_defaults as page
from landscape.matching import matching_key
from landscape.plots.eigenangles import (
    figure_checkpoint_barriers,
    figure_eigenangles,
    figure_lm_curve,
    figure_objective,
    figure_round_barriers,
)
from landscape.plots.fields import (
    ANGLE_SUMMARY,
    EIGENANGLES,
    ITERATION_ROUND,
    ITERATIONS,
)
from landscape.plots.tidy import tidy_eigenangles, tidy_iterations, tidy_lm_curve, tidy_objective

# the matchings this page measures: weight matching's rotation O_WM, learned matching's O_LM
WEIGHT_ORTH, LEARNED_ORTH = matching_key("weight", "orth"), matching_key("learned", "orth")

page_header(
    "Eigenangles",
    "A rotation of the residual stream has eigenvalues e^(±iφ). A relabelling-like rotation has "
    "angles near 0; a generic one spreads them over (−π, π] like a Haar-random rotation. The "
    "weight-matching rotation O_WM is compared with the *correction* O_LM·O_WMᵀ that learned "
    "matching adds on top of it.",
)

name = model()
seeds = need_seeds(name, 2)
with controls():
    c1, c2, c3, c4 = st.columns(4)
    label = seed_format(name)
    remember(f"eig_a_{name}", seeds[0], param="a", options=seeds, label="seed A")
    seed_a = c1.selectbox("Seed A", seeds, key=f"eig_a_{name}", format_func=label)
    others = [s for s in seeds if s != seed_a]
    remember(f"eig_b_{name}", others[0], param="b", options=others, label="seed B")
    seed_b = c2.selectbox("Seed B", others, key=f"eig_b_{name}", format_func=label)
    remember("eig_learned", page.EIGEN_LEARNED, param="learned", options=(False, True))
    learned = c3.toggle(
        "Learned matching",
        key="eig_learned",
        help="Trains the rotation on the merge loss: slow the first time, then "
        "cached. Off: only O_WM and the Haar reference.",
    )
    remember("eig_iterations", False, param="rounds", options=(False, True))
    iterate = c4.toggle(
        "Barrier per round",
        key="eig_iterations",
        help="Measures the barrier after every weight-matching round (permutations and "
        "rotations) and, with learned matching, at its checkpoints from the identity and from "
        "weight matching: one line evaluation each, minutes the first time, then cached.",
    )

# Weight matching reads only the weights; learned matching and the barriers read the data.
problem = state.data_problem(name) if learned or iterate else None
if problem is not None:
    show_error(f"Learned matching and the barriers need the data of {name}", problem,
               data_fix(name), key="data")  # fmt: skip
    learned = iterate = False  # what the weights alone can tell is drawn below,
    # and no click is offered for a run that cannot read its data

# Learned matching not stored for this pair starts only on a click when it is expected to take
# over 20 s (as long as it took on this model here) or nothing measured here says how long, the
# page's default pair too (on an empty cache it trained for minutes before anything was drawn).
# Where nothing was measured here, the click is offered beside the time the shipped results'
# learned matching took where they were built (this model's, else a bound from a model of the
# nearest size). Meanwhile weight matching alone, quick, is drawn.
waiting = False
if learned:
    try:
        state.eigenangles(name, (seed_a, seed_b), True, device())
    except state.NotCached:
        try:  # the Interpolation page's learned/orth curve of this pair: its matching is stored
            state.barrier(state.seeds_request(name, (seed_a, seed_b), "learned", "orth",
                                              points=page.INTERPOLATION_POINTS,
                                              split=page.SPLIT),
                          device(), compute=False)  # fmt: skip
            took = 0.0
        except Exception:
            took = state.learned_seconds(name, device())
        basis = "as long as learned matching of another pair of this model took here"
        borrowed = state.borrowed_learned(name) if took is None else None
        if borrowed is not None:
            took, basis = borrowed.seconds, borrowed.basis
        waiting = not ask_first(
            "eig", (name, seed_a, seed_b, device()),
            [(f"learned matching of seeds {seed_a} ↔ {seed_b}", took)], basis,
            "not run on this model yet: it trains a transform, seconds for a small model, "
            "minutes for a transformer on a CPU",
            about=borrowed.about if borrowed else "about", here=borrowed is None,
        )  # fmt: skip
    except Exception:  # the page's own read below shows what fails
        pass
    learned = learned and not waiting


def matching(with_learned: bool, fix: Fix | None = None) -> dict | None:
    """The eigenangle result, read from the disk cache, else computed under a progress bar with
    Cancel (learned matching trains a rotation: a minute or more the first time)."""
    what = "Learned matching" if with_learned else "Weight matching"
    args = (name, (seed_a, seed_b), with_learned, device())
    return read_else_run(
        lambda: state.eigenangles(*args),
        lambda progress: state.compute_eigenangles(*args, progress=progress),
        running=f"{what} …",
        done=f"{what} ready",
        failed=f"{what} failed",
        what=what,
        inputs=args,
        fix=fix,
    )


# the figures' place, filled at once: the angles of earlier choices do not stay on the page
# (faded) while these are computed
area = st.empty()
area.info(
    f"The eigenangles of {plain(name)} (seeds {seed_a} and {seed_b}; weight matching"
    f"{' and learned matching' if learned else ''}) appear here when they are computed.",
    icon=":material/hourglass_top:",
)
result, learned_failed = None, False
if learned:
    result = matching(True, Fix("Show weight matching alone", settings={"eig_learned": False}))
    learned_failed = result is None  # the card says why; weight matching alone still shows
    if result is not None and not EIGENANGLES.read(result, "cached"):  # what learned matching
        # of a pair of this model costs here
        state.measured_learned(name, device(), EIGENANGLES.read(result, "seconds"))
if result is None:
    result = matching(False)

if result is None:
    area.empty()
else:
    with area.container():
        left, right = side_by_side([3, 1])
        with left:
            fig = figure_eigenangles(result, presentation=presentation())
            with_lm = EIGENANGLES.read(result, "angles_correction") is not None
            figure(fig, f"eigenangles-{name}-{seed_a}-{seed_b}", key="eig",
                   title="the eigenangles of the matching rotations",
                   data=tidy_eigenangles(result, name, (seed_a, seed_b)),
                   settings={"model": name,
                             "methods": [WEIGHT_ORTH] + [LEARNED_ORTH] * with_lm,
                             "seeds": [seed_a, seed_b], "learned": with_lm})  # fmt: skip
        with right:
            d = EIGENANGLES.read(result, "d_model")
            st.markdown(f"**Summary** (d = {d})")
            shown = [(label, s) for key, label in (
                ("summary_wm", "O_WM"),
                ("summary_correction", "O_LM·O_WMᵀ"),
                ("summary_haar", "Haar O(d)"),
            ) if (s := EIGENANGLES.read(result, key))]  # fmt: skip
            # under the figure on a projector: side by side, not a column the height of a screen
            cells = st.columns(len(shown)) if presentation() else [st.container() for _ in shown]
            for cell, (label, s) in zip(cells, shown, strict=True):
                small = ANGLE_SUMMARY.read(s, "small")
                cell.metric(
                    f"{label}: |φ| < {small:g}",
                    f"{100 * ANGLE_SUMMARY.read(s, 'share_small'):.0f}%",
                    help=f"Share of the eigenangles of {label} within {small:g} rad of 0",
                )
                cell.caption(f"median |φ| = {ANGLE_SUMMARY.read(s, 'median_abs'):.2f} rad")
            draws = EIGENANGLES.read(result, "haar_draws")
            if draws:
                st.caption(
                    f"Haar O(d): the eigenangles of {draws} seeded Haar-random "
                    f"{d}×{d} orthogonal matrices, pooled (the "
                    "same reference for every pair of this width)."
                )
            flips = EIGENANGLES.read(result, "det_flip")
            if flips is not None:  # learned matching ran
                st.caption(f"Determinant flips during learned matching: {flips}")

        c1, c2 = side_by_side([1, 1])
        with c1:
            st.markdown("**Weight matching objective per round**")
            figure(
                figure_objective(EIGENANGLES.read(result, "wm_objective"),
                                 presentation=presentation()),  # fmt: skip
                f"wm-objective-{name}-{seed_a}-{seed_b}",
                title="weight matching's objective per round",
                key="wm-objective",
                data=tidy_objective(EIGENANGLES.read(result, "wm_objective")),
                settings={"model": name, "method": WEIGHT_ORTH, "seeds": [seed_a, seed_b]},
            )
        with c2:
            st.markdown("**Learned matching: training curve**")
            lm_curve = EIGENANGLES.read(result, "lm_curve")
            if lm_curve:
                figure(
                    figure_lm_curve(lm_curve, presentation=presentation()),
                    f"lm-curve-{name}-{seed_a}-{seed_b}",
                    title="learned matching's training curve",
                    key="lm-curve",
                    data=tidy_lm_curve(lm_curve),
                    settings={"model": name, "method": LEARNED_ORTH, "seeds": [seed_a, seed_b]},
                )
            elif learned_failed:
                st.info("Learned matching did not finish (the card below says why).")
            elif waiting:
                st.info("Learned matching waits for the click above.")
            elif problem is not None:
                st.info("Learned matching needs the data (the card above says what is missing).")
            else:
                st.info("Turn on learned matching to see its training curve.")

if iterate:
    st.subheader("Barrier along the way of matching")
    st.caption(
        "Round 0 is no alignment (the naive barrier); the last round is the weight-matching "
        "barrier of the Interpolation page. Learned matching is scored at its checkpoints; step "
        "0 is its start."
    )
    rounds_area = st.empty()  # as above: earlier rounds do not stay (faded) while these run
    rounds_area.info(
        f"The barrier per round of {plain(name)} (seeds {seed_a} and {seed_b}) appears here "
        "when it is measured.",
        icon=":material/hourglass_top:",
    )
    asked = (name, (seed_a, seed_b), learned, device())
    iterations = read_else_run(
        lambda: state.iterations(*asked, compute=False),
        lambda progress: state.iterations(*asked, progress=progress),
        running="Measuring the barrier per round …",
        done="Barriers per round ready",
        failed="Barriers per round failed",
        what="The barrier per round",
        key="rounds",
        inputs=asked,
        # what it costs: as long as the barriers per round of another pair of this model took
        cost=lambda: [
            (
                f"the barrier per round of seeds {seed_a} ↔ {seed_b}"
                + (" and per learned checkpoint" if learned else ""),
                state.expected("rounds", name, learned, device()),
            )
        ],
        basis="as long as the barriers per round of another pair of this model took",
        unknown="one line evaluation per round"
        + (", and learned matching trained twice" if learned else ""),
    )
    if iterations is None:
        rounds_area.empty()
    else:
        state.measured("rounds", name, learned, device(),
                       seconds=state.iterations_seconds(iterations))  # fmt: skip
        with rounds_area.container():
            show_warnings("Barrier per round", iterations)
            st.markdown("**Iterated weight matching: barrier per round**")
            figure(
                figure_round_barriers(iterations, presentation=presentation()),
                f"round-barriers-{name}-{seed_a}-{seed_b}",
                title="the barrier per weight-matching round",
                key="round-barriers",
                data=tidy_iterations(iterations, "rounds"),
                settings={
                    "model": name,
                    "methods": [
                        matching_key("weight", g)
                        for g in dict.fromkeys(ITERATION_ROUND.read(r, "group")
                                               for r in ITERATIONS.read(iterations, "rounds"))
                    ],
                    "seeds": [seed_a, seed_b],
                    "learned": learned,
                },
            )
            st.markdown("**Learned matching: barrier per checkpoint**")
            if ITERATIONS.read(iterations, "checkpoints"):
                figure(
                    figure_checkpoint_barriers(iterations, presentation=presentation()),
                    f"checkpoint-barriers-{name}-{seed_a}-{seed_b}",
                    title="the barrier per learned-matching checkpoint",
                    key="checkpoint-barriers",
                    data=tidy_iterations(iterations, "checkpoints"),
                    settings={
                        "model": name,
                        "method": LEARNED_ORTH,
                        "seeds": [seed_a, seed_b],
                        "learned": learned,
                    },
                )
            else:
                st.info("Turn on learned matching to see its barrier per checkpoint.")
