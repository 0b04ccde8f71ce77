"""The Interpolation page's curved path and spawned children: off by default; when asked, one
pair's trained curve beside its line (naive and aligned) with its table, and the barrier of
children spawned from a parent against the step they were spawned at."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app.common import MAIN, ok


def test_the_curved_path_is_opt_in_and_drawn_beside_the_line(monkeypatch):
    """Opened, it says what training costs and waits for a click (no curve of the model was
    trained here, so its time is unknown); clicked, it trains and draws the curve; another
    number of steps then starts at once, at the seconds per step measured."""
    from app.components import long_runs
    from app.state import timings as state
    from landscape.experiments.barriers import curved

    monkeypatch.setattr(state, "RUN_SECONDS", {})
    trained = []
    real = curved.train_controls

    def counted(*args, **kw):
        trained.append(args[4].steps)
        return real(*args, **kw)

    monkeypatch.setattr(curved, "train_controls", counted)
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.switch_page("views/interpolation.py")
    at.run()
    ok(at)
    assert any(h.value == "Curved path" for h in at.subheader)
    assert not [s for s in at.selectbox if s.key and s.key.startswith("curve_pair")]
    charts = len(at.get("plotly_chart"))
    at.toggle(key="curve_show").set_value(True).run()  # the default steps
    ok(at)
    assert trained == [] and len(at.get("plotly_chart")) == charts  # waiting for the click
    notes = " ".join(i.value for i in at.info).replace("\\", "")  # markdown escapes
    assert "2 curve(s) of" in notes and "time unknown on this machine" in notes, notes
    at.button(key="start-curve").click().run()
    ok(at)
    assert len(trained) == 2 and len(at.get("plotly_chart")) == charts + 1
    assert [k[:2] for k in state.RUN_SECONDS] == [("curve", "mlp-digits")]  # its seconds per step
    # measured now: a measured cost under the limit starts at once (the limit is lifted here,
    # so that this machine's load does not decide)
    monkeypatch.setattr(long_runs, "SLOW", 1e9)
    at.select_slider(key="curve_steps").set_value(100).run()
    ok(at)
    assert trained[2:] == [100, 100]
    assert len(at.get("plotly_chart")) == charts + 1
    table = at.dataframe[-1].value
    assert set(table["path"]) == {"straight line", "bezier"}
    assert len(set(table["alignment"])) == 2 and "naive" in set(table["alignment"])
    # on screen the accuracy barrier is in points, as everywhere (the record keeps a fraction)
    assert "accuracy barrier (points)" in table and "accuracy barrier (fraction)" not in table
    line = table[table["path"] == "straight line"]["max loss (nats)"]
    curved = table[table["path"] == "bezier"]["max loss (nats)"]
    assert curved.max() < line.max()
    at.radio(key="curve_kind").set_value("chain").run()
    ok(at)
    assert set(at.dataframe[-1].value["path"]) == {"straight line", "chain"}
    grids = len(at.dataframe)
    at.sidebar.toggle(key="presentation").set_value(True).run()  # a static table: it wraps
    ok(at)
    assert len(at.dataframe) < grids and "chain" in set(at.table[-1].value["path"])


def test_the_spawned_children_are_opt_in_and_drawn_against_the_spawn_step():
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.switch_page("views/interpolation.py")
    at.run()
    ok(at)
    assert any(h.value == "Spawned children" for h in at.subheader)
    assert not [m for m in at.multiselect if m.key and m.key.startswith("spawn_at")]
    charts = len(at.get("plotly_chart"))
    at.session_state["spawn_at_mlp-digits"] = [980, 1000]  # two late steps: seconds
    at.toggle(key="spawn_show").set_value(True).run()
    ok(at)
    assert len(at.get("plotly_chart")) == charts + 1
    table = at.dataframe[-1].value
    assert list(table["step"]) == [980, 980, 1000, 1000]
    assert (table[table["step"] == 1000]["loss barrier (nats)"].abs() < 1e-6).all()


def test_spawning_early_steps_says_its_cost_and_waits_for_a_click():
    """Children from early steps train for most of a run each: the page says how long, from
    the time training the parent took, and starts only on a click."""
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.switch_page("views/interpolation.py")
    at.run()
    charts = len(at.get("plotly_chart"))
    at.session_state["spawn_at_mlp-digits"] = [0, 500]  # a whole run and half of one, twice
    at.toggle(key="spawn_show").set_value(True).run()
    ok(at)
    notes = " ".join(i.value for i in at.info).replace("\\", "")
    assert "the parent and 4 children (about" in notes and "training seed 0 took" in notes, notes
    assert any(b.key == "start-spawn" for b in at.button)
    assert len(at.get("plotly_chart")) == charts  # nothing started
