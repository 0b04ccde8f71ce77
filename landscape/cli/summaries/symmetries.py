"""The summaries of ``eigenangles`` and ``recover``."""

from __future__ import annotations

from typing import Any

from landscape.cli.summaries.formatting import (
    METHOD_WORDS,
    _aligns,
    _facts,
    _member,
    _nats,
    _time,
    _wrap,
    columns,
    human,
    layout,
)
from landscape.numbers import number


@layout("eigenangles")
def _show_eigenangles(r: dict[str, Any]) -> list[str]:
    word = _member(r["model"])
    a, b = r["seeds"]
    draws = r.get("haar_draws") or 1  # results from before the averaged reference: one draw
    names = {"wm": "O_WM, weight matching", "correction": "O_LM·O_WMᵀ, learned correction",
             "haar": f"Haar-random O(d), {draws} seeded draws (reference)"}  # fmt: skip
    small = next(r[f"summary_{k}"]["small"] for k in names if f"summary_{k}" in r)
    rows = [{"rotation": name, "median |θ|": s["median_abs"], "mean |θ|": s["mean_abs"],
             "share": s["share_small"]} for k, name in names.items()
            if (s := r.get(f"summary_{k}"))]  # fmt: skip
    lines = _wrap("", f"eigenangles θ (radians) of the rotations aligning {r['model']} {word} "
                      f"{b} to {word} {a}: {r['d_model']} each")  # fmt: skip
    lines += ["", *columns(rows, heads={"share": f"share |θ| < {number(small)}"}), ""]
    facts = []
    wm = r.get("wm_objective") or []
    if wm:
        facts.append(("weight matching", f"objective {number(wm[0])} → {number(wm[-1])} over "
                                         f"{len(wm)} rounds"))  # fmt: skip
    lm = r.get("lm_curve") or []
    if lm:
        facts.append(("learned matching", f"merged loss {_nats(lm[0]['loss'])} at step "
                      f"{lm[0]['step']}, {_nats(lm[-1]['loss'])} at step {lm[-1]['step']} "
                      "(at the λ drawn each step)"))  # fmt: skip
    if "det_flip" in r:
        facts.append(("det G sign flips", f"{r['det_flip']} during learned matching"))
    facts.append(("time", _time(r)))
    lines += _facts(facts)
    if r.get("iterations"):
        lines += ["", "iterations", *human(r["iterations"], "  ")]
    return lines


@layout("recover")
def _show_recover(r: dict[str, Any]) -> list[str]:
    """One row per planted level: units recovered, distance, checks, barrier, seconds."""
    method = (
        METHOD_WORDS.get(r["method"], r["method"])
        if _aligns(r)
        else f"no alignment ({r['method']})"
    )
    rows = [{"level": x["level"], "recovered": f"{100 * x['recovered']:.2f}%",
             "in_place": f"{100 * x['in_place']:.2f}%", "distance": number(x["distance"]),
             "scramble": number(x["scramble_check"]), "aligned": number(x["function_check"]),
             "barrier_loss": x["barrier_loss"], "barrier_accuracy": x["barrier_accuracy"],
             "seconds": x["seconds"]} for x in r["rows"]]  # fmt: skip
    heads = {"recovered": "recovered", "in_place": "in place", "distance": "distance",
             "scramble": "Δ scramble", "aligned": "Δ aligned", "barrier_loss": "barrier",
             "barrier_accuracy": "acc barrier", "seconds": "seconds"}  # fmt: skip
    title = (f"{r['label']}: planted symmetries recovered by {method} ({r['dtype']}, "
             f"draw {r['draw']})")  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    lines += _wrap("", "recovered: units put back (slots and signs of permutations; columns "
                   f"of rotations and within-head maps within {number(r['column_tol'])} of the "
                   "planted inverse's, relative); in place: units whose weights are back where "
                   "the original has them. distance: "
                   "‖H − G⁻¹‖_F / ‖G⁻¹‖_F, the largest over variables. Δ: max |Δlogits| of the "
                   "scrambled model against the original (float64) and of the aligned one "
                   "against the scrambled (float32). barrier: the loss barrier (nats) between "
                   "the original and the recovered model; seconds: the matching's.")  # fmt: skip
    verdict = "ok" if r.get("function_ok", True) else "FAILED, see the warnings above"
    return [*lines, f"function checks: {verdict}"]
