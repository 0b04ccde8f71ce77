"""The command line's summaries for people: what ``landscape COMMAND`` prints without ``--json``.

Without --json a result is a summary for a person: the headline numbers first, with their
units (losses and barriers in nats, accuracies and shares in percent, times in s), four
significant digits, curves as a few rows, tables as columns within WIDTH characters. A command
with a layout in LAYOUTS gets it; any other result is laid out from its keys (human). --json
prints the result itself, unchanged (``landscape.cli``).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from landscape.names import method_key
from landscape.numbers import mean_pm, number

WIDTH = 100
MAX_ROWS = 40  # a longer table shows its first rows and its last five
# a cell that reads as a number (a percentage, a mean ± its error, a missing one): right-aligned
NUMBER = re.compile(r"–|([-+]?(\d[\d,]*(\.\d*)?(e[-+]?\d+)?|nan|inf)%?( ± \S+)?)")
Layout = Callable[[dict[str, Any]], list[str]]
LAYOUTS: dict[str, Layout] = {}
METHOD_WORDS = {"activation": "activation matching", "weight": "weight matching",
                "learned": "learned matching"}  # fmt: skip
GROUP_WORDS = {"perm": "perm (permutations)", "signed-perm": "signed-perm (signed permutations)",
               "orth": "orth (rotations)",
               "orth-mean": "orth-mean (rotations fixing the mean direction)"}  # fmt: skip


def layout(*names: str) -> Callable[[Layout], Layout]:
    def register(fn: Layout) -> Layout:
        LAYOUTS.update(dict.fromkeys(names, fn))
        return fn

    return register


def show(command: str, result: dict[str, Any]) -> str:
    return "\n".join(LAYOUTS.get(command, human)(result))


# C0 controls, DEL and C1 controls: what a terminal may read as a command (an escape sequence
# that retitles the window or clears the screen, an 8-bit CSI, a bell), not as text; and lone
# surrogates, which no encoder writes (a path's bytes that are not UTF-8 arrive as U+DC80-U+DCFF)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def terminal_safe(text: object, *, keep: str = "") -> str:
    """``text`` safe to print on a terminal: every control character (C0, DEL, C1) except those
    in ``keep`` written as a visible escape (``\\x1b``, ``\\x07``, ``\\n``), so names, labels,
    paths and messages from files cannot drive the terminal; a byte of a path that is not UTF-8
    as the byte (``\\xff``), another lone surrogate as ``\\udxxx``. Other text is unchanged."""

    def visible(m: re.Match[str]) -> str:
        c, n = m.group(), ord(m.group())
        if 0xDC80 <= n <= 0xDCFF:  # os.fsdecode's escape of the byte n - 0xDC00
            return f"\\x{n - 0xDC00:02x}"
        if n >= 0xD800:
            return f"\\u{n:04x}"
        return c if c in keep else _NAMED.get(c, f"\\x{n:02x}")

    return _CONTROL.sub(visible, str(text))


def _isnumber(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(key: str) -> str:
    """The unit of the value under ``key``, read from its name: ``s``, ``nats``, ``%`` (a
    fraction: accuracies, shares), ``bytes``, ``MB``, ``count`` (thousands separated) or none."""
    k = key.lower()
    if k == "seconds" or k.endswith("_seconds"):
        return "s"
    if k == "bytes" or k.endswith("_bytes"):
        return "bytes"
    if k.endswith("_mb"):
        return "MB"
    if "accuracy" in k or k.startswith(("share", "fraction", "basin")) or k == "disagreement":
        return "%"
    if k == "loss" or "_loss" in k or k.startswith("loss"):
        return "nats"
    if k in ("parameters", "characters", "entries"):
        return "count"
    return ""


def _bare(kind: str, v: Any) -> str:
    """``v`` without a trailing unit (a percentage keeps its sign)."""
    if not _isnumber(v) or (isinstance(v, float) and not math.isfinite(v)):
        return number(v)
    if kind == "%":
        return f"{100 * v:.2f}%"
    if kind == "count" and isinstance(v, int):
        return f"{v:,}"
    if kind == "bytes":
        for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if v >= scale:
                return f"{v / scale:.4g} {unit}"
    return number(v)


def _suffix(kind: str, v: Any = 0) -> str:
    if kind == "bytes" and _isnumber(v) and v < 1e3:
        return " bytes"
    return f" {kind}" if kind in ("s", "nats", "MB") and v is not None else ""


def _with_unit(kind: str, v: Any) -> str:
    return _bare(kind, v) + _suffix(kind, v)


def _nats(v: Any) -> str:
    return _with_unit("nats", v)


def _pct(v: Any) -> str:
    return _with_unit("%", v)


def _secs(v: Any) -> str:
    return _with_unit("s", v)


def _value(key: str, v: Any) -> str:
    """One value on one line (wrapped later): lists joined or, when long, summarised."""
    kind = _kind(key)
    if isinstance(v, dict):
        return "; ".join(f"{k.replace('_', ' ')} {_value(k, x)}" for k, x in v.items()) or "–"
    if not isinstance(v, (list, tuple)):
        return _with_unit(kind, v)
    if not v:
        return "none"
    if all(_isnumber(x) or x is None for x in v):
        if len(v) <= 8:
            return ", ".join(_bare(kind, x) for x in v) + _suffix(kind)
        finite = [x for x in v if _isnumber(x) and math.isfinite(x)]
        span = f" from {_bare(kind, min(finite))} to {_bare(kind, max(finite))}" if finite else ""
        return f"{len(v)} values{span}{_suffix(kind)} (--json has them all)"
    if all(isinstance(x, (list, tuple)) for x in v):
        if len(v) > 8:
            return f"{len(v)} entries (--json has them all)"
        return ", ".join("(" + ", ".join(_bare(kind, y) for y in x) + ")" for x in v)
    if all(isinstance(x, dict) for x in v):
        return f"{len(v)} entries"
    shown = ", ".join(number(x) for x in v[:8])
    return shown + (f", … ({len(v)} in all)" if len(v) > 8 else "")


def _wrap(prefix: str, text: str, width: int = WIDTH) -> list[str]:
    """``prefix`` + ``text`` wrapped within ``width``, continued under the text."""
    lines = textwrap.wrap(text, width, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                          break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return lines or [prefix.rstrip()]


def _facts(pairs: Sequence[tuple[str, str]], pad: str = "") -> list[str]:
    """``label  value`` lines, labels aligned, values wrapped under themselves."""
    width = max((len(k) for k, _ in pairs), default=0)
    return [line for k, v in pairs for line in _wrap(f"{pad}{k.ljust(width)}  ", v)]


def human(obj: dict[str, Any], pad: str = "") -> list[str]:
    """Lines for any result, from its keys: ``key  value`` (keys aligned), a nested dict
    indented under its key, a list of rows as columns; ``warnings`` is left out (main says each
    on stderr)."""
    items = [(k, v) for k, v in obj.items() if k != "warnings"]

    def block(v: Any) -> bool:
        return (isinstance(v, dict) and bool(v)) or _rows(v)

    width = min(24, max((len(k) for k, v in items if not block(v)), default=0))
    lines: list[str] = []
    for k, v in items:
        name = k.replace("_", " ")
        if isinstance(v, dict) and v:
            lines += [pad + name, *human(v, pad + "  ")]
        elif _rows(v):
            lines += [pad + name, *columns(v, pad + "  ")]
        else:
            lines += _wrap(f"{pad}{name.ljust(width)}  ", _value(k, v))
    return lines


def _rows(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, dict) for r in v)


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == {}


def _head(col: str) -> str:
    kind = _kind(col)
    return col.replace("_", " ") + (f" ({kind})" if kind in ("nats", "s", "MB") else "")


def _cell(col: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, dict)):
        return _value(col, v)
    return _bare(_kind(col), v)


def columns(rows: list[dict[str, Any]], pad: str = "", heads: dict[str, str] | None = None,
             width: int = WIDTH) -> list[str]:  # fmt: skip
    """Rows as aligned columns within ``width``: columns empty in every row left out, units in
    the headers (nats, s) or the cells (%), numbers right-aligned. When the row is too wide,
    long text is wrapped in its column (to no less than 20 characters; a newline in a cell
    starts a paragraph); when even that is too wide, the longest prose goes under its row, and
    what still does not fit continues in further blocks under the same leading columns. More
    than MAX_ROWS rows: the first ones and the last five."""
    cols = [c for c in dict.fromkeys(k for r in rows for k in r)
            if c != "warnings" and not all(_empty(r.get(c)) for r in rows)]  # fmt: skip
    if not cols:
        return [pad + "none"]
    shown: list[dict[str, Any] | None] = list(rows)
    if len(rows) > MAX_ROWS:
        shown = [*rows[: MAX_ROWS - 5], None, *rows[-5:]]
    head = [(heads or {}).get(c) or _head(c) for c in cols]
    cells = [None if r is None else [_cell(c, r.get(c)) for c in cols] for r in shown]
    numeric = [all(NUMBER.fullmatch(row[i]) for row in cells if row and row[i])
               for i in range(len(cols))]  # fmt: skip
    widths = [max([len(h)] + [len(p) for row in cells if row for p in row[i].split("\n")])
              for i, h in enumerate(head)]  # fmt: skip
    room = width - len(pad)

    def least(i: int) -> int:
        return widths[i] if numeric[i] else min(widths[i], max(20, len(head[i])))

    def span(idx: Sequence[int], size: Callable[[int], int] = widths.__getitem__) -> int:
        return sum(size(i) for i in idx) + 2 * (len(idx) - 1)

    grid, below = list(range(len(cols))), []
    while span(grid, least) > room:  # not even wrapped: the longest prose goes under its row
        prose = [i for i in grid[1:] if not numeric[i] and widths[i] > 40]
        if not prose:
            break
        below.append(max(prose, key=widths.__getitem__))
        grid.remove(below[-1])
    while span(grid) > room:  # wrapped: the widest text column a character narrower each time
        text = [i for i in grid if widths[i] > least(i)]
        if not text:
            break
        widths[max(text, key=widths.__getitem__)] -= 1
    keys = 1
    while keys < len(grid) and not numeric[grid[keys]] and span(grid[: keys + 1]) <= room // 2:
        keys += 1
    blocks: list[list[int]] = [[]]
    for i in grid[keys:]:
        if blocks[-1] and span([*grid[:keys], *blocks[-1], i]) > room:
            blocks.append([])
        blocks[-1].append(i)
    out: list[str] = []
    for b, block in enumerate(blocks):
        idx = [*grid[:keys], *block]
        under = below if b == len(blocks) - 1 else []
        if out:
            out.append("")
        line = [head[i].rjust(widths[i]) if numeric[i] else head[i].ljust(widths[i]) for i in idx]
        out.append((pad + "  ".join(line)).rstrip())
        wrapped = [None if row is None else
                   {i: [ln for p in row[i].split("\n") for ln in
                        (textwrap.wrap(p, widths[i]) or [""])] for i in idx}
                   for row in cells]  # fmt: skip
        # rows of several lines each are told apart by a blank line
        apart = bool(under) or any(len(p) > 1 for ps in wrapped if ps for p in ps.values())
        for k, (row, parts) in enumerate(zip(cells, wrapped, strict=True)):
            if row is None or parts is None:
                out.append(f"{pad}… {len(rows) - MAX_ROWS} more rows (--json has them all)")
                continue
            if apart and k:
                out.append("")
            for n in range(max(len(p) for p in parts.values())):
                line = []
                for i in idx:
                    text = parts[i][n] if n < len(parts[i]) else ""
                    line.append(text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i]))
                out.append((pad + "  ".join(line)).rstrip())
            for i in under:
                label = f"{pad}    {head[i]}: "
                for p, text in enumerate(t for t in row[i].split("\n") if t):
                    out += _wrap(label if p == 0 else " " * len(label), text, width)
    return out


# ---------------------------------------------------------------- layouts of the main commands


def _member(model: str) -> str:
    """How a seed of ``model`` is called: a zoo seed, or a family's member number."""
    from landscape.models.zoo import ZOO

    return "seed" if model in ZOO else "member"


