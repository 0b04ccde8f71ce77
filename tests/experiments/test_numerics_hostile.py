"""Hostile numbers: NaN and broken functions are never served quietly, work is bounded.

The hostile models are shipped mlp-digits checkpoints with their weights rescaled: a gain so
large that the float32 forward overflows to NaN while folding it into the readers gives a
healthy model (processing hides a NaN), all weights huge (NaN loss), or gains scaled so that
float32 logits lose the tolerance of the function check.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from landscape import experiments
from landscape.budget import BYTES_PER_POINT, budget_bytes, max_resolution
from landscape.cli import main
from landscape.data.text import token_corpus
from landscape.errors import LandscapeError
from landscape.experiments import (
    BarrierRequest,
    RunContext,
    TableOptions,
    TriangleOptions,
    align,
    measure_barrier,
    summarise_barriers,
    table,
    triangle,
)
from landscape.experiments import evaluation as barrier
from landscape.matching import function_warnings, match, worst_check
from landscape.models import init_params
from landscape.models.zoo import Checkpoint, save_checkpoint_dir
from landscape.sources import Source
from landscape.sources.zoo import get_checkpoint
from landscape.store.cache import Cache
from tests.conftest import paths_barrier, tiny_config


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LANDSCAPE_MEMORY_GB", raising=False)


def overflowing_gain(ckpt: Checkpoint) -> Checkpoint:
    """The same function on paper, NaN in float32: the first MLP's norm gain near the float32
    maximum (x·γ overflows to inf) and its reader W_in divided by as much. Folding the gain
    into W_in (orthogonal processing) computes γ·W_in in float64: a healthy model again."""
    p = dict(ckpt.params)
    gain = p["blocks.0.ln2.w"]
    s = 3e38 / float(gain.abs().max())
    p["blocks.0.ln2.w"] = gain * s
    p["blocks.0.mlp.W_in"] = p["blocks.0.mlp.W_in"] / s
    return Checkpoint(ckpt.cfg, p, ckpt.meta)


def scaled(ckpt: Checkpoint, factor: float, only: str = "") -> Checkpoint:
    """Every parameter whose name contains ``only`` multiplied by ``factor``."""
    p = {k: v * factor if only in k else v for k, v in ckpt.params.items()}
    return Checkpoint(ckpt.cfg, p, ckpt.meta)


def with_members(monkeypatch, members: dict[int, Checkpoint]) -> None:
    """Every ``Source`` serves these checkpoints for their seeds (mlp-digits otherwise)."""
    real = Source.load

    def load(self, *args, **kwargs):
        return members[self.seed] if self.seed in members else real(self, *args, **kwargs)

    monkeypatch.setattr(Source, "load", load)


def zoo(seed: int) -> Checkpoint:
    return get_checkpoint("mlp-digits", seed)


# ---------------------------------------------------------------- 1. aggregates keep NaN


def test_worst_check_keeps_nan_in_any_position() -> None:
    assert math.isnan(worst_check([2.4e-7, math.nan]))  # max(2.4e-7, nan) is 2.4e-7
    assert math.isnan(worst_check([math.nan, 2.4e-7]))
    assert worst_check([1e-7, None, 3e-6]) == 3e-6
    rows = [{"barrier_loss": 0.1, "barrier_accuracy": 0.0, "function_check": c} for c in
            (1e-7, math.nan)]  # fmt: skip
    assert math.isnan(summarise_barriers(rows)["function_check"])


def test_triangle_with_a_nan_member_reports_nan_and_warns(monkeypatch) -> None:
    with_members(monkeypatch, {2: overflowing_gain(zoo(2))})
    r = triangle("mlp-digits", (0, 1, 2), "naive", "orth", TriangleOptions(resolution=2))
    assert math.isnan(r["function_check"])  # was the healthy B's 2.4e-7
    assert r["function_ok"] is False
    assert any("mlp-digits seed 2" in w and "NaN" in w for w in r["warnings"])


def test_table_rows_carry_nan_checks_and_warnings(monkeypatch) -> None:
    with_members(monkeypatch, {1: overflowing_gain(zoo(1))})
    t = table("mlp-digits", 1, TableOptions(rows=(("naive", "orth"),), points=3, seeds=(0, 1)))
    (row,) = t["rows"]
    assert math.isnan(row["function_check"]) and not row["function_ok"]
    assert t["function_ok"] is False and t["warnings"] == row["warnings"] != []


# ---------------------------------------------------------------- 2. a NaN loss is an error


def test_barrier_with_nan_loss_is_one_line_naming_model_lambda_split(monkeypatch, capsys) -> None:
    with_members(monkeypatch, {1: scaled(zoo(1), 1e15)})
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "naive", "--points", "5",
            "--json"]  # fmt: skip
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = [x for x in captured.err.splitlines() if x.startswith("landscape: error")]
    assert "nan" in line and "λ = 0" in line and "mlp-digits seed 1" in line
    assert "test split" in line
    # nothing was stored: the same request fails again the same way
    with pytest.raises(LandscapeError, match="λ = 0"):
        experiments.barrier("mlp-digits", (0, 1), "naive", points=5)


# ---------------------------------------------------------------- 3. the tolerance is used


def test_function_warnings_name_what_failed() -> None:
    assert function_warnings({"B": 5e-5, "A": None}) == []
    over, nan = function_warnings({"B aligned": 4e-3, "A processed": math.nan})
    assert "B aligned" in over and "0.004" in over and "tolerance" in over
    assert "A processed" in nan and "NaN" in nan


def test_barrier_over_tolerance_warns_on_stderr_and_in_json(monkeypatch, capsys) -> None:
    with_members(monkeypatch, {1: scaled(zoo(1), 1e3, only="ln")})
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "3", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["function_check"] > 1e-4 and out["function_ok"] is False
    assert out["warnings"] and "mlp-digits seed 1" in out["warnings"][0]
    assert "landscape: warning: function check of mlp-digits seed 1" in captured.err


def test_healthy_barrier_is_ok_and_quiet(capsys) -> None:
    assert main(["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "3", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["function_ok"] is True and out["warnings"] == []
    assert out["function_check"] < 1e-4 and out["function_check_a"] < 1e-4
    assert "warning" not in captured.err


def test_pair_barrier_over_tolerance_warns(tmp_path, capsys) -> None:
    a = save_checkpoint_dir(zoo(0), tmp_path / "a")
    b = save_checkpoint_dir(scaled(zoo(1), 1e3, only="ln"), tmp_path / "b")
    r = paths_barrier(a, b, "weight", "perm", data="digits", points=3, device="cpu",
                      cache=Cache(tmp_path / "c"))  # fmt: skip
    assert r["function_check"] > 1e-4 and r["function_ok"] is False
    assert "tolerance" in r["warnings"][0] and str(b) in r["warnings"][0]
    argv = ["pair-barrier", str(a), str(b), "--data", "digits", "--points", "3", "--json"]
    assert main(argv) == 0
    assert f"landscape: warning: function check of {b} aligned to {a}" in capsys.readouterr().err


# ---------------------------------------------------------------- 4. A's processing is checked


def test_processing_that_hides_a_nan_is_flagged() -> None:
    a, b = overflowing_gain(zoo(0)), zoo(1)
    r = match(a.cfg, a.params, b.params, "naive", "orth")
    assert math.isnan(r.function_check_a) and r.function_check < 1e-4
    out = measure_barrier(BarrierRequest(a, b, "naive", "orth", points=3)).to_dict()
    # the processed A is healthy (a finite endpoint loss), A itself is NaN: say so
    assert math.isfinite(out["endpoint_loss"][0])
    assert math.isnan(out["function_check_a"]) and out["function_ok"] is False
    assert any("mlp-digits seed 0 processed for orth" in w for w in out["warnings"])


def test_healthy_processing_passes_its_check() -> None:
    a, b = zoo(0), zoo(1)
    al = align(a, b, "weight", "orth")
    assert 0 <= al.info["function_check_a"] < 1e-4


# ---------------------------------------------------------------- 5. bounded work


def test_points_over_the_budget_are_refused_before_loading(monkeypatch, capsys) -> None:
    def never(*args, **kwargs):
        raise AssertionError("a checkpoint was loaded")

    monkeypatch.setattr(Source, "load", never)
    assert main(["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "1000000000"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    limit = budget_bytes() // BYTES_PER_POINT
    assert f"--points 1000000000 exceeds the limit of {limit}" in line
    assert "memory budget 2 GB" in line
    assert main(["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--resolution",
                 "100000"]) == 2  # fmt: skip
    assert f"limit of {max_resolution()}" in capsys.readouterr().err


def test_the_budget_is_configurable_and_checked(monkeypatch) -> None:
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")  # about 1000 points
    with pytest.raises(LandscapeError, match="limit of 1048"):
        experiments.barrier("mlp-digits", (0, 1), points=2000)
    assert experiments.barrier("mlp-digits", (0, 1), "naive", points=3)["function_ok"]
    grid = max_resolution()
    assert (grid + 1) * (grid + 2) // 2 * 2048 <= budget_bytes()
    assert (grid + 2) * (grid + 3) // 2 * 2048 > budget_bytes()
    for bad in ("lots", "-1", "nan", "inf"):
        monkeypatch.setenv("LANDSCAPE_MEMORY_GB", bad)
        with pytest.raises(LandscapeError, match="LANDSCAPE_MEMORY_GB"):
            budget_bytes()


def test_curves_are_evaluated_in_bounded_chunks_of_lambda(monkeypatch) -> None:
    """The mixtures held at once do not grow with the points, and chunking changes nothing."""
    cfg = tiny_config("mlp")
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    x, y = torch.randn(16, cfg.d_in), torch.randint(0, cfg.n_out, (16,))
    whole = barrier.evaluate_path(cfg, a, b, x, y, 40)
    n_params = sum(v.numel() for v in a.values())
    monkeypatch.setattr(barrier, "MIX_BUDGET_ELEMENTS", 3 * n_params)  # 3 mixtures at a time
    rows = []
    real_mix = barrier.mix
    monkeypatch.setattr(barrier, "mix", lambda e, w: rows.append(len(w)) or real_mix(e, w))
    chunked = barrier.evaluate_path(cfg, a, b, x, y, 40)
    assert max(rows) == 3 and sum(rows) == 40
    for u, v in zip(whole, chunked, strict=True):
        assert torch.allclose(u, v, atol=1e-6, rtol=0)


def test_windows_over_the_budget_are_refused(tmp_path) -> None:
    cfg = tiny_config("gpt")
    paths = [save_checkpoint_dir(Checkpoint(cfg, init_params(cfg, s), {}), tmp_path / f"g{s}")
             for s in (0, 1)]  # fmt: skip
    text = tmp_path / "t.txt"
    text.write_text("abcdefg" * 200)
    kw = {"text": text, "n_ctx": 4, "points": 3, "cache": Cache(tmp_path / "c"), "device": "cpu"}
    assert paths_barrier(*paths, "naive", "perm", max_windows=8, **kw)["windows"] == 8
    with pytest.raises(LandscapeError, match="--max-windows 1000000000 exceeds the limit"):
        paths_barrier(*paths, "naive", "perm", max_windows=10**9, **kw)


def test_text_is_encoded_compactly_and_bounded(tmp_path, monkeypatch) -> None:
    body = "To be, or not to be, that is the question. " * 50
    f = tmp_path / "t.txt"
    f.write_text(body)
    as_bytes = token_corpus(f, None, d_vocab=50257)
    assert as_bytes.train.dtype == torch.uint8  # was int64: 8 bytes a token
    ids = list(body.encode("utf-8"))
    assert as_bytes.train.tolist() + as_bytes.test.tolist() == ids
    w = as_bytes.windows("test", 8)
    assert w.inputs.dtype == torch.int64 and w.inputs[0].tolist() == as_bytes.test[:8].tolist()
    chars = token_corpus(f, None, d_vocab=40)
    assert chars.train.dtype == torch.uint8
    index = {c: i for i, c in enumerate(sorted(set(body)))}
    assert chars.train.tolist() == [index[c] for c in body][: len(chars.train)]
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", str(1000 / 2**30))  # 125 bytes of text
    words = r"t\.txt is 2\.1 kB; encoding it as bytes or characters is limited to 125 bytes"
    with pytest.raises(LandscapeError, match=words) as err:
        token_corpus(f, None, d_vocab=50257)
    assert "memory budget" in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- 6. progress


def test_barrier_and_triangle_show_progress_on_stderr(capsys) -> None:
    assert main(["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "5", "--json"]) == 0
    err = capsys.readouterr().err
    assert "barrier weight/perm" in err and "evaluate" in err and "%" in err
    argv = ["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--resolution", "2",
            "--method", "naive", "--json"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "triangle naive/orth" in err and "match C" in err and "evaluate" in err


def test_learned_matching_reports_every_step() -> None:
    seen = []
    align(zoo(0), zoo(1), "learned", "perm", options={"steps": 3, "eval_every": 3},
          context=RunContext(
              progress=lambda stage, done, total: seen.append((stage, done / total))))
    # the weight-matching start (not cached yet) in the first tenth, then each step
    start = [(s, f) for s, f in seen if s.startswith("start: weight matching round ")]
    rest = [(s, f) for s, f in seen if not s.startswith("start: ")]
    assert start and len(start) + len(rest) == len(seen) and seen[: len(start)] == start
    assert all(0 <= f <= 0.1 for _, f in start)
    # the train split's loading, the pair's preparation, the scoring of the start (each
    # mixture of the slice told), each step, and the scoring at the end (eval_every = 3)
    k = sum(s.startswith("learned matching: scoring the start (mixture") for s, _ in rest)
    start_mixes = [f"learned matching: scoring the start (mixture {i}/{k})"
                   for i in range(1, k + 1)]
    end_mixes = [f"learned matching step 3/3: scoring (mixture {i}/{k})" for i in range(1, k + 1)]
    assert k >= 2 and [s for s, _ in rest] == [
        "load the train split", "learned matching: preparing the pair",
        "learned matching: scoring the start", *start_mixes,
        "learned matching step 1/3", "learned matching step 2/3",
        "learned matching step 3/3: scoring", *end_mixes, "learned matching step 3/3"]
    assert [f for _, f in rest] == pytest.approx(
        [0.1] * (3 + k) + [0.1 + 0.9 / 3, 0.1 + 0.9 * 2 / 3]
        + [0.1 + 0.9 * 2.5 / 3] * (1 + k) + [1.0])  # fmt: skip
    # the start now comes from the cache: only the learned matching is heard
    seen.clear()
    align(zoo(0), zoo(1), "learned", "perm", options={"steps": 2, "eval_every": 2},
          context=RunContext(
              progress=lambda stage, done, total: seen.append((stage, done / total))))
    assert [s for s, _ in seen if "scoring" not in s] == [
        "load the train split", "learned matching: preparing the pair",
        *(f"learned matching step {i}/2" for i in (1, 2))]  # fmt: skip
    # the barrier maps the matching into the first half of its progress
    seen.clear()
    request = BarrierRequest(zoo(0), zoo(2), "learned", "perm", points=3,
                             options={"steps": 2, "eval_every": 2})  # fmt: skip
    measure_barrier(request, progress=lambda stage, done, total: seen.append((stage, done / total)))
    stages = [s for s, _ in seen]
    assert "learned matching step 2/2" in stages and stages[-1] == "done"
    assert [f for _, f in seen] == sorted(f for _, f in seen)


def test_weight_and_activation_matching_report_as_they_go() -> None:
    seen = []
    r = align(zoo(0), zoo(1), "weight", "orth",
              context=RunContext(
                  progress=lambda stage, done, total: seen.append((stage, done / total))))
    rounds = r.info["rounds"]
    # every variable's visit of every round, in order, within the rounds' share of at most 50
    n_vars = len(r.info["kinds"])
    assert len(seen) == rounds * n_vars
    assert [f for _, f in seen] == sorted(f for _, f in seen)
    assert seen[0][1] == 0 and seen[-1][1] == pytest.approx((rounds - 1 / n_vars) / 50)
    assert seen[-1][0] == f"weight matching round {rounds} (stops when settled, at most 50)"
    seen.clear()
    align(zoo(0), zoo(1), "activation", "perm",
          context=RunContext(
              progress=lambda stage, done, total: seen.append((stage, done / total))))
    stages = [s for s, _ in seen]
    assert stages[:4] == ["load the train split", "activation matching: A's activations",
                          "activation matching: B's activations",
                          "activation matching: the stream"]  # fmt: skip
    assert "activation matching: layer 0" in stages
    assert [f for _, f in seen] == sorted(f for _, f in seen)


# ---------------------------------------------------------------- the app says it too


@pytest.fixture
def _fresh_memory():
    """st.cache_data keys results by model and seeds, not weights: start and end empty."""
    import streamlit as st

    st.cache_data.clear()
    yield
    st.cache_data.clear()


def _page(page: str):
    from streamlit.testing.v1 import AppTest

    main_py = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    at = AppTest.from_file(main_py, default_timeout=120)
    at.switch_page(f"views/{page}.py")
    return at.run()


def test_interpolation_page_shows_a_warning_box(monkeypatch, _fresh_memory) -> None:
    with_members(monkeypatch, {1: scaled(zoo(1), 1e3, only="ln")})
    at = _page("interpolation")
    assert not at.exception and not at.error
    # the function-check boxes (the page may also note a method above naive)
    boxes = [w.value for w in at.warning if "function check" in w.value]
    assert boxes and all("mlp-digits seed 1" in w and "tolerance" in w for w in boxes)


def test_triangle_page_shows_nan_checks_and_nan_losses(monkeypatch, _fresh_memory) -> None:
    with_members(monkeypatch, {2: overflowing_gain(zoo(2))})
    at = _page("triangle")
    assert not at.exception
    # weight/orth folds the gain: finite losses, NaN check of C; perm keeps the NaN: refused
    assert any("Triangle weight/orth" in w.value and "NaN" in w.value for w in at.warning)
    assert any("weight/perm" in e.value and "nan" in e.value for e in at.error)
