"""The curvature figures: loss, top eigenvalue and trace along λ, naive against aligned."""

import pytest

from landscape.plots import export
from landscape.plots.curvature import figure_curvature, figure_curvature_blocks
from landscape.plots.fields import MissingField


def _line(method, top, trace=(1.0, 5.0, 1.0)):
    return {"method": method, "group": "orth", "lambdas": [0.0, 0.5, 1.0],
            "loss": [1.0, 2.0 if method == "naive" else 1.1, 1.0], "top_eigenvalue": list(top),
            "trace": list(trace), "trace_se": [0.1, 0.2, 0.1],
            "blocks": {"blocks.0": [1.0, 3.0, 1.0], "outside blocks": [2.0, 4.0, 2.0]}}  # fmt: skip


RESULT = {"split": "train", "lines": [_line("naive", (4.0, 250.0, 4.0)),
                                      _line("weight", (4.0, 6.0, 4.0))]}  # fmt: skip


def test_three_panels_naive_dashed_aligned_solid():
    fig = figure_curvature(RESULT)
    names = [(t.name, t.line.dash) for t in fig.data if t.showlegend]
    assert names == [("naive", "dash"), ("weight/orth", "solid")]
    assert len(fig.data) == 6  # loss, top eigenvalue and trace of each line
    assert fig.layout.yaxis2.type == "log"
    traces = [t for t in fig.data if t.error_y.array is not None]
    assert [list(t.error_y.array) for t in traces] == [[0.1, 0.2, 0.1]] * 2
    assert len(export.figure_frame(fig)) > 0


def test_without_probes_there_is_no_trace_panel():
    lines = [{**x, "trace": [None] * 3, "trace_se": [None] * 3} for x in RESULT["lines"]]
    fig = figure_curvature({**RESULT, "lines": lines})
    assert len(fig.data) == 4 and "xaxis3" not in fig.layout


def test_blocks_figure_has_a_panel_per_line():
    fig = figure_curvature_blocks(RESULT)
    assert len(fig.data) == 4
    assert [a.text for a in fig.layout.annotations] == ["naive", "weight/orth"]


def test_a_missing_field_is_named():
    with pytest.raises(MissingField, match="top_eigenvalue"):
        figure_curvature({"split": "train", "lines": [{k: v for k, v in _line("naive", (1, 2, 3))
                                                       .items() if k != "top_eigenvalue"}]})