def _checks(r: dict[str, Any], aligned: str = "B") -> str:
    parts = [f"{number(r.get('function_check'))} for aligned {aligned}"]
    if r.get("function_check_a") is not None:
        parts.append(f"{number(r['function_check_a'])} for processed A")
    verdict = "ok" if r.get("function_ok", True) else "FAILED, see the warnings above"
    return f"max |Δlogits| {' and '.join(parts)}: {verdict}"


def _time(r: dict[str, Any]) -> str:
    text = _secs(r.get("seconds"))
    if r.get("matching_seconds") is not None:
        text += f" (matching {_secs(r['matching_seconds'])})"
    if r.get("device"):
        text += f" on {r['device']}"
    if "cached" in r:
        text += ", read from the cache" if r["cached"] else ", computed now"
    return text


def _where(r: dict[str, Any], path: str = "along the straight line") -> str:
    space = r.get("space") or "weights"
    return f"the {r['split']} split, {path} in the {space} space"


def _alignment(r: dict[str, Any]) -> str:
    if r["method"] == "naive":
        return "none (naive): B as trained"
    method = METHOD_WORDS.get(r["method"], r["method"])
    return f"{method} under {GROUP_WORDS.get(r['group'], r['group'])}"


def _at(point: Sequence[float]) -> str:
    return "(w_A, w_B, w_C) = (" + ", ".join(number(x) for x in point) + ")"


