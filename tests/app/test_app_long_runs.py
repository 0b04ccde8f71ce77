"""No long run starts on a control's change without its cost said first: a view not stored
starts at once only when the time measured here says it takes at most 20 s; else the page
says what it will cost (or that its time is unknown on this machine) beside a button, and
computes nothing until the click."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.components.long_runs import UNKNOWN, duration
from landscape.sources import available_seeds
from tests.app.common import MAIN, ok


@pytest.fixture(autouse=True)
def _nothing_measured(monkeypatch):
    """Each test starts from a machine that measured nothing (the times are kept per process)."""
    from app.state import timings as state

    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")
    monkeypatch.setattr(state, "RUN_SECONDS", {})
    monkeypatch.setattr(state, "GRID_SECONDS", {})


def _counted(monkeypatch, module, name: str) -> list:
    """Calls of ``module.name`` (still made), one entry each."""
    calls, real = [], getattr(module, name)

    def counted(*args, **kw):
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(module, name, counted)
    return calls


def _refused(monkeypatch, module, name: str) -> None:
    def refuse(*args, **kw):
        raise AssertionError(f"{name} ran before a click")

    monkeypatch.setattr(module, name, refuse)


def _page(page: str, timeout: int = 180, **session) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    at.switch_page(f"views/{page}.py")
    for k, v in session.items():
        at.session_state[k] = v
    return at.run()


def _notes(at: AppTest) -> str:
    return " ".join(i.value for i in at.info).replace("\\", "")  # markdown escapes


def test_an_atlas_not_stored_says_its_cost_and_waits_for_a_click(monkeypatch):
    from app.state import timings as state
    from landscape.experiments import atlas

    placed = _counted(monkeypatch, atlas, "_compute")
    at = _page("atlas", atlas_copies=1)  # not the page's own view, nothing measured
    ok(at)
    assert placed == [] and not at.get("plotly_chart")
    notes = _notes(at)
    assert "the atlas of 12 checkpoints (PCA) (time unknown on this machine" in notes, notes
    assert any(b.key == "start-atlas" for b in at.button)
    # measured (10 s a checkpoint): the note says how long, and it still waits
    state.RUN_SECONDS["atlas", "mlp-digits", "pca"] = 10.0
    at.slider(key="atlas_copies").set_value(3).run()
    ok(at)
    assert placed == [] and "24 checkpoints (PCA) (about 4 min 00 s)" in _notes(at)
    at.button(key="start-atlas").click().run()
    ok(at)
    assert len(placed) == 1 and len(at.get("plotly_chart")) == 1


def test_the_atlas_of_the_page_own_view_is_drawn_at_once():
    from app.state import timings as state

    at = _page("atlas")
    ok(at)
    assert len(at.get("plotly_chart")) == 1  # the defaults are cheap: no click
    assert state.expected("atlas", "mlp-digits", "pca") is not None  # measured for the next


def test_a_triangle_grid_of_unknown_cost_waits_for_a_click(monkeypatch):
    """No grid of the model evaluated here: another view than the page's own is not started
    without a click, and the page says its time is unknown instead of a number."""
    from landscape.experiments.barriers import triangles

    _refused(monkeypatch, triangles, "evaluate_triangle")
    at = _page("triangle", tri_resolution=6)
    ok(at)
    assert not at.get("plotly_chart")
    notes = _notes(at)
    assert "28 grid points (time unknown on this machine" in notes, notes
    assert any(b.key == "start-triangle" for b in at.button)


def test_the_width_barriers_say_what_training_costs_and_wait(monkeypatch):
    """A narrow model not trained here costs its training, at the time the full-width seed
    took (kept with the checkpoint): the page says it beside a button and trains nothing."""
    from app.components import long_runs
    from landscape.experiments.barriers import widths

    _refused(monkeypatch, widths, "train_model")
    monkeypatch.setattr(long_runs, "SLOW", 0.0)  # any measured cost counts as long
    at = _page("interpolation", model="vit-digits", interp_combos=["naive"])
    ok(at)
    charts = len(at.get("plotly_chart"))
    at.multiselect(key="width_factors_vit-digits").set_value([8]).run()
    at.toggle(key="width_run_vit-digits").set_value(True).run()
    ok(at)
    assert len(at.get("plotly_chart")) == charts
    notes = _notes(at)
    assert "d/8: seed" in notes and "trained at width d/8 (about" in notes, notes
    assert "took to train at full width" in notes
    assert any(b.key == "start-widths" for b in at.button)


def test_the_barrier_per_round_of_another_pair_says_its_measured_cost(monkeypatch):
    """Measured on one pair, the barrier per round of another pair costs as long: over the
    limit it waits for a click, beside that time."""
    from app.components import long_runs
    from app.state import timings as state
    from landscape.experiments.barriers import iterations

    at = _page("eigenangles", eig_learned=False, eig_iterations=True)
    ok(at)
    assert any(b.key == "start-rounds" for b in at.button)  # unknown at first
    at.button(key="start-rounds").click().run()
    ok(at)
    assert [k[:3] for k in state.RUN_SECONDS] == [("rounds", "mlp-digits", "False")]
    rounds = _counted(monkeypatch, iterations, "_rounds")
    monkeypatch.setattr(long_runs, "SLOW", 0.0)
    at.selectbox(key="eig_b_mlp-digits").set_value(2).run()
    ok(at)
    assert rounds == []
    notes = _notes(at)
    assert "the barrier per round of seeds 0 ↔ 2 (about" in notes, notes
    assert any(b.key == "start-rounds" for b in at.button)


def test_the_barrier_matrix_says_its_cost_beside_its_button():
    at = _page("interpolation", interp_combos=["weight/perm"])
    ok(at)
    at.multiselect(key="matrix_seeds_mlp-digits").set_value([0, 1, 2]).run()
    ok(at)
    said = " ".join(c.value for c in at.caption)
    # the page's own pair is stored (its curve above), the two others are not
    assert "2 pair(s) not stored: their matching about" in said, said
    assert len(at.get("plotly_chart")) == 1  # nothing measured before the button


def test_learned_matching_of_the_page_own_pair_waits_for_a_click_beside_its_cost(monkeypatch):
    """On an empty cache the Eigenangles page's own view (learned matching on, seeds 0 and 1)
    trained a rotation for minutes before it drew anything. Now weight matching (quick) is
    drawn at once, and learned matching waits for a click beside its cost: before learned
    matching of this model has run here, the time the shipped results' learned matching took
    where they were built (for mlp-digits, which ships none, a bound from vit-digits, larger),
    however short, and never "unknown"."""
    from app import state as app_state
    from app.components import long_runs
    from app.state import timings as state

    monkeypatch.setattr(state, "LEARNED_SECONDS", {})
    asked, real = [], app_state.compute_eigenangles

    def counted(model, seeds, learned, device, progress=None):
        asked.append(learned)
        return real(model, seeds, learned, device, progress=progress)

    monkeypatch.setattr(app_state, "compute_eigenangles", counted)
    monkeypatch.setattr(long_runs, "SLOW", 1e9)  # an estimate from elsewhere still waits
    at = _page("eigenangles")
    ok(at)
    assert at.toggle(key="eig_learned").value is True  # the page's own view asks for it
    assert asked == [False]  # weight matching alone, computed at once
    assert len(at.get("plotly_chart")) == 2  # its angles and its objective
    notes = _notes(at)
    assert UNKNOWN not in notes, notes
    shipped = state.shipped_learned()["vit-digits"][1]
    assert f"learned matching of seeds 0 ↔ 1 (under about {duration(shipped)})" in notes, notes
    assert ("learned matching of vit-digits, a larger model, took that long where the shipped "
            "results were built") in notes, notes  # fmt: skip
    assert "Learned matching waits for the click above." in notes
    assert any(b.key == "start-eig" for b in at.button)


def test_learned_matching_costs_what_the_shipped_results_say_before_anything_ran_here():
    """A model with a shipped learned time is estimated by it; one without, by the zoo model of
    nearest size with one (under its time when that is larger, over it when smaller); an
    imported model, by none."""
    from app.state import timings as state

    shipped = state.shipped_learned()
    assert shipped, "no shipped Eigenangles result with learned matching"
    for name, (seeds, seconds) in shipped.items():
        own = state.borrowed_learned(name)
        assert (own.seconds, own.about) == (seconds, "about"), name
        assert f"seeds {seeds[0]} ↔ {seeds[1]} of {name}" in own.basis
    small = state.borrowed_learned("mlp-digits")
    assert small.about == "under about" and "vit-digits, a larger model" in small.basis
    assert small.seconds == shipped["vit-digits"][1]
    most = max(state._work(name) for name in shipped)
    quickest = min(s for name, (_, s) in shipped.items() if state._work(name) == most)
    big = state.borrowed_learned("gpt-shakespeare-d256-l6")  # larger than any that ships
    assert (big.about, big.seconds) == ("over", quickest), big
    assert state.borrowed_learned("no-such-model") is None
