"""Helpers of the app tests: the app's entry file, and the check that a page ran cleanly."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def ok(at: AppTest) -> None:
    """The page ran without an exception or an error box (the messages, when it did not)."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
