"""The building blocks of the pages on their own: a long run's estimate and Cancel, the failure
card's line."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.components.failures import one_line
from app.components.long_runs import duration, estimate
from landscape.errors import LandscapeError


def test_the_estimate_says_the_share_done_and_the_time_left():
    assert estimate("Aligning", 0.25, 10.0) == "Aligning — 25%, 10 s so far, about 30 s left"
    assert estimate("Aligning", 0.01, 10.0) == "Aligning — 1%, 10 s so far"  # too early to tell
    assert estimate("", 1.0, 75.0) == "100%, 1 min 15 s so far"
    assert duration(3599.6) == "60 min 00 s"


def test_parts_read_at_once_do_not_shorten_the_time_left():
    """Three of four parts come from the cache in an instant, the fourth computes: after 30 s
    on its first half the bar says about 30 s left, not the second or so that the share done
    over the time so far (87% in 30 s) would say."""
    from app.components.long_runs import WorkRate

    rate = WorkRate(0.0)
    for i, t in enumerate((0.01, 0.02, 0.03), start=1):
        assert rate.report(i / 4, t) is None  # nothing computed yet: no rate
    r = rate.report(0.875, 30.03)
    text = estimate("learned/orth", 0.875, 30.03, r)
    assert text.endswith("about 30 s left"), text
    assert estimate("learned/orth", 0.875, 30.03).endswith("about 4 s left")  # the old way
    # small steps of real work, however frequent, count
    steady = WorkRate(0.0)
    for k in range(1, 101):
        r = steady.report(k / 200, k * 0.04)
    assert r == pytest.approx(0.125)


def test_a_failure_is_one_line_never_a_traceback():
    assert one_line(LandscapeError("text file x does not exist")) == "text file x does not exist"
    assert one_line(RuntimeError("NaN at step 3\n  File x")) == "RuntimeError: NaN at step 3"
    assert one_line(KeyError()) == "KeyError"
    assert one_line("the family has 0 members") == "the family has 0 members"


def _counting() -> None:
    """A page whose work reports half way and is still going when the run ends (the Cancel
    button is on screen, as it is while work goes on)."""
    import streamlit as st

    from app.components.long_runs import LongRun

    run = LongRun("Counting", key="count", inputs=("count", st.session_state.get("size", 1)))
    if not run.cancelled:
        st.session_state["runs"] = st.session_state.get("runs", 0) + 1
        run("half way", 1, 2)


def test_cancel_stops_a_long_run_until_run_again_is_clicked():
    at = AppTest.from_function(_counting, default_timeout=30).run()
    assert at.session_state["runs"] == 1
    assert "half way — 50%" in at.get("progress")[0].proto.text
    at.button(key="cancel-count").click().run()
    assert at.session_state["runs"] == 1  # the click stopped the work; the page did not restart
    assert any("Cancelled: Counting" in i.value for i in at.info)
    at.run()  # any later run of the page: still cancelled for these inputs
    assert at.session_state["runs"] == 1
    at.button(key="again-count").click().run()
    assert at.session_state["runs"] == 2
    assert not at.info
    # other inputs are other work: a cancellation does not carry over to them
    at.button(key="cancel-count").click().run()
    at.session_state["size"] = 2
    at.run()
    assert at.session_state["runs"] == 3


def test_the_circuits_space_is_offered_only_where_a_model_has_a_circuit_form():
    from app.components.choices import has_circuits

    assert has_circuits("vit-digits") and has_circuits("gpt-shakespeare-d128")
    assert has_circuits("llama-shakespeare-d128")  # rotary: a QK circuit per offset
    assert not has_circuits("mlp-digits")  # no heads
