"""The summaries of the commands that measure the loss between models along a path or over a
plane: ``barrier`` and ``pair-barrier``, ``curvature``, ``triangle``, ``surface``, ``curve`` and
``spawn`` (the tables over pairs, seeds and variants are :mod:`.tables`').
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from landscape.cli.summaries.formatting import (
    _alignment,
    _aligns,
    _bare,
    _checks,
    _facts,
    _key,
    _matching,
    _member,
    _nats,
    _pct,
    _pm,
    _secs,
    _time,
    _value,
    _verdict,
    _where,
    _wrap,
    columns,
    layout,
)
from landscape.fields import Fields
from landscape.numbers import mean_pm, number


def _at(point: Sequence[float]) -> str:
    return "(w_A, w_B, w_C) = (" + ", ".join(number(x) for x in point) + ")"


def _index(values: Sequence[float], target: float) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - target))


def _curve(r: dict[str, Any], kind: Fields) -> list[str]:
    """The curve as a few rows: λ = 0, ¼, ½, ¾, 1 and the two peaks (every row if few)."""
    lam, loss, acc = (kind.read(r, k) for k in ("lambdas", "loss", "accuracy"))
    n = len(lam)
    peaks = {_index(lam, kind.read(r, "lambda_peak_loss")): "loss barrier peak"}
    peak = kind.read(r, "lambda_peak_accuracy")
    if peak is not None:
        i = _index(lam, peak)
        peaks[i] = "both peaks" if i in peaks else "accuracy barrier peak"
    pick = set(range(n)) if n <= 9 else {round(q * (n - 1)) for q in (0, 0.25, 0.5, 0.75, 1)}
    rows = [{"λ": lam[i], "loss": loss[i], "accuracy": acc[i], "": peaks.get(i, "")}
            for i in sorted(pick | set(peaks))]  # fmt: skip
    title = "curve" if len(rows) == n else f"curve, {len(rows)} of {n} points (--json has all)"
    return [title, *columns(rows, "  ")]


@layout("barrier", "pair-barrier")
def _show_barrier(r: dict[str, Any]) -> list[str]:
    paths = "a" in r  # pair-barrier: two checkpoint paths
    if paths:
        from landscape.experiments.barriers.pairs import PAIR_BARRIER as kind
    else:
        from landscape.experiments.barriers.pipeline import BARRIER as kind

    def R(name: str) -> Any:  # the result's declared fields
        return kind.read(r, name)

    if paths:
        models = [("model A", f"{R('a')}, at λ = 1"), ("model B", f"{R('b')}, at λ = 0")]
    else:
        word = _member(R("model"))
        a, b = R("seeds")
        models = [("models", f"{R('model')}: A = {word} {a} at λ = 1, B = {word} {b} at λ = 0, "
                             "aligned to A")]  # fmt: skip
    (la, lb), (aa, ab) = R("endpoint_loss"), R("endpoint_accuracy")
    peak = R("lambda_peak_accuracy")
    facts = [
        ("loss barrier", f"{_nats(R('barrier_loss'))}, highest at λ = "
                         f"{number(R('lambda_peak_loss'))}"),
        ("accuracy barrier", _pct(R("barrier_accuracy"))
                             + (f", highest at λ = {number(peak)}" if peak is not None else "")),
        *models,
        ("alignment", _alignment(r, kind)),
        ("measured on", _where(r, kind=kind)),
        ("endpoint losses", f"A {number(la)}, B {_nats(lb)}"),
        ("endpoint accuracies", f"A {_pct(aa)}, B {_pct(ab)}"),
    ]  # fmt: skip
    if paths:
        data = R("data")
        if isinstance(data, dict):  # what was evaluated: the note says it in words
            data = data.get("note") or _value("data", data)
        facts += [("architecture", R("architecture")),
                  ("parameters", _bare("count", R("parameters"))), ("data", str(data))]  # fmt: skip
    facts += [("function check", _checks(r, kind=kind)), ("time", _time(r, kind))]
    return [*_facts(facts), "", *_curve(r, kind)]


def _curvature_rows(line: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per λ: the batch's loss, the top eigenvalues, the trace ± its standard error and
    each block's top eigenvalue."""
    from landscape.experiments.curvature import CURVATURE_LINE as L

    rows = []
    loss, tops, traces, ses, converged = (L.read(line, k) for k in (
        "loss", "top_eigenvalues", "trace", "trace_se", "converged"))  # fmt: skip
    for i, lam in enumerate(L.read(line, "lambdas")):
        trace, se = traces[i], ses[i]
        row = {"λ": lam, "loss": loss[i],
               "top eigenvalues": ", ".join(number(v) for v in tops[i]),
               "trace": None if trace is None else mean_pm(trace, se if se is not None
                                                            else math.nan)}  # fmt: skip
        for name, values in L.read(line, "blocks").items():
            row[name] = values[i]
        if not converged[i]:
            row[""] = "not converged"
        rows.append(row)
    return rows


