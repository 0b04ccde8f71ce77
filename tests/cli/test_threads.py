"""Threads chosen, not inherited: the rule, its calibration store, --threads and threads=."""

import json
import subprocess
import sys
import time

import pytest
import torch

from landscape import threads as T
from landscape.cli import main
from landscape.errors import LandscapeError


@pytest.mark.parametrize("bad", ["0", "-2", "x", "1.5", "", "two"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(LandscapeError, match="threads"):
        T.parse_threads(bad)


def test_counts_and_auto_parse():
    assert T.parse_threads("3") == 3 and T.parse_threads(2) == 2
    assert T.parse_threads("auto") == "auto" and T.parse_threads(None) is None


def test_using_sets_and_restores():
    before = torch.get_num_threads()
    with T.using(before + 1) as n:
        assert n == torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before


def test_the_rule_takes_the_smaller_of_ceiling_and_free_cores(monkeypatch):
    monkeypatch.setattr(T, "cores", lambda: 8)
    monkeypatch.setattr(T, "ceiling", lambda width: 4)
    for free, want in [(8, 4), (3, 3), (1, 1)]:
        monkeypatch.setattr(T, "free_cores", lambda sample_s=0.1, f=free: f)
        assert T.choose_threads(256) == want
    monkeypatch.setattr(T, "cores", lambda: 1)
    assert T.choose_threads(256) == 1


def test_calibration_is_kept_only_when_measured_idle(monkeypatch, tmp_path):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    monkeypatch.setattr(T, "cores", lambda: 4)
    calls = []
    monkeypatch.setattr(T, "calibrate", lambda width: calls.append(width) or 3)
    monkeypatch.setattr(T, "free_cores", lambda sample_s=0.1: 2)  # loaded: measured, not kept
    assert T.ceiling(100) == 3 and not (tmp_path / "threads.json").exists()
    monkeypatch.setattr(T, "free_cores", lambda sample_s=0.1: 4)  # idle: kept
    assert T.ceiling(100) == 3
    assert T.ceiling(120) == 3  # same power-of-two bucket (128): read back, not measured
    assert calls == [128, 128]
    stored = json.loads((tmp_path / "threads.json").read_text())
    assert list(stored.values()) == [3] and list(stored)[0].endswith("|4|128")


def test_a_damaged_calibration_store_is_measured_again(monkeypatch, tmp_path):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    monkeypatch.setattr(T, "cores", lambda: 4)
    monkeypatch.setattr(T, "calibrate", lambda width: 2)
    monkeypatch.setattr(T, "free_cores", lambda sample_s=0.1: 4)
    (tmp_path / "threads.json").write_text("[1, 2]")
    assert T.ceiling(64) == 2
    assert isinstance(json.loads((tmp_path / "threads.json").read_text()), dict)


def test_calibration_picks_the_fewest_threads_near_the_fastest(monkeypatch):
    monkeypatch.setattr(T, "cores", lambda: 4)
    speeds = {1: 1.0, 2: 0.52, 3: 0.50, 4: 0.60}  # seconds: 2 is within 10% of 3, the best
    monkeypatch.setattr(T, "_block_seconds", lambda width, n, repeats=5: speeds[n])
    assert T.calibrate(64) == 2


def test_busy_cores_are_not_counted_free():
    n = T.cores()
    if n < 2:
        pytest.skip("needs two cores to tell busy from free")
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        assert T.free_cores(0.3) == 1
    finally:
        for p in spin:
            p.kill()
            p.wait()


def test_entry_points_take_threads(monkeypatch):
    seen = []

    @T.threaded
    def work(x, *, y=1):
        seen.append(torch.get_num_threads())
        return x + y

    before = torch.get_num_threads()
    assert work(1, y=2, threads=before + 1) == 3 and seen == [before + 1]
    assert work(1) == 2 and seen[-1] == before and torch.get_num_threads() == before
    monkeypatch.setattr(T, "choose_threads", lambda width=256: 5)
    work(0, threads="auto")
    assert seen[-1] == 5
    from landscape import experiments

    # threads are set at the edges: the public convenience takes them, the pipeline does not
    signature = __import__("inspect").signature
    assert "threads" in signature(experiments.barrier).parameters
    assert "threads" not in signature(experiments.measure_barrier).parameters


def test_cli_threads_option(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    assert main(["symmetries", "mlp-digits", "--threads", "0"]) == 2
    assert "threads" in capsys.readouterr().err
    seen = []
    import landscape.cli as cli

    real = cli.COMMANDS["zoo"]
    monkeypatch.setitem(cli.COMMANDS, "zoo",
                        lambda a: seen.append(torch.get_num_threads()) or real(a))  # fmt: skip
    before = torch.get_num_threads()
    assert main(["zoo", "--json", "--threads", str(before + 1)]) == 0
    assert seen == [before + 1] and torch.get_num_threads() == before
    # main() imports it when a command runs (the parser is built without torch)
    monkeypatch.setattr(T, "resolve_threads", lambda spec, width: 7 if spec == "auto" else spec)
    monkeypatch.setenv("LANDSCAPE_THREADS", "auto")
    assert main(["zoo", "--json"]) == 0 and seen[-1] == 7
