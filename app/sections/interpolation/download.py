"""The aligned model's download: B aligned to A, or a merge on the line, in B's own format,
prepared on a click."""

from __future__ import annotations

import streamlit as st

from app import state
from app.components.choices import device
from app.components.failures import show_warnings
from app.components.long_runs import run_in_status
from app.components.text import plain
from app.memory import remember
from app.sections.interpolation.asked import Asked
from landscape.matching import aligns
from landscape.page_defaults import method_group


def written(result: dict) -> str:
    """What the prepared download holds, and the checks of the written files."""
    what = "aligned B" if result["merge"] is None else f"the merge at λ = {result['merge']:g}"
    text = (f"{plain(result['path'])}.zip: {what} in the {plain(result['format'])} format; "
            f"read back, its logits differ by {result['function_check']:.1e} from what it "
            "should compute")  # fmt: skip
    if result["merge"] is not None:
        text += (f"; its {result['split']} loss {result['loss']:.4f} (the curve: "
                 f"{result['curve_loss']:.4f})")  # fmt: skip
    return text + "."


def aligned_download(asked: Asked) -> None:
    """B aligned to A by one of the chosen methods (or the model at λ on the line between A
    and the aligned B), written and checked on a click, then offered as a zip; the prepared
    bytes are kept in the session until other choices ask for another model."""
    name, pairs, chosen, split = asked.name, asked.pairs, asked.chosen, asked.split
    st.subheader("Download the aligned model")
    st.caption(
        "B aligned to A, or the model at λ on the straight line between A and the aligned B "
        "(in the weights), in B's own format: a Hugging Face directory for a model imported "
        "from one, else the landscape format (config.json + model.safetensors). A zip of "
        "what `landscape align MODEL --seeds A B --method M --group G --out DIR [--merge λ]` "
        "writes, prepared when asked."
    )
    aligned = [c for c in chosen if aligns(method_group(c)[0])]
    if not aligned:
        st.info("Choose a matching method above to download B aligned by it.")
    else:
        d1, d2, d3 = st.columns([2, 2, 3])
        remember(f"download_pair_{name}", pairs[0], param="dl_pair", options=pairs,
                 label="download pair")  # fmt: skip
        pair = d1.selectbox(
            "Pair (A, B)",
            pairs,
            format_func=asked.pair_label,
            key=f"download_pair_{name}",
        )
        remember("download_combo", aligned[0], param="dl_method", options=aligned,
                 label="download method")  # fmt: skip
        combo = d2.selectbox("Method / group", aligned, key="download_combo")
        remember("download_kind", "aligned B", param="dl_model", options=("aligned B", "merge"))
        kind = d3.radio("Model", ["aligned B", "merge"], horizontal=True, key="download_kind")
        merges = [round(0.05 * i, 2) for i in range(21)]
        if isinstance(st.session_state.get("download_lambda"), float):  # 0.35000000000000003
            st.session_state["download_lambda"] = round(st.session_state["download_lambda"], 2)
        remember("download_lambda", 0.5, param="dl_lam", options=merges)
        merge = (
            d3.slider("λ of the merge (1 is A)", 0.0, 1.0, step=0.05, key="download_lambda")
            if kind == "merge"
            else None
        )
        method, group = method_group(combo)
        wanted = (name, pair, method, group, merge, split, device())
        ready = st.session_state.get("download_ready")
        if ready is not None and ready["wanted"] != wanted:  # another model's bytes: let go
            del st.session_state["download_ready"]
            ready = None
        slot = st.empty()  # the button, until the download it prepares is there
        if ready is None and slot.button("Prepare the download", key="download_prepare"):
            made = run_in_status(
                lambda progress: state.aligned_archive(
                    name,
                    pair,
                    method,
                    group,
                    merge=merge,
                    split=split,
                    device=device(),
                    progress=progress,
                ),
                running="Aligning, writing and checking the checkpoint …",
                done="The download is ready",
                failed="Writing the checkpoint failed",
                what="The aligned model",
            )
            if made is not None:
                ready = {"wanted": wanted, "bytes": made[0], "result": made[1]}
                st.session_state["download_ready"] = ready
                slot.empty()
        if ready is not None:
            result = ready["result"]
            st.download_button(
                "Download the zip",
                data=ready["bytes"],
                file_name=f"{result['path']}.zip",
                mime="application/zip",
                key="download_aligned",
                on_click="ignore",
            )
            st.caption(written(result))
            show_warnings("The written model", result)
