"""--figure: the figure the app draws for a command's result, written from the command line."""

import json

import pytest

from landscape.cli import main
from landscape.cli import parser as cli_parser
from landscape.cli.parser import arguments as cli_args
from landscape.errors import LandscapeError
from landscape.plots import files


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_the_parser_lists_what_the_builders_draw():
    assert set(cli_args.FIGURE_COMMANDS) == set(files.BUILDERS)
    assert cli_args.FIGURE_SUFFIXES == files.SUFFIXES


def test_barrier_figure_is_the_interpolation_figure(tmp_path, capsys, cache_env):
    out = tmp_path / "curve.html"
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--group", "orth", "--points", "5"]
    assert main([*argv, "--json", "--figure", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["figures"] == [str(out)]
    html = out.read_text()
    assert "Plotly.newPlot" in html and "orth" in html
    assert not list(tmp_path.glob(".*tmp"))  # written whole, no temporary left
    # the figure draws the command's own curve
    fig = files.BUILDERS["barrier"](result)[""]
    lines = [t for t in fig.data if t.name == "weight/orth" and len(t.y) == len(result["loss"])]
    assert list(lines[0].y) == result["loss"]
    assert list(lines[1].y) == pytest.approx([100 * a for a in result["accuracy"]])  # percent


def test_a_command_with_several_figures_writes_one_per_part(tmp_path, capsys, cache_env):
    out = tmp_path / "sweep.html"
    argv = ["gauge-sweep", "mlp-digits", "--parts", "table", "--draws", "1", "--json"]
    assert main([*argv, "--figure", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["figures"] == [str(tmp_path / "sweep-table.html")]
    assert (tmp_path / "sweep-table.html").stat().st_size > 10_000


@pytest.mark.parametrize("bad", ["curve.pdf", "missing-folder/curve.html"])
def test_bad_figure_paths_are_refused_before_anything_runs(tmp_path, capsys, bad):
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--figure", str(tmp_path / bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--figure" in err and len(err.splitlines()) == 1


def test_commands_the_app_does_not_draw_have_no_figure_option(capsys):
    assert main(["table", "mlp-digits", "--figure", "x.html"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.slow
def test_png_figure(tmp_path, capsys, cache_env):
    pytest.importorskip("kaleido")
    out = tmp_path / "symmetries.png"
    rc = main(["symmetries", "mlp-digits", "--seed", "0", "--figure", str(out), "--json"])
    err = capsys.readouterr().err
    if rc == 2 and "Chromium browser" in err:
        pytest.skip("no browser to draw PNG here")
    assert rc == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_matrix_command_prints_the_matrix_and_draws_it(tmp_path, capsys, cache_env):
    out = tmp_path / "matrix.html"
    argv = ["matrix", "mlp-digits", "--seeds", "0", "1", "2", "--method", "naive", "--points", "5"]
    assert main([*argv, "--json", "--figure", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["seeds"] == [0, 1, 2] and len(result["pairs"]) == 3
    assert [result["barrier_loss"][i][i] for i in range(3)] == [0, 0, 0]
    assert result["figures"] == [str(out)] and "Plotly.newPlot" in out.read_text()
    assert main(argv) == 0  # the summary: two grids, the diagonal as —
    text = capsys.readouterr().out
    assert "loss barrier (nats)" in text and text.count("—") >= 6


@pytest.mark.parametrize(
    "argv",
    [["--seeds", "0"], ["--seeds", "0", "0"], ["--seeds", "0", "1", "--method", "wieght"],
     ["--seeds", "0", "1", "--size", "poster"]],
    ids=["one seed", "same seed", "bad method", "bad size"],
)  # fmt: skip
def test_matrix_bad_input_is_one_line(argv, capsys, cache_env):
    assert main(["matrix", "mlp-digits", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("landscape: error:")


def test_every_figure_command_takes_a_size():
    from landscape.plots import export

    assert cli_args.FIGURE_SIZES == tuple(export.SIZES)
    commands = cli_parser.build_parser()._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        sizes = [a for a in sub._actions if "--size" in a.option_strings]
        assert bool(sizes) == (name in cli_args.FIGURE_COMMANDS), name
        if sizes:
            assert tuple(sizes[0].choices) == cli_args.FIGURE_SIZES
            assert sizes[0].default == "double"


def test_a_figure_write_leaves_a_file_named_like_its_temporary_alone(tmp_path, monkeypatch):
    # the writer's temporary file is its own (mkstemp), never a fixed name a user's file may have
    target = tmp_path / "curve.html"
    mine = tmp_path / ".curve.html.tmp"
    mine.write_text("the user's")
    files._write(target, b"<html></html>")
    assert target.read_bytes() == b"<html></html>"
    assert mine.read_text() == "the user's"

    def full(tmp):
        raise OSError(28, "No space left on device")

    real = files.replace_file
    monkeypatch.setattr(files, "replace_file", lambda t, write: real(t, full))
    with pytest.raises(LandscapeError, match="no space left on device"):
        files._write(tmp_path / "other.html", b"x")
    assert mine.read_text() == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".curve.html.tmp", "curve.html"]


FIGURE_ARGV = ["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "naive", "--points", "3"]


def test_an_existing_figure_is_refused_before_the_work_unless_forced(tmp_path, capsys, cache_env,
                                                                     monkeypatch):  # fmt: skip
    out = tmp_path / "curve.html"
    out.write_text("mine")
    # refused before the barrier is measured: the work would fail the test
    from landscape.experiments.barriers import pipeline

    real = pipeline.measure_barrier
    monkeypatch.setattr(pipeline, "measure_barrier",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("measured")))
    assert main([*FIGURE_ARGV, "--figure", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "exists; give --force to replace it" in err and out.read_text() == "mine"
    monkeypatch.setattr(pipeline, "measure_barrier", real)
    assert main([*FIGURE_ARGV, "--figure", str(out), "--force", "--json"]) == 0
    assert "Plotly.newPlot" in out.read_text()


def test_a_figure_is_never_written_through_a_link(tmp_path, capsys, cache_env):
    target = tmp_path / "theirs.html"
    target.write_text("theirs")
    link = tmp_path / "curve.html"
    link.symlink_to(target)
    assert main([*FIGURE_ARGV, "--figure", str(link)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "is a link to" in err and "--force" in err
    assert link.is_symlink() and target.read_text() == "theirs"
    # forced, the link is replaced by the figure and its target is left as it is
    assert main([*FIGURE_ARGV, "--figure", str(link), "--force", "--json"]) == 0
    assert not link.is_symlink() and "Plotly.newPlot" in link.read_text()
    assert target.read_text() == "theirs"


def test_every_part_of_a_figure_is_checked_before_any_is_written(tmp_path):
    result = {"rows": []}
    taken = tmp_path / "x-3d.html"
    taken.write_text("mine")
    drawn = {"": object(), "3d": object()}
    files.BUILDERS["__test"] = lambda r: drawn
    try:
        with pytest.raises(LandscapeError, match="x-3d.html exists"):
            files.write_figures("__test", result, str(tmp_path / "x.html"))
    finally:
        del files.BUILDERS["__test"]
    assert not (tmp_path / "x.html").exists() and taken.read_text() == "mine"


def test_png_without_a_browser_is_one_line_not_a_wait(tmp_path, capsys, cache_env, monkeypatch):
    """Without a Chromium browser, kaleido's server waited forever: the export says so at once."""
    pytest.importorskip("kaleido")
    pytest.importorskip("choreographer")
    from choreographer.browsers.chromium import Chromium

    from landscape.plots import export

    monkeypatch.setattr(export, "_server", {"running": False})
    monkeypatch.setattr(Chromium, "find_browser", classmethod(lambda cls, **kw: None))
    out = tmp_path / "symmetries.png"
    assert main(["symmetries", "mlp-digits", "--seed", "0", "--figure", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Chromium browser" in err and "BROWSER_PATH" in err and not out.exists()
