"""The Surface page's figures and tidy table, on a hand-made result."""

import math

import pytest

from landscape.plots.fields import MissingField
from landscape.plots.surface import figure_surface
from landscape.plots.theme import PROJECTOR_HEIGHT
from landscape.plots.tidy import tidy_surface


def plane_result():
    xs, ys = [-1.0, 0.0, 1.0, 2.0], [-1.0, 0.0, 1.0]
    loss = [[0.1 * (1 + i + j) for j in range(4)] for i in range(3)]
    acc = [[0.9 - 0.01 * (i + j) for j in range(4)] for i in range(3)]
    places = ((0, 0), (1.5, 0), (0.5, 0.8))
    points = [{"label": f"m seed {s}", "x": x, "y": y, "loss": 0.1, "accuracy": 0.9}
              for s, (x, y) in zip((0, 1, 2), places, strict=True)]  # fmt: skip
    path = {"label": "m seed 0–m seed 1", "x": [0.0, 0.75, 1.5], "y": [0.0, 0.0, 0.0],
            "lambdas": [1.0, 0.5, 0.0], "loss": [0.1, 0.5, 0.1], "accuracy": [0.9, 0.7, 0.9],
            "barrier_loss": 0.4, "barrier_accuracy": 0.2}  # fmt: skip
    return {"kind": "plane", "model": "m", "seeds": [0, 1, 2], "method": "weight",
            "group": "perm", "split": "test", "x": xs, "y": ys, "loss": loss, "accuracy": acc,
            "points": points, "paths": [path]}  # fmt: skip


def test_contour_marks_the_models_and_draws_the_paths():
    fig = figure_surface(plane_result())
    contour, path, models = fig.data
    assert contour.type == "contour"
    assert contour.z[0][0] == pytest.approx(math.log10(0.1))  # loss on a log scale
    assert contour.customdata[0][0] == 0.1  # hovering shows the loss itself
    assert list(path.x) == [0.0, 0.75, 1.5] and path.line.dash == "dash"
    assert list(models.text) == ["seed 0", "seed 1", "seed 2"]
    assert "weight/perm" in fig.layout.title.text
    acc = figure_surface(plane_result(), metric="accuracy")
    assert acc.data[0].z[0][0] == pytest.approx(90.0)


def test_3d_surface_and_presentation_mode():
    fig = figure_surface(plane_result(), view="3d")
    assert [t.type for t in fig.data] == ["surface", "scatter3d", "scatter3d"]
    big = figure_surface(plane_result(), view="3d", presentation=True)
    assert big.layout.height >= PROJECTOR_HEIGHT
    assert big.layout.scene.xaxis.title.font.size == 2 * fig.layout.scene.xaxis.title.font.size


def test_tidy_surface_has_one_value_per_row():
    frame = tidy_surface(plane_result())
    grid = frame[frame.part == "grid"]
    assert len(grid) == 2 * 12 and set(grid.metric) == {"loss", "accuracy"}
    assert len(frame[frame.part == "model"]) == 2 * 3
    path = frame[(frame.part == "path") & (frame.metric == "loss")]
    assert list(path.value) == [0.1, 0.5, 0.1] and list(path.lam) == [1.0, 0.5, 0.0]


def test_a_missing_field_is_named():
    r = plane_result()
    del r["points"]
    with pytest.raises(MissingField, match="points"):
        figure_surface(r)


def test_hessian_directions_name_their_axes():
    from landscape.plots.surface import axis_titles, surface_title

    r = {**plane_result(), "kind": "directions", "seeds": [0], "paths": []}
    assert axis_titles(r)[0] == "α (along direction 1)"
    assert "random directions (seed 0)" in surface_title(r)  # an older result: no directions
    r["directions"] = "hessian"
    assert axis_titles(r) == ("α (along Hessian eigenvector 1)", "β (along Hessian eigenvector 2)")
    assert "top two Hessian eigenvectors" in surface_title(r)


def test_training_paths_are_drawn_with_their_projection_errors():
    r = {**plane_result(), "kind": "directions", "seeds": [0], "directions": "trajectory",
         "trajectory": {"explained": [0.8, 0.15]}, "paths": [],
         "points": plane_result()["points"][:1],
         "trajectories": [{"seed": 0, "steps": [0, 10, 20], "x": [1.0, 0.5, 0.0],
                           "y": [0.2, 0.1, 0.0], "errors": [0.1, 0.2, 0.0], "error": 0.125},
                          {"seed": 1, "steps": [0, 10, 20], "x": [0.3, 0.2, 0.1],
                           "y": [0.9, 0.8, 0.7], "errors": [0.9, 0.95, 0.97], "error": 0.93,
                           "end_gap": 0.05}]}  # fmt: skip
    fig = figure_surface(r)
    runs = [t for t in fig.data if t.name and "training path" in t.name]
    assert [t.name for t in runs] == [
        "seed 0's training path: 12.5% outside the plane",
        "seed 1's training path: 93.0% outside the plane (ends 5% from its checkpoint)",
    ]
    assert list(runs[1].x) == [0.3, 0.2, 0.1] and runs[0].marker.symbol[0] == "square"
    assert fig.layout.showlegend is True and "95% of" in fig.layout.title.text
    assert figure_surface({**r, "trajectories": []}).layout.showlegend is False
