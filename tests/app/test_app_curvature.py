"""The Interpolation page's curvature along the line: off by default; opened, it says how many
Hessian-vector products it takes and waits for a click; clicked, it draws the top eigenvalue
beside the loss, naive and aligned, with its table."""

from __future__ import annotations

import importlib

from streamlit.testing.v1 import AppTest

from tests.app.common import MAIN, ok


def test_the_curvature_is_opt_in_and_computed_on_a_click(monkeypatch):
    from app.components import long_runs
    from app.state import timings as state
    curvature = importlib.import_module("landscape.experiments.curvature")

    monkeypatch.setattr(state, "RUN_SECONDS", {})
    lines = []
    real = curvature.curvature_along

    def counted(*args, **kw):
        lines.append(args[4].points)
        return real(*args, **kw)

    monkeypatch.setattr(curvature, "curvature_along", counted)
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.switch_page("views/interpolation.py")
    at.run()
    ok(at)
    assert any(h.value == "Curvature along the line" for h in at.subheader)
    assert not [s for s in at.selectbox if s.key and s.key.startswith("curvature_pair")]
    charts = len(at.get("plotly_chart"))
    at.toggle(key="curvature_show").set_value(True).run()
    ok(at)
    assert lines == [] and len(at.get("plotly_chart")) == charts  # waiting for the click
    notes = " ".join(i.value for i in at.info).replace("\\", "")  # markdown escapes
    assert "Hessian-vector products" in notes and "time unknown on this machine" in notes, notes
    at.button(key="start-curvature").click().run()
    ok(at)
    assert lines == [3, 3] and len(at.get("plotly_chart")) == charts + 1  # naive and aligned
    assert [k[:2] for k in state.RUN_SECONDS] == [("curvature", "mlp-digits")]
    table = at.dataframe[-1].value
    assert len(set(table["alignment"])) == 2 and "naive" in set(table["alignment"])
    assert sorted(set(table["λ"])) == [0.0, 0.5, 1.0]
    assert (table["top eigenvalue"] > 0).all() and "trace" not in table  # no probes asked for
    # at λ = 1 both lines are A: the same loss and curvature
    ends = table[table["λ"] == 1.0]
    assert abs(ends["loss (nats)"].max() - ends["loss (nats)"].min()) < 1e-6
    assert abs(ends["top eigenvalue"].max() - ends["top eigenvalue"].min()) < 1e-3
    # measured now: a cost under the limit starts at once (the limit is lifted here, so that
    # this machine's load does not decide)
    monkeypatch.setattr(long_runs, "SLOW", 1e9)
    at.selectbox(key="curvature_probes").set_value(16).run()
    ok(at)
    assert lines[2:] == [3, 3]
    table = at.dataframe[-1].value
    assert "trace" in table and (table["trace"].notna()).all()
