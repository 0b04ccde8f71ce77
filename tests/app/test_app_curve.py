"""The Interpolation page's curved path: off by default; when asked, one pair's trained curve
beside its line (naive and aligned), its table, and its entry in the export report."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app.common import MAIN, ok


def test_the_curved_path_is_opt_in_and_drawn_beside_the_line():
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.switch_page("views/interpolation.py")
    at.run()
    ok(at)
    assert any(h.value == "Curved path" for h in at.subheader)
    assert not [s for s in at.selectbox if s.key and s.key.startswith("curve_pair")]
    charts = len(at.get("plotly_chart"))
    at.toggle(key="curve_show").set_value(True).run()  # the default steps
    ok(at)
    at.select_slider(key="curve_steps").set_value(100).run()
    ok(at)
    assert len(at.get("plotly_chart")) == charts + 1
    table = at.dataframe[-1].value
    assert set(table["path"]) == {"straight line", "bezier"}
    assert len(set(table["alignment"])) == 2 and "naive" in set(table["alignment"])
    line = table[table["path"] == "straight line"]["max loss (nats)"]
    curved = table[table["path"] == "bezier"]["max loss (nats)"]
    assert curved.max() < line.max()
    at.radio(key="curve_kind").set_value("chain").run()
    ok(at)
    assert set(at.dataframe[-1].value["path"]) == {"straight line", "chain"}