def _index(values: Sequence[float], target: float) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - target))


def _curve(r: dict[str, Any]) -> list[str]:
    """The curve as a few rows: λ = 0, ¼, ½, ¾, 1 and the two peaks (every row if few)."""
    lam, loss, acc = r["lambdas"], r["loss"], r["accuracy"]
    n = len(lam)
    peaks = {_index(lam, r["lambda_peak_loss"]): "loss barrier peak"}
    if r.get("lambda_peak_accuracy") is not None:
        i = _index(lam, r["lambda_peak_accuracy"])
        peaks[i] = "both peaks" if i in peaks else "accuracy barrier peak"
    pick = set(range(n)) if n <= 9 else {round(q * (n - 1)) for q in (0, 0.25, 0.5, 0.75, 1)}
    rows = [{"λ": lam[i], "loss": loss[i], "accuracy": acc[i], "": peaks.get(i, "")}
            for i in sorted(pick | set(peaks))]  # fmt: skip
    title = "curve" if len(rows) == n else f"curve, {len(rows)} of {n} points (--json has all)"
    return [title, *columns(rows, "  ")]


@layout("barrier", "pair-barrier")
def _show_barrier(r: dict[str, Any]) -> list[str]:
    if "a" in r:  # pair-barrier: two checkpoint paths
        models = [("model A", f"{r['a']}, at λ = 1"), ("model B", f"{r['b']}, at λ = 0")]
    else:
        word = _member(r["model"])
        a, b = r["seeds"]
        models = [("models", f"{r['model']}: A = {word} {a} at λ = 1, B = {word} {b} at λ = 0, "
                             "aligned to A")]  # fmt: skip
    (la, lb), (aa, ab) = r["endpoint_loss"], r["endpoint_accuracy"]
    peak = r.get("lambda_peak_accuracy")
    facts = [
        ("loss barrier", f"{_nats(r['barrier_loss'])}, highest at λ = "
                         f"{number(r['lambda_peak_loss'])}"),
        ("accuracy barrier", _pct(r["barrier_accuracy"])
                             + (f", highest at λ = {number(peak)}" if peak is not None else "")),
        *models,
        ("alignment", _alignment(r)),
        ("measured on", _where(r)),
        ("endpoint losses", f"A {number(la)}, B {_nats(lb)}"),
        ("endpoint accuracies", f"A {_pct(aa)}, B {_pct(ab)}"),
    ]  # fmt: skip
    if "a" in r:
        data = r.get("data")
        if isinstance(data, dict):  # what was evaluated: the note says it in words
            data = data.get("note") or _value("data", data)
        facts += [("architecture", r["architecture"]),
                  ("parameters", _bare("count", r["parameters"])), ("data", str(data))]  # fmt: skip
    facts += [("function check", _checks(r)), ("time", _time(r))]
    return [*_facts(facts), "", *_curve(r)]


