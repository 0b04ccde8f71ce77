"""The pages read the shipped results (assets/results): opened with their default choices on a
shipped zoo entry from an empty cache, they draw their figures while every computation that a
miss would start fails."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from landscape.store.paths import shipped_results_root
from tests.app.common import MAIN, ok

MODEL = "vit-digits"  # the smallest transformer entry with shipped views


def _shipped(view: str) -> bool:
    index = shipped_results_root() / "index.json"
    rows = json.loads(index.read_text()) if index.is_file() else []
    return any(r["model"] == MODEL and r["view"] == view for r in rows)


@pytest.fixture
def _fresh_memory():
    import streamlit as st

    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def _nothing_computes(monkeypatch):
    """Every computation behind the pages raises: what they draw was read."""
    from landscape.experiments import atlas, surfaces
    from landscape.experiments.barriers import alignment, pipeline
    from landscape.experiments.eigen import view as eigenview
    from landscape.experiments.gauge import runner as gauge_runner

    def refuse(*args, **kwargs):
        raise AssertionError("computed instead of read")

    monkeypatch.setattr(eigenview, "pair_angles", refuse)
    for module in (alignment, pipeline):  # align's matching, and the pipeline's unstored one
        monkeypatch.setattr(module, "_match", refuse)
    monkeypatch.setattr(atlas, "_compute", refuse)
    monkeypatch.setattr(surfaces, "_evaluate", refuse)
    for part in ("_table_part", "scramble_test", "claim_check", "recovery_under_drift",
                 "trajectory_transport"):  # fmt: skip
        monkeypatch.setattr(gauge_runner, part, refuse)


def _open(page: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page(f"views/{page}.py")
    at.session_state["model"] = MODEL
    return at.run()


@pytest.mark.parametrize(
    ("page", "figures"),
    # gauge: table, scramble, claims; surface: contours and 3-D
    [("eigenangles", 3), ("atlas", 1), ("gauge", 3), ("surface", 2)],
)
def test_a_page_draws_the_shipped_default_view_without_computing(
    page, figures, _fresh_memory, _nothing_computes
):
    if not _shipped(page):
        pytest.skip(f"no shipped {page} view of {MODEL}")
    at = _open(page)
    ok(at)  # a computation started would have failed in a card
    assert len(at.get("plotly_chart")) == figures
