"""Exports: size presets with print-readable fonts, tidy tables of the figures, the HTML report."""

from __future__ import annotations

import html.parser
import io
import shutil
import subprocess

import plotly.graph_objects as go
import pytest

from landscape.experiments.basins import barrier_from_curve
from landscape.plots import export, tidy
from landscape.plots.interpolation import figure_interpolation
from landscape.plots.matrix import figure_barrier_matrix
from landscape.plots.theme import FONT_SIZE, apply_theme

LAMBDAS = [i / 4 for i in range(5)]


def _result(a: int, b: int, method: str, height: float) -> dict:
    loss = [0.1 + height * 4 * x * (1 - x) for x in LAMBDAS]
    acc = [0.9 - 0.1 * height * 4 * x * (1 - x) for x in LAMBDAS]
    curve = barrier_from_curve(LAMBDAS, loss, acc).to_dict()
    return {**curve, "model": "mlp-digits", "seeds": [a, b], "method": method,
            "group": "perm", "split": "test", "space": "weights",
            "cache_key": f"key-{a}-{b}-{method}"}  # fmt: skip


SERIES = [
    {"label": "naive", "results": [_result(0, 1, "naive", 1.0), _result(2, 3, "naive", 2.0)]},
    {"label": "weight/perm", "results": [_result(0, 1, "weight", 0.2)]},
]
MATRIX = {
    "model": "mlp-digits", "seeds": [0, 1, 2], "method": "weight", "group": "perm",
    "space": "weights", "split": "test", "points": 5,
    "barrier_loss": [[0.0, 0.5, 0.2], [0.5, 0.0, 0.1], [0.2, 0.1, 0.0]],
    "barrier_accuracy": [[0.0, 0.15, 0.05], [0.15, 0.0, 0.04], [0.05, 0.04, 0.0]],
    "pairs": [], "warnings": [],
}  # fmt: skip


# ---------------------------------------------------------------- sizes and fonts


def test_legend_and_ticks_share_one_size_on_screen():
    fig = apply_theme(go.Figure(go.Scatter(x=[0, 1], y=[0, 1], name="a")))
    assert fig.layout.legend.font.size == fig.layout.font.size == FONT_SIZE
    assert fig.layout.xaxis.tickfont.size is None  # ticks take the base font


@pytest.mark.parametrize("size", list(export.SIZES))
def test_each_size_sets_its_box_and_scales_every_font(size):
    preset = export.SIZES[size]
    screen = figure_interpolation(SERIES, split="test")
    out = export.paper_figure(screen, size)
    assert (out.layout.width, out.layout.height) == (preset.width_px, preset.height_px)
    assert out.layout.font.size == pytest.approx(preset.font_px)
    assert out.layout.legend.font.size == pytest.approx(out.layout.font.size)  # one size
    if screen.layout.title.font.size:
        assert out.layout.title.font.size > out.layout.font.size
    assert screen.layout.width is None  # the screen figure is left as it was


def test_paper_sizes_print_at_the_same_font_and_300_dpi():
    single, double = export.SIZES["single"], export.SIZES["double"]
    inch = export.PX_PER_INCH
    assert single.width_px / inch == pytest.approx(3.5, abs=0.01)  # 88 mm
    assert double.width_px / inch == pytest.approx(7.0, abs=0.01)  # 180 mm
    for p in (single, double):
        assert 7 <= p.font_px / inch * 72 <= 10  # points on paper, placed at its width
        assert p.png_scale * inch == pytest.approx(300)
    slide = export.SIZES["slide"]
    assert (slide.width_px, slide.height_px) == (1600, 900)


def test_an_unknown_size_is_refused_by_name():
    with pytest.raises(Exception, match="single, double, slide"):
        export.paper_figure(go.Figure(), "poster")


# ---------------------------------------------------------------- tidy tables


def test_tidy_interpolation_has_one_row_per_pair_method_metric_and_lambda():
    frame = tidy.tidy_interpolation(SERIES)
    assert list(frame.columns[:10]) == ["model", "seed_a", "seed_b", "method", "group", "space",
                                        "split", "metric", "lam", "value"]  # fmt: skip
    assert len(frame) == (2 + 1) * 2 * len(LAMBDAS)
    mid = frame[(frame.method == "naive") & (frame.metric == "loss") & (frame.lam == 0.5)]
    assert sorted(mid.value) == pytest.approx([1.1, 2.1])
    assert list(mid["mean"]) == pytest.approx([1.6, 1.6])
    assert (mid.band_low.iloc[0], mid.band_high.iloc[0]) == pytest.approx((1.1, 2.1))
    one = frame[(frame.method == "weight") & (frame.metric == "accuracy")]
    assert list(one.value) == SERIES[1]["results"][0]["accuracy"]
    assert (one.band_low == one.band_high).all()  # one pair: no band
    assert set(frame[frame.method == "naive"].group) == {""}  # naive aligns under no group
    assert set(one.group) == {"perm"}


