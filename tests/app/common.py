"""Helpers of the app tests: the app's entry file, the check that a page ran cleanly, the
figure a page last drew under a key (as the export report keeps it), and a start button
clicked where a long run waits for one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def ok(at: AppTest) -> None:
    """The page ran without an exception or an error box (the messages, when it did not)."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def drawn(at: AppTest, key: str) -> Any:
    """The export report's entry of the figure last drawn under ``key`` (a ReportFigure)."""
    from app.state import FIGURES, LATEST

    return at.session_state[FIGURES][at.session_state[LATEST][key]]


def start_if_asked(at: AppTest, key: str) -> None:
    """Click the start button ``key`` where the page shows one: a long run waits for a click
    unless an earlier test in this process stored its result or measured it quick."""
    if any(b.key == key for b in at.button):
        at.button(key=key).click().run()
