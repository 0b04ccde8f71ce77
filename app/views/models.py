"""Models: the zoo, what is trained and cached; train more seeds; import checkpoints; cache."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components import controls, device, figure, model, page_header, presentation, show_error
from landscape.plots import figure_zoo_overview

page_header(
    "Models",
    "The zoo: every model family and the seeds that are trained and ready to compare (shipped "
    "with the app or trained into the disk cache).",
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
    column_config={
        "test accuracy (mean)": st.column_config.NumberColumn(format="%.3f"),
        "test loss (mean)": st.column_config.NumberColumn(format="%.3f"),
    },
)

trained = [r for r in rows if r["seeds"]]
if trained:
    st.subheader("Test accuracy of every trained seed")
    figure(figure_zoo_overview(trained, presentation=presentation()), "zoo-accuracy", key="zoo")

name = model()
current = next(r for r in rows if r["name"] == name)
with st.expander(f"Seeds of {name}", expanded=not presentation()):
    if current["seeds"]:
        st.dataframe(pd.DataFrame(current["seeds"]), hide_index=True)
    else:
        st.info(f"No trained seeds of {name} yet: train some below.")

st.subheader("Train more seeds")
with controls():
    have = {s["seed"] for s in current["seeds"]}
    first_free = next(s for s in range(10_000) if s not in have)
    c1, c2, c3 = st.columns([2, 2, 1])
    start = c1.number_input("First seed", 0, 9_999, first_free, key="train_first")
    count = c2.number_input("How many", 1, 32, 1, key="train_count")
    go = c3.button(f"Train {name}", type="primary", key="train_go")
if go:
    from landscape.train import train

    todo = [int(start) + i for i in range(int(count))]
    bar = st.progress(0.0, text=f"Training {name} …")
    for n, seed in enumerate(todo):

        def report(
            step: int, total: int, metrics: dict[str, float], n: int = n, seed: int = seed
        ) -> None:
            bar.progress(
                (n + step / total) / len(todo),
                text=f"seed {seed}: step {step}/{total}, test accuracy "
                f"{metrics['test_accuracy']:.3f}",
            )

        try:
            ckpt, hit = train(name, seed, device=device(), progress=report)
            st.success(
                f"{name} seed {seed}: test accuracy "
                f"{ckpt.meta['metrics']['test_accuracy']:.3f}"
                + (" (already cached)" if hit else "")
            )
        except Exception as err:
            show_error(f"Training {name} seed {seed}", err)
    bar.progress(1.0, text="Done")
    state.clear_memory_caches()

st.subheader("Import a checkpoint directory")
st.caption(
    "A directory with `config.json` and `model.safetensors` in the landscape format "
    "(as written by `save_checkpoint_dir`). Nothing is unpickled."
)
with st.form("import", border=True):
    path = st.text_input("Directory", key="import_path", placeholder="/path/to/checkpoint")
    submitted = st.form_submit_button("Import")
if submitted and path:
    from landscape.models import count_params
    from landscape.zoo import ZOO, load_checkpoint_dir

    try:
        ckpt = load_checkpoint_dir(path.strip())
        family = next((m.name for m in ZOO.values() if m.config == ckpt.cfg), None)
        st.success(
            f"Loaded **{ckpt.name}** from `{path}`: {count_params(ckpt.cfg):,} parameters"
            + (
                f", same architecture as **{family}**"
                if family
                else ", an architecture not in the zoo"
            )
        )
        st.json(
            {"config": ckpt.cfg.to_dict(), "metrics": ckpt.meta.get("metrics", {})}, expanded=False
        )
        imported = st.session_state.setdefault("imported", {})
        imported[str(path)] = {"name": ckpt.name, "family": family}
    except Exception as err:
        show_error(f"Importing {path}", err)
if st.session_state.get("imported"):
    st.caption(
        "Imported this session: "
        + ", ".join(
            f"`{p}` ({v['family'] or 'no zoo family'})"
            for p, v in st.session_state.imported.items()
        )
        + ". Use them from the CLI: `landscape barrier <dir> …`."
    )

st.subheader("Disk cache")
info = state.cache_info()
c1, c2, c3 = st.columns([1, 1, 2])
c1.metric("Entries", info["entries"])
c2.metric("Size", f"{info['bytes'] / 2**20:.1f} MB")
c3.caption(f"`{info['root']}`  \nShared by the app and the CLI; every result is computed once.")
with st.popover("Clear the cache"):
    st.warning("Deletes every cached result and trained checkpoint (shipped ones stay).")
    if st.button("Delete everything", type="primary", key="cache_clear"):
        from landscape.cache import Cache

        removed = Cache().clear()
        state.clear_memory_caches()
        st.success(f"Removed {removed} entries.")