def _line_name(line: dict[str, Any]) -> str:
    return "naive" if line["method"] == "naive" else method_key(line["method"], line["group"])


def _curvature_rows(line: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per λ: the batch's loss, the top eigenvalues, the trace ± its standard error and
    each block's top eigenvalue."""
    rows = []
    for i, lam in enumerate(line["lambdas"]):
        trace = line["trace"][i]
        se = line["trace_se"][i]
        row = {"λ": lam, "loss": line["loss"][i],
               "top eigenvalues": ", ".join(number(v) for v in line["top_eigenvalues"][i]),
               "trace": None if trace is None else mean_pm(trace, se if se is not None
                                                            else math.nan)}  # fmt: skip
        for name, values in line.get("blocks", {}).items():
            row[name] = values[i]
        if not line["converged"][i]:
            row[""] = "not converged"
        rows.append(row)
    return rows


@layout("curvature")
def _show_curvature(r: dict[str, Any]) -> list[str]:
    word = _member(r["model"])
    a, b = r["seeds"]
    lines = r["lines"]
    mid = _index(lines[0]["lambdas"], 0.5)
    at = number(lines[0]["lambdas"][mid])
    sharp = ", ".join(f"{_line_name(x)} {number(x['top_eigenvalue'][mid])}" for x in lines)
    batch = r["batch"]
    top = "the largest" if r["top_k"] == 1 else f"the {r['top_k']} largest"
    facts = [
        ("top eigenvalue", f"at λ = {at}: {sharp}; at A {number(lines[0]['top_eigenvalue'][-1])},"
                           f" at B {number(lines[0]['top_eigenvalue'][0])}"),
        ("models", f"{r['model']}: A = {word} {a} at λ = 1, B = {word} {b} at λ = 0"),
        ("alignment", _alignment(r)),
        ("measured on", f"the loss on {batch['rows']} {batch['unit']} of the {r['split']} split "
                        f"({batch['predictions']:,} predictions, drawn by seed {r['seed']}); "
                        f"{r['parameters']:,} parameters, {r['dtype']} Hessian-vector "
                        f"products"),
        ("eigenvalues", f"{top} by Lanczos; trace by Hutchinson over {r['probes']} Rademacher "
                        "probes (± its standard error)" if r["probes"]
                        else f"{top} by Lanczos; no trace (--probes 0)"),
        ("function check", _checks(r)),
        ("time", _time(r)),
    ]  # fmt: skip
    out = _facts(facts)
    for line in lines:
        name = _line_name(line)
        products = sum(line["hessian_vector_products"])
        out += ["", f"{name} ({products} Hessian-vector products, "
                    f"{_secs(line['compute_seconds'])}, peak memory "
                    f"{number(line['compute_peak_rss_mb'])} MB)",
                *columns(_curvature_rows(line), "  ")]  # fmt: skip
    return out


@layout("triangle")
def _show_triangle(r: dict[str, Any]) -> list[str]:
    excess, acc, points = r["excess_loss"], r["accuracy"], r["points"]
    top = max(range(len(excess)), key=lambda i: excess[i])
    low = min(range(len(acc)), key=lambda i: acc[i])
    word = _member(r["model"])
    a, b, c = r["seeds"]
    how = "together over the triangle" if r.get("joint") else "edge by edge"
    (la, lb, lc), (aa, ab, ac) = r["corner_loss"], r["corner_accuracy"]
    facts = [
        ("loss barrier", f"{_nats(excess[top])} above the corners' loss plane, at "
                         f"{_at(points[top])}"),
        ("basin", f"{_pct(r['basin_fraction'])} of {len(points)} points lie at most "
                  f"{_nats(r['tol'])} above that plane"),
        ("lowest accuracy", f"{_pct(acc[low])} at {_at(points[low])}"),
        ("models", f"{r['model']}: A = {word} {a}, B = {word} {b}, C = {word} {c}; B and C "
                   f"aligned to A {how}"),
        ("alignment", _alignment(r)),
        ("measured on", _where(r, "over the plane through the three")),
        ("corner losses", f"A {number(la)}, B {number(lb)}, C {_nats(lc)}"),
        ("corner accuracies", f"A {_pct(aa)}, B {_pct(ab)}, C {_pct(ac)}"),
        ("function check", _checks(r, "B and C")),
        ("time", _time(r)),
    ]  # fmt: skip
    return _facts(facts)


@layout("surface")
def _show_surface(r: dict[str, Any]) -> list[str]:
    loss = [v for row in r["loss"] for v in row]
    acc = [v for row in r["accuracy"] for v in row]
    word = _member(r["model"])
    n = len(r["x"])
    spread = (f"loss {_nats(min(loss))} to {_nats(max(loss))}, accuracy {_pct(min(acc))} to "
              f"{_pct(max(acc))} over {n} × {n} points")  # fmt: skip
    models = [f"{p['label']}: loss {_nats(p['loss'])}, accuracy {_pct(p['accuracy'])} at "
              f"({number(p['x'])}, {number(p['y'])})" for p in r["points"]]  # fmt: skip
    if r["kind"] == "directions":
        e = number(r["extent"])
        vectors = "left where they are" if r["vectors"] == "zero" else "moved by α·θ"
        h = r.get("hessian")
        if h is None:
            along = (f"two filter-normalised random directions (seed {r['directions_seed']}; "
                     f"biases and gains {vectors})")  # fmt: skip
            hessian = []
        else:
            along = (f"the top two eigenvectors of its Hessian, filter-normalised (biases and "
                     f"gains {vectors})")  # fmt: skip
            lam, kappa, batch = h["eigenvalues"], h["axis_curvatures"], h["batch"]
            hessian = [
                ("eigenvalues", f"λ₁ = {number(lam[0])}, λ₂ = {number(lam[1])}"
                                f"{'' if h['converged'] else ' (Lanczos did not converge)'}; "
                                f"along the normalised axes the batch's loss curves as ½·κ·α², "
                                f"κ = {number(kappa[0])} (α) and {number(kappa[1])} (β)"),
                ("Hessian of", f"the loss on {batch['rows']} {batch['unit']} of the "
                               f"{h['split']} split ({batch['predictions']:,} predictions, drawn "
                               f"by seed {h['seed']}), {h['hessian_vector_products']} "
                               f"{h['dtype']} Hessian-vector products"),
            ]  # fmt: skip
        facts = [
            ("surface", f"around {r['model']} {word} {r['seeds'][0]} along {along}"),
            *hessian,
            ("grid", f"α, β from −{e} to {e}: {spread}"),
            ("at the model", models[0]),
            ("measured on", f"the {r['split']} split"),
            ("time", _time(r)),
        ]  # fmt: skip
        return _facts(facts)
    facts = [
        ("surface", f"the plane through {r['model']} {word}s "
                    f"{', '.join(map(str, r['seeds']))}; the last two aligned to the first"),
        ("alignment", _alignment(r)),
        ("grid", f"{spread}, reaching {_pct(r['margin'])} of the triangle's larger side past it"),
        *(("models" if i == 0 else "", m) for i, m in enumerate(models)),
        *(("straight paths" if i == 0 else "",
           f"{p['label']}: loss barrier {_nats(p['barrier_loss'])}, accuracy barrier "
           f"{_pct(p['barrier_accuracy'])}") for i, p in enumerate(r["paths"])),
        ("measured on", f"the {r['split']} split"),
        ("function check", _checks(r, "B and C")),
        ("time", _time(r)),
    ]  # fmt: skip
    return _facts(facts)


def _pairs_text(pairs: Sequence[Sequence[int]]) -> str:
    n = len(pairs)
    return f"{n} pair{'s' if n != 1 else ''} of seeds (" + ", ".join(
        f"{a}–{b}" for a, b in pairs) + ")"  # fmt: skip


def _pm(kind: str, mean: Any, sem: Any, many: bool) -> str:
    """A mean, ± its standard error where there is more than one pair."""
    if many and _isnumber(mean) and _isnumber(sem):
        return mean_pm(mean, sem, percent=kind == "%")
    text = _bare(kind, mean)
    return f"{text} ± {_bare(kind, sem)}" if many and sem is not None else text


def _health(r: dict[str, Any]) -> str:
    bad = [x for x in r.get("rows", []) if not x.get("function_ok", True)]
    if not bad and r.get("function_ok", True):
        return "function checks: every alignment kept both functions"
    return f"function checks: {len(bad)} row(s) FAILED, see the warnings above"


@layout("table")
def _show_table(r: dict[str, Any]) -> list[str]:
    many = len(r["pairs"]) > 1
    spaces = r.get("spaces") or [r.get("space", "weights")]
    rows = [{"method": x["method"], "group": x["group"],
             **({"space": x["space"]} if len(spaces) > 1 else {}),
             "loss": _pm("", x["barrier_loss"], x.get("barrier_loss_sem"), many),
             "accuracy": _pm("%", x["barrier_accuracy"], x.get("barrier_accuracy_sem"), many),
             "paper": x.get("paper") or ""} for x in r["rows"]]  # fmt: skip
    where = f"{' and '.join(spaces)} space{'s' if len(spaces) > 1 else ''}"
    title = f"{r['model']}: barriers over {_pairs_text(r['pairs'])}; {r['split']} split, {where}"
    heads = {"loss": "loss barrier (nats)" + (" ± s.e.m." if many else ""),
             "accuracy": "accuracy barrier", "paper": "paper (nats)"}  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    if r.get("learned_options"):  # settings other than the library's defaults
        said = ", ".join(f"{k} {v}" for k, v in r["learned_options"].items())
        lines += _wrap("learned rows: ", said)
    paper = r.get("paper")
    if isinstance(paper, dict) and paper.get("source"):
        lines += _wrap("paper: ", paper["source"])
    return [*lines, _health(r)]


@layout("ablation")
def _show_ablation(r: dict[str, Any]) -> list[str]:
    rows = []
    for step in r["steps"]:
        many = len(step["pairs"]) > 1
        first = True
        for c in step["cells"]:
            rows.append({"entry": step["label"] if first else "",
                         "pairs": " ".join(f"{a}–{b}" for a, b in step["pairs"]) if first
                         else "",
                         "test loss": _pm("", step["test_loss"], step["test_loss_sem"], many)
                         if first else "",
                         "method": ("naive" if c["method"] == "naive"
                                    else f"{c['method']}/{c['group']}")
                         + (", calibrated" if c.get("calibrated") else ""),
                         "space": c["space"],
                         "loss": _pm("", c["barrier_loss"], c.get("barrier_loss_sem"), many),
                         "per pair": " ".join(f"{v:.3g}" for v in c["per_pair_loss"]),
                         "accuracy": _pm("%", c["barrier_accuracy"],
                                         c.get("barrier_accuracy_sem"), many)})  # fmt: skip
            first = False
    heads = {"test loss": "test loss (nats)", "loss": "loss barrier (nats)",
             "accuracy": "accuracy barrier"}  # fmt: skip
    title = (f"the Llama ablation: barriers over every pair of each entry's seeds (mean ± "
             f"s.e.m. over pairs); {r['split']} split")  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    lines += ["the entries"]
    lines += columns([{"entry": s["label"], "model": s["model"], "what it changes": s["change"]}
                      for s in r["steps"]], "  ")  # fmt: skip
    if r.get("missing"):
        lines += _wrap("not measured yet: ", ", ".join(m["label"] for m in r["missing"]))
    if r.get("learned_options"):
        said = ", ".join(f"{k} {v}" for k, v in r["learned_options"].items())
        lines += _wrap("learned rows: ", said)
    return [*lines, "", _health(r)]


@layout("kv-sharing")
def _show_kv_sharing(r: dict[str, Any]) -> list[str]:
    many = len(r["pairs"]) > 1
    rows = [{"pair": f"{x['seeds'][0]}–{x['seeds'][1]}",
             "shared": _bare("", x["shared_barrier_loss"]),
             "relaxed": _bare("", x["relaxed_barrier_loss"]),
             "shared acc": _bare("%", x["shared_barrier_accuracy"]),
             "relaxed acc": _bare("%", x["relaxed_barrier_accuracy"])} for x in r["rows"]]
    rows.append({"pair": "mean", "shared": _pm("", r["shared_barrier_loss"],
                                               r["shared_barrier_loss_sem"], many),
                 "relaxed": _pm("", r["relaxed_barrier_loss"], r["relaxed_barrier_loss_sem"],
                                many)})  # fmt: skip
    heads = {"shared": "shared keys/values (nats)", "relaxed": "copied per head (nats)",
             "shared acc": "accuracy, shared", "relaxed acc": "accuracy, copied"}
    title = (f"{r['model']}: {r['method']}/{r['group']} with grouped-query sharing and with "
             f"keys and values copied per query head; {r['split']} split, {r['space']} space")
    return [*_wrap("", title), "", *columns(rows, heads=heads), "",
            f"copies against originals: max |Δlogits| {r['expansion_check']:.1e} (float64)",
            "function checks: " + ("every alignment kept both functions" if r["function_ok"]
                                   else "FAILED, see the warnings above")]  # fmt: skip


@layout("controls")
def _show_controls(r: dict[str, Any]) -> list[str]:
    many = len(r["pairs"]) > 1
    rows, last = [], None
    for x in r["rows"]:
        rows.append({"control": x["control"] if x["control"] != last else "",
                     "method": x["method"], "group": x["group"],
                     "loss": _pm("", x["barrier_loss"], x.get("barrier_loss_sem"), many),
                     "accuracy": _pm("%", x["barrier_accuracy"], x.get("barrier_accuracy_sem"),
                                     many),
                     "removed": _pct(x.get("fraction_removed"))})  # fmt: skip
        last = x["control"]
    heads = {"loss": "loss barrier (nats)" + (" ± s.e.m." if many else ""),
             "accuracy": "accuracy barrier", "removed": "of naive removed"}  # fmt: skip
    title = (f"{r['model']}: real pairs against control pairs over {_pairs_text(r['pairs'])}; "
             f"{r['split']} split, {r.get('space') or 'weights'} space")  # fmt: skip
    legend = [{"control": c["control"], "disagreement": c.get("disagreement"),
               "what the pair is": c["description"]} for c in r.get("controls", [])]  # fmt: skip
    lines = [*_wrap("", title), "", *columns(rows, heads=heads), ""]
    if legend:
        heads = {"disagreement": "predictions differ"}
        lines += ["the controls", *columns(legend, "  ", heads=heads), ""]
    if r.get("path_task"):
        lines += _wrap("", r["path_task"][0].upper() + r["path_task"][1:] + ".")
    return [*lines, _health(r), f"time: {_time(r)}"]


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


def _seed_ranges(seeds: Sequence[int]) -> str:
    """0, 1, 2, 5 → 0–2, 5."""
    out: list[tuple[int, int]] = []
    for s in sorted(seeds):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in out) or "none"


