"""``landscape curvature``: --json, the summary, --figure, the cache and one-line refusals."""

import json

import pytest

from landscape import budget
from landscape.cli import main
from landscape.cli.parser import arguments as cli_args
from landscape.experiments import curvature as lib
from landscape.experiments.hessian import OUTSIDE_BLOCKS
from landscape.models.zoo import ZOO

ARGV = ["curvature", "mlp-digits", "--seeds", "0", "1", "--group", "perm", "--top-k", "2",
        "--probes", "4", "--batch", "64"]  # fmt: skip


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_curvature_json_naive_and_aligned(capsys, tmp_path):
    out = tmp_path / "curvature.html"
    assert main([*ARGV, "--per-block", "--json", "--figure", str(out)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["cached"] is False and r["function_ok"]
    assert r["batch"] == {"rows": 64, "unit": "examples", "predictions": 64}
    naive, aligned = r["lines"]
    assert (naive["method"], aligned["method"]) == ("naive", "weight")
    for line in (naive, aligned):
        assert line["lambdas"] == [0.0, 0.5, 1.0]
        assert all(len(v) == 2 for v in line["top_eigenvalues"])
        assert line["top_eigenvalue"] == [v[0] for v in line["top_eigenvalues"]]
        assert all(v[0] >= v[1] for v in line["top_eigenvalues"])
        assert all(s > 0 for s in line["trace_se"]) and all(line["converged"])
        assert list(line["blocks"]) == ["blocks.0", "blocks.1", OUTSIDE_BLOCKS]
        # a block's top eigenvalue is at most the whole Hessian's (Cauchy interlacing)
        for values in line["blocks"].values():
            assert all(b <= t * (1 + 1e-4) for b, t in zip(values, line["top_eigenvalue"],
                                                           strict=True))  # fmt: skip
    # λ = 1 is the processed A on both lines; λ = 0 is B and its permutation, whose Hessian
    # is B's permuted: the same eigenvalues
    assert aligned["top_eigenvalues"][2] == naive["top_eigenvalues"][2]
    assert aligned["top_eigenvalues"][0] == pytest.approx(naive["top_eigenvalues"][0], rel=1e-4)
    assert aligned["loss"][0] == pytest.approx(naive["loss"][0], rel=1e-4)
    assert out.exists() and (tmp_path / "curvature-blocks.html").exists()
    assert r["figures"] == [str(out), str(tmp_path / "curvature-blocks.html")]
    # a second request reads both lines from the cache
    assert main([*ARGV, "--per-block", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cached"] is True and again["lines"] == r["lines"]


def test_curvature_summary(capsys):
    assert main([*ARGV, "--method", "naive", "--points", "2"]) == 0
    text = capsys.readouterr().out
    assert "top eigenvalue" in text and "none (naive)" in text
    assert "64 examples of the train split (64 predictions, drawn by seed 0)" in text
    assert "trace by Hutchinson over 4 Rademacher probes" in text
    assert "weight/perm" not in text  # naive alone: one line


def test_memory_beyond_the_budget_is_refused_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")
    assert main(ARGV) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "Hessian of 10890 parameters" in err and "LANDSCAPE_MEMORY_GB" in err


def test_a_small_budget_runs_the_batch_in_chunks(capsys, monkeypatch, tmp_path):
    """A budget that holds ten rows' graphs cuts the batch of 64 into seven chunks; the
    curvature is that of the same batch."""
    assert main([*ARGV, "--method", "naive", "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)["lines"][0]
    cfg = ZOO["mlp-digits"].config
    fixed = 10890 * (8 * (lib.LANCZOS_VECTORS + budget.HESSIAN_LANCZOS_EXTRA)
                     + 4 * budget.HESSIAN_PARAM_COPIES)  # fmt: skip
    row = lib.row_bytes(cfg, 1, 4)
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", repr((fixed + 10.5 * row) / 2**30))
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "other"))
    assert main([*ARGV, "--method", "naive", "--json"]) == 0
    chunked = json.loads(capsys.readouterr().out)["lines"][0]
    assert (whole["chunks"], chunked["chunks"], chunked["chunk_rows"]) == (1, 7, 10)
    for got, want in zip(chunked["top_eigenvalues"], whole["top_eigenvalues"], strict=True):
        assert got == pytest.approx(want, rel=1e-4)
    assert chunked["loss"] == pytest.approx(whole["loss"], rel=1e-6)


@pytest.mark.parametrize(
    "argv,match",
    [
        pytest.param(["--top-k", "0"], "--top-k", id="top-k"),
        pytest.param(["--points", "1"], "--points", id="points"),
        pytest.param(["--batch", "0"], "--batch", id="batch"),
        pytest.param(["--probes", "-1"], "--probes", id="probes"),
        pytest.param(["--dtype", "float16"], "--dtype", id="dtype"),
        pytest.param(["--learned-steps", "5"], "--learned-steps: for --method learned", id="lm"),
    ],
)
def test_bad_options_are_refused_in_one_line(argv, match, capsys):
    assert main([*ARGV, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1


def test_the_parser_says_the_library_defaults():
    o = lib.CurvatureOptions()
    assert (cli_args.CURVATURE_TOP_K, cli_args.CURVATURE_POINTS,
            cli_args.CURVATURE_PROBES) == (o.top_k, o.points, o.probes)  # fmt: skip
    assert cli_args.CURVATURE_BATCH == lib.DEFAULT_BATCH
    assert cli_args.CURVATURE_DTYPES == tuple(lib.DTYPES)


def test_long_work_is_refused_without_yes(capsys):
    assert main([*ARGV, "--points", "2000"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Hessian-vector products" in err and "--yes" in err


def test_the_result_holds_to_its_declared_fields_and_a_renamed_one_is_named():
    """What the library writes is what its declaration says (landscape.fields), and the summary,
    the figure and the page's table read through it: a renamed field fails each, naming it."""
    from landscape.cli.summaries import show
    from landscape.fields import MissingField
    from landscape.plots.curvature import figure_curvature

    r = lib.curvature("mlp-digits", (0, 1), "weight", "perm", top_k=2, probes=4, batch=64,
                      per_block=True)  # fmt: skip
    problems = lib.CURVATURE.problems(r) + lib.CURVATURE_BATCH.problems(r["batch"])
    for line in r["lines"]:
        problems += lib.CURVATURE_LINE.problems(line)
    assert problems == []
    line = dict(r["lines"][0])
    line["top_eigenvalue_max"] = line.pop("top_eigenvalue")
    broken = {**r, "lines": [line, *r["lines"][1:]]}
    for read in (lambda: show("curvature", broken), lambda: figure_curvature(broken)):
        with pytest.raises(MissingField, match="curvature line has no field 'top_eigenvalue'"):
            read()
    assert lib.CURVATURE_LINE.problems(line) == [
        "curvature line: no field 'top_eigenvalue'",
        "curvature line: undeclared field 'top_eigenvalue_max'",
    ]
