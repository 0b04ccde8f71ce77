"""The interpolation page says where a method is above naive, from the numbers it shows, and its
download section keeps its choices across a page switch.

Each test gets its own empty disk cache; the curves are those of one mlp-digits pair.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app import state
from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, ok


@pytest.fixture(autouse=True)
def _need_seeds():
    if len(available_seeds("mlp-digits")) < 2:
        pytest.skip("the shipped zoo has fewer than 2 mlp-digits seeds")


def _interpolation(combos: list[str]) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.switch_page("views/interpolation.py")
    at.session_state["interp_combos"] = combos
    return at.run()


def test_a_method_above_naive_is_named_under_the_table(monkeypatch) -> None:
    real = state.barrier

    def raised(request, *args, **kw):
        r = real(request, *args, **kw)
        if (request.method, request.group) == ("weight", "orth"):  # as if matching were worse
            return {**r, "barrier_loss": r["barrier_loss"] + 5.0}
        return r

    monkeypatch.setattr(state, "barrier", raised)
    at = _interpolation(["naive", "weight/perm", "weight/orth"])
    ok(at)
    notes = [w.value for w in at.warning if "above naive" in w.value]
    assert len(notes) == 1 and notes[0].startswith("weight/orth is above naive here (loss")
    assert "matching the weights does not reduce this barrier" in notes[0]
    table = at.dataframe[0].value
    column = dict(zip(table["method"], table["vs naive"], strict=True))
    assert column == {"naive": "—", "weight/perm": "not above naive",
                      "weight/orth": "above naive in loss"}  # fmt: skip


def test_without_a_raised_method_there_is_no_note() -> None:
    at = _interpolation(["naive", "weight/perm"])
    ok(at)
    assert not [w for w in at.warning if "above naive" in w.value]


def test_the_download_choices_survive_a_page_switch() -> None:
    at = _interpolation(["weight/perm", "weight/orth"])
    ok(at)
    at.selectbox(key="download_combo").set_value("weight/orth").run()
    at.radio(key="download_kind").set_value("merge").run()
    at.slider(key="download_lambda").set_value(0.35).run()
    ok(at)
    at.switch_page("views/home.py").run()
    ok(at)
    at.switch_page("views/interpolation.py").run()
    ok(at)
    assert at.selectbox(key="download_combo").value == "weight/orth"
    assert at.radio(key="download_kind").value == "merge"
    assert at.slider(key="download_lambda").value == 0.35
    assert at.query_params["dl_method"] == "weight/orth" and at.query_params["dl_lam"] == "0.35"