@layout("zoo")
def _show_zoo(r: dict[str, Any]) -> list[str]:
    rows = [{"name": m["name"], "dataset": m["dataset"], "parameters": m["parameters"],
             "seeds": (_seed_ranges(m.get("shipped_seeds") or []) if m.get("ships", True)
                       else "not shipped"),
             "description": f"{m['description']}\n{m['architecture']}"}
            for m in r["models"]]  # fmt: skip
    return [f"{len(rows)} zoo models; the seeds shown are shipped and load at once, any other is "
            "trained on first use", "", *columns(rows)]  # fmt: skip


@layout("widths")
def _show_widths(r: dict[str, Any]) -> list[str]:
    narrow = {n["factor"]: n for n in r.get("narrow", [])}
    rows = [{"k": x["factor"], "width": x["width"], "method": x["method"],
             "loss": x["barrier_loss"], "accuracy barrier": x["barrier_accuracy"],
             "B test loss": narrow.get(x["factor"], {}).get("test_loss"),
             "B test accuracy": narrow.get(x["factor"], {}).get("test_accuracy")}
            for x in r["rows"]]  # fmt: skip
    a, b = r["seeds"]
    title = (f"{r['model']} seed {a} (width {r['d_model']}) against seed {b} at width "
             f"{r['d_model']}/k, embedded semi-orthogonally and aligned under "
             f"{r.get('group', 'orth')}; {_where(r)}")  # fmt: skip
    heads = {"loss": "loss barrier (nats)", "B test loss": "B test loss (nats)"}
    return [*_wrap("", title), "", *columns(rows, heads=heads), "", _health(r),
            f"time: {_time(r)}"]  # fmt: skip


