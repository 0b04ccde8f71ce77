"""How a page shows what went wrong: the one failure card (with the action that repairs it) and
a result's warnings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from app import state
from app.components.text import plain
from app.navigation import pages
from landscape.errors import LandscapeError


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


def failure_key(text: str) -> str:
    """A failure card's key (and its buttons'), made from what failed."""
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
    slug = key or failure_key(what)
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


def show_warnings(what: str, result: dict[str, Any]) -> None:
    """A warning box per warning of a result (a function check that is NaN or above the
    tolerance): the numbers beside it may not describe the checkpoints' functions."""
    for warning in result.get("warnings", []):
        st.warning(f"**{plain(what)}:** {plain(warning)}", icon=":material/warning:")
