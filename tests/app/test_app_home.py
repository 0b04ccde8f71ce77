"""Home teaches from shipped curves: it draws at once (nothing computed), its λ slider moves the
marker and the numbers of the merged model, and the shipped file is what the library computes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from landscape.assets.figures import (
    HOME_MODEL,
    HOME_POINTS,
    HOME_SEEDS,
    LMC_SERIES,
    home_curves_path,
)
from landscape.plots.theme import FONT_SIZE, PROJECTOR_HEIGHT
from landscape.store.cache import Cache
from tests.app.common import MAIN


def _markers(at: AppTest) -> list[list[float]]:
    """The λ of every "… at λ" marker of the Home figure."""
    chart = next(c for c in at.get("plotly_chart") if c.key == "fig-home")
    spec = json.loads(chart.proto.spec)
    return [t["x"] for t in spec["data"] if t.get("name", "").endswith(" at λ")]


def test_home_draws_the_shipped_curves_and_its_slider_moves_the_marker():
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    assert not at.exception and not at.error
    assert Cache().info()["entries"] == 0  # read from the shipped file: nothing computed
    shipped = json.loads(home_curves_path().read_text())
    marks = _markers(at)
    assert len(marks) == 2 * len(LMC_SERIES)  # a marker per curve, loss and accuracy panels
    assert all(x == [0.5] for x in marks)
    naive = shipped["series"][0]["result"]
    i = naive["lambdas"].index(0.25)
    at.select_slider(key="home_lambda").set_value(0.25).run()
    assert all(x == [0.25] for x in _markers(at))
    metric = next(m for m in at.metric if m.label == "naive")
    assert metric.value == f"{naive['loss'][i]:.3f} nats"
    chord = 0.25 * naive["loss"][-1] + 0.75 * naive["loss"][0]
    assert metric.proto.delta == f"{naive['loss'][i] - chord:+.3f}"
    assert metric.proto.delta_description == "above the chord"  # beside it, not cut from it
    assert at.query_params["lam"] == "0.25"
    assert "B_{\\mathrm{loss}}" in at.latex[0].value
    links = [p.proto.page for p in at.get("page_link")]
    assert links == ["interpolation", "triangle", "ablation", "surface", "eigenangles", "atlas",
                     "gauge", "models"]  # fmt: skip


def test_home_in_presentation_mode_draws_for_a_projector():
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.query_params["present"] = "1"
    at.run()
    assert not at.exception and not at.error
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["font"]["size"] == 2 * FONT_SIZE
    assert spec["layout"]["height"] >= PROJECTOR_HEIGHT
    top = list(at.main.children.values())
    # the styles, the title row, then the figure (whole on a 1280×720 screen); its name and the
    # slider below it
    assert [n.type for n in _blocks(top[2], "plotly_chart")] == ["plotly_chart"]
    assert _blocks(top[3], "select_slider") and not _blocks(top[2], "select_slider")
    intro = [n for n in top if type(n).__name__ == "Markdown" and "one basin" in n.value]
    assert not intro  # folded into the title row's popover
    assert "About this page" in [p.proto.popover.label for p in _blocks(top[1], "popover")]
    assert not at.get("download_button")  # a projector needs no export buttons


def _blocks(node, kind: str) -> list:
    """The blocks of ``kind`` (``"popover"``, ``"expander"``, ...) under ``node``."""
    found = [node] if getattr(node, "type", None) == kind else []
    for child in getattr(node, "children", {}).values():
        found += _blocks(child, kind)
    return found


@pytest.mark.slow
def test_the_shipped_home_curves_are_what_the_library_computes():
    """``python -m landscape.assets --home`` wrote the file from these very checkpoints; a
    change to the algorithms or the zoo that moves the curves fails here until it is rebuilt."""
    from landscape.experiments import barrier

    shipped = json.loads(home_curves_path().read_text())
    assert (shipped["model"], tuple(shipped["seeds"])) == (HOME_MODEL, HOME_SEEDS)
    assert [s["label"] for s in shipped["series"]] == [label for label, _, _ in LMC_SERIES]
    for s, (_, method, group) in zip(shipped["series"], LMC_SERIES, strict=True):
        fresh = barrier(HOME_MODEL, HOME_SEEDS, method, group, points=HOME_POINTS)
        old = s["result"]
        assert fresh["lambdas"] == old["lambdas"]
        for key in ("loss", "accuracy"):
            np.testing.assert_allclose(fresh[key], old[key], atol=1e-4, err_msg=f"{method} {key}")
        assert fresh["barrier_loss"] == pytest.approx(old["barrier_loss"], abs=1e-4)


def test_the_page_icon_is_drawn_without_asking_another_host():
    """Streamlit sends an emoji favicon as a data: URL, a Material icon as a font host's address
    that every page load would fetch (the browser test logs every request)."""
    from streamlit.commands.page_config import _get_favicon_string

    from app.main import PAGE_ICON

    assert _get_favicon_string(PAGE_ICON).startswith("emoji:")
