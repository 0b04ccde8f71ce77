"""Hostile input: nonsense options, huge seeds and markdown in files, names and messages.

Every bad option is one line on stderr naming it, exit 2, before any model or data is loaded;
every barrier of the gauge sweep names its split; text from files is shown as text in the app.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError

HUGE = str(10**20)  # past a 64-bit generator seed
HOSTILE = "![img](http://127.0.0.1:9/a.png) <img src=x> **bold** $x$ :red[red]"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


# ---------------------------------------------------------------- CLI options

BAD_OPTIONS = [
    # floats: finite and in range
    pytest.param(["family", "add", "f", "x", "--lr", "nan"], "--lr", id="lr-nan"),
    pytest.param(["family", "add", "f", "x", "--lr", "inf"], "--lr", id="lr-inf"),
    pytest.param(["family", "add", "f", "x", "--lr", "0"], "--lr", id="lr-zero"),
    pytest.param(["family", "add", "f", "x", "--lr", "-0.001"], "--lr", id="lr-negative"),
    pytest.param(
        ["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--tol", "nan"], "--tol", id="tol-nan"
    ),
    pytest.param(
        ["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--tol", "-0.1"],
        "--tol",
        id="tol-negative",
    ),
    # gauge sweep counts
    pytest.param(["gauge-sweep", "mlp-digits", "--steps", "-5"], "--steps", id="steps-negative"),
    pytest.param(
        ["gauge-sweep", "mlp-digits", "--trajectory-every", "0"],
        "--trajectory-every",
        id="trajectory-every-zero",
    ),
    pytest.param(
        ["gauge-sweep", "mlp-digits", "--trajectory-steps", "0"],
        "--trajectory-steps",
        id="trajectory-steps-zero",
    ),
    pytest.param(["gauge-sweep", "mlp-digits", "--draws", "0"], "--draws", id="draws-zero"),
    # seeds: 0 <= seed < 2**32, wherever a seed or member number is parsed
    pytest.param(["barrier", "mlp-digits", "--seeds", "0", "1e20"], "--seeds", id="seeds-float"),
    pytest.param(["barrier", "mlp-digits", "--seeds", "0", HUGE], "--seeds", id="seeds-huge"),
    pytest.param(
        ["triangle", "mlp-digits", "--seeds", "0", "1", HUGE], "--seeds", id="triangle-seeds-huge"
    ),
    pytest.param(
        ["eigenangles", "mlp-digits", "--seeds", "-1", "1"],
        "--seeds",
        id="eigenangles-seed-negative",
    ),
    pytest.param(["train", "mlp-digits", "--seed", str(2**32)], "--seed", id="train-seed-2**32"),
    pytest.param(
        ["symmetries", "mlp-digits", "--seed", "0", "--draw", HUGE], "--draw", id="draw-huge"
    ),
    pytest.param(["gauge-sweep", "mlp-digits", "--seed", HUGE], "--seed", id="sweep-seed-huge"),
    pytest.param(
        ["transport", "mlp-digits", "--gauge-seed", HUGE], "--gauge-seed", id="gauge-seed-huge"
    ),
    pytest.param(
        ["transport", "mlp-digits", "--artifact", "a", "--to-seed", "-2"],
        "--to-seed",
        id="to-seed-negative",
    ),
    # sizes and counts
    pytest.param(
        ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "-3"],
        "--points",
        id="points-negative",
    ),
    pytest.param(
        ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "1"], "--points", id="points-one"
    ),
    pytest.param(
        ["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--resolution", "0"],
        "--resolution",
        id="resolution-zero",
    ),
    pytest.param(["table", "mlp-digits", "--pairs", "0"], "--pairs", id="table-pairs-zero"),
    pytest.param(["table", "mlp-digits", "--points", "0"], "--points", id="table-points-zero"),
    pytest.param(["controls", "mlp-digits", "--pairs", "-1"], "--pairs", id="controls-pairs"),
    pytest.param(["pair-barrier", "a", "b", "--points", "0"], "--points", id="pair-points"),
    pytest.param(["pair-barrier", "a", "b", "--n-ctx", "0"], "--n-ctx", id="pair-n-ctx"),
    pytest.param(
        ["pair-barrier", "a", "b", "--max-windows", "0"], "--max-windows", id="pair-max-windows"
    ),
    pytest.param(["family", "add", "f", "x", "--n-ctx", "0"], "--n-ctx", id="family-n-ctx"),
    pytest.param(
        ["family", "add", "f", "x", "--batch-size", "0"], "--batch-size", id="family-batch-size"
    ),
    pytest.param(
        ["family", "add", "f", "x", "--max-windows", "1"], "--max-windows", id="family-max-windows"
    ),
    pytest.param(
        ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "x"],
        "--points",
        id="points-not-a-number",
    ),
]


@pytest.mark.parametrize("argv,option", BAD_OPTIONS)
def test_a_bad_option_is_one_line_naming_it_before_any_work(capsys, argv, option):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    # one line: no "landscape: barrier ..." status first, so nothing was loaded or computed
    assert len(lines) == 1, err
    assert lines[0].startswith("landscape: error:") and f"argument {option}" in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["family", "add", "f", "x", "--lr", "1e-3", "--n-ctx", "1"], id="lr"),
        pytest.param(
            ["triangle", "nope", "--seeds", "0", "1", str(2**32 - 1), "--tol", "0"],
            id="largest-seed",
        ),
        pytest.param(
            ["gauge-sweep", "nope", "--steps", "0", "--trajectory-every", "1"], id="steps-zero"
        ),
    ],
)
def test_good_edge_values_pass_the_parser(capsys, argv):
    """Values on the edge of the ranges parse; the command then fails on the missing model or
    checkpoint, not on the option."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "argument" not in err and "Traceback" not in err


