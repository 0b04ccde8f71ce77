"""The Llama ablation page: a note where no ablation is stored (it never starts one), the
figure, table and curves of a stored one."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from landscape.experiments.barriers import ablation as abl
from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, ok

STEPS = (("mlp-digits", "the base"), ("vit-digits", "another model"))


def _open() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page("views/ablation.py")
    return at.run()


def test_without_a_stored_ablation_the_page_says_how_to_compute_it(monkeypatch):
    monkeypatch.setenv("LANDSCAPE_SHIPPED_RESULTS", "0")

    def never(*args, **kwargs):
        raise AssertionError("the page computed an ablation")

    monkeypatch.setattr(abl, "measure_barrier", never)
    at = _open()
    ok(at)
    assert any("landscape ablation" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_a_stored_ablation_draws_its_figure_table_and_curves(monkeypatch):
    for name, _ in STEPS:
        if len(available_seeds(name)) < 3:
            pytest.skip(f"fewer than 3 shipped {name} seeds")
    monkeypatch.setattr(abl, "STEPS", STEPS)
    monkeypatch.setattr(abl, "ROWS", (("naive", "perm"), ("weight", "orth")))
    monkeypatch.setattr(abl, "POINTS", 5)
    abl.ablation()  # the request the page reads, with these defaults
    at = _open()
    ok(at)
    assert any("one" in m.value for m in at.markdown)  # the confound, said at the top
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    assert len(at.dataframe) >= 1
    at.selectbox(key="abl_curves").set_value("vit-digits").run()
    ok(at)
    assert len(at.get("plotly_chart")) == 2
