"""The summaries of the commands that lay out barriers as tables over pairs, seeds or variants:
``table``, ``ablation``, ``kv-sharing``, ``controls``, ``widths`` and ``matrix``.
"""

from __future__ import annotations

from typing import Any

from landscape.cli.summaries.formatting import (
    _bare,
    _health,
    _key,
    _pairs_text,
    _pct,
    _pm,
    _time,
    _where,
    _wrap,
    columns,
    layout,
)
from landscape.numbers import number


@layout("table")
def _show_table(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.barriers.tables import LEFT_OUT, TABLE, TABLE_ROW

    R, X = TABLE.read, TABLE_ROW.read  # the result's and its rows' declared fields
    pairs = R(r, "pairs")
    many = len(pairs) > 1
    spaces = R(r, "spaces") or [R(r, "space")]
    rows = [{"method": X(x, "method"), "group": X(x, "group"),
             **({"space": X(x, "space")} if len(spaces) > 1 else {}),
             "loss": _pm("", X(x, "barrier_loss"), X(x, "barrier_loss_sem"), many),
             **({"per pair": " ".join(f"{v:.3g}" for v in X(x, "per_pair_loss"))}
                if many else {}),
             "accuracy": _pm("%", X(x, "barrier_accuracy"), X(x, "barrier_accuracy_sem"), many),
             "paper": X(x, "paper") or ""} for x in R(r, "rows")]  # fmt: skip
    where = f"{' and '.join(spaces)} space{'s' if len(spaces) > 1 else ''}"
    title = (f"{R(r, 'model')}: barriers over {_pairs_text(pairs)}; {R(r, 'split')} split, "
             f"{where}")  # fmt: skip
    heads = {"loss": "loss barrier (nats)" + (" ± s.e.m." if many else ""),
             "accuracy": "accuracy barrier", "paper": "paper (nats)"}  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    for x in R(r, "left_out"):  # rows whose method does not align this model
        lines += _wrap(f"left out: {LEFT_OUT.read(x, 'method')}/{LEFT_OUT.read(x, 'group')}: ",
                       LEFT_OUT.read(x, "reason"))  # fmt: skip
    learned = R(r, "learned_options")
    if learned:  # settings other than the library's defaults
        lines += _wrap("learned rows: ", ", ".join(f"{k} {v}" for k, v in learned.items()))
    paper = R(r, "paper")  # PAPER_REFERENCE, which names its source
    if isinstance(paper, dict) and paper.get("source"):
        lines += _wrap("paper: ", paper["source"])
    return [*lines, _health(r, TABLE, TABLE_ROW)]


@layout("ablation")
def _show_ablation(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.barriers.ablation import CELL, ENTRY, MISSING, RESULT
    from landscape.matching import matching_key

    rows = []
    for step in RESULT.read(r, "steps"):
        pairs = ENTRY.read(step, "pairs")
        many = len(pairs) > 1
        first = True
        for c in ENTRY.read(step, "cells"):
            rows.append({"entry": ENTRY.read(step, "label") if first else "",
                         "pairs": " ".join(f"{a}–{b}" for a, b in pairs) if first else "",
                         "test loss": _pm("", ENTRY.read(step, "test_loss"),
                                          ENTRY.read(step, "test_loss_sem"), many)
                         if first else "",
                         "method": matching_key(CELL.read(c, "method"), CELL.read(c, "group"))
                         + (", calibrated" if CELL.read(c, "calibrated") else ""),
                         "space": CELL.read(c, "space"),
                         "loss": _pm("", CELL.read(c, "barrier_loss"),
                                     CELL.read(c, "barrier_loss_sem"), many),
                         "per pair": " ".join(f"{v:.3g}" for v in CELL.read(c, "per_pair_loss")),
                         "accuracy": _pm("%", CELL.read(c, "barrier_accuracy"),
                                         CELL.read(c, "barrier_accuracy_sem"), many)})  # fmt: skip
            first = False
    heads = {"test loss": "test loss (nats)", "loss": "loss barrier (nats)",
             "accuracy": "accuracy barrier"}  # fmt: skip
    title = (f"the Llama ablation: barriers over every pair of each entry's seeds (mean ± "
             f"s.e.m. over pairs); {RESULT.read(r, 'split')} split")  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    lines += ["the entries"]
    lines += columns([{"entry": ENTRY.read(s, "label"), "model": ENTRY.read(s, "model"),
                       "what it changes": ENTRY.read(s, "change")}
                      for s in RESULT.read(r, "steps")], "  ")  # fmt: skip
    missing = RESULT.read(r, "missing")
    if missing:
        lines += _wrap("not measured yet: ", ", ".join(MISSING.read(m, "label") for m in missing))
    said = RESULT.read(r, "learned_options")
    if said:
        lines += _wrap("learned rows: ", ", ".join(f"{k} {v}" for k, v in said.items()))
    return [*lines, "", _health(r)]



@layout("kv-sharing")
def _show_kv_sharing(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.barriers.ablation import KV_SHARING, KV_SHARING_ROW

    R, X = KV_SHARING.read, KV_SHARING_ROW.read  # the result's and its rows' declared fields
    many = len(R(r, "pairs")) > 1
    rows = [
        {
            "pair": f"{X(x, 'seeds')[0]}–{X(x, 'seeds')[1]}",
            "shared": _bare("", X(x, "shared_barrier_loss")),
            "relaxed": _bare("", X(x, "relaxed_barrier_loss")),
            "shared acc": _bare("%", X(x, "shared_barrier_accuracy")),
            "relaxed acc": _bare("%", X(x, "relaxed_barrier_accuracy")),
        }
        for x in R(r, "rows")
    ]
    rows.append({"pair": "mean", "shared": _pm("", R(r, "shared_barrier_loss"),
                                               R(r, "shared_barrier_loss_sem"), many),
                 "relaxed": _pm("", R(r, "relaxed_barrier_loss"),
                                R(r, "relaxed_barrier_loss_sem"), many)})  # fmt: skip
    heads = {
        "shared": "shared keys/values (nats)",
        "relaxed": "copied per head (nats)",
        "shared acc": "accuracy, shared",
        "relaxed acc": "accuracy, copied",
    }
    title = (
        f"{R(r, 'model')}: {R(r, 'method')}/{R(r, 'group')} with grouped-query sharing and with "
        f"keys and values copied per query head; {R(r, 'split')} split, {R(r, 'space')} space"
    )
    return [*_wrap("", title), "", *columns(rows, heads=heads), "",
            f"copies against originals: max |Δlogits| {R(r, 'expansion_check'):.1e} (float64)",
            "function checks: " + ("every alignment kept both functions" if R(r, "function_ok")
                                   else "FAILED, see the warnings above")]  # fmt: skip


@layout("controls")
def _show_controls(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.barriers.controls import CONTROL_PAIRS, CONTROLS_RESULT, CONTROLS_ROW

    # the result's, its rows' and its controls' declared fields
    R, X, C = CONTROLS_RESULT.read, CONTROLS_ROW.read, CONTROL_PAIRS.read
    pairs = R(r, "pairs")
    many = len(pairs) > 1
    rows, last = [], None
    for x in R(r, "rows"):
        control = X(x, "control")
        rows.append({"control": control if control != last else "",
                     "method": X(x, "method"), "group": X(x, "group"),
                     "loss": _pm("", X(x, "barrier_loss"), X(x, "barrier_loss_sem"), many),
                     "accuracy": _pm("%", X(x, "barrier_accuracy"), X(x, "barrier_accuracy_sem"),
                                     many),
                     "removed": _pct(X(x, "fraction_removed"))})  # fmt: skip
        last = control
    heads = {"loss": "loss barrier (nats)" + (" ± s.e.m." if many else ""),
             "accuracy": "accuracy barrier", "removed": "of naive removed"}  # fmt: skip
    title = (f"{R(r, 'model')}: real pairs against control pairs over {_pairs_text(pairs)}; "
             f"{R(r, 'split')} split, {R(r, 'space') or 'weights'} space")  # fmt: skip
    legend = [{"control": C(c, "control"), "disagreement": C(c, "disagreement"),
               "what the pair is": C(c, "description")} for c in R(r, "controls")]  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    if legend:
        heads = {"disagreement": "predictions differ"}
        lines += ["the controls", *columns(legend, "  ", heads=heads), ""]
    task = R(r, "path_task")
    if task:
        lines += _wrap("", task[0].upper() + task[1:] + ".")
    return [*lines, _health(r, CONTROLS_RESULT, CONTROLS_ROW),
            f"time: {_time(r, CONTROLS_RESULT)}"]  # fmt: skip


@layout("widths")
def _show_widths(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.barriers.widths import WIDTH_NARROW, WIDTH_ROW, WIDTHS

    R, X = WIDTHS.read, WIDTH_ROW.read  # the result's and its rows' declared fields
    narrow = {WIDTH_NARROW.read(n, "factor"): n for n in R(r, "narrow")}

    def of_b(factor: int, name: str) -> Any:  # the narrow B's metric, None where it is not
        return WIDTH_NARROW.read(narrow[factor], name) if factor in narrow else None

    rows = [{"k": X(x, "factor"), "width": X(x, "width"), "method": X(x, "method"),
             "loss": X(x, "barrier_loss"), "accuracy barrier": X(x, "barrier_accuracy"),
             "B test loss": of_b(X(x, "factor"), "test_loss"),
             "B test accuracy": of_b(X(x, "factor"), "test_accuracy")}
            for x in R(r, "rows")]  # fmt: skip
    a, b = R(r, "seeds")
    d = R(r, "d_model")
    title = (f"{R(r, 'model')} seed {a} (width {d}) against seed {b} at width {d}/k, embedded "
             f"semi-orthogonally and aligned under {R(r, 'group')}; "
             f"{_where(r, kind=WIDTHS)}")  # fmt: skip
    heads = {"loss": "loss barrier (nats)", "B test loss": "B test loss (nats)"}
    return [*_wrap("", title), "", *columns(rows, heads=heads), "",
            _health(r, WIDTHS, WIDTH_ROW), f"time: {_time(r, WIDTHS)}"]  # fmt: skip


@layout("matrix")
def _show_matrix(r: dict[str, Any]) -> list[str]:
    """The two seeds × seeds grids, row = A, column = B aligned to it (diagonal: —)."""
    from landscape.experiments.barriers.matrix import RESULT as M

    R = M.read  # the result's declared fields
    seeds = [str(s) for s in R(r, "seeds")]
    label = _key(r, M)
    lines = [f"barrier matrix of {R(r, 'model')}: {label}, {R(r, 'space')} space, "
             f"{R(r, 'split')} split, {len(R(r, 'pairs'))} pair(s)"]  # fmt: skip
    width = max(8, *(len(s) for s in seeds))
    for key, title in (("barrier_loss", "loss barrier (nats)"),
                       ("barrier_accuracy", "accuracy barrier (fraction)")):  # fmt: skip
        lines += ["", title, "A \\ B".ljust(width) + "".join(s.rjust(width) for s in seeds)]
        for i, row in enumerate(R(r, key)):
            cells = ("—" if i == j else number(v) for j, v in enumerate(row))
            lines.append(seeds[i].ljust(width) + "".join(c.rjust(width) for c in cells))
    return lines