def test_tidy_checkpoints_say_which_checkpoint_is_returned():
    rows = [{"init": i, "step": s, "barrier_loss": 1.0 / (s + 1), "barrier_accuracy": 0.1,
             "selected": s == 10} for i in ("identity", "weight") for s in (0, 10)]  # fmt: skip
    frame = tidy.tidy_iterations({"split": "test", "space": "weights", "rounds": [],
                             "checkpoints": rows}, "checkpoints")  # fmt: skip
    assert list(frame.columns) == ["init", "step", "returned", "space", "split", "metric", "value"]
    assert len(frame) == 8 and set(frame[frame["returned"]]["step"]) == {10}
    older = [{k: v for k, v in r.items() if k != "selected"} for r in rows]  # before the field
    frame = tidy.tidy_iterations({"split": "test", "space": "weights", "rounds": [],
                             "checkpoints": older}, "checkpoints")  # fmt: skip
    assert not frame["returned"].any()


def test_tidy_matrix_covers_every_cell_and_marks_the_diagonal():
    frame = tidy.tidy_matrix(MATRIX)
    assert len(frame) == 2 * 9
    diag = frame[frame.seed_a == frame.seed_b]
    assert (diag.value == 0).all() and not diag.measured.any()
    cell = frame[(frame.seed_a == 0) & (frame.seed_b == 1) & (frame.metric == "loss barrier")]
    assert cell.value.item() == 0.5


def test_tidy_atlas_has_a_panel_column():
    atlas = {"seeds": [0], "reference": 0, "projection": "pca", "explained_raw": [],
             "explained_aligned": [], "orbit_ratio_raw": 1.0, "orbit_ratio_aligned": 0.1,
             "points": [{"seed": 0, "kind": "seed", "copy": 0, "raw": [1.0, 2.0],
                         "aligned": [3.0, 4.0]}]}  # fmt: skip
    frame = tidy.tidy_atlas(atlas, "mlp-digits")
    assert list(frame.panel) == ["raw", "aligned"]
    assert list(frame.x) == [1.0, 3.0]


def test_tidy_zoo_has_a_seed_column():
    rows = [{"name": "mlp-digits", "seeds": [{"seed": 0, "test_accuracy": 0.97},
                                            {"seed": 1, "test_accuracy": 0.96}]}]  # fmt: skip
    frame = tidy.tidy_zoo(rows)
    assert list(frame.seed) == [0, 1] and list(frame.value) == [0.97, 0.96]


def test_tidy_csv_has_its_headers():
    csv = export.to_csv(tidy.tidy_interpolation(SERIES)).decode()
    assert csv.startswith("model,seed_a,seed_b,method,group,space,split,metric,lam,value,")


# ---------------------------------------------------------------- the report


class _Parser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ids: list[str] = []
        self.scripts = 0
        self.void = {"meta", "br", "link", "img", "input", "hr"}

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]
        self.scripts += tag == "script"
        if tag not in self.void:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (self.stack[-3:], tag)
        self.stack.pop()


def _report() -> tuple[str, list[export.ReportFigure]]:
    figures = [
        export.ReportFigure("interpolation-mlp-digits-test", figure_interpolation(SERIES),
                            {"model": "mlp-digits", "split": "test", "points": 5},
                            ["key-0-1-naive"]),
        export.ReportFigure("barrier-matrix <x>", figure_barrier_matrix(MATRIX),
                            {"model": "mlp-digits", "seeds": [0, 1, 2]}, []),
    ]  # fmt: skip
    return export.report_html(figures), figures


def test_report_is_valid_html_with_every_figure_its_settings_and_the_versions():
    text, figures = _report()
    parser = _Parser()
    parser.feed(text)
    parser.close()
    assert parser.stack == []  # every element closed, in order
    assert [i for i in parser.ids if i.startswith("figure-")] == ["figure-0", "figure-1"]
    assert text.count("plotly.js v") == 1  # the library inlined once
    versions = export.versions()
    assert versions["torch"] and f"<td>{versions['python']}</td>" in text
    assert "key-0-1-naive" in text and "<td>mlp-digits</td>" in text
    assert "barrier-matrix &lt;x&gt;" in text  # names are escaped


