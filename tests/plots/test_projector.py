"""Presentation mode: every figure for a projector is its screen figure with every font, line
and marker doubled (``theme.projector``), and as tall as one 1080-pixel screen allows."""

from __future__ import annotations

from typing import Any

import pytest

from landscape.plots import theme
from tests.plots.test_plots import BUILDERS


def _sizes(node: Any, path: str = "") -> dict[str, float]:
    """Every font size under ``node`` by its path in the figure's JSON."""
    out = {}
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            if key.endswith("font") and isinstance(value, dict) and "size" in value:
                out[here] = value["size"]
            out.update(_sizes(value, here))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.update(_sizes(value, f"{path}[{i}]"))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_projector_doubles_fonts_lines_and_markers(name):
    screen = BUILDERS[name]()
    big = theme.projector(screen)
    s, b = screen.to_plotly_json(), big.to_plotly_json()
    assert b["layout"]["font"]["size"] == 2 * (s["layout"]["font"].get("size") or 14)
    fonts = _sizes(s["layout"])
    assert fonts, "every themed figure sets some font"
    for path, size in fonts.items():
        assert _sizes(b["layout"])[path] == 2 * size, path
    boxed = s["layout"].get("width")  # drawn to a pixel box: the box grows by √2
    if boxed:
        assert b["layout"]["height"] == round(2**0.5 * s["layout"]["height"])
    else:
        assert b["layout"]["height"] >= theme.PROJECTOR_HEIGHT
    for axis in (k for k in b["layout"] if k.startswith(("xaxis", "yaxis"))):
        assert b["layout"][axis]["linewidth"] == 2 * s["layout"][axis].get("linewidth", 1)
    for t0, t1 in zip(s["data"], b["data"], strict=True):
        if t0.get("type", "scatter") in ("scatter", "box"):
            width = t0.get("line", {}).get("width", 2.0)  # plotly's default when unset
            assert t1["line"]["width"] == 2 * width, t0["name"]
        size = t0.get("marker", {}).get("size")
        if isinstance(size, (int, float)) and "markers" in t0.get("mode", ""):
            kind = t0.get("type")
            if kind == "scatterternary" and t0["marker"].get("symbol") == "hexagon":
                assert b["layout"]["width"] == round(2**0.5 * s["layout"]["width"])
                assert t1["marker"]["size"] == pytest.approx(2**0.5 * size)  # tiles its triangle
            else:
                assert t1["marker"]["size"] == 2 * size, t0.get("name")


def test_a_builder_called_for_a_projector_is_its_screen_figure_through_projector():
    from landscape import plots

    series = [{"label": "naive", "results": [{"lambdas": [0.0, 0.5, 1.0], "loss": [1, 2, 1],
                                              "accuracy": [0.9, 0.5, 0.9]}]}]  # fmt: skip
    screen = plots.figure_interpolation(series, mark=0.5)
    big = plots.figure_interpolation(series, mark=0.5, presentation=True)
    assert big.to_plotly_json() == theme.projector(screen).to_plotly_json()
    assert screen.layout.font.size == theme.FONT_SIZE and big.layout.font.size == 28


def test_the_projector_figure_is_the_screen_figure_scaled_and_validates_changes():
    """The projector's figure is built from an already validated spec without validating it
    again (its cost on every presentation page); what it holds is what a validated figure of
    that spec holds, and a later change is still checked."""
    import plotly.graph_objects as go
    import pytest

    from landscape.plots.theme import apply_theme, projector

    fig = apply_theme(go.Figure(go.Scatter(x=[0, 1], y=[2, 3], mode="lines+markers")),
                      title="t")  # fmt: skip
    big = projector(fig)
    assert big.to_plotly_json() == go.Figure(big.to_plotly_json()).to_plotly_json()
    assert big.data[0].line.width > 0 and big.layout.font.size > fig.layout.font.size
    with pytest.raises(ValueError):
        big.update_layout(heigth=300)


def test_a_note_offset_in_pixels_grows_with_the_margins():
    """A note placed in pixels below the plot (the Atlas's) moves down as the bottom margin
    grows on a projector, so that the larger axis titles stay clear of it."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[0], y=[0]))
    fig.update_layout(margin={"b": 110})
    fig.add_annotation(text="note", xref="paper", yref="paper", x=0.5, y=0, yshift=-80)
    big = theme.projector(fig, scale=2.0)
    assert big.layout.annotations[0].yshift == -120 and big.layout.margin.b == 165
