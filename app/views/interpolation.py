"""Interpolation curves: loss and accuracy along λ for several pairs, methods and groups."""

from __future__ import annotations

import itertools
import statistics

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import (
    device,
    has_circuits,
    has_heads,
    is_imported,
    model,
    pick_many,
    seed_format,
)
from app.components.failures import show_error, show_warnings
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation
from app.components.long_runs import (
    UNKNOWN,
    LongRun,
    ask_first,
    duration,
    left_out,
    read_else_run,
    run_in_status,
)
from app.components.needs import need_data, need_seeds
from app.components.tables import on_screen, results_table
from app.components.text import plain
from app.memory import remember
from landscape import page_defaults as page
from landscape.experiments import PAPER_REFERENCE
from landscape.experiments.barriers.curved import KINDS as CURVE_KINDS
from landscape.experiments.barriers.curved import STEPS as CURVE_STEPS
from landscape.experiments.merging.mergekit import MERGE_METHODS
from landscape.experiments.merging.operators import DENSITY as MERGE_DENSITY
from landscape.experiments.merging.operators import OPERATORS as MERGE_OPERATORS
from landscape.experiments.merging.operators import POINTS as MERGE_POINTS
from landscape.matching import method_of, worst_check
from landscape.models.zoo import ZOO
from landscape.names import BARRIER_GROUPS, METHODS
from landscape.numbers import mean_pm
from landscape.page_defaults import method_group
from landscape.plots.curves import KIND_WORDS, figure_curve, figure_spawn
from landscape.plots.fields import BARRIER
from landscape.plots.interpolation import (
    ABOVE_NAIVE_MARGIN,
    ABOVE_NAIVE_SHARE,
    above_naive,
    figure_interpolation,
    figure_merges,
    figure_widths,
)
from landscape.plots.matrix import figure_barrier_matrix
from landscape.plots.theme import method_key
from landscape.plots.theme import points as in_points
from landscape.plots.tidy import tidy_curve, tidy_interpolation, tidy_matrix, tidy_records
from landscape.progress import within


def _mean_sem(value: tuple[float, float], n: int, places: int) -> str:
    """Mean ± s.e.m. over pairs; with one pair there is no spread to show, so it says n = 1,
    the mean to ``places`` decimals (loss 4, accuracy points 2: one notation down a column)."""
    return mean_pm(*value) if n > 1 else f"{value[0]:.{places}f} (n = 1)"


# the table's columns as the page formats them; a projector shows the table without the details
TABLE_COLUMNS = {
    "method": st.column_config.TextColumn(width="small"),
    "max |Δlogits|": st.column_config.NumberColumn(format="%.1e"),
    "pairs": st.column_config.NumberColumn(width="small"),
}
DETAIL_COLUMNS = ["pairs", "max |Δlogits|"]


def _static(frame: pd.DataFrame):  # -> pandas Styler
    """The barrier table as a static table (cells wrap): the check in scientific notation."""
    return frame.style.format({"max |Δlogits|": "{:.1e}"}, na_rep="—",
                              subset=[c for c in ["max |Δlogits|"] if c in frame]
                              ).hide(axis="index")  # fmt: skip


def _differs_or_says(column: pd.Series, name: str) -> bool:
    """Whether a column is worth its width: the space when the rows differ in it, the paper's
    numbers when any row has one."""
    if name == "space":
        return column.nunique() > 1
    return bool((column != "").any())


def versus_naive(series: dict, above: dict | None) -> str:
    """A row's word against naive on the same pairs (``above``: its record of
    ``above_naive``, None when neither barrier is clearly above naive's)."""
    if series["method"] == "naive":
        return "—"
    if above is None:
        return "not above naive"
    return "above naive in " + " and ".join(above["metrics"])


def _beside_accuracy(row: dict, key: str, value: str) -> dict:
    """``row`` with ``key: value`` right after the accuracy barrier, where it is read."""
    keys = list(row)
    at = keys.index("accuracy barrier (points)") + 1
    return {**{k: row[k] for k in keys[:at]}, key: value, **{k: row[k] for k in keys[at:]}}