@layout("matrix")
def _show_matrix(r: dict[str, Any]) -> list[str]:
    """The two seeds × seeds grids, row = A, column = B aligned to it (diagonal: —)."""
    seeds = [str(s) for s in r["seeds"]]
    label = method_key(r["method"], r.get("group"))
    lines = [f"barrier matrix of {r['model']}: {label}, {r['space']} space, {r['split']} split, "
             f"{len(r['pairs'])} pair(s)"]  # fmt: skip
    width = max(8, *(len(s) for s in seeds))
    for key, title in (("barrier_loss", "loss barrier (nats)"),
                       ("barrier_accuracy", "accuracy barrier (fraction)")):  # fmt: skip
        lines += ["", title, "A \\ B".ljust(width) + "".join(s.rjust(width) for s in seeds)]
        for i, row in enumerate(r[key]):
            cells = ("—" if i == j else number(v) for j, v in enumerate(row))
            lines.append(seeds[i].ljust(width) + "".join(c.rjust(width) for c in cells))
    return lines


@layout("merges")
def _show_merges(r: dict[str, Any]) -> list[str]:
    """Per path (the line, then each operator), the barrier naive, aligned and the gain."""
    pairs = [p["seeds"] for p in r["pairs"]]
    many = len(pairs) > 1
    aligned = _alignment(r) if r["method"] != "naive" else "naive (no alignment)"
    rows = []
    for x in r["rows"]:
        row = {"operator": "straight line" if x["operator"] == "line" else x["operator"]}
        for metric, kind in (("loss", ""), ("accuracy", "%")):
            for col in ("naive", "aligned", "gain"):
                key = f"{metric}_{col}"
                row[f"{metric} {col}"] = _pm(kind, x[key], x.get(f"{key}_sem"), many)
        rows.append(row)
    spread = " ± s.e.m." if many else ""
    heads = {"loss naive": f"loss naive (nats){spread}", "loss aligned": "loss aligned",
             "loss gain": "gain", "accuracy naive": "accuracy naive",
             "accuracy aligned": "accuracy aligned", "accuracy gain": "gain"}  # fmt: skip
    title = (f"{r['model']}: barriers of mergekit's merge operators over {_pairs_text(pairs)}; "
             f"{r['split']} split, {r['points']} points on λ")  # fmt: skip
    facts = [
        ("alignment", aligned),
        ("operators", f"B the base, A − B the task vector at weight λ (λ = 1 is A); density "
                      f"{number(r['density'])}, DARE seed {r['merge_seed']}; mergekit "
                      f"{r['mergekit']}"),
        ("barriers", "against the chord between A and B; gain = naive − aligned (positive: "
                     "the alignment lowers the barrier)"),
        ("time", _secs(r.get("seconds"))),
    ]  # fmt: skip
    verdict = ("function checks: every alignment kept both functions" if r.get("function_ok", True)
               else "function checks: FAILED, see the warnings above")  # fmt: skip
    return [*_wrap("", title), "", *columns(rows, heads=heads), "", *_facts(facts), verdict]