# ---------------------------------------------------------------- gauge sweep (library)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        pytest.param({"steps_grid": (0, -5), "parts": ("recovery",)}, "--steps", id="steps"),
        pytest.param({"steps_grid": (), "parts": ("recovery",)}, "--steps", id="steps-empty"),
        pytest.param(
            {"trajectory_every": 0, "parts": ("trajectory",)}, "--trajectory-every", id="every-zero"
        ),
        pytest.param(
            {"trajectory_steps": 5, "trajectory_every": 10, "parts": ("trajectory",)},
            "--trajectory-steps",
            id="steps-below-every",
        ),
        pytest.param({"draws": 0, "parts": ("scramble",)}, "--draws", id="draws-zero"),
        pytest.param({"seed": 10**20, "parts": ("table",)}, "seed", id="seed-huge"),
    ],
)
def test_gauge_sweep_refuses_nonsense_before_loading(kwargs, match):
    """The app and the library reach the sweep without the CLI's parser: the same one-line
    errors (formerly a KeyError for a negative step, a ZeroDivisionError for spacing 0)."""
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep

    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(LandscapeError, match=re.escape(match)):
        gauge_sweep("no-such-model", kwargs.pop("seed"), GaugeOptions(**kwargs))


@pytest.mark.parametrize("seed", [-1, 2**32, 10**20])
def test_training_refuses_a_seed_out_of_range(seed):
    """The library path (the app, experiments) checks seeds too: no overflow inside torch."""
    from landscape.models.train import train

    with pytest.raises(LandscapeError, match="seed must be non-negative and below 2"):
        train("mlp-digits", seed)


def test_sweep_parts_refuse_nonsense_when_called_directly():
    from landscape.experiments.gauge.parts import recovery_under_drift, trajectory_transport
    from tests.experiments.test_gauge import synthetic_task

    task = synthetic_task("mlp")
    with pytest.raises(LandscapeError, match="--steps"):
        recovery_under_drift(task, steps_grid=(-5,), draws=1)
    with pytest.raises(LandscapeError, match="--trajectory-every"):
        trajectory_transport(task, steps=10, every=0)


def test_scramble_barriers_name_their_split():
    from landscape.experiments.gauge.parts import GAUGE_VERSION, claim_check, scramble_test
    from tests.experiments.test_gauge import synthetic_task

    task = synthetic_task("mlp")
    assert scramble_test(task, draws=1, lambdas=3)["split"] == "test"
    assert claim_check(task, draws=1)["split"] == "test"
    assert GAUGE_VERSION >= 2  # entries stored without a split are not served again


# ---------------------------------------------------------------- names in messages