@layout("curvature")
def _show_curvature(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.curvature import CURVATURE, CURVATURE_BATCH, CURVATURE_LINE

    R, L = CURVATURE.read, CURVATURE_LINE.read  # the result's declared fields
    word = _member(R(r, "model"))
    a, b = R(r, "seeds")
    lines = R(r, "lines")
    lams = L(lines[0], "lambdas")
    mid = _index(lams, 0.5)
    at = number(lams[mid])
    sharp = ", ".join(f"{_key(x)} {number(L(x, 'top_eigenvalue')[mid])}" for x in lines)
    batch = R(r, "batch")
    rows, unit, predictions = (CURVATURE_BATCH.read(batch, k)
                               for k in ("rows", "unit", "predictions"))  # fmt: skip
    top_k, probes = R(r, "top_k"), R(r, "probes")
    top = "the largest" if top_k == 1 else f"the {top_k} largest"
    first_top = L(lines[0], "top_eigenvalue")
    facts = [
        ("top eigenvalue", f"at λ = {at}: {sharp}; at A {number(first_top[-1])},"
                           f" at B {number(first_top[0])}"),
        ("models", f"{R(r, 'model')}: A = {word} {a} at λ = 1, B = {word} {b} at λ = 0"),
        ("alignment", _alignment(r)),
        ("measured on", f"the loss on {rows} {unit} of the {R(r, 'split')} split "
                        f"({predictions:,} predictions, drawn by seed {R(r, 'seed')}); "
                        f"{R(r, 'parameters'):,} parameters, {R(r, 'dtype')} Hessian-vector "
                        f"products"),
        ("eigenvalues", f"{top} by Lanczos; trace by Hutchinson over {probes} Rademacher "
                        "probes (± its standard error)" if probes
                        else f"{top} by Lanczos; no trace (--probes 0)"),
        ("function check", _checks(r)),
        ("time", _time(r)),
    ]  # fmt: skip
    out = _facts(facts)
    for line in lines:
        name = _key(line)
        products = sum(L(line, "hessian_vector_products"))
        out += ["", f"{name} ({products} Hessian-vector products, "
                    f"{_secs(L(line, 'compute_seconds'))}, peak memory "
                    f"{number(L(line, 'compute_peak_rss_mb'))} MB)",
                *columns(_curvature_rows(line), "  ")]  # fmt: skip
    return out


@layout("triangle")
def _show_triangle(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.barriers.triangles import TRIANGLE as T

    R = T.read  # the result's declared fields
    excess, acc, points = R(r, "excess_loss"), R(r, "accuracy"), R(r, "points")
    top = max(range(len(excess)), key=lambda i: excess[i])
    low = min(range(len(acc)), key=lambda i: acc[i])
    word = _member(R(r, "model"))
    a, b, c = R(r, "seeds")
    how = "together over the triangle" if R(r, "joint") else "edge by edge"
    (la, lb, lc), (aa, ab, ac) = R(r, "corner_loss"), R(r, "corner_accuracy")
    facts = [
        ("loss barrier", f"{_nats(excess[top])} above the corners' loss plane, at "
                         f"{_at(points[top])}"),
        ("basin", f"{_pct(R(r, 'basin_fraction'))} of {len(points)} points lie at most "
                  f"{_nats(R(r, 'tol'))} above that plane"),
        ("lowest accuracy", f"{_pct(acc[low])} at {_at(points[low])}"),
        ("models", f"{R(r, 'model')}: A = {word} {a}, B = {word} {b}, C = {word} {c}; B and C "
                   f"aligned to A {how}"),
        ("alignment", _alignment(r, T)),
        ("measured on", _where(r, "over the plane through the three", T)),
        ("corner losses", f"A {number(la)}, B {number(lb)}, C {_nats(lc)}"),
        ("corner accuracies", f"A {_pct(aa)}, B {_pct(ab)}, C {_pct(ac)}"),
        ("function check", _checks(r, "B and C", T)),
        ("time", _time(r, T)),
    ]  # fmt: skip
    return _facts(facts)


@layout("surface")
def _show_surface(r: dict[str, Any]) -> list[str]:
    from landscape.experiments.curvature import CURVATURE_BATCH as B
    from landscape.experiments.directions import HESSIAN_RECORD as H
    from landscape.experiments.surfaces import PATH, POINT, RESULT, TRAJECTORY
    from landscape.experiments.trajectories import PROJECTED_PATH as RUN

    R = RESULT.read  # the result's declared fields, and those of its parts below
    loss = [v for row in R(r, "loss") for v in row]
    acc = [v for row in R(r, "accuracy") for v in row]
    model = R(r, "model")
    word = _member(model)
    n = len(R(r, "x"))
    spread = (f"loss {_nats(min(loss))} to {_nats(max(loss))}, accuracy {_pct(min(acc))} to "
              f"{_pct(max(acc))} over {n} × {n} points")  # fmt: skip
    models = [f"{POINT.read(p, 'label')}: loss {_nats(POINT.read(p, 'loss'))}, accuracy "
              f"{_pct(POINT.read(p, 'accuracy'))} at ({number(POINT.read(p, 'x'))}, "
              f"{number(POINT.read(p, 'y'))})" for p in R(r, "points")]  # fmt: skip
    if R(r, "kind") == "directions":
        e = number(R(r, "extent"))
        vectors = "left where they are" if R(r, "vectors") == "zero" else "moved by α·θ"
        h = R(r, "hessian")
        if h is None:
            along = (f"two filter-normalised random directions (seed {R(r, 'directions_seed')}; "
                     f"biases and gains {vectors})")  # fmt: skip
            hessian = []
        else:
            along = (f"the top two eigenvectors of its Hessian, filter-normalised (biases and "
                     f"gains {vectors})")  # fmt: skip
            lam, kappa, batch = (H.read(h, k) for k in ("eigenvalues", "axis_curvatures",
                                                        "batch"))  # fmt: skip
            hessian = [
                ("eigenvalues", f"λ₁ = {number(lam[0])}, λ₂ = {number(lam[1])}"
                                f"{'' if H.read(h, 'converged') else ' (Lanczos did not converge)'}"
                                f"; along the normalised axes the batch's loss curves as "
                                f"½·κ·α², κ = {number(kappa[0])} (α) and {number(kappa[1])} (β)"),
                ("Hessian of", f"the loss on {B.read(batch, 'rows')} {B.read(batch, 'unit')} of "
                               f"the {H.read(h, 'split')} split "
                               f"({B.read(batch, 'predictions'):,} predictions, drawn by seed "
                               f"{H.read(h, 'seed')}), {H.read(h, 'hessian_vector_products')} "
                               f"{H.read(h, 'dtype')} Hessian-vector products"),
            ]  # fmt: skip
        t = R(r, "trajectory")
        if t is not None:
            explained = TRAJECTORY.read(t, "explained")
            along = (f"the plane of its training path (the top two principal directions of its "
                     f"{len(TRAJECTORY.read(t, 'steps'))} snapshots every "
                     f"{TRAJECTORY.read(t, 'every')} steps, {_pct(explained[0])} and "
                     f"{_pct(explained[1])} of Σ‖θ_t − θ‖²; α = 1 is "
                     f"{number(TRAJECTORY.read(t, 'scale'))} in weight distance)")  # fmt: skip
        runs = []
        for x in R(r, "trajectories"):
            errors, gap = RUN.read(x, "errors"), RUN.read(x, "end_gap")
            runs.append(f"seed {RUN.read(x, 'seed')}: {_pct(RUN.read(x, 'error'))} of its "
                        f"displacement outside the plane (at its start {_pct(errors[0])}, at its "
                        f"end {_pct(errors[-1])})"
                        + (f"; its run here ends {_pct(gap)} from its checkpoint"
                           if gap else ""))  # fmt: skip
        facts = [
            ("surface", f"around {model} {word} {R(r, 'seeds')[0]} along {along}"),
            *hessian,
            ("grid", f"α, β from −{e} to {e}: {spread}"),
            ("at the model", models[0]),
            *(("training paths" if i == 0 else "", x) for i, x in enumerate(runs)),
            ("measured on", f"the {R(r, 'split')} split"),
            ("time", _time(r, RESULT)),
        ]  # fmt: skip
        return _facts(facts)
    facts = [
        ("surface", f"the plane through {model} {word}s "
                    f"{', '.join(map(str, R(r, 'seeds')))}; the last two aligned to the first"),
        ("alignment", _alignment(r, RESULT)),
        ("grid", f"{spread}, reaching {_pct(R(r, 'margin'))} of the triangle's larger side past "
                 "it"),
        *(("models" if i == 0 else "", m) for i, m in enumerate(models)),
        *(("straight paths" if i == 0 else "",
           f"{PATH.read(p, 'label')}: loss barrier {_nats(PATH.read(p, 'barrier_loss'))}, "
           f"accuracy barrier {_pct(PATH.read(p, 'barrier_accuracy'))}")
          for i, p in enumerate(R(r, "paths"))),
        ("measured on", f"the {R(r, 'split')} split"),
        ("function check", _checks(r, "B and C", RESULT)),
        ("time", _time(r, RESULT)),
    ]  # fmt: skip
    return _facts(facts)



@layout("curve")
def _show_curve(r: dict[str, Any]) -> list[str]:
    """Per alignment, the straight line's and the curve's barriers and highest loss."""
    from landscape.experiments.barriers.curved import CURVED, CURVED_ALIGNMENT, CURVED_ROW

    R, W = CURVED.read, CURVED_ROW.read  # the result's and its rows' declared fields
    said = R(r, "kind")
    kind = {"bezier": "Bézier curve", "chain": "polygonal chain"}.get(said, said)
    n = R(r, "bends")
    bends = f"{n} bend{'s' if n != 1 else ''}"
    rows = [{"alignment": W(x, "alignment"), "path": "straight line" if W(x, "path") ==
             "straight line" else kind, "loss": _nats(W(x, "loss barrier (nats)")),
             "accuracy": _pct(W(x, "accuracy barrier (fraction)")),
             "peak": _nats(W(x, "max loss (nats)"))} for x in R(r, "rows")]  # fmt: skip
    heads = {"loss": "loss barrier", "accuracy": "accuracy barrier", "peak": "highest loss"}
    a, b = R(r, "seeds")
    title = (f"{R(r, 'model')} seeds {a}–{b}: a {kind} ({bends}) beside the straight line; "
             f"{R(r, 'split')} split, {R(r, 'points')} points on λ")  # fmt: skip
    alignments = R(r, "alignments")
    trained = CURVED_ALIGNMENT.read(alignments[-1], "training_seconds")
    cached = all(CURVED_ALIGNMENT.read(x, "cached") for x in alignments)
    facts = [
        ("alignment", _matching(r, CURVED)),
        ("curve", f"control points trained {R(r, 'steps')} steps on the training split (Adam, "
                  f"lr {number(R(r, 'lr'))} cosine-decayed, batch {R(r, 'batch_size')}, seed "
                  f"{R(r, 'train_seed')}), A and B fixed; {number(trained)} s"),
        ("barriers", "against the chord between A and B, at the line's λ"),
        ("time", _secs(R(r, "seconds")) + (", read from the cache" if cached
                                           else ", computed now")),
    ]  # fmt: skip
    return [*_wrap("", title), "", *columns(rows, heads=heads), "", *_facts(facts),
            _verdict(r, CURVED)]  # fmt: skip


@layout("spawn")
def _show_spawn(r: dict[str, Any]) -> list[str]:
    """One row per spawn step: the children's barrier naive and aligned, and their accuracy."""
    from landscape.experiments.spawn import MEMBER, RESULT, ROW

    R, X = RESULT.read, ROW.read  # the result's and its rows' declared fields
    children = R(r, "children")
    many = children > 2
    acc: dict[int, list[float]] = {}
    for m in R(r, "members"):
        acc.setdefault(MEMBER.read(m, "step"), []).append(MEMBER.read(m, "test_accuracy"))
    table: dict[int, dict[str, Any]] = {}
    for x in R(r, "rows"):
        row = table.setdefault(X(x, "step"), {"step": X(x, "step")})
        which = "aligned" if _aligns(x, ROW) else "naive"
        row[f"{which} loss"] = _pm("", X(x, "barrier_loss"), X(x, "barrier_loss_sem"), many)
        row[f"{which} accuracy"] = _pm("%", X(x, "barrier_accuracy"),
                                       X(x, "barrier_accuracy_sem"), many)  # fmt: skip
    for k, row in table.items():
        row["children accuracy"] = _pct(sum(acc[k]) / len(acc[k]))
    heads = {"naive loss": "naive (nats)", "naive accuracy": "naive acc",
             "aligned loss": "aligned (nats)", "aligned accuracy": "aligned acc",
             "children accuracy": "children's acc"}  # fmt: skip
    title = (f"{R(r, 'model')}: {children} children spawned from seed {R(r, 'seed')}'s run at "
             f"step k of {R(r, 'steps')}, each with its own data order; barriers between them "
             f"on the {R(r, 'split')} split, {R(r, 'points')} points on λ")  # fmt: skip
    facts = [
        ("alignment", _matching(r, RESULT)),
        ("barriers", "loss and accuracy barrier between the children along the straight line, "
                     "mean over their pairs"),
        ("parent", f"snapshots every {R(r, 'every')} steps (parameters and optimizer state)"),
        ("time", _secs(R(r, "seconds"))),
    ]  # fmt: skip
    return [*_wrap("", title), "", *columns(list(table.values()), heads=heads), "",
            *_facts(facts), _verdict(r, RESULT)]  # fmt: skip