@layout("curve")
def _show_curve(r: dict[str, Any]) -> list[str]:
    """Per alignment, the straight line's and the curve's barriers and highest loss."""
    kind = {"bezier": "Bézier curve", "chain": "polygonal chain"}.get(r["kind"], r["kind"])
    bends = f"{r['bends']} bend{'s' if r['bends'] != 1 else ''}"
    rows = [{"alignment": x["alignment"], "path": "straight line" if x["path"] ==
             "straight line" else kind, "loss": _nats(x["loss barrier (nats)"]),
             "accuracy": _pct(x["accuracy barrier (fraction)"]),
             "peak": _nats(x["max loss (nats)"])} for x in r["rows"]]  # fmt: skip
    heads = {"loss": "loss barrier", "accuracy": "accuracy barrier", "peak": "highest loss"}
    a, b = r["seeds"]
    title = (f"{r['model']} seeds {a}–{b}: a {kind} ({bends}) beside the straight line; "
             f"{r['split']} split, {r['points']} points on λ")  # fmt: skip
    trained = r["alignments"][-1]
    facts = [
        ("alignment", _alignment(r) if r["method"] != "naive" else "naive (no alignment)"),
        ("curve", f"control points trained {r['steps']} steps on the training split (Adam, lr "
                  f"{number(r['lr'])} cosine-decayed, batch {r['batch_size']}, seed "
                  f"{r.get('train_seed', 0)}), A and B fixed; {number(trained['training_seconds'])}"
                  " s"),
        ("barriers", "against the chord between A and B, at the line's λ"),
        ("time", _secs(r.get("seconds")) + (", read from the cache" if all(
            x["cached"] for x in r["alignments"]) else ", computed now")),
    ]  # fmt: skip
    verdict = ("function checks: every alignment kept both functions" if r.get("function_ok", True)
               else "function checks: FAILED, see the warnings above")  # fmt: skip
    return [*_wrap("", title), "", *columns(rows, heads=heads), "", *_facts(facts), verdict]


