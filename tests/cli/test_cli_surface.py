"""``landscape surface``: --json, the summary, --figure and one-line refusals."""

import json

import pytest

from landscape.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_surface_json_and_cache_hit(capsys):
    argv = ["surface", "mlp-digits", "--seed", "0", "--resolution", "3", "--extent", "0.5",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["kind"] == "directions" and first["cached"] is False
    assert first["x"] == [-0.5, 0.0, 0.5] and len(first["loss"]) == 3
    assert first["loss"][1][1] == first["points"][0]["loss"]
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cached"] is True and second["loss"] == first["loss"]


def test_plane_summary_and_figure(capsys, tmp_path):
    out = tmp_path / "plane.html"
    argv = ["surface", "mlp-digits", "--seeds", "0", "1", "2", "--method", "weight", "--group",
            "perm", "--resolution", "3", "--path-points", "3", "--figure", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "the plane through mlp-digits seeds 0, 1, 2" in text
    assert "loss barrier" in text and "weight matching under perm" in text
    assert out.exists() and (tmp_path / "plane-3d.html").exists()


@pytest.mark.parametrize(
    "argv,match",
    [
        pytest.param(
            ["--seed", "0", "--margin", "0.3"],
            "--margin: only for a surface through",
            id="margin-around-one",
        ),
        pytest.param(
            ["--seeds", "0", "1", "2", "--extent", "2"],
            "--extent: only for a surface around",
            id="extent-through-three",
        ),
        pytest.param(["--seed", "0", "--method", "weight"], "--method: only", id="method-one"),
        pytest.param(["--seeds", "0", "1", "1"], "seeds must differ", id="repeated-seeds"),
        pytest.param(["--seeds", "0", "1"], "expected 3 arguments", id="two-seeds"),
        pytest.param([], "one of the arguments --seed --seeds is required", id="no-seed"),
        pytest.param(["--seed", "0", "--resolution", "1"], "at least 2", id="resolution-1"),
        pytest.param(["--seed", "0", "--extent", "0"], "--extent", id="zero-extent"),
        pytest.param(["--seed", "0", "--extent", "nan"], "finite", id="nan-extent"),
        pytest.param(["--seed", "0", "--figure", "x.pdf"], "suffix", id="bad-figure"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, match):
    assert main(["surface", "mlp-digits", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_resolution_over_the_budget_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.0001")
    assert main(["surface", "mlp-digits", "--seed", "0", "--resolution", "100"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--resolution 100 asks for 10001 grid points" in err and len(err.splitlines()) == 1


def test_path_points_over_the_budget_are_named(capsys):
    # the three paths, not the 21 × 21 grid, ask for the points: the line says so
    argv = ["surface", "mlp-digits", "--seeds", "0", "1", "2", "--path-points", "100000000"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--path-points 100000000" in err and "300000000 on the three paths" in err
    assert len(err.splitlines()) == 1
