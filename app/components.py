"""Small building blocks shared by the pages: controls, figures with export, errors."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import state
from landscape.models.registry import architecture
from landscape.plots import export
from landscape.progress import Progress, fraction

PRESENTATION_CSS = """
<style>
  html, body, [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li
    { font-size: 1.3rem !important; }
  h1 { font-size: 3rem !important; }
</style>
"""


# Characters that start markdown, HTML, math ($) or Streamlit's own syntax (:red[...],
# :material/icon:, emoji shortcodes) anywhere in a line; "-" starts a list only at a line start.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#+.!|~$:=&^@])")
_LINE_START = re.compile(r"^([ \t]*)-", re.MULTILINE)


def plain(text: object) -> str:
    """``text`` for any Streamlit markdown body or label, shown exactly as written.

    File contents, paths, names, labels and error messages are untrusted: escaped with
    backslashes, they can add no image, link, HTML tag, formula or heading to a page.
    """
    return _LINE_START.sub(r"\1\\-", _MARKDOWN.sub(r"\\\1", str(text)))


def literal(text: object) -> str:
    """``text`` as an inline code span (monospace, nothing in it is markdown): for paths."""
    s = " ".join(str(text).splitlines())
    fence = "`" * (max(map(len, re.findall(r"`+", s)), default=0) + 1)
    return f"{fence} {s} {fence}"


def presentation() -> bool:
    """Whether the sidebar's presentation mode is on (larger fonts, controls tucked away)."""
    return bool(st.session_state.get("presentation", False))


def page_header(title: str, intro: str) -> None:
    """Title and a short description; in presentation mode larger text everywhere."""
    if presentation():
        st.markdown(PRESENTATION_CSS, unsafe_allow_html=True)
    st.title(title)
    st.markdown(intro)


@contextlib.contextmanager
def controls() -> Iterator[None]:
    """Where a page's controls go: in plain view, or a collapsed expander for seminars."""
    if presentation():
        with st.expander("Controls", expanded=False):
            yield
    else:
        with st.container(border=True):
            yield


def model() -> str:
    """The zoo model or imported family chosen in the sidebar."""
    return st.session_state.get("model") or state.zoo_status()[0]["name"]


def device() -> str | None:
    return st.session_state.get("device")


def _row(name: str) -> dict[str, Any] | None:
    """The zoo model's or imported family's row of ``state.zoo_status``."""
    return next((r for r in state.zoo_status() if r["name"] == name), None)


def seeds_of(name: str) -> list[int]:
    """Trained seeds (shipped or cached) of a zoo model."""
    row = _row(name)
    return [s["seed"] for s in row["seeds"]] if row else []


def seed_format(name: str) -> Callable[[int], str]:
    """How a seed reads in a control: the number, and a family member's label."""
    row = _row(name)
    labels = {s["seed"]: s.get("label") for s in row["seeds"]} if row else {}
    return lambda s: f"{s} · {labels[s]}" if labels.get(s) else str(s)


def is_imported(name: str) -> bool:
    row = _row(name)
    return bool(row and row["imported"])


def has_heads(name: str) -> bool:
    """Whether the model has attention heads (and so a circuits merge space)."""
    row = _row(name)
    return bool(row) and architecture(row["arch"]).attention


def run_in_status(
    compute: Callable[[Progress], Any], *, running: str, done: str | Callable[[Any], str],
    failed: str, what: str,
) -> Any:  # fmt: skip
    """``compute(progress)`` under a collapsed status box with a progress bar. The box says
    ``running``, then ``done`` (a text, or one made from the result); on an error it says
    ``failed`` and an error card names ``what``. Returns the result, or None when it failed."""
    with st.status(running, expanded=False) as status:
        bar = st.progress(0.0)
        try:
            result = compute(lambda stage, d, total: bar.progress(fraction(d, total), text=stage))
        except Exception as err:
            status.update(label=failed, state="error")
            show_error(what, err)
            return None
        status.update(label=done(result) if callable(done) else done, state="complete")
    return result


def need_seeds(name: str, n: int) -> list[int]:
    """The model's seeds, or stop the page with a pointer to the Models page if too few."""
    seeds = seeds_of(name)
    if len(seeds) < n:
        if is_imported(name):
            st.info(
                f"The imported family {plain(name)} has {len(seeds)} member(s) on disk; this page "
                f"needs at least {n}. Add more on the Models page, or pick another model family."
            )
        else:
            st.info(
                f"{plain(name)} has {len(seeds)} trained seed(s); this page needs at least {n}. "
                "Train more on the Models page, or pick another model family in the sidebar."
            )
        st.stop()
    return seeds


def show_error(what: str, err: BaseException) -> None:
    """A failure as a clear message on the page; the rest of the page keeps working.

    ``what`` and the message may hold names, paths and text from files: shown as text.
    """
    st.error(f"**{plain(what)} failed.** {type(err).__name__}: {plain(err)}",
             icon=":material/error:")  # fmt: skip


def show_warnings(what: str, result: dict[str, Any]) -> None:
    """A warning box per warning of a result (a function check that is NaN or above the
    tolerance): the numbers beside it may not describe the checkpoints' functions."""
    for warning in result.get("warnings", []):
        st.warning(f"**{plain(what)}:** {plain(warning)}", icon=":material/warning:")


def figure(fig: go.Figure, name: str, *, data: Any = None, key: str | None = None) -> None:
    """A plotly figure with PNG/SVG (paper theme) and CSV downloads, generated only on click.

    ``data`` (a DataFrame or records) replaces the figure's own traces in the CSV.
    """
    key = key or name
    st.plotly_chart(fig, theme=None, key=f"fig-{key}", config={"displaylogo": False})
    if presentation():
        return
    row = st.container(horizontal=True, gap="small")
    # Callables are run only when the button is clicked, so renders never start kaleido.
    row.download_button(
        "PNG",
        data=lambda: export.to_png(fig),
        file_name=f"{name}.png",
        mime="image/png",
        key=f"png-{key}",
        on_click="ignore",
        help="Paper theme, 2.5× resolution",
    )
    row.download_button(
        "SVG",
        data=lambda: export.to_svg(fig),
        file_name=f"{name}.svg",
        mime="image/svg+xml",
        key=f"svg-{key}",
        on_click="ignore",
        help="Vector, paper theme",
    )
    row.download_button(
        "CSV",
        data=lambda: export.to_csv(fig if data is None else data),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv-{key}",
        on_click="ignore",
        help="The plotted numbers",
    )


def combo_label(method: str, group: str) -> str:
    return "naive" if method == "naive" else f"{method}/{group}"


def parse_combo(label: str) -> tuple[str, str]:
    """``"weight/orth"`` → ("weight", "orth"); ``"naive"`` → ("naive", "perm")."""
    method, _, group = label.partition("/")
    return method, group or "perm"


VALID_BG, INVALID_BG = "#e3f4ec", "#fbe6d9"


def styled_table(rows: list[dict[str, Any]]):  # -> pandas Styler
    """A symmetry table (``landscape.symmetry.symmetry_table`` rows) as the pages show it:
    valid rows green, invalid ones orange, |Δlogits| in scientific notation."""
    frame = pd.DataFrame(
        {
            "group": [r["group"] for r in rows],
            "valid": ["✓ valid" if r["valid"] else "✗ invalid" for r in rows],
            "max |Δlogits|": [r["max_abs_dlogits"] for r in rows],
            "to make it valid": [r["needs"] or "—" for r in rows],
            "acts on": [r["acts_on"] for r in rows],
            "why": [r["note"] for r in rows],
        }
    )
    colours = [VALID_BG if r["valid"] else INVALID_BG for r in rows]
    return frame.style.apply(
        lambda col: [f"background-color: {c}" for c in colours], axis=0
    ).format({"max |Δlogits|": "{:.1e}"})