@pytest.mark.skipif(shutil.which("chromium") is None and not shutil.os.path.exists(
    "/usr/bin/chromium"), reason="needs a Chromium browser")  # fmt: skip
def test_report_renders_its_plots_in_a_browser(tmp_path):
    text, figures = _report()
    page = tmp_path / "report.html"
    page.write_text(text)
    dom = subprocess.run(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update",
         "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    # plotly draws each figure into its div: an SVG main plot appears once it has rendered
    for i in range(len(figures)):
        start = dom.index(f'id="figure-{i}"')
        assert 'class="main-svg"' in dom[start : start + 20_000]
    assert dom.count('class="plot-container plotly"') == len(figures)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["single", "slide"])
def test_png_has_the_preset_pixels(size):
    preset = export.SIZES[size]
    png = export.to_png(figure_barrier_matrix(MATRIX), size)
    w, h = (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big"))
    assert (w, h) == (round(preset.width_px * preset.png_scale),
                      round(preset.height_px * preset.png_scale))  # fmt: skip


def test_a_narrow_export_makes_room_between_two_panels():
    """In one column the right panel's tick labels and y title need their own room: the gap
    between the panels grows to it; across two columns the screen's gap is kept."""
    fig = figure_interpolation(SERIES)
    screen = fig.layout.xaxis.domain, fig.layout.xaxis2.domain
    single = export.paper_figure(fig, "single")
    gap = single.layout.xaxis2.domain[0] - single.layout.xaxis.domain[1]
    assert gap * export.SIZES["single"].width_px >= export.PANEL_GAP_PX - 1e-6
    assert single.layout.xaxis.domain[0] == screen[0][0]
    assert single.layout.xaxis2.domain[1] == screen[1][1]
    double = export.paper_figure(fig, "double")
    assert (double.layout.xaxis.domain, double.layout.xaxis2.domain) == screen


# ---------------------------------------------------------------- files hold no screen extras


def _marked(fig: go.Figure) -> bool:
    """Whether the λ marker (diamonds on the curves, a dotted line) is drawn in ``fig``."""
    diamonds = any(
        getattr(t.marker, "symbol", None) == "diamond" for t in fig.data if t.marker is not None
    )
    dotted = any(s.line.dash == "dot" for s in fig.layout.shapes)
    return diamonds or dotted


def test_the_lambda_marker_is_on_screen_and_in_no_export():
    screen = figure_interpolation(SERIES, mark=0.5)
    assert _marked(screen)  # the screen shows it
    for size in export.SIZES:
        assert not _marked(export.paper_figure(screen, size)), size
    assert not any("at λ" in str(t) for t in export.figure_frame(screen)["trace"])
    assert "at λ" not in export.to_csv(screen).decode()
    figures = [export.ReportFigure("interpolation", screen, {}, [])]
    report = export.report_html(figures, environment={})
    assert '"diamond"' not in report and "screen-only" not in report


def test_the_triangle_marker_is_in_no_export():
    from landscape.plots.triangle import figure_triangles

    pts = [(1 - i / 4 - j / 4, i / 4, j / 4) for i in range(5) for j in range(5 - i)]
    tri = {"seeds": [0, 1, 2], "method": "naive", "group": "perm", "split": "test",
           "points": pts, "loss": [0.1] * len(pts), "accuracy": [0.9] * len(pts),
           "excess_loss": [0.0] * len(pts), "tol": 0.05, "basin_fraction": 1.0,
           "resolution": 4}  # fmt: skip
    screen = figure_triangles([tri], mark=0.5)
    assert _marked(screen)
    assert not _marked(export.paper_figure(screen, "single"))


def test_a_png_carries_the_dpi_its_size_says():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (3, 2), "white").save(buf, format="PNG")  # no pHYs chunk
    assert "dpi" not in Image.open(io.BytesIO(buf.getvalue())).info
    png = export.with_dpi(buf.getvalue(), 72)
    out = export.with_dpi(png, export.PRINT_DPI)  # a second call replaces the first
    assert out.count(b"pHYs") == 1
    image = Image.open(io.BytesIO(out))
    image.load()  # every chunk's CRC is checked
    assert image.info["dpi"] == pytest.approx((export.PRINT_DPI, export.PRINT_DPI), abs=0.1)


