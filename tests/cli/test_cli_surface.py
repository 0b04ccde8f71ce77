"""``landscape surface``: --json, the summary, --figure and one-line refusals."""

import json

import pytest

from landscape.cli import main
from landscape.numbers import number


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


def test_hessian_directions_print_their_eigenvalues(capsys):
    argv = ["surface", "mlp-digits", "--seed", "0", "--directions", "hessian", "--resolution",
            "3", "--extent", "0.01"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["directions"] == "hessian" and r["cached"] is False
    lam1, lam2 = r["hessian"]["eigenvalues"]
    assert lam1 >= lam2 and r["hessian"]["batch"]["rows"] == 512
    assert main(argv) == 0  # the summary, read from the cache
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "along the top two eigenvectors of its Hessian, filter-normalised" in text
    assert f"λ₁ = {number(lam1)}, λ₂ = {number(lam2)}" in text
    assert "512 examples of the train split" in text and "computed now" not in text
    assert main(["surface", "mlp-digits", "--seed", "0", "--resolution", "3", "--extent",
                 "0.01", "--json"]) == 0  # fmt: skip
    random = json.loads(capsys.readouterr().out)
    assert random["directions"] == "random" and random["cached"] is False


def test_the_hessians_memory_is_refused_in_one_line_before_loading(capsys, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")

    def no_loading(*args, **kwargs):
        raise AssertionError("loaded a model over the budget")

    monkeypatch.setattr("landscape.sources.Source.load", no_loading)
    argv = ["surface", "mlp-digits", "--seed", "0", "--directions", "hessian", "--resolution",
            "3"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "the Hessian of 10890 parameters needs" in err and len(err.splitlines()) == 1
    assert err.endswith("(random directions or a smaller model need less)")


def test_directions_are_the_librarys():
    from landscape.cli.parser import arguments as cli_parser
    from landscape.experiments import surfaces

    assert cli_parser.SURFACE_DIRECTIONS == surfaces.DIRECTIONS


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
        pytest.param(
            ["--seeds", "0", "1", "2", "--directions", "hessian"],
            "--directions: only for a surface around",
            id="hessian-through-three",
        ),
        pytest.param(["--seed", "0", "--directions", "sharp"], "invalid choice", id="directions"),
        pytest.param(["--seeds", "0", "1", "1"], "seeds must differ", id="repeated-seeds"),
        pytest.param(["--seeds", "0", "1"], "expected 3 arguments", id="two-seeds"),
        pytest.param([], "one of the arguments --seed --seeds is required", id="no-seed"),
        pytest.param(["--seed", "0", "--resolution", "1"], "at least 2", id="resolution-1"),
        pytest.param(["--seed", "0", "--extent", "0"], "--extent", id="zero-extent"),
        pytest.param(["--seed", "0", "--extent", "nan"], "finite", id="nan-extent"),
        pytest.param(["--seed", "0", "--figure", "x.pdf"], "suffix", id="bad-figure"),
        pytest.param(
            ["--seeds", "0", "1", "2", "--trajectories", "1"],
            "--trajectories: only for a surface around",
            id="paths-through-three",
        ),
        pytest.param(["--seed", "0", "--every", "10"], "--every: only with", id="every-alone"),
        pytest.param(["--seed", "0", "--trajectories", "1", "1"], "repeat", id="paths-repeat"),
        pytest.param(
            ["--seed", "0", "--directions", "trajectory", "--vectors", "keep"],
            "--vectors: only for random or Hessian",
            id="path-plane-vectors",
        ),
        pytest.param(
            ["--seed", "0", "--trajectories", "1", "--every", "5000"],
            "must be between 1 and the run's 1000 steps",
            id="every-past-the-run",
        ),
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


def test_paths_print_their_projection_errors(capsys, tmp_path):
    out = tmp_path / "paths.png"
    argv = ["surface", "mlp-digits", "--seed", "0", "--trajectories", "0", "--every", "500",
            "--resolution", "3", "--figure", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    # random directions are nearly orthogonal to a training path: the error says so
    assert "training paths seed 0: " in text and "of its displacement outside the plane" in text
    assert out.exists()
    assert main([*argv[:-2], "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["trajectories"]
    assert run["steps"] == [0, 500, 1000] and run["error"] > 0.9 and run["cached"]
