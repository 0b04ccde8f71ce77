"""How a result is written for people: units read from the keys, numbers to four significant
digits, values and facts wrapped within WIDTH characters, rows as aligned columns, any result laid
out from its keys (:func:`human`), text made safe for a terminal; the registry of the commands'
layouts (:func:`layout`) and the phrases several layouts share.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from landscape.fields import Fields
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


# ---------------------------------------------------------------- phrases several layouts share


def _member(model: str) -> str:
    """How a seed of ``model`` is called: a zoo seed, or a family's member number."""
    from landscape.models.zoo import ZOO

    return "seed" if model in ZOO else "member"


def _field(kind: Fields | None, r: dict[str, Any], name: str, *default: Any) -> Any:
    """Field ``name`` of result ``r``: read through its kind's declaration
    (:meth:`landscape.fields.Fields.read`) where the layout names the kind, else as ``r`` has it
    (``default``, when given, where it has not)."""
    if kind is not None:
        return kind.read(r, name)
    return r.get(name, default[0]) if default else r[name]


def _time(r: dict[str, Any], kind: Fields | None = None) -> str:
    text = _secs(_field(kind, r, "seconds", None))
    matching = (_field(kind, r, "matching_seconds", None)
                if kind is None or "matching_seconds" in kind.names else None)  # fmt: skip
    if matching is not None:
        text += f" (matching {_secs(matching)})"
    device = (_field(kind, r, "device", None)
              if kind is None or "device" in kind.names else None)  # fmt: skip
    if device:
        text += f" on {device}"
    if ("cached" in kind.names) if kind is not None else ("cached" in r):
        text += ", read from the cache" if _field(kind, r, "cached") else ", computed now"
    return text


def _checks(r: dict[str, Any], aligned: str = "B", kind: Fields | None = None) -> str:
    parts = [f"{number(_field(kind, r, 'function_check', None))} for aligned {aligned}"]
    check_a = _field(kind, r, "function_check_a", None)
    if check_a is not None:
        parts.append(f"{number(check_a)} for processed A")
    ok = _field(kind, r, "function_ok", True)
    verdict = "ok" if ok else "FAILED, see the warnings above"
    return f"max |Δlogits| {' and '.join(parts)}: {verdict}"


def _where(r: dict[str, Any], path: str = "along the straight line",
           kind: Fields | None = None) -> str:  # fmt: skip
    space = _field(kind, r, "space", None) or "weights"
    return f"the {_field(kind, r, 'split')} split, {path} in the {space} space"


def _health(r: dict[str, Any], kind: Fields | None = None, row: Fields | None = None) -> str:
    """Whether every function check held: the result's and its rows' (``kind`` and ``row``:
    their declarations, where the layout names them; rows whose kind declares no
    ``function_ok`` carry none, and the result's says for them)."""
    rows = _field(kind, r, "rows", [])
    said = row is None or "function_ok" in row.names
    bad = [x for x in rows if said and not _field(row, x, "function_ok", True)]
    if not bad and _field(kind, r, "function_ok", True):
        return "function checks: every alignment kept both functions"
    return f"function checks: {len(bad)} row(s) FAILED, see the warnings above"


def _verdict(r: dict[str, Any], kind: Fields) -> str:
    """Whether every alignment of a result kept both functions (its ``function_ok``)."""
    if kind.read(r, "function_ok"):
        return "function checks: every alignment kept both functions"
    return "function checks: FAILED, see the warnings above"


def _aligns(r: dict[str, Any], kind: Fields | None = None) -> bool:
    """Whether the matching of result ``r`` moves B (``landscape.matching.result_aligns``,
    imported here: the summaries stay torch-free until a result is written): its ``aligns``
    where its kind declares one, else its method's registry entry."""
    from landscape.matching import result_aligns

    if kind is None:
        return result_aligns(r)
    said = kind.read(r, "aligns") if "aligns" in kind.names else None
    return result_aligns({"aligns": said, "method": kind.read(r, "method")})


def _key(r: dict[str, Any], kind: Fields | None = None) -> str:
    """The method key of result ``r`` (``weight/orth``; ``naive``, which aligns nothing): its
    ``method`` and ``group`` read through ``kind`` where the layout names it."""
    if kind is None:
        return method_key(r["method"], r.get("group"), aligns=_aligns(r))
    return method_key(kind.read(r, "method"), kind.read(r, "group"), aligns=_aligns(r, kind))


def _alignment(r: dict[str, Any], kind: Fields | None = None) -> str:
    name = _field(kind, r, "method")
    if not _aligns(r, kind):
        return f"none ({name}): B as trained"
    group = _field(kind, r, "group")
    return f"{METHOD_WORDS.get(name, name)} under {GROUP_WORDS.get(group, group)}"


def _matching(r: dict[str, Any], kind: Fields) -> str:
    """The matching of a result that draws a naive line beside its method's: the method's
    :func:`_alignment`, or ``naive (no alignment)`` when the method aligns nothing."""
    if _aligns(r, kind):
        return _alignment(r, kind)
    return f"{kind.read(r, 'method')} (no alignment)"


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