@pytest.mark.slow
def test_an_exported_png_says_300_dpi():
    from PIL import Image

    image = Image.open(io.BytesIO(export.to_png(figure_barrier_matrix(MATRIX), "single")))
    assert image.info["dpi"] == pytest.approx((export.PRINT_DPI, export.PRINT_DPI), abs=0.1)


def _eight_series() -> list[dict]:
    methods = ["naive", "weight/perm", "weight/signed-perm", "weight/orth"]
    return [{"label": f"{m} · {space}", "method": m, "space": space,
             "results": [_result(0, 1, m.partition("/")[0], 0.5)]}
            for m in methods for space in ("weights", "circuits")]  # fmt: skip


def test_a_long_legend_in_one_column_makes_the_figure_taller_not_the_plot_smaller():
    fig = figure_interpolation(_eight_series())
    preset = export.SIZES["single"]
    row = round(1.6 * preset.font_px)
    rows = export.legend_rows(export.paper_figure(fig, "double"), preset.width_px,
                              preset.font_px)  # fmt: skip
    fits = int(export.LEGEND_SHARE * preset.height_px / row)
    assert rows > fits
    single = export.paper_figure(fig, "single")
    assert single.layout.height == preset.height_px + (rows - fits) * row
    assert rows * row / single.layout.height < 1 / 3
    assert export.paper_figure(figure_interpolation(SERIES), "double").layout.height == (
        export.SIZES["double"].height_px
    )


@pytest.mark.slow
def test_a_single_column_svg_of_eight_series_spends_under_a_third_on_its_legend():
    import re

    svg = export.to_svg(figure_interpolation(_eight_series()), "single").decode()
    height = float(re.search(r'<svg[^>]* height="([\d.]+)"', svg).group(1))
    legend = svg[svg.index('class="legend"') :]
    box = float(re.search(r'class="bg"[^>]* height="([\d.]+)"', legend).group(1))
    assert box / height < 1 / 3, (box, height)


# ---------------------------------------------------------------- the report's text


def test_the_report_holds_the_tables_the_space_and_methods_as_text():
    fig = figure_interpolation(SERIES)
    rows = [{"method": "naive", "space": "weights", "loss barrier (nats)": "0.50 ± 0.10",
             "accuracy barrier (points)": "5.0 ± 1.0", "max |Δlogits|": float("nan")}]  # fmt: skip
    settings = {"model": "vit", "methods": ["naive · weights", "weight/perm · circuits"],
                "space": ["weights", "circuits"], "pairs": [[0, 1], [1, 2]]}  # fmt: skip
    text = export.report_html(
        [export.ReportFigure("interpolation", fig, settings, [], {"Barriers": rows})],
        environment={},
    )
    assert "naive · weights, weight/perm · circuits" in text
    assert "\\u00b7" not in text and "[&quot;" not in text
    assert "<td>weights, circuits</td>" in text
    assert "<td>(0, 1), (1, 2)</td>" in text
    assert "<h3>Barriers</h3>" in text and "<th>loss barrier (nats)</th>" in text
    assert "<td>0.50 ± 0.10</td>" in text and "<td>—</td>" in text


def test_the_symmetry_levels_csv_holds_the_levels():
    from landscape.plots.home import SYMMETRY_LEVELS, figure_symmetry_levels

    frame = tidy.tidy_symmetry_levels()
    assert list(frame["level"]) == [1, 2, 3, 4]
    assert list(frame["name"]) == [name for name, _ in SYMMETRY_LEVELS]
    assert list(frame["group"]) == ["S_n", "B_d", "O(d)", "GL(d_head)"]
    assert not any("<br>" in a for a in frame["acts_on"])
    assert export.figure_frame(figure_symmetry_levels()).empty  # why the page passes the table


def test_naive_has_no_group_in_any_csv():
    """naive aligns nothing: every CSV leaves its group empty, whatever group its result was
    stored under (one CSV said "perm", another nothing)."""
    from tests.plots.test_plots import _triangle
    from tests.plots.test_surface_plots import plane_result

    naive = {"method": "naive", "group": "perm"}
    frames = {
        "matrix": tidy.tidy_matrix({**MATRIX, **naive}),
        "triangles": tidy.tidy_triangles([_triangle("naive", 1.0)]),
        "surface": tidy.tidy_surface({**plane_result(), **naive}),
        "interpolation": tidy.tidy_interpolation(SERIES[:1]),
    }
    for name, frame in frames.items():
        assert set(frame["group"]) == {""}, name
    assert set(tidy.tidy_matrix(MATRIX)["group"]) == {"perm"}  # an aligning method keeps it