def _report_rows(table: pd.DataFrame) -> list[dict]:
    """The barrier table for the export report: every column, NaN as None, the function check
    in the page's scientific notation (1.3e-05, where the report's numbers have four digits)."""

    def cell(k: str, v: object) -> object:
        if isinstance(v, float) and v != v:
            return None
        return f"{v:.1e}" if k == "max |Δlogits|" and isinstance(v, float) else v

    return [{k: cell(k, v) for k, v in r.items()} for r in table.to_dict("records")]


def _written(result: dict) -> str:
    """What the prepared download holds, and the checks of the written files."""
    what = "aligned B" if result["merge"] is None else f"the merge at λ = {result['merge']:g}"
    text = (f"{plain(result['path'])}.zip: {what} in the {plain(result['format'])} format; "
            f"read back, its logits differ by {result['function_check']:.1e} from what it "
            "should compute")  # fmt: skip
    if result["merge"] is not None:
        text += (f"; its {result['split']} loss {result['loss']:.4f} (the curve: "
                 f"{result['curve_loss']:.4f})")  # fmt: skip
    return text + "."


page_header(
    "Interpolation curves",
    "Loss and accuracy of θ(λ) = λ·θ_A + (1−λ)·π(θ_B), with π found by the chosen matching "
    "method under the chosen symmetry group. λ = 1 is A, λ = 0 is the aligned B (the "
    "endpoints are marked in each curve's own marker). Lines are means over the selected "
    "pairs; bands span their range. For transformers the line can be straight in the weights "
    "(the model's own factors W_Q, W_K, …) or in the circuits (every head rewritten as its "
    "products QKᵀ and VO, which average differently): two paths between the same two "
    "functions.",
)

name = model()
arch = state.model_arch(name)
seeds = need_seeds(name, 2)
need_data(name)
all_pairs = list(itertools.combinations(seeds, 2))
seed_label = seed_format(name)
default_pairs = [p for p in state.pairs_for(name, 1, seeds) if p in all_pairs] or all_pairs[:1]
# a method that aligns comes under every group; naive, which does not, once
combos = ["naive"] + [method_key(m, g) for m in METHODS if method_of(m).aligns
                      for g in BARRIER_GROUPS]  # fmt: skip

with controls():
    c1, c2, c3 = st.columns([2, 3, 2])
    remember(f"interp_pairs_{name}", default_pairs, param="pairs", options=all_pairs, many=True)
    pairs = pick_many(
        c1,
        "Seed pairs (A, B)",
        all_pairs,
        format_func=lambda p: f"{seed_label(p[0])} ↔ {seed_label(p[1])}",
        key=f"interp_pairs_{name}",
        wrap=True,
        help="Each pair is aligned and interpolated; curves are averaged.",
    )
    remember("interp_combos", list(page.METHODS), param="methods",
             options=combos, many=True)  # fmt: skip
    chosen = pick_many(
        c2,
        "Method / group",
        combos,
        key="interp_combos",
        wrap=True,
        help="Learned matching trains a transform: slow the first time, then read from the cache.",
    )
    remember("interp_split", page.SPLIT, param="split", options=("test", "train"))
    split = c3.radio("Data split", ["test", "train"], horizontal=True, key="interp_split")
    remember("interp_points", page.INTERPOLATION_POINTS, param="points", options=range(5, 52, 2))
    points = c3.slider("Points on λ", 5, 51, step=2, key="interp_points")
    spaces = ["weights"]
    if has_circuits(name):
        remember("interp_space", "weights", param="space", options=("weights", "circuits", "both"))
        choice = c3.radio(
            "Merge space",
            ["weights", "circuits", "both"],
            horizontal=True,
            key="interp_space",
            help="weights: the straight line between the parameters as stored. circuits: "
            "between the heads' QK and OV circuits (with rotary positions, at every offset). "
            "both: two curves per method in its colour, dash and marker: weights thick with "
            "filled markers, circuits thin and faded with open markers.",
        )
        spaces = ["weights", "circuits"] if choice == "both" else [choice]

if not pairs or not chosen:
    st.info("Choose at least one seed pair and one method.")
    st.stop()


