"""Different widths: A against narrower versions of B, embedded into A's width and aligned;
for zoo transformers."""

from __future__ import annotations

import streamlit as st

from app import state
from app.components.choices import device, pick_many
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.layout import presentation
from app.components.long_runs import read_else_run
from app.memory import remember
from app.sections.interpolation.asked import Asked
from landscape.matching import matching_key
from landscape.plots.fields import WIDTHS
from landscape.plots.interpolation import figure_widths
from landscape.plots.tidy import tidy_records


def different_widths(asked: Asked) -> None:
    """The barrier between A and narrower versions of B (width d/k, each trained once), when
    asked: read, else trained (on a click when long)."""
    name, pairs, split = asked.name, asked.pairs, asked.split
    st.subheader("Different widths")
    st.caption(
        "A against narrower versions of B (width d/k, the zoo recipe otherwise unchanged), each "
        "embedded into width d by a semi-orthogonal map (the same function) and aligned under "
        "O(d). Each narrow model is trained once (about a minute) and then read from the cache."
    )
    w1, w2 = st.columns([3, 2])
    options = list(state.width_factors(name))
    remember(f"width_factors_{name}", [k for k in (2, 4) if k in options], param="widths",
             options=options, many=True)  # fmt: skip
    factors = pick_many(
        w1, "Width factors k (B has width d/k)", options, key=f"width_factors_{name}", wrap=True
    )
    remember(f"width_run_{name}", False, param="measure", options=(False, True))
    run_widths = w2.toggle("Measure the width barriers", key=f"width_run_{name}")
    if run_widths and factors and pairs:
        a_seed, b_seed = pairs[0]
        asked_widths = (name, a_seed, b_seed, tuple(sorted(factors)), split, device())

        def width_costs() -> list[tuple[str, float | None]]:
            """Each narrow B: read when stored (then aligned and evaluated: quick), else
            trained, at the time training seed B at full width took."""
            took = state.checkpoint(name, b_seed).meta.get("seconds")
            return [(f"d/{k}: aligned and evaluated", 0.0)
                    if state.narrow_stored(name, k, b_seed, device())
                    else (f"d/{k}: seed {b_seed} trained at width d/{k}", took)
                    for k in sorted(factors)]  # fmt: skip

        widths = read_else_run(
            lambda: state.widths(*asked_widths, compute=False),
            lambda progress: state.widths(*asked_widths, progress=progress),
            running="Training and aligning the narrow models …",
            done="Width barriers ready",
            failed="Width barriers failed",
            what="Different widths",
            key="widths",
            inputs=asked_widths,
            cost=width_costs,
            basis=f"at the time seed {b_seed} took to train at full width, on the machine that "
            "trained it (a narrower model takes at most about as long)",
            unknown="it trains a narrow model with the zoo recipe",
        )
        if widths is not None:
            show_warnings("Different widths", widths)
            figure(
                figure_widths(widths, split=split, presentation=presentation()),
                f"widths-{name}-{a_seed}-{b_seed}-{split}",
                title="the barrier against B's width",
                key="widths",
                data=tidy_records(
                    WIDTHS.read(widths, "rows"), model=name, seed_a=a_seed, seed_b=b_seed,
                    split=split,
                ),  # fmt: skip
                settings={
                    "model": name,
                    "methods": [
                        matching_key(m, WIDTHS.read(widths, "group"))
                        for m in WIDTHS.read(widths, "methods")
                    ],
                    "seeds": [a_seed, b_seed],
                    "factors": sorted(factors),
                    "split": split,
                },  # fmt: skip
            )
