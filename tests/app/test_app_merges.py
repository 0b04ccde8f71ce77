"""The Interpolation page's merge operators: off by default, a short note where mergekit is
missing, and one pair's operators beside the line when asked (a zoo model merged in memory, a
Hugging Face family through mergekit's files)."""

from __future__ import annotations

import sys

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.common import MAIN, ok


@pytest.fixture(autouse=True)
def _families(tmp_path, monkeypatch):
    from app.state import timings as state

    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    monkeypatch.setattr(state, "RUN_SECONDS", {})  # no merge measured here yet


def _page(model: str | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.switch_page("views/interpolation.py")
    if model is not None:
        at.session_state["model"] = model
    at.run()
    ok(at)
    return at


def _info(at: AppTest) -> str:
    return " ".join(i.value for i in at.info)


def test_the_operators_are_opt_in_and_a_zoo_model_is_merged_in_memory():
    from landscape.experiments.merging.operators import mergekit_installed

    at = _page()
    assert any(h.value == "Merge operators" for h in at.subheader)
    charts = len(at.get("plotly_chart"))
    assert not [s for s in at.selectbox if s.key and s.key.startswith("merges_pair")]
    if not mergekit_installed():
        pytest.skip("mergekit is not installed here")
    at.toggle(key="merges_show").set_value(True).run()  # mlp-digits: merged in memory
    ok(at)
    assert len(at.get("plotly_chart")) == charts  # no merge measured here: it waits
    assert "time unknown on this machine" in _info(at)
    at.button(key="start-merges").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == charts + 1
    assert set(at.dataframe[-1].value["operator"]) == {"straight line", "slerp", "ties",
                                                       "dare_ties"}


def test_without_mergekit_the_page_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mergekit", None)
    monkeypatch.setitem(sys.modules, "mergekit.merge", None)
    at = _page()
    at.toggle(key="merges_show").set_value(True).run()
    ok(at)
    assert "pip install 'landscape[merge]'" in _info(at)


def test_a_hugging_face_pair_shows_its_operators(tmp_path):
    pytest.importorskip("transformers")
    from landscape.experiments.merging.operators import mergekit_installed
    from landscape.sources import DataSpec, add_family
    from tests.conftest import tiny_llama

    if not mergekit_installed():
        pytest.skip("mergekit is not installed here")
    paths = [tmp_path / f"llama{s}" for s in (0, 1)]
    for seed, path in enumerate(paths):
        tiny_llama(seed).save_pretrained(path, safe_serialization=True)
    (tmp_path / "text.txt").write_text("To be, or not to be, that is the question. " * 40)
    add_family("llamas", paths, DataSpec(text=tmp_path / "text.txt", n_ctx=16, max_windows=8))
    at = _page("llamas")
    at.multiselect(key="interp_combos").set_value(["weight/orth"]).run()
    charts = len(at.get("plotly_chart"))
    at.toggle(key="merges_show").set_value(True).run()
    ok(at)
    assert "time unknown on this machine" in _info(at)  # no merge of the family measured here
    at.button(key="start-merges").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == charts + 1
    table = at.dataframe[-1].value
    assert set(table["operator"]) == {"straight line", "slerp", "ties", "dare_ties"}
    assert set(table["alignment"]) == {"naive", "weight/orth"}
    at.multiselect(key="merges_ops").set_value(["ties"]).run()  # from the disk cache
    ok(at)
    assert set(at.dataframe[-1].value["operator"]) == {"straight line", "ties"}