def _table_notes(shown: pd.DataFrame) -> None:
    """What the barrier table's columns mean, and the paper's numbers beside circuits rows."""
    st.caption(
        "Mean ± standard error over pairs (Table-2 layout); the accuracy barrier in percentage "
        "points (a drop from 95% to 70% accuracy below the chord is 25 points). vs naive: "
        "whether the method's barrier lies above naive's on the same pairs (by more than "
        f"{ABOVE_NAIVE_MARGIN['loss']:g} nats or {in_points(ABOVE_NAIVE_MARGIN['accuracy']):g} "
        f"points, and {ABOVE_NAIVE_SHARE:.0%} of naive's barrier). max |Δlogits| "
        "checks that the aligned B computes the same function as B; in the circuits space a "
        "warning above names any circuit form that does not keep its model's function."
    )
    if "paper (circuits)" in shown:
        ref = PAPER_REFERENCE
        learned = ", ".join(f"{v} ({k})" for k, v in ref["learned/orth"].items())
        st.caption(
            f"paper (circuits): the paper's Table 2 (test-loss barriers in the circuits space, "
            f"independently trained ViTs and GPT-2), beside the circuits rows: naive "
            f"{ref['naive']}, weight matching {ref['weight']}, learned rotations {learned}."
        )


# the figure first, then the table (on a projector the figure starts on the first screen); the
# figure's place is filled at once: the figure of earlier choices does not stay on the page
# (faded) while these are computed
figure_slot = st.empty()
st.subheader(
    f"Barriers of {plain(name)} — {split} split" + (" (TRAIN data)" if split == "train" else "")
)
table_slot = st.empty()
figure_slot.info(
    f"The curves of {plain(name)} ({', '.join(chosen)}; {len(pairs)} pair(s), {split} split) "
    "appear here when they are measured.",
    icon=":material/hourglass_top:",
)
wanted = (name, tuple(pairs), tuple(chosen), points, split, tuple(spaces))


def _costs(combos: list[str], in_spaces: list[str], of_pairs: list[tuple[int, int]],
           quick: float | None = 0.0) -> list[tuple[str, float | None]]:  # fmt: skip
    """What is not stored yet, each with the seconds its method's stored curves of this model
    took to match; where none is stored, ``quick`` for a method that does not learn (0: it is
    computed at once) and None (unknown) for learned matching."""
    took: dict[tuple[str, str], list[float]] = {}
    todo = []
    for combo, space, pair in itertools.product(combos, in_spaces, of_pairs):
        method, group = method_group(combo)
        request = state.seeds_request(name, pair, method, group, points=points, split=split,
                                space=space)  # fmt: skip
        try:
            r = state.barrier(request, device(), compute=False)
            if r.get("matching_seconds") is not None:
                took.setdefault((combo, space), []).append(float(r["matching_seconds"]))
        except state.NotCached:
            todo.append((combo, space, pair, method_of(method).learned))
        except Exception:  # the loop below shows what fails
            continue
    label = (lambda c, s: c) if len(in_spaces) == 1 else (lambda c, s: f"{c} · {s}")
    return [(f"{label(c, s)} on seeds {p[0]} ↔ {p[1]}",
             statistics.median(took[c, s]) if (c, s) in took else (None if slow else quick))
            for c, s, p, slow in todo]  # fmt: skip


def _estimates() -> list[tuple[str, float | None]]:
    return _costs(chosen, spaces, pairs)


LEARNED_UNKNOWN = ("not run on this model yet: it trains a transform, seconds for a small model, "
                   "minutes for a transformer on a CPU")  # fmt: skip


# before a long run the page says what it costs and waits for a click; cancelled or waiting,
# what is stored is drawn, the rest is named (left_out), and the page goes on
ready = ask_first("interp", wanted, _estimates(),
                  "as long as the stored curves of the same method took to match",
                  LEARNED_UNKNOWN)  # fmt: skip
