"""Controls that outlive their page and live in the URL.

Streamlit forgets a widget's value at the end of a run that does not draw it, so leaving a page
resets its controls; and a copied link carries no state at all. Every control of the app is
therefore declared with :func:`remember` just before its widget:

- its value lives in session state under the widget's key, set here (the widget gets no default
  of its own) and re-saved at the start of every run by :func:`keep` (Streamlit's documented way
  to keep a widget's value while another page is shown);
- it is mirrored in ``st.query_params`` under a short name, so the address bar always holds a link
  to the view on screen (a control at its default is left out of the link);
- in the session's first run the link's value wins over the default. A value that is not valid
  here (a model that does not exist, a seed out of range, a word that is not an option) gives way
  to the default, and a small note under the control says so; the page never crashes on a link.

Values are written as text by :func:`text`: ``3``, ``naive``, ``weight/perm``, a pair as ``0-1``,
a list comma-separated, a switch as ``1``/``0``. A link is read by looking the text up among the
control's options, so nothing in a URL is parsed beyond that.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import streamlit as st

from app.components.text import literal

KEPT = "_memory_kept"  # widget keys declared so far in this session (kept across pages)
READ = "_memory_link_read"  # True once the session's first run is over: links are read once
WRITTEN = "_memory_written"  # query parameters written in this run


def text(value: Any) -> str:
    """``value`` as it reads in a link (module docstring)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return "-".join(text(v) for v in value)
    if isinstance(value, list):
        return ",".join(text(v) for v in value)
    return str(value)


def spoken(value: Any) -> str:
    """``value`` as a person reads it in a note: a switch as on/off, a pair as ``0 ↔ 1``, a list
    comma-separated (``none`` when empty)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return " ↔ ".join(spoken(v) for v in value)
    if isinstance(value, list):
        return ", ".join(spoken(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) or "none"


def keep() -> None:
    """Re-save every remembered control before any widget is drawn (called once per run, by
    ``app/main.py``): a value saved through session state survives a run that draws no widget
    for it, where a widget's own value would be dropped."""
    st.session_state[WRITTEN] = set()
    for key in st.session_state.get(KEPT, ()):
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def first_run_over() -> None:
    """The session's first run has read its link; later runs keep their own values (a link's
    parameter for one model must not set the same control of the next model chosen)."""
    st.session_state[READ] = True


def prune() -> None:
    """Drop the query parameters of controls this run did not draw (a control another model or
    page has), so that the address bar names exactly the view on screen. Called only after a
    run that reached its end: a page stopped early keeps its link for the next run."""
    written = st.session_state.get(WRITTEN, set())
    for param in [p for p in st.query_params if p not in written]:
        del st.query_params[param]


def remember(
    key: str,
    default: Any,
    *,
    param: str | None,
    options: Iterable[Any] | None,
    many: bool = False,
    most: int | None = None,
    label: str | None = None,
) -> Any:
    """Set ``st.session_state[key]`` for the widget about to be drawn with this ``key``, mirror it
    in the URL as ``param`` (None: kept across pages, but not in links, e.g. a file path), and
    return it.

    ``options`` are the widget's choices (for a slider, every value it can take; for a toggle,
    ``(False, True)``; None: any value, for text); ``many``: a multiselect, whose value is a list
    of options, at most ``most`` of them. The value is the one already in the session while it is
    still an option, else
    the link's (first run only), else ``default``. ``label`` names the control in the note about
    a link's value that is not an option.
    """
    choices = None if options is None else list(options)
    if key in st.session_state and _valid(st.session_state[key], choices, many, most):
        value = st.session_state[key]
    else:
        value = default
        link = None if param is None or st.session_state.get(READ) else st.query_params.get(param)
        if link is not None and choices is not None:
            parsed = _parse(link, {text(o): o for o in choices}, many)
            if parsed is None or not _valid(parsed, choices, many, most):
                shown = link if len(link) <= 40 else link[:40] + "…"
                # the link's text is anyone's: a code span on one line
                # (app.components.text.literal), so blank lines cannot end the span and turn the
                # rest into an image or a link
                what = f"{label} " if label else "value "
                st.caption(
                    f":material/link_off: The link's {what}{literal(shown)} is not an option "
                    f"here, so {label or 'this control'} starts at its default: "
                    f"{literal(spoken(default))}."
                )
            else:
                value = parsed
    st.session_state[key] = value
    st.session_state.setdefault(KEPT, set()).add(key)
    if param is not None and value != default:
        _write(param, text(value))
    elif param is not None and param in st.query_params:
        del st.query_params[param]  # a default needs no parameter: links stay short
    return value


def _valid(value: Any, choices: list[Any] | None, many: bool, most: int | None) -> bool:
    if choices is None:
        return True
    if many:
        return (isinstance(value, list) and all(v in choices for v in value)
                and (most is None or len(value) <= most))  # fmt: skip
    return value in choices


def _write(param: str, value: str) -> None:
    st.session_state.setdefault(WRITTEN, set()).add(param)
    if st.query_params.get(param) != value:
        st.query_params[param] = value


def _parse(link: str, by_text: dict[str, Any], many: bool) -> Any:
    """The option (or list of options) a link's text names, or None when any part names none."""
    if not many:
        return by_text.get(link)
    parts = [p for p in link.split(",") if p]
    if not all(p in by_text for p in parts):
        return None
    return [by_text[p] for p in parts]
