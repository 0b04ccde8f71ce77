"""The curves: every chosen method on every chosen pair, measured (or read) under one progress
bar, drawn as one figure above the barrier table."""

from __future__ import annotations

import itertools
import statistics

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device
from app.components.failures import show_error, show_warnings
from app.components.figures import figure
from app.components.layout import presentation
from app.components.long_runs import LongRun, ask_first
from app.components.text import plain
from app.memory import remember
from app.sections.interpolation import table
from app.sections.interpolation.asked import Asked
from landscape.matching import method_of
from landscape.page_defaults import method_group
from landscape.plots.fields import BARRIER, INTERPOLATION_SERIES
from landscape.plots.interpolation import above_naive, figure_interpolation
from landscape.plots.tidy import tidy_interpolation
from landscape.progress import within

LEARNED_UNKNOWN = ("not run on this model yet: it trains a transform, seconds for a small model, "
                   "minutes for a transformer on a CPU")  # fmt: skip


def costs(asked: Asked, combos: list[str], in_spaces: list[str],
          of_pairs: list[tuple[int, int]],
          quick: float | None = 0.0) -> list[tuple[str, float | None]]:  # fmt: skip
    """What is not stored yet, each with the seconds its method's stored curves of this model
    took to match; where none is stored, ``quick`` for a method that does not learn (0: it is
    computed at once) and None (unknown) for learned matching."""
    took: dict[tuple[str, str], list[float]] = {}
    todo = []
    for combo, space, pair in itertools.product(combos, in_spaces, of_pairs):
        method, group = method_group(combo)
        request = state.seeds_request(asked.name, pair, method, group, points=asked.points,
                                      split=asked.split, space=space)  # fmt: skip
        try:
            r = state.barrier(request, device(), compute=False)
            seconds = BARRIER.read(r, "matching_seconds")
            if seconds is not None:
                took.setdefault((combo, space), []).append(float(seconds))
        except state.NotCached:
            todo.append((combo, space, pair, method_of(method).learned))
        except Exception:  # the loop below shows what fails
            continue
    label = (lambda c, s: c) if len(in_spaces) == 1 else (lambda c, s: f"{c} · {s}")
    return [(f"{label(c, s)} on seeds {p[0]} ↔ {p[1]}",
             statistics.median(took[c, s]) if (c, s) in took else (None if slow else quick))
            for c, s, p, slow in todo]  # fmt: skip


def curves(asked: Asked) -> None:
    """The figure of the curves, then their barrier table (on a projector the figure starts on
    the first screen). The figure's place is filled at once: the figure of earlier choices does
    not stay on the page (faded) while these are computed. Before a long run the page says
    what it costs and waits for a click; cancelled or waiting, what is stored is drawn, the
    rest is named, and the page goes on."""
    name, split = asked.name, asked.split
    figure_slot = st.empty()
    st.subheader(
        f"Barriers of {plain(name)} — {split} split" + (" (TRAIN data)" if split == "train" else "")
    )
    table_slot = st.empty()
    figure_slot.info(
        f"The curves of {plain(name)} ({', '.join(asked.chosen)}; {len(asked.pairs)} pair(s), "
        f"{split} split) appear here when they are measured.",
        icon=":material/hourglass_top:",
    )
    wanted = (name, tuple(asked.pairs), tuple(asked.chosen), asked.points, split,
              tuple(asked.spaces))  # fmt: skip
    ready = ask_first("interp", wanted, costs(asked, asked.chosen, asked.spaces, asked.pairs),
                      "as long as the stored curves of the same method took to match",
                      LEARNED_UNKNOWN)  # fmt: skip
    series, rows, missing = _measure(asked, wanted, ready, table_slot)
    above = {a["label"]: a for a in above_naive(series, split=split)}
    drawn = table.final_table(table_slot, rows, series, above, missing, cancelled=ready)
    if not series:
        figure_slot.empty()
    else:
        with figure_slot.container():
            _figure(asked, series, drawn)


def _measure(asked: Asked, wanted: tuple, ready: bool,
             table_slot) -> tuple[list[dict], list[dict], list[str]]:  # fmt: skip
    """Every method on every pair, in every merge space: read, else (``ready``) computed under
    one progress bar with Cancel; the table's rows drawn as they come. The curves of each
    method (its series), the table's rows, and what was not measured."""
    name, pairs, spaces = asked.name, asked.pairs, asked.spaces
    progress = (LongRun("Aligning and interpolating …", key="interp", inputs=wanted)
                if ready else None)  # fmt: skip
    computing = progress is not None and not progress.cancelled
    series, rows, missing = [], [], []
    total, done = len(asked.chosen) * len(pairs) * len(spaces), 0
    for combo, space in itertools.product(asked.chosen, spaces):
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
                request = state.seeds_request(name, pair, method, group, points=asked.points,
                                              split=asked.split, space=space)  # fmt: skip
                r = state.barrier(request, device(), progress=part, compute=computing)
                results.append(r)
                if method_of(method).learned and not BARRIER.read(r, "cached"):  # measured here
                    state.measured_learned(name, device(), BARRIER.read(r, "matching_seconds"))
                show_warnings(f"{label} on seeds {pair[0]} ↔ {pair[1]}", results[-1])
            except state.NotCached as err:  # not stored; a cancelled or waiting run computes none
                if computing:
                    show_error(f"{label} on seeds {pair[0]} ↔ {pair[1]}", err)
                missing.append(f"{label} on seeds {pair[0]} ↔ {pair[1]}")
            except Exception as err:  # a failing method must not take the page down
                show_error(f"{label} on seeds {pair[0]} ↔ {pair[1]}", err)
            done += 1
        if not results:
            continue
        series.append({"label": label, "results": results, "space": space, "method": combo})
        rows.append(table.row(asked, combo, space, method, group, results))
        # Partial rows as a static table: a data grid whose row count changes between quick
        # updates can draw error cells in the browser; the final grid is drawn once below.
        table_slot.table(table.static(pd.DataFrame(rows)))  # the check as the final table has it
    if progress is not None:
        progress.close()
    return series, rows, missing


def _figure(asked: Asked, series: list[dict], drawn: pd.DataFrame) -> None:
    """The curves' figure, with the λ marker's slider under it and the table in its report."""
    name, split = asked.name, asked.split
    lambdas = BARRIER.read(INTERPOLATION_SERIES.read(series[0], "results")[0], "lambdas")
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
            "pairs": [list(p) for p in asked.pairs],
            "methods": [INTERPOLATION_SERIES.read(s, "label") for s in series],
            "merge space": " and ".join(asked.spaces),
            "split": split,
            "points": asked.points,
        },  # fmt: skip
        cache_keys=[BARRIER.read(r, "cache_key") for s in series
                    for r in INTERPOLATION_SERIES.read(s, "results")],  # fmt: skip
        tables={f"Barriers, {split} split (mean ± s.e.m.)": table.report_rows(drawn)},
    )
    # under the figure (its value is read above, from the session): the figure comes first
    st.select_slider("Mark λ on the curves", lambdas, key="interp_mark",
                     format_func=lambda v: f"{v:.2f}")  # fmt: skip
