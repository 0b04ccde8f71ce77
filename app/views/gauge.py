"""Gauge sweeps: which facts about a model survive a random function-preserving gauge."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device, is_imported, model, seed_format, zoo_row
from app.components.failures import show_error
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation, side_by_side
from app.components.long_runs import SLOW, UNKNOWN, duration, run_in_status
from app.components.needs import need_data, need_seeds
from app.components.tables import styled_table
from app.components.text import plain
from app.memory import remember
from landscape import page_defaults as page
from landscape.experiments.gauge.runner import GaugeOptions
from landscape.plots.fields import (
    CLAIM_ROW,
    CLAIMS,
    RECOVERY,
    RECOVERY_POINT,
    SCRAMBLE,
    SCRAMBLE_ROW,
    SYMMETRY_TABLE,
    TRAJECTORY,
    TRAJECTORY_ROW,
    TRANSPORT_ROW,
    Fields,
)
from landscape.plots.gauge import (
    figure_claims,
    figure_recovery,
    figure_scramble,
    figure_symmetry_check,
    figure_trajectory,
    figure_transport,
)
from landscape.plots.theme import points
from landscape.plots.tidy import tidy_records

# Per model: fine-tuning steps of the drift test, trajectory length and checkpoint spacing,
# the parts computed on page load, and what the others cost. The character GPT is slow on a
# CPU (its scramble test alone takes minutes), so it gets short settings and more buttons.
DEFAULTS = {
    "steps_grid": (0, 10, 30, 100, 300),
    "trajectory_steps": 1500,
    "trajectory_every": 10,
    "on_load": page.GAUGE_ON_LOAD,
    "cost": UNKNOWN,
}
SHORT = {
    "gpt-shakespeare": {
        "steps_grid": (0, 10, 30, 100),
        "trajectory_steps": 600,
        "trajectory_every": 20,
        "on_load": page.gauge_on_load("gpt-shakespeare"),
        "cost": f"{UNKNOWN} (its scramble test alone took minutes on a CPU)",
    },
}
# An imported family may hold models of any size: only the symmetry table on load, the
# shortest runs offered, every other part on a click.
IMPORTED = {
    "steps_grid": (0, 10, 30),
    "trajectory_steps": 300,
    "trajectory_every": 30,
    "on_load": ("table",),
    "cost": f"{UNKNOWN} (long for a large model on a CPU)",
}
TRAJECTORY_LENGTHS = (300, 600, 1000, 1500)
# the six parts, as their places say while they are read or computed
PART_TITLES = ("The symmetry table", "The scramble test", "The recovery under drift",
               "The trajectory transport", "The claim check", "The transport table")  # fmt: skip
# each gauge-sweep part's declared fields, by its key
PART_FIELDS: dict[str, Fields] = {"table": SYMMETRY_TABLE, "scramble": SCRAMBLE,
                                  "recovery": RECOVERY, "trajectory": TRAJECTORY,
                                  "claims": CLAIMS}  # fmt: skip

page_header(
    "Gauge sweeps",
    "A *gauge* is a function-preserving change of coordinates: relabel the residual stream's "
    "coordinates (S_d), also flip their signs (B_d, exact with RMSNorm gains kept), or rotate it "
    "(O(d), exact once the norm gains are folded into the readers). The sweep applies random "
    "gauges and asks what survives: barriers, recovered coordinates, coordinate claims, "
    'probes, SAEs, LoRA and optimizer state. It is the negative control for "coordinate i '
    'does X".',
)

name = model()
seeds = need_seeds(name, 1)
need_data(name)
settings = {**DEFAULTS, **(IMPORTED if is_imported(name) else SHORT.get(name, {}))}
with controls():
    c1, c2, c3, c4 = st.columns(4)
    remember(f"gauge_seed_{name}", seeds[0], param="seed", options=seeds)
    seed = c1.selectbox(
        "Seed",
        seeds,
        key=f"gauge_seed_{name}",
        format_func=seed_format(name),
        help="The checkpoint swept; also seeds the gauges.",
    )
    remember("gauge_draws", page.GAUGE_DRAWS, param="draws", options=range(1, 6))
    draws = c2.slider(
        "Random gauges per group",
        1,
        5,
        key="gauge_draws",
        help="Draws for the scramble test, the claim check and the drift test.",
    )
    remember(f"gauge_traj_{name}", settings["trajectory_steps"], param="steps",
             options=TRAJECTORY_LENGTHS)  # fmt: skip
    trajectory_steps = c3.select_slider(
        "Trajectory length (steps)",
        TRAJECTORY_LENGTHS,
        key=f"gauge_traj_{name}",
        help="Training steps of the run whose checkpoints are transported (part 4).",
    )
    remember("gauge_transport_seed", 0, param="gauge", options=range(1000), label="gauge seed")
    gauge_seed = c4.number_input(
        "Transport gauge seed",
        0,
        999,
        key="gauge_transport_seed",
        help="Seed of the random B_d gauge the artifacts are moved across (part 6).",
    )
# a checkpoint every ``trajectory_every`` steps, or further apart where a large model's
# checkpoints would not fit the memory budget
trajectory_every = state.trajectory_spacing(trajectory_steps, settings["trajectory_every"],
                                            zoo_row(name)["parameters"])  # fmt: skip
# what every part is asked with: model, seed, options, device (the part's name goes after the
# seed, state.gauge_part)
args = (
    name,
    seed,
    GaugeOptions(draws=draws, steps_grid=tuple(settings["steps_grid"]),
                 trajectory_steps=trajectory_steps, trajectory_every=trajectory_every),
    device(),
)  # fmt: skip


def cached(key: tuple, read: Callable[[], Any], what: str) -> Any:
    """A result from memory or the disk cache, else None (nothing is computed).

    A miss is remembered for the session (a probe loads the model's data, seconds for the GPT),
    so reruns do not probe again; clicking a part's button computes it, or reads it at once if
    another process has stored it meanwhile. A read that fails is a failure card naming
    ``what``, and the rest of the page goes on.
    """
    misses = st.session_state.setdefault("gauge_misses", set())
    if key in misses:
        return None
    try:
        return read()
    except state.NotCached:
        misses.add(key)
        return None
    except Exception as err:
        show_error(what, err, key=f"read-{key[0]}")
        return None


def computed(key: tuple, label: str, compute: Callable[[Callable], Any],
             inputs: Hashable | None = None) -> Any:  # fmt: skip
    """Compute a result (stored on disk for the next run) under a status box with a progress
    bar, the time left and Cancel; ``inputs`` when the page started it without a click."""
    st.session_state.setdefault("gauge_misses", set()).discard(key)
    # on a projector the finished status box goes (its figure takes its place on the screen)
    box = st.empty() if presentation() else st.container()
    with box.container():
        result = run_in_status(compute, running=f"{label} …", done=label,
                               failed=f"{label} failed", what=label, key=f"gauge-{key[0]}",
                               inputs=inputs)  # fmt: skip
    if result is not None and presentation():
        box.empty()
    return result


# the settings the page opens with: its on-load parts are computed at once only at these
DEFAULT_ARGS = (name, seeds[0],
                GaugeOptions(draws=page.GAUGE_DRAWS, steps_grid=args[2].steps_grid,
                             trajectory_steps=settings["trajectory_steps"],
                             trajectory_every=state.trajectory_spacing(
                                 settings["trajectory_steps"], settings["trajectory_every"],
                                 zoo_row(name)["parameters"])), device())  # fmt: skip
DRAWN = ("scramble", "claims")  # parts whose work grows with the draws per group


def expected_seconds(key: str) -> float | None:
    """What an on-load part costs at these settings: its time at the page's own settings on
    this machine (stored with it), times the draws asked over the draws it had; None when that
    is not stored."""
    default = cached((key, *DEFAULT_ARGS), lambda: state.gauge_part(
        DEFAULT_ARGS[0], DEFAULT_ARGS[1], key, *DEFAULT_ARGS[2:]), key)  # fmt: skip
    took = PART_FIELDS[key].read(default, "seconds") if default else None
    if not took:
        return None
    return took * (draws / page.GAUGE_DRAWS if key in DRAWN else 1.0)


def gauge_part(key: str, label: str, cost: str = "") -> dict[str, Any] | None:
    """A gauge-sweep part: read when cached; else computed at once when it is one of the
    model's ``on_load`` parts, at the page's own settings or at others expected (from the time
    it took at those) to take at most 20 s, or when its button (help: ``cost``) is clicked."""
    result = cached((key, *args), lambda: state.gauge_part(args[0], args[1], key, *args[2:]), label)
    if result is not None:
        return result
    on_load = key in settings["on_load"]
    if on_load and args != DEFAULT_ARGS:  # changed settings: a small change can cost minutes
        expected = expected_seconds(key)
        on_load = expected is not None and expected <= SLOW
        cost = (f"about {duration(expected)} here, from its time at the page's own settings"
                if expected is not None else cost or settings["cost"])  # fmt: skip
    if on_load or st.button(
        f"Compute {label.lower()}", key=f"gauge_run_{key}", icon=":material/play_arrow:", help=cost
    ):
        return computed(
            (key, *args),
            label,
            lambda p: state.compute_gauge_part(args[0], args[1], key, *args[2:], progress=p),
            inputs=(key, *args) if on_load else None,
        )
    st.caption(f"Not computed yet for these settings ({cost}). Results are kept on disk.")
    return None


def transport_table(frame: pd.DataFrame):  # -> pandas Styler
    """The transport table as shown: values to four significant digits, % kept as a whole
    percentage, and a missing value (AdamW's % kept) as "—"; every column keeps its type."""
    return frame.style.format(
        {"value on g(A)": "{:.4g}", "value on A": "{:.4g}", "% kept": "{:.0f}%"}, na_rep="—"
    )


def recovery_note(recovery: dict[str, Any]) -> str:
    """What this model's drift figure shows, in numbers: how far the longest fine-tuning moved
    it and what each assignment recovered there (flat lines are recovery, not standstill)."""
    last = RECOVERY.read(recovery, "curve")[-1]
    P = RECOVERY_POINT.read  # the curve's points' declared fields
    marginalised = min(P(last, f"{s}_marginalised_coord") for s in ("weights", "activations"))
    signed = max(P(last, f"{s}_signed_coord") for s in ("weights", "activations"))
    flipped = P(last, "flipped")
    unflipped = 1 - flipped if flipped is not None else None
    signs = f", with {unflipped:.0%} of the signs unflipped" if unflipped is not None else ""
    return (f"Here: after {P(last, 'steps')} steps the weights moved {P(last, 'drift'):.0%} of "
            f"their norm away; sign-marginalised matching still puts {marginalised:.0%} of the "
            f"coordinates right, signed correlation {signed:.0%}{signs}. Lines that lie on one "
            "another agree (weights wide, activations thin on top).")  # fmt: skip


def trajectory_note(trajectory: dict[str, Any]) -> str:
    """What this model's trajectory figure shows at its far end, in numbers."""
    R = TRAJECTORY_ROW.read  # the rows' declared fields
    rows = TRAJECTORY.read(trajectory, "rows")
    far = max(R(r, "steps") for r in rows)
    last = {R(r, "source"): r for r in rows if R(r, "steps") == far}
    parts = [f"{src}: composed {R(r, 'local_coord'):.0%}, endpoints {R(r, 'endpoint_coord'):.0%}"
             for src, r in last.items()]  # fmt: skip
    drift = R(next(iter(last.values())), "drift")
    return (f"Here: {far} steps apart the model has moved {drift:.0%} of its norm; coordinates "
            f"recovered ({'; '.join(parts)}). Lines at 100% lie on one another.")  # fmt: skip


pres = presentation()


def part_figure(draw: Callable[..., Any], part: dict[str, Any], stem: str, title: str) -> None:
    """A part's figure, drawn by ``draw``, its rows the download's data; files and widget key
    named by ``stem`` (the part's key), the report's entry by ``title`` (the part's)."""
    rows = PART_FIELDS[stem].read(part, "rows")
    figure(draw(part, presentation=pres), f"{stem}-{name}-{seed}", title=title.lower(),
           data=tidy_records(rows, model=name, seed=seed), key=f"gauge-{stem}",
           settings={"model": name, "seed": seed})  # fmt: skip


# every part's place, filled at once: the parts of earlier choices (another model, seed or
# setting) do not stay on the page (faded) while this run reads or computes its own
sections = [st.empty() for _ in range(6)]
for slot, title in zip(sections, PART_TITLES, strict=True):
    slot.info(f"{title} for {plain(name)} seed {seed}: appears here when it is read or computed.",
              icon=":material/hourglass_top:")  # fmt: skip

# ---------------------------------------------------------------- 1. symmetry table
with sections[0].container():
    HEADING = "1. Which gauges are exact for this model"
    if not pres:  # on a projector the figure draws it: the figure starts under the title row
        st.subheader(HEADING)
    table = gauge_part("table", "Symmetry table")
    if table is not None:
        rows = SYMMETRY_TABLE.read(table, "rows")
        table_slot = st.container()  # above the figure on a screen, below it on a projector
        left, right = st.container(), st.container()  # its group names need the whole width
        with left:
            figure(
                figure_symmetry_check(rows, title=HEADING if pres else None, presentation=pres),
                f"symmetry-{name}-{seed}",
                title=PART_TITLES[0].lower(),
                data=tidy_records(rows, model=name, seed=seed),
                key="gauge-table",
                settings={"model": name, "seed": seed},
            )
        (right if pres else table_slot).table(styled_table(rows, brief=pres))
        with right:
            if pres:  # on a projector the table holds what the figure needs; the rest on a click
                with st.expander("Details: what each group acts on, and why"):
                    st.table(styled_table(rows))
            st.markdown(
                "A random element of each group is applied and the logits are compared in float64: "
                "a valid gauge changes them only by rounding (~1e-15), an invalid one by order 1. "
                "An invalid level names the processing step that makes it exact; the row after it "
                "is measured with that step applied (against the unprocessed model's logits)."
            )

# ---------------------------------------------------------------- 2. scramble
with sections[1].container():
    st.subheader("2. Scramble test: can matching undo a random gauge?")
    scramble = gauge_part(
        "scramble",
        "Scramble test",
        f"{draws} draw(s) per group, each matched three ways: {settings['cost']}",
    )
    if scramble is not None:
        left, right = side_by_side([3, 2])
        with left:
            part_figure(figure_scramble, scramble, "scramble", PART_TITLES[1])
        with right:
            st.markdown(
                "θ against g(θ), the *same function*. Naively the straight line between them "
                "crosses a barrier. Activation matching restricted to a group that contains g "
                "finds it again and the barrier falls to numerical noise (~1e-8); a group too "
                "small for g (S_d against sign flips, S_d or B_d against a rotation) leaves a "
                "real barrier."
            )
            worst = max(float(SCRAMBLE_ROW.read(r, "max_abs_dlogits"))
                        for r in SCRAMBLE.read(scramble, "rows"))  # fmt: skip
            st.caption(
                f"{draws} draw(s) per group; every g(θ) checked: max |Δlogits| = {worst:.1e}."
            )

# ---------------------------------------------------------------- 3. recovery under drift
with sections[2].container():
    st.subheader("3. Recovering the gauge after fine-tuning drift")
    steps_text = ", ".join(str(k) for k in settings["steps_grid"])
    recovery = gauge_part(
        "recovery",
        "Recovery under drift",
        f"fine-tunes g(θ) for k = {steps_text} steps per draw: {settings['cost']}",
    )
    if recovery is not None:
        left, right = side_by_side([2, 1])
        with left:
            part_figure(figure_recovery, recovery, "recovery", PART_TITLES[2])
        with right:
            st.markdown(
                "B = g(θ) with g ∈ B_d, then fine-tuned k steps so it drifts away. Signed "
                "correlation cannot pair a flipped coordinate (its correlation is ≈ −1) and "
                "stays near the share of unflipped signs; assigning on |C| and reading the sign "
                "off afterwards (*sign-marginalised*) recovers them."
            )
            st.caption(recovery_note(recovery))

# ---------------------------------------------------------------- 4. trajectory transport
with sections[3].container():
    st.subheader("4. Transport along a training trajectory")
    trajectory = gauge_part(
        "trajectory",
        "Trajectory transport",
        f"trains a run of {trajectory_steps} steps and matches every "
        f"{trajectory_every}th checkpoint: {settings['cost']}",
    )
    if trajectory is not None:
        left, right = side_by_side([2, 1])
        with left:
            part_figure(figure_trajectory, trajectory, "trajectory", PART_TITLES[3])
        with right:
            st.markdown(
                "Every checkpoint of one run is stored in its own random B_d gauge. Matching "
                "neighbours (which barely differ) and composing the matches carries the "
                "coordinates much further than matching the far-apart endpoints directly."
            )
            st.caption(trajectory_note(trajectory))

# ---------------------------------------------------------------- 5. claim check
with sections[4].container():
    st.subheader("5. Claim check: the negative control")
    claims = gauge_part("claims", "Claim check")
    C = CLAIMS.read  # the part's declared fields
    if claims is not None:
        left, right = side_by_side([3, 2])
        with left:
            part_figure(figure_claims, claims, "claims", PART_TITLES[4])
        with right:
            st.markdown(
                f"The claim: *the top-{C(claims, 'k')} residual coordinates for class c* (classes "
                f"{', '.join(str(c) for c in C(claims, 'classes'))}, layer "
                f"{C(claims, 'layer')}). In a "
                "random gauge the model computes exactly the same function, yet the claim drops to "
                "chance: **a coordinate-indexed claim that does not survive a gauge describes the "
                "basis, not the model**, so it only means something once the gauge is transported "
                "back (overlap 1)."
            )
            delta = max(abs(CLAIM_ROW.read(r, "accuracy_delta")) for r in C(claims, "rows"))
            st.caption(
                f"Function-level control: test accuracy {C(claims, 'accuracy'):.2%} in every gauge "
                f"(largest change {points(delta):.1e} points)."
            )

# ---------------------------------------------------------------- 6. transport table
with sections[5].container():
    st.subheader("6. Moving artifacts across a gauge")
    transport_args = (name, seed, int(gauge_seed), device())
    transport_cost = f"trains a probe, an SAE and a LoRA and resumes AdamW: {settings['cost']}"
    transport = cached(
        ("transport", *transport_args),
        lambda: state.transport_table(*transport_args),
        "Transport table",
    )
    if transport is None:
        if st.button(
            "Compute transport table",
            key="gauge_run_transport",
            icon=":material/play_arrow:",
            help=transport_cost,
        ):
            transport = computed(
                ("transport", *transport_args),
                "Transport table",
                lambda p: state.compute_transport_table(*transport_args, progress=p),
            )
        else:
            st.caption(
                f"Not computed yet for these settings ({transport_cost}). Results are kept on disk."
            )
    if transport is not None:
        mode_label = {"exact": "exact B_d", "perm-only": "permutation only", "none": "none"}
        T = TRANSPORT_ROW.read  # the rows' declared fields
        frame = pd.DataFrame(
            {
                "artifact": [T(r, "artifact") for r in transport],
                "transport": [mode_label.get(T(r, "mode"), T(r, "mode")) for r in transport],
                "metric": [T(r, "metric") for r in transport],
                "value on g(A)": [T(r, "value") for r in transport],
                "value on A": [T(r, "reference") for r in transport],
                # AdamW has no percentage (its metric is a distance, the caption says so): NaN,
                # shown as "—" by the table's format, so the column stays numbers
                "% kept": [float("nan") if T(r, "kept") is None else float(T(r, "kept"))
                           for r in transport],  # fmt: skip
            }
        )
        left, right = side_by_side([3, 2])
        with left:
            figure(
                figure_transport(transport, presentation=pres),
                f"transport-{name}-{seed}",
                title=PART_TITLES[5].lower(),
                data=frame,
                key="gauge-transport",
                settings={"model": name, "seed": seed},
            )
        with right:
            st.markdown(
                "A = the model, B = g(A) with a random g of the B_d level (FFN units and heads "
                "permuted too). Each artifact is made on A and moved to B exactly (through g), "
                "through its permutation without the signs, or not at all. Writers (steering "
                "vectors, SAE decoder rows, LoRA factors of writer matrices) move by ·G, readers "
                "(probes, the SAE encoder) by Gᵀ·; AdamW second moments by |G|."
            )
            st.caption(
                "SAE: % of A's NMSE (100% is as good as on A, more is worse; bars above 200% "
                "are cut, hatched and labelled as a multiple of A). AdamW has no %: the distance "
                "of B's resumed run, mapped back, from A's, per step length (0 is exact)."
            )
        if pres:  # a static table fits a projector's width (a data grid ran off it)
            st.table(transport_table(frame).hide(axis="index"))
        else:
            st.dataframe(
                transport_table(frame),
                hide_index=True,
                height=35 * (len(frame) + 1) + 3,  # every row, no inner scrolling
            )