progress = LongRun("Aligning and interpolating …", key="interp", inputs=wanted) if ready else None
computing = progress is not None and not progress.cancelled
series, rows, missing = [], [], []
total, done = len(chosen) * len(pairs) * len(spaces), 0
for combo, space in itertools.product(chosen, spaces):
    method, group = method_group(combo)
    label = combo if len(spaces) == 1 else f"{combo} · {space}"
    results = []
    for pair in pairs:
        step = f"{label}: seeds {pair[0]} ↔ {pair[1]}"
        part = None
        if computing:
            progress(step, done, total)
            part = within(progress, done / total, (done + 1) / total, f"{step} · ")
        try:
            request = state.seeds_request(name, pair, method, group, points=points, split=split,
                                    space=space)  # fmt: skip
            results.append(state.barrier(request, device(), progress=part,
                                         compute=computing))  # fmt: skip
            if method_of(method).learned and not results[-1].get("cached"):  # measured here
                state.measured_learned(name, device(), results[-1].get("matching_seconds"))
            show_warnings(f"{label} on seeds {pair[0]} ↔ {pair[1]}", results[-1])
        except state.NotCached as err:  # not stored; a cancelled or waiting run computes nothing
            if computing:
                show_error(f"{label} on seeds {pair[0]} ↔ {pair[1]}", err)
            missing.append(f"{label} on seeds {pair[0]} ↔ {pair[1]}")
        except Exception as err:  # a failing method must not take the page down
            show_error(f"{label} on seeds {pair[0]} ↔ {pair[1]}", err)
        done += 1
    if not results:
        continue
    series.append({"label": label, "results": results, "space": space, "method": combo})
    loss = state.mean_sem([r["barrier_loss"] for r in results])
    acc = state.mean_sem([in_points(r["barrier_accuracy"]) for r in results])
    # the paper measured transformers in the circuits space: its numbers beside those rows only
    paper = (state.paper_value(method, group, arch)
             if space == "circuits" and has_heads(name) else "")  # fmt: skip
    rows.append(
        {
            "method": combo,
            "space": space,
            # the split is in the table's title
            "loss barrier (nats)": _mean_sem(loss, len(results), 4),
            "accuracy barrier (points)": _mean_sem(acc, len(results), 2),
            "pairs": len(results),
            "max |Δlogits|": worst_check(r["function_check"] for r in results),  # NaN stays NaN
            "paper (circuits)": paper,
        }
    )
    # Partial rows as a static table: a data grid whose row count changes between quick
    # updates can draw error cells in the browser; the final grid is drawn once below.
    table_slot.table(_static(pd.DataFrame(rows)))  # the check as the final table writes it
if progress is not None:
    progress.close()
above = {a["label"]: a for a in above_naive(series, split=split)}
if rows and any(s["method"] == "naive" for s in series):
    for i, (row, s) in enumerate(zip(rows, series, strict=True)):
        rows[i] = _beside_accuracy(row, "vs naive", versus_naive(s, above.get(s["label"])))
table = pd.DataFrame(rows)
with table_slot.container():  # the table and what is said of it, in the table's place
    if rows:
        same = [c for c in ("space", "paper (circuits)")
                if c in table and not _differs_or_says(table[c], c)]  # fmt: skip
        shown = table.drop(columns=same)
        if presentation():  # a static table, without its details, fits a projector's width
            st.table(_static(shown.drop(columns=DETAIL_COLUMNS)))
            with st.expander("Details: pairs, function check"):
                st.table(_static(shown))
        else:
            st.dataframe(shown, hide_index=True, column_config=TABLE_COLUMNS)
    for a in above.values():
        st.warning(a["note"], icon=":material/trending_up:")
    if rows:
        _table_notes(shown)
    left_out(missing, cancelled=ready)

if not series:
    figure_slot.empty()
