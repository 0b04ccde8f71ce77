"""The prepared device check runs anywhere: its CPU smoke mode, in a child process, as CI would.

``bench/gpu.py`` is run on a lent GPU by whoever has one; this keeps it from rotting where
there is none. Nothing about time is asserted: only that every workload ran and gave a number.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_device_check_runs_its_cpu_smoke_mode(tmp_path) -> None:
    out = tmp_path / "gpu_bench.txt"
    env = {**os.environ, "LANDSCAPE_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, str(ROOT / "bench" / "gpu.py"), "--smoke", "--out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(out.with_suffix(".json").read_text())}
    assert set(results) == {"curve", "weight", "learned", "triangle", "train3", "growth",
                            "surface", "bezier"}
    for name, r in results.items():
        assert not r["problem"], f"{name}: {r['problem']}"
        assert r["seconds"] is not None and r["seconds"] > 0, name
    for name in ("curve", "weight", "learned", "triangle", "train3", "surface", "bezier"):
        assert results[name]["value"] is not None, name
        # the shipped CPU references of the smoke run: the same code gives the same numbers
        assert results[name]["agrees"] is not False, (name, results[name])
    assert "workload" in out.read_text()


@pytest.mark.slow
def test_the_curvature_part_runs_its_cpu_smoke_mode(tmp_path) -> None:
    out = tmp_path / "gpu_bench.txt"
    env = {**os.environ, "LANDSCAPE_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, str(ROOT / "bench" / "gpu.py"), "--smoke", "--parts", "curvature",
           "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(out.with_suffix(".json").read_text())}
    assert set(results) == {"curvature", "hessian-surface"}
    for name, r in results.items():
        assert not r["problem"], f"{name}: {r['problem']}"
        assert r["value"] is not None and r["value"] > 0, name


@pytest.mark.slow
def test_the_moe_part_runs_its_cpu_smoke_mode(tmp_path) -> None:
    out = tmp_path / "gpu_bench.txt"
    env = {**os.environ, "LANDSCAPE_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, str(ROOT / "bench" / "gpu.py"), "--smoke", "--parts", "moe",
           "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(out.with_suffix(".json").read_text())}
    assert set(results) == {"moe-learned", "trajectories"}
    for name, r in results.items():
        assert not r["problem"], f"{name}: {r['problem']}"
        assert r["value"] is not None and r["value"] >= 0, name
    # a path's share outside its own plane: between 0 and 1
    assert 0 <= results["trajectories"]["value"] <= 1
    assert len(results["trajectories"]["facts"]["projection_error"]) == 2
