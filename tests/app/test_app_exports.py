"""The app's exports: a size control beside each figure, the barrier matrix section of the
interpolation page, and the session's figures gathered for the export report."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.state import FIGURES
from landscape.plots import export
from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, ok


@pytest.fixture(autouse=True)
def _need_seeds():
    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")


def test_interpolation_page_measures_the_matrix_and_reports_its_figures():
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.switch_page("views/interpolation.py")
    at.run()
    ok(at)
    at.multiselect(key="interp_combos").set_value(["naive"]).run()
    assert at.selectbox(key="size-interp").value == "double"
    assert at.sidebar.download_button(key="report").label == "Export report"
    assert len(at.get("plotly_chart")) == 1  # the matrix waits for its button
    at.multiselect(key="matrix_seeds_mlp-digits").set_value([0, 1, 2]).run()
    at.button(key="matrix_run").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == 2
    figures = at.session_state[FIGURES]
    assert list(figures) == ["interp", "matrix"]
    matrix = figures["matrix"]
    assert matrix.settings["seeds"] == [0, 1, 2] and matrix.settings["method"] == "naive"
    assert len(matrix.cache_keys) == 3 and all(len(k) == 64 for k in matrix.cache_keys)
    z = matrix.figure.data[0].z
    assert [z[i][i] for i in range(3)] == [0, 0, 0] and z[0][1] == z[1][0] > 0
    report = export.report_html(list(figures.values()))
    assert 'id="figure-0"' in report and 'id="figure-1"' in report
    assert all(k in report for k in matrix.cache_keys)
    # another control: the matrix no longer matches and is not drawn for it
    at.radio(key="interp_split").set_value("train").run()
    ok(at)
    assert len(at.get("plotly_chart")) == 1