else:
    with figure_slot.container():
        lambdas = BARRIER.read(series[0]["results"][0], "lambdas")
        mark = remember("interp_mark", lambdas[len(lambdas) // 2], param="lam", options=lambdas)
        fig = figure_interpolation(series, split=split, mark=mark, presentation=presentation())
        figure(
            fig,
            f"interpolation-{name}-{split}",
            title="loss and accuracy along the line",
            key="interp",
            data=tidy_interpolation(series),
            settings={
                "model": name,
                "pairs": [list(p) for p in pairs],
                "methods": [s["label"] for s in series],
                "merge space": " and ".join(spaces),
                "split": split,
                "points": points,
            },  # fmt: skip
            cache_keys=[r.get("cache_key", "") for s in series for r in s["results"]],
            tables={f"Barriers, {split} split (mean ± s.e.m.)": _report_rows(table)},
        )
        # under the figure (its value is read above, from the session): the figure comes first
        st.select_slider("Mark λ on the curves", lambdas, key="interp_mark",
                         format_func=lambda v: f"{v:.2f}")  # fmt: skip

if chosen:  # the methods chosen above, one of them for the matrix
    st.subheader("Every pair: the barrier matrix")
    st.caption(
        "The loss and accuracy barrier of every pair of the chosen seeds, each B aligned to the "
        "smaller seed A as in the curves above and read from the same cache. The diagonal is "
        "each model against itself: 0 by definition. One alignment per pair."
    )
    m1, m2, m3 = st.columns([3, 2, 1], vertical_alignment="bottom")
    remember(f"matrix_seeds_{name}", seeds[: min(len(seeds), 3)], param="mseeds",
             options=seeds, many=True)  # fmt: skip
    matrix_seeds = pick_many(m1, "Seeds", seeds, key=f"matrix_seeds_{name}",
                             format_func=seed_label)  # fmt: skip
    matrix_combo = m2.selectbox("Method / group", chosen, key="matrix_combo")
    matrix_space = (m2.radio("Merge space of the matrix", spaces, horizontal=True,
                             key="matrix_space") if len(spaces) > 1 else spaces[0])  # fmt: skip
    wanted = (name, tuple(sorted(matrix_seeds)), matrix_combo, matrix_space, split, points)
    kept = st.session_state.get("matrix_result")
    if len(matrix_seeds) >= 2 and (kept is None or kept["wanted"] != wanted):
        # what a click will cost: the pairs not stored, at the time the stored curves of the
        # method took to match here (unknown where none is stored)
        todo = _costs([matrix_combo], [matrix_space],
                      list(itertools.combinations(sorted(matrix_seeds), 2)), quick=None)
        known = [sec for _, sec in todo if sec is not None]
        if not todo:
            cost = "Every pair is stored: read at once."
        elif len(known) == len(todo):
            cost = (f"{len(todo)} pair(s) not stored: their matching about "
                    f"{duration(sum(known))} (as long as the stored curves of the same method "
                    "took to match), then one line evaluation each.")  # fmt: skip
        else:
            cost = (f"{len(todo)} pair(s) not stored: {UNKNOWN} (no curve of "
                    f"{matrix_combo} is stored for this model).")  # fmt: skip
        st.caption(cost)
    if m3.button("Measure", key="matrix_run", disabled=len(matrix_seeds) < 2,
                 icon=":material/grid_on:"):  # fmt: skip
        method, group = method_group(matrix_combo)
        made = run_in_status(
            lambda progress: state.barrier_matrix(
                name, sorted(matrix_seeds), method, group, points=points, split=split,
                space=matrix_space, device=device(), progress=progress,
            ),
            running=f"Aligning {len(matrix_seeds) * (len(matrix_seeds) - 1) // 2} pairs …",
            done="The barrier matrix is ready",
            failed="The barrier matrix failed",
            what="The barrier matrix",
        )  # fmt: skip
        if made is not None:
            st.session_state["matrix_result"] = {"wanted": wanted, "result": made}
    kept = st.session_state.get("matrix_result")
    if kept is not None and kept["wanted"] == wanted:
        matrix = kept["result"]
        show_warnings("The barrier matrix", matrix)
        figure(
            figure_barrier_matrix(matrix, presentation=presentation()),
            f"barrier-matrix-{name}-{split}",
            title="the barrier matrix of every pair",
            key="matrix",
            data=tidy_matrix(matrix),
            settings={
                "model": name,
                "seeds": matrix["seeds"],
                "method": matrix["method"],
                "group": matrix["group"],
                "space": matrix["space"],
                "split": split,
                "points": points,
            },  # fmt: skip
            cache_keys=[p["cache_key"] for p in matrix["pairs"]],
        )

if pairs:
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
            merge_pair = k1.selectbox(
                "Pair (A, B)", pairs, key=f"merges_pair_{name}",
                format_func=lambda p: f"{seed_label(p[0])} ↔ {seed_label(p[1])}",
            )  # fmt: skip
            aligned_combos = [c for c in chosen if c != "naive"] or ["naive"]
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
                asked = state.seeds_request(name, merge_pair, method, group, points=merge_points,
                                      split=split)  # fmt: skip
                wanted = (asked, ops, device())
                n_merges = (1 if method == "naive" else 2) * len(ops) * merge_points
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
                    state.measured("merge", name, device(),
                                   seconds=sum(al.get("merge_seconds", 0.0)
                                               for al in merged["alignments"]),
                                   units=sum(al.get("merges", 0)
                                             for al in merged["alignments"]))  # fmt: skip
                    for al in merged["alignments"]:
                        show_warnings(f"Merge operators, {al['method']}/{al['group']}", al)
                    figure(
                        figure_merges(merged),
                        f"merges-{name}-{merge_pair[0]}-{merge_pair[1]}-{split}",
                        title="merge operators along the line",
                        key="merges",
                        data=tidy_records(state.merge_rows(merged), model=name, split=split),
                        settings={"model": name, "seeds": list(merge_pair),
                                  "alignment": merge_combo, "operators": list(ops),
                                  "points": merge_points, "split": split,
                                  "density": merged["density"],
                                  "mergekit": merged["mergekit"]},
                    )  # fmt: skip
                    results_table(pd.DataFrame(on_screen(state.merge_rows(merged))))

if pairs:
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
        curve_pair = q1.selectbox(
            "Pair (A, B)", pairs, key=f"curve_pair_{name}",
            format_func=lambda p: f"{seed_label(p[0])} ↔ {seed_label(p[1])}",
        )  # fmt: skip
        curve_combos = [c for c in chosen if c != "naive"] or ["naive"]
        remember("curve_combo", curve_combos[0], param="cv_method", options=curve_combos,
                 label="curve method")  # fmt: skip
        curve_combo = q1.selectbox("Aligned by", curve_combos, key="curve_combo")
        remember("curve_kind", CURVE_KINDS[0], param="cv_kind", options=CURVE_KINDS)
        curve_kind = q2.radio("Curve", CURVE_KINDS, format_func=KIND_WORDS.get, key="curve_kind")
        step_options = sorted({100, 250, CURVE_STEPS, 1000, 2000})
        remember("curve_steps", CURVE_STEPS, param="cv_steps", options=step_options)
        curve_steps = q3.select_slider("Training steps", step_options, key="curve_steps")
        method, group = method_group(curve_combo)
        wanted = (name, curve_pair, method, group, curve_kind, curve_steps, points, split,
                  device())  # fmt: skip
        trainings = 1 if method == "naive" else 2  # naive's curve, and the aligned pair's
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
            state.measured("curve", name, device(),
                           seconds=sum(al["training_seconds"] for al in made["alignments"]),
                           units=made["steps"] * len(made["alignments"]))  # fmt: skip
            show_warnings("Curved path", made)
            curve_table = on_screen(state.curve_rows(made))
            figure(
                figure_curve(made, presentation=presentation()),
                f"curve-{name}-{curve_pair[0]}-{curve_pair[1]}-{curve_kind}-{split}",
                title="the curved path beside the line",
                key="curve",
                data=tidy_curve(made),
                settings={"model": name, "seeds": list(curve_pair), "alignment": curve_combo,
                          "curve": curve_kind, "bends": made["bends"], "steps": curve_steps,
                          "lr": made["lr"], "batch size": made["batch_size"],
                          "points": points, "split": split},
                cache_keys=[k for al in made["alignments"]
                            for k in (al["line_cache_key"], al["cache_key"])],
                tables={f"Barriers of the line and the curve, {split} split": curve_table},
            )  # fmt: skip
            results_table(pd.DataFrame(curve_table))

if name in ZOO and pairs:
    st.subheader("Spawned children")
    st.caption(
        "When do two runs enter one basin? The zoo run of seed A (the parent) is trained once "
        "with snapshots; from its snapshot at step k two children go on to the last step, each "
        "with its own data order. Their barrier along the straight line, naive (dashed) and "
        "aligned (solid), against k: spawned at the last step they are the parent, with "
        "barrier 0. Each child is trained once, then read from the cache."
    )
    remember("spawn_show", False, param="spawn", options=(False, True))
    if st.toggle("Spawned children", key="spawn_show"):
        run_steps = ZOO[name].train.steps
        every = state.snapshot_every(name)
        spawn_options = list(range(0, run_steps + 1, every))
        spawn_default = sorted({spawn_options[min(len(spawn_options) - 1, i)]
                                for i in (0, 1, 2, 5, 10, 25, len(spawn_options) - 1)})  # fmt: skip
        s1, s2 = st.columns([4, 2])
        remember(f"spawn_at_{name}", spawn_default, param="sp_at", options=spawn_options,
                 many=True)  # fmt: skip
        spawn_at = pick_many(s1, "Spawn steps k", spawn_options, key=f"spawn_at_{name}",
                             wrap=True)  # fmt: skip
        spawn_combos = [c for c in chosen if c != "naive"] or ["naive"]
        remember("spawn_combo", spawn_combos[0], param="sp_method", options=spawn_combos,
                 label="spawn method")  # fmt: skip
        spawn_combo = s2.selectbox("Aligned by", spawn_combos, key="spawn_combo")
        if spawn_at:
            method, group = method_group(spawn_combo)
            parent = pairs[0][0]
            wanted = (name, parent, tuple(sorted(spawn_at)), method, group, points, split,
                      device())  # fmt: skip
            try:  # stored: drawn at once
                made = state.spawn(*wanted, compute=False)
            except state.NotCached:
                # not stored: the parent's run with snapshots and two children from each step
                # k to the end, at the time training seed A took (kept with the checkpoint)
                trained = state.checkpoint(name, parent).meta.get("seconds")
                steps = ZOO[name].train.steps
                cost = (None if not trained else trained * (1 + 2 * sum(1 - k / steps
                                                                      for k in spawn_at)))
                made = None
                if ask_first("spawn", wanted, [(f"the parent and {2 * len(spawn_at)} children",
                                                cost)],
                             f"from the {duration(trained or 0)} training seed {parent} took "
                             "(on the machine that trained it)",
                             "it trains the parent with snapshots, and the children from "
                             "them"):  # fmt: skip
                    made = run_in_status(
                        lambda progress: state.spawn(*wanted, progress=progress),
                        running="Training the parent with snapshots and the children …",
                        done="The spawned children are ready",
                        failed="Spawning failed",
                        what="Spawned children",
                        inputs=wanted,
                    )  # fmt: skip
            except Exception as err:
                show_error("Spawned children", err)
                made = None
            if made is not None:
                show_warnings("Spawned children", made)
                spawn_table = [{"step": x["step"], "alignment": method_key(x["method"], x["group"]),
                                "loss barrier (nats)": x["barrier_loss"],
                                "accuracy barrier (points)": in_points(x["barrier_accuracy"])}
                               for x in made["rows"]]  # fmt: skip
                figure(
                    figure_spawn(made, presentation=presentation()),
                    f"spawn-{name}-{parent}-{split}",
                    title="the barrier between spawned children against the spawn step",
                    key="spawn",
                    data=tidy_records(spawn_table, model=name, parent_seed=parent, split=split),
                    settings={"model": name, "parent seed": parent, "spawn steps": made["at"],
                              "children": made["children"], "snapshots every": made["every"],
                              "alignment": spawn_combo, "points": points, "split": split},
                    cache_keys=[k for x in made["rows"] for k in x["cache_keys"]],
                    tables={f"Barriers between the children, {split} split": spawn_table},
                )  # fmt: skip
                results_table(pd.DataFrame(spawn_table))

if pairs and not presentation():
    st.subheader("Download the aligned model")
    st.caption(
        "B aligned to A, or the model at λ on the straight line between A and the aligned B "
        "(in the weights), in B's own format: a Hugging Face directory for a model imported "
        "from one, else the landscape format (config.json + model.safetensors). A zip of "
        "what `landscape align MODEL --seeds A B --method M --group G --out DIR [--merge λ]` "
        "writes, prepared when asked."
    )
    aligned = [c for c in chosen if c != "naive"]
    if not aligned:
        st.info("Choose a matching method above to download B aligned by it.")
    else:
        d1, d2, d3 = st.columns([2, 2, 3])
        remember(f"download_pair_{name}", pairs[0], param="dl_pair", options=pairs,
                 label="download pair")  # fmt: skip
        pair = d1.selectbox(
            "Pair (A, B)",
            pairs,
            format_func=lambda p: f"{seed_label(p[0])} ↔ {seed_label(p[1])}",
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
            st.caption(_written(result))
            show_warnings("The written model", result)

if has_heads(name) and not is_imported(name):
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
                    widths["rows"], model=name, seed_a=a_seed, seed_b=b_seed, split=split
                ),  # fmt: skip
                settings={
                    "model": name,
                    "methods": [
                        method_key(m, widths.get("group")) for m in widths.get("methods", ())
                    ],
                    "seeds": [a_seed, b_seed],
                    "factors": sorted(factors),
                    "split": split,
                },  # fmt: skip
            )
