"""Controls outlive their page and live in the URL: a page switch keeps them, a link reopens the
view, and a link's values that are not valid here fall back to the defaults with a note.

Each test gets its own empty disk cache; the views chosen are cheap (weight matching without
learned matching, the naive curve of one pair).
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, ok


@pytest.fixture(autouse=True)
def _need_seeds():
    if len(available_seeds("mlp-digits")) < 8:
        pytest.skip("the shipped zoo has fewer than 8 mlp-digits seeds")


def _app(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    if query:
        at.query_params.update(query)
    return at


def test_eigenangle_seeds_survive_a_page_switch_and_are_in_the_url():
    at = _app({"learned": "0"})
    at.switch_page("views/eigenangles.py").run()
    ok(at)
    at.selectbox(key="eig_a_mlp-digits").set_value(3).run()
    at.selectbox(key="eig_b_mlp-digits").set_value(7).run()
    ok(at)
    assert at.query_params["a"] == "3" and at.query_params["b"] == "7"
    at.switch_page("views/models.py").run()
    ok(at)
    assert "a" not in at.query_params  # the Models page has no seed A: its link names none
    at.switch_page("views/eigenangles.py").run()
    ok(at)
    assert at.selectbox(key="eig_a_mlp-digits").value == 3
    assert at.selectbox(key="eig_b_mlp-digits").value == 7
    assert at.toggle(key="eig_learned").value is False
    assert at.query_params["a"] == "3" and at.query_params["learned"] == "0"


def test_interpolation_keeps_its_pair_and_split_across_a_page_switch():
    at = _app()
    at.switch_page("views/interpolation.py")
    at.session_state["interp_combos"] = ["naive"]  # one cheap curve
    at.run()
    ok(at)
    at.multiselect(key="interp_pairs_mlp-digits").set_value([(2, 3)]).run()
    at.radio(key="interp_split").set_value("train").run()
    ok(at)
    at.switch_page("views/home.py").run()
    ok(at)
    at.switch_page("views/interpolation.py").run()
    ok(at)
    assert at.multiselect(key="interp_pairs_mlp-digits").value == [(2, 3)]
    assert at.radio(key="interp_split").value == "train"
    assert any("train split" in h.value for h in at.subheader)
    assert at.query_params["pairs"] == "2-3" and at.query_params["split"] == "train"


def test_a_link_reopens_the_same_view():
    """The URL written by one session opens the same controls in a new one."""
    at = _app({"learned": "0"})
    at.switch_page("views/eigenangles.py").run()
    at.selectbox(key="eig_a_mlp-digits").set_value(5).run()
    at.toggle(key="eig_iterations").set_value(False).run()
    link = dict(at.query_params)
    # B kept 1, no longer its default (the first seed other than A, now 0): it is in the link;
    # controls at their defaults (model, rounds, presentation) are not
    assert link == {"a": "5", "b": "1", "learned": "0"}
    again = _app(link)
    again.switch_page("views/eigenangles.py").run()
    ok(again)
    assert again.selectbox(key="eig_a_mlp-digits").value == 5
    assert again.selectbox(key="eig_b_mlp-digits").value == 1
    assert again.toggle(key="eig_learned").value is False
    # and a link to another model and page
    at = _app({"model": "vit-digits", "split": "train", "methods": "naive", "pairs": "0-2"})
    at.switch_page("views/interpolation.py").run()
    ok(at)
    assert at.sidebar.selectbox(key="model").value == "vit-digits"
    assert at.multiselect(key="interp_pairs_vit-digits").value == [(0, 2)]
    assert at.multiselect(key="interp_combos").value == ["naive"]
    assert any("vit-digits — train split" in h.value for h in at.subheader)


def test_bad_link_values_fall_back_to_the_defaults_with_a_note():
    at = _app({"model": "no-such-model", "a": "99", "b": "seven", "learned": "0",
               "rounds": "maybe"})  # fmt: skip
    at.switch_page("views/eigenangles.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="model").value == "mlp-digits"
    assert at.selectbox(key="eig_a_mlp-digits").value == 0
    assert at.selectbox(key="eig_b_mlp-digits").value == 1
    notes = [c.value for c in at.caption] + [c.value for c in at.sidebar.caption]
    for shown in ("no-such-model", "99", "seven", "maybe"):
        assert any(f"` {shown} ` is not an option" in n for n in notes), (shown, notes)
    assert "a" not in at.query_params and at.query_params.get("model") is None
    at.run()  # the note is about the link, which has been read: it does not come back
    assert not any("is not an option" in c.value for c in at.caption)
    # a list with one value out of range, and more seeds than the triangle takes
    at = _app({"pairs": "0-1,0-99", "points": "4"})
    at.switch_page("views/interpolation.py")
    at.session_state["interp_combos"] = ["naive"]
    at.run()
    ok(at)
    assert at.multiselect(key="interp_pairs_mlp-digits").value == [(0, 1)]
    assert at.slider(key="interp_points").value == 25  # 4 is not a grid size the slider offers
    at = _app({"seeds": "0,1,2,3"})
    at.switch_page("views/triangle.py")
    at.session_state["tri_combos"] = []  # nothing to compute
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="tri_seeds_mlp-digits").value == [0, 1, 2]
