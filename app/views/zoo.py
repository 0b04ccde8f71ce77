"""Zoo: what the app is for, and the models it can compare right now."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from landscape.plots import figure_zoo_overview

st.title("Landscape")
st.markdown(
    "Do two independently trained networks live in **one basin**? Landscape trains small model "
    "zoos, aligns checkpoints under the weight-space symmetries of transformers (permutations of "
    "neurons and heads, signed permutations and rotations of the residual stream) and measures "
    "the loss and accuracy barriers along the straight line between them. This page lists the "
    "zoo: every model family, and the seeds that are trained and ready to compare."
)

rows = state.zoo_status()
table = pd.DataFrame(
    [
        {
            "model": r["name"],
            "data": r["dataset"],
            "architecture": r["architecture"],
            "parameters": r["parameters"],
            "seeds": ", ".join(str(s["seed"]) for s in r["seeds"]) or "none yet",
            "test accuracy (mean)": (
                sum(s["test_accuracy"] for s in r["seeds"]) / len(r["seeds"])
                if r["seeds"]
                else None
            ),
            "test loss (mean)": (
                sum(s["test_loss"] for s in r["seeds"]) / len(r["seeds"]) if r["seeds"] else None
            ),
        }
        for r in rows
    ]
)
st.dataframe(
    table,
    hide_index=True,
    use_container_width=True,
    column_config={
        "test accuracy (mean)": st.column_config.NumberColumn(format="%.3f"),
        "test loss (mean)": st.column_config.NumberColumn(format="%.3f"),
    },
)

trained = [r for r in rows if r["seeds"]]
if trained:
    st.subheader("Test accuracy of every trained seed")
    st.plotly_chart(
        figure_zoo_overview(trained, presentation=st.session_state.get("presentation", False)),
        use_container_width=True,
    )

model = st.session_state.get("model", rows[0]["name"])
current = next(r for r in rows if r["name"] == model)
with st.expander(f"Seeds of {model}", expanded=not st.session_state.get("presentation", False)):
    if current["seeds"]:
        st.dataframe(pd.DataFrame(current["seeds"]), hide_index=True, use_container_width=True)
    else:
        st.info(f"No trained seeds of {model} yet: run `landscape train {model} --seed 0`.")