def test_the_report_titles_each_figure_by_what_it_shows_not_its_file_name():
    """A figure's heading is its page, what it shows, and the model, method(s), seeds and
    split of its settings; the file name (a slug) only stands in the settings table."""
    fig = figure_interpolation(SERIES)

    def heading(settings: dict, page: str = "Page", title: str = "what") -> str:
        return export.ReportFigure("slug-0-1", fig, settings, [], page=page, title=title).heading

    eigen = {"model": "mlp-digits", "methods": ["weight/orth", "learned/orth"], "seeds": [0, 1],
             "learned": True}  # fmt: skip
    assert heading(eigen, "Eigenangles", "the eigenangles of the matching rotations") == (
        "Eigenangles: the eigenangles of the matching rotations — mlp-digits, weight/orth and "
        "learned/orth, seeds 0 and 1"
    )
    matrix = {"model": "m", "seeds": [0, 1, 2], "method": "weight", "group": "perm",
              "split": "test"}  # fmt: skip
    assert heading(matrix).endswith("— m, weight/perm, seeds 0, 1 and 2, test split")
    naive = heading({**matrix, "method": "naive"})
    assert naive.endswith("— m, naive, seeds 0, 1 and 2, test split")
    assert heading({"model": "m", "methods": ["naive"], "pairs": [[0, 1], [1, 2]]}).endswith(
        "— m, naive, seeds 0 ↔ 1 and 1 ↔ 2"
    )
    assert heading({"model": "m", "seed": 3}) == "Page: what — m, seed 3"
    assert heading({"model": "m", "parent seed": 2, "alignment": "weight/perm"}).endswith(
        "— m, weight/perm, parent seed 2"
    )
    assert heading({}, "", "") == "slug-0-1"  # nothing better known
    entry = export.ReportFigure("eigenangles-mlp-digits-0-1", fig, eigen, [],
                                page="Eigenangles", title="the eigenangles")  # fmt: skip
    text = export.report_html([entry], environment={})
    assert (
        "<h2>Eigenangles: the eigenangles — mlp-digits, weight/orth and learned/orth, seeds 0 "
        "and 1</h2>" in text
    )
    assert "<h2>eigenangles-mlp-digits-0-1</h2>" not in text
    assert "<th>file name</th><td>eigenangles-mlp-digits-0-1</td>" in text


# ---------------------------------------------------------------- the triangles in a file


def _boxes(fig: go.Figure) -> dict[str, tuple[float, float, float, float]]:
    """Every drawn thing of a triangle figure as a box (x0, y0, x1, y1) in px of its plot area,
    y down: each triangle (the largest its domain holds, centred), its corner labels where
    plotly puts them (A's baseline a third of its font above the apex, B and C centred 3 px out
    from their corners, their baseline 0.83 of their font and 3 px under the base), each title,
    the colour bar and the note; text CHAR_EM a character wide, 0.8 of its font above its
    baseline and 0.2 under."""
    from landscape.plots.triangle import CHAR_EM, LINE_EM, NOTE, triangle_count

    layout = fig.layout
    w = layout.width - layout.margin.l - layout.margin.r
    h = layout.height - layout.margin.t - layout.margin.b

    def text(cx: float, baseline: float, words: str, font: float) -> tuple:
        half = len(words) * CHAR_EM * font / 2
        return (cx - half, baseline - 0.8 * font, cx + half, baseline + 0.2 * font)

    boxes = {}
    for i in range(triangle_count(fig)):
        t = layout["ternary" if i == 0 else f"ternary{i + 1}"]
        # plotly draws the largest equilateral triangle its domain holds, centred in it
        dx0, dx1 = t.domain.x[0] * w, t.domain.x[1] * w
        dy0, dy1 = (1 - t.domain.y[1]) * h, (1 - t.domain.y[0]) * h
        side = min(dx1 - dx0, (dy1 - dy0) * 2 / 3**0.5)
        cx, cy = (dx0 + dx1) / 2, (dy0 + dy1) / 2
        x0, x1 = cx - side / 2, cx + side / 2
        top, bottom = cy - side * 3**0.5 / 4, cy + side * 3**0.5 / 4
        boxes[f"triangle {i}"] = (x0, top, x1, bottom)
        font = t.aaxis.title.font.size
        boxes[f"A {i}"] = text((x0 + x1) / 2, top - font / 3, t.aaxis.title.text, font)
        under = bottom + 0.83 * font + 3
        boxes[f"B {i}"] = text(x0 - 3, under, t.baxis.title.text, font)
        boxes[f"C {i}"] = text(x1 + 3, under, t.caxis.title.text, font)
        title = layout.annotations[i]
        lines = title.text.split("<br>")
        half = max(len(x) for x in lines) * CHAR_EM * title.font.size / 2
        low = (1 - title.y) * h
        boxes[f"title {i}"] = (title.x * w - half, low - len(lines) * LINE_EM * title.font.size,
                               title.x * w + half, low)  # fmt: skip
    bar = layout.coloraxis.colorbar
    assert bar.orientation == "h" and bar.yanchor == "top"
    bar_h = 2 * LINE_EM * layout.font.size + bar.thickness + 2 * bar.ypad  # title, bar, numbers
    boxes["colour bar"] = ((0.5 - bar.len / 2) * w, (1 - bar.y) * h, (0.5 + bar.len / 2) * w,
                           (1 - bar.y) * h + bar_h)  # fmt: skip
    note = next(a for a in layout.annotations if a.name == NOTE)
    lines = note.text.split("<br>")
    half = max(len(x) for x in lines) * CHAR_EM * note.font.size / 2
    boxes["note"] = (note.x * w - half, (1 - note.y) * h, note.x * w + half,
                     (1 - note.y) * h + len(lines) * LINE_EM * note.font.size)  # fmt: skip
    return boxes


