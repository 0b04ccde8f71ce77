"""Small building blocks shared by the pages: controls, figures with export, long runs and the
one failure card."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import state
from app.navigation import pages
from landscape.errors import LandscapeError
from landscape.models.registry import architecture
from landscape.models.zoo import ZOO
from landscape.plots import export
from landscape.progress import Progress, fraction

# Presentation mode, for a projector at 1920×1080: text, tables and metrics about 1.5× larger
# (figures are redrawn larger by landscape.plots.theme.projector), metrics' deltas whole, the
# Controls popover wide enough for its choices' tags, and a sidebar wide enough for the page
# names at that size.
PRESENTATION_CSS = """
<style>
  html, body, [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
  [data-testid="stWidgetLabel"] p, [data-testid="stCaptionContainer"]
    { font-size: 1.45rem !important; }
  [data-testid="stMainBlockContainer"]
    { padding: 2.5rem 2.5rem 6rem 2.5rem !important; max-width: none !important; }
  h1 { font-size: 2.8rem !important; padding: 0 !important; }
  h2, h3 { font-size: 2rem !important; }
  [data-testid="stMetric"] [data-testid], [data-testid="stMetric"] [data-testid] p
    { white-space: normal !important; overflow: visible !important;
      text-overflow: clip !important; max-width: none !important; }
  [data-testid="stMetric"] [data-testid="stMetricValue"] [data-testid] p
    { font-size: 2.8rem !important; line-height: 1.25 !important; white-space: nowrap !important; }
  [data-testid="stMetricLabel"] p { font-size: 1.45rem !important; }
  [data-testid="stMetric"] [data-testid="stMetricDelta"] [data-testid] p,
  [data-testid="stMetric"] [data-testid="stMetricDeltaDescription"] [data-testid] p
    { font-size: 1.45rem !important; }
  [data-testid="stTable"] td, [data-testid="stTable"] th { font-size: 1.4rem !important; }
  [data-testid="stDataFrame"] { zoom: 1.4; width: calc(100% / 1.4) !important; }
  [data-testid="stPopoverBody"] { width: min(1400px, 70vw) !important; max-width: none !important; }
  [data-testid="stPopoverBody"] [data-baseweb="tag"] { max-width: none !important; }
  [data-testid="stPopoverBody"] [data-baseweb="tag"] span { max-width: none !important;
    overflow: visible !important; text-overflow: clip !important; }
  [data-testid="stSidebar"] { min-width: 22rem !important; }
  [data-testid="stSidebarNavLink"] span[label] p { font-size: 1.3rem !important;
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
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
    """Title and a short description; in presentation mode larger text everywhere and the
    description folded into a button beside the title, so that the figure comes first."""
    if not presentation():
        st.title(title)
        st.markdown(intro)
        return
    st.markdown(PRESENTATION_CSS, unsafe_allow_html=True)
    with st.container(horizontal=True, vertical_alignment="center", gap="large"):
        st.title(title, width="content")
        with st.popover("About this page", icon=":material/info:"):
            st.markdown(intro)


@contextlib.contextmanager
def controls() -> Iterator[None]:
    """Where a page's controls go: in plain view, or behind a button for seminars."""
    if presentation():
        with st.popover("Controls", icon=":material/tune:"):
            yield
    else:
        with st.container(border=True):
            yield


def side_by_side(spec: list[float], gap: str = "large") -> list[Any]:
    """Columns for a figure and its explanation; in presentation mode one below the other, so
    that the figure has the whole width of the screen."""
    if presentation():
        return [st.container() for _ in spec]
    return list(st.columns(spec, gap=gap))


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


# ---------------------------------------------------------------- failures


@dataclass(frozen=True)
class Fix:
    """The one action that repairs a failure, offered on its card (:func:`show_error`).

    ``run``: done on a click, under a spinner (fetching data); then the in-memory caches are
    forgotten and the page is drawn again. ``settings``: session values set on a click, before
    the page is drawn again (a control switched off). ``page``: the URL path of the page where
    the user repairs it (training seeds, importing a family)."""

    label: str
    run: Callable[[], object] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    page: str | None = None


def one_line(err: BaseException | str) -> str:
    """The first line of a failure: a LandscapeError's own sentence, else the exception's type
    and message (never a traceback)."""
    text = err if isinstance(err, str) else str(err)
    if not isinstance(err, (str, LandscapeError)):
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    lines = text.strip().splitlines()
    return lines[0] if lines else "failed"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "failure"


def show_error(
    what: str, err: BaseException | str, fix: Fix | None = None, *, key: str | None = None
) -> None:
    """The failure card, the one way every page shows a failure: what failed, the one line that
    says why (``err``: an exception, or that line), and the one action that repairs it (``fix``)
    as a button where the app can do it, or a link to the page where the user can. Never a
    traceback; the rest of the page keeps working.

    ``what`` and the message may hold names, paths and text from files: shown as text. ``key``
    tells apart two cards with the same ``what`` on one page.
    """
    slug = key or _slug(what)
    with st.container(border=True, key=f"failure-{slug}"):
        st.error(f"**{plain(what)}:** {plain(one_line(err))}", icon=":material/error:")
        if fix is None:
            return
        if fix.page is not None:
            st.page_link(pages()[fix.page], label=fix.label, icon=":material/arrow_forward:")
            return
        failed = st.session_state.pop(f"fix-failed-{slug}", None)
        if failed:
            st.caption(f":material/error: {plain(fix.label)} did not work: {plain(failed)}")

        def settle() -> None:  # before the next run draws the widgets these keys belong to
            st.session_state.update(fix.settings)

        clicked = st.button(fix.label, key=f"fix-{slug}", type="primary", icon=":material/build:",
                            on_click=settle if fix.settings else None)  # fmt: skip
        if clicked and fix.run is not None:
            with st.spinner(f"{fix.label} …"):
                try:
                    fix.run()
                except Exception as e:  # shown on the card of the next run
                    st.session_state[f"fix-failed-{slug}"] = one_line(e)
            state.clear_memory_caches()
            st.rerun()


def _fetch_shakespeare() -> None:
    from landscape.data import datasets

    datasets.fetch_shakespeare()  # looked up at the click, so a test can stand in for it


def data_fix(name: str) -> Fix | None:
    """What repairs missing data of a zoo model or family: the Shakespeare text is fetched by
    the library; a family's files are imported again on the Models page; Fashion-MNIST comes
    from a system package, which the failure's own line names."""
    if name in ZOO and ZOO[name].dataset == "shakespeare":
        return Fix("Fetch Shakespeare (≈20 s)", run=_fetch_shakespeare)
    if is_imported(name):
        return Fix("Import the family again on the Models page", page="models")
    return None


def need_data(name: str) -> None:
    """Stop the page with a failure card (and its fix) when the evaluation data of ``name``
    cannot be read here: every result on the page would fail the same way."""
    problem = state.data_problem(name)
    if problem is not None:
        show_error(f"The data of {name}", problem, data_fix(name), key="data")
        st.stop()


def need_seeds(name: str, n: int) -> list[int]:
    """The model's seeds, or stop the page with a failure card if too few: a link to the Models
    page, where seeds are trained and families imported; a family's missing files are named."""
    seeds = seeds_of(name)
    if len(seeds) < n:
        if is_imported(name):
            missing = (_row(name) or {}).get("missing", [])
            gone = f" ({len(missing)} missing: {', '.join(missing[:3])})" if missing else ""
            line = (f"the imported family has {len(seeds)} member(s) on disk{gone}; this page "
                    f"needs at least {n}")  # fmt: skip
            fix = Fix("Import its checkpoints again on the Models page", page="models")
        else:
            line = f"{len(seeds)} trained seed(s); this page needs at least {n}"
            fix = Fix("Train more seeds on the Models page", page="models")
        show_error(f"Not enough checkpoints of {name}", line, fix, key="seeds")
        st.stop()
    return seeds


# ---------------------------------------------------------------- long runs


def duration(seconds: float) -> str:
    """``"8 s"``, ``"2 min 05 s"``: how long something took or will take, for people."""
    s = int(round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def estimate(stage: str, done: float, elapsed: float) -> str:
    """A progress bar's text: the stage, the share done, the time so far and, once a little of
    the work is done, the time left at the rate so far (``done`` is a fraction)."""
    bits = [f"{100 * done:.0f}%", f"{duration(elapsed)} so far"]
    if 0.02 <= done < 1 and elapsed >= 1:
        bits.append(f"about {duration(elapsed * (1 - done) / done)} left")
    return f"{stage} — " + ", ".join(bits) if stage else ", ".join(bits)


CANCELLED = "_long_runs_cancelled"  # session key: {run key: the inputs it was cancelled for}


class LongRun:
    """A long computation on the page: a progress bar that says how long is left, and a Cancel
    button. Pass it as the computation's ``progress``; :meth:`close` it when done.

    A click on Cancel makes Streamlit stop the running script at its next page update (the next
    progress report). With ``inputs``, for work a page starts on its own, the cancellation is
    remembered for those inputs: later runs show a note and a Run again button instead of
    starting over (:attr:`cancelled`). Without, a click started the work, and not clicking again
    is enough.
    """

    def __init__(self, label: str, *, key: str, inputs: Hashable | None = None) -> None:
        self.label, self.key = label, key
        self.t0 = time.perf_counter()
        self.slot = st.empty()
        memory = st.session_state.setdefault(CANCELLED, {})
        self.cancelled = inputs is not None and memory.get(key) == inputs
        with self.slot.container():
            if self.cancelled:
                st.info(f"Cancelled: {plain(label)}", icon=":material/cancel:")
                if st.button("Run again", key=f"again-{key}", icon=":material/replay:"):
                    memory.pop(key, None)
                    st.rerun()
                return
            with st.container(horizontal=True, vertical_alignment="center"):
                self.bar = st.progress(0.0, text=plain(label))
                if st.button("Cancel", key=f"cancel-{key}", icon=":material/cancel:"):
                    if inputs is not None:
                        memory[key] = inputs
                    st.rerun()

    def __call__(self, stage: str, done: float, total: float) -> None:
        share = min(max(fraction(done, total), 0.0), 1.0)
        self.bar.progress(share, text=plain(estimate(stage, share, self.seconds)))

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        """Remove the bar and the Cancel button."""
        self.slot.empty()


def run_in_status(
    compute: Callable[[Progress], Any], *, running: str, done: str | Callable[[Any], str],
    failed: str, what: str, key: str | None = None, inputs: Hashable | None = None,
    fix: Fix | None = None,
) -> Any:  # fmt: skip
    """``compute(progress)`` under a status box with a :class:`LongRun` (time left, Cancel).
    The box says ``running``, then ``done`` (a text, or one made from the result) with the time
    it took; on an error it says ``failed`` and a failure card below names ``what`` (with
    ``fix``). ``inputs``: as for :class:`LongRun`, for work started without a click. Returns the
    result, or None when it failed or was cancelled."""
    key = key or _slug(what)
    error = None
    with st.status(running, expanded=True) as status:
        run = LongRun(running, key=key, inputs=inputs)
        if run.cancelled:
            status.update(label=f"{what}: cancelled", state="error", expanded=True)
            return None
        try:
            result = compute(run)
        except Exception as err:
            error = err
            status.update(label=failed, state="error", expanded=False)
        else:
            label = done(result) if callable(done) else done
            status.update(label=f"{label} ({duration(run.seconds)})", state="complete",
                          expanded=False)  # fmt: skip
        run.close()
    if error is not None:
        show_error(what, error, fix, key=key)
        return None
    return result


def show_warnings(what: str, result: dict[str, Any]) -> None:
    """A warning box per warning of a result (a function check that is NaN or above the
    tolerance): the numbers beside it may not describe the checkpoints' functions."""
    for warning in result.get("warnings", []):
        st.warning(f"**{plain(what)}:** {plain(warning)}", icon=":material/warning:")


def figure(
    fig: go.Figure, name: str, *, data: Any = None, key: str | None = None,
    settings: dict[str, Any] | None = None, cache_keys: list[str] | None = None,
    tables: dict[str, list[dict[str, Any]]] | None = None,
) -> None:  # fmt: skip
    """A plotly figure with PNG/SVG (at the chosen export size) and CSV downloads, generated
    only on click, and registered for the session's export report.

    ``data``: the figure's tidy table (``landscape.plots.tidy``: a DataFrame or records), its
    CSV; without, the CSV is the traces' points. ``settings`` (model, seeds, method, group,
    space, split, points, …), ``cache_keys`` and ``tables`` (title → rows: the numbers the page
    shows beside the figure) go into the report beside the figure.
    """
    key = key or name
    # a figure drawn to a pixel box of its own (the triangles) is shown at that width
    width = "content" if fig.layout.width else "stretch"
    st.plotly_chart(fig, theme=None, key=f"fig-{key}", config={"displaylogo": False},
                    width=width)  # fmt: skip
    state.register_figure(key, export.ReportFigure(name, fig, dict(settings or {}),
                                                   list(cache_keys or []),
                                                   dict(tables or {})))  # fmt: skip
    if presentation():
        return
    row = st.container(horizontal=True, gap="small", vertical_alignment="bottom")
    size = row.selectbox(
        "Export size",
        list(export.SIZES),
        index=list(export.SIZES).index(export.DEFAULT_SIZE),
        key=f"size-{key}",
        format_func=lambda s: export.SIZES[s].label,
        width=240,
        label_visibility="collapsed",
        help="PNG and SVG size; fonts are scaled so that the text prints readably at it",
    )
    preset = export.SIZES[size]
    dpi = "" if size == "slide" else f", {round(preset.png_scale * export.PX_PER_INCH)} dpi"
    # Callables are run only when the button is clicked, so renders never start kaleido.
    row.download_button(
        "PNG",
        data=lambda: export.to_png(fig, size),
        file_name=f"{name}-{size}.png",
        mime="image/png",
        key=f"png-{key}",
        on_click="ignore",
        help=f"{preset.label}{dpi}",
    )
    row.download_button(
        "SVG",
        data=lambda: export.to_svg(fig, size),
        file_name=f"{name}-{size}.svg",
        mime="image/svg+xml",
        key=f"svg-{key}",
        on_click="ignore",
        help=f"Vector, {preset.label}",
    )
    row.download_button(
        "CSV",
        data=lambda: export.to_csv(fig if data is None else data),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv-{key}",
        on_click="ignore",
        help="The plotted numbers, one measured value per row",
    )


def report_button() -> None:
    """A download of the export report: every figure this session drew, with its settings,
    cache keys and the versions, in one HTML file. Built on click, from the figures drawn by
    then (the page below this button included)."""
    registry = state.figure_registry()

    def build() -> bytes:
        created = time.strftime("%Y-%m-%d %H:%M %Z")
        return export.report_html(list(registry.values()), created=created).encode()

    st.download_button(
        "Export report",
        data=build,
        file_name="landscape-report.html",
        mime="text/html",
        key="report",
        on_click="ignore",
        icon=":material/description:",
        help="One HTML file with every figure drawn this session (interactive, opens offline), "
        "the settings that made each, their cache keys and the library versions",
    )


def combo_label(method: str, group: str) -> str:
    return "naive" if method == "naive" else f"{method}/{group}"


def parse_combo(label: str) -> tuple[str, str]:
    """``"weight/orth"`` → ("weight", "orth"); ``"naive"`` → ("naive", "perm")."""
    method, _, group = label.partition("/")
    return method, group or "perm"


VALID_BG, INVALID_BG = "#e3f4ec", "#fbe6d9"


def styled_table(rows: list[dict[str, Any]], *, brief: bool = False):  # -> pandas Styler
    """A symmetry table (``landscape.symmetry.symmetry_table`` rows) as the pages show it:
    valid rows green, invalid ones orange, |Δlogits| in scientific notation. ``brief``: only
    what its figure needs (group, valid, |Δlogits|, the step that makes it valid), for a
    projector; what each acts on and why go to a details expander."""
    columns = {
        "group": [r["group"] for r in rows],
        "valid": ["✓ valid" if r["valid"] else "✗ invalid" for r in rows],
        "max |Δlogits|": [r["max_abs_dlogits"] for r in rows],
        "to make it valid": [r["needs"] or "—" for r in rows],
    }
    if not brief:
        columns |= {"acts on": [r["acts_on"] for r in rows], "why": [r["note"] for r in rows]}
    frame = pd.DataFrame(columns)
    colours = [VALID_BG if r["valid"] else INVALID_BG for r in rows]
    return frame.style.apply(
        lambda col: [f"background-color: {c}" for c in colours], axis=0
    ).format({"max |Δlogits|": "{:.1e}"})
