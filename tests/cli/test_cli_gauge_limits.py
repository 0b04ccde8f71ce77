"""The gauge sweep from the command line: the recovery part fine-tunes at the model's own learning
rate (a family's record) unless --lr is given; sizes that no machine finishes are refused in one
line naming the option and the limit, before any model is loaded."""

from __future__ import annotations

import json
import os
import time

import pytest

from landscape.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    return tmp_path


def _recovery(capsys, *argv: str) -> dict:
    assert main(["gauge-sweep", *argv, "--parts", "recovery", "--steps", "0", "2", "--draws", "1",
                 "--json"]) == 0  # fmt: skip
    return json.loads(capsys.readouterr().out)["recovery"]


def test_recovery_fine_tunes_at_the_family_lr_unless_given(tmp_path, capsys):
    pytest.importorskip("transformers")
    from tests.conftest import llama_checkpoints

    ckpts = llama_checkpoints(tmp_path / "made", 7)
    drift = {}
    for name, lr in (("slow", 1e-6), ("fast", 1.0)):
        assert main(["family", "add", name, str(ckpts["a"]), str(ckpts["b"]), "--text",
                     str(ckpts["text"]), "--n-ctx", "16", "--max-windows", "8", "--lr", str(lr),
                     "--json"]) == 0  # fmt: skip
        capsys.readouterr()
        rec = _recovery(capsys, name)
        assert (rec["lr"], rec["lr_from"]) == (lr, "family record")
        drift[name] = rec["curve"][-1]["drift"]
    assert drift["fast"] > 100 * drift["slow"] > 0
    rec = _recovery(capsys, "slow", "--lr", "1")
    assert (rec["lr"], rec["lr_from"]) == (1.0, "given")
    assert rec["curve"][-1]["drift"] == pytest.approx(drift["fast"], rel=1e-6)


# ---------------------------------------------------------------- sizes refused before any work


def _one_line_refusal(capsys, argv: list[str], *fragments: str) -> str:
    t0 = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 60  # refused, not run
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("landscape: error:"), err
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return err


@pytest.mark.parametrize(
    "argv,fragments",
    [
        pytest.param(["--steps", "0", "1000000000"], ["--steps", "100000"], id="steps"),
        pytest.param(["--trajectory-steps", "1000000000"], ["--trajectory-steps", "100000"],
                     id="trajectory-steps"),  # fmt: skip
        pytest.param(["--threads", "2000"], ["--threads", "at most"], id="threads"),
        pytest.param(["--threads", "1" * 20], ["--threads", "at most"], id="threads-20-digits"),
    ],
)
def test_sweep_sizes_past_the_limits_are_one_line_naming_the_option(capsys, argv, fragments):
    err = _one_line_refusal(capsys, ["gauge-sweep", "mlp-digits", *argv], *fragments)
    assert len(err.strip().splitlines()) == 1, err  # while parsing: nothing loaded


def test_a_trajectory_that_outgrows_the_memory_budget_is_refused_before_training(capsys):
    argv = ["gauge-sweep", "mlp-digits", "--parts", "trajectory", "--trajectory-steps", "100000",
            "--trajectory-every", "1"]  # fmt: skip
    _one_line_refusal(capsys, argv, "--trajectory-steps 100000", "--trajectory-every 1",
                      "checkpoints", "LANDSCAPE_MEMORY_GB")  # fmt: skip
    # the recovery part's grid is kept as checkpoints too
    grid = [str(k) for k in range(0, 100000, 2)]
    _one_line_refusal(capsys, ["gauge-sweep", "mlp-digits", "--parts", "recovery", "--steps",
                               *grid], "--steps", "checkpoints", "LANDSCAPE_MEMORY_GB")  # fmt: skip


def test_the_library_refuses_the_same_sizes(monkeypatch):
    from landscape.errors import LandscapeError
    from landscape.experiments.gauge.parts import trajectory_transport
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep
    from landscape.threads import parse_threads
    from tests.experiments.test_gauge import synthetic_task

    with pytest.raises(LandscapeError, match="--steps 1000000000 exceeds the limit of 100000"):
        gauge_sweep("no-such-model", 0, GaugeOptions(steps_grid=(0, 10**9), parts=("recovery",)))
    with pytest.raises(LandscapeError, match="--trajectory-steps"):
        gauge_sweep("no-such-model", 0,
                    GaugeOptions(trajectory_steps=10**9, parts=("trajectory",)))
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")  # 1 MB: 125 checkpoints of this model
    with pytest.raises(LandscapeError, match=r"keeps 1001 checkpoints.*LANDSCAPE_MEMORY_GB"):
        trajectory_transport(synthetic_task("mlp"), steps=1000, every=1)
    with pytest.raises(LandscapeError, match="at most"):
        parse_threads(10**20)


def test_the_page_spaces_a_trajectory_so_its_checkpoints_fit_the_budget(monkeypatch):
    from landscape.budget import check_checkpoints, max_checkpoints
    from landscape.experiments.gauge.parts import trajectory_spacing

    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "2")
    n = 2_126_602  # vit-fashion-d256: 1500 steps every 10 would keep 151 checkpoints
    limit = max_checkpoints(n)
    assert 1500 // 10 + 1 > limit
    every = trajectory_spacing(1500, 10, n)
    check_checkpoints("the trajectory", 1500 // every + 1, n)  # fits
    assert 1500 // (every - 1) + 1 > limit  # and no closer spacing does
    assert trajectory_spacing(1500, 10, 18_058) == 10  # a small model keeps its spacing
