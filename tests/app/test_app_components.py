"""The building blocks of the pages on their own: a long run's estimate and Cancel, the failure
card's line."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.components.failures import one_line
from app.components.long_runs import ESTIMATING, duration, estimate
from landscape.errors import LandscapeError


def test_the_estimate_says_the_share_done_and_the_time_left():
    assert estimate("Aligning", 0.25, 10.0, 30.0) == "Aligning — 25%, 10 s so far, about 30 s left"
    assert estimate("Aligning", 0.01, 10.0) == f"Aligning — 1%, 10 s so far, {ESTIMATING}"
    assert estimate("", 1.0, 75.0) == "100%, 1 min 15 s so far"
    assert duration(3599.6) == "60 min 00 s"


def _said(reports: list[tuple[float, float]], end: float) -> list[tuple[float, float | None]]:
    """What :class:`TimeLeft` says once a second from 0 to ``end`` (as the bar's redraw asks),
    with the reports ``(time, share)`` given to it as they come."""
    from app.components.long_runs import TimeLeft

    left, said, i, now = TimeLeft(0.0), [], 0, 0.0
    while now <= end:
        while i < len(reports) and reports[i][0] <= now:
            left.report(reports[i][1], reports[i][0])
            i += 1
        said.append((now, left.left(now)))
        now += 1.0
    return said


def test_parts_read_at_once_do_not_shorten_the_time_left():
    """Three of four parts come from the cache in an instant, the fourth computes in 40 s: half
    way through it the bar says about 20 s left, not the second or so that the share done over
    the time so far (87% in 20 s) would say."""
    from app.components.long_runs import WorkRate

    rate = WorkRate(0.0)
    for i, t in enumerate((0.01, 0.02, 0.03), start=1):
        assert rate.report(i / 4, t) is None  # nothing computed yet: no rate
    reports = [(0.01, 0.25), (0.02, 0.5), (0.03, 0.75)]
    reports += [(0.03 + 2 * j, 0.75 + 0.25 * j / 20) for j in range(1, 21)]
    said = dict(_said(reports, 40))
    assert said[20] == pytest.approx(20, abs=2), said[20]
    assert all(v is None or v >= 40 - t - 3 for t, v in said.items())  # never short
    # small steps of real work, however frequent, count
    steady = WorkRate(0.0)
    for k in range(1, 101):
        r = steady.report(k / 200, k * 0.04)
    assert r == pytest.approx(0.125)


def test_the_time_left_waits_for_a_meaningful_share_then_follows_steady_work():
    """Work at 1% a second: nothing is said over the first seconds, then the truth."""
    said = _said([(k, k / 100) for k in range(1, 101)], 100)
    assert all(v is None for t, v in said if t < 10)  # under a tenth done: estimating
    assert all(v == pytest.approx(100 - t, abs=1.5) for t, v in said if v is not None)
    assert sum(v is not None for _, v in said) > 80


def test_a_quick_first_stage_never_makes_minutes_look_like_seconds():
    """30% in 6 s, then 70% in 700 s reported every 50 s: while only the quick stage has
    reported the bar says it is estimating (the share over the time so far said 14 s), and from
    the first report of the slow stage on it says minutes, about the truth."""
    reports = [(k, 0.05 * k) for k in range(1, 7)]
    reports += [(6 + 50 * j, 0.3 + 0.7 * j / 14) for j in range(1, 15)]
    said = _said(reports, 706)
    assert all(v is None for t, v in said if t < 56)
    for t, v in said:
        if v is not None and 706 - t >= 120:  # minutes remain: never seconds
            assert v >= 60, (t, v)
    t, v = next((t, v) for t, v in said if v is not None)
    assert v == pytest.approx(706 - t, rel=0.1), (t, v)


def test_a_slower_stage_lengthens_the_time_left_as_soon_as_it_reports():
    """Half the work in 100 s, the other half ten times slower: within half a minute of the
    slow stage's first report the bar says its true quarter of an hour, and it never says under
    a minute while minutes remain."""
    reports = [(10 * k, 0.05 * k) for k in range(1, 11)]
    reports += [(100 + 10 * j, 0.5 + 0.005 * j) for j in range(1, 101)]
    said = dict(_said(reports, 1100))
    assert said[130] == pytest.approx(970, rel=0.1), said[130]
    assert all(v is None or v >= 60 for t, v in said.items() if 1100 - t >= 120)


def test_a_quiet_spell_is_not_a_frozen_time_left():
    """Steady work that stops reporting: past the longest gap so far the time left grows, and
    once no progress lies in the recent window it is estimating again, never a count down."""
    reports = [(k, k / 100) for k in range(1, 31)]
    said = dict(_said(reports, 80))
    assert said[30] == pytest.approx(70, abs=1.5)
    assert all(v is None for t, v in said.items() if t >= 40)


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


def _quiet() -> None:
    """A page whose work reports once and then goes quiet for 2.6 s."""
    import time

    import streamlit as st

    from app.components.long_runs import LongRun

    run = LongRun("Quiet", key="quiet")
    run("one report", 1, 10)
    time.sleep(2.6)
    if st.session_state.get("close"):
        run.close()
        time.sleep(1.5)  # closed: nothing draws the bar again


def test_the_bar_is_redrawn_while_the_work_is_quiet():
    """Between reports the bar's text moves every second (the time so far), and a closed run's
    bar is not drawn again."""
    at = AppTest.from_function(_quiet, default_timeout=30).run()
    (bar,) = at.get("progress")
    assert bar.proto.text.startswith("one report — 10%, 2 s so far"), bar.proto.text
    assert ESTIMATING.replace(":", "\\:") in bar.proto.text  # a tenth, after 2.6 s: too early
    at.session_state["close"] = True
    at.run()
    assert not at.get("progress")


def test_the_circuits_space_is_offered_only_where_a_model_has_a_circuit_form():
    from app.components.choices import has_circuits

    assert has_circuits("vit-digits") and has_circuits("gpt-shakespeare-d128")
    assert has_circuits("llama-shakespeare-d128")  # rotary: a QK circuit per offset
    assert not has_circuits("mlp-digits")  # no heads


def test_every_figure_of_a_page_says_what_it_shows_for_the_report():
    """The report titles a figure by its page, what it shows and its settings, not by its file
    name: every page's call of ``figure`` gives a ``title``."""
    import ast
    from pathlib import Path

    app = Path(__file__).resolve().parents[2] / "app"
    calls = []
    for path in sorted([*(app / "views").glob("*.py"), *(app / "sections").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "figure":
                calls.append((path.name, node.lineno, {k.arg for k in node.keywords}))
    assert len(calls) >= 20
    assert [(f, line) for f, line, keys in calls if "title" not in keys] == []
