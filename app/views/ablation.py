"""Llama ablation: which single change between the dropout GPT and the Llama entry holds the
barrier that learned rotations leave. Read from the shipped result (or the disk cache); the
ablation itself is computed by ``landscape ablation`` (hours: its entries train first)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation
from app.components.tables import results_table
from app.components.text import plain
from app.memory import remember
from landscape.plots.ablation import (
    figure_ablation,
    figure_ablation_curves,
    row_label,
    step_cell,
)
from landscape.plots.fields import ABLATION, ABLATION_CELL, ABLATION_MISSING, ABLATION_STEP
from landscape.plots.tidy import tidy_ablation

R, E, C = ABLATION.read, ABLATION_STEP.read, ABLATION_CELL.read  # the result's declared fields

page_header(
    "Llama ablation",
    "Learned rotations remove the barrier between two seeds of the dropout GPT and leave about "
    "half a nat between two seeds of the Llama entry. **The two differ in seven ways at once** "
    "(dropout, rotary positions, grouped-query attention, 8 heads of 16, SwiGLU, no biases, and "
    "the learning rate and steps of the recipe), so that comparison alone cannot say why. Each "
    "row below is a model that changes **one** of them from the dropout GPT (up to three seeds "
    "each, every pair measured): the row where the barrier jumps names the change that holds it. "
    "The rows after the whole layout go back: the Llama layout with **one** change undone.",
)

result = state.ablation()
if result is None:
    st.info(
        "The ablation is not stored here: it ships with the app, or `landscape ablation` "
        "computes it (its entries are not shipped, so they train first: on one CPU thread "
        "about 16 minutes a seed for a GPT entry, 47 for the Llama layout; then the barriers, "
        "5 to 10 minutes a pair and merge space). docs/llama-ablation.md has what is measured "
        "so far.",
        icon=":material/hourglass_empty:",
    )
    st.stop()

METHODS = [(m, g, "calibrated" in flags) for m, g, *flags in R(result, "methods")]
with controls():
    c1, c2 = st.columns(2)
    keys = [row_label(*row) for row in METHODS]
    remember("abl_method", keys[-1], param="method", options=keys, label="alignment")
    chosen = c1.segmented_control(
        "Alignment", keys, key="abl_method",
        help="The barrier after this alignment of B to A, per entry. learned/orth is the "
        "paper's claim: learned rotations of the residual stream. 'naive, calibrated' aligns "
        "nothing but fits every merged model's softmax temperature on training data: what "
        "calibration alone removes.",
    )  # fmt: skip
    names = [E(s, "label") for s in R(result, "steps")]
    remember("abl_curves", None, param="curves", options=[None, *names], label="curves")
    pick = c2.selectbox(
        "Curves of", names, key="abl_curves", index=None, placeholder="an entry (its curves)",
        help="The loss and accuracy along the line for every pair of one entry, every alignment "
        "and merge space.",
    )  # fmt: skip
method, group, calibrated = METHODS[keys.index(chosen or keys[-1])]
split = R(result, "split")


def _pairs(step: dict) -> str:
    return ", ".join(f"{a}–{b}" for a, b in E(step, "pairs"))


show_warnings("The ablation", result)
figure(
    figure_ablation(result, method=method, group=group, calibrated=calibrated,
                    presentation=presentation()),
    f"ablation-{method}-{group}{'-calibrated' * calibrated}",
    title="the barrier each change leaves" + (", calibrated" if calibrated else ""),
    key="ablation",
    data=tidy_ablation(result),
    settings={"entries": [E(s, "model") for s in R(result, "steps")], "method": method,
              "group": group, "calibrated": calibrated,
              "pairs": {E(s, "model"): _pairs(s) for s in R(result, "steps")}, "split": split,
              "points": R(result, "points")},
)  # fmt: skip
st.caption(
    "Each row: one zoo entry, every pair of its seeds (listed in the table); small dots are "
    "pairs, the diamond their mean ± standard error, filled in the weights space and open in "
    "the circuits space "
    "(every head as its QK and OV circuits). The dotted line is 0.05 nats. Right: each seed's "
    f"{split} loss, the mean as a bar: dropout costs fit."
)
# below the figure, so that at a projector's 720 px the figure starts on the first screen
if R(result, "missing"):
    st.caption(
        "Not measured yet (they train first, see docs/llama-ablation.md): "
        + ", ".join(ABLATION_MISSING.read(m, "label") for m in R(result, "missing")) + "."
    )

rows = []
for s in R(result, "steps"):
    row = {"entry": E(s, "label"), "model": E(s, "model"), "pairs": _pairs(s),
           f"{split} loss (nats)": E(s, "test_loss")}
    for m, g, cal in METHODS:
        for space in ("weights", "circuits"):
            c = step_cell(s, m, g, space, cal)
            if c is not None:
                row[f"{row_label(m, g, cal)}, {space} (nats)"] = C(c, "barrier_loss")
    rows.append(row)
if not presentation():
    results_table(pd.DataFrame(rows))
    with st.expander("What each entry changes"):
        for s in R(result, "steps"):
            st.markdown(f"- **{plain(E(s, 'label'))}** (`{E(s, 'model')}`): "
                        f"{plain(E(s, 'change'))}")

if pick is not None:
    step = next(s for s in R(result, "steps") if E(s, "label") == pick)
    model = E(step, "model")
    st.subheader(f"{pick}: the line between each pair")
    figure(figure_ablation_curves(result, model), f"ablation-curves-{model}",
           title=f"{pick}: the line between each pair", key="ablation_curves",
           settings={"model": model, "pairs": _pairs(step), "split": split})  # fmt: skip
