"""The Surface page: read from the disk cache, else computed on a button; both figures drawn and
registered for the report."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, drawn, ok


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def _open(**query: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page("views/surface.py")
    at.query_params.update(query)
    return at.run()


def test_surface_page_computes_on_a_button_then_reads_the_cache():
    at = _open(grid="5")
    ok(at)
    assert not at.get("plotly_chart")  # nothing is computed before the click
    at.button(key="surf_compute").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == 2  # the contour map and the 3-D surface
    contours, scene = drawn(at, "surface"), drawn(at, "surface-3d")
    assert contours.title == "loss around the model, contours" and scene.title.endswith("in 3-D")
    assert contours.page == "Surface"
    (rows,) = contours.tables.values()
    assert rows[0]["model"] == "mlp-digits seed 0"
    again = _open(grid="5")  # a new session: read from the disk cache at once
    ok(again)
    assert len(again.get("plotly_chart")) == 2
    again.sidebar.toggle(key="presentation").set_value(True).run()
    ok(again)


def test_surface_page_plane_through_three():
    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")
    at = _open(grid="5", surface="Plane through three")
    ok(at)
    at.button(key="surf_compute").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == 2
    tables = drawn(at, "surface").tables
    assert len(tables["The straight paths"]) == 3


def test_surface_tables_keep_models_and_paths_apart():
    """The models and the straight paths between them are a table each (they were one table
    with empty cells), accuracy in % beside loss in nats."""
    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")
    at = _open(grid="5", surface="Plane through three")
    at.button(key="surf_compute").click().run()
    ok(at)
    models, paths = (t.value for t in at.table)
    assert list(models.columns) == ["model", "loss (nats)", "accuracy (%)"]
    assert list(paths.columns) == ["path", "loss barrier (nats)", "accuracy barrier (points)"]
    assert len(models) == 3 and len(paths) == 3
    assert (models["accuracy (%)"] > 1).all()  # percent, not a fraction


def test_the_surface_says_what_it_will_cost_before_the_click():
    """Its points at the seconds per point measured here: unknown before any was evaluated,
    then the note beside the button says how long a grid of another size will take."""
    from app.state import timings as state

    state.GRID_SECONDS.clear()
    at = _open(grid="5")
    ok(at)
    assert any("time unknown on this machine" in i.value.lower() for i in at.info)
    at.button(key="surf_compute").click().run()
    ok(at)
    at.select_slider(key="surf_resolution").set_value(9).run()
    ok(at)
    notes = " ".join(i.value for i in at.info)
    assert "9 × 9 points" in notes and "measured on this machine" in notes, notes


def test_hessian_directions_wait_for_the_button_and_show_their_eigenvalues():
    at = _open(grid="5", axes="Hessian")
    ok(at)
    assert not at.get("plotly_chart")  # the Hessian is not started before the click
    assert any("Hessian's top two eigenvectors" in i.value for i in at.info)
    at.button(key="surf_compute").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == 2
    assert any("Hessian eigenvalues λ₁ = " in c.value for c in at.caption)
    assert drawn(at, "surface").settings["directions"] == "hessian"