def test_mismatched_members_of_one_family_are_told_apart():
    from landscape.experiments import check_pair
    from landscape.models import init_params
    from landscape.models.zoo import Checkpoint
    from tests.conftest import tiny_config

    cfg = tiny_config("mlp")
    other = cfg.replace(d_mlp=16)

    def member(c, i, label):
        meta = {"name": "fdel", "family": "fdel", "seed": i, "label": label}
        return Checkpoint(c, init_params(c, i), meta)

    with pytest.raises(LandscapeError) as err:
        check_pair(member(cfg, 0, "base"), member(other, 1, "tune"))
    msg = str(err.value)
    assert "fdel member 0 (base)" in msg and "fdel member 1 (tune)" in msg and "d_mlp" in msg
    zoo_a = Checkpoint(cfg, init_params(cfg, 0), {"name": "mlp-digits", "seed": 0})
    zoo_b = Checkpoint(other, init_params(other, 3), {"name": "mlp-digits", "seed": 3})
    with pytest.raises(LandscapeError, match="mlp-digits seed 0 and mlp-digits seed 3"):
        check_pair(zoo_a, zoo_b)


# ---------------------------------------------------------------- untrusted text in the app


def _render(body: str) -> str:
    """A markdown body as HTML, the way a CommonMark renderer with tables reads it."""
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(body)


def _shown_as_text(body: str, text: str) -> None:
    out = _render(body)
    # the card's own bold label may open the body; nothing after it may be bold
    after_label = out.split("</strong>", 1)[-1] if out.startswith("<p><strong>") else out
    assert "<img" not in out and "<a " not in out and "<strong>" not in after_label
    for directive in ("$x$", ":red["):  # math and colour directives escaped
        assert directive not in body or directive not in text
    words = html.unescape(re.sub(r"<[^>]+>", "", out))
    assert " ".join(text.split()) in " ".join(words.split())


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(HOSTILE, id="image-html-math"),
        pytest.param("# heading\n- item\n1. item\n---\n> quote\n| a | b |\n|---|---|", id="blocks"),
        pytest.param(
            "[link](http://127.0.0.1:9/) www.example.com a@b.c `code` &amp; \\*",
            id="links-entities",
        ),
        pytest.param("my-family_v1.2", id="ordinary-name"),
    ],
)
def test_plain_shows_any_text_literally(text):
    from app.components import literal, plain

    _shown_as_text(plain(text), text)
    out = _render("x " + literal("/tmp/``odd``/" + HOSTILE))
    assert "<img" not in out and "<code>" in out
    assert html.unescape(re.sub(r"<[^>]+>", "", out)).strip() == "x /tmp/``odd``/" + HOSTILE


def _import_page(paths: str, name: str = "bad"):
    from streamlit.testing.v1 import AppTest

    main_py = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    at = AppTest.from_file(main_py, default_timeout=120)
    at.switch_page("views/models.py")
    at.run()
    at.text_input(key="import_name").set_value(name)
    at.text_area(key="import_paths").set_value(paths)
    next(b for b in at.get("form_submit_button") if b.label == "Import").click().run()
    assert not at.exception
    return at


def test_app_shows_a_hostile_checkpoint_error_as_text(tmp_path):
    """A checkpoint whose model_type holds markdown and HTML: the import error on the page
    shows it as text (no image fetched from a local server), as does a hostile path."""
    from safetensors.torch import save_file

    ckpt = tmp_path / "hostile"
    ckpt.mkdir()
    # short: a message may quote only the start of a long value
    model_type = "<img src=x>![i](//127.0.0.1:9)"
    (ckpt / "config.json").write_text(json.dumps({"model_type": model_type}))
    save_file({"x": torch.zeros(2)}, str(ckpt / "model.safetensors"))
    missing = str(tmp_path / "![i](127.0.0.1:9.png)<img src=y>")
    for paths, name, hostile in [
        (str(ckpt), "bad", model_type),  # the file's model_type in the message
        (missing, "bad", missing),  # the path in the message
        (str(ckpt), HOSTILE, HOSTILE),  # the family name in the message
    ]:
        at = _import_page(paths, name)
        bodies = [e.value for e in at.error]
        assert len(bodies) == 1
        _shown_as_text(bodies[0], hostile)