@pytest.mark.parametrize("size", list(export.SIZES))
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_exported_triangles_keep_their_labels_apart_and_inside_their_box(size, n):
    """The single-column export of the triangles drew its corner labels over each other, cut
    its note and shrank the triangles to a few millimetres: at every size the panels go in rows,
    each triangle at least MIN_SIDE_EM fonts wide with hexagons that tile it, and no title,
    corner label, triangle, colour bar or note overlaps another or leaves the box."""
    from landscape.plots.triangle import HEXAGON, MIN_SIDE_EM, figure_triangles
    from tests.plots.test_plots import _triangle

    methods = ["naive", "weight/orth", "learned/orth-mean", "activation/signed-perm"][:n]
    results = [{**_triangle(m, 0.5), "seeds": [10, 11, 12]} for m in methods]
    screen = figure_triangles(results, titles=methods, mark=0.5)
    preset = export.SIZES[size]
    out = export.paper_figure(screen, size)
    assert out.layout.width == preset.width_px
    assert out.layout.height <= max(preset.height_px, 2 * preset.width_px)
    boxes = _boxes(out)
    w = out.layout.width - out.layout.margin.l - out.layout.margin.r
    h = out.layout.height - out.layout.margin.t - out.layout.margin.b
    for name, (x0, y0, x1, y1) in boxes.items():
        assert -0.5 <= x0 and x1 <= w + 0.5 and -0.5 <= y0 and y1 <= h + 0.5, (name, w, h)
    names = list(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = boxes[a], boxes[b]
            apart = ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0
            assert apart, (a, boxes[a], b, boxes[b])
    sides = [boxes[f"triangle {i}"][2] - boxes[f"triangle {i}"][0] for i in range(n)]
    assert min(sides) >= MIN_SIDE_EM * preset.font_px - 1e-6
    hexagons = [t for t in out.data if getattr(t.marker, "symbol", None) == "hexagon"]
    assert len(hexagons) == n  # the screen's λ marker is left out
    assert all(t.marker.size == pytest.approx(HEXAGON * sides[0] / 4) for t in hexagons)


def test_a_single_column_triangle_export_is_two_rows_of_readable_triangles():
    """Three triangles in one column: two rows, each triangle at least 0.85 in wide in print,
    where the screen's one row left them 0.7 in wide, their corner labels over each other."""
    from landscape.plots.triangle import figure_triangles
    from tests.plots.test_plots import _triangle

    three = [_triangle(m, 0.5) for m in ("naive", "weight", "learned")]
    out = export.paper_figure(figure_triangles(three), "single")
    rows = {round(out.layout[k].domain.y[0], 6) for k in ("ternary", "ternary2", "ternary3")}
    assert len(rows) == 2
    w = out.layout.width - out.layout.margin.l - out.layout.margin.r
    side = (out.layout.ternary.domain.x[1] - out.layout.ternary.domain.x[0]) * w
    assert side / export.PX_PER_INCH >= 0.85