@layout("spawn")
def _show_spawn(r: dict[str, Any]) -> list[str]:
    """One row per spawn step: the children's barrier naive and aligned, and their accuracy."""
    many = r["children"] > 2
    acc: dict[int, list[float]] = {}
    for m in r["members"]:
        acc.setdefault(m["step"], []).append(m["test_accuracy"])
    table: dict[int, dict[str, Any]] = {}
    for x in r["rows"]:
        row = table.setdefault(x["step"], {"step": x["step"]})
        which = "naive" if x["method"] == "naive" else "aligned"
        row[f"{which} loss"] = _pm("", x["barrier_loss"], x.get("barrier_loss_sem"), many)
        row[f"{which} accuracy"] = _pm("%", x["barrier_accuracy"], x.get("barrier_accuracy_sem"),
                                       many)  # fmt: skip
    for k, row in table.items():
        row["children accuracy"] = _pct(sum(acc[k]) / len(acc[k]))
    heads = {"naive loss": "naive (nats)", "naive accuracy": "naive acc",
             "aligned loss": "aligned (nats)", "aligned accuracy": "aligned acc",
             "children accuracy": "children's acc"}  # fmt: skip
    title = (f"{r['model']}: {r['children']} children spawned from seed {r['seed']}'s run at step "
             f"k of {r['steps']}, each with its own data order; barriers between them on the "
             f"{r['split']} split, {r['points']} points on λ")  # fmt: skip
    facts = [
        ("alignment", _alignment(r) if r["method"] != "naive" else "naive (no alignment)"),
        ("barriers", "loss and accuracy barrier between the children along the straight line, "
                     "mean over their pairs"),
        ("parent", f"snapshots every {r['every']} steps (parameters and optimizer state)"),
        ("time", _secs(r.get("seconds"))),
    ]  # fmt: skip
    verdict = ("function checks: every alignment kept both functions" if r.get("function_ok", True)
               else "function checks: FAILED, see the warnings above")  # fmt: skip
    return [*_wrap("", title), "", *columns(list(table.values()), heads=heads), "",
            *_facts(facts), verdict]  # fmt: skip


@layout("recover")
def _show_recover(r: dict[str, Any]) -> list[str]:
    """One row per planted level: units recovered, distance, checks, barrier, seconds."""
    method = METHOD_WORDS.get(r["method"], "no alignment (naive)")
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
