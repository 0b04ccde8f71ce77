"""AppTest smoke tests: every page renders with the shipped zoo and reruns on a control change."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_zoo_page_renders_and_reruns():
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "Landscape"
    assert len(at.dataframe) >= 1
    frame = at.dataframe[0].value
    assert list(frame["model"]) == ["mlp-digits", "vit-digits", "vit-fashion", "gpt-shakespeare"]
    at.sidebar.selectbox(key="model").set_value("vit-digits").run()
    assert not at.exception
    assert any("vit-digits" in e.label for e in at.expander)
