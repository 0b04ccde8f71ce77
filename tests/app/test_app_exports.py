"""The app's exports: a size control beside each figure, the barrier matrix section of the
interpolation page, and the session's figures gathered for the export report: every figure a
page drew, titled by its page, what it shows, model, method and seeds."""

from __future__ import annotations

import html

import pytest
from streamlit.testing.v1 import AppTest

from app.state import FIGURES
from landscape.plots import export
from landscape.sources.zoo import available_seeds
from tests.app.common import MAIN, drawn, ok


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
    # every figure the page drew: the curves of the default methods, of naive alone, the matrix
    assert [(f.name, f.settings.get("methods")) for f in figures.values()] == [
        ("interpolation-mlp-digits-test", ["naive", "weight/perm", "weight/orth"]),
        ("interpolation-mlp-digits-test", ["naive"]),
        ("barrier-matrix-mlp-digits-test", None),
    ]
    matrix = drawn(at, "matrix")
    assert matrix.settings["seeds"] == [0, 1, 2] and matrix.settings["method"] == "naive"
    assert matrix.heading == ("Interpolation curves: the barrier matrix of every pair — "
                              "mlp-digits, naive, seeds 0, 1 and 2, test split")  # fmt: skip
    assert len(matrix.cache_keys) == 3 and all(len(k) == 64 for k in matrix.cache_keys)
    z = matrix.figure.data[0].z
    assert [z[i][i] for i in range(3)] == [0, 0, 0] and z[0][1] == z[1][0] > 0
    report = export.report_html(list(figures.values()))
    assert all(f'id="figure-{i}"' in report for i in range(3))
    assert all(k in report for k in matrix.cache_keys)
    assert f"<h2>{html.escape(matrix.heading)}</h2>" in report
    # the same figure drawn again (the λ marker moved) replaces its earlier version
    at.select_slider(key="interp_mark").set_value(1.0).run()
    ok(at)
    assert len(at.session_state[FIGURES]) == 3
    # another control: the matrix no longer matches and is not drawn for it, and the report
    # keeps it beside the curves of both splits
    at.radio(key="interp_split").set_value("train").run()
    ok(at)
    assert len(at.get("plotly_chart")) == 1
    assert [f.name for f in at.session_state[FIGURES].values()][2:] == [
        "barrier-matrix-mlp-digits-test",
        "interpolation-mlp-digits-train",
    ]
    assert drawn(at, "interp").heading == (
        "Interpolation curves: loss and accuracy along the "
        "line — mlp-digits, naive, seeds 0 ↔ 1, train split"
    )
