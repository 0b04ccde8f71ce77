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
    from landscape.experiments.eigen.view import ANGLE_SUMMARY, EIGENANGLES, LM_STEP

    R, S = EIGENANGLES.read, ANGLE_SUMMARY.read  # the result's and its summaries' fields
    model = R(r, "model")
    word = _member(model)
    a, b = R(r, "seeds")
    draws = R(r, "haar_draws") or 1  # results from before the averaged reference: one draw
    names = {"wm": "O_WM, weight matching", "correction": "O_LM·O_WMᵀ, learned correction",
             "haar": f"Haar-random O(d), {draws} seeded draws (reference)"}  # fmt: skip
    summaries = {k: s for k in names if (s := R(r, f"summary_{k}"))}  # none: not measured
    small = S(next(iter(summaries.values())), "small")
    rows = [{"rotation": names[k], "median |θ|": S(s, "median_abs"),
             "mean |θ|": S(s, "mean_abs"), "share": S(s, "share_small")}
            for k, s in summaries.items()]  # fmt: skip
    lines = _wrap("", f"eigenangles θ (radians) of the rotations aligning {model} {word} "
                      f"{b} to {word} {a}: {R(r, 'd_model')} each")  # fmt: skip
    lines += ["", *columns(rows, heads={"share": f"share |θ| < {number(small)}"}), ""]
    facts = []
    wm = R(r, "wm_objective") or []
    if wm:
        facts.append(("weight matching", f"objective {number(wm[0])} → {number(wm[-1])} over "
                                         f"{len(wm)} rounds"))  # fmt: skip
    lm = R(r, "lm_curve") or []
    if lm:
        (l0, s0), (l1, s1) = ((LM_STEP.read(x, "loss"), LM_STEP.read(x, "step"))
                              for x in (lm[0], lm[-1]))  # fmt: skip
        facts.append(("learned matching", f"merged loss {_nats(l0)} at step {s0}, {_nats(l1)} "
                      f"at step {s1} (at the λ drawn each step)"))  # fmt: skip
    flips = R(r, "det_flip")
    if flips is not None:  # learned matching ran
        facts.append(("det G sign flips", f"{flips} during learned matching"))
    facts.append(("time", _time(r, EIGENANGLES)))
    lines += _facts(facts)
    iterations = R(r, "iterations")
    if iterations:
        lines += ["", "iterations", *human(iterations, "  ")]
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
