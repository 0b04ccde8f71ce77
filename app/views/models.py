"""Models: the zoo and imported families; train more seeds; import checkpoints; the cache."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device, model
from app.components.failures import show_error
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation
from app.components.long_runs import LongRun
from app.components.tables import styled_table
from app.components.text import literal, plain
from app.memory import remember
from landscape.errors import FieldError
from landscape.plots.models import figure_zoo_overview
from landscape.plots.theme import points
from landscape.plots.tidy import tidy_zoo

page_header(
    "Models",
    "Every model family and the checkpoints ready to compare: zoo seeds (shipped with the app "
    "or trained into the disk cache) and imported families of your own checkpoints.",
)

rows = state.zoo_status()
trained = [r for r in rows if r["seeds"] and not r["imported"]]
overview = st.container()  # the figure: first on a projector, after the table on a screen


def _mean(seeds: list[dict], key: str, unit: float = 1.0) -> float | None:
    vals = [s[key] for s in seeds if s.get(key) is not None]
    return unit * sum(vals) / len(vals) if vals else None


def _seed_list(seeds: list[int]) -> str:
    """``0–11`` for a run of seeds, ``0, 2, 5`` otherwise: short enough for its column."""
    if not seeds:
        return "none yet"
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


table = pd.DataFrame(
    [
        {
            "model": r["name"],
            "kind": "imported" if r["imported"] else "zoo",
            "data": r["dataset"],
            "parameters": r["parameters"],
            "seeds": _seed_list([s["seed"] for s in r["seeds"]]),
            "test acc. (%)": _mean(r["seeds"], "test_accuracy", points(1.0)),
            "test loss": _mean(r["seeds"], "test_loss"),
            "architecture": r["architecture"],
        }
        for r in rows
    ]
)
# A static table: its cells wrap, so every model name and architecture is read whole and every
# column stays on screen, on a laptop and on a projector (a data grid cuts a cell to one line).
st.table(
    table.style.format(
        {"parameters": "{:,}", "test acc. (%)": "{:.1f}", "test loss": "{:.3f}"}, na_rep="—"
    ).hide(axis="index")
)
st.caption("test acc. (%) and test loss (nats): means over the trained seeds (zoo models).")

if trained:
    with overview if presentation() else st.container():
        heading = "Test accuracy of every trained seed"
        if not presentation():  # on a projector the figure draws it, and fits the first screen
            st.subheader(heading)
        figure(figure_zoo_overview(trained, title=heading if presentation() else None,
                                   presentation=presentation()), "zoo-accuracy",
               title="test accuracy of every trained seed", key="zoo",
               data=tidy_zoo(trained))  # fmt: skip
        st.caption("Accuracy per prediction: per image for the vision models, per next "
                   "character (or token) for the text models.")

name = model()
current = next(r for r in rows if r["name"] == name)
if current["imported"]:
    with st.expander(f"Members of {plain(name)}", expanded=not presentation()):
        try:
            with st.spinner("Evaluating the members on the family's test data …"):
                members = state.family_metrics(name)
            st.dataframe(pd.DataFrame(members), hide_index=True, width="stretch")
        except Exception as err:
            show_error(f"Reading the members of {name}", err)
    st.caption(
        "An imported family's members are its checkpoints; to add more, import a new family."
    )
    with st.expander(f"Symmetry audit of {plain(name)}, member 0 (measured)"):
        st.caption(
            "Every group level gets a random element, applied to this checkpoint's weights, and "
            "the largest logit change is measured in float64: a valid gauge moves the logits "
            "by rounding only, an invalid one by order 1, and the table says what blocks it. "
            "Loads the model twice in float64 (16 bytes a parameter); kept on the Gauge page too."
        )
        if st.button("Measure the symmetry table", key=f"audit_{name}",
                     icon=":material/play_arrow:"):  # fmt: skip
            try:
                with st.spinner("Applying a random element of every group …"):
                    audit = state.symmetry_audit(name, 0)
                st.table(styled_table(audit))
            except Exception as err:
                show_error(f"Measuring the symmetries of {name}", err)
else:
    with st.expander(f"Seeds of {plain(name)}", expanded=not presentation()):
        if current["seeds"]:
            seeds_frame = pd.DataFrame(current["seeds"])
            if presentation():  # a static table fits a projector's width
                st.table(seeds_frame.style.hide(axis="index"))
            else:
                st.dataframe(seeds_frame, hide_index=True)
        else:
            st.info(f"No trained seeds of {plain(name)} yet: train some below.")

    st.subheader("Train more seeds")
    with controls():
        have = {s["seed"] for s in current["seeds"]}
        first_free = next(s for s in range(10_000) if s not in have)
        c1, c2, c3 = st.columns([2, 2, 1])
        start = c1.number_input("First seed", 0, 9_999, first_free, key="train_first")
        remember("train_count", 1, param=None, options=range(1, 33))
        count = c2.number_input("How many", 1, 32, key="train_count")
        go = c3.button(f"Train {plain(name)}", type="primary", key="train_go")
    if go:
        todo = [int(start) + i for i in range(int(count))]
        bar = LongRun(f"Training {name} …", key="train")  # Cancel stops after the next step
        for n, seed in enumerate(todo):

            def report(
                stage: str, step: float, total: float, n: int = n, seed: int = seed
            ) -> None:  # the stage is the test metrics at this step
                bar(f"seed {seed}: step {step:.0f}/{total:.0f}, {stage}",
                    n + step / total, len(todo))  # fmt: skip

            try:
                ckpt, hit = state.train_seed(name, seed, device(), progress=report)
                st.success(
                    f"{plain(name)} seed {seed}: test accuracy "
                    f"{ckpt.meta['metrics']['test_accuracy']:.1%}"
                    + (" (already cached)" if hit else "")
                )
            except Exception as err:
                show_error(f"Training {name} seed {seed}", err)
        bar.close()
        state.clear_memory_caches()

st.subheader("Import checkpoints as a family")
st.caption(
    "Checkpoints on this machine, all of one architecture: Hugging Face directories "
    "(`config.json` + safetensors: GPT-2, Llama family, ViT), `.gguf` files, or landscape "
    "directories. Members are numbered in the order given and appear as seeds on every page; "
    "the family is listed under *Model family* in the sidebar. Nothing is unpickled."
)
if "import_done" in st.session_state:
    st.success(st.session_state.pop("import_done"))
with st.form("import", border=True):
    c1, c2 = st.columns([1, 2])
    for key, default in (("import_name", ""), ("import_paths", ""), ("import_text", "")):
        remember(key, default, param=None, options=None)  # typed paths outlive a page switch
    family_name = c1.text_input("Family name", key="import_name", placeholder="my-finetunes")
    paths = c2.text_area(
        "Checkpoints, one path per line", key="import_paths", placeholder="/path/to/ft-a",
        height=90,
    )  # fmt: skip
    c1, c2 = st.columns([2, 1])
    text_file = c1.text_input(
        "Text file (language models)",
        key="import_text",
        placeholder="/path/to/corpus.txt",
        help="Windows of this UTF-8 file, encoded with the first checkpoint's tokenizer.json "
        "when present; the last 10% is the test split.",
    )
    image_data = c2.selectbox(
        "Image data (classifiers)", ["digits", "fashion"], key="import_data",
        help="Used when no text file is given.",
    )  # fmt: skip
    c1, c2, c3 = st.columns(3)
    n_ctx = c1.number_input("Tokens per window", 8, 4096, 128, key="import_n_ctx")
    max_windows = c2.number_input("Windows per split", 2, 4096, 64, key="import_windows")
    lr = c3.number_input(
        "Fine-tuning learning rate", 1e-6, 1.0, 1e-4, format="%.0e", key="import_lr",
        help="For the gauge page's drift, LoRA and AdamW steps.",
    )  # fmt: skip
    submitted = st.form_submit_button("Import")
# The form's own words for the library's arguments (a FieldError names a command-line flag)
FIELDS = {"paths": "Checkpoints, one path per line", "text": "Text file (language models)"}
if submitted:
    lines = [p.strip() for p in paths.splitlines() if p.strip()]
    try:
        if not family_name.strip() or not lines:
            raise ValueError("give a family name and at least one checkpoint path")
        with st.spinner(f"Checking {len(lines)} checkpoint(s) …"):
            fam = state.import_family(
                family_name.strip(),
                lines,
                text=text_file.strip() or None,
                data=None if text_file.strip() else image_data,
                n_ctx=int(n_ctx),
                max_windows=int(max_windows),
                lr=float(lr),
            )
        state.clear_memory_caches()
        st.session_state["import_done"] = (
            f"Imported **{plain(fam.name)}**: {len(fam.members)} checkpoint(s), "
            f"{plain(fam.architecture)}, {fam.parameters:,} parameters, evaluated on "
            f"{plain(fam.dataset)} ({plain(state.family_data_note(fam.name))}). Choose it under "
            "*Model family* in the sidebar."
        )
        st.rerun()
    except FieldError as err:
        show_error(f"Importing {family_name or 'the family'}",
                   f"{err.plain} (“{FIELDS.get(err.field, err.field)}”)")  # fmt: skip
    except Exception as err:
        show_error(f"Importing {family_name or 'the family'}", err)

imported = [r for r in rows if r["imported"]]
for problem in state.family_problems():
    st.warning(f"Skipped in the families directory: {plain(problem)}")
if imported:
    st.markdown("**Imported families**")
    for r in imported:
        c1, c2 = st.columns([5, 1])
        c1.markdown(
            f"{literal(r['name'])} — {len(r['seeds'])} member(s), {plain(r['architecture'])}, "
            f"data: {plain(r['dataset'])}"
        )
        if c2.button("Remove", key=f"remove_{r['name']}", help="Forget the family; files stay"):
            state.remove_family(r["name"])
            state.clear_memory_caches()
            st.rerun()

st.subheader("Disk cache")
info = state.cache_info()
c1, c2, c3 = st.columns([1, 1, 2])
c1.metric("Entries", info["entries"])
c2.metric("Size", f"{info['bytes'] / 2**20:.1f} MB")
c3.caption(f"{literal(info['root'])}  \nShared by the app and the CLI; every result is computed "
           "once.")  # fmt: skip
with st.popover("Clear the cache"):
    st.warning("Deletes every cached result and trained checkpoint (shipped ones stay).")
    if st.button("Delete everything", type="primary", key="cache_clear"):
        removed = state.clear_disk_cache()
        state.clear_memory_caches()
        st.success(f"Removed {removed} entries.")
